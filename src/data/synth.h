// data/synth: the embedded synthetic ImageNet. Writes train/<wnid>/*.JPEG and val/<wnid>/*.JPEG that look like
// ImageNet to a decoder (sizes around 500x375 — landscape, portrait, square, a few over 1000 px —, quality 90-96,
// 4:2:0 / 4:4:4 / a few 4:2:2, 2 % grayscale and 2 % progressive files, ~110 KB on average) with natural-image-like
// 1/f content, and classes a small ResNet learns easily: each class is a colour palette plus a stripe orientation
// and frequency that hold over the whole image, so every random crop shows them.
// Deterministic from the seed: image k's randomness is its own stream, so the files are the same byte for byte
// whatever the number of threads.
// Defines: dlp_synth_params, dlp_synth_defaults, dlp_synth_parse_size, dlp_synth_parse_spec, dlp_synth_hash,
//          dlp_synth_report, dlp_synth_generate, dlp_synth_ensure, dlp_synth_wnid, dlp_synth_render,
//          DLP_SYNTH_VERSION.
#ifndef DLP_DATA_SYNTH_H
#define DLP_DATA_SYNTH_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DLP_SYNTH_VERSION 3  // bump when the generator's output changes (it is part of the cache key)

typedef struct dlp_synth_params {
    int classes;          // default 10
    int per_class;        // train images per class (default 260)
    int val_per_class;    // validation images per class (default 50)
    int size_min, size_max;  // shorter side range in pixels; 0, 0 = the ImageNet-like size distribution
    uint64_t seed;        // default 0
    int workers;          // generation threads (0: online CPUs); does not change the output
} dlp_synth_params;

void dlp_synth_defaults(dlp_synth_params *p);
// "imagenet" (the default distribution) or "MIN-MAX" / "N" (shorter side in pixels, 8..4096).
dlp_status dlp_synth_parse_size(const char *s, dlp_synth_params *p);
// "synthetic" or "synthetic:classes=10,per-class=50,val-per-class=10,size=64-112,seed=1" over defaults.
dlp_status dlp_synth_parse_spec(const char *spec, dlp_synth_params *p);
uint64_t dlp_synth_hash(const dlp_synth_params *p);  // identity of the dataset (not the worker count)
void dlp_synth_wnid(int cls, char *buf, size_t len);  // "n01440764"-style synthetic WordNet ids, increasing

typedef struct dlp_synth_report {
    int64_t images, bytes;
    int64_t gray, progressive, sub444, sub422, sub420;
    int64_t over_1000px;
    double seconds;
} dlp_synth_report;

// Writes the dataset into out_dir, which must not exist: everything goes to a temporary directory beside it that is
// renamed when complete, so a crash or a concurrent run never leaves half a dataset under that name.
dlp_status dlp_synth_generate(const dlp_synth_params *p, const char *out_dir, dlp_synth_report *rep);
// The cached dataset for p: dlp_cache_dir()/synthetic-<hash>/, generated on first use (and logged).
dlp_status dlp_synth_ensure(const dlp_synth_params *p, char *dir, size_t len);

// One image of the dataset as RGB (for tests): split 0 = train, 1 = val. *rgb is malloc'ed (h, w, 3).
dlp_status dlp_synth_render(const dlp_synth_params *p, int split, int cls, int idx, uint8_t **rgb, int *w, int *h);

#endif
