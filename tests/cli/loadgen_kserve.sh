#!/bin/bash
# `dlperf loadgen --request-format kserve-json|kserve-binary` against a small stand-in KServe v2 / Triton server
# (Python, here): every request must be a valid v2 inference request (POST /v2/models/m/infer, FP32 [1,3,S,S]
# as JSON "data" or with the binary-data extension and its Inference-Header-Content-Length), the two formats must
# carry the same tensors, and top-1 is read from the JSON response (AccuracyOnly scores it). Bounded: ~10 s.
# tags: asan
# timeout: 90
set -u
T="$DLPERF_TEST_TMP/loadgen_kserve.$$"
mkdir -p "$T/imgs"
fail() { echo "FAIL: $*"; exit 1; }
"$PYTHON" - "$T/imgs" <<'PY' || { echo "skip: cannot make JPEGs with PIL"; exit 77; }
import sys, numpy as np
from PIL import Image
for i in range(4):
    y, x = np.mgrid[0:60, 0:80]
    a = np.stack([127 + 120 * np.sin(x * (0.05 + 0.02 * i) + c + y * 0.04) for c in range(3)], -1).astype('uint8')
    Image.fromarray(a).save(f"{sys.argv[1]}/img{i}.jpg", quality=90)
PY
cat >"$T/server.py" <<'PY'
# A stand-in for a KServe v2 endpoint: validates each request and answers logits whose argmax is
# (the tensor's sum rounded) mod 4; logs one line per request: format and the tensor's sum.
import json, struct, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
S = int(sys.argv[2]); log = open(sys.argv[3], "a"); lock = threading.Lock()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def bad(self, why):
        b = json.dumps({"error": why}).encode()
        self.send_response(400); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        try: self.handle_infer()
        except Exception as e: self.bad(repr(e))  # an answer, never a hang
    def handle_infer(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v2/models/m/infer": return self.bad("path " + self.path)
        hl = self.headers.get("Inference-Header-Content-Length")
        head = json.loads(body[:int(hl)] if hl else body)
        inp = head["inputs"][0]
        if inp["name"] != "input" or inp["datatype"] != "FP32" or inp["shape"] != [1, 3, S, S]: return self.bad(str(inp))
        n = 3 * S * S
        if hl:
            raw = body[int(hl):]
            if inp["parameters"]["binary_data_size"] != len(raw) or len(raw) != 4 * n: return self.bad("binary size")
            vals = struct.unpack("<%df" % n, raw); fmt = "binary"
        else:
            vals = inp["data"]; fmt = "json"
            if len(vals) != n: return self.bad("data length")
        s = sum(vals); cls = int(round(s)) % 4
        with lock: log.write(f"{fmt} {s:.6f}\n"); log.flush()
        out = json.dumps({"model_name": "m", "outputs": [{"name": "output", "shape": [1, 4], "datatype": "FP32",
                          "data": [1.0 if k == cls else 0.0 for k in range(4)]}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
ThreadingHTTPServer.request_queue_size = 128  # 16 connections open at once
ThreadingHTTPServer.daemon_threads = True
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
"$PYTHON" "$T/server.py" "$T/port" 32 "$T/requests.log" 2>"$T/server.err" &
SPID=$!
cleanup() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/server.err"; fail "the stand-in server did not start"; }
URL="http://127.0.0.1:$(cat "$T/port")/v2/models/m/infer"
cd "$T" || exit 1

for fmt in kserve-json kserve-binary; do
  "$DLPERF" loadgen --scenario Offline --url "$URL" --request-format $fmt --input-size 32 --images "$T/imgs" --qps 50 \
    --min-duration 0 --min-queries 40 --out "$T/$fmt" --json "$T/$fmt.json" >/dev/null 2>"$T/err.txt" \
    || { rc=$?; cat "$T/err.txt" "$T/server.err"; fail "$fmt run exited $rc"; }
  "$PYTHON" -c "import json,sys; s=json.load(open(sys.argv[1]))['result']['samples']; assert s['ok']==40, s" "$T/$fmt.json" \
    || fail "$fmt: not every request answered 200 (the server rejected some: $(cat "$T/server.err"))"
done
# AccuracyOnly: the server's class for each image, read back from its responses, scores 100% against the
# labels the server would give (computed from the sums it logged for the JSON run, in library order).
"$DLPERF" loadgen --scenario SingleStream --mode AccuracyOnly --url "$URL" --request-format kserve-binary --input-size 32 \
  --images "$T/imgs" --out "$T/acc" --json "$T/acc.json" >/dev/null 2>"$T/err.txt" || { cat "$T/err.txt"; fail "AccuracyOnly exited $?"; }
"$PYTHON" - "$T/requests.log" "$T/acc/mlperf_log_accuracy.json" <<'PY' || fail "KServe requests"
import json, struct, sys
lines = [l.split() for l in open(sys.argv[1])]
js = sorted(round(float(s), 3) for f, s in lines[:40] if f == "json")
bs = sorted(round(float(s), 3) for f, s in lines[40:80] if f == "binary")
assert len(js) == 40 and len(bs) == 40 and js == bs, (js[:4], bs[:4])      # same tensors in both formats
acc = json.load(open(sys.argv[2]))
sums = [float(s) for f, s in lines[80:]]
assert len(acc) == 4 and len(sums) == 4, (acc, sums)
want = sorted(int(round(s)) % 4 for s in sums)
got = sorted(int(struct.unpack("<f", bytes.fromhex(e["data"]))[0]) for e in acc)
assert got == want, (got, want)                                             # top-1 from the v2 response
print("ok: 40 JSON and 40 binary KServe v2 requests with the same tensors; top-1 read back:", got)
PY
echo PASS
