#!/bin/bash
# `dlperf loadgen --concurrency-range` / `--request-rate-range` against a real `dlperf serve` (resnet-mini 32 px on
# the ref engine): perf_analyzer's CSV columns, one row per level sorted by throughput, the server's queue and
# inference times taken from its answers, stable windows, and the server's own count of answers. Bounded: ~20 s.
# tags: light
# timeout: 120
set -u
D="$DLPERF"
T="$DLPERF_TEST_TMP/loadgen_sweep.$$"
mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }
SERVE_PID=
cleanup() { [ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
M=(--model resnet-mini --size 32 --device ref --threads 1)
$D data gen --out "$T/syn" --classes 2 --per-class 1 --val-per-class 2 --size 40-60 --seed 2 >/dev/null 2>&1 || fail "data gen"
$D nn init --model resnet-mini --classes 2 --size 32 --seed 3 --out "$T/w.safetensors" >/dev/null || fail "nn init"
$D serve "${M[@]}" --weights "$T/w.safetensors" --port 0 --port-file "$T/port" --max-batch 4 --workers 1 \
  --monitor-interval 0 --json "$T/serve.json" >"$T/serve.out" 2>"$T/serve.err" &
SERVE_PID=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/serve.err"; grep -q "libmicrohttpd" "$T/serve.err" && { echo "skip: no libmicrohttpd"; exit 77; }; fail "serve did not start"; }
URL="http://127.0.0.1:$(cat "$T/port")/v1/classify"

# Concurrency 1..3: windows of 300 ms until three agree within 10% (at most 8 windows a level).
$D loadgen --url "$URL" --images "$T/syn/val" --concurrency-range 1:3:1 --measurement-interval 300 --max-trials 8 \
  --csv "$T/conc.csv" --json "$T/conc.json" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
cat "$T/err.txt" "$T/conc.csv"
[ $rc = 0 ] || [ $rc = 3 ] || fail "concurrency sweep exited $rc"
"$PYTHON" - "$T/conc.csv" "$T/conc.json" "$T/out.txt" <<'PY' || fail "concurrency CSV"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
hdr = open(sys.argv[1]).readline().strip()
assert hdr == ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
               "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency"), hdr
assert sorted(int(r["Concurrency"]) for r in rows) == [1, 2, 3], rows
tput = [float(r["Inferences/Second"]) for r in rows]
assert tput == sorted(tput) and tput[0] > 0, tput                       # perf_analyzer sorts by throughput
for r in rows:
    assert int(r["Server Compute Infer"]) > 0, r                         # from dlperf serve's infer_ms
    assert int(r["p50 latency"]) <= int(r["p90 latency"]) <= int(r["p95 latency"]) <= int(r["p99 latency"]), r
    # the parts add up to the mean latency, which lies between the minimum and the p99
    parts = int(r["Network+Server Send/Recv"]) + int(r["Server Queue"]) + int(r["Server Compute Infer"])
    assert 0 < parts <= int(r["p99 latency"]) + 1, r
assert open(sys.argv[3]).read() == open(sys.argv[1]).read()             # the CSV is also stdout
sw = json.load(open(sys.argv[2]))["sweep"]
assert len(sw) == 3 and all(p["windows"] >= 3 and p["failed"] == 0 for p in sw), sw
print("ok: concurrency sweep:", ", ".join(f"{p['concurrency']:.0f} -> {p['infer_per_s']:.1f}/s" for p in sw),
      "; stable:", [p["stable"] for p in sw])
PY

# Request rates 20 and 40 per second (constant arrivals): the measured throughput follows the rate.
$D loadgen --url "$URL" --images "$T/syn/val" --request-rate-range 20:40:20 --measurement-interval 500 --max-trials 5 \
  --csv "$T/rate.csv" >/dev/null 2>"$T/err.txt"
rc=$?
cat "$T/err.txt"
[ $rc = 0 ] || [ $rc = 3 ] || fail "rate sweep exited $rc"
"$PYTHON" - "$T/rate.csv" <<'PY' || fail "rate CSV"
import csv, sys
rows = {float(r["Request Rate"]): float(r["Inferences/Second"]) for r in csv.DictReader(open(sys.argv[1]))}
assert set(rows) == {20.0, 40.0}, rows
for rate, got in rows.items(): assert abs(got / rate - 1) < 0.25, rows
print("ok: request-rate sweep:", rows)
PY

# Option errors.
$D loadgen --url "$URL" --images "$T/syn/val" --concurrency-range 3:1 >/dev/null 2>"$T/err.txt"
[ $? != 0 ] && grep -q "start:end:step" "$T/err.txt" || fail "bad range accepted"
$D loadgen --url "$URL" --images "$T/syn/val" --concurrency-range 1:2 --request-rate-range 1:2 >/dev/null 2>"$T/err.txt"
[ $? != 0 ] && grep -q "not both" "$T/err.txt" || fail "both ranges accepted"

kill -TERM $SERVE_PID; wait $SERVE_PID; src=$?; SERVE_PID=
[ $src = 0 ] || fail "serve exited $src"
"$PYTHON" - "$T/serve.json" "$T/conc.json" <<'PY' || fail "server counts"
import json, sys
sv = json.load(open(sys.argv[1]))
ok = sum(p["count"] for p in json.load(open(sys.argv[2]))["sweep"])
n200 = sv["stats"]["by_status"]["200"]
assert n200 >= ok, (n200, ok)
print("ok: dlperf serve answered", n200, "requests with 200; the concurrency sweep counted", ok, "in its stable windows")
PY
echo PASS
