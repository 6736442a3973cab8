// data/resample: antialiased resizing of an RGB region, fused with flip, normalization and the conversion into the
// consumer's layout and dtype, written straight into a batch slot.
// The filter is Pillow's bilinear (what torchvision's Resize/RandomResizedCrop use on PIL images): a triangle
// whose support grows with the shrink factor, weights normalized and rounded to 22-bit fixed point, a horizontal
// pass then a vertical pass, each rounded to 8 bits. On the same box the 8-bit result is Pillow's, bit for bit
// (tests/py/test_data_torchvision.py); normalized outputs are value*scale + bias from that 8-bit value, which is
// ToTensor + Normalize up to float rounding.
// Defines: dlp_resample_axis, dlp_resample_axis_plan, dlp_resample_axis_free, dlp_pixel_out,
//          dlp_resample_scratch, dlp_resample_scratch_free, dlp_resample_rgb.
#ifndef DLP_DATA_RESAMPLE_H
#define DLP_DATA_RESAMPLE_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

// The weights of one axis. Output sample i (after the flip, if any) reads input samples
// [first[i], first[i] + n[i]) with weights coef[i*taps ...].
typedef struct dlp_resample_axis {
    int out;         // output samples
    int taps;        // coefficients stored per output sample
    int in_lo, in_hi;  // input samples used by any output: [in_lo, in_hi)
    int fixed;         // every output uses exactly `taps` inputs (zero-padded weights)
    int32_t *first;  // (out)
    int32_t *n;      // (out)
    int32_t *coef;   // (out, taps) Q22
    int32_t *coef4;  // fixed only: (out / 4, taps, 4 pixels x 4 lanes) the weights of 4 outputs, each repeated 4x
    size_t cap_out, cap_coef, cap_coef4;  // elements allocated
} dlp_resample_axis;

// Plans an axis in input coordinates: output sample k (0..out-1) is centred at origin + (k0 + k + 0.5) * scale and
// input samples outside [lo, hi) are not used (the weights are renormalized, as Pillow does at image edges).
//   crop then resize (RandomResizedCrop):  origin = crop start, k0 = 0, scale = crop/out, [lo,hi) = the crop;
//   resize then crop (Resize + CenterCrop): origin = 0, k0 = crop offset in the resized image, [lo,hi) = image.
// flip mirrors the output. The axis keeps its memory for the next plan.
dlp_status dlp_resample_axis_plan(dlp_resample_axis *a, double origin, double scale, int k0, int out, int lo, int hi,
                                  int flip);
void dlp_resample_axis_free(dlp_resample_axis *a);

// Where and how the result goes: an image of (h, w) pixels at dst in layout/dtype. Value per channel c is
// u8 * scale[c] + bias[c] for fp32/bf16/fp16 (ToTensor + Normalize: scale = 1/(255 std), bias = -mean/std);
// uint8 output stores the 8-bit resized value itself.
typedef struct dlp_pixel_out {
    void *dst;
    int w, h;
    dlp_layout layout;
    dlp_dtype dtype;
    float scale[3], bias[3];
} dlp_pixel_out;

typedef struct dlp_resample_scratch {
    uint8_t *tmp;     // horizontal pass: (rows, out_w * 3)
    int32_t *acc;     // vertical accumulators: (out_w * 3)
    uint8_t *row;     // one 8-bit output row
    float *sc, *bi;   // per-element scale/bias for one interleaved row
    size_t tmp_cap;   // bytes
    size_t row_cap;   // elements of acc, row, sc, bi
} dlp_resample_scratch;
void dlp_resample_scratch_free(dlp_resample_scratch *s);

// src: interleaved RGB rows (stride bytes) whose first pixel is input sample (off_x, off_y) of the axes'
// coordinates; it must cover [ax->in_lo, ax->in_hi) x [ay->in_lo, ay->in_hi). ax->out, ay->out must equal o->w, o->h.
dlp_status dlp_resample_rgb(const uint8_t *src, int stride, int off_x, int off_y, const dlp_resample_axis *ax,
                            const dlp_resample_axis *ay, dlp_resample_scratch *s, const dlp_pixel_out *o);

#endif
