#!/bin/bash
# A dlperf built with CUDA on a machine without a GPU: it starts and runs CPU commands (it links only the toolkit's
# libcudart and cuDNN, never libcuda, and loads cuBLAS only when a GPU plan is made), and every way of asking for
# the GPU ends with the clear no-device message and a non-zero exit.
# tags: asan
# timeout: 120
set -u
: "${DLPERF:?}"
out=$(mktemp); trap 'rm -f "$out"' EXIT

"$DLPERF" version >"$out" 2>&1 || { echo "dlperf version failed:"; cat "$out"; exit 1; }

"$DLPERF" gpu info >"$out" 2>&1; rc=$?
if grep -q "built without CUDA" "$out"; then
  [ "$rc" -ne 0 ] || { echo "gpu info in a build without CUDA exited 0"; exit 1; }
  echo "skipped: this dlperf was built without CUDA (no nvcc/cuDNN, or USE_CUDA=0): nothing to check"
  exit 77
fi
if [ "$rc" -eq 0 ]; then
  echo "skipped: a CUDA device is present here ($(head -1 "$out")); bench/gpu.sh checks the GPU"
  exit 77
fi

if command -v ldd >/dev/null; then
  if ldd "$DLPERF" | grep -Eq 'libcuda\.so|libcublas'; then
    echo "dlperf links libcuda or libcublas at start-up (it must not):"; ldd "$DLPERF"; exit 1
  fi
fi

expect_no_device() {  # description, command...
  local what=$1; shift
  "$@" >"$out" 2>&1; local rc=$?
  if [ "$rc" -eq 0 ]; then echo "$what: exit 0 without a GPU"; cat "$out"; exit 1; fi
  if ! grep -q "no CUDA device found (cudaGetDeviceCount: " "$out" || ! grep -q "hint: use --device cpu or sim:h200" "$out"; then
    echo "$what: exit $rc but not the no-device message:"; cat "$out"; exit 1
  fi
  echo "ok: $what -> exit $rc: $(head -1 "$out")"
}
expect_no_device "dlperf gpu info" "$DLPERF" gpu info
expect_no_device "dlperf gpu bench" "$DLPERF" gpu bench --batch 2 --steps 1
expect_no_device "dlperf gpu probe" "$DLPERF" gpu probe --batches 1 --steps 1
# Other commands reach the same message through the backend registry.
if "$DLPERF" nn bench --help >/dev/null 2>&1; then
  expect_no_device "dlperf nn bench --device cuda" "$DLPERF" nn bench --device cuda --model resnet-mini --batch 2 --size 32 --steps 1
fi
if "$DLPERF" train --help >/dev/null 2>&1; then
  expect_no_device "dlperf train --device cuda" "$DLPERF" train --device cuda --steps 1 --batch 2
fi
# CPU work still runs in the same binary after the failed GPU request.
"$DLPERF" version >/dev/null 2>&1 || { echo "dlperf version failed after the GPU requests"; exit 1; }
exit 0
