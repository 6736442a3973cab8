// loadgen/images: the HTTP SUT's sample library — JPEG files loaded into memory before the run (as MLPerf loads
// its performance samples), optionally with ImageNet's val_map.txt labels, and optionally turned into KServe v2
// request bodies (the preprocessed tensor in place of the JPEG).
// Defines: dlp_lg_images, dlp_lg_images_load, dlp_lg_images_to_kserve, dlp_lg_images_free.
#ifndef DLP_LOADGEN_IMAGES_H
#define DLP_LOADGEN_IMAGES_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_lg_images {
    char **paths;
    void **bodies;    // (n) the request bodies: the files' bytes, or KServe requests
    size_t *lens;
    int32_t *labels;  // (n) from the labels file, else NULL
    int n;
} dlp_lg_images;

// path: one JPEG file, or a directory searched for *.jpg / *.jpeg (sorted); the first `max` are loaded. labels:
// NULL, or ImageNet's val_map.txt ("relative/path label" a line): the library is those files of the directory in
// that order, so qsl_idx i is line i (what MLPerf's accuracy-imagenet.py assumes).
dlp_status dlp_lg_images_load(const char *path, const char *labels, int max, dlp_lg_images *s);
// Each image preprocessed (Resize + CenterCrop to size, ImageNet's normalization, FP32 NCHW) and made a KServe v2
// request body (JSON, or binary with *header_len the JSON header's length) in place of the JPEG.
dlp_status dlp_lg_images_to_kserve(dlp_lg_images *s, int size, const char *input_name, int binary, size_t *header_len);
void dlp_lg_images_free(dlp_lg_images *s);

#endif
