#!/bin/sh
# Installs the Debian packages dlperf needs, only those missing. Run as root (or with sudo available).
#   scripts/setup.sh build   what building and `dlperf run` need (libjs-chart.js: the charts of its report.html)
#   scripts/setup.sh test    that plus what the tests and benchmarks use (cmocka, PyTorch, promtool, wrk, chromium to render the report)
set -eu
mode=${1:-build}
BUILD_PKGS="build-essential pkg-config libjpeg62-turbo-dev libturbojpeg0-dev libjansson-dev libdnnl-dev
  libmicrohttpd-dev libopenmpi-dev openmpi-bin libjs-chart.js"
TEST_PKGS="libcmocka-dev python3 python3-numpy python3-pil python3-yaml python3-torch python3-torchvision libopenblas0-pthread
  prometheus wrk curl valgrind chromium fonts-dejavu-core"
case "$mode" in
  build) want="$BUILD_PKGS" ;;
  test) want="$BUILD_PKGS $TEST_PKGS" ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
if [ -z "$missing" ]; then
  echo "setup: all $mode packages present"
  exit 0
fi
echo "setup: installing$missing"
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
  echo "setup: missing packages:$missing; run this script as root" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
echo "setup: done"
