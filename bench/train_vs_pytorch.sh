#!/bin/bash
# `dlperf train` against PyTorch, side by side in one run (issue 3): ResNet-50, batch 32, 224x224, fp32 and then
# bf16, the same number of compute threads.
#   dlperf:  the full `dlperf train --device cpu` on the synthetic ImageNet's JPEGs (ImageNet-like sizes) through the
#            real input pipeline (read, decode, RandomResizedCrop, flip, normalize) with its default loader threads,
#            SGD with momentum; steady-state img/s after the warm-up steps, and the fraction of the backend's
#            measured peak.
#   PyTorch: Debian's python3-torch 1.13 (OpenBLAS) + torchvision resnet50, channels_last, SGD with momentum, fp32
#            and torch.autocast("cpu", dtype=torch.bfloat16), torch.set_num_threads(N), on random tensors — no input
#            pipeline at all: its best case. --python PATH runs that side with another Python (its torch and
#            torchvision); --venv with PyTorch 2.x from bench/peers-venv.sh's virtual environment (issue 14).
# Prints img/s for both, the ratios and dlperf's fraction of its measured peak. Targets: against PyTorch 1.x
# (issue 3) >= 1.3x fp32 and >= 3x bf16; against PyTorch 2.x (issue 14) >= 2x fp32 and >= 2.5x bf16 (bf16: on a
# CPU with AMX; elsewhere oneDNN's bf16 runs without native bf16 and the ratio says little). The runs alternate
# (PyTorch fp32, dlperf fp32, PyTorch bf16, dlperf bf16); --repeat R does that R times and each side's best round
# counts (interference such as a VM's steal time only slows a run down; run alone, one pair's ratio moved 1.5-2.2x
# on a VM losing up to a quarter of its CPU time); the ratio of each round's pair and their median are printed too.
#
#   bench/train_vs_pytorch.sh [--threads N] [--steps 8] [--warmup 2] [--batch 32] [--size 224] [--model resnet50]
#                             [--precisions "fp32 bf16"] [--repeat 1] [--dlperf build/dlperf] [--json FILE]
#                             [--python PATH | --venv]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DLPERF=${DLPERF:-$ROOT/build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
THREADS=$(nproc); STEPS=8; WARMUP=2; BATCH=32; SIZE=224; MODEL=resnet50; PRECS="fp32 bf16"; JSON=""; REPEAT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --dlperf) DLPERF=$2; shift ;;
    --json) JSON=$2; shift ;;
    --python) PY=$2; shift ;;
    --venv) PY=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}/bin/python ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
  esac
  shift
done
[ -n "$JSON" ] && [ -e "$JSON" ] && { echo "error: --json $JSON already exists" >&2; exit 1; }
"$PY" -c "import torch, torchvision" 2>/dev/null || { echo "error: torch/torchvision not importable by $PY (scripts/setup.sh test; for --venv: bench/peers-venv.sh)" >&2; exit 2; }
"$DLPERF" train --help | grep -q '(default cpu)' || { echo "error: $DLPERF has no cpu backend (oneDNN)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# $MODEL batch $BATCH ${SIZE}x${SIZE}, $THREADS compute threads, $STEPS timed steps after $WARMUP warm-up steps"
BF16HW=$(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//')
echo "# host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, bf16 hardware: ${BF16HW:-none (oneDNN emulates bf16)}, load $(cut -d' ' -f1-3 /proc/loadavg)"
case "$REPEAT" in ''|*[!0-9]*|0) echo "error: --repeat wants a positive integer" >&2; exit 2 ;; esac
for r in $(seq 1 "$REPEAT"); do
  for p in $PRECS; do
    "$PY" "$ROOT/bench/train_vs_pytorch.py" --model "$MODEL" --batch "$BATCH" --size "$SIZE" --threads "$THREADS" \
      --precision "$p" --warmup "$WARMUP" --steps "$STEPS" >"$TMP/torch-$p-$r.json" 2>"$TMP/torch-$p.err" \
      || { cat "$TMP/torch-$p.err"; echo "error: PyTorch $p failed" >&2; exit 1; }
    echo "  round $r, pytorch $p: $(cut -c1-60 "$TMP/torch-$p-$r.json")..." >&2
    rm -f "$TMP/dlperf-$p-$r.json"
    "$DLPERF" train --device cpu --model "$MODEL" --batch "$BATCH" --size "$SIZE" --precision "$p" --threads "$THREADS" \
      --steps $((STEPS + WARMUP)) --measure-warmup "$WARMUP" --no-eval --log-every 1 --json "$TMP/dlperf-$p-$r.json" \
      >"$TMP/dlperf-$p.out" 2>"$TMP/dlperf-$p.err" || { cat "$TMP/dlperf-$p.err"; echo "error: dlperf $p failed" >&2; exit 1; }
    echo "  round $r, dlperf $p: $(grep '^throughput' "$TMP/dlperf-$p.out")" >&2
  done
done
BF16HW=$BF16HW REPEAT=$REPEAT "$PY" - "$TMP" "$JSON" $PRECS <<'EOF'
import json, os, statistics, sys
tmp, out, precs = sys.argv[1], sys.argv[2], sys.argv[3:]
R = int(os.environ["REPEAT"])


def best(p):
    # each side's best round (highest steady img/s), and the ratio of every round's pair
    ts = [json.load(open(f"{tmp}/torch-{p}-{r}.json")) for r in range(1, R + 1)]
    ds = [json.load(open(f"{tmp}/dlperf-{p}-{r}.json")) for r in range(1, R + 1)]
    pair = [d["throughput"]["steady_img_per_s"] / t["img_per_s"] for t, d in zip(ts, ds)]
    return (max(ts, key=lambda t: t["img_per_s"]), max(ds, key=lambda d: d["throughput"]["steady_img_per_s"]), pair)


bests = {p: best(p) for p in precs}  # each round's JSON read once
t0 = bests[precs[0]][0]
# issue 3 set the targets against Debian's PyTorch 1.13, issue 14 against today's PyTorch 2.x
torch2 = not t0["torch"].startswith("1.")
target = {"fp32": 2.0, "bf16": 2.5} if torch2 else {"fp32": 1.3, "bf16": 3.0}
issue = "issue 14, PyTorch 2.x" if torch2 else "issue 3, PyTorch 1.x"
rows = []
print(f"{'precision':<10}{'PyTorch img/s':>14}{'dlperf img/s':>14}{'ratio':>8}{'target':>8}{'dlperf GFLOP/s':>16}{'of peak':>9}{'data wait':>10}")
for p in precs:
    t, d, pair = bests[p]
    ips = d["throughput"]["steady_img_per_s"]
    ratio = ips / t["img_per_s"]
    g = d["gflop"]
    frac = g["fraction_of_peak"]
    print(f"{p:<10}{t['img_per_s']:14.2f}{ips:14.2f}{ratio:7.2f}x{target.get(p, 0):7.1f}x{g['achieved_per_s']:16.1f}"
          f"{(100 * frac if frac is not None else float('nan')):8.0f}%{100 * d['stall']['data_wait_frac']:9.1f}%")
    rows.append({"precision": p, "pytorch": t, "dlperf_img_per_s": ips, "ratio": ratio, "target": target.get(p),
                 "meets_target": ratio >= target.get(p, 0), "dlperf_gflop_per_s": g["achieved_per_s"],
                 "dlperf_peak_gflop_per_s": g["peak_per_s"], "dlperf_peak_source": g["peak_source"],
                 "dlperf_fraction_of_peak": frac, "dlperf_data_wait_frac": d["stall"]["data_wait_frac"],
                 "dlperf_phases_ms_per_step": {k: v["ms_per_step"] for k, v in d["steady_state"]["phases"].items()
                                               if isinstance(v, dict)},
                 "dlperf_threads": d["threads"], "rounds": R, "round_ratios": pair,
                 "median_round_ratio": statistics.median(pair)})
    if R > 1:
        print(f"{'':<10}rounds' ratios {' '.join(f'{x:.2f}x' for x in pair)}, median {statistics.median(pair):.2f}x "
              f"(the line above: each side's best of {R})")
amx = "amx_bf16" in os.environ.get("BF16HW", "")
for r in rows:
    note = ""
    if r["precision"] == "bf16" and not amx:  # both targets' bf16 figures assume AMX (issues 3 and 14)
        note = " — not judged here: this CPU has no AMX" + ("" if os.environ.get("BF16HW") else " nor avx512_bf16 (oneDNN emulates bf16)")
    r["target_judged"] = not note
    print(f"target ({issue}): {r['precision']} >= {r['target']}x: {'met' if r['meets_target'] else 'NOT met'} "
          f"({r['ratio']:.2f}x){note}")
print(f"PyTorch {t0['torch']} (BLAS: {t0['blas']}; convolutions: {t0['convolutions']}; {t0['threads']} threads) on random tensors; dlperf on JPEGs "
      f"through its input pipeline; peak = the cpu backend's measured convolution peak ({rows[0]['dlperf_peak_source']})")
if out:
    res = {"schema": "dlperf.bench.train_vs_pytorch/1", "rows": rows}
    with open(out, "x") as f:
        json.dump(res, f, indent=1)
EOF
