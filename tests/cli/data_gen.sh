#!/bin/bash
# `dlperf data gen`: the layout, the same bytes whatever --workers, never overwriting, ImageNet-like defaults, and
# `data info --check` on the result.
# tags: asan light
# timeout: 300
set -eu
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/datagen.XXXXXX")
trap 'rm -rf "$T"' EXIT
D=$DLPERF
fail() { echo "FAIL: $*"; exit 1; }

$D data gen --out "$T/a" --classes 3 --per-class 5 --val-per-class 2 --size 40-64 --seed 7 --workers 1 >"$T/a.out"
$D data gen --out "$T/b" --classes 3 --per-class 5 --val-per-class 2 --size 40-64 --seed 7 --workers 2 >/dev/null
diff -r "$T/a/train" "$T/b/train" || fail "train differs between --workers 1 and 2"
diff -r "$T/a/val" "$T/b/val" || fail "val differs between --workers 1 and 2"
head -1 "$T/a.out" | grep -q "$T/a" || fail "gen does not print the dataset path"
grep -q "21 images (15 train, 6 val) in 3 classes" "$T/a.out" || fail "summary: $(cat "$T/a.out")"
for f in labels.txt train.txt val.txt dataset.json; do [ -s "$T/a/$f" ] || fail "missing $f"; done
[ "$(ls "$T/a/train" | wc -l)" = 3 ] || fail "expected 3 class folders"
ls "$T/a/train" | grep -Eq '^n[0-9]{8}$' || fail "class folders are not wnids"
[ "$(grep -vc '^#' "$T/a/labels.txt")" = 3 ] || fail "labels.txt"
[ "$(wc -l <"$T/a/train.txt")" = 15 ] || fail "train.txt"
ls "$T/a/val/"*/ILSVRC2012_val_000000*.JPEG >/dev/null || fail "val file names"

# never overwrites
if $D data gen --out "$T/a" --classes 3 --per-class 5 2>"$T/err"; then fail "overwrote an existing dataset"; fi
grep -q "already exists" "$T/err" || fail "no clear message: $(cat "$T/err")"

# the files decode; info counts them
$D data info --data "$T/a" --check >"$T/info" || fail "info --check found bad files: $(cat "$T/info")"
grep -q "15 images in 3 classes" "$T/info" || fail "info: $(cat "$T/info")"
grep -q "0 bad" "$T/info" || fail "info: $(cat "$T/info")"

# ImageNet-like defaults (a small sample): sizes around 500x375 and ~110 KB files
if [ "${DLPERF_SANITIZER:-0}" != 1 ]; then
  $D data gen --out "$T/inet" --classes 2 --per-class 20 --val-per-class 0 --seed 1 >"$T/inet.out"
  kb=$(sed -n 's/.*MB, \([0-9.]*\) KB per file.*/\1/p' "$T/inet.out")
  awk -v k="$kb" 'BEGIN { exit !(k > 60 && k < 200) }' || fail "mean file size $kb KB is not ImageNet-like"
  /usr/bin/python3 - "$T/inet" <<'PY' || fail "ImageNet-like size distribution"
import sys, glob
from PIL import Image
sizes = [Image.open(f).size for f in glob.glob(sys.argv[1] + "/train/*/*.JPEG")]
land = sum(w > h for w, h in sizes); port = sum(h > w for w, h in sizes)
assert len(sizes) == 40, len(sizes)
assert land >= 15 and port >= 3, (land, port)
assert all(60 <= min(s) <= 1800 for s in sizes), sizes
PY
fi
echo "data gen: ok"
