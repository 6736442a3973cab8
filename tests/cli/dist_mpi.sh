#!/bin/bash
# Data-parallel runs under mpirun (2 ranks on this machine, one compute thread each): `dlperf dist bench` (every size
# correct, rank 0 alone prints), `dlperf train` (rank 0 alone reports; every rank trained on its shard; the sharded
# validation counts every image once; the result holds every rank's figures), a rank killed mid-run ends the job
# within seconds with the killed rank named (no hang), and a run stopped and resumed under mpirun reproduces the
# uninterrupted run's loss curve. Skipped where the build has no MPI or mpirun is missing.
# timeout: 600
set -eu
D=$DLPERF
PY=${PYTHON:-/usr/bin/python3}
if ! command -v mpirun >/dev/null 2>&1; then echo "skipped: no mpirun"; exit 0; fi
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/distmpi.XXXXXX")
trap 'rm -rf "$T"' EXIT
export DLPERF_CACHE="$T/cache" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"  # Open MPI keeps its allocations to exit
MPI=(timeout 300 mpirun --oversubscribe -np 2)
fail() { echo "FAIL: $*"; exit 1; }

if $D dist bench --dist mpi --max-bytes 64 2>&1 | grep -q 'no mpi communicator'; then echo "skipped: built without MPI"; exit 0; fi

# ---- dist bench ----
"${MPI[@]}" $D dist bench --min-bytes 8 --max-bytes 4M -n 5 --warmup 2 --json "$T/bench.json" >"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fail "dist bench"; }
[ "$(grep -c '^# dlperf dist bench: mpi communicator, 2 ranks' "$T/bench.out")" = 1 ] || { cat "$T/bench.out"; fail "rank 0 alone prints"; }
$PY - "$T/bench.json" <<'PY' || fail "dist bench result"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["communicator"] == "mpi" and r["ranks"] == 2 and r["wrong"] == 0, r
pts = r["points"]
assert [p["bytes"] for p in pts] == [8 << i for i in range(len(pts))] and pts[-1]["bytes"] == 4 << 20, pts
for p in pts:
    assert p["time_us"] > 0 and p["wrong"] == 0
    assert abs(p["busbw_gb_s"] - p["algbw_gb_s"]) < 1e-9 * max(1, p["algbw_gb_s"])  # 2(n-1)/n = 1 for n = 2
print("dist bench: %d sizes, 4 MiB at %.3f GB/s bus bandwidth" % (len(pts), pts[-1]["busbw_gb_s"]))
PY

# ---- training ----
$D data gen --out "$T/ds" --classes 4 --per-class 16 --val-per-class 5 --size 36-48 --seed 1 >/dev/null
C=(--data "$T/ds" --model resnet-mini --size 32 --batch 4 --device ref --threads 1 --workers 1 --lr 0.05
   --no-lr-scaling --peak off --no-monitor --log-every 1)
"${MPI[@]}" $D train "${C[@]}" --steps 6 --json "$T/t2.json" >"$T/t2.out" 2>"$T/t2.err" || { cat "$T/t2.err"; fail "train under mpirun"; }
[ "$(grep -c '^dlperf train:' "$T/t2.out")" = 1 ] || fail "rank 0 alone prints the summary"
[ "$(grep -c '^step ' "$T/t2.err")" = 6 ] || { cat "$T/t2.err"; fail "rank 0 alone prints the 6 step lines"; }
grep -q '^dist .*2 ranks (mpi), global batch 8: .* exposed, .* hidden behind backward' "$T/t2.out" || { cat "$T/t2.out"; fail "no dist line"; }
$PY - "$T/t2.json" <<'PY' || fail "train result under mpirun"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["dist"]
assert d["communicator"] == "mpi" and d["ranks"] == 2 and d["global_batch"] == 8, d
assert len(d["per_rank"]) == 2 and all(p["steps"] == 6 and p["images"] == 24 for p in d["per_rank"]), d["per_rank"]
assert d["allreduce_bytes_per_step"] > 0 and d["allreduce_ms_per_step"] > 0
# 64 training images: 32 per rank; the 20 validation images are split 10 + 10 and counted once in total
assert r["data"]["train_images_per_epoch"] == 32, r["data"]
assert r["evals"][-1]["images"] == 20, r["evals"]
assert "allreduce" in r["phases"]
print("train: 2 ranks, allreduce %.2f ms/step, eval over %d images" % (d["allreduce_ms_per_step"], r["evals"][-1]["images"]))
PY

# ---- a rank killed mid-run ends the job, naming it ----
"${MPI[@]}" $D train "${C[@]}" --steps 100000 --no-eval >"$T/k.out" 2>"$T/k.err" &
JOB=$!
for _ in $(seq 1 300); do grep -q '^step ' "$T/k.err" 2>/dev/null && break; sleep 0.1; done
grep -q '^step ' "$T/k.err" || { kill $JOB; cat "$T/k.err"; fail "the long run never stepped"; }
VICTIM=""
for p in $(pgrep -f "dlperf train" || true); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then VICTIM=$p; fi
done
[ -n "$VICTIM" ] || { kill $JOB; fail "rank 1's process not found"; }
K0=$(date +%s.%N)
kill -9 "$VICTIM"
RC=0; wait $JOB || RC=$?
DT=$(awk -v a="$K0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ "$RC" != 0 ] || fail "the job exited 0 after a rank was killed"
[ "$RC" != 124 ] || fail "the job hung after a rank was killed (timeout)"
awk -v d="$DT" 'BEGIN { exit !(d < 15) }' || fail "the job took $DT s to end after a rank was killed"
grep -qiE 'rank 1|signal 9|killed' "$T/k.err" "$T/k.out" || { cat "$T/k.err"; fail "no message naming the killed rank"; }
echo "kill: rank 1 killed, the job ended in $DT s (exit $RC): $(grep -iE 'signal 9|killed' "$T/k.err" | head -1)"

# ---- stop and resume under mpirun: the same loss curve ----
lines() { grep '^step ' "$1" | awk '{print $2, $4, $6, $8}'; }
"${MPI[@]}" $D train "${C[@]}" --steps 10 --no-eval --json "$T/a.json" >/dev/null 2>"$T/a.err" || { cat "$T/a.err"; fail "straight run"; }
"${MPI[@]}" $D train "${C[@]}" --steps 10 --no-eval --stop-at-step 4 --checkpoint "$T/ck" >/dev/null 2>"$T/b1.err" \
  || { cat "$T/b1.err"; fail "first part"; }
ls "$T/ck/step-00000004.safetensors" >/dev/null || fail "no checkpoint at step 4"
"${MPI[@]}" $D train "${C[@]}" --steps 10 --no-eval --resume "$T/ck" --checkpoint "$T/ck" --json "$T/b2.json" >/dev/null \
  2>"$T/b2.err" || { cat "$T/b2.err"; fail "resumed part"; }
lines "$T/a.err" >"$T/a.lines"
{ lines "$T/b1.err"; lines "$T/b2.err"; } >"$T/b.lines"
[ "$(wc -l <"$T/a.lines")" = 10 ] || fail "expected 10 step lines"
diff "$T/a.lines" "$T/b.lines" >"$T/diff" || { cat "$T/diff"; fail "the resumed loss curve differs under mpirun"; }
echo "resume under mpirun: curve identical ($(sed -n 10p "$T/a.lines"))"
# ---- predicted vs measured scaling: 2 ranks x 1 thread vs 1 process x 2 threads (validate) ----
# (the probe measures what the prediction of a warm cpu run needs: the pipeline, compute and the interconnect)
$D probe --quick --data "$T/ds" --device cpu --models resnet-mini --sizes 32 --skip contention,loop,storage,memory \
  --out "$T/p.json" >/dev/null 2>"$T/probe.err" || { tail -5 "$T/probe.err"; fail "probe"; }
cat >"$T/cfg.json" <<'EOF2'
[{"device": "cpu", "model": "resnet-mini", "size": 32, "batch": 8, "workers": 1, "threads": 1, "ranks": 2},
 {"device": "cpu", "model": "resnet-mini", "size": 32, "batch": 8, "workers": 1, "threads": 2}]
EOF2
$D validate --profile "$T/p.json" --data "$T/ds" --configs "$T/cfg.json" --steps 4 --seconds 2 --max-seconds 5 \
  --retries 0 --json "$T/v.json" >"$T/v.out" 2>"$T/v.err" || { cat "$T/v.out" "$T/v.err"; fail "validate with ranks"; }
grep -q '^scaling  cpu resnet-mini/32 b8 w1 t1 x2 warm vs cpu resnet-mini/32 b8 w1 t2 warm: predicted' "$T/v.out" \
  || { cat "$T/v.out"; fail "no scaling line"; }
$PY - "$T/v.json" "$T/p.json" <<'PY' || fail "validate result with ranks"
import json, sys
v, p = (json.load(open(x)) for x in sys.argv[1:])
assert p["interconnect"]["allreduce_busbw_bytes_per_s"] > 0, p["interconnect"]
rows = v["rows"]
assert [r["settings"]["ranks"] for r in rows] == [2, 1] and all(r["ok"] for r in rows), rows
sc = v["scaling"]
assert len(sc) == 1 and sc[0]["predicted_ratio"] > 0 and sc[0]["measured_ratio"] > 0, sc
print("validate: 2 ranks x 1 thread vs 1 x 2 threads: predicted %.2fx, measured %.2fx" % (sc[0]["predicted_ratio"], sc[0]["measured_ratio"]))
PY
echo ok
