#!/bin/bash
# ResNet-50 training and inference: PyTorch (Debian 1.13, or 2.x with --venv; channels_last; fp32 and bf16 autocast) vs `dlperf nn bench
# --device cpu`, same threads, one run, ratios printed. Builds dlperf first. Arguments go to step_vs_pytorch.py:
#   bench/step_vs_pytorch.sh                         # 2 threads, batch 32, 224x224, every mode, one round
#   bench/step_vs_pytorch.sh --rounds 3 --json out.json
#   bench/step_vs_pytorch.sh --modes train-fp32,train-bf16 --threads 2
#   bench/step_vs_pytorch.sh --venv                  # PyTorch 2.x from bench/peers-venv.sh's environment
#   bench/step_vs_pytorch.sh --python PATH           # any other Python with torch + torchvision
# On a shared machine use --rounds 3 (medians) and re-run when it is quiet.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) PY=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}/bin/python
            [ -x "$PY" ] || { echo "no $PY: run bench/peers-venv.sh first" >&2; exit 2; } ;;
    --python) PY=$2; shift ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
make -C "$ROOT" -j2 --no-print-directory build/dlperf >/dev/null
exec "$PY" "$ROOT/bench/step_vs_pytorch.py" --dlperf "$ROOT/build/dlperf" ${ARGS[@]+"${ARGS[@]}"}
