// nn/convert: a batch of NCHW fp32 images in the layout and element type a plan's input takes.
// Defines: dlp_batch_convert.
#ifndef DLP_NN_CONVERT_H
#define DLP_NN_CONVERT_H
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

// x: (n, c, h, w) fp32 -> *out (malloc'ed; the caller frees it): NCHW or NHWC in fp32, bf16 or fp16 (rounded to
// nearest even). DLP_ERR_UNSUPPORTED for uint8 (images are not quantized here), DLP_ERR_NOMEM.
dlp_status dlp_batch_convert(const float *x, int n, int c, int h, int w, dlp_layout layout, dlp_dtype type, void **out);

#endif
