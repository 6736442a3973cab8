#!/bin/bash
# Which oneDNN serves dlperf's training step better: Debian's 2.6 (what dlperf builds against) or PyPI's 3.2
# (onednn-cpu-gomp + onednn-devel-cpu-gomp: C API, headers, libdnnl.so.3 with GNU OpenMP)? Issue 14 asks for the
# decision by measurement. This builds bench/onednn_layers.c (ResNet-50's training step as oneDNN primitives alone:
# every convolution shape forward / backward data / backward weights, the batch norms, the residual add + ReLU, the
# weight casts and weight-gradient reorders) against each, runs both on the same machine in alternating rounds and
# prints, per primitive and per kind of work, the milliseconds, the implementation each version chose, and the
# ratio 3.2 / 2.6 (below 1: 3.2 is faster). The forward outputs of both must agree (a checksum per layer).
#
#   bench/onednn_versions.sh [--precision fp32|bf16] [--batch 32] [--size 224] [--threads N] [--reps 3]
#                            [--rounds 2] [--no-winograd] [--isa ONEDNN_MAX_CPU_ISA] [--json FILE] [--keep]
#
# --no-winograd: direct convolutions in 2.6 too (3.x has no Winograd on CPUs; by default 2.6 uses it in the
# backward passes of 3x3 stride-1 fp32 convolutions, as dlperf's training plan does). --isa caps both libraries'
# ISA (e.g. AVX512_CORE to see the non-bf16 kernels on a bf16 machine). The 3.2 wheels are downloaded once (pip
# download, no install) into ${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/onednn-3.2; they are not a dlperf dependency.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/dlperf
PREC=fp32
BATCH=32
SIZE=224
THREADS=$(nproc)
REPS=3
ROUNDS=2
WINO=""
ISA=""
JSON=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --precision) PREC=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --no-winograd) WINO=--no-winograd ;;
    --isa) ISA=$2; shift ;;
    --json) JSON=$2; shift ;;
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PY=${PYTHON:-/usr/bin/python3}
V3=$CACHE/onednn-3.2
if [ ! -f "$V3/lib/libdnnl.so.3" ] || [ ! -f "$V3/include/oneapi/dnnl/dnnl.h" ]; then
  echo "onednn_versions: fetching onednn-cpu-gomp + onednn-devel-cpu-gomp 2023.2.0 (oneDNN 3.2) into $V3" >&2
  rm -rf "$V3.tmp" && mkdir -p "$V3.tmp/whl"
  "$PY" -m pip download -q --no-deps -d "$V3.tmp/whl" onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 >&2
  for w in "$V3.tmp"/whl/*.whl; do "$PY" -m zipfile -e "$w" "$V3.tmp/x"; done
  mkdir -p "$V3.tmp/lib" "$V3.tmp/include"
  cp -a "$V3.tmp"/x/*.data/data/lib/libdnnl.so* "$V3.tmp/lib/"
  cp -a "$V3.tmp"/x/*.data/data/include/. "$V3.tmp/include/"
  rm -rf "$V3.tmp/whl" "$V3.tmp/x" "$V3" && mv "$V3.tmp" "$V3"
fi
WORK=$(mktemp -d /tmp/onednn-versions.XXXXXX)
[ "$KEEP" = 1 ] || trap 'rm -rf "$WORK"' EXIT
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Werror -fopenmp"
cc $CFLAGS "$ROOT/bench/onednn_layers.c" -o "$WORK/layers-2" -ldnnl -lm
cc $CFLAGS -I"$V3/include" "$ROOT/bench/onednn_layers.c" -o "$WORK/layers-3" -L"$V3/lib" -Wl,-rpath,"$V3/lib" \
  -l:libdnnl.so.3 -lm
ARGS="--batch $BATCH --size $SIZE --precision $PREC --reps $REPS $WINO --json"
echo "onednn_versions: ResNet-50 training step as oneDNN primitives, $PREC, batch $BATCH, ${SIZE}px, $THREADS threads," \
  "$ROUNDS round(s) alternating, CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)${ISA:+, ONEDNN_MAX_CPU_ISA=$ISA}" >&2
for r in $(seq 1 "$ROUNDS"); do
  for v in 2 3; do
    echo "-- round $r: oneDNN $v.x" >&2
    env OMP_NUM_THREADS="$THREADS" ${ISA:+ONEDNN_MAX_CPU_ISA=$ISA} "$WORK/layers-$v" $ARGS > "$WORK/r$r-v$v.jsonl"
  done
done
"$PY" "$ROOT/bench/onednn_versions_report.py" --dir "$WORK" --rounds "$ROUNDS" ${JSON:+--json "$JSON"}
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bench/onednn_versions.sh --precision $PREC --batch $BATCH --size $SIZE --threads $THREADS --reps $REPS" \
  "--rounds $ROUNDS $WINO${ISA:+ --isa $ISA}"
