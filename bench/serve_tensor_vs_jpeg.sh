#!/bin/bash
# LoadGen Offline and Server against one `dlperf serve`, over the JPEG route (/v1/classify: the server decodes)
# and over KServe v2 binary FP32 tensors (/v2/models/<arch>/infer: the client preprocessed), alternating the two
# routes round by round so the machine's drift hits both alike; prints each run's throughput and latency and the
# server's split per request (read, decode, queue wait, inference per batch) from /metrics.
#   bench/serve_tensor_vs_jpeg.sh [OUT_DIR]   (env: DLPERF, IMAGES, DEVICE, PRECISION, THREADS, ROUNDS, MODEL_ARGS,
#                                              OFFLINE_ARGS, SERVER_ARGS)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
OUT=${1:-$ROOT/out/serve_tensor_vs_jpeg-$(date -u +%Y%m%dT%H%M%S)}
IMAGES=${IMAGES:?set IMAGES=DIR: JPEGs of ImageNet-like sizes, e.g. the val/ of a synthetic dataset made by dlperf data gen}
DEVICE=${DEVICE:-cpu}; PRECISION=${PRECISION:-fp32}; THREADS=${THREADS:-2}; ROUNDS=${ROUNDS:-2}
MODEL_ARGS=${MODEL_ARGS:---model resnet50}
OFFLINE_ARGS=${OFFLINE_ARGS:---qps 4 --min-duration 10 --min-queries 80}
SERVER_ARGS=${SERVER_ARGS:---qps 1 --latency-bound 5000 --min-duration 30 --min-queries 30 --early-stopping 0}
PY=${PYTHON:-/usr/bin/python3}
[ -d "$IMAGES" ] || { echo "IMAGES=$IMAGES: not a directory"; exit 2; }
mkdir -p "$OUT" || exit 2
# shellcheck disable=SC2086
"$DLPERF" serve $MODEL_ARGS --device "$DEVICE" --precision "$PRECISION" --threads "$THREADS" --workers 1 --max-batch 8 \
  --port 0 --port-file "$OUT/port" --monitor-interval 0 >"$OUT/serve.out" 2>"$OUT/serve.err" &
SPID=$!
trap 'kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
for _ in $(seq 600); do [ -s "$OUT/port" ] && break; kill -0 $SPID 2>/dev/null || break; sleep 0.1; done
[ -s "$OUT/port" ] || { cat "$OUT/serve.err"; echo "dlperf serve did not start"; exit 1; }
BASE="http://127.0.0.1:$(cat "$OUT/port")"
ARCH=$(sed -n 's/^serve: \([^ ]*\) .*/\1/p' "$OUT/serve.err" | head -1)
SIZE=$(curl -s "$BASE/v2/models/$ARCH" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['inputs'][0]['shape'][-1])")
for r in $(seq "$ROUNDS"); do
  for sc in Offline Server; do
    for f in jpeg kserve-binary; do
      u="$BASE/v1/classify"; [ $f = jpeg ] || u="$BASE/v2/models/$ARCH/infer"
      X=$OFFLINE_ARGS; [ $sc = Server ] && X=$SERVER_ARGS
      curl -s "$BASE/metrics" >"$OUT/m-$sc-$f-$r-0.txt"
      # shellcheck disable=SC2086
      "$DLPERF" loadgen --scenario $sc $X --url "$u" --request-format $f --input-size "$SIZE" --images "$IMAGES" \
        --samples 64 --out "$OUT/$sc-$f-$r" --json "$OUT/$sc-$f-$r.json" >"$OUT/$sc-$f-$r.txt" 2>&1 \
        || { echo "$sc $f round $r exited $? (log: $OUT/$sc-$f-$r.txt)"; exit 1; }
      curl -s "$BASE/metrics" >"$OUT/m-$sc-$f-$r-1.txt"
    done
  done
done
"$PY" - "$OUT" "$ROUNDS" <<'PY'
import json, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def prom(path):
    v = {}
    for line in open(path):
        m = re.match(r'^(dlperf_serve_\w+_(?:sum|count)) ([0-9.e+-]+)$', line)
        if m: v[m.group(1)] = float(m.group(2))
    return v
print(f"{'scenario':8} {'route':14} {'round':>5} {'verdict':8} {'samples/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} | "
      f"per request (ms): read decode queue-wait | infer per batch, mean batch")
for sc in ("Offline", "Server"):
    for r in range(1, rounds + 1):
        for f in ("jpeg", "kserve-binary"):
            res = json.load(open(f"{out}/{sc}-{f}-{r}.json"))["result"]
            lat = res["latency_ms"]
            rate = res["metric"]["value"] if sc == "Offline" else res["completed_samples_per_s"]  # LoadGen's metric
            a, b = prom(f"{out}/m-{sc}-{f}-{r}-0.txt"), prom(f"{out}/m-{sc}-{f}-{r}-1.txt")
            d = lambda k: b.get(k, 0) - a.get(k, 0)
            n, nb = d("dlperf_serve_decode_duration_seconds_count") or 1, d("dlperf_serve_batch_size_count") or 1
            ms = lambda k, m: 1000 * d(k + "_sum") / m
            print(f"{sc:8} {f:14} {r:5} {'VALID' if res['valid'] else 'INVALID':8} "
                  f"{rate:9.2f} {lat['p50']:8.1f} {lat['p90']:8.1f} {lat['p99']:8.1f} | "
                  f"{ms('dlperf_serve_read_duration_seconds', n):.2f} {ms('dlperf_serve_decode_duration_seconds', n):.2f} "
                  f"{ms('dlperf_serve_queue_wait_seconds', n):.1f} | {ms('dlperf_serve_inference_duration_seconds', nb):.1f}, "
                  f"{d('dlperf_serve_batch_size_sum') / nb:.2f}")
PY
