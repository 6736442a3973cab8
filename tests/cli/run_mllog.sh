#!/bin/bash
# dlperf train --mllog and --steps-jsonl: MLPerf Training's ResNet keys in the reference's order (submission, the
# configuration, init/run start and stop, a block, epoch and evaluation per epoch, eval_accuracy), then MLCommons'
# compliance checker (mlperf-logging, ruleset 4.0.0, the last with ResNet) when it is installed: $MLPERF_LOGGING_PYTHON,
# else the venv scripts/mllog-venv.sh makes, else $PYTHON; that part is skipped, saying so, when none has it.
# tags: asan
# timeout: 300
set -u
D=${DLPERF:?}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/mllog.XXXXXX")
trap 'rm -rf "$T"' EXIT
export DLPERF_CACHE="$T/cache"
fail() { echo "FAIL: $*"; exit 1; }
TINY=(--model resnet-mini --size 32 --batch 4 --device ref --threads 2 --workers 1 --peak off --no-monitor)

"$D" data gen --out "$T/ds" --classes 3 --per-class 12 --val-per-class 4 --size 36-48 --seed 1 >/dev/null || fail "data gen"

# 1. two epochs, evaluated after each: the MLLOG file and the per-step lines
"$D" train --data "$T/ds" "${TINY[@]}" --epochs 2 --lr 0.05 --mllog "$T/run.mllog" --steps-jsonl "$T/steps.jsonl" \
  --mllog-org "Example Lab" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "train --mllog"; }
$PY - "$T/run.mllog" "$T/steps.jsonl" <<'PY' || fail "MLLOG keys and order"
import json, sys
recs = []
for n, line in enumerate(open(sys.argv[1]), 1):
    assert line.startswith(":::MLLOG {"), f"line {n} is not an MLLOG line: {line!r}"
    r = json.loads(line[len(":::MLLOG "):])
    assert list(r) == ["namespace", "time_ms", "event_type", "key", "value", "metadata"], f"line {n}: fields {list(r)}"
    assert r["event_type"] in ("POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"), r
    assert isinstance(r["metadata"]["file"], str) and r["metadata"]["lineno"] > 0, r
    recs.append(r)
keys = [r["key"] for r in recs]
head = ["cache_clear", "init_start", "submission_benchmark", "submission_org", "submission_division",
        "submission_status", "submission_platform", "model", "global_batch_size", "train_samples", "eval_samples",
        "gradient_accumulation_steps", "seed", "opt_name", "opt_base_learning_rate", "opt_learning_rate_warmup_epochs",
        "opt_learning_rate_decay_schedule", "sgd_opt_momentum", "opt_weight_decay", "model_bn_span", "train_steps",
        "init_stop", "run_start"]
epoch = ["block_start", "epoch_start", "epoch_stop", "block_stop", "eval_start", "eval_accuracy", "eval_stop"]
want = head + epoch * 2 + ["run_stop"]
assert keys == want, f"keys:\n{keys}\nwant:\n{want}"
by = lambda k: [r for r in recs if r["key"] == k]
v = lambda k: by(k)[0]["value"]
assert v("submission_benchmark") == "resnet" and v("submission_org") == "Example Lab" and v("submission_division") == "open"
assert v("global_batch_size") == 4 and v("train_samples") == 36 and v("eval_samples") == 12, (v("train_samples"), v("eval_samples"))
assert abs(v("opt_base_learning_rate") - 0.05 * 4 / 256) < 1e-12, v("opt_base_learning_rate")  # the peak, scaled
assert [r["metadata"]["epoch_num"] for r in by("epoch_start")] == [1, 2]
assert [r["metadata"]["first_epoch_num"] for r in by("block_start")] == [1, 2]
assert all(r["metadata"]["epoch_count"] == 1 for r in by("block_start"))
acc = by("eval_accuracy")
assert [r["metadata"]["epoch_num"] for r in acc] == [1, 2] and [r["metadata"]["samples_count"] for r in acc] == [36, 72]
assert all(0 <= r["value"] <= 1 for r in acc)
assert by("run_stop")[0]["metadata"]["status"] == "success"
types = {r["key"]: r["event_type"] for r in recs}
assert types["init_start"] == types["run_start"] == types["epoch_start"] == types["eval_start"] == "INTERVAL_START"
assert types["init_stop"] == types["run_stop"] == types["epoch_stop"] == types["block_stop"] == "INTERVAL_END"
t = [r["time_ms"] for r in recs]
assert t == sorted(t) and t[0] > 1.5e12, "time_ms must be Unix milliseconds, never going back"
steps = [json.loads(l) for l in open(sys.argv[2])]
assert [s["step"] for s in steps] == list(range(1, 19)), [s["step"] for s in steps]
assert [s["epoch"] for s in steps] == [0] * 9 + [1] * 9
for s in steps:
    assert set(s["phase_ms"]) == {"data_wait", "input", "forward", "loss", "backward", "allreduce", "update", "other"}
    assert abs(sum(s["phase_ms"].values()) - s["ms"]) < 1e-2 and s["loss"] > 0 and s["lr"] > 0, s
print(f"ok {len(recs)} MLLOG lines in order; {len(steps)} step lines")
PY
grep -q '^accuracy ' "$T/out" || fail "the summary is still on stdout without '-': $(head -3 "$T/out")"

# 2. outputs that exist are refused before anything runs; '-' is stdout (the summary then on stderr)
"$D" train --data "$T/ds" "${TINY[@]}" --steps 2 --mllog "$T/run.mllog" >/dev/null 2>"$T/err" && fail "--mllog overwrote"
grep -q -- "--mllog .*already exists" "$T/err" || fail "no 'already exists' for --mllog: $(cat "$T/err")"
env -u OMP_WAIT_POLICY -u DLPERF_OMP_REEXEC "$D" train --data "$T/ds" "${TINY[@]}" --steps 3 --no-eval --mllog - \
  >"$T/stdout" 2>"$T/err" || { cat "$T/err"; fail "--mllog -"; }
grep -vq '^:::MLLOG ' "$T/stdout" && fail "stdout holds more than MLLOG lines: $(grep -v '^:::MLLOG' "$T/stdout" | head -3)"
grep -q '"key": "run_stop"' "$T/stdout" || fail "--mllog -: no run_stop on stdout"
grep -q '^throughput ' "$T/err" || fail "--mllog -: the summary did not move to stderr"
echo "ok --mllog - (through the OMP re-exec): $(wc -l <"$T/stdout") MLLOG lines on stdout, the summary on stderr"

# 2b. a log that cannot be written (a full disk: /dev/full) fails the run, naming the file, instead of exit 0
if [ -w /dev/full ]; then
  if "$D" train --data "$T/ds" "${TINY[@]}" --steps 2 --mllog /dev/full >/dev/null 2>"$T/full.err"; then
    fail "--mllog /dev/full: exit 0 with the log lost"
  fi
  grep -q "cannot write the MLPerf log /dev/full" "$T/full.err" || { cat "$T/full.err"; fail "no message naming the log"; }
  echo "ok an MLPerf log that cannot be written fails the run"
fi

# 3. MLCommons' compliance checker, when installed
CK=${MLPERF_LOGGING_PYTHON:-}
if [ -z "$CK" ]; then
  for p in "${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/mllog-venv/bin/python" "$PY"; do
    [ -x "$p" ] && "$p" -c 'import mlperf_logging' 2>/dev/null && { CK=$p; break; }
  done
fi
if [ -z "$CK" ]; then
  echo "skip: the compliance checker (mlperf-logging is not installed: scripts/mllog-venv.sh makes a venv with it)"
  exit 0
fi
(cd "$T" && "$CK" -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 run.mllog) >"$T/ck" 2>&1
grep -q "SUCCESS" "$T/ck" || { cat "$T/ck"; fail "the MLPerf compliance checker did not pass the log"; }
echo "ok mlperf-logging $("$CK" -c 'import importlib.metadata as m; print(m.version("mlperf-logging"))') compliance checker (training 4.0.0, open, resnet): SUCCESS"
