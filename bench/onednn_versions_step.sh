#!/bin/bash
# Two dlperf builds — e.g. one on oneDNN 2.6 (main before issue 33) and one on oneDNN 3.x — on the whole ResNet-50
# training step and inference pass (`dlperf nn bench`, random tensors, no data loading), run in alternating pairs
# on the same machine: A B, then B A, ... so that drift in the machine's load falls on both alike. Per precision
# and mode: each build's img/s (min, median, max over the pairs), every pair's ratio B/A (above 1: B is faster)
# and their median and spread, the median over the pairs of the ratio of each run's fastest-decile step time
# (p10: less sensitive to a loaded machine than the mean), and the oneDNN version, ISA and the 3x3 convolution
# kernel each build ran.
#
#   bench/onednn_versions_step.sh --a DLPERF_A --b DLPERF_B [--pairs 5] [--precisions "bf16 fp32"]
#                                 [--modes "train infer"] [--batch 16] [--infer-batch 32] [--steps 2] [--threads 2]
#                                 [--together] [--keep DIR]
#
# --together: each pair's two runs at the same time instead of one after the other (on a machine loaded by other
# work both then meet the same load; use --threads with at most half the cores).
# Each run: dlperf nn bench --device cpu --precision P --batch B --steps S --warmup 1 --threads T [--infer] --json.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A="" B="" PAIRS=5 PRECS="bf16 fp32" MODES="train infer" BATCH=16 IBATCH=32 STEPS=2 THREADS=2 KEEP="" TOGETHER=0
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$2; shift ;;
    --b) B=$2; shift ;;
    --pairs) PAIRS=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --modes) MODES=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --infer-batch) IBATCH=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --keep) KEEP=$2; shift ;;
    --together) TOGETHER=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$A" ] && [ -x "$B" ] || { echo "onednn_versions_step: --a and --b must name dlperf binaries" >&2; exit 2; }
PY=${PYTHON:-/usr/bin/python3}
WORK=${KEEP:-$(mktemp -d /tmp/onednn-step.XXXXXX)}
mkdir -p "$WORK"
[ -n "$KEEP" ] || trap 'rm -rf "$WORK"' EXIT
echo "onednn_versions_step: $PAIRS pairs, CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for prec in $PRECS; do
  for mode in $MODES; do
    b=$BATCH; inf=""
    [ "$mode" = infer ] && { b=$IBATCH; inf=--infer; }
    for i in $(seq 1 "$PAIRS"); do
      order="a b"; [ $((i % 2)) = 0 ] && order="b a"
      pids=""
      for w in $order; do
        bin=$A; [ "$w" = b ] && bin=$B
        out="$WORK/$prec-$mode-$i-$w.json"
        "$bin" nn bench --device cpu --precision "$prec" --batch "$b" --steps "$STEPS" --warmup 1 \
          --threads "$THREADS" $inf --json "$out" >"$WORK/log-$w.txt" 2>&1 &
        if [ "$TOGETHER" = 1 ]; then pids="$pids $!"; elif ! wait $!; then
          cat "$WORK/log-$w.txt" >&2; echo "onednn_versions_step: $bin failed" >&2; exit 1
        fi
      done
      for pid in $pids; do wait "$pid" || { cat "$WORK"/log-*.txt >&2; echo "onednn_versions_step: a run failed" >&2; exit 1; }; done
      for w in $order; do
        echo "  $prec $mode pair $i $w: $("$PY" -c 'import json,sys; print("%.3f img/s" % json.load(open(sys.argv[1]))["img_per_s"])' "$WORK/$prec-$mode-$i-$w.json")" >&2
      done
    done
  done
done
"$PY" - "$WORK" "$PAIRS" "$PRECS" "$MODES" <<'PYEOF'
import json, os, statistics, sys
work, pairs, precs, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def load(p, m, i, w):
    return json.load(open(os.path.join(work, f"{p}-{m}-{i}-{w}.json")))
print("precision mode   batch  A img/s min/med/max        B img/s min/med/max        B/A pairs (median; min-max)  p10 B/A")
for p in precs:
    for m in modes:
        ra = [load(p, m, i, "a") for i in range(1, pairs + 1)]
        rb = [load(p, m, i, "b") for i in range(1, pairs + 1)]
        a = [r["img_per_s"] for r in ra]; b = [r["img_per_s"] for r in rb]
        q = [y / x for x, y in zip(a, b)]
        q10 = [x["step_ms_p10"] / y["step_ms_p10"] for x, y in zip(ra, rb)]
        f = lambda v: "%.3f/%.3f/%.3f" % (min(v), statistics.median(v), max(v))
        print("%-9s %-6s %5d  %-26s %-26s %s (%.3f; %.3f-%.3f)  %.3f" % (p, m, ra[0]["config"]["batch"], f(a), f(b),
              " ".join("%.3f" % x for x in q), statistics.median(q), min(q), max(q), statistics.median(q10)))
        for tag, r in (("A", ra[0]), ("B", rb[0])):
            bp, v = r.get("backend_plan", {}), r.get("versions", {})
            print("    %s: oneDNN %s, ISA %s, 3x3 conv %s, winograd convs %s" % (tag, bp.get("library_version"),
                  bp.get("isa"), bp.get("conv_impl"), bp.get("winograd_convs")))
PYEOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
