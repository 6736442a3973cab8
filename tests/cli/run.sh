#!/bin/bash
# `dlperf run` (the main job) end to end on a tiny configuration: every stage runs as its own process and writes
# its result into the run directory; the summary (dlperf.run/1) carries the measured figures, the bottleneck and
# the catalog comparison; --usd-per-hour prices the images; an existing run directory is refused; a stage that
# fails is recorded, the run goes on with the others and exits non-zero.
# tags: asan
# timeout: 900
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/run-sh.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

$D data gen --out "$T/syn" --classes 4 --per-class 8 --val-per-class 4 --size 40-90 --seed 2 >/dev/null 2>&1 || fail "data gen"
A=(--data "$T/syn" --model resnet18 --size 32 --batch 4 --threads 1 --workers 1 --train-seconds 2 --infer-seconds 0.2
   --infer-batch 1,4 --bench-images 16 --compare desktop-4090,dgx-a100 --usd-per-hour 1.5)

$D run --help | grep -q -- "--usd-per-hour" || fail "--help does not list --usd-per-hour"
$D run "${A[@]}" --out "$T/r1" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] || { tail -30 "$T/err"; fail "dlperf run exited $rc"; }
for f in run.json data.json train.json infer.json predict.json train-monitor.csv infer-monitor.csv; do
  [ -s "$T/r1/$f" ] || fail "the run directory lacks $f"
done
for w in "== data preparation" "== training" "== inference" "== summary" "data preparation " "bottleneck " \
         "per million training images" "this machine" "hardware (monitored" "desktop-4090" "dgx-a100" \
         "online phase by precision" "== the online phase in int8"; do
  grep -qF -- "$w" "$T/out" || fail "no '$w' in the output"
done
"$PY" - "$T/r1/run.json" <<'PY' || fail "run.json"
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "dlperf.run/1", r["schema"]
for name in ("data", "train", "infer", "predict"):
    s = r["stages"][name]
    assert s["ran"] and s["exit_status"] == 0, (name, s)
s = r["summary"]
for k in ("prep_img_per_s", "train_img_per_s", "infer_img_per_s", "latency_p50_ms"):
    assert isinstance(s[k], float) and s[k] > 0 and math.isfinite(s[k]), (k, s[k])
assert s["bottleneck"] in ("compute", "input pipeline", "balanced"), s["bottleneck"]
assert s["latency_batch"] == 1 and s["infer_batch"] in (1, 4)
# the price arithmetic: $/h over images per hour
assert abs(s["usd_per_million_train_images"] - 1.5 / (s["train_img_per_s"] * 3600) * 1e6) < 1e-6 * s["usd_per_million_train_images"]
hw = s["hardware"]["training"]
assert 0 < hw["cpu_util_pct"] <= 100 and hw["peak_rss_bytes"] > 1e6 and hw["process_cores"] > 0, hw
assert "inference" in s["hardware"]
assert [c["system"] for c in s["compare"]] == ["desktop-4090", "dgx-a100"], s["compare"]
assert all(c["img_per_s"] > s["train_img_per_s"] for c in s["compare"])
# the online phase per precision (--online-precisions auto on the cpu device): the served one, fp32 and int8 beside
# it, each measured by its own infer stage at the served throughput batch and priced like the rest
oc = r["summary"]["online_cost"]
ps = {e["precision"]: e for e in oc["precisions"]}
assert oc["usd_per_hour"] == 1.5 and oc["precisions"][0]["served"] and oc["precisions"][0]["precision"] == r["infer_precision"], oc
assert "int8" in ps and "fp32" in ps, oc
for p, e in ps.items():
    assert e["img_per_s"] > 0 and e["batch"] == s["infer_batch"], e
    assert abs(e["usd_per_million_images"] - 1.5 / (e["img_per_s"] * 3600) * 1e6) < 1e-6 * e["usd_per_million_images"], e
    if not e["served"]:
        st = r["stages"]["infer-" + p]
        assert st["exit_status"] == 0, st
        res = json.load(open(st["result"]))
        assert res["config"]["precision"] == p and [x["images_per_s"] for x in res["results"]] == [e["img_per_s"]], (p, res["results"])
t = json.load(open(r["stages"]["train"]["result"]))
assert t["schema"] == "dlperf.train/1" and t["model"]["arch"] == "resnet18"
PY
echo "ok: a full run"

# an existing run directory is never reused
out=$($D run "${A[@]}" --out "$T/r1" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -qF "$T/r1 already exists" || fail "an existing --out was not refused: $out"
# bad options
out=$($D run --precision int4 2>&1); [ $? -eq 2 ] && echo "$out" | grep -qF "int4" || fail "bad --precision: $out"
out=$($D run --online-precisions bf16,int4 2>&1); [ $? -eq 2 ] && echo "$out" | grep -qF -- "--online-precisions" || fail "bad --online-precisions: $out"
out=$($D run --infer-batch x 2>&1); [ $? -eq 2 ] && echo "$out" | grep -qF -- "--infer-batch" || fail "bad --infer-batch: $out"
echo "ok: refusals"

# a failing stage (an unknown catalog system): recorded, the others ran, exit 1
$D run "${A[@]}" --compare no-such-system --online-precisions none --out "$T/r2" >"$T/out2" 2>"$T/err2"; rc=$?
[ $rc -eq 1 ] || fail "a failed stage should give exit 1 (got $rc)"
grep -qF "predict stage ended with exit status" "$T/err2" || fail "no message about the failed stage"
"$PY" - "$T/r2/run.json" <<'PY' || fail "run.json of a partial run"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["stages"]["predict"]["exit_status"] != 0
assert r["stages"]["train"]["exit_status"] == 0 and r["summary"]["train_img_per_s"] > 0
PY
echo "ok: a failed stage is recorded and the run goes on"

# SIGTERM (and Ctrl-C: SIGINT) during the training stage: passed on once, training stops cleanly and writes its
# result, the later stages are skipped, run.json is written, the exit status is 128 + the signal
for sig in TERM INT; do
  $D run "${A[@]}" --train-seconds 60 --out "$T/r-$sig" >"$T/out-$sig" 2>"$T/err-$sig" &
  pid=$!
  for i in $(seq 200); do grep -q "^step " "$T/err-$sig" 2>/dev/null && break; sleep 0.1; done
  kill -$sig $pid
  wait $pid; rc=$?
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  [ $rc -eq $want ] || { tail -20 "$T/err-$sig"; fail "SIG$sig: exit $rc, expected $want"; }
  grep -qF "stopped by signal" "$T/err-$sig" || fail "SIG$sig: no 'stopped by signal' message"
  "$PY" - "$T/r-$sig/run.json" <<'PY' || fail "run.json after SIG$sig"
import json, sys
r = json.load(open(sys.argv[1]))
st = r["stages"]
assert st["data"]["exit_status"] == 0 and st["train"]["ran"], st
assert not st["infer"]["ran"] and not st["predict"]["ran"], st
t = json.load(open(st["train"]["result"]))   # the stage stopped cleanly and wrote its result
assert t["run"]["steps"] >= 1, t["run"]
PY
  echo "ok: SIG$sig stops the run after the training stage's clean stop"
done
