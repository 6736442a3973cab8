#!/bin/bash
# `dlperf monitor -- COMMAND`: passes exit codes through (including death by a signal as 128+N), forwards SIGTERM,
# reports a command that cannot run, never overwrites outputs, and writes CSV / JSON lines / JSON that parse back.
# tags: asan
# timeout: 120
set -u
D=${DLPERF:?} PY=${PYTHON:-/usr/bin/python3} T=${DLPERF_TEST_TMP:-/tmp}/monwrap.$$
mkdir -p "$T" && trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect_code() {  # want, then the command after --
  local want=$1; shift
  "$D" monitor -q --interval 100 -- "$@" 2>"$T/err"; local rc=$?
  [ "$rc" = "$want" ] || { cat "$T/err"; fail "'$*' gave $rc, expected $want"; }
  echo "ok: exit $rc from: $*"
}
expect_code 0 true
expect_code 3 sh -c 'exit 3'
expect_code 137 sh -c 'kill -KILL $$'      # died of SIGKILL: 128 + 9
expect_code 143 sh -c 'kill -TERM $$'      # 128 + 15
expect_code 127 /nonexistent/command
grep -q "cannot run '/nonexistent/command'" "$T/err" || fail "no message for a command that cannot run"
# Options before the command without "--", and option errors.
"$D" monitor -q --interval 100 false 2>/dev/null; [ $? = 1 ] || fail "command without -- did not run"
"$D" monitor -q sh -c 'exit 5' 2>"$T/err"; [ $? = 2 ] && grep -q "go after --" "$T/err" || fail "no hint about --"
"$D" monitor --interval 5 -- true 2>"$T/err"; [ $? = 2 ] || fail "--interval 5 accepted"
"$D" monitor 2>"$T/err"; [ $? = 2 ] && grep -q "no command" "$T/err" || fail "no command: wrong error"

# SIGTERM to dlperf is passed on to the command: a trap in the command answers with its own exit code.
"$D" monitor -q --interval 100 -- sh -c 'trap "exit 7" TERM; while :; do sleep 0.05; done' 2>"$T/err" &
pid=$!
sleep 1
kill -TERM $pid
wait $pid; rc=$?
[ "$rc" = 7 ] || { cat "$T/err"; fail "forwarded SIGTERM: exit $rc, expected 7"; }
echo "ok: SIGTERM forwarded (the command's trap exited 7)"
"$D" monitor -q --interval 100 -- sleep 30 2>"$T/err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid; rc=$?
[ "$rc" = 130 ] || fail "forwarded SIGINT to sleep: exit $rc, expected 130"
echo "ok: SIGINT forwarded, sleep died of it: 130"

# Outputs: a busy shell loop for ~1.5 s, three files, parsed back.
"$D" monitor --interval 100 --csv "$T/m.csv" --jsonl "$T/m.jsonl" --json "$T/m.json" -- \
  sh -c 'end=$(($(date +%s%N) + 1500000000)); while [ $(date +%s%N) -lt $end ]; do :; done; exit 4' 2>"$T/summary"
rc=$?
[ "$rc" = 4 ] || { cat "$T/summary"; fail "busy loop: exit $rc, expected 4"; }
cat "$T/summary"
grep -q "exited with status 4" "$T/summary" || fail "summary lacks the exit status"
grep -q "^cpu.all.util " "$T/summary" || fail "summary lacks the CPU line"
grep -q "^monitor overhead: " "$T/summary" || fail "summary lacks the overhead"
"$PY" - "$T" <<'PYEOF' || fail "outputs do not parse back"
import csv, json, math, sys
t = sys.argv[1]
rows = list(csv.DictReader(open(t + "/m.csv")))
assert len(rows) >= 10, len(rows)
for r in rows:
    assert float(r["dt_s"]) > 0 and r["phase"] == "command"
    if r["cpu.all.util_pct"]:  # empty: an interval too short for one clock tick (the last one, cut by the stop)
        assert 0 <= float(r["cpu.all.util_pct"]) <= 100, r["cpu.all.util_pct"]
full = [r for r in rows if float(r["dt_s"]) >= 0.05]
assert all(r["cpu.all.util_pct"] for r in full), "a full-length interval without CPU utilization"
proc = [float(r["proc.cpu_pct"]) for r in full[1:-1] if r["proc.cpu_pct"]]
assert proc and max(proc) > 20, proc            # the shell loop shows in its tree's CPU
lines = [json.loads(l) for l in open(t + "/m.jsonl")]
sets = {(l["set"], l.get("instance")) for l in lines}
assert ("cpu", "all") in sets and ("mem", None) in sets and ("proc", None) in sets, sets
assert len(lines) == len(rows) * len(sets), (len(lines), len(rows), len(sets))
res = json.load(open(t + "/m.json"))
assert res["schema"] == "dlperf.monitor/1"
assert res["exit_code"] == 4 and res["signal"] is None
assert res["command"][0] == "sh"
mon = res["monitor"]
assert mon["samples"] == len(rows), (mon["samples"], len(rows))
assert mon["sources"]["cpu"]["available"] is True
assert "note" in mon["sources"]["gpu"]
tot = mon["total"]["metrics"]
for k in ("mean", "p50", "p95", "max"):
    assert k in tot["cpu.all.util_pct"], k
cpu_s = tot["proc.cpu_pct"]["cpu_s"]
ru = res["rusage"]["user_s"] + res["rusage"]["system_s"]
assert abs(cpu_s - ru) < 0.15 + 0.1 * ru, (cpu_s, ru)   # the tree's CPU time matches the kernel's rusage
assert mon["overhead"]["pct_of_one_core"] < 10
print("ok: csv %d rows, jsonl %d lines, json: tree CPU %.2f s vs rusage %.2f s" % (len(rows), len(lines), cpu_s, ru))
PYEOF

# Never overwrite: each output refused up front, the command does not run.
for opt in --csv --jsonl --json; do
  "$D" monitor -q $opt "$T/m.csv" -- touch "$T/ran" 2>"$T/err"; rc=$?
  [ "$opt" = --csv ] || [ $rc != 0 ] || fail "$opt onto an existing file accepted"
  [ $rc != 0 ] || fail "$opt onto an existing file accepted"
  grep -q "already exists" "$T/err" || { cat "$T/err"; fail "$opt: no 'already exists' message"; }
  [ ! -e "$T/ran" ] || fail "the command ran although an output exists"
done
echo "ok: existing outputs refused"
