#!/usr/bin/env python3
"""onednn_versions_report.py --dir DIR --rounds R [--json FILE]: reads bench/onednn_layers.c's JSON lines
(DIR/r<round>-v<2|3>.jsonl) and prints the two oneDNN versions side by side: per primitive the lowest time over the
rounds (interference only slows a run down) and each one's implementation, per kind of work the step's total
(each shape weighted by how often ResNet-50 has it) and the ratio 3.x / 2.x. Exits 1 when the forward outputs of
the two versions disagree beyond rounding (checksums: sums of |y| per layer). From the rows' FLOP counts it also
prints each kind of convolution pass's GFLOP/s as a share of the reference layer's rate (layer2's 3x3 forward: the
shape dlperf's measured peak times), the share a whole training step made of these primitives reaches — the ceiling
of `dlperf nn bench --peak`'s "achieved N% of it" with these kernels — and the least efficient passes."""
import argparse
import json
import os
import sys

KINDS = ["conv fwd", "conv bwd data", "conv bwd weights", "bn fwd", "bn bwd", "add+relu fwd", "relu bwd",
         "weight casts", "weight grad to fp32"]


def load(path):
    head, rows = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            if "onednn" in o:
                head = o
            elif "layer" in o:
                rows.append(o)
    if head is None:
        raise SystemExit(f"onednn_versions_report: {path}: no header line (did the run fail?)")
    return head, rows


def best(dirname, v, rounds):
    """(header, {(layer, op): row with the lowest ms over the rounds}, [layer order])"""
    head, out, order = None, {}, []
    for r in range(1, rounds + 1):
        h, rows = load(os.path.join(dirname, f"r{r}-v{v}.jsonl"))
        head = head or h
        for o in rows:
            k = (o["layer"], o["op"])
            if k not in out:
                order.append(k)
            if k not in out or o["ms"] < out[k]["ms"]:
                out[k] = o
    return head, out, order


def compare(a, b, tol):
    """Layers whose forward checksums differ by more than tol (relative)."""
    bad = []
    for k, ra in a.items():
        if k[1] != "conv fwd" or k not in b:
            continue
        x, y = ra["checksum"], b[k]["checksum"]
        if abs(x - y) > tol * max(abs(x), abs(y), 1e-30):
            bad.append((k[0], x, y))
    return bad


PEAK_REF = ("l2 3x3 128-128", "conv fwd")  # the shape dlperf's measure_peak times (at 224 px, batch 32)


def efficiency(rows, order):
    """Per kind of convolution pass: (GFLOP per step, ms per step, GFLOP/s); the reference rate; the step's rate
    (3 x the forward GFLOP over every primitive's time); the least efficient passes. None without FLOP counts
    (JSON lines from before they were written)."""
    if not all("gflop" in r for r in rows.values()) or PEAK_REF not in rows or rows[PEAK_REF]["ms"] <= 0:
        return None
    ref = rows[PEAK_REF]["gflop"] / rows[PEAK_REF]["ms"] * 1e3
    kinds = {}
    for kd in KINDS[:3]:
        g = sum(r["gflop"] * r["count"] for (l, o), r in rows.items() if o == kd)
        ms = sum(r["ms"] * r["count"] for (l, o), r in rows.items() if o == kd)
        kinds[kd] = (g, ms, g / ms * 1e3 if ms > 0 else 0.0)
    g = sum(v[0] for v in kinds.values())
    ms = sum(v[1] for v in kinds.values())
    kinds["convolutions"] = (g, ms, g / ms * 1e3 if ms > 0 else 0.0)
    step_ms = sum(r["ms"] * r["count"] for r in rows.values())
    step = kinds["conv fwd"][0] * 3 / step_ms * 1e3 if step_ms > 0 else 0.0
    passes = [(r["gflop"] / r["ms"] * 1e3 / ref, k) for k in order for r in [rows[k]] if r["gflop"] > 0 and r["ms"] > 0]
    return {"reference_gflops": ref, "kinds": kinds, "step_gflops": step, "step_share": step / ref,
            "lowest": sorted(passes)[:6]}


def print_efficiency(h2, e2, h3, e3):
    print()
    print(f"efficiency: GFLOP/s, and the share of the reference rate ({PEAK_REF[0]} {PEAK_REF[1].split()[1]}, the shape "
          f"dlperf's measured peak times: {e2['reference_gflops']:.0f} GFLOP/s with {h2['onednn']}, "
          f"{e3['reference_gflops']:.0f} with {h3['onednn']})")
    print(f"{'':34s} {'GFLOP':>7s} {h2['onednn']:>14s} {h3['onednn']:>14s}")
    for kd, (g, _, r2) in e2["kinds"].items():
        r3 = e3["kinds"][kd][2]
        print(f"{kd:34s} {g:7.1f} {r2:8.0f} {100 * r2 / e2['reference_gflops']:4.0f}% "
              f"{r3:8.0f} {100 * r3 / e3['reference_gflops']:4.0f}%")
    print(f"{'step (3x forward, every primitive)':34s} {'':7s} {e2['step_gflops']:8.0f} {100 * e2['step_share']:4.0f}% "
          f"{e3['step_gflops']:8.0f} {100 * e3['step_share']:4.0f}%"
          "   <- the most a training step of these primitives reaches")
    print(f"least efficient passes ({h2['onednn']}): " +
          ", ".join(f"{k[0]} {k[1].replace('conv ', '')} {100 * x:.0f}%" for x, k in e2["lowest"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    h2, r2, order = best(a.dir, 2, a.rounds)
    h3, r3, _ = best(a.dir, 3, a.rounds)
    prec = h2["precision"]
    print(f"ResNet-50 training step as oneDNN primitives: oneDNN {h2['onednn']} vs {h3['onednn']}, {prec}, "
          f"batch {h2['batch']}, {h2['size']}px{', ONEDNN_MAX_CPU_ISA=' + h2['max_isa'] if h2['max_isa'] else ''}"
          f"; best of {a.rounds} round(s), each the median of its repetitions")
    print(f"{'layer':24s} {'n':>2s} {'op':20s} {h2['onednn']:>9s} {h3['onednn']:>9s}  ratio  implementations (2.x | 3.x)")
    for k in order:
        x, y = r2[k], r3.get(k)
        if y is None:
            continue
        ratio = f"{y['ms'] / x['ms']:5.2f}" if x["ms"] > 0 else "    -"
        print(f"{k[0]:24s} {x['count']:2d} {k[1]:20s} {x['ms']:9.3f} {y['ms']:9.3f}  {ratio}  {x['impl']} | {y['impl']}")
    tot2 = {kd: 0.0 for kd in KINDS}
    tot3 = {kd: 0.0 for kd in KINDS}
    for k, x in r2.items():
        if k in r3:
            tot2[k[1]] += x["ms"] * x["count"]
            tot3[k[1]] += r3[k]["ms"] * x["count"]
    print()
    print(f"{'per step (ms)':34s} {h2['onednn']:>9s} {h3['onednn']:>9s}  ratio 3.x/2.x")
    s2 = s3 = 0.0
    for kd in KINDS:
        s2 += tot2[kd]
        s3 += tot3[kd]
        ratio = f"{tot3[kd] / tot2[kd]:5.2f}" if tot2[kd] > 0 else "    -"
        print(f"{kd:34s} {tot2[kd]:9.1f} {tot3[kd]:9.1f}  {ratio}")
    conv2 = sum(tot2[kd] for kd in KINDS[:3])
    conv3 = sum(tot3[kd] for kd in KINDS[:3])
    print(f"{'convolutions':34s} {conv2:9.1f} {conv3:9.1f}  {conv3 / conv2:5.2f}")
    print(f"{'everything else':34s} {s2 - conv2:9.1f} {s3 - conv3:9.1f}  {(s3 - conv3) / max(s2 - conv2, 1e-9):5.2f}")
    print(f"{'step':34s} {s2:9.1f} {s3:9.1f}  {s3 / s2:5.2f}")
    print(f"images/s from these primitives alone: {h2['onednn']} {h2['batch'] * 1e3 / s2:.2f}, "
          f"{h3['onednn']} {h3['batch'] * 1e3 / s3:.2f}")
    e2, e3 = efficiency(r2, order), efficiency(r3, order)
    if e2 and e3:
        print_efficiency(h2, e2, h3, e3)
    tol = 1e-3 if prec == "fp32" else 3e-2
    bad = compare(r2, r3, tol)
    for layer, x, y in bad:
        print(f"MISMATCH {layer}: forward checksum {x:.6g} ({h2['onednn']}) vs {y:.6g} ({h3['onednn']})")
    if not bad:
        print(f"forward outputs agree (checksums within {tol:g} relative on every layer)")
    if a.json:
        out = {"v2": h2, "v3": h3, "rounds": a.rounds, "per_step_ms": {"v2": tot2, "v3": tot3},
               "step_ms": {"v2": s2, "v3": s3}, "ratio": s3 / s2, "mismatches": len(bad),
               "efficiency": {v: None if e is None else
                              {"reference_gflops": e["reference_gflops"], "step_gflops": e["step_gflops"],
                               "step_share": e["step_share"],
                               "kinds": {kd: {"gflop": x[0], "ms": x[1], "gflops": x[2]} for kd, x in e["kinds"].items()}}
                              for v, e in (("v2", e2), ("v3", e3))},
               "rows": [{"layer": k[0], "op": k[1], "count": r2[k]["count"], "ms_v2": r2[k]["ms"],
                         "ms_v3": r3[k]["ms"], "impl_v2": r2[k]["impl"], "impl_v3": r3[k]["impl"],
                         "gflop": r2[k].get("gflop")}
                        for k in order if k in r3]}
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
