#!/bin/bash
# A lone request through `dlperf serve` against the engine alone: LoadGen SingleStream over the JPEG route
# (/v1/classify) and over the tensor route (KServe v2 binary FP32, preprocessed by the client), against
# `dlperf infer --batch 1 --from jpeg` (the engine's p50 on one image, and the decode time it measures apart), in
# alternating runs on one machine (their order rotating round by round), so drift hits all three alike. Prints, per round, the p50s, the bound
# 1.3 x (infer p50 + decode) (the tensor route: 1.3 x infer p50, it has no decode on the server) and the server's
# split of a request's time from /metrics (read, decode, queue, inference, the rest: reply + network + client).
#   bench/serve_singlestream.sh [OUT_DIR]      (env: DLPERF, IMAGES, DEVICE, PRECISION, THREADS, ROUNDS, MODEL_ARGS)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
OUT=${1:-$ROOT/out/serve_singlestream-$(date -u +%Y%m%dT%H%M%S)}
IMAGES=${IMAGES:?set IMAGES=DIR: JPEGs of ImageNet-like sizes, e.g. the val/ of a synthetic dataset made by dlperf data gen}
DEVICE=${DEVICE:-cpu}; PRECISION=${PRECISION:-fp32}; THREADS=${THREADS:-1}; ROUNDS=${ROUNDS:-3}
MODEL_ARGS=${MODEL_ARGS:---model resnet50}
PY=${PYTHON:-/usr/bin/python3}
[ -d "$IMAGES" ] || { echo "IMAGES=$IMAGES: not a directory"; exit 2; }
mkdir -p "$OUT" || exit 2
ENG="$MODEL_ARGS --device $DEVICE --precision $PRECISION --threads $THREADS"
# shellcheck disable=SC2086
"$DLPERF" serve $ENG --workers 1 --max-batch 8 --port 0 --port-file "$OUT/port" --monitor-interval 0 \
  >"$OUT/serve.out" 2>"$OUT/serve.err" &
SPID=$!
trap 'kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
for _ in $(seq 600); do [ -s "$OUT/port" ] && break; kill -0 $SPID 2>/dev/null || break; sleep 0.1; done
[ -s "$OUT/port" ] || { cat "$OUT/serve.err"; echo "dlperf serve did not start"; exit 1; }
BASE="http://127.0.0.1:$(cat "$OUT/port")"
ARCH=$(curl -s "$BASE/v2" >/dev/null && sed -n 's/^serve: \([^ ]*\) .*/\1/p' "$OUT/serve.err" | head -1)
SIZE=$(curl -s "$BASE/v2/models/$ARCH" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['inputs'][0]['shape'][-1])")
metrics() { curl -s "$BASE/metrics" >"$1"; }
run_infer() {  # shellcheck disable=SC2086
  "$DLPERF" infer $ENG --batch 1 --from jpeg --images "$IMAGES" --samples 64 --min-duration 10 --monitor-interval 0 \
    --json "$OUT/infer-$1.json" >"$OUT/infer-$1.txt" 2>&1 || { cat "$OUT/infer-$1.txt"; exit 1; }
}
run_ss() {  # round route url format
  metrics "$OUT/m-$1-$2-0.txt"
  "$DLPERF" loadgen --scenario SingleStream --url "$3" --request-format "$4" --input-size "$SIZE" --images "$IMAGES" \
    --samples 64 --connections 1 --out "$OUT/ss-$2-$1" --json "$OUT/ss-$2-$1.json" >"$OUT/ss-$2-$1.txt" 2>&1 \
    || { cat "$OUT/ss-$2-$1.txt"; exit 1; }
  metrics "$OUT/m-$1-$2-1.txt"
}
# The three runs rotate their order round by round, so a machine that drifts one way does not always favour one.
for r in $(seq "$ROUNDS"); do
  for k in 0 1 2; do
    case $(( (k + r - 1) % 3 )) in
      0) run_infer "$r" ;;
      1) run_ss "$r" jpeg "$BASE/v1/classify" jpeg ;;
      2) run_ss "$r" tensor "$BASE/v2/models/$ARCH/infer" kserve-binary ;;
    esac
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
def split(a, b):  # mean ms per request between two scrapes
    d = lambda k: prom(b).get(k, 0) - prom(a).get(k, 0)
    n = d("dlperf_serve_decode_duration_seconds_count") or 1
    ms = lambda k: 1000 * d(k + "_sum") / n
    rd, dec, qw, inf = (ms("dlperf_serve_read_duration_seconds"), ms("dlperf_serve_decode_duration_seconds"),
                        ms("dlperf_serve_queue_wait_seconds"), ms("dlperf_serve_inference_duration_seconds"))
    return {"read": rd, "decode": dec, "queue": qw - dec, "infer": inf, "server": ms("dlperf_serve_request_duration_seconds") + rd}
print(f"{'round':>5} {'infer p50':>9} {'decode':>7} {'bound':>7} | {'JPEG p50':>8} {'x':>5} {'tensor p50':>10} {'x':>5} | split of a JPEG request (mean ms): read decode queue infer rest | tensor request: read convert queue infer rest")
rows = []
for r in range(1, rounds + 1):
    inf = json.load(open(f"{out}/infer-{r}.json"))["results"][0]
    p50, st = inf["inference_ms"]["p50"], inf["stages"]
    dec = st["read_ms"] + st["decode_ms"] + st["resize_ms"]
    sj = json.load(open(f"{out}/ss-jpeg-{r}.json"))["result"]
    stn = json.load(open(f"{out}/ss-tensor-{r}.json"))["result"]
    pj, pt = sj["latency_ms"]["p50"], stn["latency_ms"]["p50"]
    a, b = split(f"{out}/m-{r}-jpeg-0.txt", f"{out}/m-{r}-jpeg-1.txt"), split(f"{out}/m-{r}-tensor-0.txt", f"{out}/m-{r}-tensor-1.txt")
    bound_j, bound_t = 1.3 * (p50 + dec), 1.3 * p50
    rows.append((pj / (p50 + dec), pt / p50, pt / (p50 + dec)))
    print(f"{r:>5} {p50:9.1f} {dec:7.1f} {bound_j:7.1f} | {pj:8.1f} {pj/(p50+dec):5.2f} {pt:10.1f} {pt/p50:5.2f} | "
          f"{a['read']:.2f} {a['decode']:.1f} {a['queue']:.1f} {a['infer']:.1f} {sj['latency_ms']['mean']-a['server']:.1f} | "
          f"{b['read']:.2f} {b['decode']:.2f} {b['queue']:.1f} {b['infer']:.1f} {stn['latency_ms']['mean']-b['server']:.1f}")
worst_j, worst_t, worst_td = (max(x[i] for x in rows) for i in range(3))
print(f"worst ratio: JPEG route {worst_j:.2f} x (infer p50 + decode); tensor route {worst_t:.2f} x infer p50 alone, "
      f"{worst_td:.2f} x (infer p50 + decode) ({'within' if max(worst_j, worst_td) <= 1.3 else 'NOT within'} 1.3)")
PY
