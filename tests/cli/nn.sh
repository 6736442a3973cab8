#!/bin/bash
# `dlperf nn`: info figures, bench and step end to end on tiny nets, and the errors a user meets (unknown model
# or device, too-small input, existing outputs, a checkpoint of another model, a corrupt file).
# tags: asan
# timeout: 300
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/nn-sh.XXXXXX")
trap 'rm -rf "$T"' EXIT
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*"; exit 1; }
expect_fail() {  # expect_fail "message part" cmd...
  local want=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "expected failure: $* (got: $out)"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' from: $* (got: $out)"
  echo "$out" | grep -q "AddressSanitizer\|runtime error" && fail "sanitizer report: $*"
  echo "ok: $* -> $(echo "$out" | head -1)"
}

out=$($D nn info --model resnet50) || fail "nn info"
echo "$out" | grep -q "parameters     25557032 in 161 tensors" || fail "resnet50 parameter count: $out"
echo "$out" | grep -q "forward        8.178 GFLOP" || fail "resnet50 GFLOP: $out"
$D nn info --model resnet18 --classes 10 --size 64 --json "$T/info.json" >/dev/null || fail "nn info --json"
grep -q '"parameters": 11181642' "$T/info.json" || fail "resnet18/10 classes parameter count"
grep -q '"schema": "dlperf.nn-info/1"' "$T/info.json" || fail "schema"
$D nn info --model resnet-mini --size 32 --layers | grep -q "layer4.0.downsample.0" || fail "--layers"
expect_fail "already exists" $D nn info --json "$T/info.json"
expect_fail "unknown model 'resnet19'" $D nn info --model resnet19
expect_fail "too small" $D nn info --model resnet18 --size 16
expect_fail "unknown device 'tpu'" $D nn bench --device tpu --model resnet-mini --size 32
expect_fail "fp32 only" $D nn bench --device ref --precision bf16 --model resnet-mini --size 32 --batch 2
expect_fail "needs --input and --out" $D nn step --model resnet-mini
expect_fail "is not one of" $D nn bench --precision fp64

# bench on a tiny net, JSON result
$D nn bench --device ref --model resnet-mini --size 32 --batch 2 --steps 2 --warmup 1 --threads 2 \
  --json "$T/bench.json" >"$T/bench.txt" 2>&1 || { cat "$T/bench.txt"; fail "nn bench"; }
for k in '"schema": "dlperf.nn-bench/1"' '"img_per_s"' '"backward"' '"achieved_gflop_per_s"' '"cpu_model"'; do
  grep -q "$k" "$T/bench.json" || fail "bench JSON lacks $k"
done
$D nn bench --device ref --model resnet-mini --size 32 --batch 3 --steps 1 --warmup 0 --infer | grep -q "img/s" \
  || fail "nn bench --infer"
# on the cpu backend the result names oneDNN's ISA and every kernel of the plan
if $D version | grep -q "^oneDNN ISA"; then
  $D nn bench --device cpu --model resnet-mini --size 32 --batch 2 --steps 1 --warmup 0 --threads 2 \
    --json "$T/bench-cpu.json" >"$T/bench-cpu.txt" 2>&1 || { cat "$T/bench-cpu.txt"; fail "nn bench on cpu"; }
  "$PY" -c "
import json, sys
r = json.load(open(sys.argv[1]))
b = r['backend_plan']
assert b['isa'] == r['versions']['oneDNN ISA'].split()[0] and any(k.startswith('convolution ') for k in b['kernels']), b
" "$T/bench-cpu.json" || fail "nn bench JSON: ISA and kernels"
fi

# init -> step (train, then eval on the checkpoint) on a tiny batch
$D nn init --model resnet-mini --classes 4 --size 32 --seed 2 --out "$T/w.safetensors" >/dev/null || fail "nn init"
expect_fail "already exists" $D nn init --model resnet-mini --classes 4 --out "$T/w.safetensors"
"$PY" - "$T" <<'PYEOF' || fail "writing the batch"
import sys, struct, json, random
t = sys.argv[1]
random.seed(1)
x = [random.gauss(0, 1) for _ in range(2 * 3 * 32 * 32)]
hdr = {"input": {"dtype": "F32", "shape": [2, 3, 32, 32], "data_offsets": [0, 4 * len(x)]},
       "labels": {"dtype": "I64", "shape": [2], "data_offsets": [4 * len(x), 4 * len(x) + 16]}}
h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
with open(f"{t}/b.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + struct.pack(f"<{len(x)}f", *x) + struct.pack("<2q", 1, 3))
PYEOF
$D nn step --model resnet-mini --classes 4 --weights "$T/w.safetensors" --input "$T/b.safetensors" \
  --out "$T/o.safetensors" --checkpoint "$T/ck.safetensors" --threads 2 | grep -q "train step on ref: 2 samples" \
  || fail "nn step"
[ -f "$T/ck.state.safetensors" ] || fail "checkpoint sidecar missing"
ls "$T" | grep -q "tmp" && fail "temporary files left: $(ls "$T")"
$D nn step --eval --model resnet-mini --classes 4 --weights "$T/ck.safetensors" --input "$T/b.safetensors" \
  --out "$T/e.safetensors" | grep -q "eval on ref" || fail "nn step --eval on the checkpoint"
expect_fail "already exists" $D nn step --model resnet-mini --classes 4 --input "$T/b.safetensors" --out "$T/o.safetensors"
expect_fail "has shape (4, 64) but net resnet-mini (7 classes) needs (7, 64)" \
  $D nn step --model resnet-mini --classes 7 --weights "$T/w.safetensors" --input "$T/b.safetensors" --out "$T/x.safetensors"
$D nn init --model resnet18 --classes 4 --size 32 --out "$T/r18.safetensors" >/dev/null || fail "nn init resnet18"
expect_fail "does not match net resnet34: 80 missing key(s): layer1.2.conv1.weight" \
  $D nn step --model resnet34 --classes 4 --weights "$T/r18.safetensors" --input "$T/b.safetensors" --out "$T/x.safetensors"
head -c 1000 "$T/w.safetensors" >"$T/cut.safetensors"
expect_fail "cut.safetensors" \
  $D nn step --model resnet-mini --classes 4 --weights "$T/cut.safetensors" --input "$T/b.safetensors" --out "$T/x.safetensors"
# hostile batches (issue 18): labels that narrowing would turn into valid classes, absurd dimensions — refused, naming
# the file and the tensor, before anything runs
"$PY" - "$T" <<'PYEOF' || fail "writing hostile batches"
import sys, struct, json
t = sys.argv[1]
def batch(name, shape, labels):
    n = 1
    for d in shape: n *= d
    nx = n if n < 1 << 20 else 0  # absurd shapes: the header alone (the reader must refuse before reading data)
    hdr = {"input": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4 * nx]},
           "labels": {"dtype": "I64", "shape": [len(labels)], "data_offsets": [4 * nx, 4 * nx + 8 * len(labels)]}}
    h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(f"{t}/{name}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"\0" * (4 * nx) + struct.pack(f"<{len(labels)}q", *labels))
batch("big-label", [1, 3, 32, 32], [2 ** 32 + 3])
batch("neg-label", [1, 3, 32, 32], [-2 ** 63])
PYEOF
expect_fail "big-label.safetensors: tensor 'labels'[0] = 4294967299 is not a class index" \
  $D nn step --eval --model resnet-mini --classes 4 --input "$T/big-label.safetensors" --out "$T/x1.safetensors"
expect_fail "neg-label.safetensors: tensor 'labels'[0] = -9223372036854775808 is not a class index" \
  $D nn step --eval --model resnet-mini --classes 4 --input "$T/neg-label.safetensors" --out "$T/x2.safetensors"
# weights holding a NaN: refused, naming the tensor (they would train and serve garbage without a word)
"$PY" - "$T" <<'PYEOF' || fail "writing NaN weights"
import sys, struct, json
t = sys.argv[1]
raw = open(f"{t}/w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
name = sorted(k for k in hdr if k != "__metadata__" and hdr[k]["dtype"] == "F32")[0]
off = 8 + n + hdr[name]["data_offsets"][0]
open(f"{t}/nan.safetensors", "wb").write(raw[:off] + struct.pack("<f", float("nan")) + raw[off + 4:])
print(name)
PYEOF
expect_fail "holds 1 NaN or infinite value(s)" \
  $D nn step --eval --model resnet-mini --classes 4 --weights "$T/nan.safetensors" --input "$T/b.safetensors" --out "$T/x3.safetensors"
# An inference plan at batch 1 on a CPU without AMX builds both propagation kinds, times them and keeps the faster
# (plan_info says so, with both times); forcing one (DLPERF_CPU_INFER_PROP) or batch > 1 does not time anything.
if $D version | grep -q "^oneDNN ISA"; then
  amx=$($D version | grep -c "^oneDNN ISA.*amx" || true)
  for pr in auto training; do
    rm -f "$T/tuned-$pr.json"
    DLPERF_CPU_INFER_PROP=$pr $D nn bench --device cpu --model resnet-mini --size 32 --batch 1 --steps 1 --warmup 0 \
      --infer --threads 2 --json "$T/tuned-$pr.json" >/dev/null 2>&1 || fail "nn bench --infer --batch 1 ($pr)"
  done
  rm -f "$T/tuned-b2.json"
  $D nn bench --device cpu --model resnet-mini --size 32 --batch 2 --steps 1 --warmup 0 --infer --threads 2 \
    --json "$T/tuned-b2.json" >/dev/null 2>&1 || fail "nn bench --infer --batch 2"
  "$PY" - "$T" "$amx" <<'PYEOF2' || fail "the batch-1 propagation kind"
import json, sys
def plan(name):
    j = json.load(open(f"{sys.argv[1]}/{name}.json"))
    def find(o):
        if isinstance(o, dict):
            if "conv_prop_kind" in o:
                return o
            for v in o.values():
                r = find(v)
                if r:
                    return r
        return None
    return find(j)
auto, forced, b2 = plan("tuned-auto"), plan("tuned-training"), plan("tuned-b2")
assert auto and forced and b2, "no backend plan info in nn bench's JSON"
if sys.argv[2] == "0":
    t = auto["conv_prop_timed"]
    assert t["forward_training_ms"] > 0 and t["forward_inference_ms"] > 0, t
    faster = "forward_inference" if t["forward_inference_ms"] < t["forward_training_ms"] else "forward_training"
    assert auto["conv_prop_kind"] == faster, (auto["conv_prop_kind"], t)
    print(f"ok batch 1 timed both kinds: {t}, kept {faster}")
else:
    assert "conv_prop_timed" not in auto and auto["conv_prop_kind"] == "forward_inference", auto
    print("ok AMX: forward_inference, nothing timed")
assert "conv_prop_timed" not in forced and forced["conv_prop_kind"] == "forward_training", forced
assert "conv_prop_timed" not in b2, b2
print("ok forced kind and batch 2: nothing timed")
PYEOF2
fi
echo "nn.sh: all checks passed"
