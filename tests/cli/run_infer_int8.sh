#!/bin/bash
# int8 inference end to end on a tiny net (resnet-mini 32x32 on the cpu backend) over a small synthetic ImageNet:
# `dlperf infer --precision int8` (calibration made beside the weights, then reused; the plan's int8 convolutions in
# the JSON), --accuracy with the agreement with fp32, the errors a user meets (a file that is not a calibration,
# one of other weights or another model, int8 on the ref device, `train --precision int8`), then `dlperf serve
# --precision int8` answering a POSTed JPEG and `dlperf loadgen --sut local --precision int8`.
# (Accuracy against torchvision: tests/py/test_int8_torchvision.py; every int8 op against ref: test_nn_quant.)
# tags: asan
# timeout: 180
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/int8-sh.XXXXXX")
SERVE_PID=""
trap '[ -n "$SERVE_PID" ] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$T"' EXIT
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*"; exit 1; }
expect_fail() {  # expect_fail "message part" cmd...
  local want=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "expected failure: $* (got: $out)"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' from: $* (got: $out)"
  echo "$out" | grep -q "AddressSanitizer\|runtime error" && fail "sanitizer report: $*"
  echo "ok: $* -> $(echo "$out" | grep -v '^using the synthetic' | head -1)"
}
if ! $D infer --help | grep -q -- '--calib-images'; then echo "SKIP: no int8 in this build"; exit 77; fi
if ! $D nn bench --device cpu --model resnet-mini --size 32 --batch 1 --steps 1 --warmup 0 --infer >/dev/null 2>&1; then
  echo "SKIP: this build has no cpu backend (oneDNN): int8 runs there"; exit 77
fi
M=(--model resnet-mini --size 32 --device cpu --threads 1)

$D data gen --out "$T/syn" --classes 4 --per-class 3 --val-per-class 3 --size 40-90 --seed 2 >/dev/null 2>&1 || fail "data gen"
$D nn init --model resnet-mini --classes 4 --size 32 --seed 3 --out "$T/w.safetensors" >/dev/null || fail "nn init"
$D nn init --model resnet-mini --classes 4 --size 32 --seed 4 --out "$T/w2.safetensors" >/dev/null || fail "nn init 2"
$D nn init --model resnet18 --classes 4 --size 32 --seed 3 --out "$T/r18.safetensors" >/dev/null || fail "nn init r18"

# calibrated on the train split, saved beside the weights; a second run reuses it
$D infer "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --precision int8 --calib-images 8 --batch 1,4 \
  --iters 2 --warmup 1 --samples 8 --monitor-interval 0 --json "$T/a.json" >"$T/a.out" 2>"$T/a.err" \
  || { cat "$T/a.out" "$T/a.err"; fail "infer int8"; }
grep -q "int8: percentile ranges calibrated on 8 images of .*/syn/train" "$T/a.err" || fail "calibration line: $(cat "$T/a.err")"
[ -s "$T/w.int8-percentile.safetensors" ] || fail "no calibration file beside the weights: $(ls "$T")"
grep -q "cpu int8 inference plan" "$T/a.out" || fail "plan line: $(cat "$T/a.out")"
$PY - "$T/a.json" <<'PYEOF' || fail "infer int8 JSON"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["int8_calibration"]
assert c["method"] == "percentile" and c["images"] == 8, c
b = r["plan"]["backend_plan"]
assert b["precision"] == "int8" and b["int8_convs"] >= 10 and b["int8_first_conv"] == "int8", b
assert any("int8" in k or "vnni" in k or "brg" in k for k in b["kernels"]), b["kernels"]
assert [p["batch"] for p in r["results"]] == [1, 4] and all(p["images_per_s"] > 0 for p in r["results"])
print("ok: infer int8 JSON:", b["int8_convs"], "int8 convolutions,", sorted(b["kernels"])[:3])
PYEOF
# (the first convolution kept in fp32 this time: one int8 convolution fewer)
$D infer "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --precision int8 --calib-images 8 --batch 2 \
  --fp32-first-conv --iters 1 --warmup 0 --samples 4 --monitor-interval 0 --json "$T/b.json" >"$T/b.out" 2>"$T/b.err" \
  || { cat "$T/b.err"; fail "infer int8 again"; }
grep -q "int8: activation ranges from $T/w.int8-percentile.safetensors (8 images, percentile)" "$T/b.err" \
  || fail "not reused: $(cat "$T/b.err")"
$PY - "$T/a.json" "$T/b.json" <<'PYEOF' || fail "--fp32-first-conv JSON"
import json, sys
a, b = (json.load(open(f))["plan"]["backend_plan"] for f in sys.argv[1:3])
assert b["int8_first_conv"] == "fp32" and b["int8_convs"] == a["int8_convs"] - 1, (a, b)
PYEOF
$D infer "${M[@]}" --precision int8 --int8-first-conv --fp32-first-conv --batch 1 >/dev/null 2>"$T/c.err" \
  && fail "--int8-first-conv with --fp32-first-conv accepted"
grep -q "give one" "$T/c.err" || fail "both first-conv options: $(cat "$T/c.err")"
echo "ok: the calibration beside the weights is reused; --fp32-first-conv keeps the first convolution fp32"

# --accuracy: int8 and fp32 side by side on the val split, with the agreement
$D infer "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --precision int8 --calib-images 8 --accuracy \
  --batch 4 --json "$T/acc.json" >"$T/acc.out" 2>"$T/acc.err" || { cat "$T/acc.out" "$T/acc.err"; fail "--accuracy"; }
grep -q "int8 vs fp32: top-1 .* points, top-1 agreement" "$T/acc.out" || fail "--accuracy output: $(cat "$T/acc.out")"
$PY - "$T/acc.json" <<'PYEOF' || fail "--accuracy JSON"
import json, sys
a = json.load(open(sys.argv[1]))["accuracy"]
assert a["images"] == 12 and 0 <= a["top1_agreement_with_fp32"] <= 1 and 0 <= a["top1"] <= a["top5"] <= 1, a
print(f"ok: --accuracy: {a['images']} images, agreement {a['top1_agreement_with_fp32']:.2f}")
PYEOF

# --streams 2 (two plans of one thread each, the batch split between them): the same answers as one plan (the
# classes in order; the percentages may differ in the last digit where a batch's fp32 average pool and fc block apart)
for s in 1 2; do
  $D infer --model resnet-mini --size 32 --device cpu --threads 2 --streams $s --weights "$T/w.safetensors" \
    --data "$T/syn" --precision int8 --calib-images 8 --top5 --images "$T/syn/val" >"$T/st$s.out" 2>"$T/st$s.err" \
    || { cat "$T/st$s.err"; fail "infer --top5 --streams $s"; }
  awk '{print $1, $2}' "$T/st$s.out" >"$T/st$s.cls"
done
[ "$(grep -c '^ *1\. ' "$T/st2.out")" = 12 ] || fail "--streams 2 --top5: not 12 images: $(cat "$T/st2.out")"
cmp -s "$T/st1.cls" "$T/st2.cls" || fail "--streams 2 answers differ: $(diff "$T/st1.cls" "$T/st2.cls" | head -5)"
$D infer --model resnet-mini --size 32 --device cpu --threads 2 --streams 2 --weights "$T/w.safetensors" \
  --data "$T/syn" --precision int8 --calib-images 8 --batch 5,1 --iters 2 --warmup 1 --samples 5 \
  --monitor-interval 0 --json "$T/st.json" >"$T/st.out" 2>"$T/st.err" || { cat "$T/st.err"; fail "infer --streams 2"; }
$PY - "$T/st.json" <<'PYEOF' || fail "--streams JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["streams"] == 2, r["config"]
b = r["plan"]["backend_plan"]
assert b["streams"] == 2 and b["stream_batches"] == [3, 2] and b["stream_threads"] == [1, 1] and b["batch"] == 5, b
assert sorted(p["batch"] for p in r["results"]) == [1, 5] and all(p["images_per_s"] > 0 for p in r["results"])
print("ok: --streams 2: batch 5 as", b["stream_batches"], "on", b["stream_threads"], "threads; answers as one plan's")
PYEOF
expect_fail "--streams 3: give 1..2" $D infer --model resnet-mini --size 32 --device cpu --threads 2 --streams 3 \
  --iters 1 --samples 2 --batch 2
expect_fail "only the cpu device runs streams" $D infer --model resnet-mini --size 32 --device ref --threads 2 \
  --streams 2 --iters 1 --samples 2 --batch 2

# errors, each naming the thing at fault
printf 'not a calibration' >"$T/junk.safetensors"
expect_fail "$T/junk.safetensors" $D infer "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --precision int8 \
  --calib "$T/junk.safetensors" --iters 1 --samples 2 --batch 1
expect_fail "calibrated with other weights" $D infer "${M[@]}" --weights "$T/w2.safetensors" --data "$T/syn" \
  --precision int8 --calib "$T/w.int8-percentile.safetensors" --iters 1 --samples 2 --batch 1
expect_fail "calibrates resnet-mini" $D infer --model resnet18 --size 32 --device cpu --threads 1 \
  --weights "$T/r18.safetensors" --data "$T/syn" --precision int8 --calib "$T/w.int8-percentile.safetensors" \
  --iters 1 --samples 2 --batch 1
expect_fail "int8 inference runs on the cpu device" $D infer --model resnet-mini --size 32 --device ref --weights "$T/w.safetensors" --data "$T/syn" \
  --precision int8 --calib "$T/new.safetensors" --calib-images 4 --iters 1 --samples 2 --batch 1
expect_fail "--precision int8 is for inference" $D train --device cpu --data "$T/syn" --model resnet-mini --size 32 \
  --steps 1 --precision int8
expect_fail "--accuracy reads --data's val split" $D infer "${M[@]}" --precision int8 --accuracy --top5 "$T/syn/val"

# serve in int8: a POSTed JPEG answered (the calibration beside the weights reused)
command -v curl >/dev/null || { echo "curl missing: the serve part is skipped"; echo PASS; exit 0; }
IMG=$(find "$T/syn/val" -name '*.JPEG' | sort | head -1)
$D serve "${M[@]}" --weights "$T/w.safetensors" --precision int8 --calib-data "$T/syn" --calib-images 8 --port 0 \
  --port-file "$T/port" --max-batch 2 --workers 1 --monitor-interval 0 --json "$T/serve.json" >"$T/serve.out" \
  2>"$T/serve.err" &
SERVE_PID=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/serve.err"; fail "serve --precision int8 did not start"; }
curl -s --max-time 60 --data-binary @"$IMG" "http://127.0.0.1:$(cat "$T/port")/v1/classify" >"$T/ans.json" || fail "POST"
kill -TERM $SERVE_PID
wait $SERVE_PID; rc=$?
SERVE_PID=""
[ $rc = 0 ] || { cat "$T/serve.err"; fail "serve exited $rc on SIGTERM"; }
grep -q "activation ranges from $T/w.int8-percentile.safetensors" "$T/serve.err" || fail "serve did not reuse: $(cat "$T/serve.err")"
$PY - "$T/ans.json" "$T/serve.json" <<'PYEOF' || fail "serve int8 answer"
import json, sys
a = json.load(open(sys.argv[1]))
assert len(a["top4"]) == 4 and abs(sum(c["prob"] for c in a["top4"]) - 1) < 1e-3, a
s = json.load(open(sys.argv[2]))
assert s["stats"]["by_status"]["200"] == 1, s["stats"]
print("ok: serve --precision int8 answers")
PYEOF

# loadgen with the in-process engine in int8
$D loadgen --sut local "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --precision int8 --calib-images 8 \
  --scenario SingleStream --min-duration 0.2 --out "$T/lg_logs" --json "$T/lg.json" >"$T/lg.out" 2>"$T/lg.err" \
  || { cat "$T/lg.out" "$T/lg.err"; fail "loadgen --sut local --precision int8"; }
grep -q "Result is : VALID" "$T/lg.out" || fail "loadgen summary: $(cat "$T/lg.out")"
echo "ok: loadgen --sut local --precision int8"
echo PASS
