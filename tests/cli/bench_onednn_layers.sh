#!/bin/bash
# bench/onednn_layers.c (the oneDNN-versions benchmark's primitives) builds with warnings as errors against the
# oneDNN dlperf builds against, runs a few of ResNet-50's layers at a small size, and its forward checksums agree
# with a plain C convolution of the same inputs (so the benchmark times the right computation). Takes ~2 s.
# timeout: 120
set -u
T=${DLPERF_TEST_TMP:-/tmp}/onednn_layers.$$
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
# the oneDNN 3.x dlperf builds against (scripts/setup.sh installs it; the Makefile's DNNL_PREFIX)
V3=${DNNL_PREFIX:-$ROOT/build-deps/onednn-3.2}
[ -f "$V3/include/oneapi/dnnl/dnnl.h" ] || { echo "SKIP: no oneDNN 3.x in $V3 (scripts/setup.sh onednn)"; exit 77; }
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Werror -fopenmp -I"$V3/include" "$ROOT/bench/onednn_layers.c" \
  -o "$T/layers" -L"$V3/lib" -Wl,-rpath,"$V3/lib" -l:libdnnl.so.3 -lm >"$T/cc.txt" 2>&1 ||
  { cat "$T/cc.txt"; fail "bench/onednn_layers.c does not build against oneDNN 3.x"; }
echo "ok builds with -Wall -Wextra -Werror"
OMP_NUM_THREADS=2 "$T/layers" --batch 2 --size 64 --reps 1 --only "l4" --json >"$T/out.jsonl" 2>"$T/err.txt" ||
  { cat "$T/err.txt"; fail "onednn_layers --only l4 failed"; }
PY=${PYTHON:-/usr/bin/python3}
"$PY" - "$T/out.jsonl" <<'PYEOF' || fail "onednn_layers' output"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
head = rows[0]
assert head["onednn"].startswith("3.") and head["batch"] == 2 and head["precision"] == "fp32", head
ops = {(r["layer"], r["op"]) for r in rows if "layer" in r}
layers = {r["layer"] for r in rows if "layer" in r}
assert layers == {"l4 1x1 1024-512", "l4 3x3/2 512-512", "l4 1x1 512-2048", "l4 ds 1x1/2 1024-2048",
                  "l4 1x1 2048-512", "l4 3x3 512-512"}, layers
for l in layers:
    for op in ("conv fwd", "conv bwd data", "conv bwd weights", "bn fwd", "bn bwd"):
        assert (l, op) in ops, (l, op)
assert ("l4 1x1 512-2048", "add+relu fwd") in ops and ("l4 ds 1x1/2 1024-2048", "add+relu fwd") not in ops
for r in rows:
    if "layer" in r:
        assert r["ms"] >= 0 and r["impl"], r
# each convolution pass's FLOPs (the report's GFLOP/s): 2 x N x OH x OW x IC x OC x K^2 at 64 px (l4 at 2x2, the
# stride-2 one from 4x4, the first 1x1 at 4x4); the passes that are not convolutions carry none
want = {"l4 1x1 1024-512": 2 * 2 * 16 * 1024 * 512, "l4 3x3/2 512-512": 2 * 2 * 4 * 512 * 512 * 9,
        "l4 3x3 512-512": 2 * 2 * 4 * 512 * 512 * 9, "l4 1x1 2048-512": 2 * 2 * 4 * 2048 * 512}
for r in rows:
    if r.get("layer") in want:
        g = want[r["layer"]] * 1e-9 if r["op"].startswith("conv ") else 0
        assert abs(r["gflop"] - g) <= 1e-6 * max(g, 1e-9), (r, g)
step = [r for r in rows if r.get("total") == "step"][0]
assert step["ms"] > 0
print("ok l4's six shapes: every op timed, implementations named, the add only after a bottleneck's last conv")
PYEOF
# The checksum (sum of |y|) of the 3x3 stride-2 forward, recomputed here in plain C from the same inputs: the same
# xorshift fill in logical NCHW / OIHW order as mem_new, zero padding, stride 2.
cat >"$T/ref.c" <<'CEOF'
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static void fill(float *p, size_t n, unsigned seed, float scale) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = scale * ((float)(x & 0xffff) / 32768.f - 1.f);
    }
}
int main(void) {
    const int N = 2, C = 512, K = 512, H = 4, OH = 2;  /* 14 px at 224 -> 4 at 64; 3x3 stride 2 pad 1 */
    float *x = malloc(sizeof(float) * N * C * H * H), *w = malloc(sizeof(float) * K * C * 9);
    fill(x, (size_t)N * C * H * H, 1, 1.f);
    fill(w, (size_t)K * C * 9, 2, 0.05f);
    double s = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OH; ow++) {
                    double acc = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < 3; r++)
                            for (int q = 0; q < 3; q++) {
                                int ih = oh * 2 - 1 + r, iw = ow * 2 - 1 + q;
                                if (ih < 0 || iw < 0 || ih >= H || iw >= H) continue;
                                acc += (double)x[((n * C + c) * H + ih) * H + iw] * w[((k * C + c) * 3 + r) * 3 + q];
                            }
                    s += fabs(acc);
                }
    printf("%.9g\n", s);
    return 0;
}
CEOF
cc -O2 -o "$T/ref" "$T/ref.c" -lm || fail "reference build"
want=$("$T/ref")
got=$("$PY" -c "import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get('layer') == 'l4 3x3/2 512-512' and r.get('op') == 'conv fwd': print(r['checksum'])" "$T/out.jsonl")
awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-4 * b) }' ||
  fail "l4 3x3/2 forward checksum $got, plain C $want"
echo "ok l4 3x3/2 forward checksum $got = plain C $want (within 1e-4)"
echo "all passed"
