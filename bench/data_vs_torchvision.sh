#!/bin/bash
# dlperf's input pipeline vs torchvision's, side by side in one run, on the same files and worker counts.
#
#   bench/data_vs_torchvision.sh [--data DIR] [--images N] [--workers "1 2"] [--repeat R]
#                                [--peer torchvision|dali] [--python PATH | --venv]
#
# torchvision: ImageFolder + DataLoader(batch 32, shuffle, num_workers = N) with RandomResizedCrop(224) +
# RandomHorizontalFlip + ToTensor + Normalize (Debian's python3-torchvision; with num_workers = N there are N worker
# processes plus the main process, which only collects batches). dlperf: `dlperf data bench` with N loader threads,
# the same transform, batch 32, fp32 NCHW. Both read the same N images (spread evenly over the dataset) from a warm
# page cache (every file is read once first). Runs alternate (torchvision, dlperf) per worker count and repeat; the
# median and best img/s of each are reported, with the ratios and dlperf's 1 -> 2 thread speed-up, and the CPU time
# per image of each pipeline (all its processes and threads), which a busy machine disturbs far less than img/s.
# Targets (issue 2): dlperf >= 2.5x torchvision at 1 and at 2 workers, and >= 1.8x speed-up from 1 to 2 workers.
# --peer dali (issue 14): NVIDIA DALI on the CPU only instead (bench/dali_loader.py: fn.readers.file,
# fn.decoders.image_random_crop on the cpu (decode with the random crop fused in), fn.resize 224,
# fn.crop_mirror_normalize with a random mirror, batch 32, num_threads = N, device_id=None), run by the Python of
# bench/peers-venv.sh's virtual environment unless --python says otherwise; target: dlperf >= 2x DALI at 1 and at 2
# threads. --venv: that environment's Python for either peer.
# Default data: the synthetic ImageNet (`dlperf data gen` into the cache; ~370 MB, generated once).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-}
VENVPY=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}/bin/python
PEER=torchvision
DATA=""
IMAGES=1500
WORKERS="1 2"
REPEAT=3
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift ;;
    --images) IMAGES=$2; shift ;;
    --workers) WORKERS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --peer) PEER=$2; shift ;;
    --python) PY=$2; shift ;;
    --venv) PY=$VENVPY ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$DLPERF" ] || { echo "no $DLPERF: run make first" >&2; exit 2; }
case "$PEER" in
  torchvision) PY=${PY:-/usr/bin/python3}; LOADER=$ROOT/bench/torchvision_loader.py
    "$PY" -c "import torchvision" 2>/dev/null || { echo "torchvision is not importable by $PY (scripts/setup.sh test)" >&2; exit 2; } ;;
  dali) PY=${PY:-$VENVPY}; LOADER=$ROOT/bench/dali_loader.py
    "$PY" -c "import nvidia.dali" 2>/dev/null || { echo "DALI is not importable by $PY (bench/peers-venv.sh)" >&2; exit 2; } ;;
  *) echo "--peer: torchvision or dali" >&2; exit 2 ;;
esac
if [ -z "$DATA" ]; then
  DATA=$("$DLPERF" data gen | head -1)
fi
TRAIN=$DATA
[ -d "$DATA/train" ] && TRAIN=$DATA/train
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "dataset: $TRAIN ($(find "$TRAIN" -type f | wc -l) files, $(du -sh "$TRAIN" | cut -f1)); $IMAGES images per run, batch 32, repeat $REPEAT"
echo "peer: $PEER, run by $PY"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
find "$TRAIN" -type f -exec cat {} + >/dev/null  # warm the page cache for both

for r in $(seq 1 "$REPEAT"); do
  for w in $WORKERS; do
    "$PY" "$LOADER" --data "$TRAIN" --workers "$w" --images "$IMAGES" --batch 32 --seed "$r" \
      >"$TMP/tv.$w.$r.json"
    "$DLPERF" data bench --data "$TRAIN" --workers "$w" --images "$IMAGES" --batch 32 --seed "$r" --json "$TMP/dl.$w.$r.json" \
      >/dev/null 2>>"$TMP/dlperf.log"
  done
done
"$PY" "$ROOT/bench/data_vs_torchvision_report.py" "$TMP" "$WORKERS" "$REPEAT" "$PEER"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
