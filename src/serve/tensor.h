// serve/tensor: an input tensor sent by a client (KServe v2 /infer: FP32, BF16 or UINT8, NCHW or NHWC) converted
// into the engine's sample format — what the JPEG preprocessing would have written — so tensors and JPEGs share
// one pipeline and one batcher.
// Defines: dlp_serve_tensor, dlp_serve_tensor_check, dlp_serve_tensor_convert.
#ifndef DLP_SERVE_TENSOR_H
#define DLP_SERVE_TENSOR_H
#include <stddef.h>

#include "core/tensor.h"
#include "serve/serve.h"

typedef struct dlp_serve_tensor {
    dlp_dtype dtype;    // F32 / BF16: already normalized (mean/std, as the val transform writes); U8: pixels 0..255,
                        // normalized here with the val transform's mean and std
    dlp_layout layout;  // of one (c, h, w) sample
    int c, h, w;
} dlp_serve_tensor;

// 0 when t fits fmt (the same c, h, w; a dtype that converts), else 400 with a message naming the mismatch in err.
int dlp_serve_tensor_check(const dlp_serve_tensor *t, const dlp_serve_preprocess *fmt, char *err, size_t errlen);
// src: c*h*w elements of t (any alignment, little-endian); dst: one sample of fmt. t must have passed the check.
void dlp_serve_tensor_convert(const dlp_serve_tensor *t, const void *src, const dlp_serve_preprocess *fmt, void *dst);

#endif
