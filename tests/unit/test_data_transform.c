// Unit tests for data/transform: the crop geometry (torchvision's RandomResizedCrop and Resize + CenterCrop), the
// decode-window + resample path against a full decode + reference resample, and the DCT-scaled path against the
// full-size one.
//
// Bounds: at full DCT scale the transform equals the plain reference (full decode, then the double-precision filter)
// within 1 level. With DCT scaling the decoder's own downscale replaces part of the triangle filter; on natural-like
// content (the synthetic ImageNet at quality 92) mean abs error <= 2 levels and PSNR >= 35 dB over random crops
// (measured: 0.85 and 45.8 dB).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/jpeg.h"
#include "data/jpeg_encode.h"
#include "data/resample.h"
#include "data/synth.h"
#include "data/transform.h"

static void test_val_geometry(void **state) {
    (void)state;
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_VAL);
    // Resize(256) then CenterCrop(224), numbers as torchvision 0.14 computes them (round half to even).
    static const struct { int W, H, rw, rh, x, y; } rows[] = {
        {500, 375, 341, 256, 58, 16}, {375, 500, 256, 341, 16, 58}, {224, 224, 256, 256, 16, 16},
        {1000, 300, 853, 256, 314, 16}, {256, 256, 256, 256, 16, 16}, {100, 80, 320, 256, 48, 16},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_crop c;
        dlp_transform_pick_crop(&t, rows[i].W, rows[i].H, NULL, &c);
        assert_int_equal(c.resized_w, rows[i].rw);
        assert_int_equal(c.resized_h, rows[i].rh);
        assert_int_equal(c.x, rows[i].x);
        assert_int_equal(c.y, rows[i].y);
        assert_int_equal(c.flip, 0);
    }
    t.out_w = t.out_h = 112;  // shorter side scales with the crop: 128
    dlp_crop c;
    dlp_transform_pick_crop(&t, 500, 375, NULL, &c);
    assert_int_equal(c.resized_h, 128);
    assert_int_equal(c.resized_w, 170);
}

static void test_random_crop_params(void **state) {
    (void)state;
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    dlp_rng r;
    dlp_rng_init(&r, 1, 1);
    int flips = 0;
    static const int sizes[][2] = {{500, 375}, {375, 500}, {1600, 1000}, {64, 48}, {1000, 10}, {10, 1000}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int i = 0; i < 500; i++) {
            int W = sizes[s][0], H = sizes[s][1];
            dlp_crop c;
            dlp_transform_pick_crop(&t, W, H, &r, &c);
            assert_true(c.w >= 1 && c.h >= 1 && c.x >= 0 && c.y >= 0 && c.x + c.w <= W && c.y + c.h <= H);
            assert_int_equal(c.resized_w, 0);
            double ar = (double)c.w / c.h, area = (double)c.w * c.h / ((double)W * H);
            if (W < 5 * H && H < 5 * W) {  // normal images: the sampled crop (rounded to pixels)
                assert_true(area > 0.07 && area <= 1.0);
                assert_true(ar > 0.7 && ar < 1.45);
            } else {  // extreme aspect: the centre fallback clamps the ratio
                assert_true(ar >= 0.74 || c.w == W);
            }
            flips += c.flip;
        }
    assert_true(flips > 1200 && flips < 1800);  // p = 0.5 over 3000 draws
    // Same rng state, same crop.
    dlp_rng a, b;
    dlp_rng_init(&a, 9, 4);
    dlp_rng_init(&b, 9, 4);
    dlp_crop ca, cb;
    dlp_transform_pick_crop(&t, 500, 375, &a, &ca);
    dlp_transform_pick_crop(&t, 500, 375, &b, &cb);
    assert_memory_equal(&ca, &cb, sizeof ca);
}

// A natural-like test image: one synthetic-ImageNet image, encoded at quality 92, 4:2:0.
static uint8_t *natural_jpeg(size_t *len, int *W, int *H, uint8_t **rgb_out) {
    dlp_synth_params p;
    dlp_synth_defaults(&p);
    uint8_t *rgb;
    assert_int_equal(dlp_synth_render(&p, 0, 3, 5, &rgb, W, H), DLP_OK);
    dlp_jpeg_enc_opts o;
    dlp_jpeg_enc_defaults(&o);
    o.quality = 92;
    uint8_t *jpg;
    assert_int_equal(dlp_jpeg_encode(rgb, *W, *H, &o, &jpg, len), DLP_OK);
    if (rgb_out) *rgb_out = rgb;
    else free(rgb);
    return jpg;
}

// Full decode + the double-precision filter of the resample test, for one crop (8-bit NHWC result in double).
static double ref_pixel(const uint8_t *img, int W, int H, const dlp_crop *c, int ow, int oh, int x, int y, int ch) {
    double sx, sy, ox, oy;
    int lox, hix, loy, hiy, kx, ky;
    if (c->resized_w) {
        sx = (double)W / c->resized_w, sy = (double)H / c->resized_h, ox = oy = 0, kx = c->x, ky = c->y;
        lox = loy = 0, hix = W, hiy = H;
    } else {
        sx = (double)c->w / ow, sy = (double)c->h / oh, ox = c->x, oy = c->y, kx = ky = 0;
        lox = c->x, hix = c->x + c->w, loy = c->y, hiy = c->y + c->h;
    }
    int xs = c->flip ? ow - 1 - x : x;
    double fx = sx > 1 ? sx : 1, fy = sy > 1 ? sy : 1;
    double cx = ox + (kx + xs + 0.5) * sx, cy = oy + (ky + y + 0.5) * sy;
    double v = 0, wsum_y = 0;
    for (int j = loy; j < hiy; j++) {
        double wy = 1 - fabs(j + 0.5 - cy) / fy;
        if (wy <= 0) continue;
        double row = 0, wsum_x = 0;
        for (int i = lox; i < hix; i++) {
            double wx = 1 - fabs(i + 0.5 - cx) / fx;
            if (wx <= 0) continue;
            row += wx * img[((size_t)j * W + i) * 3 + ch];
            wsum_x += wx;
        }
        v += wy * row / wsum_x;
        wsum_y += wy;
    }
    return v / wsum_y;
}

static void test_full_scale_vs_reference(void **state) {
    (void)state;
    size_t len;
    int W, H;
    uint8_t *jpg = natural_jpeg(&len, &W, &H, NULL);
    // The reference decodes the whole image.
    dlp_jpeg_dec *d;
    assert_int_equal(dlp_jpeg_dec_create(&d), DLP_OK);
    dlp_jpeg_info info;
    assert_int_equal(dlp_jpeg_open(d, jpg, len, &info), DLP_OK);
    dlp_jpeg_rgb full;
    assert_int_equal(dlp_jpeg_decode_region(d, 8, 0, 0, W, H, &full), DLP_OK);
    uint8_t *img = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++) memcpy(img + (size_t)y * W * 3, full.px + (size_t)y * full.stride, (size_t)W * 3);
    dlp_jpeg_close(d);
    dlp_jpeg_dec_free(d);

    for (int kind = 0; kind < 2; kind++) {
        dlp_transform t;
        dlp_transform_defaults(&t, kind ? DLP_XFORM_VAL : DLP_XFORM_TRAIN);
        t.out_w = 56;  // small outputs keep the double-precision reference quick
        t.out_h = 48;
        t.dtype = DLP_DTYPE_U8;
        t.layout = DLP_LAYOUT_NHWC;
        t.dct_scales = 1u << 8;
        if (kind) t.resize_short = 64;
        dlp_transformer *x;
        assert_int_equal(dlp_transformer_create(&t, &x), DLP_OK);
        uint8_t out[56 * 48 * 3];
        dlp_rng r;
        dlp_rng_init(&r, 7, kind);
        for (int trial = 0; trial < (kind ? 1 : 12); trial++) {
            dlp_sample_info si;
            assert_int_equal(dlp_transformer_run(x, jpg, len, NULL, &r, out, &si), DLP_OK);
            assert_int_equal(si.scale_num, 8);
            double worst = 0;
            for (int y = 0; y < t.out_h; y++)
                for (int xx = 0; xx < t.out_w; xx++)
                    for (int c = 0; c < 3; c++) {
                        double e = fabs(out[((size_t)y * t.out_w + xx) * 3 + c] -
                                        ref_pixel(img, W, H, &si.crop, t.out_w, t.out_h, xx, y, c));
                        if (e > worst) worst = e;
                    }
            if (worst > 1.0 + 1e-3)
                fail_msg("%s crop (%d,%d %dx%d flip %d): max abs error %.3f vs full decode + reference (bound 1)",
                         kind ? "val" : "train", si.crop.x, si.crop.y, si.crop.w, si.crop.h, si.crop.flip, worst);
        }
        dlp_transformer_free(x);
    }
    free(img);
    free(jpg);
}

static void test_dct_scaled_vs_full(void **state) {
    (void)state;
    size_t len;
    int W, H;
    uint8_t *jpg = natural_jpeg(&len, &W, &H, NULL);
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    t.dtype = DLP_DTYPE_U8;
    t.layout = DLP_LAYOUT_NHWC;
    t.out_w = t.out_h = 64;  // small output: crops shrink a lot, so DCT scales below 8/8 are used
    dlp_transform tf = t;
    tf.dct_scales = 1u << 8;
    t.dct_scales = DLP_JPEG_SCALES_ALL;
    dlp_transformer *xs, *xf;
    assert_int_equal(dlp_transformer_create(&t, &xs), DLP_OK);
    assert_int_equal(dlp_transformer_create(&tf, &xf), DLP_OK);
    static uint8_t a[64 * 64 * 3], b[64 * 64 * 3];
    dlp_rng r;
    dlp_rng_init(&r, 21, 0);
    double sum = 0, sq = 0, n = 0, worst_mae = 0;
    int scaled = 0;
    for (int trial = 0; trial < 30; trial++) {
        dlp_crop c;
        dlp_transform_pick_crop(&t, W, H, &r, &c);
        dlp_sample_info si, sf;
        assert_int_equal(dlp_transformer_run(xs, jpg, len, &c, NULL, a, &si), DLP_OK);
        assert_int_equal(dlp_transformer_run(xf, jpg, len, &c, NULL, b, &sf), DLP_OK);
        assert_int_equal(sf.scale_num, 8);
        assert_true(si.scale_num * c.w >= 8 * t.out_w || si.scale_num == 8);
        scaled += si.scale_num < 8;
        double s1 = 0;
        for (size_t i = 0; i < sizeof a; i++) {
            double e = (double)a[i] - b[i];
            s1 += fabs(e);
            sq += e * e;
        }
        sum += s1;
        n += sizeof a;
        if (s1 / sizeof a > worst_mae) worst_mae = s1 / sizeof a;
    }
    double mae = sum / n, psnr = 10 * log10(255.0 * 255.0 / (sq / n));
    printf("DCT-scaled vs full decode: %d of 30 crops scaled, mean abs error %.3f (worst crop %.3f), PSNR %.1f dB\n",
           scaled, mae, worst_mae, psnr);
    assert_true(scaled >= 20);
    if (mae > 2.0 || psnr < 35) fail_msg("DCT-scaled path: mean abs error %.3f (bound 2), PSNR %.1f dB (bound 35)", mae, psnr);
    dlp_transformer_free(xs);
    dlp_transformer_free(xf);
    free(jpg);
}

static void test_one_shot_and_layouts(void **state) {
    (void)state;
    size_t len;
    int W, H;
    uint8_t *jpg = natural_jpeg(&len, &W, &H, NULL);
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_VAL);
    size_t nb = dlp_transform_sample_bytes(&t);
    assert_int_equal(nb, 3 * 224 * 224 * 4);
    float *a = malloc(nb), *b = malloc(nb);
    assert_int_equal(dlp_transform_jpeg(&t, jpg, len, a), DLP_OK);
    dlp_transformer *x;
    assert_int_equal(dlp_transformer_create(&t, &x), DLP_OK);
    dlp_sample_info si;
    assert_int_equal(dlp_transformer_run(x, jpg, len, NULL, NULL, b, &si), DLP_OK);
    assert_memory_equal(a, b, nb);
    assert_true(si.decode_ns > 0 && si.augment_ns > 0);
    // Values are normalized: roughly zero-mean, within ImageNet-normalized range.
    double m = 0;
    for (size_t i = 0; i < nb / 4; i++) {
        assert_true(a[i] > -2.2f && a[i] < 2.7f);
        m += a[i];
    }
    assert_true(fabs(m / (nb / 4)) < 1.5);
    // Bad input through the transformer: DLP_ERR_FORMAT and the kind.
    assert_int_equal(dlp_transformer_run(x, jpg, len / 3, NULL, NULL, b, &si), DLP_ERR_FORMAT);
    assert_int_equal(si.bad, DLP_BAD_TRUNCATED);
    assert_int_equal(dlp_transform_jpeg(&t, (const uint8_t *)"GIF89a....", 10, b), DLP_ERR_FORMAT);
    // A random crop without an rng is refused, not a crash.
    dlp_transform tt;
    dlp_transform_defaults(&tt, DLP_XFORM_TRAIN);
    dlp_transformer *xt;
    assert_int_equal(dlp_transformer_create(&tt, &xt), DLP_OK);
    assert_int_equal(dlp_transformer_run(xt, jpg, len, NULL, NULL, b, &si), DLP_ERR_INVALID);
    dlp_transformer_free(xt);
    // Options that make no sense are refused up front.
    dlp_transform bad = t;
    bad.std[1] = 0;
    assert_int_equal(dlp_transform_check(&bad), DLP_ERR_INVALID);
    bad = t;
    bad.scale_lo = 0.9;
    bad.scale_hi = 0.5;
    assert_int_equal(dlp_transform_check(&bad), DLP_ERR_INVALID);
    dlp_transformer_free(x);
    free(a);
    free(b);
    free(jpg);
}

// Every size from 1x1 up, every subsampling, train and val transforms, all DCT scales: no failure, no overrun (ASan).
static void test_tiny_and_odd_sizes(void **state) {
    (void)state;
    dlp_transformer *x[4];
    for (int k = 0; k < 4; k++) {
        dlp_transform t;
        dlp_transform_defaults(&t, k & 1 ? DLP_XFORM_VAL : DLP_XFORM_TRAIN);
        t.out_w = k < 2 ? 32 : 7;
        t.out_h = k < 2 ? 24 : 5;
        t.dct_scales = DLP_JPEG_SCALES_ALL;
        t.dtype = DLP_DTYPE_U8;
        assert_int_equal(dlp_transformer_create(&t, &x[k]), DLP_OK);
    }
    uint8_t out[32 * 24 * 3];
    dlp_rng r;
    dlp_rng_init(&r, 4, 4);
    static const int samp[][2] = {{1, 1}, {2, 1}, {2, 2}, {1, 2}};
    for (int w = 1; w <= 70; w += (w < 20 ? 1 : 13))
        for (int h = 1; h <= 70; h += (h < 20 ? 3 : 17)) {
            uint8_t *rgb = malloc((size_t)w * h * 3);
            for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)dlp_rng_below(&r, 256);
            dlp_jpeg_enc_opts o;
            dlp_jpeg_enc_defaults(&o);
            int si = (w + h) % 4;
            o.h_samp = samp[si][0];
            o.v_samp = samp[si][1];
            o.progressive = (w * h) % 3 == 0;
            uint8_t *jpg;
            size_t len;
            assert_int_equal(dlp_jpeg_encode(rgb, w, h, &o, &jpg, &len), DLP_OK);
            for (int k = 0; k < 4; k++)
                for (int rep = 0; rep < 3; rep++) {
                    dlp_sample_info si2;
                    dlp_status st = dlp_transformer_run(x[k], jpg, len, NULL, &r, out, &si2);
                    if (st) fail_msg("%dx%d transform %d: %s", w, h, k, dlp_err_msg());
                }
            free(jpg);
            free(rgb);
        }
    for (int k = 0; k < 4; k++) dlp_transformer_free(x[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_val_geometry),
        cmocka_unit_test(test_random_crop_params),
        cmocka_unit_test(test_full_scale_vs_reference),
        cmocka_unit_test(test_dct_scaled_vs_full),
        cmocka_unit_test(test_one_shot_and_layouts),
        cmocka_unit_test(test_tiny_and_odd_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
