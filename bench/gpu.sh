#!/bin/bash
# bench/gpu.sh — issue 6's GPU check and benchmark, in one run on a machine with one NVIDIA H200 (16 cores, the
# driver, nvcc and PyTorch with pip cuDNN/cuBLAS, no Debian packages, no network), in under 8 minutes:
#   1 build    dlperf + tests with CUDA there (headers/libs it lacks come from .carry/, see bench/gpu-carry.sh);
#              the prebuilt binaries in .carry/prebuilt if that fails
#   2 check    the cuda backend against a float64 reference, op by op (fp32/fp16/bf16, cuDNN BN-Ex and our BN
#              kernels), a whole ResNet-50 training step and inference plan, graph replay, the input pipeline
#   3 harness  the backend op harness (tests/unit/test_backend_ops.c: cuda vs ref [and cpu]) when it is built
#   4 torch    PyTorch ResNet-50 on the same GPU: AMP fp16, channels_last; train batch 256, infer batch 1 and 256
#   5 dlperf   the same with `dlperf gpu bench` (and training with the per-step pinned host-to-device copy)
#   6 train    `dlperf train` on synthetic JPEGs through the real pipeline (16 cores): the data-stall fraction
#   7 profile  `dlperf gpu probe`: the H200 profile (H2D bandwidth, step time against batch size), also as a
#              machine profile (dlperf.profile/1, h200-sxm.json) for `sim:h200,profile=` and predict
#   7a nccl   `dlperf dist bench --dist nccl` on the one GPU: the nccl communicator's real calls (issue 13)
#   8 sanitize compute-sanitizer memcheck over the single-op checks, if the tool is there and time is left
#   9 summary  a table with the ratios dlperf/PyTorch and every part's status
# Each part is bounded with `timeout` inside one overall deadline; a failing part does not stop the others.
# Results go to $OUT (the device tool returns at most 8 files from there; outside that tool: out/gpu-<date>/).
#
# How a session with a GPU runs it (see docs/gpu.md): here, `bench/gpu-carry.sh`; then one device-tool call from
# the repository root:  run(command="bash bench/gpu.sh", carry=[".carry"], timeout_s=540)
# Knobs: GPU_DEADLINE_S (470), DLPERF_CHECK_IMAGE (224) / DLPERF_CHECK_BATCH (2) for the ResNet-50 step check,
# DLPERF_GPU_TRAIN_CMD (override the `dlperf train` command line), GPU_SKIP="torch,profile,..." (parts to skip).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
if [ -z "${OUT:-}" ]; then OUT="$ROOT/out/gpu-$(date +%Y%m%d-%H%M%S)"; fi
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-gpu.XXXXXX")   # raw results; $OUT gets the log, the summary, a tarball
exec > >(tee -a "$OUT/gpu.log") 2>&1
START=$(date +%s)
DEADLINE=$((START + ${GPU_DEADLINE_S:-470}))
PARTS="$WORK/parts.tsv"
: > "$PARTS"
SKIP=",${GPU_SKIP:-},"
CARRY="$ROOT/.carry"
NPROC=$(nproc 2>/dev/null || echo 16)
export ROOT OUT WORK CARRY NPROC
export DLPERF_CUDA_ALGO_CACHE="$WORK/cudnn-algos.txt"  # one algorithm search per shape across all the runs below
echo "== bench/gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || cat "$CARRY/prebuilt/COMMIT" 2>/dev/null || echo '?'), $NPROC cores, out $OUT"

now() { date +%s; }
# part NAME MAX_S RESERVE_S FUNCTION|COMMAND [ARGS]: runs it under timeout min(MAX_S, time left - RESERVE_S), where
# RESERVE_S is kept for the parts after it, and records the status. Functions are exported and run by bash -c.
part() {
  local name=$1 max=$2 reserve=$3; shift 3
  local left=$((DEADLINE - $(now) - reserve)) t0 rc status
  if [[ "$SKIP" == *",$name,"* ]]; then printf '%s\tskipped\t0\tGPU_SKIP\n' "$name" >> "$PARTS"; echo "== $name: skipped (GPU_SKIP)"; return 0; fi
  local to=$max; [ "$left" -lt "$to" ] && to=$left
  if [ "$to" -lt 15 ]; then printf '%s\tskipped\t0\tno time left\n' "$name" >> "$PARTS"; echo "== $name: skipped, no time left"; return 0; fi
  echo "== $name (timeout ${to}s): $*"
  t0=$(now)
  timeout --kill-after=10 "$to" bash -c '"$@"' "$name" "$@"; rc=$?
  case $rc in 0) status=ok ;; 77) status=skipped ;; 124|137) status="TIMEOUT(${to}s)" ;; *) status="FAIL(rc=$rc)" ;; esac
  printf '%s\t%s\t%d\t\n' "$name" "$status" $(( $(now) - t0 )) >> "$PARTS"
  echo "== $name: $status in $(( $(now) - t0 ))s"
  return 0
}

# ---- 0: what is on this machine ---------------------------------------------------------------------------
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1 | head -3
echo "host: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-), $NPROC cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo 2>/dev/null)"
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
CUDA_HOME=${CUDA_HOME:-$( [ -n "$NVCC" ] && dirname "$(dirname "$(readlink -f "$NVCC")")" )}
PY=""
for cand in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do  # the one with torch (the image's, or Debian's)
  if command -v "$cand" >/dev/null && "$cand" -c 'import torch' 2>/dev/null; then PY=$(command -v "$cand"); break; fi
done
[ -z "$PY" ] && PY=$(command -v python3)
SITES=$("$PY" -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
find_file() {  # name: first match in the toolkit, then pip's nvidia packages, then torch
  local n=$1 d f
  for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/include" "$CUDA_HOME/targets/x86_64-linux/lib"; do
    [ -e "$d/$n" ] && { echo "$d/$n"; return 0; }
  done
  for d in $SITES; do
    [ -d "$d/nvidia" ] || continue
    f=$(find "$d/nvidia" -maxdepth 4 -name "$n" 2>/dev/null | sort | head -1)
    [ -n "$f" ] && { echo "$f"; return 0; }
  done
  for d in $SITES; do
    f=$(find "$d/torch/lib" -maxdepth 1 -name "$n" 2>/dev/null | head -1)
    [ -n "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}
CUDNN_H=$(find_file cudnn.h || true)
NCCL_H=$(find_file nccl.h || true)           # the nccl communicator (dist/comm_nccl.c), when NCCL is there
NCCL_SO=$(find_file libnccl.so.2 || true)
CUDNN_SO=$(find_file libcudnn.so.9 || true)
CUBLAS_SO=$(find_file libcublas.so.13 || true)
CUDART_SO=$(find_file libcudart.so.13 || true)
CUDNN_INC=$( [ -n "$CUDNN_H" ] && dirname "$CUDNN_H" || echo "$CARRY/cudnn-include")
CUDNN_LIB=$( [ -n "$CUDNN_SO" ] && dirname "$CUDNN_SO" || echo "")
LIBPATH=""
for f in "$CUDNN_SO" "$CUBLAS_SO" "$CUDART_SO"; do [ -n "$f" ] && LIBPATH="$LIBPATH:$(dirname "$f")"; done
LIBPATH="${LIBPATH#:}:$CARRY/lib"
[ -d "$CARRY/dnnl/lib" ] && LIBPATH="$LIBPATH:$CARRY/dnnl/lib"
if ! ldconfig -p 2>/dev/null | grep -q 'libgomp.so.1 '; then LIBPATH="$LIBPATH:$CARRY/lib-fallback"; fi
echo "nvcc: ${NVCC:-none}; CUDA_HOME: ${CUDA_HOME:-none}; cudnn.h: ${CUDNN_H:-none (using .carry)}; libcudnn: ${CUDNN_SO:-none}; libcublas: ${CUBLAS_SO:-none}; libcudart: ${CUDART_SO:-none}"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0))' 2>&1
[ -d "$CARRY" ] || echo "warning: no .carry/ (run bench/gpu-carry.sh on the Debian machine and carry it): building needs jansson/libjpeg/cmocka headers"
dl() { LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
[ -n "$NCCL_SO" ] && LIBPATH="$LIBPATH:$(dirname "$NCCL_SO")"
export CUDA_HOME CUDNN_INC CUDNN_LIB LIBPATH PY NCCL_H NCCL_SO
export -f dl

# ---- 1: build ------------------------------------------------------------------------------------------------
B="$ROOT/build-gpu"
export B
build() {
  local dnnl=0 xc="-I$CARRY/include" xl="-L$CARRY/lib -Wl,-rpath,$CARRY/lib"
  if [ -d "$CARRY/dnnl" ]; then dnnl=1; xc="$xc -I$CARRY/dnnl/include"; xl="$xl -L$CARRY/dnnl/lib -Wl,-rpath,$CARRY/dnnl/lib"; fi
  [ -n "$CUDA_HOME" ] && [ -n "$CUDNN_LIB" ] || { echo "no CUDA toolkit or cuDNN library found"; return 1; }
  local nccl=0 nccl_args=()
  if [ -n "$NCCL_H" ] && [ -n "$NCCL_SO" ]; then
    nccl=1; nccl_args=(NCCL_INC="$(dirname "$NCCL_H")" NCCL_LIB="$(dirname "$NCCL_SO")")
  fi
  make --no-print-directory -j"$NPROC" BUILD="$B" USE_DNNL=$dnnl USE_MPI=0 USE_MHD=0 USE_NCCL=$nccl "${nccl_args[@]}" HAVE_CMOCKA=1 \
    CUDA_HOME="$CUDA_HOME" CUDNN_INC="$CUDNN_INC" CUDNN_LIB="$CUDNN_LIB" \
    EXTRA_CFLAGS="$xc" EXTRA_LDFLAGS="$xl" all 2>&1 | tee "$WORK/build.log" | grep -E "error|warning|dlperf build" | head -40
  [ "${PIPESTATUS[0]}" = 0 ] && [ -x "$B/dlperf" ]
}
export -f build
part build 240 230 build
if [ ! -x "$B/dlperf" ] || ! dl "$B/dlperf" version >/dev/null 2>&1; then
  if [ -x "$CARRY/prebuilt/dlperf" ]; then
    echo "== using the prebuilt binaries from .carry/prebuilt (commit $(cat "$CARRY/prebuilt/COMMIT" 2>/dev/null))"
    B="$CARRY/prebuilt"
    printf 'build\tprebuilt used\t0\t\n' >> "$PARTS"
  else
    echo "== no dlperf binary: nothing more can run"; B=""
  fi
fi
DL="$B/dlperf"
export B DL
[ -n "$B" ] && dl "$DL" version && dl "$DL" gpu info --json "$WORK/device.json"

# ---- 2-3: correctness ---------------------------------------------------------------------------------------
check() {
  [ -x "$B/tests/test_cuda_backend" ] || { echo "skipped: $B/tests/test_cuda_backend not built"; return 77; }
  DLPERF_CHECK_IMAGE=${DLPERF_CHECK_IMAGE:-224} DLPERF_CHECK_BATCH=${DLPERF_CHECK_BATCH:-2} OMP_NUM_THREADS=$NPROC \
    dl "$B/tests/test_cuda_backend" 2>&1 | tee "$WORK/check.log"
  return "${PIPESTATUS[0]}"
}
export -f check
[ -n "$B" ] && part check 200 190 check
# If the checks failed, one narrowed rerun tells where: without graphs, cuDNN BN-Ex and fused convolutions (our
# kernels and plain cuDNN convolutions only), ops and the ResNet step only.
check_plain() {
  DLPERF_CUDA_GRAPHS=0 DLPERF_CUDA_BN=own DLPERF_CUDA_FUSE_CONV=0 DLPERF_TEST_SKIP='test_graph*' \
    DLPERF_CHECK_IMAGE=${DLPERF_CHECK_IMAGE:-224} OMP_NUM_THREADS=$NPROC dl "$B/tests/test_cuda_backend" 2>&1 | tee "$WORK/check-plain.log"
  return "${PIPESTATUS[0]}"
}
export -f check_plain
if [ -n "$B" ] && grep -qE $'^check\t(FAIL|TIMEOUT)' "$PARTS"; then part check-plain 150 190 check_plain; fi
harness() {
  [ -x "$B/tests/test_backend_ops" ] || { echo "skipped: tests/unit/test_backend_ops.c is not in this checkout yet"; return 77; }
  dl "$B/tests/test_backend_ops" 2>&1 | tee "$WORK/harness.log"
  return "${PIPESTATUS[0]}"
}
export -f harness
[ -n "$B" ] && part harness 60 170 harness

# ---- 4-5: PyTorch vs dlperf on the same GPU -----------------------------------------------------------------------
part torch 120 120 "$PY" bench/gpu_torch.py --train-batch 256 --infer-batches 1,256 --json "$WORK/torch.json"
bench_dlperf() {
  local rc=0
  dl "$DL" gpu bench --batch 256 --precision fp16 --steps 30 --warmup 8 --json "$WORK/dlperf-train-b256.json" || rc=1
  dl "$DL" gpu bench --infer --batch 1 --precision fp16 --steps 200 --warmup 20 --json "$WORK/dlperf-infer-b1.json" || rc=1
  dl "$DL" gpu bench --infer --batch 256 --precision fp16 --steps 30 --warmup 8 --json "$WORK/dlperf-infer-b256.json" || rc=1
  dl "$DL" gpu bench --batch 256 --precision fp16 --steps 30 --warmup 8 --h2d --json "$WORK/dlperf-train-b256-h2d.json" || rc=1
  return $rc
}
export -f bench_dlperf
[ -n "$B" ] && part dlperf 170 80 bench_dlperf

# ---- 6: dlperf train with the real input pipeline ---------------------------------------------------------------
train_pipeline() {
  if ! dl "$DL" train --help >/dev/null 2>&1; then
    echo "skipped: this dlperf has no 'train' command yet (issue 3); nothing to measure"; return 77
  fi
  local data="$ROOT/out/gpu-synth" cmd
  if [ -n "${DLPERF_GPU_TRAIN_CMD:-}" ]; then
    cmd="$DLPERF_GPU_TRAIN_CMD"
  else
    if [ ! -d "$data/train" ] && dl "$DL" data gen --help >/dev/null 2>&1; then
      # ImageNet-like JPEGs (the generator's default sizes); option names per issue 2's vocabulary, tried in turn
      dl "$DL" data gen --out "$data" --classes 100 --images-per-class 40 --seed 1 \
        || dl "$DL" data gen --data "$data" --classes 100 --images-per-class 40 --seed 1 \
        || dl "$DL" data gen "$data" --classes 100 --images-per-class 40 --seed 1 \
        || echo "could not generate $data with 'dlperf data gen' (options differ?); using --data synthetic"
    fi
    [ -d "$data/train" ] || data=synthetic
    cmd="$DL train --device cuda --precision fp16 --model resnet50 --data $data --batch 256 --workers $NPROC --steps 60 --json $WORK/train.json"
  fi
  echo "+ $cmd"
  dl $cmd
}
export -f train_pipeline
[ -n "$B" ] && part train 120 50 train_pipeline

# ---- 7: the H200 profile --------------------------------------------------------------------------------------------
profile() {
  local rc=0
  dl "$DL" gpu probe --batches 1,64,256 --steps 10 --warmup 3 --json "$WORK/h200-profile.json" \
    --profile "$WORK/h200-sxm.json" || rc=1
  if dl "$DL" probe --help 2>/dev/null | grep -q -- "--device"; then  # the model's probe (issue 5), when present
    dl "$DL" probe --device cuda --json "$WORK/machine-profile.json" || rc=1
  fi
  return $rc
}
export -f profile
[ -n "$B" ] && part profile 150 10 profile

# ---- 7a: the nccl communicator on this GPU (one rank: the real NCCL calls; issue 13) ----------------------------------
nccl() {
  dl "$DL" dist bench --help 2>/dev/null | grep -q -- "--dist" || { echo "skipped: no dist bench in this build"; return 77; }
  dl "$DL" dist bench --dist nccl --min-bytes 1M --max-bytes 256M --factor 4 -n 20 --warmup 5 --json "$WORK/nccl-bench.json" 2>&1 | tee "$WORK/nccl.log"
  local rc=${PIPESTATUS[0]}
  grep -q "this build has no nccl communicator" "$WORK/nccl.log" && { echo "skipped: built without NCCL"; return 77; }
  return "$rc"
}
export -f nccl
[ -n "$B" ] && part nccl 40 90 nccl

# ---- 7b: memory checker over the single-op checks, if the machine has it and time is left ----------------------------
sanitize() {
  local cs; cs=$(command -v compute-sanitizer || ls "$CUDA_HOME"/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { echo "skipped: no compute-sanitizer here"; return 77; }
  DLPERF_TEST_FILTER='test_ops*' DLPERF_CUDA_GRAPHS=0 dl "$cs" --tool memcheck --error-exitcode 9 \
    "$B/tests/test_cuda_backend" 2>&1 | tail -40 | tee "$WORK/sanitize.log"
  return "${PIPESTATUS[0]}"
}
export -f sanitize
[ -n "$B" ] && part sanitize 90 0 sanitize

# ---- 8: summary, and what comes back (the device tool returns at most 8 files) ------------------------------------
"$PY" bench/gpu_report.py "$WORK" --json "$OUT/summary.json" || echo "(bench/gpu_report.py failed; the raw results are in the tarball)"
for f in check.log h200-profile.json h200-sxm.json torch.json; do [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/"; done
tar -C "$WORK" -czf "$OUT/results.tar.gz" . 2>/dev/null
echo "== total $(( $(now) - START ))s; in $OUT: $(ls "$OUT" | tr '\n' ' ')"
rm -rf "$WORK"
