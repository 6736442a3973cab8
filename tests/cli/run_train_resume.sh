#!/bin/bash
# `dlperf train --resume`: N steps straight through vs N/2 (--stop-at-step), then --resume from the checkpoint
# directory for the rest — the step lines (step, epoch, loss, lr) of the two are identical, and so are the final
# validation figures; the resumed run uses another loader thread count. On the ref backend always; on the cpu
# backend (oneDNN) too when it is compiled in.
# tags: asan
# timeout: 600
set -eu
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/trainresume.XXXXXX")
trap 'rm -rf "$T"' EXIT
D=$DLPERF
PY=${PYTHON:-/usr/bin/python3}
export DLPERF_CACHE="$T/cache"
fail() { echo "FAIL: $*"; exit 1; }

$D data gen --out "$T/ds" --classes 3 --per-class 12 --val-per-class 4 --size 36-48 --seed 1 >/dev/null

# step, epoch, loss and lr of each step line (img/s, wait, ms and ETA are timings)
lines() { grep '^step ' "$1" | awk '{print $2, $4, $6, $8}'; }

check() {  # device extra-args...
  local dev=$1; shift
  local C=(--data "$T/ds" --model resnet-mini --size 32 --batch 4 --device "$dev" --steps 14 --lr 0.05 --no-lr-scaling
           --warmup-steps 2 --momentum 0.9 --nesterov --label-smoothing 0.1 --log-every 1 --peak off --no-monitor "$@")
  $D train "${C[@]}" --workers 1 --json "$T/$dev-a.json" >/dev/null 2>"$T/$dev-a.err" || { cat "$T/$dev-a.err"; fail "$dev: straight run"; }
  $D train "${C[@]}" --workers 2 --stop-at-step 6 --checkpoint "$T/$dev-ck" >/dev/null 2>"$T/$dev-b1.err" \
    || { cat "$T/$dev-b1.err"; fail "$dev: first half"; }
  ls "$T/$dev-ck/step-00000006.safetensors" "$T/$dev-ck/step-00000006.state.safetensors" >/dev/null || fail "$dev: no checkpoint at step 6"
  $D train "${C[@]}" --workers 3 --resume "$T/$dev-ck" --checkpoint "$T/$dev-ck" --json "$T/$dev-b2.json" >/dev/null \
    2>"$T/$dev-b2.err" || { cat "$T/$dev-b2.err"; fail "$dev: resumed half"; }
  lines "$T/$dev-a.err" >"$T/$dev-a.lines"
  { lines "$T/$dev-b1.err"; lines "$T/$dev-b2.err"; } >"$T/$dev-b.lines"
  [ "$(wc -l <"$T/$dev-a.lines")" = 14 ] || fail "$dev: expected 14 step lines"
  diff "$T/$dev-a.lines" "$T/$dev-b.lines" >"$T/diff" || { cat "$T/diff"; fail "$dev: the resumed loss curve differs"; }
  $PY - "$T/$dev-a.json" "$T/$dev-b2.json" <<'PY' || fail "$dev: final results differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["resumed_from"]["step"] == 6 and b["run"]["first_step"] == 6 and b["run"]["steps"] == 8, b["resumed_from"]
ea, eb = a["evals"][-1], b["evals"][-1]
assert ea["step"] == eb["step"] == 14
assert ea["top1"] == eb["top1"] and ea["loss"] == eb["loss"], (ea, eb)
assert a["loss"]["last"] == b["loss"]["last"]
PY
  # a new run may not write into a directory holding another run's checkpoints
  if $D train "${C[@]}" --checkpoint "$T/$dev-ck" >/dev/null 2>"$T/err"; then fail "$dev: reused a checkpoint dir"; fi
  grep -q "already holds checkpoints" "$T/err" || fail "$dev: no message for a used checkpoint dir"
  echo "$dev: resumed curve identical ($(sed -n 14p "$T/$dev-a.lines"))"
}

check ref --threads 2
if $D train --help | grep -q 'default cpu'; then
  check cpu --threads 2
else
  echo "cpu backend not built (no oneDNN): ref only"
fi
echo ok
