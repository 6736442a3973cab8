#!/bin/bash
# ResNet-50 training and inference: PyTorch 1.13 (channels_last; fp32 and bf16 autocast) vs `dlperf nn bench
# --device cpu`, same threads, one run, ratios printed. Builds dlperf first. Arguments go to step_vs_pytorch.py:
#   bench/step_vs_pytorch.sh                         # 2 threads, batch 32, 224x224, every mode, one round
#   bench/step_vs_pytorch.sh --rounds 3 --json out.json
#   bench/step_vs_pytorch.sh --modes train-fp32,train-bf16 --threads 2
# On a shared machine use --rounds 3 (medians) and re-run when it is quiet.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
make -C "$ROOT" -j2 --no-print-directory build/dlperf >/dev/null
exec /usr/bin/python3 "$ROOT/bench/step_vs_pytorch.py" --dlperf "$ROOT/build/dlperf" "$@"
