#!/bin/bash
# Runs dlperf's tests: the cmocka unit binaries, then the end-to-end scripts (tests/cli/*.sh, tests/py/*.py).
#   tests/run.sh --build build [--python /usr/bin/python3] [--quick] [--sanitizer] [--asan-build build-asan]
#                [--jobs N]
# A script exits 0 (pass), 77 (skip: it prints why) or anything else (fail). Header lines in a script:
#   "# tags: slow"   skipped by --quick;  "# tags: asan"  also run in the sanitizer pass;  "# timeout: 900"
#   "# tags: light"  uses little CPU (it waits on timers, sockets, links) and asserts no speed: runs beside another
#                    light script (--jobs, default 2; the light ones run first; every other script runs alone)
# The unit binaries run --jobs at a time (they assert no speed either; most run on one thread).
# Results print in the order run (light scripts first, then the rest in name order) whatever ran beside what; a
# light script's time is marked "[beside]".
# Every test's wall-clock and CPU time (user + system, its child processes included), each phase's time, the
# total and the ten slowest tests are printed; the closing line is
# "N passed, N failed, N skipped"; the exit status is non-zero if anything failed.
set -u
BUILD=build
PY=/usr/bin/python3
QUICK=0
SAN=0
ASAN_BUILD=""
JOBS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift ;;
    --python) PY=$2; shift ;;
    --quick) QUICK=1 ;;
    --sanitizer) SAN=1 ;;
    --asan-build) ASAN_BUILD=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    *) echo "usage: $0 [--build DIR] [--python PY] [--quick] [--sanitizer] [--asan-build DIR] [--jobs N]" >&2; exit 2 ;;
  esac
  shift
done
case "$JOBS" in '' | *[!0-9]* | 0) echo "--jobs $JOBS: expected a count >= 1" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
PASS=0; FAIL=0; SKIP=0; FAILED_NAMES=""
T0=$(date +%s.%N)
TIMES=$(mktemp "${TMPDIR:-/tmp}/dlperf-test-times.XXXXXX")  # "seconds name" per test, for the slowest ten
PHASES=""
trap 'rm -f "$TIMES"' EXIT

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# One end-to-end script, in a subshell of its own: prints "rc seconds" (its log goes to $2).
run_script() {  # script log timeout
  local t=$1 log=$2 to=$3 s0 rc
  s0=$(date +%s.%N)
  case "$t" in
    *.py) timeout "$to" "$PY" "$t" >"$log" 2>&1; rc=$? ;;
    *) timeout "$to" bash "$t" >"$log" 2>&1; rc=$? ;;
  esac
  [ "$rc" = 124 ] && echo "     (timed out after $to s)" >>"$log"
  local dt; dt=$(elapsed "$s0")
  times >"$log.times"  # in this shell, not a subshell: its children's CPU time is the script's
  echo "$rc $dt $(child_cpu "$log.times")"
  rm -f "$log.times"
}

# The children's CPU seconds (user + system) from a file the times builtin wrote.
child_cpu() { awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"; }

# One unit binary, in a subshell of its own: prints "rc seconds cpu-seconds passed failed" (its log goes to $2).
run_unit() {  # binary log
  local t=$1 log=$2 s0 rc dt p f
  s0=$(date +%s.%N)
  timeout 900 "$t" >"$log" 2>&1; rc=$?
  dt=$(elapsed "$s0")
  times >"$log.times"
  p=$(grep -o '\[  PASSED  \] [0-9]*' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -o '\[  FAILED  \] [0-9]*' "$log" | awk '{s+=$4} END {print s+0}')
  [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
  echo "$rc $dt $(child_cpu "$log.times") $p $f"
  rm -f "$log.times"
}

# Prints the result of unit binary number $1 (its record in $RES/$1: "rc seconds cpu passed failed name log") and
# counts its cases.
report_unit() {
  local rc dt cpu p f name log
  read -r rc dt cpu p f name log <"$RES/$1"
  PASS=$((PASS + p)); FAIL=$((FAIL + f))
  if [ "$rc" = 0 ]; then
    printf 'PASS %-36s %3d cases  %5.1f s  cpu %5.1f s%s\n' "$name" "$p" "$dt" "$cpu" "$TAG"
  else
    printf 'FAIL %-36s (exit %d)%s — log: %s\n' "$name" "$rc" "$TAG" "$log"
    grep -E 'FAILED|ERROR|error:|ERROR: AddressSanitizer|runtime error' "$log" | head -20 | sed 's/^/     /'
    FAILED_NAMES="$FAILED_NAMES $name$TAG"
  fi
  echo "$dt $name$TAG" >>"$TIMES"
}

# Prints the result of script number $1 (its record in $RES/$1: "rc seconds cpu-seconds name log beside(0/1)")
# and counts it.
report_script() {
  local rc dt cpu name log beside mark=""
  read -r rc dt cpu name log beside <"$RES/$1"
  [ "$beside" = 1 ] && mark=" [beside]"
  case "$rc" in
    quick) printf 'SKIP %-36s (slow; --quick)\n' "$name"; SKIP=$((SKIP + 1)); return ;;
    0) printf 'PASS %-36s           %5.1f s  cpu %5.1f s%s%s\n' "$name" "$dt" "$cpu" "$mark" "$TAG"; PASS=$((PASS + 1)) ;;
    77) printf 'SKIP %-36s %s\n' "$name" "$(tail -1 "$log")"; SKIP=$((SKIP + 1)) ;;
    *) printf 'FAIL %-36s (exit %d, %.1f s)%s%s — log: %s\n' "$name" "$rc" "$dt" "$mark" "$TAG" "$log"
       tail -15 "$log" | sed 's/^/     /'
       FAIL=$((FAIL + 1)); FAILED_NAMES="$FAILED_NAMES $name$TAG" ;;
  esac
  echo "$dt $name$TAG" >>"$TIMES"
}

# Prints, in order, the results of the scripts that have finished and have no unfinished one before them.
NEXT=0
flush() {
  while [ "$NEXT" -lt "$N" ] && [ -f "$RES/$NEXT" ]; do "$REPORT" "$NEXT"; NEXT=$((NEXT + 1)); done
}
running() { jobs -rp | wc -l; }
wait_below() {  # waits until fewer than $1 scripts run, printing what finished
  while [ "$(running)" -ge "$1" ]; do wait -n; flush; done
  flush
}

run_pass() {  # build-dir sanitizer(0/1)
  local b=$1 san=$2 logdir p0 ps
  logdir="$b/test-logs"
  mkdir -p "$logdir"
  TAG=""; [ "$san" = 1 ] && TAG=" [asan+ubsan]"
  export DLPERF="$ROOT/$b/dlperf" PYTHON="$PY" DLPERF_ROOT="$ROOT" DLPERF_SANITIZER=$san
  export DLPERF_TEST_LOGDIR="$ROOT/$logdir"  # what a test keeps (screenshots) besides its log
  export DLPERF_TEST_TMP="${TMPDIR:-/tmp}/dlperf-test-$$"
  # OpenMP threads that wait sleep instead of spinning: the tests assert no speed, two of them share the CPUs, and
  # GNU OpenMP's spinning took half of test_backend_ops' CPU time (45 -> 23 CPU seconds with passive waits)
  export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
  mkdir -p "$DLPERF_TEST_TMP"
  if [ "$san" = 1 ]; then
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  fi
  # Unit tests (cmocka), $JOBS at a time (each is one process, most of them on one thread): count the cases each
  # binary reports; results print in the binaries' order.
  p0=$(date +%s.%N)
  RES=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-test-res.XXXXXX")
  N=0; NEXT=0; REPORT=report_unit
  for t in "$b"/tests/test_*; do
    [ -x "$t" ] || continue
    [ -f "tests/unit/$(basename "$t").c" ] || continue  # left in the build folder by a renamed or removed test
    local name log
    name=$(basename "$t"); log="$logdir/$name.log"
    wait_below "$JOBS"
    ( r=$(run_unit "$t" "$log"); echo "$r $name $log" >"$RES/$N.tmp" && mv "$RES/$N.tmp" "$RES/$N" ) &
    N=$((N + 1))
  done
  wait; flush
  rm -rf "$RES"
  ps=$(elapsed "$p0"); PHASES="$PHASES$(printf '  %-28s %7.1f s' "unit binaries$TAG" "$ps")"$'\n'
  # End-to-end scripts: the light ones first, $JOBS at a time (most of them wait on timers, sockets or a namespace's
  # link, not on the CPU); then every other one alone. Results print in that order.
  p0=$(date +%s.%N)
  RES=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-test-res.XXXXXX")
  N=0; NEXT=0; REPORT=report_script
  local all=() lights=() heavies=() t
  for t in tests/cli/*.sh tests/py/test_*.py; do [ -f "$t" ] && all+=("$t"); done
  for t in "${all[@]}"; do
    if [ "$JOBS" -gt 1 ] && [[ " $(sed -n 's/^# tags: *//p' "$t" | head -1) " == *" light "* ]]; then lights+=("$t")
    else heavies+=("$t"); fi
  done
  for t in "${lights[@]}" "${heavies[@]}"; do
    local name log tags to light
    name=$(basename "$t"); log="$logdir/$name.log"
    tags=$(sed -n 's/^# tags: *//p' "$t" | head -1)
    to=$(sed -n 's/^# timeout: *//p' "$t" | head -1); to=${to:-600}
    if [ "$san" = 1 ] && [[ " $tags " != *" asan "* ]]; then continue; fi
    if [ "$QUICK" = 1 ] && [[ " $tags " == *" slow "* ]]; then
      echo "quick 0 0 $name -" >"$RES/$N"; N=$((N + 1)); flush; continue
    fi
    light=0; [ "$JOBS" -gt 1 ] && [[ " $tags " == *" light "* ]] && light=1
    if [ "$light" = 1 ]; then wait_below "$JOBS"; else wait_below 1; fi
    ( r=$(run_script "$t" "$log" "$to"); echo "$r $name $log $light" >"$RES/$N.tmp" && mv "$RES/$N.tmp" "$RES/$N" ) &
    N=$((N + 1))
    [ "$light" = 1 ] || wait_below 1
  done
  wait; flush
  rm -rf "$RES" "$DLPERF_TEST_TMP"
  ps=$(elapsed "$p0"); PHASES="$PHASES$(printf '  %-28s %7.1f s' "scripts$TAG" "$ps")"$'\n'
}

if [ ! -x "$BUILD/dlperf" ]; then echo "no $BUILD/dlperf: build first (make)" >&2; exit 2; fi
run_pass "$BUILD" "$SAN"
if [ -n "$ASAN_BUILD" ]; then
  if [ -x "$ASAN_BUILD/dlperf" ]; then run_pass "$ASAN_BUILD" 1
  else echo "FAIL sanitizer build missing: $ASAN_BUILD/dlperf"; FAIL=$((FAIL + 1)); fi
fi
echo
echo "time per phase:"
printf '%s' "$PHASES"
echo "slowest tests:"
sort -rn "$TIMES" | head -10 | awk '{ t = $1; $1 = ""; printf "  %7.1f s %s\n", t, $0 }'
echo "tests took $(elapsed "$T0") s"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
