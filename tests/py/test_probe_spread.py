#!/usr/bin/python3
# tags: light
"""tools/probe_spread.py on made-up profiles (no probe run): a row whose rate moved with the work speed read around
it is within the limit per unit of that speed (raw spread shown, exit 0); a row that moved by itself is "OVER"
(exit 1) unless a profile named it among the rows it could not stabilise; the contention points are listed with
their spread and do not change the exit status. Pure standard library; well under a second.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("DLPERF_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "probe_spread.py")
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += not cond


def profile(step_s, work, loader_at_share1, loader_work, comp_share, unstable=()):
    return {
        "created": "2026-12-03T00:00:00Z",
        "host": {"canary_gflops": 150.0, "canary_samples": 9},
        "probe": {
            "normalisation": {"reference_gflops": 150.0, "reference_cpu_share": 0.99,
                              "unstable": len(unstable),
                              "rows": [{"row": r, "stable": False} for r in unstable]},
            "devices": {"cpu": [{
                "model": "resnet18", "size": 224, "precision": "fp32", "threads": 2,
                "work_gflops_per_cpu_s": work,
                "points": [{"batch": 16, "fwd_bwd_s": step_s, "update_s": 0.0, "cores_busy": 2.0,
                            "cpu_share": 0.99, "speed_gflops": 150.0}]}]},
            "pipeline": {"loader_scaling": [{
                "workers": 1, "img_per_s": loader_at_share1 * 0.99, "speed_gflops": 80.0, "cpu_ms_per_image": 1.1,
                "cpu_share": 0.99, "img_per_s_at_share1": loader_at_share1, "work_img_per_cpu_s": loader_work}]},
            "contention": [{"model": "resnet18", "size": 224, "batch": 16, "threads": 2, "workers": 1,
                            "compute_share": comp_share, "loader_share": 0.47}],
        },
    }


def spread(a, b):
    with tempfile.TemporaryDirectory() as d:
        pa, pb = os.path.join(d, "a.json"), os.path.join(d, "b.json")
        json.dump(a, open(pa, "w"))
        json.dump(b, open(pb, "w"))
        r = subprocess.run([sys.executable, TOOL, pa, pb], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def line_of(out, start):
    return next((l for l in out.splitlines() if l.startswith(start)), "")


# Both rows 10% slower in B and the work speed read around them 10% lower too: raw 10-11%, per unit of work ~0.
A = profile(1.0, 100.0, 800.0, 1000.0, 0.36)
B = profile(1.0 / 0.9, 90.0, 720.0, 900.0, 0.43)
rc, out = spread(A, B)
check(rc == 0, "rows that moved with the work speed: exit 0 (got %d)" % rc)
row = line_of(out, "compute cpu resnet18 224px fp32 2t b16")
check("11.1%" in row and row.rstrip().endswith("0.0%"), "compute row: raw spread 11.1%, per work speed 0.0%: " + row)
row = line_of(out, "loader 1 thread(s) 224px")
check("OVER" not in row and row.rstrip().endswith("0.0%"), "loader row per work speed 0.0%: " + row)
check("every row within 5% or named" in out, "the verdict says every row is within 5%")
row = line_of(out, "resnet18 224px b16 2t 1 loader thread(s)")
check("19.4%" in row, "the contention point's compute share spread (0.36 vs 0.43) is shown: " + row)

# The loader row moved 12.5% with the same work speed: over the limit and not named -> exit 1.
C = copy.deepcopy(A)
C["probe"]["pipeline"]["loader_scaling"][0]["img_per_s_at_share1"] = 700.0
rc, out = spread(A, C)
check(rc == 1, "a loader row that moved by itself: exit 1 (got %d)" % rc)
check("OVER" in line_of(out, "loader 1 thread(s) 224px"), "the row is marked OVER")
check("OVER and not named: loader 1 thread(s) 224px" in out, "the verdict names the row")

# The same with the second probe naming the row among those it could not stabilise: exit 0, marked named.
C["probe"]["normalisation"] = dict(C["probe"]["normalisation"], unstable=1,
                                   rows=[{"row": "loader 1 thread(s) 224px", "stable": False}])
rc, out = spread(A, C)
check(rc == 0, "the same row named unstable by a probe: exit 0 (got %d)" % rc)
check("(named unstable)" in line_of(out, "loader 1 thread(s) 224px"), "the row is marked named")

# Fewer than two profiles: usage, exit 2.
r = subprocess.run([sys.executable, TOOL], capture_output=True, text=True)
check(r.returncode == 2 and "probe_spread.py A.json B.json" in r.stdout, "one profile or none: usage, exit 2")

print("%d failed" % fails)
sys.exit(1 if fails else 0)
