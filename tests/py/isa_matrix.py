#!/usr/bin/python3
"""The cpu backend's ISA and algorithm matrix, shared by tests/cli/backend_cpu_isa_matrix.sh and the torchvision tests.

oneDNN picks its kernels from the CPU's instruction set, so one machine reaches only some of them: an AMX Xeon
runs the AMX (brgemm) kernels and, in inference plans, forward_inference convolutions whose Winograd weights need
a reorder with a scratchpad; an AVX-512 machine without AMX runs neither by default. Each configuration below caps
oneDNN's ISA (ONEDNN_MAX_CPU_ISA, read once per process) and forces the convolution algorithm
(DLPERF_CPU_WINOGRAD) and the inference plan's propagation kind (DLPERF_CPU_INFER_PROP), so every machine checks
several kinds of kernels and both algorithms:
  winograd: Winograd wherever oneDNN has it (AVX-512 only) + forward_inference convolutions in inference plans
            (the AMX default; the Winograd weight reorder with a scratchpad);
  direct:   direct convolutions only + forward_training convolutions in inference plans (the default without AMX).
A cap above the machine's best ISA is skipped with a line that says so (oneDNN silently runs the best it has
instead); the uncapped rows run the machine's best and are skipped when a capped row already ran that ISA.

  python3 tests/py/isa_matrix.py [--dlperf PATH]   prints one line per configuration: label, then the
                                                   environment (NAME=VALUE ...), or "skip: why".
"""
import os
import subprocess
import sys

# label, ONEDNN_MAX_CPU_ISA (None: the machine's best), DLPERF_CPU_WINOGRAD, DLPERF_CPU_INFER_PROP
CONFIGS = [
    ("avx2", "AVX2", "1", "inference"),  # no Winograd below AVX-512: one row
    ("avx512_core-winograd", "AVX512_CORE", "1", "inference"),
    ("avx512_core-direct", "AVX512_CORE", "0", "training"),
    ("avx512_core_bf16-winograd", "AVX512_CORE_BF16", "1", "inference"),
    ("avx512_core_bf16-direct", "AVX512_CORE_BF16", "0", "training"),
    ("amx-winograd", "AVX512_CORE_AMX", "1", "inference"),
    ("amx-direct", "AVX512_CORE_AMX", "0", "training"),
    ("best-winograd", None, "1", "inference"),
    ("best-direct", None, "0", "training"),
]


def effective_isa(dlperf, env):
    """The ISA oneDNN runs on under env, from `dlperf version` ("oneDNN ISA  avx2 (capped at AVX2)")."""
    r = subprocess.run([dlperf, "version"], capture_output=True, text=True, env=env)
    for line in r.stdout.splitlines():
        if line.startswith("oneDNN ISA"):
            return line.split()[2]
    return None


def configs(dlperf, base_env=None):
    """[(label, env_overrides or None, note)]: env None means skipped, note says why; else note is the ISA."""
    base = dict(base_env if base_env is not None else os.environ)
    for k in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "DLPERF_CPU_WINOGRAD", "DLPERF_CPU_INFER_PROP"):
        base.pop(k, None)
    best = effective_isa(dlperf, base)
    if best is None:
        return [(label, None, "dlperf was built without oneDNN") for label, *_ in CONFIGS]
    out, ran = [], set()
    for label, cap, wino, prop in CONFIGS:
        over = {"DLPERF_CPU_WINOGRAD": wino, "DLPERF_CPU_INFER_PROP": prop}
        if cap:
            over["ONEDNN_MAX_CPU_ISA"] = cap
            isa = effective_isa(dlperf, {**base, **over})
            if isa != cap.lower():
                out.append((label, None, f"ONEDNN_MAX_CPU_ISA={cap} is above this machine's best ISA ({best})"))
                continue
        else:
            isa = best
            if (isa, wino) in ran:
                out.append((label, None, f"the machine's best ISA ({best}) already ran as a capped row"))
                continue
        ran.add((isa, wino))
        out.append((label, over, isa))
    return out


if __name__ == "__main__":
    dl = os.environ.get("DLPERF", "build/dlperf")
    if len(sys.argv) == 3 and sys.argv[1] == "--dlperf":
        dl = sys.argv[2]
    for label, over, note in configs(dl):
        if over is None:
            print(f"{label}\tskip: {note}")
        else:
            print(f"{label}\t{note}\t" + " ".join(f"{k}={v}" for k, v in over.items()))
