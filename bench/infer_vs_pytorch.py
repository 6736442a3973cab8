#!/usr/bin/python3
"""PyTorch's side of bench/infer_vs_pytorch.sh, and the report.

    infer_vs_pytorch.py torch --images DIR --threads N --precision fp32|bf16 --out FILE [--model resnet50]
                              [--batch 32] [--warmup 2] [--iters 4] [--min-duration 3]
    infer_vs_pytorch.py report --dir DIR --precisions "fp32 bf16" [--repeat R] [--json FILE]

torch: torchvision's model (random init: timing only) in eval mode, channels_last (model and input), under
torch.inference_mode(); bf16 is torch.autocast("cpu", dtype=torch.bfloat16). The inputs are the same JPEGs dlperf
preprocesses, through Resize(256) + CenterCrop(224) + ToTensor + Normalize, stacked into memory first: only the
forward pass is timed (time.perf_counter around model(x)), after warm-up calls; per batch size, timed calls go on
until at least --iters calls AND --min-duration seconds (dlperf infer's rule, same values). Batch 1: every call's
latency (p50/p90/p99 by MLPerf's rule, mean); batch 32: images/s over the timed calls.
report: reads torch-<prec>-<round>.json and dlperf-<prec>-<round>.json (dlperf infer --json), takes each side's best
round (lowest batch-1 p50 / mean, highest throughput) and the median, and prints the side-by-side table and the
ratios of the best rounds, with the issue's targets checked on bf16.
"""
import argparse
import json
import math
import os
import sys
import time


def percentile(sorted_v, p):
    i = int(math.floor(len(sorted_v) * p))
    return sorted_v[min(i, len(sorted_v) - 1)]


def lat_summary(ts_ms):
    s = sorted(ts_ms)
    return {"count": len(s), "min": s[0], "mean": sum(s) / len(s), "p50": percentile(s, 0.5), "p90": percentile(s, 0.9),
            "p99": percentile(s, 0.99), "max": s[-1]}


def cmd_torch(a):
    import contextlib

    import torch
    import torchvision
    import torchvision.transforms as T
    from PIL import Image
    torch.set_num_threads(a.threads)
    files = []
    for root, _, names in sorted(os.walk(a.images)):
        files += [os.path.join(root, n) for n in sorted(names) if n.lower().endswith((".jpg", ".jpeg"))]
    if not files:
        raise SystemExit(f"no JPEGs under {a.images}")
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    n = max(a.batch, 1)
    x = torch.stack([tf(Image.open(files[i % len(files)]).convert("RGB")) for i in range(n)])
    x = x.contiguous(memory_format=torch.channels_last)
    m = getattr(torchvision.models, a.model)().eval().to(memory_format=torch.channels_last)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" else contextlib.nullcontext
    out = {"model": a.model, "precision": a.precision, "threads": torch.get_num_threads(), "torch": torch.__version__,
           "torchvision": torchvision.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
           "channels_last": True, "mode": "eval + inference_mode" + (" + autocast bf16" if a.precision == "bf16" else "")}
    def timed(xx):
        for _ in range(a.warmup):
            m(xx)
        ts, start = [], time.perf_counter()
        while len(ts) < a.iters or time.perf_counter() - start < a.min_duration:
            t0 = time.perf_counter()
            m(xx)
            ts.append(time.perf_counter() - t0)
        return ts

    with torch.inference_mode(), ctx():
        ts = timed(x[:1].contiguous(memory_format=torch.channels_last))
        out["batch1_latency_ms"] = lat_summary([t * 1e3 for t in ts])
        ts = timed(x[:a.batch])
        out["batch"] = a.batch
        out["batch_images_per_s"] = a.batch * len(ts) / sum(ts)
        out["batch_latency_ms"] = lat_summary([t * 1e3 for t in ts])
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


def dlperf_point(r, batch):
    for p in r["results"]:
        if p["batch"] == batch:
            return p
    raise SystemExit(f"dlperf result has no batch {batch}")


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def cmd_report(a):
    precs = a.precisions.split()
    summary = {}
    for prec in precs:
        ts, ds = [], []
        for r in range(1, a.repeat + 1):
            with open(os.path.join(a.dir, f"torch-{prec}-{r}.json")) as f:
                ts.append(json.load(f))
            with open(os.path.join(a.dir, f"dlperf-{prec}-{r}.json")) as f:
                ds.append(json.load(f))
        batch = ts[0]["batch"]
        t_b1 = [t["batch1_latency_ms"]["p50"] for t in ts]
        t_b1m = [t["batch1_latency_ms"]["mean"] for t in ts]
        t_tp = [t["batch_images_per_s"] for t in ts]
        d_b1 = [dlperf_point(d, 1)["latency_ms"]["p50"] for d in ds]
        d_b1m = [dlperf_point(d, 1)["latency_ms"]["mean"] for d in ds]
        d_tp = [dlperf_point(d, batch)["images_per_s"] for d in ds]
        summary[prec] = {
            "torch": {"b1_p50_ms": min(t_b1), "b1_mean_ms": min(t_b1m), "batch_images_per_s": max(t_tp),
                      "median": {"b1_p50_ms": median(t_b1), "batch_images_per_s": median(t_tp)},
                      "rounds": {"b1_p50_ms": t_b1, "b1_mean_ms": t_b1m, "batch_images_per_s": t_tp}},
            "dlperf": {"b1_p50_ms": min(d_b1), "b1_mean_ms": min(d_b1m), "batch_images_per_s": max(d_tp),
                       "median": {"b1_p50_ms": median(d_b1), "batch_images_per_s": median(d_tp)},
                       "rounds": {"b1_p50_ms": d_b1, "b1_mean_ms": d_b1m, "batch_images_per_s": d_tp}},
            "threads": ts[0]["threads"], "batch": batch, "torch_version": ts[0]["torch"], "rounds": a.repeat,
            "dlperf_plan": ds[0].get("plan", {}),
        }
    b = summary[precs[0]]["batch"]
    print(f"\nResNet-50 inference, preprocessed tensors (inference only), {summary[precs[0]]['threads']} threads "
          f"(dlperf --device cpu vs PyTorch {summary[precs[0]]['torch_version']} eval + channels_last); best of "
          f"{a.repeat} round(s)")
    print(f"{'':8} {'batch 1 p50 ms':>28} {'batch 1 mean ms':>28} {'batch %d images/s' % b:>30}")
    print(f"{'':8} {'dlperf':>8} {'torch':>8} {'ratio':>10} {'dlperf':>8} {'torch':>8} {'ratio':>10} "
          f"{'dlperf':>9} {'torch':>9} {'ratio':>10}")
    for prec in precs:
        s = summary[prec]
        dd, tt = s["dlperf"], s["torch"]
        s["ratio_b1_latency"] = dd["b1_p50_ms"] / tt["b1_p50_ms"]
        s["ratio_b1_latency_mean"] = dd["b1_mean_ms"] / tt["b1_mean_ms"]
        s["ratio_throughput"] = dd["batch_images_per_s"] / tt["batch_images_per_s"]
        print(f"{prec:8} {dd['b1_p50_ms']:8.1f} {tt['b1_p50_ms']:8.1f} {s['ratio_b1_latency']:9.2f}x "
              f"{dd['b1_mean_ms']:8.1f} {tt['b1_mean_ms']:8.1f} {s['ratio_b1_latency_mean']:9.2f}x "
              f"{dd['batch_images_per_s']:9.2f} {tt['batch_images_per_s']:9.2f} {s['ratio_throughput']:9.2f}x")
        if a.repeat > 1:
            dm, tm = dd["median"], tt["median"]
            print(f"{'  median':8} {dm['b1_p50_ms']:8.1f} {tm['b1_p50_ms']:8.1f} {dm['b1_p50_ms'] / tm['b1_p50_ms']:9.2f}x "
                  f"{'':28} {dm['batch_images_per_s']:9.2f} {tm['batch_images_per_s']:9.2f} "
                  f"{dm['batch_images_per_s'] / tm['batch_images_per_s']:9.2f}x")
    verdict = {}
    if "bf16" in summary:
        s = summary["bf16"]
        best_t = max(summary[p]["torch"]["batch_images_per_s"] for p in precs)
        best_lat = min(summary[p]["torch"]["b1_p50_ms"] for p in precs)
        ok_tp = s["ratio_throughput"] >= 2.5
        ok_lat = s["ratio_b1_latency"] <= 0.5
        verdict = {"bf16_throughput_ratio": s["ratio_throughput"], "bf16_throughput_target": 2.5,
                   "bf16_throughput_met": ok_tp, "bf16_b1_latency_ratio": s["ratio_b1_latency"],
                   "bf16_b1_latency_target": 0.5, "bf16_b1_latency_met": ok_lat,
                   "bf16_throughput_vs_best_torch": s["dlperf"]["batch_images_per_s"] / best_t,
                   "bf16_b1_latency_vs_best_torch": s["dlperf"]["b1_p50_ms"] / best_lat}
        print(f"\ntargets (issue 7, bf16 vs PyTorch bf16 autocast): batch-{b} throughput ratio "
              f"{s['ratio_throughput']:.2f} (>= 2.5: {'met' if ok_tp else 'NOT met'}); batch-1 latency ratio "
              f"{s['ratio_b1_latency']:.2f} (<= 0.5: {'met' if ok_lat else 'NOT met'})")
        print(f"against PyTorch's better precision: throughput {verdict['bf16_throughput_vs_best_torch']:.2f}x, "
              f"batch-1 latency {verdict['bf16_b1_latency_vs_best_torch']:.2f}x")
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"schema": "dlperf.bench-infer-vs-pytorch/1", "by_precision": summary, "targets": verdict}, f,
                      indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--images", required=True)
    t.add_argument("--threads", type=int, required=True)
    t.add_argument("--precision", choices=["fp32", "bf16"], required=True)
    t.add_argument("--model", default="resnet50")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--iters", type=int, default=4)
    t.add_argument("--min-duration", type=float, default=3.0)
    t.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--precisions", default="fp32 bf16")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--json")
    a = ap.parse_args()
    return cmd_torch(a) if a.cmd == "torch" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
