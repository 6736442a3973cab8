#!/bin/bash
# `dlperf serve` options: --help, unknown and out-of-range options (exit 2 with a message), --json refusing to
# overwrite, a bad labels file. (The service itself is tested in build/tests/test_serve_server_mhd.)
# tags: asan light
# timeout: 60
set -u
T="$DLPERF_TEST_TMP/serve_cli.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$DLPERF" serve --help >"$T/out" 2>&1 || fail "--help exited $?"
for o in --max-batch --max-delay --queue --timeout --max-body --read-timeout --header-timeout --max-conns-per-ip --drain-timeout --labels --port-file; do
  grep -q -- "$o" "$T/out" || fail "--help does not list $o"
done
"$DLPERF" serve --nope >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--nope" "$T/err" || fail "unknown option"
"$DLPERF" serve --max-delay -1 >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--max-delay" "$T/err" || fail "negative --max-delay"
"$DLPERF" serve --max-body 12Q >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--max-body" "$T/err" || fail "bad --max-body"
"$DLPERF" serve --timeout nan >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--timeout" "$T/err" || fail "NaN --timeout"
"$DLPERF" serve --read-timeout 1e30 >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--read-timeout" "$T/err" || fail "huge --read-timeout"
"$DLPERF" serve --header-timeout 0 >/dev/null 2>"$T/err"; [ $? = 2 ] && grep -q -- "--header-timeout" "$T/err" || fail "zero --header-timeout"
"$DLPERF" serve --max-conns-per-ip -1 --model resnet-mini --device ref --size 32 --port 0 >/dev/null 2>"$T/err"; [ $? != 0 ] && grep -q -- "--max-conns-per-ip" "$T/err" || fail "negative --max-conns-per-ip"
touch "$T/exists.json"
"$DLPERF" serve --json "$T/exists.json" >/dev/null 2>"$T/err"; [ $? != 0 ] && grep -q "exists" "$T/err" || fail "--json overwrote"
: >"$T/empty.txt"
"$DLPERF" serve --labels "$T/empty.txt" >/dev/null 2>"$T/err"; [ $? != 0 ] && grep -q "empty.txt" "$T/err" || fail "empty labels"
"$DLPERF" serve --labels "$T/missing.txt" >/dev/null 2>"$T/err"; [ $? != 0 ] && grep -q "missing.txt" "$T/err" || fail "missing labels"
echo PASS
