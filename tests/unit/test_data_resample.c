// Unit tests for data/resample: the fused resize against a plain-C reference, flip, and the normalize/layout/dtype
// output stage.
//
// Reference: a direct double-precision evaluation of the same filter (a triangle whose support is max(1, shrink
// factor) input pixels, weights normalized over the input samples allowed), with no fixed-point weights and no
// intermediate rounding. Bound: max abs error <= 1 (8-bit units) — the fast path rounds after its horizontal pass
// (as Pillow does), <= 0.5, and at the end, <= 0.5 (plus 1e-3 for the 22-bit weights).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/tensor.h"
#include "data/resample.h"

static uint8_t *noise_rgb(int w, int h, uint64_t seed) {
    uint8_t *p = malloc((size_t)w * h * 3);
    dlp_rng r;
    dlp_rng_init(&r, seed, 2);
    for (size_t i = 0; i < (size_t)w * h * 3; i++) p[i] = (uint8_t)dlp_rng_below(&r, 256);
    return p;
}

// Weight of input sample i for output k of an axis (origin, scale, k0, [lo, hi)), normalized; reference maths.
static void ref_weights(double origin, double scale, int k0, int k, int lo, int hi, double *w) {
    double fs = scale > 1 ? scale : 1;
    double c = origin + (k0 + k + 0.5) * scale, sum = 0;
    for (int i = lo; i < hi; i++) {
        double d = fabs(i + 0.5 - c) / fs;
        w[i - lo] = d < 1 ? 1 - d : 0;
        sum += w[i - lo];
    }
    if (sum == 0) {  // centre outside the input: nearest sample, as the implementation documents
        int n = (int)floor(c);
        if (n < lo) n = lo;
        if (n >= hi) n = hi - 1;
        w[n - lo] = 1;
        sum = 1;
    }
    for (int i = lo; i < hi; i++) w[i - lo] /= sum;
}

// out (oh, ow, 3) in double.
static void ref_resample(const uint8_t *src, int sw, double ox, double sx, int kx, int lox, int hix, double oy, double sy,
                         int ky, int loy, int hiy, int ow, int oh, int flip, double *out) {
    double *wx = malloc(sizeof(double) * (size_t)sw * ow);
    double *wy = malloc(sizeof(double) * (size_t)(hiy - loy) * oh);
    for (int k = 0; k < ow; k++) ref_weights(ox, sx, kx, k, lox, hix, wx + (size_t)k * sw);
    for (int k = 0; k < oh; k++) ref_weights(oy, sy, ky, k, loy, hiy, wy + (size_t)k * (hiy - loy));
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int xs = flip ? ow - 1 - x : x;
            for (int c = 0; c < 3; c++) {
                double v = 0;
                for (int j = loy; j < hiy; j++) {
                    double wj = wy[(size_t)y * (hiy - loy) + (j - loy)];
                    if (wj == 0) continue;
                    for (int i = lox; i < hix; i++) v += wj * wx[(size_t)xs * sw + (i - lox)] * src[((size_t)j * sw + i) * 3 + c];
                }
                out[((size_t)y * ow + x) * 3 + c] = v;
            }
        }
    free(wx);
    free(wy);
}

typedef struct rs_case {
    const char *name;
    int sw, sh;                   // source
    double ox, sx; int kx, lox, hix;  // x axis
    double oy, sy; int ky, loy, hiy;  // y axis
    int ow, oh, flip;
} rs_case;

static void run_case(const rs_case *c, dlp_resample_axis *ax, dlp_resample_axis *ay, dlp_resample_scratch *s) {
    uint8_t *src = noise_rgb(c->sw, c->sh, (uint64_t)c->sw * 31 + c->sh);
    assert_int_equal(dlp_resample_axis_plan(ax, c->ox, c->sx, c->kx, c->ow, c->lox, c->hix, c->flip), DLP_OK);
    assert_int_equal(dlp_resample_axis_plan(ay, c->oy, c->sy, c->ky, c->oh, c->loy, c->hiy, 0), DLP_OK);
    assert_true(ax->in_lo >= c->lox && ax->in_hi <= c->hix && ay->in_lo >= c->loy && ay->in_hi <= c->hiy);
    uint8_t *out = malloc((size_t)c->ow * c->oh * 3);
    dlp_pixel_out o = {.dst = out, .w = c->ow, .h = c->oh, .layout = DLP_LAYOUT_NHWC, .dtype = DLP_DTYPE_U8};
    // Give the resampler only the rows/columns it says it needs (a sub-buffer), as the decoder does.
    int bx = ax->in_lo, by = ay->in_lo, bw = ax->in_hi - ax->in_lo, bh = ay->in_hi - ay->in_lo;
    uint8_t *sub = malloc((size_t)bw * bh * 3);
    for (int y = 0; y < bh; y++) memcpy(sub + (size_t)y * bw * 3, src + ((size_t)(by + y) * c->sw + bx) * 3, (size_t)bw * 3);
    assert_int_equal(dlp_resample_rgb(sub, bw * 3, bx, by, ax, ay, s, &o), DLP_OK);
    double *ref = malloc(sizeof(double) * (size_t)c->ow * c->oh * 3);
    ref_resample(src, c->sw, c->ox, c->sx, c->kx, c->lox, c->hix, c->oy, c->sy, c->ky, c->loy, c->hiy, c->ow, c->oh,
                 c->flip, ref);
    double worst = 0;
    for (size_t i = 0; i < (size_t)c->ow * c->oh * 3; i++) {
        double d = fabs(out[i] - ref[i]);
        if (d > worst) worst = d;
    }
    if (worst > 1.0 + 1e-3) fail_msg("%s: max abs error %.4f vs the reference (bound 1)", c->name, worst);
    free(ref);
    free(sub);
    free(out);
    free(src);
}

static void test_against_reference(void **state) {
    (void)state;
    static const rs_case cases[] = {
        // name                   sw   sh   ox    sx      kx lox hix  oy    sy     ky loy hiy  ow   oh  flip
        {"identity",              40,  30,  0,    1.0,    0, 0,  40,  0,    1.0,   0, 0,  30,  40,  30, 0},
        {"crop 2x down",          90,  70,  10,   2.0,    0, 10, 90,  6,    2.0,   0, 6,  66,  40,  30, 0},
        {"crop 1.37 down, flip",  120, 90,  7,    1.37,   0, 7,  117, 3,    1.29,  0, 3,  81,  80,  60, 1},
        {"crop 3.3 down",         200, 150, 13,   3.3,    0, 13, 178, 9,    3.1,   0, 9,  133, 50,  40, 0},
        {"8x down",               256, 200, 0,    8.0,    0, 0,  256, 0,    8.0,   0, 0,  200, 32,  25, 1},
        {"20x down (43 taps)",    400, 120, 0,    20.0,   0, 0,  400, 0,    20.0,  0, 0,  120, 20,  6,  0},
        {"upscale 2.5x",          30,  20,  4,    0.4,    0, 4,  24,  2,    0.4,   0, 2,  18,  50,  40, 0},
        {"upscale tiny crop",     30,  20,  11,   3.0/64, 0, 11, 14,  5,    2.0/64,0, 5,  7,   64,  64, 1},
        {"1-pixel crop",          10,  10,  4,    1.0/16, 0, 4,  5,   6,    1.0/16,0, 6,  7,   16,  16, 0},
        {"fractional origin",     150, 120, 12.6, 1.61,   0, 12, 134, 7.3,  1.45,  0, 7,  109, 75,  70, 0},
        {"resize then crop",      160, 120, 0,    1.5,    9, 0,  160, 0,    1.5,   5, 0,  120, 64,  60, 0},
        {"resize then crop, flip",160, 120, 0,    1.25,   20,0,  160, 0,    1.25,  3, 0,  120, 96,  80, 1},
        {"narrow 224 row",        600, 40,  50,   2.1,    0, 50, 520, 0,    1.0,   0, 0,  40,  224, 40, 0},
    };
    dlp_resample_axis ax = {0}, ay = {0};
    dlp_resample_scratch s = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], &ax, &ay, &s);
    // Random cases: crop boxes and sizes
    dlp_rng r;
    dlp_rng_init(&r, 11, 0);
    for (int t = 0; t < 40; t++) {
        rs_case c = {"random", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        c.sw = 20 + (int)dlp_rng_below(&r, 200);
        c.sh = 20 + (int)dlp_rng_below(&r, 150);
        int cw = 1 + (int)dlp_rng_below(&r, (uint64_t)c.sw), ch = 1 + (int)dlp_rng_below(&r, (uint64_t)c.sh);
        c.lox = (int)dlp_rng_below(&r, (uint64_t)(c.sw - cw + 1));
        c.loy = (int)dlp_rng_below(&r, (uint64_t)(c.sh - ch + 1));
        c.hix = c.lox + cw;
        c.hiy = c.loy + ch;
        c.ox = c.lox;
        c.oy = c.loy;
        c.ow = 1 + (int)dlp_rng_below(&r, 90);
        c.oh = 1 + (int)dlp_rng_below(&r, 90);
        c.sx = (double)cw / c.ow;
        c.sy = (double)ch / c.oh;
        c.flip = (int)dlp_rng_below(&r, 2);
        run_case(&c, &ax, &ay, &s);
    }
    dlp_resample_axis_free(&ax);
    dlp_resample_axis_free(&ay);
    dlp_resample_scratch_free(&s);
}

static void test_flip_is_mirror(void **state) {
    (void)state;
    const int sw = 97, sh = 61, ow = 45, oh = 33;
    uint8_t *src = noise_rgb(sw, sh, 5);
    dlp_resample_axis ax = {0}, ay = {0};
    dlp_resample_scratch s = {0};
    uint8_t a[45 * 33 * 3], b[45 * 33 * 3];
    dlp_pixel_out o = {.dst = a, .w = ow, .h = oh, .layout = DLP_LAYOUT_NHWC, .dtype = DLP_DTYPE_U8};
    assert_int_equal(dlp_resample_axis_plan(&ax, 3, 90.0 / ow, 0, ow, 3, 93, 0), DLP_OK);
    assert_int_equal(dlp_resample_axis_plan(&ay, 1, 58.0 / oh, 0, oh, 1, 59, 0), DLP_OK);
    assert_int_equal(dlp_resample_rgb(src, sw * 3, 0, 0, &ax, &ay, &s, &o), DLP_OK);
    assert_int_equal(dlp_resample_axis_plan(&ax, 3, 90.0 / ow, 0, ow, 3, 93, 1), DLP_OK);
    o.dst = b;
    assert_int_equal(dlp_resample_rgb(src, sw * 3, 0, 0, &ax, &ay, &s, &o), DLP_OK);
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) assert_int_equal(a[(y * ow + x) * 3 + c], b[(y * ow + (ow - 1 - x)) * 3 + c]);
    dlp_resample_axis_free(&ax);
    dlp_resample_axis_free(&ay);
    dlp_resample_scratch_free(&s);
    free(src);
}

// The same resample into every layout and dtype agrees with the 8-bit result: f32 = v * scale + bias (ToTensor +
// Normalize), bf16/fp16 = that value rounded to nearest even, NCHW = NHWC transposed.
static void test_layout_dtype(void **state) {
    (void)state;
    const int sw = 80, sh = 64, ow = 37, oh = 29;
    uint8_t *src = noise_rgb(sw, sh, 8);
    dlp_resample_axis ax = {0}, ay = {0};
    dlp_resample_scratch s = {0};
    assert_int_equal(dlp_resample_axis_plan(&ax, 2, 71.0 / ow, 0, ow, 2, 73, 1), DLP_OK);
    assert_int_equal(dlp_resample_axis_plan(&ay, 4, 55.0 / oh, 0, oh, 4, 59, 0), DLP_OK);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    dlp_pixel_out o = {.w = ow, .h = oh};
    for (int c = 0; c < 3; c++) {
        o.scale[c] = 1.0f / (255.0f * std[c]);
        o.bias[c] = -mean[c] / std[c];
    }
    const size_t n = (size_t)ow * oh * 3;
    uint8_t *v = malloc(n), *v_nchw = malloc(n);
    float *f_nhwc = malloc(n * 4), *f_nchw = malloc(n * 4);
    uint16_t *bf = malloc(n * 2), *hf = malloc(n * 2);
    struct { void *dst; dlp_layout l; dlp_dtype t; } outs[] = {
        {v, DLP_LAYOUT_NHWC, DLP_DTYPE_U8},     {v_nchw, DLP_LAYOUT_NCHW, DLP_DTYPE_U8},
        {f_nhwc, DLP_LAYOUT_NHWC, DLP_DTYPE_F32}, {f_nchw, DLP_LAYOUT_NCHW, DLP_DTYPE_F32},
        {bf, DLP_LAYOUT_NCHW, DLP_DTYPE_BF16},  {hf, DLP_LAYOUT_NHWC, DLP_DTYPE_F16},
    };
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
        o.dst = outs[k].dst;
        o.layout = outs[k].l;
        o.dtype = outs[k].t;
        assert_int_equal(dlp_resample_rgb(src, sw * 3, 0, 0, &ax, &ay, &s, &o), DLP_OK);
    }
    const size_t plane = (size_t)ow * oh;
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) {
                size_t hwc = ((size_t)y * ow + x) * 3 + c, chw = c * plane + (size_t)y * ow + x;
                uint8_t u = v[hwc];
                assert_int_equal(v_nchw[chw], u);
                // torchvision: (u / 255 - mean) / std in float32
                float want = ((float)u / 255.0f - mean[c]) / std[c];
                assert_true(fabsf(f_nhwc[hwc] - want) <= 2e-6f * (1 + fabsf(want)));
                assert_true(f_nchw[chw] == f_nhwc[hwc]);
                assert_int_equal(bf[chw], dlp_f32_to_bf16(f_nhwc[hwc]));
                assert_int_equal(hf[hwc], dlp_f32_to_f16(f_nhwc[hwc]));
            }
    free(v);
    free(v_nchw);
    free(f_nhwc);
    free(f_nchw);
    free(bf);
    free(hf);
    free(src);
    dlp_resample_axis_free(&ax);
    dlp_resample_axis_free(&ay);
    dlp_resample_scratch_free(&s);
}

static void test_bad_plans(void **state) {
    (void)state;
    dlp_resample_axis a = {0};
    assert_int_equal(dlp_resample_axis_plan(&a, 0, 1.0, 0, 0, 0, 10, 0), DLP_ERR_INVALID);
    assert_int_equal(dlp_resample_axis_plan(&a, 0, 0.0, 0, 10, 0, 10, 0), DLP_ERR_INVALID);
    assert_int_equal(dlp_resample_axis_plan(&a, 0, 1.0, 0, 10, 5, 5, 0), DLP_ERR_INVALID);
    assert_int_equal(dlp_resample_axis_plan(&a, NAN, 1.0, 0, 10, 0, 10, 0), DLP_ERR_INVALID);
    dlp_resample_axis_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_flip_is_mirror),
        cmocka_unit_test(test_layout_dtype),
        cmocka_unit_test(test_bad_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
