// serve/tensor: client tensors into the engine's sample format (see tensor.h).
#include "serve/tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "data/transform.h"

int dlp_serve_tensor_check(const dlp_serve_tensor *t, const dlp_serve_preprocess *fmt, char *err, size_t errlen) {
    if (!fmt || fmt->channels <= 0) {
        snprintf(err, errlen, "this model takes JPEGs only (a BYTES input): its input format is not described");
        return 400;
    }
    if (t->c != fmt->channels || t->h != fmt->height || t->w != fmt->width) {
        snprintf(err, errlen, "tensor of %d channels, %dx%d: the model takes %d channels of %dx%d (shape [1,%d,%d,%d] "
                 "NCHW or [1,%d,%d,%d] NHWC)", t->c, t->h, t->w, fmt->channels, fmt->height, fmt->width, fmt->channels,
                 fmt->height, fmt->width, fmt->height, fmt->width, fmt->channels);
        return 400;
    }
    if (fmt->dtype == DLP_DTYPE_U8 && t->dtype != DLP_DTYPE_U8) {
        snprintf(err, errlen, "this model takes UINT8 pixels; a %s tensor cannot be converted to them",
                 t->dtype == DLP_DTYPE_BF16 ? "BF16" : "FP32");
        return 400;
    }
    if (t->dtype != DLP_DTYPE_F32 && t->dtype != DLP_DTYPE_BF16 && t->dtype != DLP_DTYPE_U8) {
        snprintf(err, errlen, "tensor datatype %s: use FP32, BF16 or UINT8", dlp_dtype_name(t->dtype));
        return 400;
    }
    return 0;
}

static float load(const uint8_t *src, dlp_dtype dt, size_t i, const float *scale, const float *bias, int ch) {
    if (dt == DLP_DTYPE_U8) return (float)src[i] * scale[ch] + bias[ch];
    if (dt == DLP_DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        return dlp_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, src + 4 * i, 4);
    return f;
}

static void store(uint8_t *dst, dlp_dtype dt, size_t i, float v) {
    if (dt == DLP_DTYPE_F32) {
        memcpy(dst + 4 * i, &v, 4);
    } else {
        uint16_t h = dt == DLP_DTYPE_BF16 ? dlp_f32_to_bf16(v) : dlp_f32_to_f16(v);
        memcpy(dst + 2 * i, &h, 2);
    }
}

void dlp_serve_tensor_convert(const dlp_serve_tensor *t, const void *src, const dlp_serve_preprocess *fmt, void *dst) {
    const size_t hw = (size_t)t->h * (size_t)t->w, c = (size_t)t->c, n = c * hw;
    const dlp_dtype out = (dlp_dtype)fmt->dtype;
    const int same_layout = (int)t->layout == fmt->layout;
    if (out == DLP_DTYPE_U8) {  // pixels to pixels (the check allows only UINT8 in)
        const uint8_t *s = src;
        uint8_t *d = dst;
        if (same_layout) memcpy(d, s, n);
        else if (t->layout == DLP_LAYOUT_NCHW)
            for (size_t ch = 0; ch < c; ch++)
                for (size_t p = 0; p < hw; p++) d[p * c + ch] = s[ch * hw + p];
        else
            for (size_t ch = 0; ch < c; ch++)
                for (size_t p = 0; p < hw; p++) d[ch * hw + p] = s[p * c + ch];
        return;
    }
    if (same_layout && t->dtype == out) {
        memcpy(dst, src, n * dlp_dtype_size(out));
        return;
    }
    // UINT8 pixels are normalized as the val transform does: (x / 255 - mean) / std.
    dlp_transform v;
    dlp_transform_defaults(&v, DLP_XFORM_VAL);
    float scale[4] = {1, 1, 1, 1}, bias[4] = {0, 0, 0, 0};
    for (int ch = 0; ch < 3; ch++) {
        scale[ch] = 1.0f / (255.0f * v.std[ch]);
        bias[ch] = -v.mean[ch] / v.std[ch];
    }
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (size_t ch = 0; ch < c; ch++) {
        const int k = ch < 3 ? (int)ch : 3;
        for (size_t p = 0; p < hw; p++) {
            size_t si = t->layout == DLP_LAYOUT_NCHW ? ch * hw + p : p * c + ch;
            size_t di = fmt->layout == DLP_LAYOUT_NCHW ? ch * hw + p : p * c + ch;
            store(d, out, di, load(s, t->dtype, si, scale, bias, k));
        }
    }
}
