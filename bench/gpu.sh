#!/bin/bash
# bench/gpu.sh — the GPU check: one prepared run, at most 300 s of device time after the machine has started
# (a lent GPU gives 15 minutes in all, start-up included; docs/gpu.md says what to run first and where the figures
# go). Parts in order of what the catalog and the backend need most; each has its own bound (`timeout`), and a
# failing part does not stop the others; none is rerun.
#
#   part        bound  what
#   build         90   dlperf + test_backend_ops + test_backend_cuda with CUDA there (build-gpu/); the binaries of
#                      .carry/prebuilt when they were built from these very sources (0 s), or when the build fails
#   info           5   dlperf gpu info: device, driver, runtime, cuDNN, cuBLAS
#   bench-fp16    25   dlperf gpu bench: ResNet-50 training, batch 256, fp16
#   bench-bf16    20   the same in bf16
#   bench-fp32    15   the same in fp32 (10 steps)
#   profile       50   dlperf gpu probe --batches 1,64,256: the H200 profile (h200-profile.json) and the machine
#                      profile for sim:h200 and predict (h200-sxm.json)
#   ops           25   build-gpu/tests/test_backend_ops: every op and step of cuda against ref
#   check         45   build-gpu/tests/test_backend_cuda: single ops, ResNet-50 step (DLPERF_CHECK_IMAGE px),
#                      graph replay, the input pipeline against the float64 reference
#   nccl          20   dlperf dist bench --dist nccl on the one GPU: the communicator's real calls
#   wrap-up        5   summary.json, results.tar.gz
#   --- then, only in the time left before the 300 s deadline (each at most its bound):
#   infer         15   dlperf gpu bench --infer, batch 1 and 256
#   torch         40   PyTorch AMP channels_last on the same GPU (bench/gpu_torch.py), for the ratios
#   h2d           10   dlperf gpu bench with the per-step pinned host-to-device copy
#   train         40   dlperf train --device cuda on generated JPEGs through the real pipeline (data stall)
#   sanitize      20   compute-sanitizer memcheck over test_backend_cuda's single-op checks
#
# Every dlperf and test process runs with DLPERF_LOG=debug (algorithms chosen, BN-Ex use, graph captures that failed
# and the call that broke them) into its part's log; a failing part's log tail goes into gpu.log.
# Results: $OUT (the device tool's output folder) or --out DIR, else out/gpu-<date>/: gpu.log, summary.json,
# h200-profile.json, h200-sxm.json, results.tar.gz (every log and JSON) — 5 files (the tool returns at most 8).
#
# Usage: bench/gpu.sh [--dry-run] [--out DIR]
#   --dry-run  print the parts, their bounds and the total, and the command lines each part runs (the dlperf ones
#              also checked with `dlperf --parse-only` when build/dlperf exists); needs no GPU, builds nothing
# Knobs: GPU_SKIP="torch,train,..." (parts to skip), DLPERF_CHECK_IMAGE (112), GPU_BUILD=1 (build even when the
# prebuilt binaries match).
# The run, from the repository root (bench/gpu-carry.sh first, here):
#   run(command="bash bench/gpu.sh", carry=[".carry"], timeout_s=360)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
DRY=0
OUTDIR=${OUT:-}
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --out) OUTDIR=${2:?--out needs a directory}; shift ;;
    --out=*) OUTDIR=${1#--out=} ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

TOTAL_S=300   # the device time this run may take after start-up
# name:bound:fixed|left — fixed parts run in order, each in its bound (their sum is the total); "left" parts run
# after them in the time left before the deadline.
PLAN="build:90:fixed info:5:fixed bench-fp16:25:fixed bench-bf16:20:fixed bench-fp32:15:fixed profile:50:fixed
ops:25:fixed check:45:fixed nccl:20:fixed wrap-up:5:fixed infer:15:left torch:40:left h2d:10:left train:40:left
sanitize:20:left"
bound() { local p; for p in $PLAN; do [ "${p%%:*}" = "$1" ] && { p=${p#*:}; echo "${p%%:*}"; return; }; done; echo 0; }
kind() { local p; for p in $PLAN; do [ "${p%%:*}" = "$1" ] && { echo "${p##*:}"; return; }; done; }
SKIP=",${GPU_SKIP:-},"
NPROC=$(nproc 2>/dev/null || echo 16)
CHECK_IMAGE=${DLPERF_CHECK_IMAGE:-112}

# ---- the parts: every outside command goes through `dl` (in --dry-run, dl prints it and parses dlperf's) -------
part_info() { dl "$DL" gpu info --json "$WORK/device.json"; }
part_bench_fp16() {
  dl "$DL" gpu bench --batch 256 --precision fp16 --steps 20 --warmup 5 --json "$WORK/dlperf-train-b256.json"
}
part_bench_bf16() {
  dl "$DL" gpu bench --batch 256 --precision bf16 --steps 20 --warmup 5 --json "$WORK/dlperf-train-b256-bf16.json"
}
part_bench_fp32() {
  dl "$DL" gpu bench --batch 256 --precision fp32 --steps 10 --warmup 3 --json "$WORK/dlperf-train-b256-fp32.json"
}
part_profile() {
  dl "$DL" gpu probe --batches 1,64,256 --steps 8 --warmup 3 --json "$WORK/h200-profile.json" \
    --profile "$WORK/h200-sxm.json"
}
part_ops() { dl "$B/tests/test_backend_ops"; }
part_check() { DLPERF_CHECK_IMAGE=$CHECK_IMAGE DLPERF_CHECK_BATCH=2 OMP_NUM_THREADS=$NPROC dl "$B/tests/test_backend_cuda"; }
part_nccl() {
  local out rc
  out=$(dl "$DL" dist bench --dist nccl --min-bytes 1M --max-bytes 256M --factor 4 -n 10 --warmup 3 \
          --json "$WORK/nccl-bench.json" 2>&1); rc=$?
  echo "$out"
  [[ $rc != 0 && "$out" == *"no nccl communicator"* ]] && { echo "skipped: built without NCCL"; return 77; }
  return "$rc"
}
part_infer() {
  local rc=0
  dl "$DL" gpu bench --infer --batch 1 --precision fp16 --steps 100 --warmup 10 --json "$WORK/dlperf-infer-b1.json" || rc=1
  dl "$DL" gpu bench --infer --batch 256 --precision fp16 --steps 20 --warmup 5 --json "$WORK/dlperf-infer-b256.json" || rc=1
  return $rc
}
part_torch() { dl "$PY" bench/gpu_torch.py --train-batch 256 --infer-batches 1,256 --json "$WORK/torch.json"; }
part_h2d() {
  dl "$DL" gpu bench --batch 256 --precision fp16 --steps 20 --warmup 5 --h2d --json "$WORK/dlperf-train-b256-h2d.json"
}
part_train() {
  local data="$WORK/synth"
  dl "$DL" data gen --out "$data" --classes 100 --per-class 40 --val-per-class 2 --seed 1 --workers "$NPROC" || return 1
  dl "$DL" train --device cuda --precision fp16 --model resnet50 --data "$data" --batch 256 --workers "$NPROC" --steps 40 \
    --json "$WORK/train.json"
}
part_sanitize() {
  local cs; cs=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || [ "$DRY" = 1 ] || { echo "skipped: no compute-sanitizer here"; return 77; }
  DLPERF_TEST_FILTER='test_ops*' DLPERF_CUDA_GRAPHS=0 dl "${cs:-compute-sanitizer}" --tool memcheck --error-exitcode 9 \
    "$B/tests/test_backend_cuda"
}

# ---- --dry-run: the plan, its bounds and total, each part's command lines (dlperf's parsed) ---------------------
if [ "$DRY" = 1 ]; then
  LOCAL_DL=""; [ -x "$ROOT/build/dlperf" ] && LOCAL_DL="$ROOT/build/dlperf"
  B="<build-gpu>"; DL="$B/dlperf"; WORK="<work>"; PY=python3; BAD=0
  dl() {  # print; parse the dlperf ones with the real option parser
    echo "      $*"
    if [ "$1" = "$DL" ] && [ -n "$LOCAL_DL" ]; then
      local err; err=$("$LOCAL_DL" --parse-only "${@:2}" 2>&1 >/dev/null) && return 0
      if [[ "$err" == *"built without CUDA"* ]]; then echo "      ^ not parsed: build/dlperf is built without CUDA"
      else echo "      ^ does not parse: $err"; BAD=1; fi
    fi
    return 0
  }
  echo "bench/gpu.sh --dry-run: parts in order, each bounded by timeout (seconds)"
  fixed=0 left=0
  for p in $PLAN; do
    IFS=: read -r name b kind <<< "$p"
    if [ "$kind" = fixed ]; then fixed=$((fixed + b)); tag=""; else left=$((left + b)); tag=" (only in the time left)"; fi
    printf '  %-11s %4d s%s\n' "$name" "$b" "$tag"
    case $name in
      build) echo "      make BUILD=build-gpu build-gpu/dlperf build-gpu/tests/test_backend_ops build-gpu/tests/test_backend_cuda (or .carry/prebuilt)" ;;
      wrap-up) echo "      python3 bench/gpu_report.py <work> --json \$OUT/summary.json; tar of <work> into \$OUT/results.tar.gz" ;;
      *) "part_${name//-/_}" ;;
    esac
  done
  echo "total: ${fixed} s for the parts in order (bound: ${TOTAL_S} s); the 'time left' parts ($left s at most) run only"
  echo "       in what they leave; every part ends before the ${TOTAL_S} s deadline (set-up included) less wrap-up's 5 s"
  [ -z "$LOCAL_DL" ] && echo "note: no build/dlperf here: the dlperf command lines were not parsed"
  [ "$fixed" -le "$TOTAL_S" ] || { echo "error: the parts' bounds add up to more than $TOTAL_S s"; exit 1; }
  [ "$BAD" = 0 ] || { echo "error: a dlperf command line above does not parse"; exit 1; }
  exit 0
fi

# ---- the run -------------------------------------------------------------------------------------------------------
START=$(date +%s)
DEADLINE=$((START + TOTAL_S))
now() { date +%s; }
[ -n "$OUTDIR" ] || OUTDIR="$ROOT/out/gpu-$(date +%Y%m%d-%H%M%S)"
OUT=$OUTDIR
mkdir -p "$OUT" || exit 2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-gpu.XXXXXX")   # logs and raw results; $OUT gets the log, summary, tarball
exec > >(tee -a "$OUT/gpu.log") 2>&1
TEE_PID=$!
PARTS="$WORK/parts.tsv"
: > "$PARTS"
CARRY="$ROOT/.carry"
export ROOT OUT WORK CARRY NPROC CHECK_IMAGE DRY
export DLPERF_CUDA_ALGO_CACHE="$WORK/cudnn-algos.txt"  # one algorithm search per shape across the parts
echo "== bench/gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || cat "$CARRY/prebuilt/COMMIT" 2>/dev/null || echo '?'), $NPROC cores, out $OUT, deadline ${TOTAL_S} s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1 | head -3
HAVE_GPU=0; nvidia-smi -L >/dev/null 2>&1 && HAVE_GPU=1
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

# every command of a part: the libraries found above, and the debug log (what a failure needs to be understood)
dl() { DLPERF_LOG=debug LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
export -f dl part_info part_bench_fp16 part_bench_bf16 part_bench_fp32 part_profile part_ops part_check part_nccl \
  part_infer part_torch part_h2d part_train part_sanitize

# run_part NAME: its function under timeout (its bound; a "left" part: at most the time left before the deadline),
# output in $WORK/NAME.log; the tail goes to gpu.log (40 lines on failure, 4 on success).
run_part() {
  local name=$1 b kind to rc status t0 log="$WORK/$1.log"
  b=$(bound "$name"); kind=$(kind "$name")
  if [[ "$SKIP" == *",$name,"* ]]; then printf '%s\tskipped\t0\tGPU_SKIP\n' "$name" >> "$PARTS"; echo "== $name: skipped (GPU_SKIP)"; return; fi
  if [ -z "$B" ]; then printf '%s\tskipped\t0\tno binaries\n' "$name" >> "$PARTS"; echo "== $name: skipped, no binaries"; return; fi
  if [ "$HAVE_GPU" = 0 ] && [ "$name" != build ]; then printf '%s\tskipped\t0\tno GPU\n' "$name" >> "$PARTS"; echo "== $name: skipped, no GPU (nvidia-smi -L failed)"; return; fi
  # every part ends before the deadline (less the wrap-up's bound): the set-up above and the parts' kill grace
  # come out of the last parts, never on top of the total; a "left" part needs 8 s at least to start
  to=$b
  local left=$((DEADLINE - $(now) - $(bound wrap-up)))
  [ "$left" -lt "$to" ] && to=$left
  if [ "$to" -lt 8 ] && { [ "$kind" = left ] || [ "$to" -lt 1 ]; }; then
    printf '%s\tskipped\t0\tno time left\n' "$name" >> "$PARTS"; echo "== $name: skipped, no time left"; return
  fi
  echo "== $name (timeout ${to}s)"
  t0=$(now)
  timeout --kill-after=2 "$to" bash -c "part_${name//-/_}" > "$log" 2>&1; rc=$?
  case $rc in 0) status=ok ;; 77) status=skipped ;; 124|137) status="TIMEOUT(${to}s)" ;; *) status="FAIL(rc=$rc)" ;; esac
  printf '%s\t%s\t%d\t\n' "$name" "$status" $(( $(now) - t0 )) >> "$PARTS"
  if [ "$status" = ok ] || [ "$status" = skipped ]; then grep -v '^debug' "$log" | tail -4 | sed 's/^/   /'
  else echo "   -- last 40 lines of $name.log (DLPERF_LOG=debug):"; tail -40 "$log" | sed 's/^/   /'; fi
  echo "== $name: $status in $(( $(now) - t0 ))s"
  local f  # the figures the catalog needs go back even if the run is cut short later
  for f in h200-profile.json h200-sxm.json; do [ -f "$WORK/$f" ] && [ ! -f "$OUT/$f" ] && cp "$WORK/$f" "$OUT/"; done
}

# ---- build (or the prebuilt binaries of this very commit) -------------------------------------------------------------
B="$ROOT/build-gpu"
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
    EXTRA_CFLAGS="$xc" EXTRA_LDFLAGS="$xl" config "$B/dlperf" "$B/tests/test_backend_ops" "$B/tests/test_backend_cuda" 2>&1 | tee "$WORK/build.log" | grep -E "error|warning|dlperf build" | head -40
  [ "${PIPESTATUS[0]}" = 0 ] && [ -x "$B/dlperf" ]
}
part_build() { build; }
export -f build part_build
export B CUDA_HOME CUDNN_INC CUDNN_LIB LIBPATH PY NCCL_H NCCL_SO
SRCHASH=$(find src tests Makefile -type f ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -d' ' -f1)
if [ "${GPU_BUILD:-0}" != 1 ] && [ -x "$CARRY/prebuilt/dlperf" ] && [ "$(cat "$CARRY/prebuilt/SRCHASH" 2>/dev/null)" = "$SRCHASH" ] \
   && dl "$CARRY/prebuilt/dlperf" version >/dev/null 2>&1; then
  echo "== build: .carry/prebuilt was built from these sources (commit $(cat "$CARRY/prebuilt/COMMIT" 2>/dev/null)): no build"
  B="$CARRY/prebuilt"
  printf 'build\tprebuilt\t0\t\n' >> "$PARTS"
else
  run_part build
  if [ ! -x "$B/dlperf" ] || ! dl "$B/dlperf" version >/dev/null 2>&1; then
    if [ -x "$CARRY/prebuilt/dlperf" ]; then
      echo "== using the prebuilt binaries of .carry/prebuilt (commit $(cat "$CARRY/prebuilt/COMMIT" 2>/dev/null))"
      B="$CARRY/prebuilt"
      printf 'build-fallback\tprebuilt used\t0\t\n' >> "$PARTS"
    else
      echo "== no dlperf binary: nothing more can run"; B=""
    fi
  fi
fi
DL="$B/dlperf"
export B DL
[ -n "$B" ] && dl "$DL" version 2>&1 | head -3

# ---- the parts ----------------------------------------------------------------------------------------------------------
for p in $PLAN; do
  name=${p%%:*}
  case $name in build|wrap-up) continue ;; esac
  run_part "$name"
done

# ---- wrap-up: what comes back (the device tool returns at most 8 files) -------------------------------------------------
timeout 20 "$PY" bench/gpu_report.py "$WORK" --json "$OUT/summary.json" || echo "(bench/gpu_report.py failed; the raw results are in the tarball)"
for f in h200-profile.json h200-sxm.json; do [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/"; done
tar -C "$WORK" -czf "$OUT/results.tar.gz" --exclude=synth . 2>/dev/null
echo "== parts:"; column -t -s $'\t' "$PARTS" 2>/dev/null || cat "$PARTS"
echo "== total $(( $(now) - START ))s of ${TOTAL_S}s; in $OUT: $(ls "$OUT" | tr '\n' ' ')"
rm -rf "$WORK"
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null  # gpu.log complete before the device tool collects $OUT
