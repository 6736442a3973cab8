// data/dataset: the samples (path, label) of an image-classification dataset — an ImageFolder tree
// (<dir>/<class>/**/<file>, classes and files sorted exactly like torchvision's ImageFolder, so sample i is the same
// file in both) or a list file ("path label" per line) — and each epoch's order: a permutation from (seed, epoch),
// then the shard of one rank.
// Sharding policy: rank r of w takes positions r, r+w, r+2w, ... of the epoch's permutation (DistributedSampler's
// stride) WITHOUT padding: every sample is seen exactly once per epoch across ranks, and shard sizes differ by at
// most one (ranks below n % w get the extra sample). dlp_shard_batches gives the per-rank batch count; with
// drop_last it is the same on every rank (the lock-step count data-parallel training needs).
// Defines: dlp_dataset, dlp_dataset_open, dlp_dataset_open_folder, dlp_dataset_open_list, dlp_dataset_free,
//          dlp_dataset_path, dlp_shard_size, dlp_shard_batches, dlp_epoch_order, dlp_dataset_drop_cache.
#ifndef DLP_DATA_DATASET_H
#define DLP_DATA_DATASET_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_dataset {
    char *root;           // directory the sample paths are relative to
    int64_t n;            // samples
    int nclasses;
    char **class_names;   // (nclasses): folder names (wnids) in label order, or "0", "1", ... for a list file
    int32_t *labels;      // (n)
    int64_t *path_off;    // (n) offsets into pool
    char *pool;           // NUL-terminated relative paths
    size_t pool_len, pool_cap;
    int64_t cap;          // allocated samples
} dlp_dataset;

// path: a directory (ImageFolder) or a regular file (list file). Errors name the path: missing, unreadable,
// not a dataset, no images.
dlp_status dlp_dataset_open(const char *path, dlp_dataset **out);
dlp_status dlp_dataset_open_folder(const char *dir, dlp_dataset **out);
// "path label" lines (label: integer >= 0, the last field; the path may contain spaces; '#' starts a comment).
// Relative paths are relative to the list file's directory.
dlp_status dlp_dataset_open_list(const char *file, dlp_dataset **out);
void dlp_dataset_free(dlp_dataset *ds);
// Full path of sample i (root/relative); returns the length snprintf would write.
int dlp_dataset_path(const dlp_dataset *ds, int64_t i, char *buf, size_t len);
static inline const char *dlp_dataset_relpath(const dlp_dataset *ds, int64_t i) { return ds->pool + ds->path_off[i]; }

int64_t dlp_shard_size(int64_t n, int rank, int world);
// Batches rank `rank` yields per epoch. drop_last: floor(shard/batch), using the smallest shard when world > 1 so
// every rank yields the same count; otherwise ceil(shard/batch) (the last batch may be short).
int64_t dlp_shard_batches(int64_t n, int rank, int world, int batch, int drop_last);
// Sample indices of this rank's shard for an epoch, in order (dlp_shard_size entries). shuffle 0: natural order.
// The permutation depends only on (n, seed, epoch), so all ranks agree on it.
dlp_status dlp_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int shuffle, int rank, int world, int64_t *out);

// posix_fadvise(DONTNEED) over the files (indices idx[0..count), or all when idx is NULL), so the next reads come
// from storage ("cold"). Pages are dropped only where clean; *dropped counts the files advised.
dlp_status dlp_dataset_drop_cache(const dlp_dataset *ds, const int64_t *idx, int64_t count, int64_t *dropped);

#endif
