#!/bin/bash
# `dlperf loadgen`'s MLPerf files and rules against the test-double service: mlperf_log_summary.txt and
# mlperf_log_detail.txt parsed back and checked against each other; a short run never says a bare VALID and
# --mlperf-rules makes it INVALID naming the rule; a user.conf's keys reach the effective settings; AccuracyOnly
# writes mlperf_log_accuracy.json (scored here the way MLPerf's accuracy-imagenet.py does) and its top-1; a
# URL where nothing listens is a connection error. Bounded: ~15 s.
# tags: asan
# timeout: 120
set -u
BIN=$(dirname "$DLPERF")
HELPER="$BIN/tests/test_serve_server_mhd"
[ -x "$HELPER" ] || { echo "skip: $HELPER not built (cmocka missing?)"; exit 77; }
T="$DLPERF_TEST_TMP/loadgen_mlperf.$$"
mkdir -p "$T/imgs/n01" "$T/imgs/n02"
"$PYTHON" - "$T/imgs" <<'PY' || { echo "skip: cannot make JPEGs with PIL"; exit 77; }
import sys, numpy as np
from PIL import Image
d = sys.argv[1]
for i in range(8):
    y, x = np.mgrid[0:96, 0:128]
    a = np.stack([127 + 120 * np.sin(x * (0.02 + 0.013 * i) + c * (1 + i) + y * 0.03 * i) for c in range(3)], -1).astype('uint8')
    Image.fromarray(a).save(f"{d}/n0{1 + i % 2}/img{i}.JPEG", quality=90)
PY
. "$(dirname "$0")/lib/fake_server.sh"
start_fake_server 8 1 64
fail() { echo "FAIL: $*"; exit 1; }
cd "$T" || exit 1

# A parser for both logs, as a user's tool would read them.
cat >"$T/logs.py" <<'PY'
import json, re, sys
def summary(path):
    kv = {}
    for line in open(path):
        m = re.match(r"^(.+?)\s*:\s(.*)$", line.rstrip("\n"))
        if m and m.group(1).strip() not in kv: kv[m.group(1).strip()] = m.group(2).strip()
    return kv
def detail(path):
    d = {}
    for line in open(path):
        assert line.startswith(":::MLLOG "), line
        e = json.loads(line[len(":::MLLOG "):])
        assert set(e) == {"key", "value", "time_ms", "namespace", "event_type", "metadata"}, e
        assert e["namespace"] == "mlperf::logging" and e["event_type"] == "POINT_IN_TIME"
        d[e["key"]] = e["value"]
    return d
PY

# 1. Offline, our short defaults: both files, parsed back and consistent; the result line names the rules.
"$DLPERF" loadgen --scenario Offline --url "$URL" --images "$T/imgs" --qps 100 --min-duration 0 --min-queries 200 \
  --out "$T/off" --json "$T/off.json" >"$T/out.txt" 2>"$T/err.txt" || { rc=$?; cat "$T/out.txt" "$T/err.txt"; fail "Offline exited $rc"; }
"$PYTHON" - "$T/off" "$T/off.json" <<'PY' || fail "Offline logs"
import json, sys
sys.path.insert(0, ".")
from logs import summary, detail
s = summary(sys.argv[1] + "/mlperf_log_summary.txt")
d = detail(sys.argv[1] + "/mlperf_log_detail.txt")
j = json.load(open(sys.argv[2]))["result"]
assert s["Scenario"] == "Offline" and s["Mode"] == "PerformanceOnly", s
assert s["Result is"] != "VALID" and s["Result is"].startswith("VALID for these settings only"), s["Result is"]
assert "min_duration 0 ms < 600000 ms" in s["Result is"] and "min_query_count 200 < 24576 samples" in s["Result is"]
assert d["result_validity"] == "VALID" and d["effective_scenario"] == "Offline"
assert d["effective_min_duration_ms"] == 0 and d["effective_min_query_count"] == 200
assert abs(float(s["Samples per second"]) - d["result_samples_per_second"]) < 0.01
assert abs(d["result_samples_per_second"] - j["metric"]["value"]) < 1e-6
for k in ("Min latency (ns)", "Max latency (ns)", "Mean latency (ns)", "50.00 percentile latency (ns)",
          "99.90 percentile latency (ns)"):
    assert int(s[k]) > 0, k
assert int(s["99.00 percentile latency (ns)"]) == d["result_99.00_percentile_latency_ns"] == round(j["latency_ms"]["p99"] * 1e6)
assert int(s["min_query_count"]) == 200 and int(s["performance_sample_count"]) == 8
assert "min_duration 0 ms < 600000 ms" in d["dlperf_mlperf_rules_broken"]
print("ok: summary and detail agree; Offline", s["Samples per second"], "samples/s;", s["Result is"][:60], "...")
PY
grep -q "^Result is : VALID$" "$T/out.txt" && fail "a short run printed a bare VALID"

# 2. --mlperf-rules with a short cap: INVALID, exit 3, the rule named.
"$DLPERF" loadgen --scenario Server --url "$URL" --images "$T/imgs" --qps 50 --mlperf-rules --max-duration 1 --progress 0.3 \
  --out "$T/rules" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
[ $rc = 3 ] || { cat "$T/err.txt"; fail "--mlperf-rules short run exited $rc, not 3"; }
grep -q "^Result is : INVALID$" "$T/out.txt" || fail "--mlperf-rules: not INVALID"
grep -q "MLPerf rule broken: max_duration 1000 ms < min_duration 600000 ms" "$T/out.txt" || fail "rule not named"
grep -q "MLPerf rule broken: performance_sample_count 8 < 1024" "$T/out.txt" || fail "sample count rule not named"
grep -q '"key": "result_invalid_reason"' "$T/rules/mlperf_log_detail.txt" || fail "no result_invalid_reason"
grep -q "^loadgen: .* queries issued" "$T/err.txt" || fail "no progress line on stderr"
echo "ok: --mlperf-rules: $(grep -c 'MLPerf rule broken' "$T/out.txt") rules named"

# 3. user.conf: LoadGen's keys, wildcards and precedence reach the effective settings; options still win.
cat >"$T/user.conf" <<'CONF'
# a user.conf as for LoadGen
*.Offline.target_qps = 300
resnet50.Offline.min_query_count = 120
*.Offline.min_query_count = 999
*.*.min_duration = 100
resnet50.*.max_query_count = 0
*.Offline.sample_concatenate_permutation = 0
CONF
"$DLPERF" loadgen --scenario Offline --url "$URL" --images "$T/imgs" --user-conf "$T/user.conf" --min-duration 0 \
  --out "$T/conf" >/dev/null 2>"$T/err.txt" || { rc=$?; cat "$T/out.txt" "$T/err.txt"; fail "user.conf run exited $rc"; }
"$PYTHON" - "$T/conf" <<'PY' || fail "user.conf settings"
import sys
sys.path.insert(0, ".")
from logs import detail
d = detail(sys.argv[1] + "/mlperf_log_detail.txt")
assert d["effective_target_qps"] == 300, d["effective_target_qps"]
assert d["effective_min_query_count"] == 120, d["effective_min_query_count"]   # model.scenario beats *.scenario
assert d["effective_min_duration_ms"] == 0, d["effective_min_duration_ms"]  # the option beats the file (100)
print("ok: user.conf target_qps 300, min_query_count 120; --min-duration wins over the file")
PY
grep -q "keys dlperf does not use: \*.Offline.sample_concatenate_permutation" "$T/err.txt" || fail "ignored key not listed"
printf 'resnet50.Offline.target_qps = fast\n' >"$T/bad.conf"
"$DLPERF" loadgen --scenario Offline --url "$URL" --images "$T/imgs" --user-conf "$T/bad.conf" --out "$T/bad" >/dev/null 2>"$T/err.txt"
[ $? = 1 ] && grep -q "line 1.*'fast'" "$T/err.txt" || { cat "$T/err.txt"; fail "a bad user.conf line not reported"; }

# 4. AccuracyOnly on a labelled set: every sample once in mlperf_log_accuracy.json; top-1 as accuracy-imagenet.py.
( cd "$T/imgs" && ls */*.JPEG | sort | awk '{print $1, 0}' ) >"$T/val_map0.txt"
"$DLPERF" loadgen --scenario Offline --mode AccuracyOnly --url "$URL" --images "$T/imgs" --labels "$T/val_map0.txt" \
  --out "$T/acc0" >/dev/null 2>"$T/err.txt" || { rc=$?; cat "$T/out.txt" "$T/err.txt"; fail "AccuracyOnly exited $rc"; }
# Labels: the service's own answer for even lines, a wrong one for odd lines -> 50% top-1 expected.
"$PYTHON" - "$T/acc0/mlperf_log_accuracy.json" "$T/val_map0.txt" "$T/val_map.txt" <<'PY' || fail "accuracy log"
import json, struct, sys
log = json.load(open(sys.argv[1]))
names = [l.split()[0] for l in open(sys.argv[2])]
assert sorted(e["qsl_idx"] for e in log) == list(range(len(names))), log
pred = {e["qsl_idx"]: int(struct.unpack("<f", bytes.fromhex(e["data"]))[0]) for e in log}
with open(sys.argv[3], "w") as f:
    for i, n in enumerate(names): f.write(f"{n} {pred[i] if i % 2 == 0 else pred[i] + 1}\n")
PY
"$DLPERF" loadgen --scenario Offline --mode AccuracyOnly --url "$URL" --images "$T/imgs" --labels "$T/val_map.txt" \
  --out "$T/acc" --json "$T/acc.json" >"$T/out.txt" 2>"$T/err.txt" || { rc=$?; cat "$T/out.txt" "$T/err.txt"; fail "AccuracyOnly exited $rc"; }
grep "accuracy=" "$T/err.txt"
grep -q "^loadgen: accuracy=50.000%, good=4, total=8" "$T/err.txt" || fail "top-1 not 50%"
grep -q "^Mode     : AccuracyOnly" "$T/acc/mlperf_log_summary.txt" || fail "summary mode"
"$PYTHON" - "$T/acc/mlperf_log_accuracy.json" "$T/val_map.txt" "$T/acc.json" <<'PY' || fail "accuracy arithmetic"
import json, numpy as np, sys
# accuracy-imagenet.py's arithmetic (mlcommons/inference vision/classification_and_detection/tools)
imagenet = [(l.split()[0], int(l.split()[1])) for l in open(sys.argv[2])]
seen, good = set(), 0
for j in json.load(open(sys.argv[1])):
    if j["qsl_idx"] in seen: continue
    seen.add(j["qsl_idx"])
    good += imagenet[j["qsl_idx"]][1] == int(np.frombuffer(bytes.fromhex(j["data"]), np.float32)[0])
a = json.load(open(sys.argv[3]))["accuracy"]
assert (a["good"], a["labelled"]) == (good, len(seen)) == (4, 8), (a, good, len(seen))
print("ok: accuracy-imagenet.py arithmetic: accuracy={:.3f}%, good={}, total={}".format(100.0 * good / len(seen), good, len(seen)))
PY

# 5. Nothing listening: a connection error naming the URL, exit 1, no run of failed samples.
"$DLPERF" loadgen --scenario Server --url "http://127.0.0.1:1/v1/classify" --images "$T/imgs" --out "$T/refused" \
  >"$T/out.txt" 2>"$T/err.txt"
rc=$?
cat "$T/err.txt"
[ $rc = 1 ] || fail "a refused connection exited $rc, not 1"
grep -q "cannot connect to 127.0.0.1:1: Connection refused" "$T/err.txt" && grep -q "http://127.0.0.1:1/v1/classify" "$T/err.txt" \
  || fail "the error does not say the connection was refused at the URL"
grep -q "failed" "$T/out.txt" && fail "a refused connection printed a run"

# 6. --out never overwrites.
"$DLPERF" loadgen --scenario Offline --url "$URL" --images "$T/imgs" --out "$T/off" >/dev/null 2>"$T/err.txt"
[ $? = 1 ] && grep -q "already exists" "$T/err.txt" || fail "--out overwrote or did not say why"
echo "PASS"
