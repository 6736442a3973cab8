#!/usr/bin/env python3
"""ResNet-50 inference layer by layer: dlperf's oneDNN plan vs OpenVINO's CPU plugin, in one run (issue 14: "measured
layer by layer against it").

    bench/infer_layers.py [--dlperf build/dlperf] [--threads N] [--batch 1] [--precision fp32|bf16]
                          [--iters 60] [--rounds 2] [--json FILE]

Run it with the Python of bench/peers-venv.sh (it imports openvino, torch and torchvision):
    $(bench/peers-venv.sh | tail -1)/bin/python bench/infer_layers.py

OpenVINO: torchvision's resnet50 through ov.convert_model, compiled with PERF_COUNT, LATENCY hint, 1 stream,
INFERENCE_NUM_THREADS=N and the precision hint; each layer's time is the mean of its profiling counters over
--iters synchronous calls; layers come in execution order with their output shapes (the runtime model).
dlperf: `dlperf nn bench --device cpu --infer` with DLPERF_CPU_PROFILE=steps (each plan step's time per call, in
plan order, with its output's dimensions). Both sides alternate for --rounds rounds and each layer keeps its lowest
time (interference only slows a run down). Layers are paired in order by output shape (a convolution with its BN,
ReLU and residual add fused on both sides); what only one side has (dlperf's layout conversions, OpenVINO's
reorders) is listed as unpaired. Printed: per layer both times, the ratio and both implementations; totals.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def openvino_layers(threads, batch, precision, iters):
    import numpy as np
    import openvino as ov
    import torch
    import torchvision
    m = torchvision.models.resnet50().eval()
    x = np.random.default_rng(1).random((batch, 3, 224, 224), dtype=np.float32)
    om = ov.convert_model(m, example_input=torch.from_numpy(x))
    core = ov.Core()
    cfg = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
           "INFERENCE_PRECISION_HINT": "f32" if precision == "fp32" else "bf16", "PERF_COUNT": True}
    cm = core.compile_model(om, "CPU", cfg)
    req = cm.create_infer_request()
    for _ in range(5):
        req.infer({0: x})
    order, shape, ltype = {}, {}, {}
    for op in cm.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        name = op.get_friendly_name()
        try:
            order[name] = int(rt["execOrder"].astype(str))
        except (KeyError, ValueError, AttributeError):
            continue
        try:
            ltype[name] = rt["layerType"].astype(str)
        except (KeyError, AttributeError):
            ltype[name] = op.get_type_name()
        try:
            shape[name] = "x".join(str(d) for d in op.get_output_shape(0))
        except Exception:  # noqa: BLE001 - results without a static shape
            shape[name] = "-"
    acc, impl, lat = {}, {}, []
    for _ in range(iters):
        t0 = time.perf_counter()
        req.infer({0: x})
        lat.append(time.perf_counter() - t0)
        for p in req.profiling_info:
            acc[p.node_name] = acc.get(p.node_name, 0.0) + p.real_time.total_seconds() * 1e3
            impl[p.node_name] = p.exec_type
    lat.sort()
    rows = []
    for name, total in acc.items():
        if name not in order or ltype.get(name) in ("Input", "Const", "Output", "Parameter", "Result"):
            continue
        rows.append({"name": name, "order": order[name], "type": ltype.get(name, "?"), "dims": shape.get(name, "-"),
                     "ms": total / iters, "impl": impl.get(name, "?")})
    rows.sort(key=lambda r: r["order"])
    return {"version": ov.get_version(), "p50_ms": 1e3 * lat[len(lat) // 2], "layers": rows}


STEP = re.compile(r"step fwd +(\d+) +([0-9.]+) ms/call +(\S+) +(.*)$")


def dlperf_layers(dlperf, threads, batch, precision, iters):
    env = dict(os.environ, DLPERF_CPU_PROFILE="steps")
    cmd = [dlperf, "nn", "bench", "--device", "cpu", "--infer", "--batch", str(batch), "--threads", str(threads),
           "--precision", precision, "--steps", str(iters), "--warmup", "5"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"infer_layers: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    rows, step_ms = [], None
    for line in (r.stdout + r.stderr).splitlines():
        m = STEP.search(line)
        if m:
            what = m.group(4).strip()
            rows.append({"name": what, "order": int(m.group(1)), "dims": m.group(3), "ms": float(m.group(2)),
                         "type": what.split(" ", 1)[1] if " " in what else what})
        m = re.search(r"([0-9.]+) ms per step", line)
        if m and line.lstrip().startswith("throughput"):
            step_ms = float(m.group(1))
    if not rows:
        raise SystemExit("infer_layers: dlperf printed no plan steps (DLPERF_CPU_PROFILE=steps)")
    return {"step_ms": step_ms, "layers": rows}


def keep_lowest(best, new):
    """Per layer (by position), the lowest time of the rounds."""
    if best is None:
        return new
    for a, b in zip(best["layers"], new["layers"]):
        a["ms"] = min(a["ms"], b["ms"])
    for k in ("p50_ms", "step_ms"):
        if k in best and best[k] is not None and new.get(k) is not None:
            best[k] = min(best[k], new[k])
    return best


def pair(dl, ov):
    """Pairs dlperf's steps with OpenVINO's layers in order by output dims; returns (pairs, dl only, ov only)."""
    pairs, dl_only, ov_only = [], [], []
    j = 0
    ovl = [r for r in ov if r["dims"] != "-"]
    for d in dl:
        k = j
        while k < len(ovl) and ovl[k]["dims"] != d["dims"]:
            k += 1
        if d["dims"] == "-" or k == len(ovl) or "convert" in d["type"]:
            dl_only.append(d)
            continue
        ov_only.extend(ovl[j:k])
        pairs.append((d, ovl[k]))
        j = k + 1
    ov_only.extend(ovl[j:])
    ov_only.extend(r for r in ov if r["dims"] == "-")
    return pairs, dl_only, ov_only


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlperf", default=os.environ.get("DLPERF", os.path.join(ROOT, "build/dlperf")))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--openvino-only", help=argparse.SUPPRESS)  # internal: one OpenVINO run, JSON to this file
    a = ap.parse_args()
    if a.openvino_only:
        with open(a.openvino_only, "w") as f:
            json.dump(openvino_layers(a.threads, a.batch, a.precision, a.iters), f)
        return 0
    ov = dl = None
    for r in range(a.rounds):
        print(f"-- round {r + 1}: OpenVINO, dlperf", file=sys.stderr)
        # OpenVINO in a process of its own: its worker threads (and torch's) would otherwise still be there,
        # spinning, while dlperf runs
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ov.json")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--openvino-only", out, "--threads",
                                str(a.threads), "--batch", str(a.batch), "--precision", a.precision, "--iters",
                                str(a.iters)], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"infer_layers: the OpenVINO run failed:\n{r.stderr[-2000:]}")
            ov = keep_lowest(ov, json.load(open(out)))
        dl = keep_lowest(dl, dlperf_layers(a.dlperf, a.threads, a.batch, a.precision, a.iters))
    pairs, dl_only, ov_only = pair(dl["layers"], ov["layers"])
    print(f"ResNet-50 inference layer by layer, batch {a.batch}, {a.precision}, {a.threads} threads: dlperf (oneDNN "
          f"plan) vs OpenVINO {ov['version']}; ms per call, lowest of {a.rounds} round(s) of {a.iters} calls")
    print(f"{'#':>3s} {'dlperf step':40s} {'output':16s} {'dlperf':>7s} {'OpenVINO':>8s} {'ratio':>6s}  OpenVINO layer")
    sd = so = 0.0
    for i, (d, o) in enumerate(pairs):
        sd += d["ms"]
        so += o["ms"]
        ratio = d["ms"] / o["ms"] if o["ms"] > 0 else float("nan")
        print(f"{i:3d} {d['name'][:40]:40s} {d['dims']:16s} {d['ms']:7.3f} {o['ms']:8.3f} {ratio:6.2f}  "
              f"{o['type']} {o['impl']}")
    dl_rest = sum(d["ms"] for d in dl_only)
    ov_rest = sum(o["ms"] for o in ov_only)
    print(f"paired layers ({len(pairs)}): dlperf {sd:.2f} ms, OpenVINO {so:.2f} ms, ratio {sd / so:.2f}")
    print(f"unpaired: dlperf {dl_rest:.2f} ms in {len(dl_only)} step(s) "
          f"({', '.join(sorted({d['type'] for d in dl_only})) or 'none'}); OpenVINO {ov_rest:.2f} ms in "
          f"{sum(1 for o in ov_only if o['ms'] > 0)} layer(s) ({', '.join(sorted({o['type'] for o in ov_only if o['ms'] > 0})) or 'none'})")
    print(f"sum of layers: dlperf {sd + dl_rest:.2f} ms, OpenVINO {so + ov_rest:.2f} ms, ratio "
          f"{(sd + dl_rest) / (so + ov_rest):.2f}")
    print(f"whole pass as each times it: dlperf {dl['step_ms']:.2f} ms per step (mean), OpenVINO {ov['p50_ms']:.2f} ms "
          f"(p50 of the profiled calls), ratio {dl['step_ms'] / ov['p50_ms']:.2f}")
    print(f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if a.json:
        out = {"batch": a.batch, "precision": a.precision, "threads": a.threads, "openvino": ov["version"],
               "pairs": [{"dlperf": d, "openvino": o} for d, o in pairs], "dlperf_only": dl_only,
               "openvino_only": ov_only, "dlperf_step_ms": dl["step_ms"], "openvino_p50_ms": ov["p50_ms"]}
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
