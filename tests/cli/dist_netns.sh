#!/bin/bash
# Data-parallel training across emulated hosts (tests/netns-hosts.sh: network namespaces behind a bridge, tbf-shaped
# 1 Gbit/s links, Open MPI's TCP BTL on the veths, no shared memory between hosts), and its two faults:
#  0. two hosts (one rank each) give the loss curve of two ranks on one host (shared memory): every step's loss
#     and learning rate equal to the 6 digits logged;
#  - `dlperf probe --hostfile` records the link between two hosts (bus bandwidth within the 1 Gbit/s, latency);
#  - 4 hosts: `dist bench` across all four, Open MPI's ring and dlperf's pipelined one (DLPERF_MPI_ALLREDUCE), every
#    element of the allreduce exact, the bus bandwidth within the 1 Gbit/s link; the plain-socket ring
#    (`tests/netns-hosts.sh ring`) between them exact too;
#  - `dlperf validate` runs a configuration of 2 hosts ("nodes": 2, the hostfile, the launcher) and prints its
#    prediction error; 3 nodes on a 2-host hostfile is refused with a message naming it;
#  1. (3 of the 4 hosts) host 2's link taken down mid-run (`ip link set veth0 down` in its namespace): the job ends within a bound
#     (the agent's link watch, DLPN_ALIVE_S = 3 s, + mpirun's teardown: asserted < 20 s), exit non-zero, with a
#     message naming host dlpn-h2 and rank 2; the last checkpoint is intact and the same command resumes on the two
#     hosts left (global batch 12 -> 8, the learning rate following it) and trains to the end;
#  2. rank 1 SIGKILLed on host dlpn-h1: the job ends within seconds naming rank 1 and dlpn-h1, exit non-zero; the
#     same command resumes on host 0 alone.
#  3. rank 1 stopped (SIGSTOP: alive, silent): rank 0's collective deadline (DLPERF_MPI_TIMEOUT_S = 5 s for this run,
#     8 s for the others) passes, it names the rank that does not answer (rank 1 on dlpn-h1) and ends the job
#     (MPI_Abort): 5 s + the sign-of-life exchange (2.5 s) + mpirun's teardown, asserted < 20 s (10-11 s measured on
#     the loaded 2-core machine; a step there takes 0.2-1 s, far below the deadline).
# The link watch is shorter than the deadline: mpirun, once aborting, waits for every daemon, so a host off the
# network must be given up by the agent (as ssh -o ServerAliveInterval does on a real cluster) first.
# Skipped (exit 77) where namespaces cannot be made (not root, no veth/bridge/tbf) or the build has no MPI.
# tags: light
# timeout: 150
set -u
D=${DLPERF:?}
case $D in /*) ;; *) D=$PWD/$D ;; esac
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
NS="$ROOT/tests/netns-hosts.sh"
command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun"; exit 77; }
if "$D" dist bench --dist mpi --max-bytes 64 2>&1 | grep -q 'no mpi communicator'; then echo "skipped: built without MPI"; exit 77; fi
why=$(bash "$NS" check) || { echo "${why:-skipped: no network namespaces here}"; exit 77; }
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/distns.XXXXXX") || { echo "FAIL: no temporary directory under ${DLPERF_TEST_TMP:-/tmp}"; exit 1; }
trap 'rm -rf "$T"' EXIT
export DLPERF_CACHE="$T/cache"

"$D" data gen --out "$T/ds" --classes 4 --per-class 24 --val-per-class 2 --size 36-48 --seed 1 >/dev/null || { echo "FAIL: data gen"; exit 1; }

cat >"$T/inner.sh" <<'EOF'
set -u
D=$1 T=$2
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1 DLPERF_MPI_TIMEOUT_S=8 DLPN_ALIVE_S=3
X=(-x OMP_NUM_THREADS -x DLPERF_MPI_TIMEOUT_S -x DLPERF_CACHE)
# 112 px: about 0.2 s a step on a quiet 2-core machine, so the faulted runs (14 steps) are still running when the fault
# comes after their first checkpoint (at 32 px a quiet machine finished all 14 steps before the link went down)
C=(--data "$T/ds" --model resnet-mini --size 112 --batch 4 --device ref --threads 1 --workers 1 --no-eval --peak off
   --no-monitor --log-every 1 --checkpoint-every 2 --steps 14)
sed -n 1,2p "$DLPN_HOSTFILE" >"$T/hosts2"
sed -n 1,3p "$DLPN_HOSTFILE" >"$T/hosts3"
sed -n 1p "$DLPN_HOSTFILE" >"$T/hosts1"
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# waits until the run has a checkpoint in $1 (or it ended)
wait_ck() { for _ in $(seq 1 300); do ls "$1"/step-*.state.safetensors >/dev/null 2>&1 && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 0.1; done; return 1; }
# the pid of MPI rank $1, which runs in host $1's namespace
rank_pid() { for p in $(ip netns pids "${DLPN_NS_PREFIX}$1"); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"; done | tail -1; }
newest() { ls "$1"/step-*.state.safetensors 2>/dev/null | sort | tail -1 | sed 's/.*step-0*\([0-9]*\)\.state.*/\1/'; }

# ---- 0. two hosts train as two ranks on one host do: the same loss curve, bit for bit ----
L=(--data "$T/ds" --model resnet-mini --size 32 --batch 4 --device ref --threads 1 --workers 1 --no-eval --peak off
   --no-monitor --log-every 1 --steps 6)
mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$D" train "${L[@]}" --steps-jsonl "$T/one.jsonl" \
  >/dev/null 2>"$T/one.err" || { cat "$T/one.err"; fail "2 ranks on one host"; }
$DLPN_MPIRUN -np 2 --hostfile "$T/hosts2" "${X[@]}" "$D" train "${L[@]}" --steps-jsonl "$T/two.jsonl" >/dev/null \
  2>"$T/two.err" || { cat "$T/two.err"; fail "2 hosts"; }
# the loss and learning rate of every step, as logged (6 significant digits)
python3 -c 'import json, sys; [print(r["step"], r["loss"], r["lr"]) for r in map(json.loads, open(sys.argv[1]))]' "$T/one.jsonl" >"$T/one.lines"
python3 -c 'import json, sys; [print(r["step"], r["loss"], r["lr"]) for r in map(json.loads, open(sys.argv[1]))]' "$T/two.jsonl" >"$T/two.lines"
[ "$(wc -l <"$T/one.lines")" = 6 ] || { cat "$T/one.err"; fail "expected 6 steps"; }
diff "$T/one.lines" "$T/two.lines" >&2 || fail "the loss curve on 2 hosts differs from 2 ranks on one host"
echo "2 hosts vs 2 ranks on one host (global batch 8): the 6 losses are identical (last: $(tail -1 "$T/two.lines"))"

# ---- 4 hosts: the allreduce exact across all four, both algorithms, within the link; the socket ring too ----
for algo in libnbc pipelined; do
  DLPERF_MPI_ALLREDUCE=$algo $DLPN_MPIRUN -np 4 --hostfile "$DLPN_HOSTFILE" -x DLPERF_MPI_ALLREDUCE "$D" dist bench \
    --min-bytes 1M --max-bytes 2M -n 2 --warmup 1 --json "$T/b4-$algo.json" >/dev/null 2>"$T/b4.err" ||
    { cat "$T/b4.err"; fail "4 hosts: dist bench ($algo)"; }
  python3 - "$T/b4-$algo.json" $algo <<'PY' || fail "4 hosts: dist bench ($2)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ranks"] == 4 and len(r["points"]) == 2, r
for p in r["points"]:
    assert p["wrong"] == 0 and 0 < p["busbw_gb_s"] < 0.125 * 1.1, p  # exact sums; at most the 1 Gbit/s link
print("4 hosts, %s: %s" % (sys.argv[2], ", ".join("%d MiB %.3f GB/s" % (p["bytes"] >> 20, p["busbw_gb_s"]) for p in r["points"])))
PY
done
bash "$DLPERF_ROOT/tests/netns-hosts.sh" ring 4194304 >"$T/ring.out" 2>&1 || { cat "$T/ring.out"; fail "4 hosts: socket ring"; }
[ "$(grep -c 'wrong 0$' "$T/ring.out")" = 4 ] || { cat "$T/ring.out"; fail "4 hosts: socket ring not exact on every host"; }
echo "4 hosts, socket ring: $(grep -o 'busbw [0-9.]* GB/s' "$T/ring.out" | head -1)"

# ---- the probe measures the link between the hosts (--hostfile, --mpirun) into the profile ----
"$D" probe --quick --device cpu --skip memory,storage,pipeline,compute,contention,loop --hostfile "$T/hosts2" \
  --mpirun "$DLPN_MPIRUN" --out "$T/net.json" >/dev/null 2>"$T/probe.err" || { tail -5 "$T/probe.err"; fail "probe --hostfile"; }
python3 - "$T/net.json" <<'PY' || { cat "$T/probe.err"; fail "probe --hostfile: no link figures"; }
import json, sys
ic = json.load(open(sys.argv[1]))["interconnect"]
assert 0 < ic["nic_bytes_per_s"] < 0.125e9 * 1.05, ic  # at most the 1 Gbit/s link
assert 0 < ic["nic_latency_s"] < 0.1, ic
print("probe --hostfile: 2 hosts, %.3f GB/s, %.0f us per ring step" % (ic["nic_bytes_per_s"] / 1e9, ic["nic_latency_s"] * 1e6))
PY

# ---- validate: a 2-host row, run through the same launcher and predicted with --nodes 2 (the profile's link) ----
# a device of a fixed 100 ms step (sim, t0_ms) and resnet-mini's small gradients: a device-bound row of ~3 s
cat >"$T/vc.json" <<J
[{"device": "sim:custom,img_per_s=1000000,t0_ms=100", "model": "resnet-mini", "size": 32, "batch": 4, "workers": 1,
  "nodes": 2, "hostfile": "$T/hosts2", "launcher": "$DLPN_MPIRUN"}]
J
"$D" validate --profile "$T/net.json" --data "$T/ds" --configs "$T/vc.json" --steps 3 --seconds 0.5 --max-seconds 3 \
  --retries 0 --json "$T/v.json" >"$T/v.out" 2>&1 || { cat "$T/v.out"; fail "validate: a 2-host row"; }
python3 - "$T/v.json" <<'PY' || { cat "$T/v.out"; fail "validate: the 2-host row"; }
import json, sys
r = json.load(open(sys.argv[1]))["rows"][0]
assert r["ok"] and "2nodes" in r["config"], r
assert 0 < r["predicted_img_per_s"] < 1e4 and 0 < r["measured_img_per_s"] and r["ape"] < 0.5, r
assert 0 < r["cpu_share"] <= 1, r  # the smallest of the ranks' (train's dist.per_rank[].cpu_share)
print("validate, 2 hosts: %s: predicted %.1f img/s, measured %.1f, error %.1f%%" % (r["config"], r["predicted_img_per_s"],
      r["measured_img_per_s"], 100 * r["ape"]))
PY
sed 's/"nodes": 2/"nodes": 3/' "$T/vc.json" >"$T/vc3.json"
"$D" validate --profile "$T/net.json" --data "$T/ds" --configs "$T/vc3.json" >"$T/v3.out" 2>&1 && fail "validate: 3 nodes on a 2-host hostfile ran"
grep -q 'names 2 hosts' "$T/v3.out" || { cat "$T/v3.out"; fail "validate: no message naming the hostfile's 2 hosts"; }

# ---- 1. a host's link goes down mid-run ----
$DLPN_MPIRUN -np 3 --hostfile "$T/hosts3" "${X[@]}" "$D" train "${C[@]}" --checkpoint "$T/ck" >"$T/a.out" 2>"$T/a.err" &
J=$!
wait_ck "$T/ck" $J || { cat "$T/a.err"; fail "3 hosts: no checkpoint written"; }
CK=$(newest "$T/ck")
T0=$(date +%s.%N)
ip netns exec "${DLPN_NS_PREFIX}2" ip link set veth0 down
RC=0; wait $J || RC=$?
DT=$(since "$T0")
[ "$RC" != 0 ] || fail "link down: the job exited 0"
awk -v d="$DT" 'BEGIN { exit !(d < 20) }' || fail "link down: the job took $DT s to end"
MSG=$(grep -E 'dlpn-h2.*rank 2|rank 2 on dlpn-h2' "$T/a.err" | head -1)
[ -n "$MSG" ] || { cat "$T/a.err"; fail "link down: no message naming host dlpn-h2 and rank 2"; }
ls "$T"/ck/*.tmp* >/dev/null 2>&1 && fail "link down: a temporary checkpoint file was left"
LAST=$(newest "$T/ck")
[ -n "$LAST" ] && [ "$LAST" -ge "$CK" ] && [ "$LAST" -lt 14 ] || fail "link down: checkpoint step '$LAST' (first seen $CK)"
echo "link down on dlpn-h2 at step >= $CK: the job ended in $DT s (exit $RC): $MSG"
# the same command on the two hosts left
T1=$(date +%s.%N)
$DLPN_MPIRUN -np 2 --hostfile "$T/hosts2" "${X[@]}" "$D" train "${C[@]}" --checkpoint "$T/ck" --resume "$T/ck" \
  --json "$T/r2.json" >"$T/r2.out" 2>"$T/r2.err" || { cat "$T/r2.err"; fail "resume on 2 hosts"; }
grep -q "checkpoint was written by 3 ranks, this run has 2: global batch 12 -> 8" "$T/r2.err" || { cat "$T/r2.err"; fail "resume: no rank-count line"; }
grep -q '^step  *14/14' "$T/r2.err" || { cat "$T/r2.err"; fail "resume on 2 hosts did not train to step 14"; }
python3 - "$T/r2.json" "$LAST" <<'PY' || fail "resumed result"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["dist"]["ranks"] == 2 and r["dist"]["global_batch"] == 8, r["dist"]
print("resumed on 2 hosts from step %s: global batch %d" % (sys.argv[2], r["dist"]["global_batch"]))
PY
echo "resume on dlpn-h0, dlpn-h1 from step $LAST to 14: $(since "$T1") s"

# ---- 2. a rank SIGKILLed ----
$DLPN_MPIRUN -np 2 --hostfile "$T/hosts2" "${X[@]}" "$D" train "${C[@]}" --checkpoint "$T/ck2" >"$T/k.out" 2>"$T/k.err" &
J=$!
wait_ck "$T/ck2" $J || { cat "$T/k.err"; fail "2 hosts: no checkpoint written"; }
VICTIM=$(rank_pid 1)
[ -n "$VICTIM" ] || { kill $J; fail "rank 1's process not found in dlpn-h1"; }
T0=$(date +%s.%N)
kill -9 "$VICTIM"
RC=0; wait $J || RC=$?
DT=$(since "$T0")
[ "$RC" != 0 ] || fail "kill: the job exited 0"
awk -v d="$DT" 'BEGIN { exit !(d < 15) }' || fail "kill: the job took $DT s to end"
MSG=$(grep -E 'rank 1 .*on node dlpn-h1|rank 1 on dlpn-h1' "$T/k.err" | head -1)
[ -n "$MSG" ] || { cat "$T/k.err"; fail "kill: no message naming rank 1 on dlpn-h1"; }
LAST=$(newest "$T/ck2")
echo "rank 1 on dlpn-h1 SIGKILLed: the job ended in $DT s (exit $RC): $(echo "$MSG" | sed 's/^ *//')"
$DLPN_MPIRUN -np 1 --hostfile "$T/hosts1" "${X[@]}" "$D" train "${C[@]}" --checkpoint "$T/ck2" --resume "$T/ck2" \
  >"$T/r1.out" 2>"$T/r1.err" || { cat "$T/r1.err"; fail "resume on 1 host"; }
grep -q '^step  *14/14' "$T/r1.err" || { cat "$T/r1.err"; fail "resume on 1 host did not train to step 14"; }
echo "resume on dlpn-h0 alone from step $LAST to 14: ok"

# ---- 3. a rank stops answering ----
DLPERF_MPI_TIMEOUT_S=5 $DLPN_MPIRUN -np 2 --hostfile "$T/hosts2" "${X[@]}" "$D" train "${C[@]}" --steps 400 --checkpoint "$T/ck3" >"$T/s.out" 2>"$T/s.err" &
J=$!
wait_ck "$T/ck3" $J || { cat "$T/s.err"; fail "stop: no checkpoint written"; }
VICTIM=$(rank_pid 1)
[ -n "$VICTIM" ] || { kill $J; fail "rank 1's process not found in dlpn-h1"; }
T0=$(date +%s.%N)
kill -STOP "$VICTIM"
RC=0; wait $J || RC=$?
DT=$(since "$T0")
kill -9 "$VICTIM" 2>/dev/null
[ "$RC" != 0 ] || fail "stop: the job exited 0"
awk -v d="$DT" 'BEGIN { exit !(d < 20) }' || fail "stop: the job took $DT s to end"
MSG=$(grep -E 'not done after 5 s .*no answer from rank 1 on dlpn-h1' "$T/s.err" | head -1)
[ -n "$MSG" ] || { cat "$T/s.err"; fail "stop: no message naming rank 1 on dlpn-h1"; }
echo "rank 1 on dlpn-h1 stopped: the job ended in $DT s (exit $RC): $MSG"
EOF
DLPERF_ROOT=$ROOT bash "$NS" run 4 --rate 1gbit --delay 0.1ms -- bash "$T/inner.sh" "$D" "$T"
RC=$?
[ $RC = 0 ] && echo ok
exit $RC
