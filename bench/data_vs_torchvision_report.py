#!/usr/bin/python3
"""Summarizes bench/data_vs_torchvision.sh's runs: img/s (median and best of the repeats) of torchvision and dlperf
per worker count, the ratios, dlperf's speed-up from the first to each other worker count, CPU ms per image, and the
issue's targets (>= 2.5x torchvision at each worker count, >= 1.8x from 1 to 2 workers)."""
import json
import statistics
import sys


def main():
    tmp, workers, repeat = sys.argv[1], [int(w) for w in sys.argv[2].split()], int(sys.argv[3])
    rows = {}
    for w in workers:
        tv = [json.load(open(f"{tmp}/tv.{w}.{r}.json")) for r in range(1, repeat + 1)]
        dl = [json.load(open(f"{tmp}/dl.{w}.{r}.json"))["runs"][0] for r in range(1, repeat + 1)]
        rows[w] = {
            "tv": [x["img_per_s"] for x in tv], "dl": [x["img_per_s"] for x in dl],
            "tv_cpu": statistics.median(x["cpu_ms_per_image"] for x in tv),
            "dl_cpu": statistics.median(1e3 * x["cpu_seconds"] / x["images"] for x in dl),
        }
    print(f"\n{'workers':>7} {'torchvision img/s':>22} {'dlperf img/s':>22} {'ratio':>14}   {'CPU ms/img tv / dlperf':>24}")
    print(f"{'':>7} {'median':>10} {'best':>11} {'median':>10} {'best':>11} {'median':>6} {'best':>7}")
    ok = True
    for w in workers:
        r = rows[w]
        tm, tb, dm, db = statistics.median(r["tv"]), max(r["tv"]), statistics.median(r["dl"]), max(r["dl"])
        r["ratio"] = dm / tm
        print(f"{w:>7} {tm:>10.1f} {tb:>11.1f} {dm:>10.1f} {db:>11.1f} {dm / tm:>5.2f}x {db / tb:>6.2f}x   "
              f"{r['tv_cpu']:>8.2f} / {r['dl_cpu']:.2f} = {r['tv_cpu'] / r['dl_cpu']:.2f}x")
        met = dm / tm >= 2.5
        ok &= met
        print(f"{'':>7} target dlperf >= 2.5x torchvision: {'met' if met else 'NOT met'}"
              f"  (runs: torchvision {' '.join(f'{x:.0f}' for x in r['tv'])}; dlperf {' '.join(f'{x:.0f}' for x in r['dl'])})")
    w0 = workers[0]
    for w in workers[1:]:
        su = statistics.median(rows[w]["dl"]) / statistics.median(rows[w0]["dl"])
        sb = max(rows[w]["dl"]) / max(rows[w0]["dl"])
        tsu = statistics.median(rows[w]["tv"]) / statistics.median(rows[w0]["tv"])
        met = su >= 1.8 if (w0, w) == (1, 2) else True
        ok &= met
        print(f"speed-up {w0} -> {w} workers: dlperf {su:.2f}x median, {sb:.2f}x best"
              f"{' (target >= 1.8x: ' + ('met' if met else 'NOT met') + ')' if (w0, w) == (1, 2) else ''}; torchvision {tsu:.2f}x")
    print("all targets met" if ok else "some targets NOT met (on a shared machine, rerun when it is quiet)")


if __name__ == "__main__":
    main()
