#!/bin/bash
# dlperf int8 inference vs OpenVINO int8 (NNCF post-training quantization) on the same weights and the same
# calibration images, ResNet-50, batch-32 throughput and batch-1 latency, with fp32 (and bf16 where the CPU has
# avx512_bf16 or AMX) rows for both engines and the top-1 agreement of each precision with its engine's fp32
# (issue 32). Or, with --kernels, the oneDNN convolution kernels dlperf's inference runs under each ISA cap.
#
#   bench/int8_vs_openvino.sh [--threads N] [--model resnet50] [--weights W.safetensors] [--seed 1] [--random-head]
#                             [--calib-images 64] [--fp32-first-conv] [--streams 1] [--ov-streams 1]
#                             [--eval-images 128] [--precisions "fp32 bf16 int8"] [--batch 32]
#                             [--iters 4] [--min-duration 3] [--warmup 2] [--repeat 3] [--json FILE]
#                             [--python PATH] [--keep DIR] [--quick]
#   bench/int8_vs_openvino.sh --kernels [--caps "avx512_core_amx ... avx2"] [--precisions ...] [--batches "1 32"]
#                             [--threads N] [--json FILE] [--quick]
#
# Both engines run in the peers' venv (bench/peers-venv.sh: OpenVINO, NNCF, torch; --python PATH for another).
# Weights: --weights (a dlperf checkpoint or torchvision weights converted by tools/torchvision_to_safetensors.py;
# a trained model makes the agreement figures mean something) or, by default, torchvision's resnet50 initialized
# from --seed and converted, its fc replaced by a ridge regression over the 8 classes fitted on the calibration
# images (bench/int8_vs_openvino.py fit-head: a random network sends most images to one class, so its agreements say
# little; --random-head keeps torchvision's 1000-class fc). Timings do not depend on the weights. Data: a
# synthetic ImageNet of 8 classes made by `dlperf data gen` (cached) whose train split is exactly the --calib-images
# calibration images (a multiple of 8) and whose val split is the --eval-images images of the agreement and the
# timed inputs. Preprocessing: dlperf's serving transform, Resize(256) + CenterCrop(224) + Normalize (Pillow's bit
# for bit), which bench/int8_vs_openvino.py applies to the calibration and eval images on OpenVINO's side.
# OpenVINO (bench/int8_vs_openvino.py): the weights loaded into torchvision's model, ov.convert_model, saved as fp32
# IR; nncf.quantize on the calibration images (subset_size = all of them, NNCF's defaults otherwise) saved as int8
# IR; each compiled per batch size (static shapes), INFERENCE_NUM_THREADS=N, LATENCY hint, 1 stream, precision hint
# f32 (fp32 and int8: what NNCF left unquantized runs fp32) or bf16; synchronous infer() calls.
# dlperf: `dlperf infer --device cpu --from tensor --weights W --batch 1,32 --threads N --precision P`; int8 through
# dlperf_int8_opts below (a build without int8 is told apart and its rows are left out, the others still run). Top-1: dlperf infer --top5 on the eval images per precision.
# Timing: warm-up calls, then at least --iters calls AND --min-duration seconds per batch size (dlperf infer's rule,
# same values on both sides); --repeat rounds, in each the two engines back to back per precision, the order
# alternating from round to round; per side the median of the rounds, and per pair the median of the rounds'
# ratios dlperf / OpenVINO. Targets (issue 32, CPU with VNNI or AMX): dlperf int8 batch-32 throughput >= 1.1x
# OpenVINO int8 and >= 1.6x dlperf's own fp32 (VNNI, no AMX) or bf16 (AMX); batch-1 p50 latency <= 0.9x OpenVINO's;
# int8 top-1 agreement with fp32 >= 98%.
# --kernels: per cap (ONEDNN_MAX_CPU_ISA) x precision x batch, one `dlperf infer` with ONEDNN_VERBOSE=1 (one warm-up
# and one timed call); the table names the convolution implementations of the last call (a cap above what the CPU
# has runs as the CPU's best; a precision the cap lacks is emulated or refused, as the log says).
# --streams N: dlperf's timed runs split each batch over N plans of threads/N threads (dlperf infer --streams; batch 1
# runs one plan on all threads); OpenVINO stays at its LATENCY hint, 1 stream, as above, unless --ov-streams M: its
# batch then runs as M requests of batch/M images on M streams (THROUGHPUT hint, threads/M threads each, started
# together; OpenVINO's own throughput mode), batch 1 still at the LATENCY hint.
# --keep DIR: the raw files (logs, IRs, each run's JSON) are kept in DIR (new) instead of a removed temporary one.
# --quick: 16 calibration and 32 eval images, one round, shorter timing; --kernels --quick: batch 1, three caps.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}/bin/python
THREADS=$(nproc)
MODEL=resnet50
WEIGHTS=""
SEED=1
CALIB=64
STREAMS=1  # --streams: dlperf infer --streams in the timed runs
OV_STREAMS=1  # --ov-streams: OpenVINO's batch over that many streams (THROUGHPUT hint)
FIRST_CONV=()  # dlperf quantizes the first convolution too, as NNCF does (its default); --fp32-first-conv keeps it fp32
EVAL=128
PRECS=""
BATCH=32
ITERS=4
MINDUR=3
WARMUP=2
REPEAT=3
JSON=""
KERNELS=0
CAPS="avx512_core_amx avx512_core_bf16 avx512_core_vnni avx512_core avx2_vnni avx2"
BATCHES="1 32"
QUICK=0
RANDOM_HEAD=0
KEEP=""
ARGV="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --weights) WEIGHTS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --calib-images) CALIB=$2; shift ;;
    --int8-first-conv) FIRST_CONV=(--int8-first-conv) ;;  # dlperf's default now; kept for older command lines
    --fp32-first-conv) FIRST_CONV=(--fp32-first-conv) ;;
    --streams) STREAMS=$2; shift ;;
    --ov-streams) OV_STREAMS=$2; shift ;;
    --eval-images) EVAL=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    --min-duration) MINDUR=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --json) JSON=$2; shift ;;
    --python) PY=$2; shift ;;
    --random-head) RANDOM_HEAD=1 ;;
    --keep) KEEP=$2; shift ;;
    --kernels) KERNELS=1 ;;
    --caps) CAPS=$2; shift ;;
    --batches) BATCHES=$2; shift ;;
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" = 1 ]; then
  case " $ARGV " in *" --calib-images "*) ;; *) CALIB=16 ;; esac
  case " $ARGV " in *" --eval-images "*) ;; *) EVAL=32 ;; esac
  case " $ARGV " in *" --repeat "*) ;; *) REPEAT=1 ;; esac
  case " $ARGV " in *" --iters "*) ;; *) ITERS=2 ;; esac
  case " $ARGV " in *" --min-duration "*) ;; *) MINDUR=1 ;; esac
  case " $ARGV " in *" --warmup "*) ;; *) WARMUP=1 ;; esac
  case " $ARGV " in *" --batches "*) ;; *) BATCHES=1 ;; esac
  case " $ARGV " in *" --caps "*) ;; *) CAPS="avx512_core_vnni avx512_core avx2" ;; esac
fi
[ -x "$DLPERF" ] || { echo "no $DLPERF: run make first" >&2; exit 2; }
[ -z "$JSON" ] || [ ! -e "$JSON" ] || { echo "--json $JSON exists: choose another name" >&2; exit 2; }
for v in CALIB EVAL; do
  n=${!v}
  case $n in [1-9]|[1-9]*[0-9]) ;; *) n=x ;; esac
  [ "$n" != x ] && [ $((n % 8)) = 0 ] || { echo "--${v,,}-images ${!v}: a positive multiple of 8 is needed (the dataset has 8 classes)" >&2; exit 2; }
done
[ -z "$WEIGHTS" ] || [ -r "$WEIGHTS" ] || { echo "--weights $WEIGHTS: not readable" >&2; exit 2; }
HW=$(grep -m1 -o -w -E 'avx512_vnni|avx_vnni|avx512_bf16|amx_bf16|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//' || true)
HAS_BF16=0; case " $HW " in *" avx512_bf16 "*|*" amx_bf16 "*) HAS_BF16=1 ;; esac
HAS_AMX=0; case " $HW " in *" amx_int8 "*) HAS_AMX=1 ;; esac
[ -n "$PRECS" ] || { PRECS="fp32 int8"; [ "$HAS_BF16" = 0 ] || PRECS="fp32 bf16 int8"; }
MACHINE="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, int8/bf16 flags: ${HW:-none}"

if [ -n "$KEEP" ]; then  # the raw files stay there (the report can be made again from them)
  mkdir "$KEEP" || { echo "--keep $KEEP: cannot make it (it must not exist)" >&2; exit 2; }
  TMP=$(cd "$KEEP" && pwd)
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi
# The dataset: 8 classes, CALIB/8 train images per class (the calibration set, all of it), EVAL/8 val per class
SPEC="synthetic:classes=8,per-class=$((CALIB / 8)),val-per-class=$((EVAL / 8))"
DATA=$("$DLPERF" data gen --classes 8 --per-class $((CALIB / 8)) --val-per-class $((EVAL / 8)) 2>/dev/null | head -1)
[ -d "$DATA/val" ] && [ -d "$DATA/train" ] || { echo "could not generate the synthetic dataset ($DATA)" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------------------
# The one place the dlperf int8 command line is built (issue 32: infer's `--precision int8` and its calibration
# options, `--fp32-first-conv` or `--int8-first-conv` when given). It sets INT8_OPTS, the options that replace
# `--precision P` in every dlperf run of this script: int8, calibrated on CALIB images of the --data dataset
# (its train split holds exactly those images: the set OpenVINO's NNCF calibrates on). Returns 1, with the reason in
# INT8_MISSING, when this build's infer does not know int8 or one of these options.
INT8=int8
dlperf_int8_opts() {
  INT8_OPTS=(--precision "$INT8" --calib-images "$CALIB" "${FIRST_CONV[@]}")
  local help o
  help=$("$DLPERF" infer --help 2>&1)
  if ! grep -E -- '--precision' <<<"$help" | grep -q -w int8; then
    INT8_MISSING="this build's dlperf infer has no --precision int8 (the int8 engine is not merged)"
    return 1
  fi
  for o in "${INT8_OPTS[@]}"; do
    case $o in --*) grep -q -- "$o[ ,=]" <<<"$help" || { INT8_MISSING="dlperf infer --help does not list $o: fix dlperf_int8_opts in $0"; return 1; } ;; esac
  done
  return 0
}
# the options of one precision in a dlperf run (sets POPTS)
prec_opts() {
  if [ "$1" = int8 ]; then POPTS=("${INT8_OPTS[@]}"); else POPTS=(--precision "$1"); fi
}
INT8_OK=0; INT8_MISSING=""; INT8_OPTS=()
case " $PRECS " in *" int8 "*) if dlperf_int8_opts; then INT8_OK=1; else echo "dlperf int8: $INT8_MISSING; its rows are left out" >&2; fi ;; esac
# ---------------------------------------------------------------------------------------------------------------

echo "machine: $MACHINE, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$KERNELS" = 1 ]; then
  # the weights do not change which kernels run: the seeded random init (int8 calibrates on the same images)
  echo "kernels: $MODEL, threads $THREADS, caps: $CAPS; precisions: $PRECS; batch sizes: $BATCHES"
  for cap in $CAPS; do
    for p in $PRECS; do
      [ "$p" != int8 ] || [ "$INT8_OK" = 1 ] || continue
      prec_opts "$p"
      for b in $BATCHES; do
        log="$TMP/cap-$cap-$p-b$b.log"
        echo "-- ONEDNN_MAX_CPU_ISA=$cap, $p, batch $b" >&2
        ONEDNN_MAX_CPU_ISA=$cap ONEDNN_VERBOSE=1 "$DLPERF" infer --device cpu --model "$MODEL" --data "$SPEC" \
          --samples "$b" --batch "$b" "${POPTS[@]}" --threads "$THREADS" --warmup 1 --iters 1 --min-duration 0 \
          --monitor-interval 0 >"$log" 2>&1 || echo "   exit $?: $(grep -m1 '^error:' "$log" || tail -1 "$log")" >&2
      done
    done
  done
  [ "$INT8_OK" = 1 ] || case " $PRECS " in *" int8 "*) echo "int8: not in the table: $INT8_MISSING" ;; esac
  /usr/bin/python3 "$ROOT/bench/int8_vs_openvino.py" kernels --dir "$TMP" --caps "$CAPS" ${JSON:+--json "$JSON"}
  echo "command: bench/int8_vs_openvino.sh --kernels --caps \"$CAPS\" --precisions \"$PRECS\" --batches \"$BATCHES\" --threads $THREADS"
  exit 0
fi

"$PY" -c "import openvino, nncf, torch, torchvision" 2>/dev/null \
  || { echo "openvino/nncf/torch not importable by $PY (bench/peers-venv.sh creates the venv; or --python PATH)" >&2; exit 2; }
echo "$MODEL, threads $THREADS, batch 1 and $BATCH, warm-up $WARMUP, timed >= $ITERS calls and >= $MINDUR s per batch size; $REPEAT round(s); precisions: $PRECS"
echo "data: $DATA ($CALIB calibration images = its train split, $EVAL eval images = its val split)"
NOTE=""
if [ -z "$WEIGHTS" ]; then
  WEIGHTS="$TMP/$MODEL-seed$SEED.safetensors"
  "$PY" "$ROOT/tools/torchvision_to_safetensors.py" --model "$MODEL" --seed "$SEED" "$WEIGHTS" >/dev/null
  if [ "$RANDOM_HEAD" = 0 ]; then
    "$PY" "$ROOT/bench/int8_vs_openvino.py" fit-head --weights "$WEIGHTS" --model "$MODEL" --images "$DATA/train" \
      --threads "$THREADS" --out "$TMP/$MODEL-seed$SEED-fit8.safetensors" 2>"$TMP/fit.err" || { tail -5 "$TMP/fit.err" >&2; exit 1; }
    WEIGHTS="$TMP/$MODEL-seed$SEED-fit8.safetensors"
    NOTE="weights: torchvision's random init (seed $SEED) with a ridge-regression fc over the 8 classes fitted on the calibration images: a stand-in for a trained model"
  else
    NOTE="weights: torchvision's random init (seed $SEED), 1000 classes: the agreements are a numerical check, not accuracy"
  fi
fi
echo "weights: $WEIGHTS"
echo "-- OpenVINO: convert, NNCF quantization on the calibration images, top-1 on the eval images"
"$PY" "$ROOT/bench/int8_vs_openvino.py" prepare --weights "$WEIGHTS" --model "$MODEL" --calib "$DATA/train" \
  --calib-images "$CALIB" --eval "$DATA/val" --threads "$THREADS" --dir "$TMP" 2>"$TMP/prepare.err" \
  || { tail -20 "$TMP/prepare.err" >&2; exit 1; }
MISSING="{}"
for p in $PRECS; do
  if [ "$p" = int8 ] && [ "$INT8_OK" = 0 ]; then
    MISSING=$(/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["int8"]=sys.argv[2]; print(json.dumps(d))' "$MISSING" "$INT8_MISSING")
    continue
  fi
  prec_opts "$p"
  echo "-- dlperf $p: top-1 of the eval images"
  # --data: the dataset int8 calibrates on (its train split is exactly NNCF's calibration images; dlperf_int8_opts
  # must say so if the engine takes another split); --images: what is classified
  "$DLPERF" infer --top5 --device cpu --weights "$WEIGHTS" --data "$SPEC" --images "$DATA/val" "${POPTS[@]}" \
    --threads "$THREADS" \
    >"$TMP/dlperf-top1-$p.txt" 2>"$TMP/dlperf-top1-$p.err" || { cat "$TMP/dlperf-top1-$p.err" >&2; exit 1; }
done

ov_run() {  # precision round
  local ir=ov-fp32.xml hint=f32
  [ "$1" != int8 ] || ir=ov-int8.xml
  [ "$1" != bf16 ] || hint=bf16
  "$PY" "$ROOT/bench/int8_vs_openvino.py" openvino --ir "$TMP/$ir" --hint "$hint" --images "$DATA/val" \
    --threads "$THREADS" --batch "$BATCH" --streams "$OV_STREAMS" --warmup "$WARMUP" --iters "$ITERS" \
    --min-duration "$MINDUR" --out "$TMP/openvino-$1-$2.json"
}
dl_run() {  # precision round
  prec_opts "$1"
  "$DLPERF" infer --device cpu --weights "$WEIGHTS" --from tensor --data "$SPEC" --samples "$BATCH" \
    --batch "1,$BATCH" "${POPTS[@]}" --threads "$THREADS" --streams "$STREAMS" --warmup "$WARMUP" --iters "$ITERS" \
    --min-duration "$MINDUR" --monitor-interval 0 --json "$TMP/dlperf-$1-$2.json" 2>"$TMP/dlperf-$1.err" \
    | grep -E '^ +[0-9]+ ' | sed 's/^/   /'
  [ -s "$TMP/dlperf-$1-$2.json" ] || { cat "$TMP/dlperf-$1.err" >&2; exit 1; }
}
for r in $(seq 1 "$REPEAT"); do
  for p in $PRECS; do
    order="ov dl"; [ $((r % 2)) = 1 ] || order="dl ov"  # alternating which engine goes first
    for side in $order; do
      if [ $side = dl ]; then
        [ "$p" != int8 ] || [ "$INT8_OK" = 1 ] || continue
        echo "-- round $r, $p: dlperf infer"
        dl_run "$p" "$r"
      else
        echo "-- round $r, $p: OpenVINO"
        ov_run "$p" "$r"
      fi
    done
  done
done
CMD="bench/int8_vs_openvino.sh --threads $THREADS --calib-images $CALIB${FIRST_CONV[*]:+ ${FIRST_CONV[*]}} --streams $STREAMS --ov-streams $OV_STREAMS --eval-images $EVAL --precisions \"$PRECS\" --batch $BATCH --iters $ITERS --min-duration $MINDUR --warmup $WARMUP --repeat $REPEAT"
/usr/bin/python3 "$ROOT/bench/int8_vs_openvino.py" report --dir "$TMP" --eval "$DATA/val" --precisions "$PRECS" \
  --repeat "$REPEAT" --batch "$BATCH" --threads "$THREADS" --amx "$HAS_AMX" --missing "$MISSING" \
  --weights-note "$NOTE" --command "$CMD" ${JSON:+--json "$JSON"}
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: $CMD"
