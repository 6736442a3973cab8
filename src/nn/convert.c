// nn/convert: NCHW fp32 batches into a plan's input format.
#include "nn/convert.h"

#include <stdlib.h>

dlp_status dlp_batch_convert(const float *x, int n, int c, int h, int w, dlp_layout layout, dlp_dtype type, void **out) {
    *out = NULL;
    if (type == DLP_DTYPE_U8) return DLP_ERR(DLP_ERR_UNSUPPORTED, "no conversion of fp32 images to %s", dlp_dtype_name(type));
    const int64_t hw = (int64_t)h * w, per = hw * c;
    void *conv = malloc((size_t)(n * per) * dlp_dtype_size(type));
    if (!conv) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++) {
                float v = x[i * per + ch * hw + j];
                int64_t at = layout == DLP_LAYOUT_NHWC ? i * per + j * c + ch : i * per + ch * hw + j;
                if (type == DLP_DTYPE_F32) ((float *)conv)[at] = v;
                else ((uint16_t *)conv)[at] = type == DLP_DTYPE_BF16 ? dlp_f32_to_bf16(v) : dlp_f32_to_f16(v);
            }
    *out = conv;
    return DLP_OK;
}
