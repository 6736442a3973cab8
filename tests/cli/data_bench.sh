#!/bin/bash
# `dlperf data bench`: the table, the versioned JSON (never overwritten), several worker counts, cold reads, the
# read limit, and a dataset with every kind of bad file (skipped, counted by kind, in the result; the run goes on).
# tags: asan
# timeout: 300
set -eu
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/databench.XXXXXX")
trap 'rm -rf "$T"' EXIT
D=$DLPERF
PY=${PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*"; exit 1; }

$D data gen --out "$T/ds" --classes 4 --per-class 12 --val-per-class 3 --size 48-80 --seed 3 >/dev/null
$D data bench --data "$T/ds" --workers 1,2 --batch 8 --crop 32 --json "$T/r.json" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "bench"; }
grep -q "speed-up 1 -> 2 workers" "$T/out" || fail "no speed-up line: $(cat "$T/out")"
$PY - "$T/r.json" <<'PY' || fail "JSON result"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "dlperf.data_bench/1", r["schema"]
assert [x["workers"] for x in r["runs"]] == [1, 2]
for x in r["runs"]:
    assert x["images"] == 48 and x["img_per_s"] > 0 and x["loader"]["bad"]["replaced_samples"] == 0, x
    assert x["loader"]["bytes_read"] > 0 and x["loader"]["worker_ms_per_image"]["decode"] > 0
    # the steady rate leaves the pass's start out (from the first batch on): of the same order as the whole pass's
    assert x["steady_img_per_s"] > 0 and 0.3 < x["steady_img_per_s"] / x["img_per_s"] < 10, x
assert r["options"]["batch"] == 8 and "host" in r and "versions" in r and "argv" in r
PY
# one batch only: no steady part to time, the steady rate is the whole pass's
$D data bench --data "$T/ds" --workers 1 --batch 8 --images 8 --crop 32 --json "$T/one.json" >/dev/null 2>"$T/err" ||
  { cat "$T/err"; fail "bench of one batch"; }
$PY -c "import json,sys; x=json.load(open(sys.argv[1]))['runs'][0]; assert x['images']==8 and x['steady_img_per_s']==x['img_per_s']>0, x" \
  "$T/one.json" || fail "steady rate of a one-batch pass"
if $D data bench --data "$T/ds" --workers 1 --crop 32 --json "$T/r.json" 2>"$T/err"; then fail "overwrote --json"; fi
grep -q "already exists" "$T/err" || fail "no clear message for an existing --json"

# val transform, NHWC bf16, cold reads, a read limit
$D data bench --data "$T/ds" --split val --val --workers 2 --batch 4 --crop 40 --dtype bf16 --layout NHWC \
  --drop-cache --read-limit 2M --json "$T/v.json" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "val/cold/limited"; }
grep -q "dropped 12 files" "$T/err" || fail "cache drop not reported: $(cat "$T/err")"
$PY -c "import json,sys; r=json.load(open(sys.argv[1])); x=r['runs'][0]; assert x['images']==12 and r['cold'] and x['loader']['throttle_ns']>=0" "$T/v.json" || fail "val JSON"

# bad files: one of each kind among good ones
cp -r "$T/ds/train" "$T/bad"
c=$(ls "$T/bad" | head -1)
: >"$T/bad/$c/zero.JPEG"
printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR' >"$T/bad/$c/png.JPEG"
echo "not an image" >"$T/bad/$c/text.JPEG"
f=$(ls "$T/bad/$c/"*_0.JPEG)
head -c 700 "$f" >"$T/bad/$c/truncated.JPEG"
$PY - "$f" "$T/bad/$c/huge.JPEG" "$T/bad/$c/corrupt.JPEG" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"\xff\xc0"); i = i if i >= 0 else b.find(b"\xff\xc2")
h = bytearray(b); h[i + 5:i + 9] = bytes([0xFD, 0xE8, 0xFD, 0xE8]); open(sys.argv[2], "wb").write(h)
c = bytearray(b); j = c.find(b"\xff\xc4"); c[j + 1] = 0x02; open(sys.argv[3], "wb").write(c)
PY
$D data bench --data "$T/bad" --workers 2 --batch 8 --crop 32 --json "$T/b.json" >"$T/bout" 2>"$T/berr" || { cat "$T/berr"; fail "bench on bad files"; }
grep -q "skipping .*zero.JPEG \[empty\]" "$T/berr" || fail "no warning naming the empty file: $(cat "$T/berr")"
grep -q "skipping .*huge.JPEG \[too_large\]" "$T/berr" || fail "no warning naming the huge file"
$PY - "$T/b.json" <<'PY' || fail "bad counts in the result"
import json, sys
x = json.load(open(sys.argv[1]))["runs"][0]
bad = x["loader"]["bad"]
assert x["images"] == 54, x["images"]          # 48 good + 6 bad slots, all filled
assert bad["replaced_samples"] == 6 and bad["files"] == 6, bad
assert bad["empty"] == 1 and bad["not_jpeg"] == 2 and bad["truncated"] == 1 and bad["corrupt"] == 1 and bad["too_large"] == 1, bad
PY

# all bad: a clear error, not a hang
mkdir -p "$T/allbad/c"
cp "$T/bad/$c/"{zero,png,text,truncated,huge}.JPEG "$T/allbad/c/"
if $D data bench --data "$T/allbad" --workers 2 --batch 2 --crop 32 2>"$T/aerr"; then fail "all-bad dataset succeeded"; fi
grep -q "every one of the 5 samples" "$T/aerr" || fail "all-bad message: $(cat "$T/aerr")"

# errors name the thing at fault
if $D data bench --data "$T/nope" 2>"$T/nerr"; then fail "missing dataset succeeded"; fi
grep -q "$T/nope" "$T/nerr" || fail "missing dataset message: $(cat "$T/nerr")"
if $D data bench --data "$T/ds" --workers 1,x 2>/dev/null; then fail "bad --workers accepted"; fi
# a list naming a device (issue 18): warming the page cache read /dev/zero forever; now skipped and named, promptly
printf '/dev/zero 0\n' >"$T/devzero.txt"
S0=$(date +%s)
RC=0
timeout 30 $D data bench --data "$T/devzero.txt" --images 4 >/dev/null 2>"$T/zerr" || RC=$?
[ "$RC" != 124 ] || fail "data bench on a list naming /dev/zero hung"
[ "$RC" != 0 ] || fail "data bench on a list of nothing but /dev/zero exited 0"
[ $(( $(date +%s) - S0 )) -lt 20 ] || fail "data bench on /dev/zero took too long"
grep -q "/dev/zero.*not a regular file" "$T/zerr" || fail "no message naming /dev/zero: $(cat "$T/zerr")"
echo "data bench: ok"
