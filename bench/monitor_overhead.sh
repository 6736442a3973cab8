#!/bin/bash
# The monitor's own CPU cost: `dlperf monitor` around `sleep` for DURATION seconds (default 25) at the default
# interval (500 ms), then at 100 ms for context, then at 500 ms around a process with 64 threads (the process-tree
# walk reads every thread's children file each 2 s), with the CSV and JSON-lines time series being written (as a
# run would). Prints the sampler's CPU time as a percentage of one core (what the monitor reports about itself,
# from its thread's CPU clock) and, as a cross-check, the whole dlperf process's CPU time from wait4's rusage
# (its main thread only waits; the monitored `sleep` adds a millisecond or so). Target: < 1% of one core at 500 ms.
#   bench/monitor_overhead.sh [DURATION_S]          (DLPERF=build/dlperf by default)
set -eu
DUR=${1:-25}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlpbench.XXXXXX")
trap 'rm -rf "$T"' EXIT
[ -x "$D" ] || { echo "no $D: build first (make)" >&2; exit 2; }
echo "dlperf monitor overhead: sleep $DUR s under the monitor; $(nproc) CPUs; $(uname -r)"
"$D" monitor --list | sed 's/^/  /'
printf '\n%-24s %8s %12s %14s %18s   %s\n' "interval, command" samples "monitor CPU" "% of one core" \
  "dlperf+cmd rusage" "per-sample CPU by source (ms)"
for run in "500 sleep" "100 sleep" "500 threads"; do
  set -- $run
  "$PY" - "$D" "$1" "$DUR" "$T" "$2" <<'PYEOF'
import json, os, subprocess, sys
d, iv, dur, t, what = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
out = "%s/%d%s" % (t, iv, what)
cmd = ["sleep", str(dur)]
if what == "threads":  # 64 sleeping threads: a bigger tree walk
    cmd = [sys.executable, "-c", "import threading, time\n"
           "ts = [threading.Thread(target=time.sleep, args=(%f,)) for _ in range(64)]\n"
           "[t.start() for t in ts]; [t.join() for t in ts]" % dur]
args = [d, "monitor", "-q", "--interval", str(iv), "--csv", out + ".csv", "--jsonl", out + ".jsonl", "--json", out + ".json",
        "--"] + cmd
p = subprocess.Popen(args)
_, status, ru = os.wait4(p.pid, 0)
if status != 0:
    sys.exit("dlperf monitor failed: status %d" % status)
mon = json.load(open(out + ".json"))["monitor"]
ov = mon["overhead"]
whole = 100.0 * (ru.ru_utime + ru.ru_stime) / mon["wall_s"]
per = " ".join("%s %.3f" % kv for kv in ov["per_sample_cpu_ms"].items())
label = "%d ms, %s" % (iv, "sleep" if what == "sleep" else "64 threads")
print("%-24s %8d %10.3f s %13.3f%% %17.3f%%   %s" % (label, mon["samples"], ov["cpu_s"], ov["pct_of_one_core"], whole, per))
open("%s/pct%d%s" % (t, iv, what), "w").write("%.3f" % ov["pct_of_one_core"])
PYEOF
done
pct=$(cat "$T/pct500sleep")
echo
if awk -v p="$pct" 'BEGIN { exit !(p < 1.0) }'; then
  echo "target met: the monitor used $pct% of one core at the default 500 ms interval (target < 1%)"
else
  echo "target MISSED: the monitor used $pct% of one core at the default 500 ms interval (target < 1%)"
  exit 1
fi
