// data/loader: the input pipeline. Worker threads (pthreads, independent of the compute threads) read, decode and
// augment samples straight into a ring of batch slots; the consumer takes batches strictly in order and blocks only
// when the next one is not ready — that wait is the data stall. Bad files are skipped, counted and replaced so
// batches stay full. Each stage is timed per batch and in total; reads can be rate-limited (slow-storage what-if)
// and the dataset can be dropped from the page cache first (cold reads).
//
//   dlp_loader_cfg c;  dlp_loader_cfg_defaults(&c, ds, DLP_XFORM_TRAIN);  c.batch = 256;  c.workers = 8;
//   dlp_loader *l;  dlp_loader_create(&c, &l);
//   for (epoch...) { dlp_loader_start_epoch(l, epoch);
//       dlp_batch *b;  while (dlp_loader_next(l, &b) == DLP_OK && b) { use(b->data, b->labels, b->n);
//                                                                       dlp_loader_release(l, b); } }
//   dlp_loader_free(l);
//
// Defines: dlp_loader_cfg, dlp_loader_cfg_defaults, dlp_batch, dlp_loader_stats, dlp_loader, dlp_loader_create,
//          dlp_loader_free, dlp_loader_start_epoch, dlp_loader_start_epoch_at, dlp_loader_next, dlp_loader_release, dlp_loader_get_stats,
//          dlp_loader_batches_per_epoch, dlp_loader_samples_per_epoch, dlp_loader_stats_to_json.
#ifndef DLP_DATA_LOADER_H
#define DLP_DATA_LOADER_H
#include <jansson.h>
#include <stdint.h>

#include "core/alloc.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/jpeg.h"
#include "data/transform.h"

typedef struct dlp_loader_cfg {
    const dlp_dataset *dataset;   // not owned; must outlive the loader
    int batch;                    // samples per batch (default 32)
    int workers;                  // loader threads (default 1)
    int prefetch;                 // batch slots in the ring (default 2 * workers): filling + ready + held
    dlp_transform transform;      // train or val transform, crop size, layout, dtype, mean/std, DCT scaling
    uint64_t seed;                // shuffle and augmentation randomness
    int64_t epoch;                // epoch used when dlp_loader_next is called before any dlp_loader_start_epoch
    int shuffle;                  // default: 1 for TRAIN, 0 for VAL
    int rank, world;              // shard (default 0 of 1)
    int drop_last;                // default: 1 for TRAIN, 0 for VAL
    const dlp_allocator *alloc;   // batch memory (NULL: host memory); e.g. pinned memory from a GPU backend
    int64_t read_limit_bytes_per_s;  // 0: unlimited; otherwise a token bucket shared by the workers
    int drop_cache;               // drop the shard's files from the page cache when the loader is created
    int64_t max_file_bytes;       // larger files are bad (too_large) without being read; default 64 MiB
    int64_t limit_samples;        // > 0: use only this many samples, spread evenly over the dataset
    int no_lookahead;             // 1: stop at the end of an epoch (default 0: go on into the next epoch's batches)
} dlp_loader_cfg;

void dlp_loader_cfg_defaults(dlp_loader_cfg *c, const dlp_dataset *ds, dlp_xform_kind kind);

typedef struct dlp_batch {
    void *data;           // (n, 3, H, W) for NCHW or (n, H, W, 3) for NHWC, in transform.dtype; from cfg.alloc
    int32_t *labels;      // (n)
    int64_t *indices;     // (n) dataset index of each sample (the replacement's index where a file was bad)
    int n;                // samples: cfg.batch, or fewer in the last batch without drop_last
    int64_t index;        // batch number in the epoch: 0, 1, ...
    int64_t epoch;
    int64_t read_ns, decode_ns, augment_ns;  // summed over the batch's samples (worker time)
    int64_t bytes_read;
    int bad;              // samples whose file was bad and was replaced by the next good one
    int64_t wait_ns;      // how long dlp_loader_next waited for this batch (data stall)
    size_t sample_bytes;  // bytes per sample in data
} dlp_batch;

// The batches delivered (dlp_loader_next), except the bad-file counts (as found) and images_made.
typedef struct dlp_loader_stats {
    int64_t images, batches, bytes_read;
    int64_t images_made;                     // made by the workers: also those made ahead and dropped (a start
                                             // that was not the next epoch), or never asked for
    int64_t read_ns, decode_ns, augment_ns;  // summed worker time per stage
    int64_t throttle_ns;                     // of read_ns: sleeping for the read limit
    int64_t wait_ns;                         // consumer time blocked in dlp_loader_next (data stall)
    int64_t bad;                             // samples replaced because their file was bad
    int64_t bad_by_kind[DLP_BAD_KIND_COUNT]; // distinct bad files, by kind
    int64_t bad_files;                       // distinct bad files seen
    int64_t dct_scale_count[9];              // decodes per DCT scale s/8, s = 1..8
    int64_t decoded_pixels, source_pixels;   // pixels libjpeg produced vs full-size pixels of those images
    int64_t dropped_files;                   // files advised out of the page cache
} dlp_loader_stats;

typedef struct dlp_loader dlp_loader;

dlp_status dlp_loader_create(const dlp_loader_cfg *cfg, dlp_loader **out);
// Stops the workers and frees the slots (batches still held become invalid).
void dlp_loader_free(dlp_loader *l);
// Begins an epoch: the order is the permutation of (seed, epoch), this rank's shard. Every batch of the previous
// epoch must have been released (DLP_ERR_BUSY otherwise). The epoch right after one the consumer took every batch
// of keeps the batches the workers already made of it (they go on into the next epoch when the current one is all
// claimed); any other start discards unfinished work.
dlp_status dlp_loader_start_epoch(dlp_loader *l, int64_t epoch);
// The same epoch, starting at batch first_batch (0..batches_per_epoch): the batches delivered are exactly batches
// first_batch, first_batch + 1, ... of dlp_loader_start_epoch(l, epoch) — same samples, same augmentation (it
// depends on (seed, epoch, position) only) — without producing the ones skipped. For resuming mid-epoch.
dlp_status dlp_loader_start_epoch_at(dlp_loader *l, int64_t epoch, int64_t first_batch);
// The next batch in order, blocking until it is ready; *out = NULL at the end of the epoch. Fails if every file is
// bad (DLP_ERR_FORMAT), or with DLP_ERR_BUSY if the consumer holds every slot (release one first).
dlp_status dlp_loader_next(dlp_loader *l, dlp_batch **out);
// Returns a batch's slot to the workers. Batches may be released in any order.
void dlp_loader_release(dlp_loader *l, dlp_batch *b);
void dlp_loader_get_stats(dlp_loader *l, dlp_loader_stats *s);
int64_t dlp_loader_batches_per_epoch(const dlp_loader *l);
int64_t dlp_loader_samples_per_epoch(const dlp_loader *l);
// {"images":..., "bytes_read":..., "ms_per_image": {"read":..., ...}, "bad": {...}, ...}
json_t *dlp_loader_stats_to_json(const dlp_loader_stats *s);

#endif
