// data/transform: one sample from JPEG bytes to a tensor — the crop (torchvision's RandomResizedCrop + horizontal
// flip for training; Resize(shorter side 256) + CenterCrop(224) for validation), the decode window and DCT scale the
// crop allows, and the fused resize/flip/normalize/convert into the caller's memory.
// Defines: dlp_xform_kind, dlp_transform, dlp_transform_defaults, dlp_transform_check, dlp_transform_sample_bytes,
//          dlp_crop, dlp_transform_pick_crop, dlp_sample_info, dlp_transformer, dlp_transformer_create/free/run/config,
//          dlp_transform_jpeg.
#ifndef DLP_DATA_TRANSFORM_H
#define DLP_DATA_TRANSFORM_H
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"
#include "core/tensor.h"
#include "data/jpeg.h"

typedef enum { DLP_XFORM_TRAIN = 0, DLP_XFORM_VAL } dlp_xform_kind;

typedef struct dlp_transform {
    dlp_xform_kind kind;
    int out_w, out_h;          // output (crop) size, default 224x224
    double scale_lo, scale_hi; // RandomResizedCrop: crop area as a fraction of the image (0.08, 1)
    double ratio_lo, ratio_hi; // RandomResizedCrop: crop aspect ratio w/h (3/4, 4/3)
    double flip_p;             // probability of a horizontal flip (train 0.5, val 0)
    int resize_short;          // val: shorter side before the centre crop (>= the crop); 0 = round(min(out) * 256/224)
    float mean[3], std[3];     // of values in [0, 1] (ImageNet's by default)
    dlp_layout layout;         // NCHW (default) or NHWC
    dlp_dtype dtype;           // fp32 (default), bf16, fp16, uint8 (uint8: resized pixels, no normalization)
    unsigned dct_scales;       // DCT scales s/8 the decoder may use (bit s, s = 1..8): the smallest keeping the crop
                               // >= the output is chosen. 0 = the default set; 1u << 8 = always full size
    dlp_jpeg_limits limits;    // 0 fields: the decoder's defaults (16384 a side, 100 Mpixel)
} dlp_transform;

void dlp_transform_defaults(dlp_transform *t, dlp_xform_kind kind);
size_t dlp_transform_sample_bytes(const dlp_transform *t);  // 3 * out_w * out_h * dtype size
dlp_status dlp_transform_check(const dlp_transform *t);     // rejects nonsense (sizes, ranges, std = 0)

// Which part of the image becomes the output.
typedef struct dlp_crop {
    // resized_w == 0 (crop, then resize; RandomResizedCrop): the box [x, x+w) x [y, y+h) in image pixels is cut out
    // and resized to the output size; the filter sees only the box.
    // resized_w > 0 (resize, then crop; Resize + CenterCrop): the image is resized to resized_w x resized_h and the
    // output is the window whose top-left is (x, y) in the resized image (w, h unused).
    int x, y, w, h;
    int resized_w, resized_h;
    int flip;
} dlp_crop;

// torchvision's RandomResizedCrop.get_params (10 tries, then the centre fallback) + flip for TRAIN; the
// Resize + CenterCrop geometry for VAL (rng unused, may be NULL).
void dlp_transform_pick_crop(const dlp_transform *t, int width, int height, dlp_rng *rng, dlp_crop *c);

typedef struct dlp_sample_info {
    int width, height;   // source image
    dlp_jpeg_info jpeg;
    dlp_crop crop;
    int scale_num;       // DCT scale used: scale_num/8
    int dec_w, dec_h;    // pixels decoded (the window, at that scale)
    int64_t decode_ns, augment_ns;
    dlp_bad_kind bad;    // why it failed (when the status is not OK)
} dlp_sample_info;

typedef struct dlp_transformer dlp_transformer;  // per thread: decoder, filter plans, scratch

dlp_status dlp_transformer_create(const dlp_transform *t, dlp_transformer **out);
void dlp_transformer_free(dlp_transformer *x);
const dlp_transform *dlp_transformer_config(const dlp_transformer *x);
// Decodes and transforms one JPEG into dst (dlp_transform_sample_bytes). crop NULL: picked by
// dlp_transform_pick_crop with rng (which may be NULL only for VAL without flips). On bad input returns DLP_ERR_FORMAT and info->bad says why; dst may then hold
// partial output (the loader overwrites it with the replacement sample).
dlp_status dlp_transformer_run(dlp_transformer *x, const uint8_t *jpg, size_t len, const dlp_crop *crop, dlp_rng *rng,
                               void *dst, dlp_sample_info *info);

// One-shot: the transform t (usually VAL) of one in-memory JPEG into dst. For request bodies; a thread that does
// many should keep a dlp_transformer.
dlp_status dlp_transform_jpeg(const dlp_transform *t, const uint8_t *jpg, size_t len, void *dst);

#endif
