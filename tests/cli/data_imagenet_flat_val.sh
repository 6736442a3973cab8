#!/bin/bash
# ImageNet as shipped: Kaggle's layout (ILSVRC/Data/CLS-LOC/train/<wnid>/, a flat val/, LOC_val_solution.csv four
# folders up) and the devkit's ground-truth list, opened by dlperf data info and trained on with dlperf train; a flat
# val/ without label files is refused with the names of the files looked for.
# tags: asan light
# timeout: 300
set -u
D=${DLPERF:?}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/flatval.XXXXXX")
trap 'rm -rf "$T"' EXIT
export DLPERF_CACHE="$T/cache"
fail() { echo "FAIL: $*"; exit 1; }

"$D" data gen --out "$T/ds" --classes 3 --per-class 8 --val-per-class 4 --size 36-48 --seed 1 >/dev/null || fail "data gen"
K="$T/kaggle/ILSVRC/Data/CLS-LOC"
mkdir -p "$K/val" && mv "$T/ds/train" "$K/train"
echo "ImageId,PredictionString" >"$T/kaggle/LOC_val_solution.csv"
for f in "$T"/ds/val/*/*.JPEG; do
  w=$(basename "$(dirname "$f")"); id=$(basename "$f" .JPEG)
  cp "$f" "$K/val/"
  echo "$id,$w 10 20 200 220" >>"$T/kaggle/LOC_val_solution.csv"
done

# 1. without the labels: refused, naming what it looked for
mv "$T/kaggle/LOC_val_solution.csv" "$T/solution.csv"
"$D" data info --data "$K/val" >/dev/null 2>"$T/err" && fail "a flat val/ without labels was accepted"
grep -q "LOC_val_solution.csv" "$T/err" && grep -q "ILSVRC2012_validation_ground_truth.txt" "$T/err" \
  || fail "the error does not say which files it looked for: $(cat "$T/err")"
echo "ok without labels: $(cat "$T/err")"
mv "$T/solution.csv" "$T/kaggle/LOC_val_solution.csv"

# 2. Kaggle's layout: data info, then training on CLS-LOC (train/ and the flat val/)
"$D" data info --data "$K/val" >"$T/info" 2>&1 || fail "data info on the flat val/: $(cat "$T/info")"
grep -q "12 images in 3 classes" "$T/info" || fail "data info: $(cat "$T/info")"
"$D" data info --data "$T/ds/val" | tail -n +2 >"$T/info.folder"
tail -n +2 "$T/info" | cmp -s - "$T/info.folder" || fail "the flat val/'s classes differ from the ImageFolder val/'s"
echo "ok data info: $(head -1 "$T/info")"
"$D" train --data "$K" --model resnet-mini --size 32 --batch 4 --device ref --threads 2 --workers 1 --peak off \
  --no-monitor --epochs 1 --json "$T/r.json" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "train on Kaggle's layout"; }
grep -q "label sets differ" "$T/err" && fail "val labels differ from train's: $(cat "$T/err")"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; assert d["val_images"] == 12, d; print("ok train: val", d["val"], d["val_images"], "images")' "$T/r.json" \
  || fail "the result's data"

# 3. the devkit: ground truth in the devkit's ID order plus the ID -> synset list
V="$T/devkit/val"; mkdir -p "$V" "$T/devkit/ILSVRC2012_devkit_t12/data"
cp "$K"/val/*.JPEG "$V/"
# devkit IDs: 1 = the last class, 2 = the first, 3 = the second (not the sorted order)
classes=($(ls "$T/ds/val"))
printf '1 %s\n2 %s\n3 %s\n' "${classes[2]}" "${classes[0]}" "${classes[1]}" >"$T/devkit/ILSVRC2012_mapping.txt"
declare -A id=(["${classes[2]}"]=1 ["${classes[0]}"]=2 ["${classes[1]}"]=3)
for f in $(cd "$T/ds/val" && ls */*.JPEG | sort -t/ -k2); do echo "${id[${f%%/*}]}"; done \
  >"$T/devkit/ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"
"$D" data info --data "$V" >"$T/info2" 2>&1 || fail "data info on the devkit's val/: $(cat "$T/info2")"
tail -n +2 "$T/info2" | cmp -s - "$T/info.folder" || fail "devkit: classes differ: $(cat "$T/info2")"
echo "ok devkit: $(head -1 "$T/info2")"
