#!/bin/bash
# `dlperf serve`'s KServe v2 routes driven by the real client, tritonclient[http] from PyPI (never a runtime
# dependency: installed into a virtual environment under $DLPERF_ROOT/.venv-test/, ignored by git and kept between
# runs). Checks: server live/ready, server and model metadata, infer with JSON and with binary tensors (FP32 NCHW
# and NHWC, BF16, UINT8) and with a BYTES JPEG, the classification extension, the JPEG's top-1 equal to
# /v1/classify's for the same image; bad requests (wrong shape, datatype, size, a truncated binary body, an unknown
# model, input or output) get the protocol's {"error"} with a message naming the fault, and the server keeps serving.
# Skips (77) only when PyPI cannot be reached. Model: resnet-mini on ref at 32x32 (seeded init), so it is quick.
# tags: asan
# timeout: 600
set -u
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
T="$DLPERF_TEST_TMP/serve_tritonclient.$$"
mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }
VENV="$ROOT/.venv-test/tritonclient"
if ! [ -f "$VENV/.ok" ]; then
  rm -rf "$VENV"; mkdir -p "$ROOT/.venv-test"
  "$PYTHON" -m venv "$VENV" >"$T/venv.log" 2>&1 || { cat "$T/venv.log"; fail "cannot create a venv with $PYTHON"; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check 'tritonclient[http]' >"$T/pip.log" 2>&1; then
    if grep -qiE "NewConnectionError|Name or service not known|Temporary failure in name resolution|Network is unreachable|No matching distribution|Could not find a version|timed out|ProxyError" "$T/pip.log"; then
      rm -rf "$VENV" "$T"; echo "skip: PyPI cannot be reached to install tritonclient[http]: $(grep -iE 'error' "$T/pip.log" 2>/dev/null | tail -1)"; exit 77
    fi
    cat "$T/pip.log"; rm -rf "$VENV"; fail "pip install tritonclient[http] failed"
  fi
  touch "$VENV/.ok"
fi
"$PYTHON" - "$T/img.jpg" <<'PY' || { echo "skip: cannot make a JPEG with PIL"; rm -rf "$T"; exit 77; }
import sys, numpy as np
from PIL import Image
y, x = np.mgrid[0:48, 0:64]
a = np.stack([127 + 120 * np.sin(x * 0.09 + c + y * 0.05) for c in range(3)], -1).astype('uint8')
Image.fromarray(a).save(sys.argv[1], quality=90)
PY
"$DLPERF" serve --model resnet-mini --device ref --size 32 --port 0 --port-file "$T/port" --monitor-interval 0 \
  --max-batch 4 --max-body 1M >"$T/serve.out" 2>"$T/serve.err" &
SPID=$!
trap 'kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 300); do [ -s "$T/port" ] && break; kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
if ! [ -s "$T/port" ]; then
  grep -q "without libmicrohttpd" "$T/serve.err" && { echo "skip: this build has no libmicrohttpd"; exit 77; }
  cat "$T/serve.err"; fail "dlperf serve did not start"
fi
"$VENV/bin/python" - "127.0.0.1:$(cat "$T/port")" "$T/img.jpg" <<'PY' || { cat "$T/serve.err"; fail "tritonclient checks"; }
import json, struct, sys, urllib.request, urllib.error
import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
url, jpg_path = sys.argv[1], sys.argv[2]
M = "resnet-mini"
c = httpclient.InferenceServerClient(url=url)
assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(M), "live/ready"
sm = c.get_server_metadata()
assert sm["name"] == "dlperf" and "binary_tensor_data" in sm["extensions"], sm
md = c.get_model_metadata(M)
assert md["name"] == M and md["inputs"][0]["name"] == "input" and md["inputs"][0]["shape"] == [1, 3, 32, 32], md
assert md["outputs"][0]["name"] == "output" and md["outputs"][0]["shape"] == [1, 1000], md
print("live, ready, metadata:", md["inputs"][0], md["outputs"][0]["shape"])

def infer(inp, binary_out=True, class_count=0):
    out = httpclient.InferRequestedOutput("output", binary_data=binary_out, class_count=class_count)
    return c.infer(M, [inp], outputs=[out])

def tensor(arr, dtype, binary):
    i = httpclient.InferInput("input", list(arr.shape), dtype)
    i.set_data_from_numpy(arr, binary_data=binary)
    return i

rng = np.random.default_rng(1)
x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
l_json = infer(tensor(x, "FP32", False), binary_out=False).as_numpy("output")
l_bin = infer(tensor(x, "FP32", True)).as_numpy("output")
assert l_json.shape == (1, 1000) and np.isfinite(l_json).all(), l_json.shape
assert np.array_equal(l_json, l_bin), "JSON and binary tensors of the same values give different logits"
l_nhwc = infer(tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), "FP32", True)).as_numpy("output")
assert np.array_equal(l_json, l_nhwc), "NHWC and NCHW of the same tensor differ"
# BF16 (tritonclient takes ml_dtypes.bfloat16 arrays): the logits stay close to FP32's.
import ml_dtypes
l_bf16 = infer(tensor(x.astype(ml_dtypes.bfloat16), "BF16", True)).as_numpy("output")
assert np.allclose(l_bf16, l_json, rtol=0.05, atol=0.05 * np.abs(l_json).max()), "BF16"
# UINT8 pixels, normalized by the server, equal the FP32 tensor normalized here (ImageNet mean/std).
px = rng.integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
norm = ((px.astype(np.float32) / 255 - mean) / std).transpose(0, 3, 1, 2).copy()
l_u8 = infer(tensor(px, "UINT8", True)).as_numpy("output")
l_norm = infer(tensor(norm, "FP32", True)).as_numpy("output")
assert np.allclose(l_u8, l_norm, rtol=1e-4, atol=1e-4 * np.abs(l_norm).max()), "UINT8 vs normalized FP32"
print("tensors: FP32 JSON == binary == NHWC; BF16 and UINT8 within tolerance")

# The classification extension: top-3 as "value:index", highest first, agreeing with the logits.
cls = infer(tensor(x, "FP32", True), class_count=3).as_numpy("output")
top = [int(e.decode().split(":")[1]) for e in cls.reshape(-1)]
assert top == list(np.argsort(-l_json[0], kind="stable")[:3]), (top, np.argsort(-l_json[0])[:3])
cls_json = infer(tensor(x, "FP32", False), binary_out=False, class_count=3).as_numpy("output")
assert [int(str(e).split(":")[1]) for e in cls_json.reshape(-1)] == top, cls_json

# A BYTES JPEG: top-1 equal to /v1/classify's for the same image, and the same logits as binary and as base64 JSON.
jpg = open(jpg_path, "rb").read()
ji = httpclient.InferInput("input", [1], "BYTES")
ji.set_data_from_numpy(np.array([jpg], dtype=np.object_), binary_data=True)
lj = infer(ji).as_numpy("output")
req = urllib.request.Request(f"http://{url}/v1/classify", data=jpg, method="POST")
v1 = json.load(urllib.request.urlopen(req))
assert int(np.argmax(lj[0])) == v1["top5"][0]["class"], (int(np.argmax(lj[0])), v1["top5"][0])
import base64
body = json.dumps({"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": [base64.b64encode(jpg).decode()]}]})
r = json.load(urllib.request.urlopen(urllib.request.Request(f"http://{url}/v2/models/{M}/infer", data=body.encode(), method="POST")))
assert np.allclose(np.array(r["outputs"][0]["data"], np.float32), lj[0], rtol=1e-6, atol=1e-6), "base64 JPEG"
print("JPEG: top-1", v1["top5"][0]["class"], "equals /v1/classify's; binary and base64 agree")

def expect_error(what, fn, words):
    try:
        fn()
    except InferenceServerException as e:
        msg = e.message()
        assert all(w in msg for w in words), (what, msg)
        print(f"  {what}: {msg}")
        return
    raise AssertionError(f"{what}: no error")

print("bad requests:")
expect_error("wrong shape", lambda: infer(tensor(np.zeros((1, 3, 31, 31), np.float32), "FP32", True)), ["31x31", "32x32"])
expect_error("batch of 2", lambda: infer(tensor(np.zeros((2, 3, 32, 32), np.float32), "FP32", True)), ["batch of 2"])
expect_error("datatype", lambda: infer(tensor(np.zeros((1, 3, 32, 32), np.int32), "INT32", True)), ["INT32", "FP32"])
expect_error("unknown model", lambda: c.infer("nope", [tensor(x, "FP32", True)]), ["unknown model 'nope'"])
expect_error("unknown input", lambda: c.infer(M, [httpclient.InferInput("image", [1, 3, 32, 32], "FP32").set_data_from_numpy(x)]), ["unknown input 'image'"])
expect_error("unknown output", lambda: c.infer(M, [tensor(x, "FP32", True)], outputs=[httpclient.InferRequestedOutput("probs")]), ["unknown output 'probs'"])
expect_error("not a JPEG", lambda: infer((lambda i: (i.set_data_from_numpy(np.array([b"GIF89a...."], dtype=np.object_)), i)[1])(httpclient.InferInput("input", [1], "BYTES"))), ["not a JPEG"])

def raw(body, headers):
    rq = urllib.request.Request(f"http://{url}/v2/models/{M}/infer", data=body, method="POST", headers=headers)
    try:
        urllib.request.urlopen(rq)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    raise AssertionError("accepted")

head = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 32, 32],
                               "parameters": {"binary_data_size": 3 * 32 * 32 * 4}}]}).encode()
data = x.tobytes()
for what, body, hl, words in [
        ("truncated binary", head + data[:1000], len(head), ["binary_data_size 12288", "1000 bytes"]),
        ("size", head + data + b"xx", len(head), ["12290 bytes follow", "12288"]),
        ("header length past the body", head + data, len(head) + len(data) + 5, ["Inference-Header-Content-Length"]),
        ("header length cutting the JSON", head + data, len(head) - 3, ["not JSON"]),
        ("JSON data count", json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 32, 32], "data": [1.0] * 5}]}).encode(), None, ["5 elements", "3072"])]:
    code, err = raw(body, {"Inference-Header-Content-Length": str(hl)} if hl is not None else {})
    assert code == 400 and set(err) == {"error"} and all(w in err["error"] for w in words), (what, code, err)
    print(f"  {what}: {code} {err['error']}")
assert c.is_server_live() and c.is_model_ready(M)
again = infer(tensor(x, "FP32", True)).as_numpy("output")
assert np.array_equal(again, l_bin), "the server answers differently after the bad requests"
print("ok: still serving after the bad requests")
PY
kill -TERM "$SPID"; wait "$SPID"; rc=$?
[ "$rc" = 0 ] || { cat "$T/serve.err"; fail "dlperf serve exited $rc after SIGTERM"; }
echo PASS
