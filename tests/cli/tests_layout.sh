#!/bin/bash
# The tests are found by module: every unit test is tests/unit/test_<module>_<file>.c (or test_<module>.c) and every
# end-to-end script tests/cli/<module>_<what>.sh, where <module> is a folder of src/ — so the test of
# src/<module>/<file>.c is found from its name. Subjects outside src/ that have tests of their own: fuzz (the
# corpora of tests/fuzz/, replayed by test_fuzz_corpus.c), bench (bench/'s programs), install (make install) and
# tests (this check). Runs nothing else; a second or less.
# tags: light
# timeout: 60
set -u
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

MODULES=$(find src -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
[ -n "$MODULES" ] || fail "no module folders under src/"
OTHER_UNIT="fuzz"
OTHER_CLI="bench install tests"
# Known exceptions (a test that cannot be named after its module yet): none.
KNOWN=""

# prefix_ok NAME ALLOWED...: NAME is one of ALLOWED or starts with one of them followed by "_"
prefix_ok() {
  local n=$1 m
  shift
  for m in "$@"; do
    [ "$n" = "$m" ] && return 0
    case "$n" in "${m}"_*) return 0 ;; esac
  done
  return 1
}
known() { [[ " $KNOWN " == *" $1 "* ]]; }

BAD=0; N=0
for f in tests/unit/test_*.c; do
  N=$((N + 1))
  n=$(basename "$f" .c); n=${n#test_}
  # shellcheck disable=SC2086
  prefix_ok "$n" $MODULES $OTHER_UNIT && continue
  if known "$f"; then echo "known exception (renamed at merge): $f"; continue; fi
  echo "  $f: its name does not start with a module of src/ ($(echo $MODULES | tr ' ' ','))"
  BAD=$((BAD + 1))
done
for f in tests/cli/*.sh; do
  N=$((N + 1))
  n=$(basename "$f" .sh)
  # shellcheck disable=SC2086
  prefix_ok "$n" $MODULES $OTHER_CLI && continue
  if known "$f"; then echo "known exception (renamed at merge): $f"; continue; fi
  echo "  $f: its name does not start with a module of src/ or one of: $OTHER_CLI"
  BAD=$((BAD + 1))
done
# an exception whose file is gone (renamed) is stale: the list above must lose it
for f in $KNOWN; do
  [ -e "$f" ] && continue
  echo "  $f is listed as a known exception in $0 but no longer exists: remove it from KNOWN"
  BAD=$((BAD + 1))
done
[ "$BAD" = 0 ] || fail "$BAD problem(s): names are tests/unit/test_<module>_<file>.c, tests/cli/<module>_<what>.sh"
echo "ok: $N test names start with their module"
