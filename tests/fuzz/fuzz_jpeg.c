// tests/fuzz/fuzz_jpeg: JPEG files of a dataset (and request bodies) — data/jpeg's sniff, open (signature, end
// marker, header, limits), region decode at a DCT scale, and data/transform's whole sample path (crop, DCT scale
// pick, fused resize/flip/normalize/convert). Input: 8 parameter bytes, then the JPEG:
//   p[0] bit 0 train/val, bit 1 NHWC, bits 2-3 output dtype, bits 4-7 output size 8 + 4*n
//   p[1] the DCT scales the transform may use (bit s-1 -> scale s/8; 0: the default set)
//   p[2] the region decode's scale_num (1 + p[2] % 16)
//   p[3..6] the region (x0, y0, x1, y1) as fractions of the scaled image, reaching 8 px outside it; also the
//           explicit crop box inside the image when p[7] bit 0 is set
//   p[7] bit 0 explicit crop (else the transform's own pick with an rng seeded from p), bit 1 flip
// Decoding is limited to 2048 px a side and 1 Mpixel so that each input stays fast.
#include <string.h>

#include "data/jpeg.h"
#include "data/transform.h"
#include "fuzz.h"

static int frac(uint8_t b, int n, int pad) { return -pad + (int)((int64_t)b * (n + 2 * pad) / 255); }

int dlp_fuzz_jpeg(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    const uint8_t *p = data;
    const uint8_t *jpg = data + 8;
    size_t len = size - 8;
    const char *what = NULL;
    dlp_bad_kind sniff = dlp_jpeg_sniff(jpg, len, &what);
    DLP_FUZZ_CHECK(sniff >= DLP_BAD_NONE && sniff < DLP_BAD_KIND_COUNT);
    dlp_jpeg_limits lim = {2048, (int64_t)1 << 20};

    // 1. The decoder on its own: open + one region.
    dlp_jpeg_dec *d = NULL;
    DLP_FUZZ_CHECK(dlp_jpeg_dec_create(&d) == DLP_OK);
    dlp_jpeg_dec_set_limits(d, &lim);
    dlp_jpeg_info info;
    int ok = dlp_jpeg_open(d, jpg, len, &info) == DLP_OK;
    if (!ok) {
        DLP_FUZZ_CHECK(dlp_jpeg_bad(d) != DLP_BAD_NONE);
        dlp_jpeg_close(d);
        dlp_jpeg_dec_free(d);
        return 0;
    }
    DLP_FUZZ_CHECK(info.width >= 1 && info.height >= 1 && info.width <= lim.max_side && info.height <= lim.max_side);
    DLP_FUZZ_CHECK((int64_t)info.width * info.height <= lim.max_pixels);
    int s = 1 + p[2] % 16;
    int sw = dlp_jpeg_scaled_size(info.width, s), sh = dlp_jpeg_scaled_size(info.height, s);
    int x0 = frac(p[3], sw, 8), y0 = frac(p[4], sh, 8), x1 = frac(p[5], sw, 8), y1 = frac(p[6], sh, 8);
    dlp_jpeg_rgb rgb;
    if (dlp_jpeg_decode_region(d, s, x0, y0, x1, y1, &rgb) == DLP_OK) {
        DLP_FUZZ_CHECK(rgb.scale_num == s && rgb.scaled_w == sw && rgb.scaled_h == sh);
        DLP_FUZZ_CHECK(rgb.w >= 0 && rgb.h >= 0 && rgb.x0 >= 0 && rgb.y0 >= 0);
        DLP_FUZZ_CHECK(rgb.x0 + rgb.w <= sw && rgb.y0 + rgb.h <= sh && rgb.stride >= 3 * rgb.w);
        unsigned sum = 0;  // every pixel promised is readable (ASan) and initialised (the sum is used)
        for (int y = 0; y < rgb.h; y++)
            for (int x = 0; x < 3 * rgb.w; x++) sum += rgb.px[(size_t)y * rgb.stride + x];
        DLP_FUZZ_CHECK(sum != 0xFFFFFFFFu || rgb.w > 0);
    }
    dlp_jpeg_close(d);
    dlp_jpeg_dec_free(d);

    // 2. The whole sample transform.
    dlp_transform t;
    dlp_transform_defaults(&t, (p[0] & 1) ? DLP_XFORM_VAL : DLP_XFORM_TRAIN);
    t.layout = (p[0] & 2) ? DLP_LAYOUT_NHWC : DLP_LAYOUT_NCHW;
    t.dtype = (dlp_dtype)((p[0] >> 2) & 3);
    t.out_w = t.out_h = 8 + 4 * (p[0] >> 4);
    t.resize_short = 0;
    t.dct_scales = (unsigned)p[1] << 1;
    t.limits = lim;
    if (t.kind == DLP_XFORM_VAL) t.flip_p = 0;
    DLP_FUZZ_CHECK(dlp_transform_check(&t) == DLP_OK);
    dlp_transformer *x = NULL;
    DLP_FUZZ_CHECK(dlp_transformer_create(&t, &x) == DLP_OK);
    void *dst = malloc(dlp_transform_sample_bytes(&t));
    DLP_FUZZ_CHECK(dst != NULL);
    dlp_crop c, *cp = NULL;
    dlp_rng rng;
    uint64_t seed = 0;
    memcpy(&seed, p, 8);
    dlp_rng_init(&rng, seed, 7);
    if ((p[7] & 1) && t.kind == DLP_XFORM_TRAIN) {
        memset(&c, 0, sizeof c);
        c.x = (int)((int64_t)p[3] * (info.width - 1) / 255);
        c.y = (int)((int64_t)p[4] * (info.height - 1) / 255);
        c.w = 1 + (int)((int64_t)p[5] * (info.width - c.x - 1) / 255);
        c.h = 1 + (int)((int64_t)p[6] * (info.height - c.y - 1) / 255);
        c.flip = (p[7] >> 1) & 1;
        cp = &c;
    }
    dlp_sample_info si;
    dlp_status st = dlp_transformer_run(x, jpg, len, cp, &rng, dst, &si);
    if (st == DLP_OK) {
        DLP_FUZZ_CHECK(si.bad == DLP_BAD_NONE && si.width == info.width && si.height == info.height);
        DLP_FUZZ_CHECK(si.scale_num >= 1 && si.scale_num <= 8);
        if (si.crop.resized_w == 0) {
            DLP_FUZZ_CHECK(si.crop.w >= 1 && si.crop.h >= 1 && si.crop.x >= 0 && si.crop.y >= 0);
            DLP_FUZZ_CHECK(si.crop.x + si.crop.w <= info.width && si.crop.y + si.crop.h <= info.height);
        }
    } else {
        DLP_FUZZ_CHECK(st == DLP_ERR_FORMAT && si.bad != DLP_BAD_NONE);
    }
    free(dst);
    dlp_transformer_free(x);
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_jpeg)
