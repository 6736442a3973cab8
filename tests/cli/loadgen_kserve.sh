#!/bin/bash
# `dlperf loadgen --request-format kserve-json|kserve-binary` against `dlperf serve` itself (its KServe v2 route,
# POST /v2/models/<arch>/infer): every request answered 200 in Offline and in Server, VALID; the top-1 classes read
# back from the v2 answers (AccuracyOnly) are the same with JSON and with binary tensors, and the same as the JPEG
# route's (/v1/classify) for the same images: loadgen preprocesses each JPEG with dlperf's own val transform, so the
# server's engine sees the same sample either way. Model: resnet-mini on ref at 32x32 (seeded init). Bounded: ~30 s.
# tags: asan
# timeout: 240
set -u
T="$DLPERF_TEST_TMP/loadgen_kserve.$$"
mkdir -p "$T/imgs"
fail() { echo "FAIL: $*"; exit 1; }
"$PYTHON" - "$T/imgs" <<'PY' || { echo "skip: cannot make JPEGs with PIL"; rm -rf "$T"; exit 77; }
import sys, numpy as np
from PIL import Image
for i in range(6):
    y, x = np.mgrid[0:60, 0:80]
    a = np.stack([127 + 120 * np.sin(x * (0.05 + 0.03 * i) + c * (1 + i) + y * 0.04 * (i - 2)) for c in range(3)], -1)
    Image.fromarray(a.astype('uint8')).save(f"{sys.argv[1]}/img{i}.jpg", quality=90)
PY
"$DLPERF" serve --model resnet-mini --device ref --size 32 --port 0 --port-file "$T/port" --monitor-interval 0 \
  --max-batch 4 --json "$T/serve.json" >/dev/null 2>"$T/serve.err" &
SPID=$!
trap 'kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 300); do [ -s "$T/port" ] && break; kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
if ! [ -s "$T/port" ]; then
  grep -q "without libmicrohttpd" "$T/serve.err" && { echo "skip: this build has no libmicrohttpd"; exit 77; }
  cat "$T/serve.err"; fail "dlperf serve did not start"
fi
BASE="http://127.0.0.1:$(cat "$T/port")"
URL="$BASE/v2/models/resnet-mini/infer"
cd "$T" || exit 1
n=0
for fmt in kserve-json kserve-binary; do
  for sc in Offline Server; do
    dur=1; [ $sc = Offline ] && dur=0  # Offline's one query would have to outlast min duration: its size is a guess
    "$DLPERF" loadgen --scenario $sc --url "$URL" --request-format $fmt --input-size 32 --images "$T/imgs" --qps 40 \
      --latency-bound 1000 --early-stopping 0 --min-duration $dur --min-queries 40 --out "$T/$fmt-$sc" --json "$T/$fmt-$sc.json" \
      >"$T/out.txt" 2>"$T/err.txt" || { rc=$?; cat "$T/out.txt" "$T/err.txt" "$T/serve.err"; fail "$fmt $sc exited $rc"; }
    grep -q "Result is : VALID" "$T/out.txt" || { cat "$T/out.txt"; fail "$fmt $sc not VALID"; }
    "$PYTHON" -c "import json,sys; s=json.load(open(sys.argv[1]))['result']['samples']; assert s['ok']>=40 and s['ok']==s['issued'], s" \
      "$T/$fmt-$sc.json" || fail "$fmt $sc: not every request answered 200"
    n=$((n + 1))
  done
done
for fmt in kserve-json kserve-binary jpeg; do
  u=$URL; [ $fmt = jpeg ] && u="$BASE/v1/classify"
  "$DLPERF" loadgen --scenario SingleStream --mode AccuracyOnly --url "$u" --request-format $fmt --input-size 32 \
    --images "$T/imgs" --out "$T/acc-$fmt" >/dev/null 2>"$T/err.txt" || { cat "$T/err.txt"; fail "AccuracyOnly $fmt exited $?"; }
done
"$PYTHON" - "$T" <<'PY' || fail "top-1 over the routes"
import json, struct, sys
def top1(fmt):
    acc = json.load(open(f"{sys.argv[1]}/acc-{fmt}/mlperf_log_accuracy.json"))
    return {e["qsl_idx"]: int(struct.unpack("<f", bytes.fromhex(e["data"]))[0]) for e in acc}
j, b, v1 = top1("kserve-json"), top1("kserve-binary"), top1("jpeg")
assert len(j) == 6 and j == b, (j, b)
assert j == v1, ("KServe tensors vs the JPEG route", j, v1)
print("ok: top-1 of 6 images equal over KServe JSON, KServe binary and /v1/classify:", [j[k] for k in sorted(j)])
PY
kill -TERM "$SPID"; wait "$SPID"; rc=$?
[ "$rc" = 0 ] || { cat "$T/serve.err"; fail "dlperf serve exited $rc"; }
"$PYTHON" -c "import json,sys; s=json.load(open(sys.argv[1]))['stats']; bs=s['by_status']; assert set(bs) == {'200'}, bs" \
  "$T/serve.json" || fail "the server answered something other than 200: $(cat "$T/serve.json")"
echo "PASS ($n KServe loadgen runs VALID)"
