// Unit tests for data/jpeg and data/jpeg_encode: every JPEG kind (baseline/progressive, 4:4:4/4:2:2/4:2:0/4:4:0,
// grayscale, RGB, Adobe CMYK and YCCK) generated here with libjpeg, region decodes against a full decode, DCT
// scaling, colour conversion against the source pixels, and every kind of bad input.
//
// Bounds: a region decode (jpeg_crop_scanline + jpeg_skip_scanlines) equals the full decode of the same pixels
// exactly, at every DCT scale 1..8 (max abs error 0). CMYK/YCCK/RGB/YCbCr decodes are within JPEG's own error of the
// source at quality 95 on this content: mean abs error <= 3 levels without chroma subsampling, <= 6 with it (a
// wrong colour conversion, e.g. CMYK read without the Adobe inversion, is off by ~100).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/jpeg.h"
#include "data/jpeg_encode.h"

// A test picture with gradients, stripes, edges and a little noise: (h, w, 3).
static uint8_t *make_rgb(int w, int h, uint64_t seed) {
    uint8_t *p = malloc((size_t)w * h * 3);
    dlp_rng r;
    dlp_rng_init(&r, seed, 1);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double v[3];
            v[0] = 128 + 90 * sin(x * 0.07 + y * 0.02);
            v[1] = 40 + 180.0 * y / h;
            v[2] = (x / 16 + y / 16) % 2 ? 200 : 60;
            for (int c = 0; c < 3; c++) {
                double t = v[c] + 6 * (dlp_rng_uniform(&r) - 0.5);
                p[((size_t)y * w + x) * 3 + c] = (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : t);
            }
        }
    return p;
}

typedef struct kind_row {
    const char *name;
    dlp_jpeg_enc_color color;
    int hs, vs, progressive;
    dlp_jpeg_color want_color;
    int want_comps;
} kind_row;

static const kind_row k_kinds[] = {
    {"baseline 4:4:4", DLP_JPEG_ENC_YCBCR, 1, 1, 0, DLP_JPEG_YCBCR, 3},
    {"baseline 4:2:2", DLP_JPEG_ENC_YCBCR, 2, 1, 0, DLP_JPEG_YCBCR, 3},
    {"baseline 4:2:0", DLP_JPEG_ENC_YCBCR, 2, 2, 0, DLP_JPEG_YCBCR, 3},
    {"baseline 4:4:0", DLP_JPEG_ENC_YCBCR, 1, 2, 0, DLP_JPEG_YCBCR, 3},
    {"progressive 4:2:0", DLP_JPEG_ENC_YCBCR, 2, 2, 1, DLP_JPEG_YCBCR, 3},
    {"progressive 4:4:4", DLP_JPEG_ENC_YCBCR, 1, 1, 1, DLP_JPEG_YCBCR, 3},
    {"grayscale", DLP_JPEG_ENC_GRAY, 1, 1, 0, DLP_JPEG_GRAY, 1},
    {"progressive grayscale", DLP_JPEG_ENC_GRAY, 1, 1, 1, DLP_JPEG_GRAY, 1},
    {"RGB (no transform)", DLP_JPEG_ENC_RGB, 1, 1, 0, DLP_JPEG_RGB, 3},
    {"Adobe CMYK", DLP_JPEG_ENC_CMYK, 1, 1, 0, DLP_JPEG_CMYK, 4},
    {"Adobe YCCK", DLP_JPEG_ENC_YCCK, 1, 1, 0, DLP_JPEG_YCCK, 4},
    {"Adobe YCCK 4:2:0", DLP_JPEG_ENC_YCCK, 2, 2, 0, DLP_JPEG_YCCK, 4},
};

static void encode_kind(const kind_row *k, const uint8_t *rgb, int w, int h, int quality, uint8_t **jpg, size_t *len) {
    dlp_jpeg_enc_opts o;
    dlp_jpeg_enc_defaults(&o);
    o.quality = quality;
    o.color = k->color;
    o.h_samp = k->hs;
    o.v_samp = k->vs;
    o.progressive = k->progressive;
    assert_int_equal(dlp_jpeg_encode(rgb, w, h, &o, jpg, len), DLP_OK);
}

// Full decode at scale s into a fresh buffer (h, w, 3).
static uint8_t *full_decode(dlp_jpeg_dec *d, const uint8_t *jpg, size_t len, int s, int *w, int *h) {
    dlp_jpeg_info info;
    assert_int_equal(dlp_jpeg_open(d, jpg, len, &info), DLP_OK);
    dlp_jpeg_rgb img;
    assert_int_equal(dlp_jpeg_decode_region(d, s, 0, 0, 1 << 30, 1 << 30, &img), DLP_OK);
    assert_int_equal(img.x0, 0);
    assert_int_equal(img.y0, 0);
    assert_int_equal(img.w, dlp_jpeg_scaled_size(info.width, s));
    assert_int_equal(img.h, dlp_jpeg_scaled_size(info.height, s));
    uint8_t *out = malloc((size_t)img.w * img.h * 3);
    for (int y = 0; y < img.h; y++) memcpy(out + (size_t)y * img.w * 3, img.px + (size_t)y * img.stride, (size_t)img.w * 3);
    *w = img.w;
    *h = img.h;
    dlp_jpeg_close(d);
    return out;
}

// Each kind: the header, the colour against the source, and region decodes at every scale against the full decode.
static void test_kinds_and_regions(void **state) {
    (void)state;
    const int W = 203, H = 157;  // not multiples of the MCU size
    uint8_t *rgb = make_rgb(W, H, 7);
    dlp_jpeg_dec *d;
    assert_int_equal(dlp_jpeg_dec_create(&d), DLP_OK);
    dlp_rng r;
    dlp_rng_init(&r, 3, 3);
    for (size_t ki = 0; ki < sizeof k_kinds / sizeof k_kinds[0]; ki++) {
        const kind_row *k = &k_kinds[ki];
        uint8_t *jpg;
        size_t len;
        encode_kind(k, rgb, W, H, 95, &jpg, &len);
        dlp_jpeg_info info;
        assert_int_equal(dlp_jpeg_open(d, jpg, len, &info), DLP_OK);
        dlp_jpeg_close(d);
        assert_int_equal(info.width, W);
        assert_int_equal(info.height, H);
        assert_int_equal(info.components, k->want_comps);
        assert_int_equal(info.color, k->want_color);
        assert_int_equal(info.progressive, k->progressive);
        if (k->want_comps >= 3 && k->color != DLP_JPEG_ENC_RGB) {
            assert_int_equal(info.h_samp, k->hs);
            assert_int_equal(info.v_samp, k->vs);
        }
        if (k->want_comps == 4) assert_true(info.adobe_inverted);

        // Colour: full decode vs the source pixels.
        int fw, fh;
        uint8_t *full = full_decode(d, jpg, len, 8, &fw, &fh);
        double sum = 0;
        for (int i = 0; i < W * H; i++) {
            if (k->want_comps == 1) {
                const uint8_t *s = rgb + 3 * i;
                double luma = 0.299 * s[0] + 0.587 * s[1] + 0.114 * s[2];
                assert_int_equal(full[3 * i], full[3 * i + 1]);  // gray comes out as R = G = B
                assert_int_equal(full[3 * i], full[3 * i + 2]);
                sum += fabs(full[3 * i] - luma);
            } else {
                for (int c = 0; c < 3; c++) sum += fabs((double)full[3 * i + c] - rgb[3 * i + c]);
            }
        }
        double mae = sum / (W * H * (k->want_comps == 1 ? 1 : 3));
        double bound = k->hs * k->vs > 1 ? 6.0 : 3.0;  // subsampled chroma loses the picture's sharp colour edges
        if (mae > bound) fail_msg("%s: mean abs error %.2f vs the source (bound %.0f)", k->name, mae, bound);

        // Regions at every DCT scale equal the same pixels of the full decode at that scale.
        for (int s = 1; s <= 8; s++) {
            int sw, sh;
            uint8_t *ref = full_decode(d, jpg, len, s, &sw, &sh);
            for (int trial = 0; trial < 6; trial++) {
                int x0 = (int)dlp_rng_below(&r, (uint64_t)sw), y0 = (int)dlp_rng_below(&r, (uint64_t)sh);
                int x1 = x0 + 1 + (int)dlp_rng_below(&r, (uint64_t)(sw - x0)), y1 = y0 + 1 + (int)dlp_rng_below(&r, (uint64_t)(sh - y0));
                if (trial == 0) x0 = 16 * s / 8, y0 = 16 * s / 8;  // starts on iMCU boundaries
                if (x1 <= x0) x1 = x0 + 1;
                if (y1 <= y0) y1 = y0 + 1;
                if (x1 > sw) x1 = sw;
                if (y1 > sh) y1 = sh;
                dlp_jpeg_info in2;
                assert_int_equal(dlp_jpeg_open(d, jpg, len, &in2), DLP_OK);
                dlp_jpeg_rgb img;
                assert_int_equal(dlp_jpeg_decode_region(d, s, x0, y0, x1, y1, &img), DLP_OK);
                assert_true(img.x0 <= x0 && img.x0 + img.w >= x1 && img.y0 <= y0 && img.y0 + img.h >= y1);
                assert_int_equal(img.scaled_w, sw);
                int worst = 0;
                for (int y = y0; y < y1; y++)
                    for (int x = x0; x < x1; x++)
                        for (int c = 0; c < 3; c++) {
                            int a = img.px[(size_t)(y - img.y0) * img.stride + (size_t)(x - img.x0) * 3 + c];
                            int b = ref[((size_t)y * sw + x) * 3 + c];
                            if (abs(a - b) > worst) worst = abs(a - b);
                        }
                dlp_jpeg_close(d);
                if (worst != 0)
                    fail_msg("%s scale %d/8 region [%d,%d)x[%d,%d): max abs diff %d vs the full decode (bound 0)", k->name,
                             s, x0, x1, y0, y1, worst);
            }
            free(ref);
        }
        free(full);
        free(jpg);
    }
    dlp_jpeg_dec_free(d);
    free(rgb);
}

static void test_pick_scale(void **state) {
    (void)state;
    static const struct { double w, h; int ow, oh; unsigned mask; int want; } rows[] = {
        {1000, 1000, 224, 224, DLP_JPEG_SCALES_ALL, 2},  // 250 >= 224
        {896, 896, 224, 224, DLP_JPEG_SCALES_ALL, 2},    // exactly 224 at 2/8
        {895, 896, 224, 224, DLP_JPEG_SCALES_ALL, 3},    // one pixel short at 2/8
        {500, 375, 224, 224, DLP_JPEG_SCALES_ALL, 5},    // 375 * 5/8 = 234
        {300, 300, 224, 224, DLP_JPEG_SCALES_ALL, 6},
        {224, 224, 224, 224, DLP_JPEG_SCALES_ALL, 8},
        {100, 100, 224, 224, DLP_JPEG_SCALES_ALL, 8},    // upscaling: full size
        {2000, 1800, 224, 224, DLP_JPEG_SCALES_ALL, 1},
        {500, 375, 224, 224, 1u << 1 | 1u << 2 | 1u << 4, 8},  // 5/8 not allowed, 4/8 too small
        {1000, 900, 224, 224, 1u << 1 | 1u << 2 | 1u << 4, 2},
        {600, 600, 224, 224, 1u << 1 | 1u << 2 | 1u << 4, 4},
        {600, 600, 224, 224, 0, 8},                      // only full size
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(dlp_jpeg_pick_scale(rows[i].w, rows[i].h, rows[i].ow, rows[i].oh, rows[i].mask), rows[i].want);
}

// Patches the SOF0/SOF2 frame header's height and width.
static void patch_dims(uint8_t *b, size_t n, int w, int h) {
    for (size_t i = 2; i + 9 < n; i++)
        if (b[i] == 0xFF && (b[i + 1] == 0xC0 || b[i + 1] == 0xC2)) {
            b[i + 5] = (uint8_t)(h >> 8);
            b[i + 6] = (uint8_t)h;
            b[i + 7] = (uint8_t)(w >> 8);
            b[i + 8] = (uint8_t)w;
            return;
        }
    fail_msg("no SOF marker");
}

static size_t find_marker(const uint8_t *b, size_t n, uint8_t m) {
    for (size_t i = 2; i + 1 < n; i++)
        if (b[i] == 0xFF && b[i + 1] == m) return i;
    return 0;
}

static void test_bad_inputs(void **state) {
    (void)state;
    const int W = 96, H = 80;
    uint8_t *rgb = make_rgb(W, H, 9);
    uint8_t *good;
    size_t glen;
    encode_kind(&k_kinds[2], rgb, W, H, 90, &good, &glen);
    dlp_jpeg_dec *d;
    assert_int_equal(dlp_jpeg_dec_create(&d), DLP_OK);
    uint8_t *b = malloc(glen + 64);

    struct { const char *name; dlp_bad_kind want; } cases[] = {
        {"zero bytes", DLP_BAD_EMPTY},           {"PNG signature", DLP_BAD_NOT_JPEG},
        {"text", DLP_BAD_NOT_JPEG},              {"truncated at 60%", DLP_BAD_TRUNCATED},
        {"truncated in the header", DLP_BAD_TRUNCATED},
        {"corrupt DHT marker", DLP_BAD_CORRUPT}, {"bogus marker length", DLP_BAD_CORRUPT},
        {"65000x65000 header", DLP_BAD_TOO_LARGE}, {"0x0 header", DLP_BAD_CORRUPT},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        size_t n = glen;
        memcpy(b, good, glen);
        switch (ci) {
        case 0: n = 0; break;
        case 1: memcpy(b, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16); n = 64; break;
        case 2: memcpy(b, "<html>not an image</html>\n", 26); n = 26; break;
        case 3: n = glen * 6 / 10; break;
        case 4: n = find_marker(b, glen, 0xDA) - 10; break;
        case 5: { size_t p = find_marker(b, glen, 0xC4); b[p + 1] = 0x02; break; }  // DHT -> reserved marker
        case 6: { size_t p = find_marker(b, glen, 0xDB); b[p + 2] = 0x00; b[p + 3] = 0x01; break; }  // DQT length 1
        case 7: patch_dims(b, n, 65000, 65000); break;
        case 8: patch_dims(b, n, 0, 0); break;
        }
        dlp_jpeg_info info;
        dlp_status st = dlp_jpeg_open(d, b, n, &info);
        if (st == DLP_OK) {  // some damage is only found while decoding
            dlp_jpeg_rgb img;
            st = dlp_jpeg_decode_region(d, 8, 0, 0, W, H, &img);
        }
        dlp_jpeg_close(d);
        if (st != DLP_ERR_FORMAT) fail_msg("%s: status %d, want DLP_ERR_FORMAT", cases[ci].name, (int)st);
        if (dlp_jpeg_bad(d) != cases[ci].want)
            fail_msg("%s: kind %s, want %s (%s)", cases[ci].name, dlp_bad_kind_name(dlp_jpeg_bad(d)),
                     dlp_bad_kind_name(cases[ci].want), dlp_err_msg());
        assert_true(strlen(dlp_err_msg()) > 5);
    }
    // Corrupt entropy-coded data: any outcome but a crash; and the decoder is usable afterwards.
    dlp_rng r;
    dlp_rng_init(&r, 5, 5);
    size_t sos = find_marker(good, glen, 0xDA);
    for (int t = 0; t < 50; t++) {
        memcpy(b, good, glen);
        for (int k = 0; k < 4; k++) b[sos + 20 + dlp_rng_below(&r, glen - sos - 30)] = (uint8_t)dlp_rng_below(&r, 256);
        dlp_jpeg_info info;
        dlp_status st = dlp_jpeg_open(d, b, glen, &info);
        if (st == DLP_OK) {
            dlp_jpeg_rgb img;
            st = dlp_jpeg_decode_region(d, 1 + t % 8, 0, 0, W, H, &img);
        }
        dlp_jpeg_close(d);
        assert_true(st == DLP_OK || st == DLP_ERR_FORMAT);
    }
    dlp_jpeg_info info;
    assert_int_equal(dlp_jpeg_open(d, good, glen, &info), DLP_OK);
    dlp_jpeg_rgb img;
    assert_int_equal(dlp_jpeg_decode_region(d, 8, 0, 0, W, H, &img), DLP_OK);
    dlp_jpeg_close(d);
    // Limits are configurable.
    dlp_jpeg_limits lim = {64, 0};
    dlp_jpeg_dec_set_limits(d, &lim);
    assert_int_equal(dlp_jpeg_open(d, good, glen, &info), DLP_ERR_FORMAT);
    assert_int_equal(dlp_jpeg_bad(d), DLP_BAD_TOO_LARGE);
    // Trailing bytes after the end marker are fine (many real files have them).
    memcpy(b, good, glen);
    memset(b + glen, 0, 64);
    lim.max_side = 16384;
    dlp_jpeg_dec_set_limits(d, &lim);
    assert_int_equal(dlp_jpeg_open(d, b, glen + 64, &info), DLP_OK);
    dlp_jpeg_close(d);
    const char *what;
    assert_int_equal(dlp_jpeg_sniff(good, glen, &what), DLP_BAD_NONE);
    assert_string_equal(dlp_bad_kind_name(DLP_BAD_NOT_JPEG), "not_jpeg");
    free(b);
    free(good);
    free(rgb);
    dlp_jpeg_dec_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_and_regions),
        cmocka_unit_test(test_pick_scale),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
