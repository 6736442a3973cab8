#!/bin/bash
# `dlperf infer` vs PyTorch for ResNet-50 inference, side by side in ONE run: batch-1 latency and batch-32
# throughput, fp32 and bf16, the same compute threads, preprocessed tensors for both (inference only).
#
#   bench/infer_vs_pytorch.sh [--threads N] [--model resnet50] [--precisions "fp32 bf16"] [--batch 32]
#                             [--iters 4] [--min-duration 3] [--warmup 2] [--repeat R] [--json FILE]
#                             [--python PATH | --venv] [--peers "torch openvino"]
#
# Peers: torch (the default) and openvino. --python PATH runs them with another Python; --venv with the one of
# bench/peers-venv.sh's virtual environment (PyTorch 2.x, OpenVINO: issue 14), where --peers defaults to
# "openvino torch". OpenVINO (bench/infer_vs_pytorch.py openvino): the same torchvision model through
# ov.convert_model, compiled per batch size, INFERENCE_NUM_THREADS=N, LATENCY hint with 1 stream,
# INFERENCE_PRECISION_HINT f32/bf16, synchronous infer() calls timed like PyTorch's. Issue 14's targets against
# OpenVINO: fp32 and bf16 batch-32 throughput >= 1.1x, batch-1 p50 latency <= 0.9x.
# PyTorch (Debian's python3-torch, bench/infer_vs_pytorch.py): torchvision's model in eval mode, channels_last,
# torch.inference_mode(), bf16 through torch.autocast("cpu", dtype=torch.bfloat16); torch.set_num_threads(N).
# dlperf: `dlperf infer --device cpu --from tensor --batch 1,32 --threads N --precision P` (the oneDNN inference
# plan: BN folded into the convolutions, ReLU and the residual add fused; bf16 where the CPU has avx512_bf16/AMX).
# Both take the same synthetic-ImageNet JPEGs through Resize(256) + CenterCrop(224) + Normalize into memory first
# and time only the forward calls: per batch size, warm-up calls, then timed calls until at least --iters calls AND
# --min-duration seconds. Per precision the two run back to back (torch, then dlperf), --repeat rounds alternating;
# each side's best round counts (lowest batch-1 p50, highest throughput: interference from other work only slows a
# run down, so on a shared machine the best of a few rounds is the least disturbed), the median is shown too.
# Batch-1 latency is the p50 of the calls (the mean is shown too); throughput is images / timed seconds at batch 32.
# Printed: both, and the ratios dlperf / PyTorch. Targets (issue 7): bf16 batch-32 throughput >= 2.5x PyTorch's, bf16 batch-1 latency
# <= 0.5x PyTorch's (the issue's reference machine was a Sapphire Rapids with AMX; compare the ratios of one run
# on the machine at hand). On a shared machine the figures are noisy: run it on a quiet one for the record.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
THREADS=$(nproc)
MODEL=resnet50
PRECS="fp32 bf16"
BATCH=32
ITERS=4
MINDUR=3
WARMUP=2
REPEAT=1
JSON=""
PEERS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    --min-duration) MINDUR=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --json) JSON=$2; shift ;;
    --python) PY=$2; shift ;;
    --venv) PY=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}/bin/python; PEERS=${PEERS:-"openvino torch"} ;;
    --peers) PEERS=$2; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$DLPERF" ] || { echo "no $DLPERF: run make first" >&2; exit 2; }
PEERS=${PEERS:-torch}
"$PY" -c "import torch, torchvision" 2>/dev/null || { echo "torch/torchvision not importable by $PY (scripts/setup.sh test; for --venv: bench/peers-venv.sh)" >&2; exit 2; }
case " $PEERS " in *" openvino "*)
  "$PY" -c "import openvino" 2>/dev/null || { echo "openvino not importable by $PY (bench/peers-venv.sh, then --venv)" >&2; exit 2; } ;;
esac
[ -z "$JSON" ] || [ ! -e "$JSON" ] || { echo "--json $JSON exists: choose another name" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# 32 validation JPEGs of a small synthetic ImageNet (generated once into the cache)
SPEC="synthetic:classes=8,per-class=1,val-per-class=4"
DATA=$("$DLPERF" data gen --classes 8 --per-class 1 --val-per-class 4 2>/dev/null | head -1)
[ -d "$DATA/val" ] || { echo "could not generate the synthetic dataset ($DATA)" >&2; exit 1; }

BF16HW=$(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//' || true)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
     "flags: ${BF16HW:-no avx512_bf16 nor amx_bf16 (oneDNN emulates bf16)}, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$MODEL, threads $THREADS, batch 1 and $BATCH, warm-up $WARMUP, timed >= $ITERS calls and >= $MINDUR s per batch size"
for r in $(seq 1 "$REPEAT"); do
  for p in $PRECS; do
    for peer in $PEERS; do
      echo "-- round $r, $p: $peer"
      "$PY" "$ROOT/bench/infer_vs_pytorch.py" "$peer" --images "$DATA/val" --threads "$THREADS" --precision "$p" \
        --model "$MODEL" --batch "$BATCH" --warmup "$WARMUP" --iters "$ITERS" --min-duration "$MINDUR" \
        --out "$TMP/$peer-$p-$r.json"
    done
    echo "-- round $r, $p: dlperf infer"
    "$DLPERF" infer --device cpu --model "$MODEL" --from tensor --data "$SPEC" --samples "$BATCH" --batch "1,$BATCH" \
      --precision "$p" --threads "$THREADS" --warmup "$WARMUP" --iters "$ITERS" --min-duration "$MINDUR" \
      --monitor-interval 0 --json "$TMP/dlperf-$p-$r.json" 2>"$TMP/dlperf-$p.err" | sed 's/^/   /' \
      || { cat "$TMP/dlperf-$p.err" >&2; exit 1; }
  done
done
"$PY" "$ROOT/bench/infer_vs_pytorch.py" report --dir "$TMP" --precisions "$PRECS" --repeat "$REPEAT" --peers "$PEERS" \
  ${JSON:+--json "$JSON"}
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bench/infer_vs_pytorch.sh --threads $THREADS --precisions \"$PRECS\" --batch $BATCH --iters $ITERS --min-duration $MINDUR --repeat $REPEAT --python $PY --peers \"$PEERS\""
