// perf/imgwork: the expected work of preparing one image — bytes read, bytes entropy-decoded, pixels the IDCT
// produces, pixels resized, pixels written — for a dataset's size distribution, a transform (torchvision's
// RandomResizedCrop or resize + center crop) and a decoder's strategy (crop window, DCT scaling). Expectations
// are taken over the crop sampler with a fixed seed (deterministic).
// Defines: dlp_img_transform, dlp_img_transform_init, dlp_image_work, dlp_image_work_expect, dlp_dct_scale.
#ifndef DLP_PERF_IMGWORK_H
#define DLP_PERF_IMGWORK_H
#include <stdint.h>

#include "core/status.h"
#include "hw/profile.h"

typedef struct dlp_img_transform {
    int train;              // 1: RandomResizedCrop(size, scale, ratio) + flip; 0: resize shorter side, center crop
    int size;               // output height = width
    double scale_min, scale_max;  // RandomResizedCrop area range (0.08, 1)
    double ratio_min, ratio_max;  // aspect ratio range (3/4, 4/3)
    int resize_short;       // validation: shorter side before the crop (0: round(size * 256 / 224))
    int mcu;                // JPEG iMCU width in source pixels the crop window's left edge aligns to (16: 4:2:0)
} dlp_img_transform;

void dlp_img_transform_init(dlp_img_transform *t, int train, int size);  // torchvision's defaults

typedef struct dlp_image_work {
    double bytes;            // file bytes read
    double entropy_bytes;    // compressed bytes entropy-decoded (up to the window's last row; all if progressive)
    double decoded_pixels;   // pixels the IDCT produces (window, or whole image, at the chosen DCT scale)
    double resize_pixels;    // pixels the resize reads (the crop at the chosen scale)
    double out_pixels;       // size x size
    double mean_dct_scale;   // mean M/8
    double mean_crop_area;   // mean crop area / image area
} dlp_image_work;

// The DCT scale M (1..8, meaning M/8) a decoder with DCT scaling picks for a crop of cw x ch to reach `size`:
// the smallest M allowed by mask (bit M; 0: all) with cw x M/8 >= size and ch x M/8 >= size (the data module's
// rule); 8 if none is.
int dlp_dct_scale(int cw, int ch, int size, unsigned mask);

// Expected work per image over `samples` crops per size (0: 4096) drawn from the seeded sampler.
dlp_status dlp_image_work_expect(const dlp_dataset_stats *s, const dlp_pipeline_profile *p, const dlp_img_transform *t,
                                 uint64_t seed, int samples, dlp_image_work *out);

#endif
