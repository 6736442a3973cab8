// data/check: one image at a time outside the loader: every file of a dataset decoded (at 1/8 scale) to find the bad
// ones (`dlperf data info --check`), and one JPEG file through the transform into a raw tensor (`dlperf data crop`,
// for comparisons with torchvision).
// Defines: dlp_dataset_check_result, dlp_dataset_check, dlp_transform_file, dlp_sample_info_to_json.
#ifndef DLP_DATA_CHECK_H
#define DLP_DATA_CHECK_H
#include <jansson.h>

#include "data/dataset.h"
#include "data/transform.h"

typedef struct dlp_dataset_check_result {
    int64_t files, bytes, bad;
    int64_t kinds[DLP_BAD_KIND_COUNT];  // bad files by kind
} dlp_dataset_check_result;

// Reads and decodes every file; on_bad (may be NULL) is called for each bad one with its path, kind and the error.
dlp_status dlp_dataset_check(const dlp_dataset *ds,
                             void (*on_bad)(void *ctx, const char *path, dlp_bad_kind kind, const char *why), void *ctx,
                             dlp_dataset_check_result *r);

// The JPEG at path through transform t into *out (malloc'ed, *nbytes): crop NULL picks one with seed; a crop must lie
// in the image (DLP_ERR_INVALID naming it otherwise).
dlp_status dlp_transform_file(const dlp_transform *t, const char *path, const dlp_crop *crop, uint64_t seed, void **out,
                              size_t *nbytes, dlp_sample_info *info);
// What the transform did: source size, crop, DCT scale, decoded and output sizes, element type, layout, bytes.
json_t *dlp_sample_info_to_json(const dlp_sample_info *info, const dlp_transform *t, size_t nbytes);

#endif
