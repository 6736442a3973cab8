#!/bin/bash
# Compute threads x loader threads x OpenMP wait policy for `dlperf train` on the CPU: the measurements behind the
# default thread rule and the OMP_WAIT_POLICY=passive re-exec (docs/training.md, "Threads").
#
#   bench/train_threads.sh [--dlperf build/dlperf] [--model resnet18] [--size 64] [--batch 64] [--steps 14]
#                          [--repeat 3] [--data synthetic] [--precision fp32] [--combos "2:1:active 2:1:passive ..."]
#
# Each combination T:W:P runs `dlperf train --threads T --workers W` with OMP_WAIT_POLICY=P (P = "unset" leaves it
# unset and disables dlperf's re-exec) on the real input pipeline, no evaluation, and reads the steady-state img/s
# and the data-wait share from the JSON result. The runs are interleaved (every combination once per round) so a
# machine whose load changes over time (shared CI) affects each the same way; the table gives the median and the
# range over the rounds.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
MODEL=resnet18; SIZE=64; BATCH=64; STEPS=14; REPEAT=3; DATA=synthetic; PREC=fp32
COMBOS="2:1:unset 2:1:passive 1:1:unset 1:1:passive 2:2:unset 2:2:passive"
while [ $# -gt 0 ]; do
  case "$1" in
    --dlperf) DLPERF=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --data) DATA=$2; shift ;;
    --precision) PREC=$2; shift ;;
    --combos) COMBOS=$2; shift ;;
    *) echo "usage: $0 [--dlperf PATH] [--model M] [--size PX] [--batch N] [--steps N] [--repeat R] [--data SPEC] [--precision P] [--combos \"T:W:P ...\"]" >&2; exit 2 ;;
  esac
  shift
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# $MODEL ${SIZE}px batch $BATCH $PREC, $STEPS steps per run (first $((STEPS / 7 > 1 ? STEPS / 7 : 1)) excluded), data $DATA, $REPEAT rounds"
echo "# host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$REPEAT"); do
  for c in $COMBOS; do
    IFS=: read -r T W P <<<"$c"
    out="$TMP/$c.$r.json"
    TIMEFORMAT='%R %U %S'
    if [ "$P" = unset ]; then
      { time env -u OMP_WAIT_POLICY DLPERF_OMP_REEXEC=0 "$DLPERF" train --data "$DATA" --model "$MODEL" --size "$SIZE" \
        --batch "$BATCH" --steps "$STEPS" --precision "$PREC" --threads "$T" --workers "$W" --no-eval --no-monitor \
        --peak off --quiet --measure-warmup $((STEPS / 7 > 1 ? STEPS / 7 : 1)) --json "$out" >/dev/null 2>"$TMP/err" \
        || { echo "run $c failed:"; cat "$TMP/err"; exit 1; } ; } 2>"$out.time"
    else
      { time OMP_WAIT_POLICY=$P "$DLPERF" train --data "$DATA" --model "$MODEL" --size "$SIZE" \
        --batch "$BATCH" --steps "$STEPS" --precision "$PREC" --threads "$T" --workers "$W" --no-eval --no-monitor \
        --peak off --quiet --measure-warmup $((STEPS / 7 > 1 ? STEPS / 7 : 1)) --json "$out" >/dev/null 2>"$TMP/err" \
        || { echo "run $c failed:"; cat "$TMP/err"; exit 1; } ; } 2>"$out.time"
    fi
  done
done
"$PY" - "$TMP" $COMBOS <<'EOF'
import glob, json, os, statistics, sys
tmp, combos = sys.argv[1], sys.argv[2:]
print(f"{'threads':>7} {'workers':>7} {'policy':>8} {'img/s median':>12} {'min':>7} {'max':>7} {'data wait':>9} {'CPU ms/img':>10}")
for c in combos:
    files = sorted(glob.glob(os.path.join(tmp, c + ".*.json")))
    runs = [json.load(open(f)) for f in files]
    # CPU time of the whole process (user + system) per training image, setup included: spinning shows up here
    cpu = [sum(map(float, open(f + ".time").read().split()[1:3])) / r["run"]["images"] for f, r in zip(files, runs)]
    ips = [r["throughput"]["steady_img_per_s"] for r in runs]
    wait = statistics.median(r["stall"]["data_wait_frac"] for r in runs)
    t, w, p = c.split(":")
    print(f"{t:>7} {w:>7} {p:>8} {statistics.median(ips):12.1f} {min(ips):7.1f} {max(ips):7.1f} {100 * wait:8.1f}% {1e3 * statistics.median(cpu):10.1f}")
EOF
