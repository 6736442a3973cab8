// loadgen/kserve: the KServe v2 / Triton inference protocol's bodies, private to loadgen/ (the HTTP SUT reads
// the answers; the sample library builds the requests).
// Defines: dlp_lg_kserve_body, dlp_lg_kserve_top1.
#ifndef DLP_LOADGEN_KSERVE_H
#define DLP_LOADGEN_KSERVE_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// KServe v2 / Triton request bodies for one preprocessed image: a (1, 3, h, w) FP32 tensor named input_name, as
// JSON ("data": [...], every float exact) or with the binary-data extension (a JSON header, then the raw little-endian
// floats; *header_len is its length, for the Inference-Header-Content-Length header). Output asked as JSON.
dlp_status dlp_lg_kserve_body(const float *chw, int h, int w, const char *input_name, int binary, char **body,
                              size_t *len, size_t *header_len);
// The argmax of outputs[0].data in a KServe v2 JSON response, or -1.
int32_t dlp_lg_kserve_top1(const char *body, size_t len);

#endif
