#!/bin/bash
# `dlperf train` against PyTorch, side by side in one run (issue 3): ResNet-50, batch 32, 224x224, fp32 and then
# bf16, the same number of compute threads.
#   dlperf:  the full `dlperf train --device cpu` on the synthetic ImageNet's JPEGs (ImageNet-like sizes) through the
#            real input pipeline (read, decode, RandomResizedCrop, flip, normalize) with its default loader threads,
#            SGD with momentum; steady-state img/s after the warm-up steps, and the fraction of the backend's
#            measured peak.
#   PyTorch: Debian's python3-torch 1.13 (OpenBLAS) + torchvision resnet50, channels_last, SGD with momentum, fp32
#            and torch.autocast("cpu", dtype=torch.bfloat16), torch.set_num_threads(N), on random tensors — no input
#            pipeline at all: its best case.
# Prints img/s for both, the ratios (targets: >= 1.3x PyTorch fp32, >= 3x PyTorch bf16) and dlperf's fraction of
# its measured peak. The runs alternate (PyTorch fp32, dlperf fp32, PyTorch bf16, dlperf bf16).
#
#   bench/train_vs_pytorch.sh [--threads N] [--steps 8] [--warmup 2] [--batch 32] [--size 224] [--model resnet50]
#                             [--precisions "fp32 bf16"] [--dlperf build/dlperf] [--json FILE]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
THREADS=$(nproc); STEPS=8; WARMUP=2; BATCH=32; SIZE=224; MODEL=resnet50; PRECS="fp32 bf16"; JSON=""
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --dlperf) DLPERF=$2; shift ;;
    --json) JSON=$2; shift ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
  shift
done
[ -n "$JSON" ] && [ -e "$JSON" ] && { echo "error: --json $JSON already exists" >&2; exit 1; }
"$DLPERF" train --help | grep -q '(default cpu)' || { echo "error: $DLPERF has no cpu backend (oneDNN)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# $MODEL batch $BATCH ${SIZE}x${SIZE}, $THREADS compute threads, $STEPS timed steps after $WARMUP warm-up steps"
echo "# host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $PRECS; do
  "$PY" "$ROOT/bench/train_vs_pytorch.py" --model "$MODEL" --batch "$BATCH" --size "$SIZE" --threads "$THREADS" \
    --precision "$p" --warmup "$WARMUP" --steps "$STEPS" >"$TMP/torch-$p.json" 2>"$TMP/torch-$p.err" \
    || { cat "$TMP/torch-$p.err"; echo "error: PyTorch $p failed" >&2; exit 1; }
  echo "  pytorch $p: $(cut -c1-60 "$TMP/torch-$p.json")..." >&2
  "$DLPERF" train --device cpu --model "$MODEL" --batch "$BATCH" --size "$SIZE" --precision "$p" --threads "$THREADS" \
    --steps $((STEPS + WARMUP)) --measure-warmup "$WARMUP" --no-eval --log-every 1 --json "$TMP/dlperf-$p.json" \
    >"$TMP/dlperf-$p.out" 2>"$TMP/dlperf-$p.err" || { cat "$TMP/dlperf-$p.err"; echo "error: dlperf $p failed" >&2; exit 1; }
  echo "  dlperf $p: $(grep '^throughput' "$TMP/dlperf-$p.out")" >&2
done
"$PY" - "$TMP" "$JSON" $PRECS <<'EOF'
import json, sys
tmp, out, precs = sys.argv[1], sys.argv[2], sys.argv[3:]
target = {"fp32": 1.3, "bf16": 3.0}
rows = []
print(f"{'precision':<10}{'PyTorch img/s':>14}{'dlperf img/s':>14}{'ratio':>8}{'target':>8}{'dlperf GFLOP/s':>16}{'of peak':>9}{'data wait':>10}")
for p in precs:
    t = json.load(open(f"{tmp}/torch-{p}.json"))
    d = json.load(open(f"{tmp}/dlperf-{p}.json"))
    ips = d["throughput"]["steady_img_per_s"]
    ratio = ips / t["img_per_s"]
    g = d["gflop"]
    frac = g["fraction_of_peak"]
    print(f"{p:<10}{t['img_per_s']:14.2f}{ips:14.2f}{ratio:7.2f}x{target.get(p, 0):7.1f}x{g['achieved_per_s']:16.1f}"
          f"{(100 * frac if frac is not None else float('nan')):8.0f}%{100 * d['stall']['data_wait_frac']:9.1f}%")
    rows.append({"precision": p, "pytorch": t, "dlperf_img_per_s": ips, "ratio": ratio, "target": target.get(p),
                 "meets_target": ratio >= target.get(p, 0), "dlperf_gflop_per_s": g["achieved_per_s"],
                 "dlperf_peak_gflop_per_s": g["peak_per_s"], "dlperf_peak_source": g["peak_source"],
                 "dlperf_fraction_of_peak": frac, "dlperf_data_wait_frac": d["stall"]["data_wait_frac"],
                 "dlperf_phases_ms_per_step": {k: v["ms_per_step"] for k, v in d["steady_state"]["phases"].items()
                                               if isinstance(v, dict)},
                 "dlperf_threads": d["threads"]})
t0 = json.load(open(f"{tmp}/torch-{precs[0]}.json"))
print(f"PyTorch {t0['torch']} (BLAS: {t0['blas']}; convolutions: {t0['convolutions']}; {t0['threads']} threads) on random tensors; dlperf on JPEGs "
      f"through its input pipeline; peak = the cpu backend's measured convolution peak ({rows[0]['dlperf_peak_source']})")
if out:
    res = {"schema": "dlperf.bench.train_vs_pytorch/1", "rows": rows}
    with open(out, "x") as f:
        json.dump(res, f, indent=1)
EOF
