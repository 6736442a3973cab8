#!/bin/bash
# The cpu backend on every oneDNN ISA path this machine can reach, and with the algorithm choices forced both ways
# (tests/py/isa_matrix.py has the configurations and why): for each configuration `dlperf infer` in fp32 and bf16 on
# ResNet-50 (64 px, where a 2.x inference plan has Winograd convolutions) prints the ISA oneDNN ran on and the
# kernels it chose, and the results' JSON must name the same ISA. Once per ISA, on its forward_inference row, the
# backend op harness and the whole-step checks against ref (tests/unit/test_backend_ops), the int8 ops against ref
# (tests/unit/test_nn_quant: oneDNN's int8 kernels are brgconv with VNNI, jit_int8 without): that row's harness runs
# both kinds of forward convolution of that ISA (the training steps' forward_training ones and the inference plan's
# forward_inference ones), so the ISA's other row would only repeat it; the unit pass runs the harness on the
# machine's own default. `dlperf serve` (one POSTed JPEG) and `dlperf loadgen --sut local` run once, on the best
# ISA's forward_inference row: they serve the inference plan `dlperf infer` has already checked on every row. A cap above the machine's best
# ISA is skipped with a line that says so. The torchvision tests (tests/py/test_torch_parity.py,
# test_infer_torchvision.py) run their cpu checks over the same matrix.
# timeout: 1500
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
OPS=$(dirname "$D")/tests/test_backend_ops
QUANT=$(dirname "$D")/tests/test_nn_quant  # the int8 ops against ref (oneDNN's int8 kernels differ by ISA too)
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/isa.XXXXXX")
SERVE_PID=""
trap '[ -n "$SERVE_PID" ] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$T"' EXIT
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*"; exit 1; }
FAILS=0
bad() { echo "  FAIL $*"; FAILS=$((FAILS + 1)); }

$D version | grep -q "^oneDNN ISA" || { echo "skipped: this dlperf was built without oneDNN"; exit 77; }
[ -x "$OPS" ] || { echo "skipped: $OPS not built (cmocka missing)"; exit 77; }
command -v curl >/dev/null || fail "curl missing (scripts/setup.sh test installs it)"
$D data gen --out "$T/syn" --classes 2 --per-class 1 --val-per-class 2 --seed 5 >/dev/null 2>&1 || fail "data gen"
IMG=$(find "$T/syn/val" -name '*.JPEG' | head -1)
M=(--model resnet50 --size 64 --threads 2)  # 64 px: layer1 at 16x16, Winograd at batch >= 2

"$PY" "$ROOT/tests/py/isa_matrix.py" --dlperf "$D" >"$T/matrix" || fail "tests/py/isa_matrix.py"
BEST=$($D version | sed -n 's/^oneDNN ISA *//p' | awk '{print $1}')
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); oneDNN's best ISA here:" \
  "$($D version | sed -n 's/^oneDNN ISA *//p')"
RAN=0
while IFS=$'\t' read -r label isa envs; do
  if [[ "$isa" == skip:* ]]; then echo "SKIP $label: ${isa#skip: }"; continue; fi
  RAN=$((RAN + 1))
  echo "== $label: oneDNN ISA $isa; $envs"
  # shellcheck disable=SC2086
  ENVS=(env $envs)
  FULL=0; [[ " $envs " == *" DLPERF_CPU_INFER_PROP=inference "* ]] && FULL=1
  s0=$(date +%s)
  if [ $FULL = 0 ]; then
    echo "  backend ops and whole steps vs ref: on this ISA's forward_inference row"
  # below the machine's best ISA the whole-network cases are the resnet-mini ones (the same layer kinds: 7x7/2 stem,
  # 3x3, 1x1 bottlenecks, downsamples); ResNet-18/50 steps run on the best ISA (its row here and the unit pass)
  elif SMALL=$([ "$isa" = "$BEST" ] && echo 0 || echo 1) && "${ENVS[@]}" DLPERF_TEST_SMALL_NETS=$SMALL "$OPS" >"$T/ops-$label.log" 2>&1; then
    echo "  backend ops and whole steps vs ref: $(grep -o '\[  PASSED  \] [0-9]* test' "$T/ops-$label.log" | grep -o '[0-9]*') tests passed ($(( $(date +%s) - s0 )) s)"
  else
    bad "$label: test_backend_ops (log: $T/ops-$label.log)"
    grep -E "FAIL|ERROR" "$T/ops-$label.log" | head -10 | sed 's/^/     /'
  fi
  [ $FULL = 0 ] || grep -q "kernels \[resnet steps\] oneDNN ISA $isa " "$T/ops-$label.log" || bad "$label: the plans did not run on $isa"
  if [ $FULL = 1 ] && [ -x "$QUANT" ]; then
    if "${ENVS[@]}" "$QUANT" >"$T/quant-$label.log" 2>&1; then
      echo "  int8 ops and a resnet-mini vs ref: $(grep -o '\[  PASSED  \] [0-9]* test' "$T/quant-$label.log" | grep -o '[0-9]*') tests passed"
    else
      bad "$label: test_nn_quant (log: $T/quant-$label.log)"
      grep -E "FAIL|ERROR" "$T/quant-$label.log" | head -10 | sed 's/^/     /'
    fi
  fi
  [ $FULL = 0 ] || grep "kernels \[resnet steps\]   convolution\|Winograd primitives" "$T/ops-$label.log" | sed 's/^ *kernels \[resnet steps\] */  kernel (whole steps): /; s/^ *Winograd/  Winograd/'
  for prec in fp32 bf16; do
    # bf16 where oneDNN has it on this ISA (none on AVX2)
    if [ $prec = bf16 ] && "${ENVS[@]}" $D version | grep -q "bf16 none"; then
      echo "  $prec: oneDNN has no bf16 convolution on $isa (skipped)"; continue
    fi
    J="$T/infer-$label-$prec.json"
    "${ENVS[@]}" $D infer "${M[@]}" -p $prec -b 4 -n 1 --warmup 1 --min-duration 0 --json "$J" >"$T/out" 2>&1 \
      || { bad "$label $prec: dlperf infer: $(tail -3 "$T/out")"; continue; }
    "$PY" - "$J" "$isa" "$label $prec" "$envs" <<'PYEOF' || bad "$label $prec: infer JSON"
import json, sys
r = json.load(open(sys.argv[1]))
b = r["plan"]["backend_plan"]
assert b["isa"] == sys.argv[2], (b["isa"], sys.argv[2])
assert r["versions"]["oneDNN ISA"].split()[0] == sys.argv[2], r["versions"]["oneDNN ISA"]
convs = sorted(k.split(" ", 1)[1] for k in b["kernels"] if k.startswith("convolution"))
# fp32 at batch 4: layer1's 3x3 convolutions have enough tiles for Winograd, which oneDNN 2.x has from AVX-512 on
# (3.x has none on x86 CPUs: the plan falls back to direct)
if ("DLPERF_CPU_WINOGRAD=0" in sys.argv[4] or b["precision"] != "fp32" or not b["isa"].startswith("avx512")
        or not b["library_version"].startswith("2.")):
    assert b["winograd_convs"] == 0, b
else:
    assert b["winograd_convs"] > 0, b
want_prop = "forward_inference" if "DLPERF_CPU_INFER_PROP=inference" in sys.argv[4] else "forward_training"
assert b["conv_prop_kind"] == want_prop, (b["conv_prop_kind"], want_prop)
print(f"  {sys.argv[3]}: dlperf infer ok: {b['conv_prop_kind']}, {b['winograd_convs']} Winograd convs, "
      f"conv kernels {', '.join(convs)}; reorders {', '.join(sorted(k.split(' ', 1)[1] for k in b['kernels'] if k.startswith('reorder')))}")
PYEOF
    [ $FULL = 1 ] && [ "$isa" = "$BEST" ] || continue
    "${ENVS[@]}" $D loadgen --sut local "${M[@]}" -p $prec --data "$T/syn" --scenario SingleStream --min-duration 0.2 \
      --samples 4 --out "$T/lg-$label-$prec" --json "$T/lg-$label-$prec.json" >"$T/lg.out" 2>&1 && grep -q "Result is : VALID" "$T/lg.out" \
      && echo "  $label $prec: dlperf loadgen --sut local ok" || bad "$label $prec: loadgen --sut local: $(tail -3 "$T/lg.out")"
    rm -f "$T/port"
    "${ENVS[@]}" $D serve "${M[@]}" --precision $prec --port 0 --port-file "$T/port" --max-batch 4 --workers 1 \
      --monitor-interval 0 >"$T/serve.out" 2>"$T/serve.err" &
    SERVE_PID=$!
    for _ in $(seq 600); do [ -s "$T/port" ] && break; kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
    if [ -s "$T/port" ]; then
      code=$(curl -s -o "$T/ans.json" -w '%{http_code}' --max-time 120 --data-binary @"$IMG" \
        "http://127.0.0.1:$(cat "$T/port")/v1/classify")
      [ "$code" = 200 ] && grep -q '"top5"' "$T/ans.json" && echo "  $label $prec: dlperf serve answered a POSTed JPEG" \
        || bad "$label $prec: serve answered $code: $(head -c 300 "$T/ans.json")"
    else
      bad "$label $prec: serve did not start: $(tail -3 "$T/serve.err")"
    fi
    kill -TERM $SERVE_PID 2>/dev/null
    wait $SERVE_PID || bad "$label $prec: serve exited $? on SIGTERM"
    SERVE_PID=""
  done
done <"$T/matrix"
[ $RAN -ge 2 ] || bad "only $RAN configuration(s) ran: expected at least AVX2 and the machine's best"
echo "$RAN configurations run"
[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo PASS
