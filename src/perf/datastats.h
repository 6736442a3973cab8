// perf/datastats: the statistics the model needs from a real dataset — image count, JPEG sizes in bytes and
// pixels, share of progressive files — read from file headers (libjpeg) over a deterministic sample.
// Defines: dlp_dataset_scan.
#ifndef DLP_PERF_DATASTATS_H
#define DLP_PERF_DATASTATS_H
#include "core/status.h"
#include "hw/profile.h"

// Scans dir (dir/train if it exists) for *.jpeg/*.jpg files up to 3 levels deep, in sorted order; reads the
// headers of up to max_samples (0: 2000) evenly spaced files. Unreadable files are skipped and counted in
// *skipped. Sizes are grouped into at most DLP_DATASET_MAX_SIZES buckets.
dlp_status dlp_dataset_scan(const char *dir, int max_samples, dlp_dataset_stats *out, int *skipped);

#endif
