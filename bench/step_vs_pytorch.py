#!/usr/bin/python3
"""ResNet-50 training steps and inference, PyTorch vs `dlperf nn bench --device cpu`, side by side in one run.

For each mode — training (batch 32, fp32 and bf16 autocast), inference throughput (batch 32) and inference
latency (batch 1), fp32 and bf16 — it times PyTorch (Debian's python3-torch: torchvision resnet50, channels_last,
SGD with momentum; eval mode + inference_mode for inference; bf16 through torch.autocast) and dlperf's cpu
backend (oneDNN) on random tensors at the same thread count, alternating the two for --rounds rounds, and prints
img/s (ms for latency), the ratio dlperf/PyTorch, the issue's target, and the fraction of the convolution peak that
dlperf measures. Each round times --steps steps after --warmup; a figure is the best round (other processes only
ever add time, so the best round is the closest to a quiet machine) and the median round is printed beside it.
On a shared machine use several rounds, and re-run on a quiet one for final numbers.

Denormals: dlperf's cpu backend flushes denormals to zero during its steps (FTZ/DAZ, as TensorFlow does by
default); --torch-flush-denormal (default on) does the same for PyTorch (torch.set_flush_denormal) so both run
in the same floating-point mode. --no-torch-flush-denormal shows PyTorch's default.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The targets: dlperf / PyTorch (higher is better) or, for latency, dlperf ms / PyTorch ms (lower).
TARGETS = {
    "train fp32": (">=", 1.3),
    "train bf16": (">=", 3.0),
    "infer bf16": (">=", 2.5),
    "latency bf16": ("<=", 0.5),
}


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dlperf", default=os.environ.get("DLPERF", os.path.join(ROOT, "build", "dlperf")))
    ap.add_argument("--threads", type=int, default=2, help="compute threads for both (default 2)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per measurement (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    ap.add_argument("--latency-steps", type=int, default=10, help="timed batch-1 passes (default 10)")
    ap.add_argument("--rounds", type=int, default=1, help="alternate PyTorch/dlperf this many times (median)")
    ap.add_argument("--modes", default="train-fp32,train-bf16,infer-fp32,infer-bf16,latency-fp32,latency-bf16")
    ap.add_argument("--torch-flush-denormal", dest="flush", action="store_true", default=True)
    ap.add_argument("--no-torch-flush-denormal", dest="flush", action="store_false")
    ap.add_argument("--omp-wait-policy", choices=["passive", "active"],
                    help="set OMP_WAIT_POLICY for both (before torch loads libgomp); default: the environment's. "
                         "passive is far more robust when other processes share the CPUs")
    ap.add_argument("--json", help="write the figures here (refuses an existing file)")
    return ap.parse_args()


# ---- PyTorch ----

class Torch:
    def __init__(self, a):
        import torch
        import torchvision
        self.torch = torch
        torch.set_num_threads(a.threads)
        if a.flush:
            torch.set_flush_denormal(True)
        torch.manual_seed(0)
        self.a = a
        self.model = getattr(torchvision.models, a.model)().to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def _input(self, n):
        t = self.torch
        x = t.randn(n, 3, self.a.size, self.a.size).to(memory_format=t.channels_last)
        y = t.randint(0, 1000, (n,))
        return x, y

    def train(self, bf16):
        t, m = self.torch, self.model
        m.train()
        x, y = self._input(self.a.batch)
        times = []
        for i in range(self.a.warmup + self.a.steps):
            t0 = time.perf_counter()
            with t.autocast(device_type="cpu", dtype=t.bfloat16, enabled=bf16):
                loss = t.nn.functional.cross_entropy(m(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if i >= self.a.warmup:
                times.append(time.perf_counter() - t0)
        return statistics.mean(times)

    def infer(self, bf16, batch, steps):
        t, m = self.torch, self.model
        m.eval()
        x, _ = self._input(batch)
        times = []
        with t.inference_mode(), t.autocast(device_type="cpu", dtype=t.bfloat16, enabled=bf16):
            for i in range(self.a.warmup + steps):
                t0 = time.perf_counter()
                m(x)
                if i >= self.a.warmup:
                    times.append(time.perf_counter() - t0)
        return statistics.mean(times)


# ---- dlperf ----

def dlperf(a, prec, batch, infer, steps, peak, tmp):
    out = os.path.join(tmp, f"nn-bench-{prec}-{batch}-{'infer' if infer else 'train'}-{time.time_ns()}.json")
    cmd = [a.dlperf, "nn", "bench", "--device", "cpu", "--model", a.model, "--batch", str(batch), "--size",
           str(a.size), "--threads", str(a.threads), "--steps", str(steps), "--warmup", str(a.warmup),
           "--precision", prec, "--json", out]
    if infer:
        cmd.append("--infer")
    if peak:
        cmd.append("--peak")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    with open(out) as f:
        return json.load(f)


def main():
    a = parse()
    if a.json and os.path.exists(a.json):
        sys.exit(f"{a.json} exists; refusing to overwrite it")
    if not os.access(a.dlperf, os.X_OK):
        sys.exit(f"{a.dlperf} not found: build it first (make)")
    if a.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = a.omp_wait_policy  # read by libgomp when torch (and dlperf) load it
    try:
        tv = Torch(a)
    except ImportError as e:
        sys.exit(f"PyTorch/torchvision not importable ({e}); install python3-torch python3-torchvision")
    import torch
    load = open("/proc/loadavg").read().split()[0]
    print(f"{a.model}, {a.size}x{a.size}, {a.threads} threads, PyTorch {torch.__version__} "
          f"(oneDNN in torch: {torch.backends.mkldnn.is_available()}, flush denormal: {a.flush}), "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, load {load} at the start, "
          f"{a.rounds} round(s), {a.warmup} warm-up + {a.steps} steps", flush=True)
    rows = []
    peaks = {}
    with tempfile.TemporaryDirectory(prefix="step-vs-pytorch-") as tmp:
        for mode in a.modes.split(","):
            kind, prec = mode.split("-")
            bf16 = prec == "bf16"
            batch = 1 if kind == "latency" else a.batch
            steps = a.latency_steps if kind == "latency" else a.steps
            pt, dl, frac = [], [], None
            for rnd in range(a.rounds):
                if kind == "train":
                    pt.append(tv.train(bf16))
                else:
                    pt.append(tv.infer(bf16, batch, steps))
                want_peak = prec not in peaks and kind == "train"
                res = dlperf(a, prec, batch, kind != "train", steps, want_peak, tmp)
                dl.append(res["step_ms"] / 1e3)
                if want_peak and res.get("peak_gflop_per_s"):
                    peaks[prec] = res["peak_gflop_per_s"]
                if prec in peaks:
                    frac = max(frac or 0.0, res["achieved_gflop_per_s"] / peaks[prec])
            tp, td = min(pt), min(dl)
            mp, md = statistics.median(pt), statistics.median(dl)
            name = f"{kind} {prec}"
            if kind == "latency":
                ratio, ratio_med = td / tp, md / mp
                row = dict(mode=name, batch=1, torch_ms=tp * 1e3, dlperf_ms=td * 1e3, ratio=ratio,
                           ratio_median=ratio_med)
            else:
                ratio, ratio_med = tp / td, mp / md
                row = dict(mode=name, batch=batch, torch_img_per_s=batch / tp, dlperf_img_per_s=batch / td,
                           ratio=ratio, ratio_median=ratio_med)
            row["dlperf_fraction_of_peak"] = frac
            row["torch_rounds_s"] = pt
            row["dlperf_rounds_s"] = dl
            if name in TARGETS:
                op, want = TARGETS[name]
                row["target"] = f"{op} {want}"
                row["meets_target"] = ratio >= want if op == ">=" else ratio <= want
            rows.append(row)
            unit = "ms" if kind == "latency" else "img/s"
            tv_v = row.get("torch_ms", row.get("torch_img_per_s"))
            dl_v = row.get("dlperf_ms", row.get("dlperf_img_per_s"))
            tgt = f"target {row['target']}: {'met' if row['meets_target'] else 'NOT met'}" if "target" in row else ""
            fr = f"{100 * frac:4.0f}% of peak" if frac is not None else ""
            med = f"(median {ratio_med:4.2f}x)" if a.rounds > 1 else ""
            print(f"  {name:<13} batch {row['batch']:>2}  PyTorch {tv_v:8.2f} {unit:<5}  dlperf {dl_v:8.2f} {unit:<5}"
                  f"  ratio {ratio:5.2f}x {med:<15} {fr:<13} {tgt}", flush=True)
    if peaks:
        print("  dlperf convolution peak (ResNet-50 3x3 layer, batch 32): " +
              ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items()))
    if a.json:
        doc = {"schema": "dlperf.bench-step-vs-pytorch/1", "argv": sys.argv, "threads": a.threads, "model": a.model,
               "size": a.size, "torch_version": torch.__version__, "torch_flush_denormal": a.flush,
               "peak_gflop_per_s": peaks, "rows": rows}
        with open(a.json, "x") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
