#!/usr/bin/env python3
"""Two or more profiles of one machine (dlperf probe --out ...), row by row: how far apart their compute and loader
rows are as measured (raw), after normalisation to the cores' speed each row was measured at (the canary), and
after normalisation by the CPU share the row's own threads got (hw/cpushare: their CPU time over CPU time plus
run-queue wait; docs/model.md, "The probe on a noisy machine").

  python3 tools/probe_spread.py A.json B.json [--limit 0.05]

"cpu spr" compares the process's own CPU seconds per image in the same rows (the loader's CPU per image, a
compute step's wall time x the cores it kept busy): what time-sharing with other processes does not move.

Compute rows: the throughput at the row's largest batch (the step measured there, forward + backward + update),
normalised as img/s per GFLOP/s of the canary read around it. Loader rows: the loader's steady img/s at each thread
count, per GFLOP/s of the canary read around it (one thread against the one-thread canary). A row is shown at the
first profile's reference speed. "share": img/s over the row's CPU share (probes from before the share was measured
show "-"), shown at the first profile's reference share. Exit status 1 when a row's spread under the profiles' own
normalisation ("probe spr": a loader row by its CPU seconds per image where the probe normalised it so, a multi-thread
compute row by its slowest thread's share (to the power of the row's measured share exponent) where every profile
did so, else the share where every profile measured it,
else the canary; and each per unit of the work speed read around it — a convolution of the row's precision, the
loader's decode, per CPU-second — where every profile read it) is over --limit and no profile named it among the rows
it could not stabilise. Inference rows: img/s at the largest batch.
"""
import json
import sys


def rows_of(path):
    p = json.load(open(path))
    det = p.get("probe", {})
    norm = det.get("normalisation", {})
    ref = {"all": norm.get("reference_gflops") or p["host"].get("canary_gflops", 0),
           "one": norm.get("reference_one_thread_gflops") or 0,
           "share_all": norm.get("reference_cpu_share") or 0,
           "share_one": norm.get("reference_one_thread_cpu_share") or 0}
    out = {}
    for dev, rows in (det.get("devices") or {}).items():
        for r in rows:
            pts = r.get("points") or []
            if not pts:
                continue
            pt = max(pts, key=lambda x: x["batch"])
            rate = pt["batch"] / (pt["fwd_bwd_s"] + pt["update_s"])
            key = "compute %s %s %dpx %s %dt b%d" % (dev, r["model"], r["size"], r["precision"], r["threads"], pt["batch"])
            cpu = (pt["fwd_bwd_s"] + pt["update_s"]) * pt.get("cores_busy", 0) / pt["batch"]  # CPU s per image
            slow = pt.get("slowest_thread_share", 0) if r.get("share_basis") == "slowest_thread_share" else 0
            # the row's measured share exponent (probe: its largest batch again beside a spinner; none: linear)
            e = (r.get("share_exponent") or {}).get("exp") or 1
            out[key] = (rate, pt.get("speed_gflops", 0), "one" if r["threads"] == 1 else "all", cpu,
                        pt.get("cpu_share", 0), 0, slow, e, r.get("work_gflops_per_cpu_s", 0))
    for r in det.get("inference") or []:
        pts = r.get("points") or []
        if not pts:
            continue
        pt = max(pts, key=lambda x: x["batch"])
        key = "infer cpu %s %dpx %s %dt b%d" % (r["model"], r["size"], r["precision"], r["threads"], pt["batch"])
        out[key] = (pt["batch"] / pt["call_s"], pt.get("speed_gflops", 0), "one" if r["threads"] == 1 else "all",
                    pt["call_s"] * pt.get("cores_busy", 0) / pt["batch"], pt.get("cpu_share", 0), 0, 0, 1,
                    r.get("work_gflops_per_cpu_s", 0))
    pipe = det.get("pipeline") or {}
    # the loader rows' rates are brought to the work speed the pipeline's CPU costs were measured at (probe_pipeline)
    for s in pipe.get("loader_scaling") or []:
        key = "loader %d thread(s) 224px" % s["workers"]
        out[key] = (s["img_per_s"], s.get("speed_gflops", 0), "one" if s["workers"] == 1 else "all",
                    s.get("cpu_ms_per_image", 0) * 1e-3, s.get("cpu_share", 0), s.get("img_per_s_at_share1", 0), 0, 1,
                    s.get("work_img_per_cpu_s", 0))
    unstable = set(r["row"] for r in norm.get("rows", []) if not r.get("stable", True))
    return p, ref, out, unstable, norm


def main(argv):
    limit = 0.05
    paths = []
    i = 0
    while i < len(argv):
        if argv[i] == "--limit":
            limit = float(argv[i + 1])
            i += 2
            continue
        paths.append(argv[i])
        i += 1
    if len(paths) < 2:
        print(__doc__)
        return 2
    profs = [rows_of(p) for p in paths]
    ref0 = profs[0][1]
    for path, (p, ref, _, uns, norm) in zip(paths, profs):
        h = p["host"]
        print("%s: probed %s, speed median %.1f GFLOP/s (p10 %.1f, p90 %.1f, %d readings), one thread %.1f, steal %.1f%%, "
              "%d row(s) not stabilised" % (path, p.get("created", "?"), h.get("canary_gflops", 0),
                                            h.get("canary_p10_gflops", 0), h.get("canary_p90_gflops", 0),
                                            h.get("canary_samples", 0), h.get("canary1_gflops", 0),
                                            100 * h.get("steal_fraction", 0), norm.get("unstable", 0)))
    keys = [k for k in profs[0][2] if all(k in q[2] for q in profs[1:])]
    n = len(profs)
    print("%-44s %s  %8s  %s  %8s  %s  %9s  %8s  %9s" % (
        "row", "  ".join("%9s" % ("raw %d" % (j + 1)) for j in range(n)), "raw spr",
        "  ".join("%9s" % ("canary %d" % (j + 1)) for j in range(n)), "can. spr",
        "  ".join("%9s" % ("share %d" % (j + 1)) for j in range(n)), "share spr", "cpu spr", "probe spr"))
    worst = {"raw": 0, "canary": 0, "share": 0, "cpu": 0, "used": 0}
    worst_named = 0
    bad = []

    def spread(v):
        return max(v) / min(v) - 1 if all(x == x and x > 0 for x in v) else float("nan")

    for k in keys:
        raws = [q[2][k][0] for q in profs]
        cls = profs[0][2][k][2]
        norms = [q[2][k][0] / q[2][k][1] * (ref0[cls] or 1) if q[2][k][1] > 0 else float("nan") for q in profs]
        sref = ref0["share_" + cls] or 1
        shares = [q[2][k][0] / q[2][k][4] * sref if q[2][k][4] > 0 else float("nan") for q in profs]
        sr, sn, ss = spread(raws), spread(norms), spread(shares)
        sc = spread([q[2][k][3] for q in profs])
        # the profiles' own normalisation: a loader row by its CPU seconds per image where the probe did so
        # (img/s at share 1, "img_per_s_at_share1"), else the share where all measured it, else the canary
        su = spread([q[2][k][5] for q in profs])
        # a multi-thread compute row normalised by its slowest thread's share (every profile did so): img/s over it,
        # to the power of the row's measured share exponent (each profile's own)
        sl = spread([q[2][k][0] / q[2][k][6] ** q[2][k][7] if q[2][k][6] > 0 else float("nan") for q in profs])
        used = su if su == su else sl if sl == sl else ss if ss == ss else sn
        # and where every profile read the row's work speed (the convolution of its precision, the loader's decode,
        # per CPU-second) around it: that value per unit of it — the probes' normalisation since issue 35's sixth pass
        def by_work(q):
            v = q[2][k]
            if not v[8] > 0:
                return float("nan")
            if v[5] > 0:
                return v[5] / v[8]
            if v[6] > 0:
                return v[0] / v[6] ** v[7] / v[8]
            return v[0] / v[4] / v[8] if v[4] > 0 else float("nan")
        sw = spread([by_work(q) for q in profs])
        if sw == sw:
            worst["work"] = max(worst.get("work", 0), sw)
            used = sw
        for name, x in (("raw", sr), ("canary", sn), ("share", ss), ("cpu", sc), ("used", used)):
            if x == x:
                worst[name] = max(worst[name], x)
        named = any(any(u.startswith(k.rsplit(" b", 1)[0] + " ") for u in q[3]) or k in q[3] for q in profs)
        flag = "" if used <= limit else ("  (named unstable)" if named else "  OVER")
        if used > limit and not named:
            bad.append(k)
        if not named and used == used:
            worst_named = max(worst_named, used)
        fmt = lambda v: "  ".join("%9s" % ("-" if x != x else "%.2f" % x) for x in v)
        pct = lambda x: "%7.1f%%" % (100 * x) if x == x else "%8s" % "-"
        print("%-44s %s  %s  %s  %s  %s  %9s  %s  %9s%s" % (k, fmt(raws), pct(sr), fmt(norms), pct(sn), fmt(shares),
                                                       pct(ss), pct(sc), pct(used), flag))
    print("largest spread over %d rows: raw %.1f%%, by the canary %.1f%%, by the CPU share %.1f%%, CPU time per image "
          "%.1f%% (canary: img/s per GFLOP/s of the speed measured around the row, at the first profile's reference "
          "speed; share: img/s over the CPU share the row's threads got, at the first profile's reference share; cpu: the "
          "process's CPU seconds per image)" % (len(keys), 100 * worst["raw"], 100 * worst["canary"], 100 * worst["share"],
                                                100 * worst["cpu"]))
    print("by the work speed read around each row (a convolution of the row's precision, the loader's decode, per "
          "CPU-second), where every profile read it: largest %.1f%%" % (100 * worst.get("work", float("nan"))))
    print("by the profiles' own normalisation (probe spr: a loader row by its CPU seconds per image, a multi-thread "
          "compute row by its slowest thread's share, a one-thread row by its CPU share; each per unit of its work speed "
          "where read): largest %.1f%%; largest of the rows no profile named unstable %.1f%%; %s" % (
              100 * worst["used"], 100 * worst_named,
              "every row within %.0f%% or named" % (100 * limit) if not bad else "OVER and not named: " + ", ".join(bad)))
    contention(paths, profs)
    return 1 if bad else 0


def contention(paths, profs):
    """The contention points (compute and loader run together on the same cores): each side's rate together over
    its rate alone, per profile, and their spread. Shown for reading only (not in the exit status): they are
    wall-clock measurements of two parts time-sharing the cores, which neither the share nor the work speed
    normalises."""
    pts = []
    for p, *_ in profs:
        pts.append({(c["model"], c["size"], c["batch"], c["threads"], c["workers"]): c
                    for c in (p.get("probe", {}).get("contention") or [])})
    keys = [k for k in pts[0] if all(k in q for q in pts[1:])]
    if not keys:
        return
    n = len(pts)
    print("contention (compute and loader together over each alone; for reading, not in the exit status):")
    print("%-44s %s  %8s  %s  %8s" % ("point", "  ".join("%9s" % ("comp %d" % (j + 1)) for j in range(n)), "spread",
                                       "  ".join("%9s" % ("load %d" % (j + 1)) for j in range(n)), "spread"))
    for k in keys:
        c = [q[k].get("compute_share", 0) for q in pts]
        lo = [q[k].get("loader_share", 0) for q in pts]
        sp = lambda v: "%7.1f%%" % (100 * (max(v) / min(v) - 1)) if min(v) > 0 else "%8s" % "-"
        print("%-44s %s  %s  %s  %s" % ("%s %dpx b%d %dt %d loader thread(s)" % k, "  ".join("%9.3f" % x for x in c),
                                         sp(c), "  ".join("%9.3f" % x for x in lo), sp(lo)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
