#!/bin/bash
# Runs afl-fuzz on each harness for a while (make fuzz FUZZ_S=60 [FUZZ_ONLY="jpeg serve"] [FUZZ_JOBS=N]).
#   tests/fuzz/run.sh BUILD_DIR SECONDS HARNESS...
# FUZZ_JOBS (default 1) harnesses run at once, each under nice (long runs share the machine with other work).
# Each harness starts from tests/fuzz/corpus/<name>/ and writes afl's state to BUILD_DIR/fuzz-out/<name>/; the
# closing table gives execs, corpus paths, crashes and hangs per harness (from fuzzer_stats). Crashing and hanging
# inputs stay in BUILD_DIR/fuzz-out/<name>/default/{crashes,hangs}/: minimise one (afl-tmin) and add it to the corpus.
set -u
B=$1; S=$2; shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
export AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 DLPERF_ROOT="$ROOT"
JOBS=${FUZZ_JOBS:-1}
status=0
fuzz_one() {
  local h=$1 out in rc
  out="$B/fuzz-out/$h"
  rm -rf "$out"; mkdir -p "$out"
  # The catalog harness needs at least one byte; afl rejects an empty seed, so empty seeds are left out.
  in="$out/in"; mkdir -p "$in"; find "tests/fuzz/corpus/$h" -type f -size +0 -exec cp {} "$in/" \;
  echo "== $h: afl-fuzz for ${S} s"
  timeout $((S + 60)) nice afl-fuzz -i "$in" -o "$out" -t 2000 -m none -V "$S" -- "$B/tests/fuzz_$h" >"$out/afl.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || { echo "   $h: afl-fuzz exit $rc (log: $out/afl.log)"; tail -5 "$out/afl.log"; return 1; }
}
running=0
for h in "$@"; do
  fuzz_one "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n || status=1; running=$((running - 1)); fi
done
while [ "$running" -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
printf '\n%-14s %8s %10s %8s %7s %7s %8s\n' harness run_s execs exec/s paths crashes hangs
for h in "$@"; do
  f="$B/fuzz-out/$h/default/fuzzer_stats"
  [ -f "$f" ] || { printf '%-14s (no stats)\n' "$h"; continue; }
  g() { sed -n "s/^$1 *: *//p" "$f"; }
  printf '%-14s %8s %10s %8s %7s %7s %8s\n' "$h" "$(g run_time)" "$(g execs_done)" "$(g execs_per_sec)" "$(g corpus_count)" \
    "$(g saved_crashes)" "$(g saved_hangs)"
done
exit $status
