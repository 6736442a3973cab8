#!/bin/bash
# `dlperf infer` end to end on a tiny net (resnet-mini 32x32 on ref) over a small synthetic ImageNet: the table and
# the dlperf.infer/1 JSON for tensors, inline JPEG and loader-thread JPEG; --top5 with labels and a bad file among
# the images; the errors a user meets. Then the real engine behind `dlperf serve` (its answer to a POSTed JPEG equals
# `dlperf infer --top5`'s, 400 for a corrupt body, exit 0 on SIGTERM) and `dlperf loadgen --sut local`.
# tags: asan
# timeout: 600
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/infer-sh.XXXXXX")
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
  echo "ok: $* -> $(echo "$out" | head -1)"
}
M=(--model resnet-mini --size 32 --device ref --threads 1)

$D data gen --out "$T/syn" --classes 4 --per-class 1 --val-per-class 3 --size 40-90 --seed 2 >/dev/null 2>&1 || fail "data gen"
$D nn init --model resnet-mini --classes 4 --size 32 --seed 3 --out "$T/w.safetensors" >/dev/null || fail "nn init"

# --help and option errors
$D infer --help >"$T/help" || fail "--help"
for o in --batch --from --workers --warmup --iters --min-duration --top5 --labels --weights --json --precision; do
  grep -q -- "$o" "$T/help" || fail "--help does not list $o"
done
expect_fail "--batch 0" $D infer "${M[@]}" --batch 0
expect_fail "give sizes like" $D infer "${M[@]}" --batch 1,x
expect_fail "unknown option" $D infer --nope
expect_fail "unexpected argument" $D infer "${M[@]}" stray.jpg
expect_fail "is not one of" $D infer --from png
touch "$T/exists.json"
expect_fail "exists" $D infer "${M[@]}" --json "$T/exists.json"
expect_fail "use --data, or --workers 0" $D infer "${M[@]}" --from jpeg --workers 2 --images "$T/syn/val"
printf 'PK\003\004junk' >"$T/w.pth"
expect_fail "torchvision_to_safetensors.py" $D infer "${M[@]}" --weights "$T/w.pth"
expect_fail "No such file" $D infer "${M[@]}" --weights "$T/missing.safetensors"
expect_fail "needs (10, 64)" $D infer --model resnet-mini --size 32 --device ref --classes 10 --weights "$T/w.safetensors"
expect_fail "fp32 only" $D infer "${M[@]}" --precision bf16 --data "$T/syn" --iters 1
mkdir -p "$T/empty"
expect_fail "no *.jpg" $D infer "${M[@]}" --images "$T/empty" --iters 1
expect_fail "no such file or directory" $D infer "${M[@]}" --images "$T/nothing" --iters 1

# tensors: a table and the JSON result
$D infer "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --batch 1,4 --iters 3 --warmup 1 --samples 8 \
  --monitor-interval 50 --json "$T/t.json" >"$T/t.out" 2>"$T/t.err" || { cat "$T/t.out" "$T/t.err"; fail "infer tensor"; }
grep -q "p99 ms" "$T/t.out" || fail "no table: $(cat "$T/t.out")"
grep -q "preprocessed 8 images" "$T/t.out" || fail "no preprocessing line: $(cat "$T/t.out")"
$PY - "$T/t.json" <<'EOF' || fail "infer tensor JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "dlperf.infer/1", r["schema"]
assert [p["batch"] for p in r["results"]] == [1, 4]
for p in r["results"]:
    assert p["iterations"] == 3 and p["images"] == 3 * p["batch"], p
    l = p["latency_ms"]
    assert 0 < l["min"] <= l["p50"] <= l["p90"] <= l["p99"] <= l["max"], l
    assert p["images_per_s"] > 0 and p["from"] == "tensor"
assert r["model"]["arch"] == "resnet-mini" and r["model"]["classes"] == 4 and not r["model"]["random_init"]
assert r["config"]["device"] == "ref" and r["config"]["threads"] == 1 and r["config"]["decode"] == "once, before timing"
assert r["samples"]["count"] == 8 and r["plan"]["backend"] == "ref"
assert "cpu_model" in json.dumps(r["host"]) and "jansson" in r["versions"]
assert r["monitor"]["samples"] >= 1, r["monitor"]
print("ok: tensor JSON")
EOF

# JPEG, inline and on loader threads
$D infer "${M[@]}" --data "$T/syn" --from jpeg --batch 2 --iters 3 --monitor-interval 0 --json "$T/j.json" \
  >"$T/j.out" 2>&1 || { cat "$T/j.out"; fail "infer jpeg inline"; }
grep -q "random initialization" "$T/j.out" || fail "no random-init warning: $(cat "$T/j.out")"
grep -q "decode" "$T/j.out" || fail "no stage columns"
$D infer "${M[@]}" --data "$T/syn" --from jpeg --workers 2 --batch 2 --iters 4 --monitor-interval 0 --json "$T/l.json" \
  >"$T/l.out" 2>&1 || { cat "$T/l.out"; fail "infer jpeg loader"; }
$PY - "$T/j.json" "$T/l.json" <<'EOF' || fail "infer jpeg JSON"
import json, sys
j, l = (json.load(open(p)) for p in sys.argv[1:3])
s = j["results"][0]["stages"]
assert s["where"] == "inline" and s["decode_ms"] > 0 and s["read_ms"] >= 0 and s["inference_ms_per_call"] > 0, s
assert j["config"]["decode"] == "inline"
s = l["results"][0]["stages"]
assert s["where"] == "loader threads" and s["decode_ms"] > 0 and "wait_ms_per_call" in s, s
assert l["results"][0]["iterations"] == 4 and l["config"]["workers"] == 2
print("ok: jpeg JSON")
EOF

# --top5: labels from the dataset's labels.txt; a corrupt file is skipped, the rest answered
cp "$T/syn/val/n01441021/"*.JPEG "$T/a.JPEG" 2>/dev/null || cp "$(ls "$T"/syn/val/*/*.JPEG | head -1)" "$T/a.JPEG"
head -c 300 "$T/a.JPEG" >"$T/cut.jpg"
$D infer "${M[@]}" --weights "$T/w.safetensors" --labels "$T/syn/labels.txt" --top5 --json "$T/top.json" \
  "$T/a.JPEG" "$T/cut.jpg" "$T/syn/val" >"$T/top.out" 2>"$T/top.err" || { cat "$T/top.out" "$T/top.err"; fail "--top5"; }
grep -q "cut.jpg.*skipped" "$T/top.err" || fail "corrupt file not reported: $(cat "$T/top.err")"
grep -q "  1\. " "$T/top.out" && grep -q "synthetic" "$T/top.out" || fail "--top5 output: $(cat "$T/top.out")"
$PY - "$T/top.json" <<'EOF' || fail "--top5 JSON"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["top5"]
assert len(t) == 13 and r["skipped_images"] == 1, (len(t), r["skipped_images"])
for e in t:
    assert len(e["top5"]) == 4 and len(e["logits"]) == 4  # 4 classes: a top-4
    ps = [c["prob"] for c in e["top5"]]
    assert ps == sorted(ps, reverse=True) and abs(sum(ps) - 1) < 1e-4, ps
    assert all(c["label"].startswith("n0") for c in e["top5"])
print("ok: top5 JSON")
EOF
# without --labels, the synthetic dataset's labels.txt beside the images names the classes
$D infer "${M[@]}" --weights "$T/w.safetensors" --top5 "$T/syn/val" >"$T/top2.out" 2>"$T/top2.err" || fail "--top5 auto labels"
grep -q "class names from .*labels.txt" "$T/top2.err" && grep -q "synthetic" "$T/top2.out" || fail "labels.txt not found: $(cat "$T/top2.err")"
expect_fail "none of the 1 images" $D infer "${M[@]}" --top5 "$T/cut.jpg"
expect_fail "--top5 needs images" $D infer "${M[@]}" --top5

# the real engine behind `dlperf serve`: a POSTed JPEG gets infer --top5's answer; 400 for a corrupt body
command -v curl >/dev/null || { echo "curl missing: the serve part is skipped"; echo PASS; exit 0; }
$D serve "${M[@]}" --weights "$T/w.safetensors" --labels "$T/syn/labels.txt" --port 0 --port-file "$T/port" \
  --max-batch 2 --workers 1 --monitor-interval 0 --json "$T/serve.json" >"$T/serve.out" 2>"$T/serve.err" &
SERVE_PID=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/serve.err"; fail "serve did not start"; }
P=$(cat "$T/port")
curl -s --max-time 60 --data-binary @"$T/a.JPEG" "http://127.0.0.1:$P/v1/classify" >"$T/ans.json" || fail "POST"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 --data-binary @"$T/cut.jpg" "http://127.0.0.1:$P/v1/classify")
[ "$code" = 400 ] || fail "corrupt body got $code"
kill -TERM $SERVE_PID
wait $SERVE_PID; rc=$?
SERVE_PID=""
[ $rc = 0 ] || { cat "$T/serve.err"; fail "serve exited $rc on SIGTERM"; }
$PY - "$T/ans.json" "$T/top.json" "$T/a.JPEG" "$T/serve.json" <<'EOF' || fail "serve answer"
import json, sys
a = json.load(open(sys.argv[1]))
t = {e["path"]: e for e in json.load(open(sys.argv[2]))["top5"]}[sys.argv[3]]
assert [c["class"] for c in a["top4"]] == [c["class"] for c in t["top5"]], (a, t)
assert all(abs(x["prob"] - y["prob"]) < 1e-5 for x, y in zip(a["top4"], t["top5"]))
assert [c["label"] for c in a["top4"]] == [c["label"] for c in t["top5"]]
s = json.load(open(sys.argv[4]))
assert s["model"]["arch"] == "resnet-mini" and s["plan"]["backend"] == "ref" and s["stats"]["by_status"]["200"] == 1, s
# plans of batch 1 and 2: the warm-up ran each once, the lone request ran on the batch-1 plan
assert s["plan_calls"] == {"1": 2, "2": 1}, s["plan_calls"]
print("ok: serve answers as infer --top5, a lone request on the batch-1 plan")
EOF

# loadgen with the in-process engine (SingleStream, preprocessed samples from --data)
$D loadgen --sut local "${M[@]}" --weights "$T/w.safetensors" --data "$T/syn" --scenario SingleStream \
  --min-duration 0.2 --out "$T/lg_logs" --json "$T/lg.json" >"$T/lg.out" 2>"$T/lg.err" || { cat "$T/lg.out" "$T/lg.err"; fail "loadgen --sut local"; }
grep -q "Result is : VALID" "$T/lg.out" || fail "loadgen summary: $(cat "$T/lg.out")"
grep -q "top-1 against the dataset's labels" "$T/lg.err" || fail "no accuracy line: $(cat "$T/lg.err")"
$PY - "$T/lg.json" <<'EOF' || fail "loadgen JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["local_sut"]["model"]["arch"] == "resnet-mini" and r["images"]["count"] == 12, r["images"]
assert r["local_sut"]["top1_answered"] >= 64
print("ok: loadgen --sut local")
EOF
expect_fail "--url is for --sut http" $D loadgen --sut local --url http://127.0.0.1:1/ "${M[@]}"
echo PASS
