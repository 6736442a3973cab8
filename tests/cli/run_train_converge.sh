#!/bin/bash
# Convergence (issue 3, "Must show"): on the synthetic ImageNet (10 classes, 64-112 px images) a ResNet-18 trained
# by `dlperf train --device cpu` reaches a validation top-1 of at least 90% within 5 minutes of training on a
# 2-core machine. The run is capped at 300 s of training (--time-limit; evaluations count against it); the check
# takes the first evaluation at >= 90% and requires the weights it evaluated to have trained for at most 300 s
# (plus the step in progress when the limit passed).
# Settings: crop 64, batch 64, SGD momentum 0.9, lr 0.8 per 256 images (peak 0.2 at batch 64) with half an epoch
# of linear warm-up and cosine decay over 4 epochs, label smoothing 0.1, weight decay 1e-4 except BN and biases,
# fp32. On a quiet 2-core Zen 4 an epoch (2600 images) takes about 15-20 s; on a loaded one (other jobs on both
# cores) about 50-70 s; top-1 is above 95% after the second epoch in both cases (docs/training.md).
# The run stops at the first evaluation at >= 90% (--target-top1 90, MLPerf's way of ending a run: usually the
# second epoch's), at the latest after the third epoch's (--stop-at-step 120: 40 steps an epoch; the LR schedule
# still spans the 4 epochs): only the first evaluation at >= 90% counts, and later epochs only cost time.
# tags: slow
# timeout: 480
set -eu
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/trainconv.XXXXXX")
trap 'rm -rf "$T"' EXIT
D=$DLPERF
PY=${PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*"; exit 1; }

if ! $D train --help | grep -q 'cpu|ref|cuda' || ! $D train --help | grep -q '(default cpu)'; then
  echo "SKIP: this build has no oneDNN (the cpu backend); the convergence test needs it for speed"
  exit 77
fi

$D train --device cpu --data synthetic:classes=10,size=64-112 --model resnet18 --size 64 --batch 64 --epochs 4 \
  --lr 0.8 --warmup 0.5 --schedule cosine --momentum 0.9 --wd 1e-4 --no-bn-decay --label-smoothing 0.1 \
  --precision fp32 --time-limit 300 --target-top1 90 --stop-at-step 120 --log-every 10 --json "$T/c.json" >"$T/out" 2>"$T/err" \
  || { tail -30 "$T/err"; fail "training failed"; }
cat "$T/out"
grep '^eval ' "$T/err" || true
$PY - "$T/c.json" <<'PY' || fail "validation top-1 did not reach 90% within 300 s of training"
import json, sys
r = json.load(open(sys.argv[1]))
evals = r["evals"]
assert evals, "no evaluation"
for e in evals:
    print(f"  step {e['step']:4d}  {e['train_elapsed_s']:6.1f} s of training  top-1 {100 * e['top1']:5.1f}%  top-5 {100 * e['top5']:5.1f}%")
hit = [e for e in evals if e["top1"] >= 0.90]
assert hit, f"best top-1 {100 * max(e['top1'] for e in evals):.1f}%"
first = hit[0]
assert r["run"]["stopped_by"] == "target-top1" and evals[-1] is first, (r["run"]["stopped_by"], evals[-1])
assert r["config"]["resolved"]["target_top1"] == 90, r["config"]["resolved"].get("target_top1")
assert first["train_elapsed_s"] <= 300 + 10, f"reached {100 * first['top1']:.1f}% only after {first['train_elapsed_s']:.0f} s"
print(f"top-1 {100 * first['top1']:.1f}% after {first['train_elapsed_s']:.0f} s of training "
      f"(step {first['step']}, {first['epochs_done']:.2f} epochs); best {100 * r['accuracy']['best_top1']:.1f}%, "
      f"{r['throughput']['steady_img_per_s']:.1f} img/s")
PY
echo ok
