#!/bin/bash
# Runs dlperf's tests: the cmocka unit binaries, then the end-to-end scripts (tests/cli/*.sh, tests/py/*.py).
#   tests/run.sh --build build [--python /usr/bin/python3] [--quick] [--sanitizer] [--asan-build build-asan]
# A script exits 0 (pass), 77 (skip: it prints why) or anything else (fail). Header lines in a script:
#   "# tags: slow"   skipped by --quick;  "# tags: asan"  also run in the sanitizer pass;  "# timeout: 900"
# The closing line is "N passed, N failed, N skipped"; the exit status is non-zero if anything failed.
set -u
BUILD=build
PY=/usr/bin/python3
QUICK=0
SAN=0
ASAN_BUILD=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift ;;
    --python) PY=$2; shift ;;
    --quick) QUICK=1 ;;
    --sanitizer) SAN=1 ;;
    --asan-build) ASAN_BUILD=$2; shift ;;
    *) echo "usage: $0 [--build DIR] [--python PY] [--quick] [--sanitizer] [--asan-build DIR]" >&2; exit 2 ;;
  esac
  shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
PASS=0; FAIL=0; SKIP=0; FAILED_NAMES=""
T0=$(date +%s)

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

run_pass() {  # build-dir sanitizer(0/1)
  local b=$1 san=$2 logdir tag
  logdir="$b/test-logs"
  mkdir -p "$logdir"
  tag=""; [ "$san" = 1 ] && tag=" [asan+ubsan]"
  export DLPERF="$ROOT/$b/dlperf" PYTHON="$PY" DLPERF_ROOT="$ROOT" DLPERF_SANITIZER=$san
  export DLPERF_TEST_LOGDIR="$ROOT/$logdir"  # what a test keeps (screenshots) besides its log
  export DLPERF_TEST_TMP="${TMPDIR:-/tmp}/dlperf-test-$$"
  mkdir -p "$DLPERF_TEST_TMP"
  if [ "$san" = 1 ]; then
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  fi
  # Unit tests (cmocka): count the cases each binary reports.
  for t in "$b"/tests/test_*; do
    [ -x "$t" ] || continue
    local name log s0 rc p f
    name=$(basename "$t"); log="$logdir/$name.log"; s0=$(date +%s.%N)
    timeout 900 "$t" >"$log" 2>&1; rc=$?
    p=$(grep -o '\[  PASSED  \] [0-9]*' "$log" | awk '{s+=$4} END {print s+0}')
    f=$(grep -o '\[  FAILED  \] [0-9]*' "$log" | awk '{s+=$4} END {print s+0}')
    [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
    PASS=$((PASS + p)); FAIL=$((FAIL + f))
    if [ "$rc" = 0 ]; then
      printf 'PASS %-36s %3d cases  %5.1f s%s\n' "$name" "$p" "$(elapsed "$s0")" "$tag"
    else
      printf 'FAIL %-36s (exit %d)%s — log: %s\n' "$name" "$rc" "$tag" "$log"
      grep -E 'FAILED|ERROR|error:|ERROR: AddressSanitizer|runtime error' "$log" | head -20 | sed 's/^/     /'
      FAILED_NAMES="$FAILED_NAMES $name$tag"
    fi
  done
  # End-to-end scripts.
  for t in tests/cli/*.sh tests/py/test_*.py; do
    [ -f "$t" ] || continue
    local name log tags to s0 rc dt
    name=$(basename "$t"); log="$logdir/$name.log"
    tags=$(sed -n 's/^# tags: *//p' "$t" | head -1)
    to=$(sed -n 's/^# timeout: *//p' "$t" | head -1); to=${to:-600}
    if [ "$QUICK" = 1 ] && [[ " $tags " == *" slow "* ]]; then
      printf 'SKIP %-36s (slow; --quick)\n' "$name"; SKIP=$((SKIP + 1)); continue
    fi
    if [ "$san" = 1 ] && [[ " $tags " != *" asan "* ]]; then continue; fi
    s0=$(date +%s.%N)
    case "$t" in
      *.py) timeout "$to" "$PY" "$t" >"$log" 2>&1; rc=$? ;;
      *) timeout "$to" bash "$t" >"$log" 2>&1; rc=$? ;;
    esac
    dt=$(elapsed "$s0")
    if [ "$rc" = 0 ]; then
      printf 'PASS %-36s           %5.1f s%s\n' "$name" "$dt" "$tag"; PASS=$((PASS + 1))
    elif [ "$rc" = 77 ]; then
      printf 'SKIP %-36s %s\n' "$name" "$(tail -1 "$log")"; SKIP=$((SKIP + 1))
    else
      [ "$rc" = 124 ] && echo "     (timed out after $to s)" >>"$log"
      printf 'FAIL %-36s (exit %d, %.1f s)%s — log: %s\n' "$name" "$rc" "$dt" "$tag" "$log"
      tail -15 "$log" | sed 's/^/     /'
      FAIL=$((FAIL + 1)); FAILED_NAMES="$FAILED_NAMES $name$tag"
    fi
  done
  rm -rf "$DLPERF_TEST_TMP"
}

if [ ! -x "$BUILD/dlperf" ]; then echo "no $BUILD/dlperf: build first (make)" >&2; exit 2; fi
run_pass "$BUILD" "$SAN"
if [ -n "$ASAN_BUILD" ]; then
  if [ -x "$ASAN_BUILD/dlperf" ]; then run_pass "$ASAN_BUILD" 1
  else echo "FAIL sanitizer build missing: $ASAN_BUILD/dlperf"; FAIL=$((FAIL + 1)); fi
fi
echo
echo "tests took $(( $(date +%s) - T0 )) s"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
