#!/bin/bash
# `dlperf train` end to end on tiny data (ref backend, resnet-mini 32x32): the step lines on stderr, the summary on
# stdout, the dlperf.train/1 JSON (fields, phases adding up), outputs that exist refused before anything runs, bad
# options, a forced data stall named by the verdict, the sim device, and the monitor's time series.
# tags: asan
# timeout: 300
set -eu
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/traincli.XXXXXX")
trap 'rm -rf "$T"' EXIT
D=$DLPERF
PY=${PYTHON:-/usr/bin/python3}
export DLPERF_CACHE="$T/cache"
fail() { echo "FAIL: $*"; exit 1; }
TINY=(--model resnet-mini --size 32 --batch 4 --device ref --threads 2 --workers 1 --peak off)

$D data gen --out "$T/ds" --classes 3 --per-class 12 --val-per-class 4 --size 36-48 --seed 1 >/dev/null

# 1. a run: step lines, summary, JSON
env -u OMP_WAIT_POLICY -u DLPERF_OMP_REEXEC $D train --data "$T/ds" "${TINY[@]}" --epochs 2 --lr 0.05 --no-lr-scaling --log-every 3 --json "$T/r.json" \
  --monitor-csv "$T/mon.csv" --monitor-interval 100 >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "train"; }
grep -Eq '^step +3/18 +epoch 1 +loss [0-9.]+ +lr [0-9.e-]+ +[0-9.]+ img/s +wait +[0-9]+% +[0-9.]+ ms/step +ETA ' "$T/err" \
  || fail "no step line like 'step 3/18 epoch 1 loss ... ETA': $(head -5 "$T/err")"
[ "$(grep -c '^step ' "$T/err")" = 6 ] || fail "expected 6 step lines (every 3 of 18): $(grep '^step' "$T/err")"
grep -Eq '^eval step 18 \(epoch 2\): top-1 [0-9.]+%' "$T/err" || fail "no eval line"
for w in "^dlperf train: resnet-mini, 3 classes, 32x32, batch 4, ref fp32" "^phase " "^  data_wait " "^  backward " \
         "^throughput " "^compute " "^accuracy " "^stall " "^loader " "^monitor " "^result "; do
  grep -q "$w" "$T/out" || fail "summary lacks '$w': $(cat "$T/out")"
done
$PY - "$T/r.json" <<'PY' || fail "JSON result"
import json, sys, math
r = json.load(open(sys.argv[1]))
assert r["schema"] == "dlperf.train/1"
o = r["config"]["options"]
assert o["batch"] == 4 and o["model"] == "resnet-mini" and o["epochs"] == 2, o
res = r["config"]["resolved"]
assert res["total_steps"] == 18 and res["steps_per_epoch"] == 9 and res["backend"] == "ref"
ph = r["phases"]
names = ["data_wait", "input", "forward", "loss", "backward", "allreduce", "update", "other"]
total = sum(ph[n]["ms"] for n in names)
assert abs(total - r["run"]["train_s"] * 1e3) < 1e-6 * total + 1e-3, (total, r["run"]["train_s"])
assert abs(sum(ph[n]["pct"] for n in names) - 100) < 1e-6
assert r["run"]["steps"] == 18 and r["run"]["stopped_by"] == "epochs"
for k in ["img_per_s", "steady_img_per_s", "compute_img_per_s", "loader_img_per_s"]:
    assert r["throughput"][k] > 0, k
assert r["gflop"]["per_image"] > 0 and r["gflop"]["achieved_per_s"] > 0
assert r["stall"]["verdict"] in ("compute-bound", "pipeline-bound")
assert len(r["epochs"]) == 2 and all(e["val"] is not None for e in r["epochs"])
assert len(r["evals"]) == 2 and r["evals"][-1]["images"] == 12
assert 0 <= r["accuracy"]["last_top1"] <= 1
assert r["loader"]["train"]["images"] == 72 and r["loader"]["train"]["bad"]["files"] == 0
assert r["threads"]["compute"] == 2 and r["threads"]["loader"] == 1
assert r["threads"]["omp_wait_policy"] == "passive", r["threads"]
assert "cpu_model" in r["host"] and "versions" in r and "argv" in r and r["seed"] == "0"
assert [p["name"] for p in r["monitor"]["phases"]][:4] == ["setup", "warm-up", "epoch 1", "eval"]
PY
head -1 "$T/mon.csv" | grep -q '^t_s,dt_s,unix_s,phase' || fail "monitor CSV header"

# 2. existing outputs are refused before the run (nothing trains, the file is untouched)
cp "$T/r.json" "$T/r.keep"
s0=$(date +%s%N)
if $D train --data "$T/ds" "${TINY[@]}" --epochs 50 --json "$T/r.json" >"$T/out2" 2>"$T/err2"; then fail "overwrote --json"; fi
grep -q "already exists" "$T/err2" || fail "no clear message for an existing --json: $(cat "$T/err2")"
grep -q '^step ' "$T/err2" && fail "trained although --json exists"
cmp -s "$T/r.json" "$T/r.keep" || fail "--json file changed"
[ $(( ($(date +%s%N) - s0) / 1000000 )) -lt 5000 ] || fail "the refusal was not immediate"
if $D train --data "$T/ds" "${TINY[@]}" --steps 2 --monitor-csv "$T/mon.csv" 2>"$T/err2" >/dev/null; then fail "overwrote --monitor-csv"; fi
grep -q "already exists" "$T/err2" || fail "no message for an existing --monitor-csv"

# 3. bad options and data
set +e
$D train --data "$T/ds" "${TINY[@]}" --batch 0 >/dev/null 2>"$T/err3"; rc=$?
set -e
[ $rc = 2 ] || fail "--batch 0: exit $rc, want 2"
grep -q -- "--batch 0 must be at least 1" "$T/err3" || fail "--batch 0 message: $(cat "$T/err3")"
if $D train --data "$T/nothing" "${TINY[@]}" --steps 1 >/dev/null 2>"$T/err3"; then fail "missing data accepted"; fi
grep -q "nothing" "$T/err3" || fail "missing data not named: $(cat "$T/err3")"
if $D train --data "$T/ds" "${TINY[@]}" --precision bf16 --steps 1 >/dev/null 2>"$T/err3"; then fail "ref bf16 accepted"; fi

# 4. a read limit forces a stall; the verdict says so
$D data gen --out "$T/big" --classes 2 --per-class 8 --val-per-class 0 --size 300-360 --seed 2 >/dev/null
bytes=$(du -cb "$T/big/train" | tail -1 | cut -f1)
$D train --data "$T/big/train" "${TINY[@]}" --steps 4 --read-limit "$bytes" --json "$T/s.json" >"$T/out4" 2>"$T/err4" \
  || { cat "$T/err4"; fail "read-limited run"; }
grep -q "^stall .*pipeline-bound: the loader delivered" "$T/out4" || fail "no pipeline-bound verdict: $(grep stall "$T/out4")"
grep -q "no validation set" "$T/err4" || fail "no note about the missing validation set"

# 5. the sim device: NHWC input from the same loader, loader threads default to all CPUs
$D train --data "$T/ds" --model resnet-mini --size 32 --batch 4 --device sim:custom,img_per_s=400 --steps 6 \
  --json "$T/sim.json" >"$T/out5" 2>"$T/err5" || { cat "$T/err5"; fail "sim run"; }
$PY -c "
import json,sys; r=json.load(open(sys.argv[1]))
assert r['data']['input_layout']=='NHWC' and r['run']['steps']==6 and r['config']['resolved']['backend']=='sim'
assert r['threads']['loader'] >= 1 and r['threads']['omp_wait_policy_set_by'] != 'dlperf train (re-exec with OMP_WAIT_POLICY=passive)'
" "$T/sim.json" || fail "sim JSON"

# 5b. the cpu backend (where built with oneDNN): the result names oneDNN's ISA and the kernels of the plan
if $D version | grep -q "^oneDNN ISA"; then
  $D train --data "$T/ds" --model resnet-mini --size 32 --batch 4 --device cpu --threads 2 --workers 1 --peak off \
    --steps 2 --json "$T/cpu.json" >/dev/null 2>"$T/err5b" || { cat "$T/err5b"; fail "cpu run"; }
  $PY -c "
import json,sys; r=json.load(open(sys.argv[1]))
p=r['backend']['plan']; isa=r['versions']['oneDNN ISA'].split()[0]
assert p['library']=='oneDNN' and p['isa']==isa, (p.get('isa'), isa)
assert any(k.startswith('convolution ') for k in p['kernels']) and r['versions']['oneDNN kernels'].startswith('3x3 conv fp32 '), p['kernels']
" "$T/cpu.json" || fail "cpu run's JSON: ISA and kernels"
fi

# 6. list files ("path label" lines) for both sets
$D train --data "$T/ds/train.txt" --val-data "$T/ds/val.txt" "${TINY[@]}" --steps 3 --json "$T/list.json" >/dev/null \
  2>"$T/err7" || { cat "$T/err7"; fail "list-file data"; }
$PY -c "
import json,sys; r=json.load(open(sys.argv[1]))
assert r['data']['train'].endswith('train.txt') and r['data']['val'].endswith('val.txt') and r['data']['val_images']==12, r['data']
assert r['run']['steps']==3 and len(r['evals'])==1
" "$T/list.json" || fail "list-file run"

# 7. Ctrl-C: the run stops after the step in progress, evaluates, checkpoints, writes its result, exits 130
$D train --data "$T/ds" "${TINY[@]}" --epochs 100000 --checkpoint "$T/ck-int" --json "$T/int.json" >"$T/out6" 2>"$T/err6" &
pid=$!
for _ in $(seq 1 100); do grep -q '^step ' "$T/err6" && break; sleep 0.1; done
sleep 0.5
kill -INT $pid
set +e
wait $pid; rc=$?
set -e
[ $rc = 130 ] || { cat "$T/err6"; fail "after SIGINT: exit $rc, want 130"; }
$PY -c "
import json,sys; r=json.load(open(sys.argv[1]))
assert r['run']['stopped_by']=='interrupted', r['run']
assert r['run']['steps']>=1 and len(r['evals'])>=1 and r['checkpoints']['last'], r['checkpoints']
" "$T/int.json" || fail "interrupted run's result"
ls "$T/ck-int"/step-*.state.safetensors >/dev/null || fail "no checkpoint after SIGINT"
echo "ok"
