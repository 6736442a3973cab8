#!/bin/bash
# bench/gpu.sh --dry-run (issue 27): the GPU check fits its window — every part the lease must teach is planned
# (build, gpu info, gpu bench fp16/bf16/fp32, gpu probe, the op/step parity checks, dist bench --dist nccl), each
# with a bound, in that order, with a total of at most 300 s after start-up; every dlperf line of it parses; the
# table in the script's header says the same bounds; and the dry run needs no GPU and writes nothing.
# tags: asan
# timeout: 60
set -u
D=${DLPERF:?}
case $D in /*) ;; *) D=$PWD/$D ;; esac
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/gpudry.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
S="$ROOT/bench/gpu.sh"

# the script looks for build/dlperf next to itself: run a copy whose build/dlperf is the dlperf under test
mkdir -p "$T/r/bench" "$T/r/build"
cp "$S" "$T/r/bench/gpu.sh"
ln -s "$D" "$T/r/build/dlperf"
(cd "$T" && OUT= bash "$T/r/bench/gpu.sh" --dry-run) > "$T/dry.out" 2>&1 || fail "bench/gpu.sh --dry-run exits $?: $(cat "$T/dry.out")"
cat "$T/dry.out"
w=$(find "$T/r" -mindepth 1 -newer "$T/r/bench/gpu.sh" ! -path "$T/r/build*"); [ -z "$w" ] || fail "the dry run wrote $w"
grep -q "does not parse" "$T/dry.out" && fail "a dlperf line of bench/gpu.sh does not parse"
grep -q "were not parsed" "$T/dry.out" && fail "the dry run did not parse the dlperf lines with $D"
grep -q "not parsed: build/dlperf is built without CUDA" "$T/dry.out" && echo "note: $D has no CUDA: its dlperf gpu lines were not parsed"

# every part, in order, with a positive bound
want="build info bench-fp16 bench-bf16 bench-fp32 profile ops check nccl wrap-up"
got=$(awk '/^  [a-z0-9-]+ +[0-9]+ s$/ {print $1}' "$T/dry.out" | tr '\n' ' ')
[ "$got" = "$want " ] || fail "the parts in order are '$got', want '$want'"
grep -Eq '^  profile .*$' "$T/dry.out" && grep -A2 '^  profile' "$T/dry.out" | grep -q 'gpu probe .*--profile' \
  || fail "the profile part does not run dlperf gpu probe --profile"
for p in "bench-fp16:--precision fp16" "bench-bf16:--precision bf16" "bench-fp32:--precision fp32"; do
  grep -A1 "^  ${p%%:*} " "$T/dry.out" | grep -q -- "gpu bench --batch 256 ${p#*:}" || fail "${p%%:*} does not run gpu bench b256 ${p#*:}"
done
grep -A1 '^  ops ' "$T/dry.out" | grep -q 'tests/test_backend_ops' || fail "ops does not run test_backend_ops"
grep -A1 '^  check ' "$T/dry.out" | grep -q 'tests/test_backend_cuda' || fail "check does not run test_backend_cuda"
grep -A1 '^  nccl ' "$T/dry.out" | grep -q 'dist bench --dist nccl' || fail "nccl does not run dist bench --dist nccl"

# the total: the bounds of the parts in order add up to at most 300 s, and to what the script says
sum=$(awk '/^  [a-z0-9-]+ +[0-9]+ s$/ {s += $2} END {print s}' "$T/dry.out")
total=$(sed -n 's/^total: \([0-9]*\) s for the parts in order (bound: \([0-9]*\) s).*/\1 \2/p' "$T/dry.out")
[ -n "$total" ] || fail "no total line"
set -- $total
[ "$sum" = "$1" ] || fail "the bounds add up to $sum s, the script says $1 s"
[ "$1" -le 300 ] && [ "$2" -le 300 ] || fail "total $1 s (deadline $2 s): more than 300 s of device time"
# no part runs past the deadline: run_part clamps each one's bound to it
grep -q 'left=$((DEADLINE - $(now)' "$S" || fail "run_part no longer clamps the parts to the deadline"

# the header table says the same bounds
while read -r name b; do
  grep -Eq "^#   $name +$b " "$S" || fail "the header of bench/gpu.sh does not list '$name' with $b s"
done < <(awk '/^  [a-z0-9-]+ +[0-9]+ s/ {print $1, $2}' "$T/dry.out")
echo "PASS: $(echo $want | wc -w) parts in order, $1 s in all (deadline $2 s), every dlperf line parses"
