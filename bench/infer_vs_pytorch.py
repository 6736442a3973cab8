#!/usr/bin/python3
"""The peers' side of bench/infer_vs_pytorch.sh (PyTorch, OpenVINO), and the report.

    infer_vs_pytorch.py torch|openvino --images DIR --threads N --precision fp32|bf16 --out FILE [--model resnet50]
                              [--batch 32] [--warmup 2] [--iters 4] [--min-duration 3]
    infer_vs_pytorch.py report --dir DIR --precisions "fp32 bf16" [--peers "torch openvino"] [--repeat R] [--json FILE]

Both peers take the same JPEGs dlperf preprocesses, through Resize(256) + CenterCrop(224) + ToTensor + Normalize,
stacked into memory first: only the forward pass is timed (time.perf_counter around each call), after warm-up
calls; per batch size, timed calls go on until at least --iters calls AND --min-duration seconds (dlperf infer's
rule, same values). Batch 1: every call's latency (p50/p90/p99 by MLPerf's rule, mean); batch 32: images/s over the
timed calls.
torch: torchvision's model (random init: timing only) in eval mode, channels_last (model and input), under
torch.inference_mode(); bf16 is torch.autocast("cpu", dtype=torch.bfloat16).
openvino: the same torchvision model through ov.convert_model, compiled for the CPU once per batch size (static
shapes) with INFERENCE_NUM_THREADS=N, PERFORMANCE_HINT=LATENCY, NUM_STREAMS=1 and INFERENCE_PRECISION_HINT f32 or
bf16; each call a synchronous infer(share_inputs=True) (no copy of the input). The precision it compiled to is
recorded (it need not be the hint's on a CPU without bf16 instructions).
report: reads <side>-<prec>-<round>.json for dlperf (dlperf infer --json) and each peer, takes each side's best
round (lowest batch-1 p50 / mean, highest throughput) and the median, and prints per peer the side-by-side table
and the ratios of the best rounds, with the issues' targets: issue 7 against PyTorch 1.x (bf16: throughput >= 2.5x,
batch-1 latency <= 0.5x), issue 14 against OpenVINO (fp32 and bf16: throughput >= 1.1x, latency <= 0.9x).
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


def load_inputs(a):
    """The --images JPEGs through Resize(256) + CenterCrop(224) + ToTensor + Normalize, stacked: max(batch, 1) x 3 x
    224 x 224 fp32 (NCHW, contiguous). Both peers take this same tensor."""
    import torch
    import torchvision.transforms as T
    from PIL import Image
    files = []
    for root, _, names in sorted(os.walk(a.images)):
        files += [os.path.join(root, n) for n in sorted(names) if n.lower().endswith((".jpg", ".jpeg"))]
    if not files:
        raise SystemExit(f"no JPEGs under {a.images}")
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    n = max(a.batch, 1)
    return torch.stack([tf(Image.open(files[i % len(files)]).convert("RGB")) for i in range(n)])


def timed(call, a):
    """Warm-up calls, then timed calls (time.perf_counter around each) until at least --iters calls AND
    --min-duration seconds: dlperf infer's rule, same values. Returns each timed call's seconds."""
    for _ in range(a.warmup):
        call()
    ts, start = [], time.perf_counter()
    while len(ts) < a.iters or time.perf_counter() - start < a.min_duration:
        t0 = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t0)
    return ts


def record(out, a, ts1, tsb):
    out["batch1_latency_ms"] = lat_summary([t * 1e3 for t in ts1])
    out["batch"] = a.batch
    out["batch_images_per_s"] = a.batch * len(tsb) / sum(tsb)
    out["batch_latency_ms"] = lat_summary([t * 1e3 for t in tsb])
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


def cmd_torch(a):
    import contextlib

    import torch
    import torchvision
    torch.set_num_threads(a.threads)
    x = load_inputs(a).contiguous(memory_format=torch.channels_last)
    m = getattr(torchvision.models, a.model)().eval().to(memory_format=torch.channels_last)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" else contextlib.nullcontext
    out = {"peer": "torch", "model": a.model, "precision": a.precision, "threads": torch.get_num_threads(),
           "torch": torch.__version__, "version": torch.__version__,
           "torchvision": torchvision.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
           "channels_last": True, "mode": "eval + inference_mode" + (" + autocast bf16" if a.precision == "bf16" else "")}
    with torch.inference_mode(), ctx():
        x1 = x[:1].contiguous(memory_format=torch.channels_last)
        ts1 = timed(lambda: m(x1), a)
        xb = x[:a.batch]
        tsb = timed(lambda: m(xb), a)
    record(out, a, ts1, tsb)


def cmd_openvino(a):
    """OpenVINO's CPU plugin on torchvision's model converted by ov.convert_model: one compiled model per batch size
    (static shapes, its best case), PERFORMANCE_HINT=LATENCY with one stream (all INFERENCE_NUM_THREADS threads on
    each synchronous call, like a PyTorch call), INFERENCE_PRECISION_HINT f32 or bf16; each call is a synchronous
    infer() on one infer request with the same preprocessed tensor (NCHW fp32) PyTorch gets."""
    import warnings

    import numpy as np
    import openvino as ov
    import torch
    import torchvision
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit.trace's deprecation, inside convert_model
    torch.set_num_threads(a.threads)
    x = load_inputs(a).numpy()
    m = getattr(torchvision.models, a.model)().eval()
    core = ov.Core()
    cfg = {"INFERENCE_NUM_THREADS": a.threads, "INFERENCE_PRECISION_HINT": "bf16" if a.precision == "bf16" else "f32",
           "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    out = {"peer": "openvino", "model": a.model, "precision": a.precision, "openvino": ov.get_version(),
           "version": ov.__version__ if hasattr(ov, "__version__") else ov.get_version(),
           "cpu": core.get_property("CPU", "FULL_DEVICE_NAME"),
           "cpu_capabilities": list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")), "config": cfg}
    with torch.no_grad():
        om = ov.convert_model(m, example_input=torch.from_numpy(x[:1]))

    def compiled(batch):
        om.reshape([batch, 3, x.shape[2], x.shape[3]])
        cm = core.compile_model(om, "CPU", cfg)
        return cm, cm.create_infer_request()
    cm1, r1 = compiled(1)
    out["threads"] = int(cm1.get_property("INFERENCE_NUM_THREADS"))
    eff = cm1.get_property("INFERENCE_PRECISION_HINT")
    out["effective_precision"] = eff.to_string() if hasattr(eff, "to_string") else str(eff)
    out["streams"] = int(cm1.get_property("NUM_STREAMS"))
    x1 = np.ascontiguousarray(x[:1])
    ts1 = timed(lambda: r1.infer({0: x1}, share_inputs=True), a)
    del cm1, r1
    cmb, rb = compiled(a.batch)
    xb = np.ascontiguousarray(x[:a.batch])
    tsb = timed(lambda: rb.infer({0: xb}, share_inputs=True), a)
    record(out, a, ts1, tsb)


def dlperf_point(r, batch):
    for p in r["results"]:
        if p["batch"] == batch:
            return p
    raise SystemExit(f"dlperf result has no batch {batch}")


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


NAMES = {"torch": "PyTorch", "openvino": "OpenVINO"}


def targets(peer, version):
    """The issue's targets against this peer: (issue, precisions, throughput ratio >=, batch-1 latency ratio <=)."""
    if peer == "openvino":
        return ("issue 14", ("fp32", "bf16"), 1.1, 0.9)
    if peer == "torch" and version.startswith("1."):
        return ("issue 7", ("bf16",), 2.5, 0.5)
    return None  # PyTorch 2.x: issue 14 sets its inference targets against OpenVINO


def cmd_report(a):
    precs = a.precisions.split()
    peers = a.peers.split()
    summary = {}
    for prec in precs:
        sides = {}
        for side in ["dlperf"] + peers:
            rs = []
            for r in range(1, a.repeat + 1):
                with open(os.path.join(a.dir, f"{side}-{prec}-{r}.json")) as f:
                    rs.append(json.load(f))
            sides[side] = rs
        batch = sides[peers[0]][0]["batch"]
        s = {"threads": sides[peers[0]][0]["threads"], "batch": batch, "rounds": a.repeat,
             "dlperf_plan": sides["dlperf"][0].get("plan", {})}
        for side, rs in sides.items():
            if side == "dlperf":
                b1 = [dlperf_point(d, 1)["latency_ms"]["p50"] for d in rs]
                b1m = [dlperf_point(d, 1)["latency_ms"]["mean"] for d in rs]
                tp = [dlperf_point(d, batch)["images_per_s"] for d in rs]
            else:
                b1 = [t["batch1_latency_ms"]["p50"] for t in rs]
                b1m = [t["batch1_latency_ms"]["mean"] for t in rs]
                tp = [t["batch_images_per_s"] for t in rs]
                s[f"{side}_version"] = rs[0].get("version", rs[0].get("torch"))
                if side == "openvino":
                    s["openvino_effective_precision"] = rs[0].get("effective_precision")
                    s["openvino_threads"] = rs[0].get("threads")
            s[side] = {"b1_p50_ms": min(b1), "b1_mean_ms": min(b1m), "batch_images_per_s": max(tp),
                       "median": {"b1_p50_ms": median(b1), "batch_images_per_s": median(tp)},
                       "rounds": {"b1_p50_ms": b1, "b1_mean_ms": b1m, "batch_images_per_s": tp}}
        s["torch_version"] = s.get("torch_version", "")
        summary[prec] = s
    s0 = summary[precs[0]]
    b = s0["batch"]
    verdict = {}
    for peer in peers:
        name, version = NAMES.get(peer, peer), s0[f"{peer}_version"]
        what = "eval + channels_last" if peer == "torch" else \
            "ov.convert_model, static shapes, LATENCY hint, 1 stream; bf16 = INFERENCE_PRECISION_HINT"
        print(f"\nResNet-50 inference, preprocessed tensors (inference only), {s0['threads']} threads "
              f"(dlperf --device cpu vs {name} {version}, {what}); best of {a.repeat} round(s)")
        print(f"{'':8} {'batch 1 p50 ms':>28} {'batch 1 mean ms':>28} {'batch %d images/s' % b:>30}")
        print(f"{'':8} {'dlperf':>8} {peer[:8]:>8} {'ratio':>10} {'dlperf':>8} {peer[:8]:>8} {'ratio':>10} "
              f"{'dlperf':>9} {peer[:9]:>9} {'ratio':>10}")
        for prec in precs:
            s = summary[prec]
            dd, tt = s["dlperf"], s[peer]
            rat = {"b1_latency": dd["b1_p50_ms"] / tt["b1_p50_ms"], "b1_latency_mean": dd["b1_mean_ms"] / tt["b1_mean_ms"],
                   "throughput": dd["batch_images_per_s"] / tt["batch_images_per_s"]}
            s.setdefault("ratios", {})[peer] = rat
            if peer == "torch":  # the keys this report wrote before it had other peers
                s["ratio_b1_latency"], s["ratio_b1_latency_mean"], s["ratio_throughput"] = \
                    rat["b1_latency"], rat["b1_latency_mean"], rat["throughput"]
            print(f"{prec:8} {dd['b1_p50_ms']:8.1f} {tt['b1_p50_ms']:8.1f} {rat['b1_latency']:9.2f}x "
                  f"{dd['b1_mean_ms']:8.1f} {tt['b1_mean_ms']:8.1f} {rat['b1_latency_mean']:9.2f}x "
                  f"{dd['batch_images_per_s']:9.2f} {tt['batch_images_per_s']:9.2f} {rat['throughput']:9.2f}x")
            if a.repeat > 1:
                dm, tm = dd["median"], tt["median"]
                print(f"{'  median':8} {dm['b1_p50_ms']:8.1f} {tm['b1_p50_ms']:8.1f} {dm['b1_p50_ms'] / tm['b1_p50_ms']:9.2f}x "
                      f"{'':28} {dm['batch_images_per_s']:9.2f} {tm['batch_images_per_s']:9.2f} "
                      f"{dm['batch_images_per_s'] / tm['batch_images_per_s']:9.2f}x")
        if peer == "openvino":
            eff = {p: summary[p].get("openvino_effective_precision") for p in precs}
            print(f"OpenVINO's inference precision as compiled: " + ", ".join(f"{p} -> {e}" for p, e in eff.items()))
        tg = targets(peer, version)
        if tg is None:
            print(f"targets: none stated against {name} {version} for inference (issue 14's are against OpenVINO)")
            continue
        issue, tprecs, t_tp, t_lat = tg
        for prec in tprecs:
            if prec not in summary:
                continue
            rat = summary[prec]["ratios"][peer]
            ok_tp, ok_lat = rat["throughput"] >= t_tp, rat["b1_latency"] <= t_lat
            verdict[f"{peer}_{prec}"] = {"issue": issue, "throughput_ratio": rat["throughput"], "throughput_target": t_tp,
                                         "throughput_met": ok_tp, "b1_latency_ratio": rat["b1_latency"],
                                         "b1_latency_target": t_lat, "b1_latency_met": ok_lat}
            print(f"targets ({issue}, {prec} vs {name} {prec}): batch-{b} throughput ratio {rat['throughput']:.2f} "
                  f"(>= {t_tp}: {'met' if ok_tp else 'NOT met'}); batch-1 latency ratio {rat['b1_latency']:.2f} "
                  f"(<= {t_lat}: {'met' if ok_lat else 'NOT met'})")
        if peer == "torch" and "bf16" in summary and version.startswith("1."):
            sb = summary["bf16"]
            best_t = max(summary[p]["torch"]["batch_images_per_s"] for p in precs)
            best_lat = min(summary[p]["torch"]["b1_p50_ms"] for p in precs)
            # the keys of the report before it had other peers
            verdict.update({"bf16_throughput_ratio": sb["ratio_throughput"], "bf16_throughput_target": 2.5,
                            "bf16_throughput_met": sb["ratio_throughput"] >= 2.5,
                            "bf16_b1_latency_ratio": sb["ratio_b1_latency"], "bf16_b1_latency_target": 0.5,
                            "bf16_b1_latency_met": sb["ratio_b1_latency"] <= 0.5,
                            "bf16_throughput_vs_best_torch": sb["dlperf"]["batch_images_per_s"] / best_t,
                            "bf16_b1_latency_vs_best_torch": sb["dlperf"]["b1_p50_ms"] / best_lat})
            print(f"against PyTorch's better precision: throughput {verdict['bf16_throughput_vs_best_torch']:.2f}x, "
                  f"batch-1 latency {verdict['bf16_b1_latency_vs_best_torch']:.2f}x")
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"schema": "dlperf.bench-infer-vs-pytorch/1", "peers": peers, "by_precision": summary,
                       "targets": verdict}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for peer in ("torch", "openvino"):
        t = sub.add_parser(peer)
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
    r.add_argument("--peers", default="torch", help="the peers' files to read: torch, openvino")
    r.add_argument("--json")
    a = ap.parse_args()
    return {"torch": cmd_torch, "openvino": cmd_openvino, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
