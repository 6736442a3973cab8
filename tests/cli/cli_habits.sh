#!/bin/bash
# Issue 17's CLI habits: --version/-V, '-' for stdout wherever a file is written (the summary then on stderr),
# /dev/stdout accepted, error locations only with -v, and one meaning per short option across every command (the
# --help of each command, printed from its options table).
# tags: asan light
# timeout: 120
set -u
D=${DLPERF:?}
case $D in /*) ;; *) D=$PWD/$D ;; esac
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/habits.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. --version and -V: "dlperf X.Y.Z" first, exit 0
for v in --version -V; do
  "$D" $v >"$T/v" 2>&1 || fail "dlperf $v exits $?: $(cat "$T/v")"
  grep -Eq '^dlperf [0-9]+\.[0-9]+\.[0-9]+$' <(head -1 "$T/v") || fail "dlperf $v: first line '$(head -1 "$T/v")'"
  grep -q '^built with: .*jansson' "$T/v" || fail "dlperf $v: no 'built with' line"
done
echo "ok --version: $(head -1 "$T/v")"

# 2. --json -: the JSON alone on stdout (parseable), the summary on stderr, no file named '-'
(cd "$T" && "$D" predict --system dgx-a100 --json - >"$T/out.json" 2>"$T/err") || fail "predict --json - failed: $(cat "$T/err")"
[ -e "$T/-" ] && fail "--json - created a file named '-'"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema"].startswith("dlperf.predict"), d["schema"]' "$T/out.json" \
  || fail "stdout is not the JSON result alone: $(head -5 "$T/out.json")"
grep -q "dgx-a100" "$T/err" || fail "the summary did not go to stderr: $(head -3 "$T/err")"
echo "ok --json -: stdout is the dlperf.predict JSON ($(wc -c <"$T/out.json") bytes), summary on stderr"
"$D" predict --system dgx-a100 --json /dev/stdout >"$T/out2.json" 2>"$T/err" || fail "--json /dev/stdout refused: $(cat "$T/err")"
$PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out2.json" || fail "--json /dev/stdout: not JSON"
echo "ok --json /dev/stdout"
"$D" predict --system dgx-a100 --json=- >"$T/out3.json" 2>"$T/err" || fail "--json=- failed: $(cat "$T/err")"
$PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out3.json" || fail "--json=-: stdout is not the JSON alone"
echo "ok --json=-"
# a regular file that exists is still never overwritten
echo '{}' >"$T/exists.json"
"$D" predict --system dgx-a100 --json "$T/exists.json" >/dev/null 2>"$T/err" && fail "--json overwrote an existing file"
grep -q "already exists" "$T/err" || fail "no 'already exists': $(cat "$T/err")"

# 3. error locations: not by default, with -v (on the command, or before it)
"$D" predict --system nope >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] || fail "predict --system nope succeeded"
grep -q "unknown system 'nope'" "$T/err" || fail "no message: $(cat "$T/err")"
grep -q '^  at ' "$T/err" && fail "source locations printed without -v: $(cat "$T/err")"
"$D" predict --system nope -v >/dev/null 2>"$T/err"
grep -Eq '^  at [a-z]+/[a-z_]+\.c:[0-9]+' "$T/err" || fail "-v: no source locations: $(cat "$T/err")"
"$D" -v predict --system nope >/dev/null 2>"$T/err"
grep -Eq '^  at [a-z]+/[a-z_]+\.c:[0-9]+' "$T/err" || fail "dlperf -v predict: no source locations: $(cat "$T/err")"
echo "ok error locations only with -v"

# 4. one meaning per short option: every command's and sub-command's --help, from its options table.
cmds() { awk '/^commands:/ {on=1; next} on && /^  [a-z]/ {print $1}'; }
: >"$T/shorts"
for c in $("$D" --help | cmds); do
  out=$("$D" "$c" --help 2>&1)
  if grep -q '^commands:' <<<"$out"; then
    for s in $(cmds <<<"$out"); do "$D" "$c" "$s" --help 2>&1 | sed "s|^|$c $s\t|" >>"$T/shorts"; done
  else
    sed "s|^|$c\t|" <<<"$out" >>"$T/shorts"
  fi
done
$PY - "$T/shorts" <<'PY' || fail "short options"
import re, sys, collections
seen = collections.defaultdict(set)
for line in open(sys.argv[1]):
    cmd, _, text = line.rstrip("\n").partition("\t")
    m = re.match(r"  -(\w), --([\w-]+)", text)
    if m:
        seen[m.group(1)].add((m.group(2), cmd))
bad = {k: v for k, v in seen.items() if len({n for n, _ in v}) > 1}
for k, v in sorted(bad.items()):
    print(f"-{k} means: " + "; ".join(f"--{n} ({c})" for n, c in sorted(v)))
print("short options: " + ", ".join(f"-{k} --{sorted(v)[0][0]}" for k, v in sorted(seen.items()) if k not in bad))
sys.exit(1 if bad else 0)
PY
echo "ok one meaning per short option"
