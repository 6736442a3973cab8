// perf/datastats: the statistics the model needs from a real dataset — image count, JPEG sizes in bytes and
// pixels, share of progressive files — read from file headers (libjpeg) over a deterministic sample.
// Defines: dlp_file_stat, dlp_dataset_stats_from_files, dlp_dataset_stats_of, dlp_dataset_scan.
#ifndef DLP_PERF_DATASTATS_H
#define DLP_PERF_DATASTATS_H
#include <stdint.h>

#include "core/status.h"
#include "data/dataset.h"
#include "hw/profile.h"

typedef struct dlp_file_stat {
    int w, h;           // pixels
    int64_t bytes;      // file size
    int progressive;
} dlp_file_stat;

// Statistics of n files standing for a dataset of `images` images. Sizes are grouped into at most
// DLP_DATASET_MAX_SIZES buckets (exact sizes when there are few enough).
dlp_status dlp_dataset_stats_from_files(const dlp_file_stat *f, int n, int64_t images, const char *name,
                                        dlp_dataset_stats *out);
// The samples a loader over ds uses (all, or with limit_samples > 0 the loader's evenly spaced subset): headers of
// up to max_samples (0: 2000) of them, evenly spaced. Unreadable files are skipped and counted in *skipped. A few
// large files can carry a third of a dataset's bytes (ImageNet's and the synthetic set's >1000 px images): read all
// the headers when the mean bytes matter to a percent.
dlp_status dlp_dataset_stats_of(const dlp_dataset *ds, int64_t limit_samples, int max_samples, dlp_dataset_stats *out,
                                int *skipped);
// Scans dir (dir/train if it exists) for *.jpeg/*.jpg files up to 3 levels deep, in sorted order; reads the
// headers of up to max_samples (0: 2000) evenly spaced files. Unreadable files are skipped and counted in
// *skipped.
dlp_status dlp_dataset_scan(const char *dir, int max_samples, dlp_dataset_stats *out, int *skipped);

#endif
