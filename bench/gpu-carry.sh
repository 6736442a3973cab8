#!/bin/bash
# bench/gpu-carry.sh — run HERE (the Debian machine with the packages) before a GPU session. It fills .carry/
# (ignored by git) with what bench/gpu.sh needs on the H200 machine, which has the driver, nvcc and PyTorch with
# pip cuDNN/cuBLAS, but no Debian packages and no network:
#   .carry/include/       headers of jansson, libjpeg(-turbo), turbojpeg, cmocka
#   .carry/cudnn-include/ cuDNN headers (used there only if neither the toolkit nor pip's cuDNN has them)
#   .carry/lib/           the matching .so files with their link names (libjansson.so -> libjansson.so.4, ...)
#   .carry/lib-fallback/  libgomp (put on the path there only if the machine has none)
#   .carry/dnnl/          with --with-dnnl: oneDNN headers and library (~40 MB) so the `cpu` backend builds too
#   .carry/prebuilt/      dlperf and its test binaries built here with CUDA (x86-64-v3, no oneDNN/MPI/MHD): the
#                         fallback if building on the GPU machine fails
# Then the GPU session makes one call of the device tool from the repository root:
#   run(command="bash bench/gpu.sh", carry=[".carry"], timeout_s=540)
# Usage: bench/gpu-carry.sh [--with-dnnl] [--no-prebuilt]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
WITH_DNNL=0
PREBUILT=1
for a in "$@"; do
  case "$a" in
    --with-dnnl) WITH_DNNL=1 ;;
    --no-prebuilt) PREBUILT=0 ;;
    *) echo "usage: $0 [--with-dnnl] [--no-prebuilt]" >&2; exit 2 ;;
  esac
done
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIBDIR=/usr/lib/x86_64-linux-gnu
C=.carry
rm -rf "$C"
mkdir -p "$C/include" "$C/cudnn-include" "$C/lib" "$C/lib-fallback"

# .carry must never be committed: make sure git ignores it in this checkout.
if ! git check-ignore -q "$C" 2>/dev/null; then
  echo "/$C/" >> "$(git rev-parse --git-path info/exclude)"
fi

copy_hdr() { for h in "$@"; do [ -e "$h" ] || { echo "missing header $h (scripts/setup.sh test installs it)" >&2; exit 1; }; cp -L "$h" "$C/include/"; done; }
copy_lib() {  # soname [link name]
  local so=$1 link=${2:-}
  [ -e "$LIBDIR/$so" ] || { echo "missing $LIBDIR/$so" >&2; exit 1; }
  cp -L "$LIBDIR/$so" "$C/lib/$so"
  [ -n "$link" ] && ln -sf "$so" "$C/lib/$link"
  return 0
}

copy_hdr /usr/include/jansson.h /usr/include/jansson_config.h \
         /usr/include/jpeglib.h /usr/include/jmorecfg.h /usr/include/jerror.h \
         /usr/include/x86_64-linux-gnu/jconfig.h /usr/include/turbojpeg.h \
         /usr/include/cmocka.h /usr/include/cmocka_pbc.h
copy_lib libjansson.so.4 libjansson.so
copy_lib libjpeg.so.62 libjpeg.so
copy_lib libturbojpeg.so.0 libturbojpeg.so
copy_lib libcmocka.so.0 libcmocka.so
cp -L "$LIBDIR/libgomp.so.1" "$C/lib-fallback/"
cp -L "$CUDA_HOME"/include/cudnn*.h "$C/cudnn-include/"

if [ "$WITH_DNNL" = 1 ]; then
  mkdir -p "$C/dnnl/include" "$C/dnnl/lib"
  cp -rL /usr/include/oneapi "$C/dnnl/include/"
  cp -L /usr/include/dnnl*.h "$C/dnnl/include/" 2>/dev/null || true
  cp -L "$LIBDIR/libdnnl.so.2" "$C/dnnl/lib/" && ln -sf libdnnl.so.2 "$C/dnnl/lib/libdnnl.so"
  cp -L "$LIBDIR/libOpenCL.so.1" "$C/dnnl/lib/"
fi

if [ "$PREBUILT" = 1 ]; then
  echo "building the fallback binaries (CUDA, x86-64-v3, no oneDNN/MPI/MHD) ..."
  make --no-print-directory -j2 BUILD="$C/prebuilt-build" ARCH=-march=x86-64-v3 USE_DNNL=0 USE_MPI=0 USE_MHD=0 \
       USE_NCCL=0 all >"$C/prebuilt-build.log" 2>&1 || { tail -30 "$C/prebuilt-build.log"; exit 1; }
  mkdir -p "$C/prebuilt/tests"
  cp "$C/prebuilt-build/dlperf" "$C/prebuilt/"
  cp "$C"/prebuilt-build/tests/test_* "$C/prebuilt/tests/" 2>/dev/null || true
  strip -g "$C/prebuilt/dlperf" "$C"/prebuilt/tests/* 2>/dev/null || true
  git rev-parse HEAD > "$C/prebuilt/COMMIT"
  # the sources they were built from (bench/gpu.sh compares it there, where git may be absent, to skip its build)
  find src tests Makefile -type f ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -d' ' -f1 > "$C/prebuilt/SRCHASH"
  rm -rf "$C/prebuilt-build" "$C/prebuilt-build.log"
fi

size=$(du -sm "$C" | cut -f1)
tree_mb=$(git ls-files -z | xargs -0 du -cm 2>/dev/null | tail -1 | cut -f1)
echo "$C: ${size} MiB (the device tool carries at most 64 MiB with the working tree, ~${tree_mb} MiB)"
if [ $((size + tree_mb)) -gt 60 ]; then echo "too large for one device call; drop --with-dnnl" >&2; exit 1; fi
find "$C" -maxdepth 2 | sort | sed 's/^/  /'
echo 'next, in the GPU session: run(command="bash bench/gpu.sh", carry=[".carry"], timeout_s=540)'
