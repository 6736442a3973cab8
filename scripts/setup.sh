#!/bin/sh
# Installs what dlperf needs, only what is missing: the Debian packages (as root, or with sudo available) and
# oneDNN 3.x for the cpu backend.
#   scripts/setup.sh build    what building and `dlperf run` need (libjs-chart.js: the charts of its report.html)
#   scripts/setup.sh test     that plus what the tests and benchmarks use (cmocka, PyTorch, promtool, wrk, chromium to render the report)
#   scripts/setup.sh onednn   only oneDNN 3.x (no root needed)
# oneDNN: Debian 12 ships 2.x only (libdnnl-dev), and the cpu backend is written against the 3.x C API, so PyPI's
# onednn-cpu-gomp + onednn-devel-cpu-gomp (oneDNN 3.2, GNU OpenMP, headers and libdnnl.so.3) are installed with
# `python3 -m pip install --prefix` into DNNL_PREFIX (default build-deps/onednn-3.2 in the repository, ignored by
# git and kept by `make clean`; the Makefile looks there and sets an rpath). A --prefix install touches no Python
# environment (PEP 668's externally-managed check does not apply to it). DLPERF_ONEDNN_WHEELS=DIR installs from
# wheels in DIR without the network.
set -eu
mode=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DNNL_PREFIX=${DNNL_PREFIX:-$ROOT/build-deps/onednn-3.2}
ONEDNN_PKGS="onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0"
BUILD_PKGS="build-essential pkg-config libjpeg62-turbo-dev libturbojpeg0-dev libjansson-dev python3 python3-pip
  libmicrohttpd-dev libopenmpi-dev openmpi-bin libjs-chart.js"
TEST_PKGS="libcmocka-dev python3-numpy python3-pil python3-yaml python3-torch python3-torchvision libopenblas0-pthread
  prometheus wrk curl valgrind chromium fonts-dejavu-core"

# oneDNN 3.x in DNNL_PREFIX (lib/libdnnl.so.3, include/oneapi/dnnl/): nothing when it is there already.
onednn_install() {
  v="$DNNL_PREFIX/include/oneapi/dnnl/dnnl_version.h"
  if [ -f "$DNNL_PREFIX/lib/libdnnl.so.3" ] && grep -q '^#define DNNL_VERSION_MAJOR 3' "$v" 2>/dev/null; then
    echo "setup: oneDNN 3.x present in $DNNL_PREFIX"
    return 0
  fi
  py=$(command -v python3 || true)
  if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "setup: oneDNN 3.x needs python3 -m pip (Debian: apt-get install python3-pip; scripts/setup.sh build does)" >&2
    return 1
  fi
  echo "setup: installing oneDNN 3.2 ($ONEDNN_PKGS) into $DNNL_PREFIX"
  tmp="$DNNL_PREFIX.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  src=""
  [ -n "${DLPERF_ONEDNN_WHEELS:-}" ] && src="--no-index --find-links $DLPERF_ONEDNN_WHEELS"
  # shellcheck disable=SC2086
  if ! "$py" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps --no-warn-script-location \
      --root-user-action=ignore --prefix "$tmp/pfx" $src $ONEDNN_PKGS; then
    rm -rf "$tmp"
    echo "setup: pip could not install $ONEDNN_PKGS (no network? DLPERF_ONEDNN_WHEELS=DIR installs from wheels)" >&2
    return 1
  fi
  # The wheels' data files land in <prefix>/lib and <prefix>/include, or under <prefix>/local with Debian's pip:
  # gather them into one layout.
  lib=$(find "$tmp/pfx" -name 'libdnnl.so.3' | head -n1)
  inc=$(find "$tmp/pfx" -path '*/include/oneapi/dnnl/dnnl.h' | head -n1)
  if [ -z "$lib" ] || [ -z "$inc" ]; then
    rm -rf "$tmp"
    echo "setup: the oneDNN wheels hold no libdnnl.so.3 or oneapi/dnnl/dnnl.h" >&2
    return 1
  fi
  mkdir -p "$tmp/lib" "$tmp/include"
  cp -a "$(dirname "$lib")"/libdnnl.so* "$tmp/lib/"
  cp -a "$(dirname "$(dirname "$(dirname "$inc")")")"/. "$tmp/include/"
  rm -rf "$tmp/pfx" "$DNNL_PREFIX"
  mv "$tmp" "$DNNL_PREFIX"
  echo "setup: oneDNN $(sed -n 's/^#define DNNL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
    "$DNNL_PREFIX/include/oneapi/dnnl/dnnl_version.h" | paste -sd.) in $DNNL_PREFIX"
}

case "$mode" in
  build) want="$BUILD_PKGS" ;;
  test) want="$BUILD_PKGS $TEST_PKGS" ;;
  onednn) onednn_install; exit $? ;;
  *) echo "usage: $0 build|test|onednn" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
if [ -z "$missing" ]; then
  echo "setup: all $mode packages present"
else
  echo "setup: installing$missing"
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: missing packages:$missing; run this script as root" >&2; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
onednn_install
echo "setup: done"
