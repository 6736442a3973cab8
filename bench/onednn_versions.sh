#!/bin/bash
# Which oneDNN serves dlperf's training step better: Debian's 2.6 (what dlperf built against until issue 33) or
# PyPI's 3.2 (onednn-cpu-gomp + onednn-devel-cpu-gomp: C API, headers, libdnnl.so.3 with GNU OpenMP; what dlperf
# builds against now)? Issues 14 and 33 ask for the decision by measurement, per CPU kind and precision. This
# builds bench/onednn_layers.c (ResNet-50's training step as oneDNN primitives alone:
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
# ISA (e.g. AVX512_CORE to see the non-bf16 kernels on a bf16 machine). oneDNN 3.x: the one scripts/setup.sh
# installs (DNNL_PREFIX, default build-deps/onednn-3.2; installed here when missing). oneDNN 2.x: Debian's
# libdnnl-dev (apt-get install libdnnl-dev; no longer a dlperf dependency), with onednn_layers.c as of commit
# a8c615c (its last form that compiles against 2.x; V2_REV=rev for another).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
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
V3=${DNNL_PREFIX:-$ROOT/build-deps/onednn-3.2}
V2_REV=${V2_REV:-a8c615c}
if [ ! -f "$V3/lib/libdnnl.so.3" ] || [ ! -f "$V3/include/oneapi/dnnl/dnnl.h" ]; then
  DNNL_PREFIX=$V3 "$ROOT/scripts/setup.sh" onednn >&2
fi
if ! grep -qs '^#define DNNL_VERSION_MAJOR 2' /usr/include/oneapi/dnnl/dnnl_version.h; then
  echo "onednn_versions: no oneDNN 2.x in /usr/include (apt-get install libdnnl-dev: Debian's 2.6)" >&2
  exit 2
fi
WORK=$(mktemp -d /tmp/onednn-versions.XXXXXX)
[ "$KEEP" = 1 ] || trap 'rm -rf "$WORK"' EXIT
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Werror -fopenmp"
git -C "$ROOT" show "$V2_REV:bench/onednn_layers.c" > "$WORK/onednn_layers_v2.c"
cc $CFLAGS "$WORK/onednn_layers_v2.c" -o "$WORK/layers-2" -ldnnl -lm
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
