#!/bin/bash
# `dlperf loadgen` end to end over HTTP on 127.0.0.1: Server, SingleStream, Offline, the Server search, an
# INVALID run (exit 3), option errors; against the service run with the test-double engine (the helper mode of
# build/tests/test_serve_server_mhd), whose own counts must match what the loadgen saw. Bounded: ~30 s.
# tags: asan light
# timeout: 180
set -u
BIN=$(dirname "$DLPERF")
HELPER="$BIN/tests/test_serve_server_mhd"
[ -x "$HELPER" ] || { echo "skip: $HELPER not built (cmocka missing?)"; exit 77; }
T="$DLPERF_TEST_TMP/loadgen_http.$$"
mkdir -p "$T/imgs/n01" "$T/imgs/n02"
"$PYTHON" - "$T/imgs" <<'PY' || { echo "skip: cannot make JPEGs with PIL"; exit 77; }
import sys, numpy as np
from PIL import Image
d = sys.argv[1]
for i in range(8):
    y, x = np.mgrid[0:240, 0:320]
    a = np.stack([127 + 120 * np.sin(x * (0.02 + 0.01 * i) + c + y * 0.03) for c in range(3)], -1).astype('uint8')
    Image.fromarray(a).save(f"{d}/n0{1 + i % 2}/img{i}.JPEG", quality=90)
PY
. "$(dirname "$0")/lib/fake_server.sh"
start_fake_server 8 2 64
fail() { echo "FAIL: $*"; exit 1; }
cd "$T" || exit 1  # the runs without --out write their logs under ./mlperf_logs/
ok_samples() { "$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1]))['result']; print(r['samples']['ok'])" "$1"; }

# Server at 200 QPS with a loose bound (shared machine): VALID, every sample answered 200.
"$DLPERF" loadgen --scenario Server --url "$URL" --images "$T/imgs" --qps 200 --latency-bound 250 \
  --min-duration 1 --min-queries 500 --json "$T/server.json.out" --summary "$T/summary.txt" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
cat "$T/out.txt" | head -20
[ $rc = 0 ] || { cat "$T/err.txt"; fail "Server run exited $rc"; }
grep -q "Scenario : Server" "$T/out.txt" || fail "no scenario line"
grep -q "Result is : VALID" "$T/summary.txt" || fail "summary file not VALID"
"$PYTHON" - "$T/server.json.out" <<'PY' || fail "bad Server JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "dlperf.loadgen/1", j["schema"]
r = j["result"]
assert r["valid"] is True and r["scenario"] == "Server"
s = r["samples"]
assert s["issued"] >= 500 and s["ok"] == s["issued"] and s["lost"] == 0, s
assert r["sut_stats"]["status"]["200"] == s["issued"], r["sut_stats"]
assert j["images"]["count"] == 8
for k in ("min", "p50", "p90", "p99", "p99.9", "max"): assert r["latency_ms"][k] > 0
assert j["options"]["qps"] == 200 and "host" in j and "versions" in j
PY
N1=$(ok_samples "$T/server.json.out")

# --json never overwrites.
"$DLPERF" loadgen --scenario Server --url "$URL" --images "$T/imgs" --json "$T/server.json.out" >/dev/null 2>"$T/err.txt"
[ $? != 0 ] && grep -q "exists" "$T/err.txt" || fail "--json overwrote or did not say why"

# SingleStream and Offline.
"$DLPERF" loadgen --scenario SingleStream --url "$URL" --images "$T/imgs" --min-duration 0 --min-queries 64 \
  --json "$T/ss.json" >"$T/out.txt" 2>&1 || fail "SingleStream exited $?"
grep -q "90.0th percentile latency (ns) : " "$T/out.txt" || fail "no SingleStream metric"
N2=$(ok_samples "$T/ss.json")
[ "$N2" = 64 ] || fail "SingleStream answered $N2 of 64"
"$DLPERF" loadgen --scenario Offline --url "$URL" --images "$T/imgs/n01/img0.JPEG" --qps 100 --min-duration 0 \
  --min-queries 200 --json "$T/off.json" >"$T/out.txt" 2>&1 || fail "Offline exited $?"
grep -q "Samples per second: " "$T/out.txt" || fail "no Offline metric"
N3=$(ok_samples "$T/off.json")

# The Server search within 12 s: finds a VALID rate.
"$DLPERF" loadgen --scenario Server --url "$URL" --images "$T/imgs" --search --qps 100 --search-budget 12 \
  --latency-bound 250 --min-duration 0.5 --min-queries 500 --search-max-qps 800 --json "$T/search.json" \
  >"$T/out.txt" 2>"$T/err.txt" || { cat "$T/err.txt"; fail "search exited $?"; }
grep "search" "$T/err.txt"
"$PYTHON" - "$T/search.json" <<'PY' || fail "bad search JSON"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["search"]
assert s["found"] and s["best_qps"] >= 100 and len(s["trials"]) >= 2, s
assert j["result"]["valid"]
PY

# An impossible bound: INVALID, exit status 3, the reason printed.
"$DLPERF" loadgen --scenario Server --url "$URL" --images "$T/imgs" --qps 300 --latency-bound 0.001 \
  --min-duration 0 --min-queries 100 --early-stopping 0 >"$T/out.txt" 2>&1
rc=$?
[ $rc = 3 ] || fail "an INVALID run exited $rc, not 3"
grep -q "Result is : INVALID" "$T/out.txt" && grep -q "reduce the target QPS" "$T/out.txt" || fail "no INVALID reason"

# Option errors: exit 2 with a message naming the problem.
"$DLPERF" loadgen --scenario Bogus --url "$URL" --images "$T/imgs" >/dev/null 2>"$T/err.txt"; [ $? = 2 ] || fail "bad scenario"
grep -q "SingleStream|MultiStream|Server|Offline" "$T/err.txt" || fail "bad scenario message"
"$DLPERF" loadgen --url "$URL" >/dev/null 2>"$T/err.txt"; [ $? = 2 ] && grep -q -- "--images" "$T/err.txt" || fail "missing --images"
"$DLPERF" loadgen --url "https://x/" --images "$T/imgs" >/dev/null 2>"$T/err.txt"; [ $? != 0 ] && grep -q "https" "$T/err.txt" || fail "https URL"
"$DLPERF" loadgen --url "$URL" --images "$T/nonexistent" >/dev/null 2>"$T/err.txt"; [ $? != 0 ] && grep -q "nonexistent" "$T/err.txt" || fail "missing images"

# The server's own counts after SIGTERM: every admitted request answered, and at least the 200s the runs
# above counted (the search's trials add more).
kill -TERM "$SPID"; wait "$SPID"; src=$?
[ $src = 0 ] || fail "the server exited $src on SIGTERM"
"$PYTHON" - "$T/server.json" "$N1" "$N2" "$N3" <<'PY' || fail "server counts do not match"
import json, sys
st = json.load(open(sys.argv[1]))
n1, n2, n3 = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert st["admitted"] == st["by_status"]["200"] + st["answer_undeliverable"], st
assert st["answer_undeliverable"] == 0, st
assert st["by_status"]["200"] >= n1 + n2 + n3, (st, n1, n2, n3)
print("server answered", st["requests"], "requests:", st["by_status"])
PY
echo "PASS"
