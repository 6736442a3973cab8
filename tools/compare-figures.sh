#!/bin/bash
# Records the figures a refactoring must not change, so that two builds can be compared with diff:
#   tools/compare-figures.sh BUILD_A/dlperf OUT_A; tools/compare-figures.sh BUILD_B/dlperf OUT_B; diff -r OUT_A OUT_B
# What it records: the loss and learning-rate curve (and the SHA-256 of the final weights) of short seeded trainings
# on the ref and cpu backends (the steps JSON lines with their timing fields left out), the outputs of `dlperf predict`,
# `dlperf plan`,
# `dlperf validate --list` (predictions only) and `dlperf nn info` as printed, and `dlperf run`'s output with every
# number masked, runs of spaces squeezed and the data stage's best thread count's plural folded (a timed run's
# figures differ from run to run; its lines and verdict wording must not).
# Run it from the repository root (it reads tests/fixtures). Needs python3.
set -u
D=$(realpath "${1:?usage: tools/compare-figures.sh PATH/TO/dlperf OUTDIR}")
O=${2:?usage: tools/compare-figures.sh PATH/TO/dlperf OUTDIR}
PY=${PYTHON:-python3}
[ -e "$O" ] && { echo "compare-figures: $O exists" >&2; exit 2; }
mkdir -p "$O"
T=$(mktemp -d "${TMPDIR:-/tmp}/cmpfig.XXXXXX")
trap 'rm -rf "$T"' EXIT
export DLPERF_CACHE="$T/cache"
F=tests/fixtures/model/profile-dev.json
FX=tests/fixtures/plan/catalog

"$D" data gen --out "$T/ds" --classes 3 --per-class 8 --val-per-class 2 --size 36-48 --seed 1 >/dev/null 2>&1

# 1. the loss curves: same seed, same data order, one loader and one compute thread
for dev in ref cpu; do
  for prec in fp32 bf16; do
    [ "$dev" = ref ] && [ "$prec" = bf16 ] && continue
    "$D" train --data "$T/ds" --model resnet-mini --size 32 --batch 4 --device "$dev" --precision "$prec" \
      --threads 1 --workers 1 --peak off --steps 12 --lr 0.05 --no-lr-scaling --warmup-steps 2 --seed 7 \
      --no-eval --no-monitor --quiet --steps-jsonl "$T/steps-$dev-$prec.jsonl" --checkpoint "$T/ck-$dev-$prec" \
      >/dev/null 2>"$T/train-$dev-$prec.err" || { echo "train $dev $prec failed:"; cat "$T/train-$dev-$prec.err"; }
    "$PY" - "$T/steps-$dev-$prec.jsonl" >"$O/loss-$dev-$prec.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r.get("step"), repr(r.get("loss")), repr(r.get("lr")))
PY
    # the weights and optimizer state after the last step, to the bit (the tensors; not the metadata, which
    # records the run's paths and time)
    "$PY" - "$T/ck-$dev-$prec"/*.safetensors >>"$O/loss-$dev-$prec.txt" <<'PY'
import hashlib, json, os, struct, sys
for path in sys.argv[1:]:
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    h = hashlib.sha256(json.dumps(head, sort_keys=True).encode() + b[8 + n:]).hexdigest()
    print(h, os.path.basename(path))
PY
  done
done

# Runs `dlperf CMD ARGS` for each line of ARGS on stdin into $O/CMD-<line number>.txt (the command, its output, its
# exit status).
each_line() {
  local cmd=$1 i=0 args
  while read -r args; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    { echo "\$ dlperf $cmd $args"; "$D" $cmd $args 2>&1; echo "exit $?"; } >"$O/$cmd-$i.txt"
  done
}

# 2. predictions
each_line predict <<EOF
--system dgx-a100
--system dgx-station
--system desktop-4090
--system dgx-station --pipeline torchvision
--system dgx-a100,dgx-station,desktop-4090 --mode infer
--system dgx-a100 --precision fp32
--system dgx-a100 --precision tf32
--system dgx-a100 --precision bf16
--system dgx-a100 --mode infer --precision int8
--system dgx-station --precision bf16
--profile $F --device cpu --threads 2 --workers 1
--profile $F --device cpu --precision bf16
--profile $F --device sim:a100,scale=0.05 --batch 16 --size 112
--profile $F --device sim:h100 --precision fp16 --mode infer
EOF

# 3. plans
each_line plan <<EOF
--catalog $FX --budget-usd 4000
--catalog $FX --budget-usd-h 12
--catalog $FX --deadline-h 10
--catalog $FX --system box
--catalog $FX --budget-usd 6000 --precision fp32
--catalog $FX --budget-usd 6000 --precision bf16
--profile $F --device a100
--budget-usd 250000
--budget-usd-h 100
--budget-usd 100000 --precision tf32
EOF

# 4. validate's predictions (nothing is run) and the model's shape
{ "$D" validate --profile "$F" --data "$T/ds" --list 2>&1; echo "exit $?"; } >"$O/validate-list.txt"
for m in resnet18 resnet50 resnet-mini; do
  { "$D" nn info --model "$m" 2>&1; echo "exit $?"; } >"$O/nn-info-$m.txt"
done

# 5. dlperf run on a tiny configuration, numbers masked
"$D" run --data "$T/ds" --model resnet18 --size 32 --batch 4 --threads 1 --workers 1 --train-seconds 1 \
  --infer-seconds 0.2 --infer-batch 1,4 --bench-images 8 --compare desktop-4090,dgx-a100 --usd-per-hour 1.5 \
  --out "$T/run" >"$T/run.out" 2>/dev/null
echo "exit $?" >>"$T/run.out"
sed -E -e "s#$T#TMP#g" -e 's/[0-9]+(\.[0-9]+)?/N/g' -e 's/ +/ /g' -e 's/loader threads? /loader thread(s) /' "$T/run.out" >"$O/run-masked.txt"
echo "compare-figures: $(ls "$O" | wc -l) files in $O"
