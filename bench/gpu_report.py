#!/usr/bin/env python3
"""bench/gpu_report.py — the summary of a bench/gpu.sh run: every part's status, dlperf against PyTorch on the same
GPU (img/s and ratios, with issue 6's targets), the pipelined host-to-device copy, `dlperf train` with the real
input pipeline (data-stall fraction), the H200 profile's headline figures, and the check tables.

  python3 bench/gpu_report.py RESULTS_DIR [--json summary.json]
"""
import argparse
import glob
import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def find_numbers(obj, pattern, prefix=""):
    """(dotted key, value) for every number whose key matches pattern, anywhere in obj."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, (int, float)) and not isinstance(v, bool) and re.search(pattern, k, re.I):
                out.append((key, v))
            out += find_numbers(v, pattern, key)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += find_numbers(v, pattern, f"{prefix}[{i}]")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    d = a.dir
    summary = {"schema": "dlperf.gpu_summary/1", "parts": [], "comparison": [], "notes": []}

    parts_path = os.path.join(d, "parts.tsv")
    if os.path.exists(parts_path):
        with open(parts_path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) >= 3:
                    summary["parts"].append({"part": cols[0], "status": cols[1], "seconds": int(cols[2] or 0)})
    dev = load(os.path.join(d, "device.json")) or {}
    summary["device"] = dev.get("device", {})
    summary["versions"] = dev.get("versions", {})

    torch = load(os.path.join(d, "torch.json")) or {}
    truns = {(r["mode"], r["batch"]): r for r in torch.get("runs", [])}
    summary["torch"] = {k: torch.get(k) for k in ("torch", "torchvision", "cudnn", "cuda", "device")}
    rows = [("train", 256, "dlperf-train-b256.json", 1.0), ("infer", 1, "dlperf-infer-b1.json", None),
            ("infer", 256, "dlperf-infer-b256.json", 1.2)]
    for mode, batch, fname, target in rows:
        dj = load(os.path.join(d, fname)) or {}
        t = truns.get((mode, batch), {})
        ours, theirs = dj.get("images_per_s"), t.get("images_per_s")
        ratio = ours / theirs if ours and theirs else None
        summary["comparison"].append({
            "mode": mode, "batch": batch, "precision": "fp16",
            "dlperf_images_per_s": ours, "dlperf_step_ms": dj.get("step_ms"),
            "torch_images_per_s": theirs, "torch_step_ms": t.get("step_ms"),
            "ratio": ratio, "target": target,
            "meets_target": (ratio >= target) if (ratio is not None and target is not None) else None,
        })
    h2d = load(os.path.join(d, "dlperf-train-b256-h2d.json")) or {}
    summary["train_with_h2d"] = {k: h2d.get(k) for k in ("images_per_s", "step_ms", "h2d_copy_ms_per_step",
                                                         "h2d_stall_ms_per_step")}
    train = load(os.path.join(d, "train.json"))
    if train is not None:
        summary["train_pipeline"] = {
            "throughput": find_numbers(train, r"(img|image).*(per_s|/s)|throughput"),
            "stall": find_numbers(train, r"stall|wait"),
        }
    prof = load(os.path.join(d, "h200-profile.json"))
    if prof:
        summary["profile"] = {"h2d": prof.get("h2d"), "fits": prof.get("fits"),
                              "device_profile": prof.get("device_profile")}
    check = os.path.join(d, "check.log")
    if os.path.exists(check):
        with open(check) as f:
            txt = f.read()
        summary["check_failures"] = [l for l in txt.splitlines() if "FAIL" in l]
        summary["check_passed"] = "[  FAILED  ]" not in txt and "[  PASSED  ]" in txt
        summary["check_skipped"] = list(dict.fromkeys(l.split("]", 1)[1].strip() for l in txt.splitlines()
                                                      if l.startswith("[  SKIPPED ]") and "test(s)" not in l))

    # ---- print -------------------------------------------------------------------------------------------------
    name = summary["device"].get("name", torch.get("device", "?"))
    print(f"\n==== dlperf GPU summary: {name} ====")
    print(f"{'part':<10} {'status':<16} {'s':>5}")
    for p in summary["parts"]:
        print(f"{p['part']:<10} {p['status']:<16} {p['seconds']:>5}")
    print(f"\nResNet-50 fp16, same GPU   {'dlperf img/s':>13} {'PyTorch img/s':>14} {'ratio':>7}  target")
    for c in summary["comparison"]:
        fmt = lambda v: f"{v:.0f}" if isinstance(v, (int, float)) else "-"
        r = f"{c['ratio']:.2f}" if c["ratio"] else "-"
        tgt = f">= {c['target']:.1f} {'met' if c['meets_target'] else 'NOT met' if c['meets_target'] is False else ''}" \
            if c["target"] else "(latency: dlperf %s ms, torch %s ms)" % (
                f"{c['dlperf_step_ms']:.2f}" if c["dlperf_step_ms"] else "-",
                f"{c['torch_step_ms']:.2f}" if c["torch_step_ms"] else "-")
        print(f"{c['mode']:<6} batch {c['batch']:<13} {fmt(c['dlperf_images_per_s']):>13} "
              f"{fmt(c['torch_images_per_s']):>14} {r:>7}  {tgt}")
    t = summary["train_with_h2d"]
    if t.get("images_per_s"):
        print(f"train batch 256 with the per-step pinned H2D copy: {t['images_per_s']:.0f} img/s, copy "
              f"{t['h2d_copy_ms_per_step']:.2f} ms/step, compute stalled {t['h2d_stall_ms_per_step']:.2f} ms/step")
    if "train_pipeline" in summary:
        tp = summary["train_pipeline"]
        print("dlperf train, real pipeline: " + ", ".join(f"{k}={v:.4g}" for k, v in tp["throughput"][:4]))
        print("  data wait / stall: " + (", ".join(f"{k}={v:.4g}" for k, v in tp["stall"][:8]) or "(no such field)"))
    if "profile" in summary:
        for h in summary["profile"]["h2d"] or []:
            if h["bytes"] == 64 << 20:
                print(f"H2D 64 MiB {'pinned' if h['pinned'] else 'pageable'}: {h['h2d_gb_per_s']:.1f} GB/s")
        for k, f in (summary["profile"]["fits"] or {}).items():
            print(f"step time fit {k}: {f['fixed_ms']:.2f} ms + {f['ms_per_image']:.4f} ms/image")
        dp = summary["profile"].get("device_profile")
        if dp:
            print(f"device profile (dlperf.profile/1 device, h200-sxm.json): fwd share {dp.get('fwd_fraction', 0):.2f}, "
                  f"{len(dp.get('rates', []))} rate rows")
    if "check_passed" in summary:
        sk = summary["check_skipped"]
        print("checks against the float64 reference: " + ("PASS" if summary["check_passed"] else "FAIL") +
              (f" ({len(sk)} skipped: {', '.join(sk)})" if sk else ""))
        for l in summary["check_failures"][:10]:
            print("  " + l)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
