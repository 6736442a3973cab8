#!/bin/bash
# make install PREFIX=<temporary prefix>: the binary, its catalog in PREFIX/share/dlperf/catalog and the man page
# generated from the options tables; the installed binary, run from elsewhere, finds its catalog from its own
# location (/proc/self/exe), and a copy with no catalog near it says where it looked.
# tags: light
# timeout: 120
set -u
D=${DLPERF:?}
case $D in /*) ;; *) D=$PWD/$D ;; esac
ROOT=${DLPERF_ROOT:-$PWD}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/install.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v make >/dev/null || { echo "skip: no make"; exit 77; }
BUILD=$(dirname "$D")
# -o: the binary under test is installed as it is, never rebuilt here
make -C "$ROOT" --no-print-directory install PREFIX="$T/prefix" BUILD="$BUILD" -o "$BUILD/dlperf" >"$T/make.log" 2>&1 \
  || { cat "$T/make.log"; fail "make install"; }
for f in bin/dlperf share/dlperf/catalog/gpus.json share/dlperf/catalog/systems.json share/man/man1/dlperf.1; do
  [ -s "$T/prefix/$f" ] || fail "make install did not install $f: $(cat "$T/make.log")"
done
echo "ok make install: $(cd "$T/prefix" && find . -type f | sort | tr '\n' ' ')"

cd "$T"  # away from the source tree's catalog/
unset DLPERF_CATALOG
"$T/prefix/bin/dlperf" --version >"$T/v" || fail "installed --version"
"$T/prefix/bin/dlperf" catalog >"$T/cat" 2>&1 || fail "installed dlperf catalog: $(cat "$T/cat")"
grep -q "^catalog $T/prefix/share/dlperf/catalog" "$T/cat" || fail "the installed binary did not use PREFIX/share/dlperf/catalog: $(head -2 "$T/cat")"
"$T/prefix/bin/dlperf" predict --system dgx-a100 >"$T/pred" 2>&1 || fail "installed predict: $(cat "$T/pred")"
echo "ok the installed binary: $(head -1 "$T/v"); $(head -1 "$T/cat" | cut -d: -f1)"
mkdir "$T/lone" && cp "$T/prefix/bin/dlperf" "$T/lone/"
"$T/lone/dlperf" catalog >/dev/null 2>"$T/err" && fail "a copy with no catalog found one"
grep -q "share/dlperf/catalog" "$T/err" && grep -q "DLPERF_CATALOG" "$T/err" || fail "no catalog: message says where: $(cat "$T/err")"
DLPERF_CATALOG="$T/prefix/share/dlperf/catalog" "$T/lone/dlperf" catalog >/dev/null || fail "DLPERF_CATALOG"
echo "ok a lone copy: $(cat "$T/err")"

# the man page: every command, the options of each (from the tables)
M="$T/prefix/share/man/man1/dlperf.1"
grep -q '^\.TH DLPERF 1' "$M" || fail "man page header"
for w in '^\.SS "dlperf train"' '^\.SS "dlperf data gen"' '^\.SS "dlperf serve"' '\\-\\-mllog FILE' '\\-\\-steps\\-jsonl FILE' \
         'dlperf \\-\\-version'; do
  grep -q -- "$w" "$M" || fail "man page lacks $w"
done
if command -v man >/dev/null; then
  man -l "$M" >"$T/man.txt" 2>/dev/null || fail "man -l cannot render it"
  grep -q "dlperf train" "$T/man.txt" || fail "rendered man page lacks dlperf train"
  echo "ok man page: $(wc -l <"$M") lines of troff, renders with man -l ($(wc -l <"$T/man.txt") lines)"
else
  echo "ok man page: $(wc -l <"$M") lines of troff (man not installed: not rendered)"
fi
