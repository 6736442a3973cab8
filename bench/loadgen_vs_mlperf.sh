#!/bin/bash
# dlperf loadgen's arithmetic vs the real MLPerf LoadGen (mlcommons-loadgen from PyPI) on the same samples.
#
#   bench/loadgen_vs_mlperf.sh [VENV]     (default VENV: /tmp/dlperf-mlperf-loadgen-venv; needs network once)
#
# Real LoadGen runs a SingleStream and a Server test against a Python SUT that answers after 1-4.5 ms (and, in
# Server, at 300 QPS), with its trace on; each sample's latency is read from the trace ("complete_ns" of the
# Sample events) and given to dlperf's statistics (build/tests/test_loadgen_stats --summarize P, the same code
# `dlperf loadgen` uses). Every figure of the summary's latency block and SingleStream's early-stopping estimate
# must be equal to the nanosecond; the script prints them side by side and exits 1 on any difference.
# LoadGen's own code and the pip package are not a dlperf dependency: only this script installs them.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-/tmp/dlperf-mlperf-loadgen-venv}
HELPER="$ROOT/build/tests/test_loadgen_stats"
[ -x "$HELPER" ] || { echo "build first: make (needs cmocka for build/tests/test_loadgen_stats)"; exit 2; }
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import mlperf_loadgen" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q mlcommons-loadgen
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat >"$W/sut.py" <<'PY'
import random, sys, threading, time
import mlperf_loadgen as lg
scenario, outdir = sys.argv[1], sys.argv[2]
rnd = random.Random(1)
def answer(qid, d):
    time.sleep(d)
    lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, 0, 0)])
def issue(qs):
    for q in qs:
        d = rnd.choice([0.001, 0.002, 0.003, 0.0045])
        if scenario == "SingleStream": answer(q.id, d)
        else: threading.Thread(target=answer, args=(q.id, d)).start()
sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(64, 64, lambda s: None, lambda s: None)
ts = lg.TestSettings()
ts.mode = lg.TestMode.PerformanceOnly
ts.min_duration_ms = 0
if scenario == "SingleStream":
    ts.scenario = lg.TestScenario.SingleStream
    ts.min_query_count = ts.max_query_count = 400
else:
    ts.scenario = lg.TestScenario.Server
    ts.server_target_qps = 300
    ts.server_target_latency_ns = 15000000
    ts.min_query_count = ts.max_query_count = 1500
ls = lg.LogSettings()
ls.enable_trace = True
ls.log_output.outdir = outdir
lg.StartTestWithLogSettings(sut, qsl, ts, ls)
PY
status=0
for sc in SingleStream Server; do
  mkdir -p "$W/$sc"
  "$VENV/bin/python" "$W/sut.py" $sc "$W/$sc" >/dev/null
  p=0.9; [ $sc = Server ] && p=0.99
  "$VENV/bin/python" - "$W/$sc" "$HELPER" $p $sc <<'PY' || status=1
import json, re, subprocess, sys
d, helper, p, sc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
lat = [m.group(1) for l in open(d + "/mlperf_log_trace.json")
       if '"name":"Sample"' in l and '"ph":"b"' in l for m in [re.search(r'"complete_ns":(\d+)', l)] if m]
ours = json.loads(subprocess.run([helper, "--summarize", p], input="\n".join(lat), capture_output=True,
                                 text=True, check=True).stdout)
summ = open(d + "/mlperf_log_summary.txt").read()
def val(key):
    m = re.search(r"^" + re.escape(key) + r"\s*:\s*(\d+)", summ, re.M)
    return int(m.group(1))
rows = [("Min latency (ns)", "min"), ("Max latency (ns)", "max"), ("Mean latency (ns)", "mean"),
        ("50.00 percentile latency (ns)", "p50"), ("90.00 percentile latency (ns)", "p90"),
        ("95.00 percentile latency (ns)", "p95"), ("97.00 percentile latency (ns)", "p97"),
        ("99.00 percentile latency (ns)", "p99"), ("99.90 percentile latency (ns)", "p99.9")]
pairs = [(k, val(k), ours[o]) for k, o in rows]
if sc == "SingleStream":
    m = re.search(r"Would discard (\d+) highest.*\n.*estimate: (\d+)", summ)
    pairs += [("early stopping: discarded", int(m.group(1)), ours["es_discard"]),
              ("early stopping: p90 estimate (ns)", int(m.group(2)), ours["es_estimate"])]
ver = json.loads([l for l in open(d + "/mlperf_log_detail.txt") if '"loadgen_version"' in l][0][9:])["value"]
print(f"{sc}: {len(lat)} samples (LoadGen {ver})")
print(f"  {'figure':36s} {'LoadGen':>12s} {'dlperf':>12s}")
bad = 0
for k, a, b in pairs:
    print(f"  {k:36s} {a:12d} {b:12d}{'' if a == b else '   DIFFERENT'}")
    bad += a != b
sys.exit(1 if bad else 0)
PY
done
[ $status = 0 ] && echo "all equal" || echo "DIFFERENCES found"
exit $status
