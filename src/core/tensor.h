// core/tensor: element types and layouts shared by the loader (which writes batches) and the backends (which
// read them), with scalar conversions to and from bf16/fp16.
// Defines: dlp_dtype, dlp_layout, dlp_dtype_size, dlp_dtype_name, dlp_f32_to_bf16, dlp_bf16_to_f32,
//          dlp_f32_to_f16, dlp_f16_to_f32.
#ifndef DLP_CORE_TENSOR_H
#define DLP_CORE_TENSOR_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// DLP_DTYPE_I8: int8 inference (cpu): weights s8 per output channel, activations u8/s8 with calibrated scales
// (nn/quant); never a batch's element type.
typedef enum { DLP_DTYPE_F32 = 0, DLP_DTYPE_BF16, DLP_DTYPE_F16, DLP_DTYPE_U8, DLP_DTYPE_I8, DLP_DTYPE_COUNT } dlp_dtype;
typedef enum { DLP_LAYOUT_NCHW = 0, DLP_LAYOUT_NHWC } dlp_layout;

static inline size_t dlp_dtype_size(dlp_dtype t) {
    return t == DLP_DTYPE_F32 ? 4 : t == DLP_DTYPE_U8 || t == DLP_DTYPE_I8 ? 1 : 2;
}
static inline const char *dlp_dtype_name(dlp_dtype t) {
    static const char *const n[] = {"fp32", "bf16", "fp16", "uint8", "int8"};
    return (unsigned)t < DLP_DTYPE_COUNT ? n[t] : "?";
}
static inline const char *dlp_layout_name(dlp_layout l) { return l == DLP_LAYOUT_NHWC ? "NHWC" : "NCHW"; }

// Round-to-nearest-even; NaN stays NaN.
static inline uint16_t dlp_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float dlp_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t dlp_f32_to_f16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static inline float dlp_f16_to_f32(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

#endif
