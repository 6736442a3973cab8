// data/loader: worker threads filling a ring of batch slots, sample by sample, delivered in order.
//
// Work is claimed one sample at a time from a single counter (positions 0..samples_per_epoch-1 of this rank's
// epoch order), so with prefetch 1 all workers still cooperate on the one batch being filled, and with more
// slots they run ahead by up to `prefetch` batches. Sample p goes to batch p / B, slot (p / B) % prefetch; a
// slot takes a new batch only after the consumer released the one before. Everything random about a sample comes
// from (seed, epoch, position), so the output does not depend on the number of workers or on timing.
//
// Epochs follow each other without a gap: once every position of the current epoch is claimed, the workers go on
// with the next epoch's (its order is known: the permutation of (seed, epoch + 1)) into the free slots, so when the
// consumer starts that epoch its first batches are ready, and a small dataset or a pass of a few batches does not
// drain the ring at every epoch end. Batches are numbered in one sequence across epochs (seq): batch b of the
// current epoch is seq_base + b, of the next one seq_base + nbatches + b; slot = seq % nslots. Starting any other
// epoch (or mid-epoch) discards the work done ahead.
#include "data/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/throttle.h"

typedef enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_HELD } slot_state;

typedef struct slot {
    dlp_batch b;
    dlp_loader_stats acc;  // the batch's share of the stats beyond b's own sums, added to them when delivered
    int64_t seq;  // the batch's number in the sequence across epochs
    slot_state state;
    int done;  // samples finished
} slot;

typedef struct worker {
    struct dlp_loader *l;
    pthread_t th;
    int started;
    dlp_transformer *x;
    uint8_t *buf;  // file contents
    size_t cap;
} worker;

struct dlp_loader {
    dlp_loader_cfg cfg;
    const dlp_dataset *ds;
    int64_t *subset;        // (n_used) dataset indices used, or NULL for all
    int64_t n_used;
    int64_t shard_n;        // samples in this rank's shard
    int64_t samples_epoch;  // samples delivered per epoch
    int64_t nbatches;       // batches per epoch
    size_t sample_bytes;
    int64_t *order;         // (shard_n) dataset indices in this epoch's order
    int64_t *order_next;    // (shard_n) the next epoch's, once the workers went on into it (order_next_ok)
    slot *slots;
    int nslots;
    worker *w;
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   // workers: something to claim (or stop)
    pthread_cond_t ready_cv;  // consumer: a batch became ready (or a fatal error)
    pthread_cond_t idle_cv;   // start_epoch: the last in-flight sample finished
    // epoch state, under mu
    int64_t epoch;
    int started, active;
    uint64_t gen;             // bumped by start_epoch; a finishing sample from an older generation is dropped
    int64_t claim_epoch;      // the epoch of the next claim: epoch, or epoch + 1 when working ahead
    int order_next_ok;
    int ordering;             // a worker is making order_next (outside the lock)
    int64_t next_sample;      // next position of claim_epoch to claim
    int64_t seq_base;         // seq of the current epoch's batch 0
    int64_t next_out;         // next batch dlp_loader_next returns
    int inflight;
    int stop;
    dlp_status fatal;
    char fatal_msg[768];
    dlp_loader_stats stats;
    _Atomic uint8_t *bad_mark;  // (dataset n) 0 = not known bad, else 1 + dlp_bad_kind
    dlp_throttle throttle;
};

void dlp_loader_cfg_defaults(dlp_loader_cfg *c, const dlp_dataset *ds, dlp_xform_kind kind) {
    memset(c, 0, sizeof *c);
    c->dataset = ds;
    c->batch = 32;
    c->workers = 1;
    c->prefetch = 0;  // 2 * workers
    dlp_transform_defaults(&c->transform, kind);
    c->seed = 0;
    c->shuffle = kind == DLP_XFORM_TRAIN;
    c->drop_last = kind == DLP_XFORM_TRAIN;
    c->world = 1;
    c->max_file_bytes = 64LL << 20;
}

int64_t dlp_loader_batches_per_epoch(const dlp_loader *l) { return l->nbatches; }
int64_t dlp_loader_samples_per_epoch(const dlp_loader *l) { return l->samples_epoch; }

// Reads a whole file into the worker's buffer. Returns DLP_BAD_NONE or the kind; *why explains. O_NONBLOCK: a FIFO
// or device named *.JPEG must not block the worker (regular files ignore the flag).
static dlp_bad_kind read_file(dlp_loader *l, worker *w, const char *path, size_t *len, int64_t *throttle_ns,
                              char *why, size_t whylen) {
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(why, whylen, "cannot open: %s", strerror(errno));
        return DLP_BAD_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, whylen, "not a regular file");
        return DLP_BAD_IO;
    }
    if (st.st_size == 0) {
        close(fd);
        snprintf(why, whylen, "empty file (0 bytes)");
        return DLP_BAD_EMPTY;
    }
    if (st.st_size > l->cfg.max_file_bytes) {
        close(fd);
        snprintf(why, whylen, "file is %lld bytes, over the %lld-byte limit", (long long)st.st_size,
                 (long long)l->cfg.max_file_bytes);
        return DLP_BAD_TOO_LARGE;
    }
    size_t size = (size_t)st.st_size;
    if (size > w->cap) {
        size_t nc = size + size / 4 + 4096;
        uint8_t *nb = realloc(w->buf, nc);
        if (!nb) {
            close(fd);
            snprintf(why, whylen, "out of memory for %zu bytes", size);
            return DLP_BAD_IO;
        }
        w->buf = nb;
        w->cap = nc;
    }
    *throttle_ns += dlp_throttle_acquire(&l->throttle, (int64_t)size);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, w->buf + got, size - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            snprintf(why, whylen, "read failed: %s", strerror(errno));
            close(fd);
            return DLP_BAD_IO;
        }
        if (r == 0) break;  // shrank while reading
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    if (got == 0) {
        snprintf(why, whylen, "empty file (0 bytes)");
        return DLP_BAD_EMPTY;
    }
    return DLP_BAD_NONE;
}

// Per-sample accounting, added to the slot under the lock.
typedef struct sample_acct {
    int64_t read_ns, decode_ns, augment_ns, throttle_ns, bytes;
    int bad;                                  // the sample's own file was bad
    int64_t new_bad[DLP_BAD_KIND_COUNT];      // files found bad for the first time
    int scale;
    int64_t decoded_pixels, source_pixels;
} sample_acct;

static void mark_bad(dlp_loader *l, int64_t idx, dlp_bad_kind kind, const char *why, sample_acct *a) {
    uint8_t expect = 0;
    if (atomic_compare_exchange_strong(&l->bad_mark[idx], &expect, (uint8_t)(1 + kind))) {
        a->new_bad[kind]++;
        char path[4096];
        dlp_dataset_path(l->ds, idx, path, sizeof path);
        dlp_log_warn_limited("bad-input", 20, "skipping %s [%s]: %s; replaced by the next good sample", path,
                             dlp_bad_kind_name(kind), why);
    }
}

// Produces the sample at epoch position p into dst. Returns DLP_OK, or a fatal status (every file is bad, out of
// memory) with the message in the thread's error chain.
static dlp_status process_sample(dlp_loader *l, worker *w, const int64_t *order, int64_t p, uint64_t epoch,
                                 void *dst, int32_t *label, int64_t *index, sample_acct *a) {
    char why[512];
    for (int64_t k = 0; k < l->shard_n; k++) {
        int64_t q = (p + k) % l->shard_n;
        int64_t idx = order[q];
        uint8_t mark = atomic_load_explicit(&l->bad_mark[idx], memory_order_relaxed);
        if (mark) {  // known bad: skip without reading it again
            if (k == 0) a->bad = 1;
            continue;
        }
        char path[4096];
        dlp_dataset_path(l->ds, idx, path, sizeof path);
        int64_t t0 = dlp_now_ns();
        size_t len = 0;
        dlp_bad_kind kind = read_file(l, w, path, &len, &a->throttle_ns, why, sizeof why);
        a->read_ns += dlp_now_ns() - t0;
        a->bytes += (int64_t)len;
        if (kind != DLP_BAD_NONE) {
            mark_bad(l, idx, kind, why, a);
            if (k == 0) a->bad = 1;
            continue;
        }
        dlp_rng rng;
        dlp_rng_init(&rng, l->cfg.seed ^ dlp_hash64(epoch + 0x5eed), (uint64_t)p * 1000003ULL + (uint64_t)k);
        dlp_sample_info info;
        dlp_status st = dlp_transformer_run(w->x, w->buf, len, NULL, &rng, dst, &info);
        a->decode_ns += info.decode_ns;
        a->augment_ns += info.augment_ns;
        if (st == DLP_OK) {
            *label = l->ds->labels[idx];
            *index = idx;
            if (info.scale_num >= 1 && info.scale_num <= 8) a->scale = info.scale_num;
            a->decoded_pixels += (int64_t)info.dec_w * info.dec_h;
            a->source_pixels += (int64_t)info.width * info.height;
            return DLP_OK;
        }
        if (st == DLP_ERR_NOMEM) return st;  // not the file's fault: stop the run with the error
        // Anything else about this file (a format error, or geometry the decoder refused) costs the file, not the run.
        mark_bad(l, idx, info.bad != DLP_BAD_NONE ? info.bad : DLP_BAD_CORRUPT, dlp_err_msg(), a);
        if (k == 0) a->bad = 1;
    }
    return DLP_ERR(DLP_ERR_FORMAT, "every one of the %lld samples in this shard of %s is unreadable or not a usable "
                   "JPEG; nothing to load", (long long)l->shard_n, l->ds->root);
}

// Fills order for an epoch: the permutation of the used samples, this rank's part, mapped to dataset indices.
static dlp_status make_order(dlp_loader *l, int64_t epoch, int64_t *order) {
    DLP_CHECK(dlp_epoch_order(l->n_used, l->cfg.seed, epoch, l->cfg.shuffle, l->cfg.rank, l->cfg.world, order));
    if (l->subset)
        for (int64_t i = 0; i < l->shard_n; i++) order[i] = l->subset[order[i]];
    return DLP_OK;
}

// Under mu. The seq of the batch the next claim falls in.
static int64_t claim_seq(const dlp_loader *l) {
    return l->seq_base + (l->claim_epoch - l->epoch) * l->nbatches + l->next_sample / l->cfg.batch;
}

// Under mu. Whether the current epoch is all claimed and the workers may go on into the next one.
static int at_epoch_end(const dlp_loader *l) {
    return l->active && l->fatal == DLP_OK && l->next_sample >= l->samples_epoch && !l->cfg.no_lookahead &&
           l->claim_epoch == l->epoch;
}

// Under mu. Whether a worker can claim the next position now: its slot is free, or already filling that batch.
// When the current epoch is all claimed and the next one's order is made, the claim moves on into it (at most one
// epoch ahead).
static int can_claim(dlp_loader *l) {
    if (!l->active || l->fatal != DLP_OK) return 0;
    if (l->next_sample >= l->samples_epoch) {
        if (!at_epoch_end(l) || !l->order_next_ok) return 0;
        l->claim_epoch = l->epoch + 1;
        l->next_sample = 0;
    }
    const int64_t seq = claim_seq(l);
    const slot *s = &l->slots[seq % l->nslots];
    return s->state == SLOT_FREE || (s->state == SLOT_FILLING && s->seq == seq);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    dlp_loader *l = w->l;
    const int B = l->cfg.batch;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !can_claim(l)) {
            if (at_epoch_end(l) && !l->order_next_ok && !l->ordering) {
                // Make the next epoch's order without the lock (a permutation of the whole shard: ~10 ms for
                // ImageNet), counted in flight so a restart waits for it; taken only if nothing moved meanwhile.
                const uint64_t gen = l->gen;
                const int64_t e = l->epoch + 1;
                l->ordering = 1;
                l->inflight++;
                pthread_mutex_unlock(&l->mu);
                dlp_status ost = make_order(l, e, l->order_next);  // cannot fail: sizes are checked at create
                pthread_mutex_lock(&l->mu);
                l->ordering = 0;
                if (--l->inflight == 0) pthread_cond_broadcast(&l->idle_cv);
                if (ost == DLP_OK && gen == l->gen && l->epoch + 1 == e) l->order_next_ok = 1;
                pthread_cond_broadcast(&l->work_cv);
                continue;
            }
            pthread_cond_wait(&l->work_cv, &l->mu);
        }
        if (l->stop) break;
        const int64_t seq = claim_seq(l);
        int64_t p = l->next_sample++;
        int64_t b = p / B;
        slot *s = &l->slots[seq % l->nslots];
        if (s->state == SLOT_FREE) {
            int64_t first = b * B;
            int64_t n = l->samples_epoch - first < B ? l->samples_epoch - first : B;
            dlp_batch *bb = &s->b;
            bb->n = (int)n;
            bb->index = b;
            bb->epoch = l->claim_epoch;
            s->seq = seq;
            bb->read_ns = bb->decode_ns = bb->augment_ns = bb->bytes_read = bb->wait_ns = 0;
            bb->bad = 0;
            memset(&s->acc, 0, sizeof s->acc);
            s->done = 0;
            s->state = SLOT_FILLING;
        }
        uint64_t gen = l->gen;
        uint64_t epoch = (uint64_t)l->claim_epoch;
        const int64_t *order = l->claim_epoch == l->epoch ? l->order : l->order_next;  // both stay put until the
        // consumer has taken every batch of the epoch they serve (start_epoch swaps them only then)
        int j = (int)(p - b * B);
        l->inflight++;
        pthread_mutex_unlock(&l->mu);

        sample_acct a;
        memset(&a, 0, sizeof a);
        int32_t label = -1;
        int64_t index = -1;
        void *dst = (uint8_t *)s->b.data + (size_t)j * l->sample_bytes;
        dlp_status st = process_sample(l, w, order, p, epoch, dst, &label, &index, &a);
        char msg[768];
        if (st) snprintf(msg, sizeof msg, "%s", dlp_err_msg());

        pthread_mutex_lock(&l->mu);
        l->inflight--;
        if (l->inflight == 0) pthread_cond_broadcast(&l->idle_cv);
        if (gen != l->gen) continue;  // the epoch was restarted meanwhile: drop the result
        if (st) {
            if (l->fatal == DLP_OK) {
                l->fatal = st;
                snprintf(l->fatal_msg, sizeof l->fatal_msg, "%s", msg);
            }
            pthread_cond_broadcast(&l->ready_cv);
            continue;
        }
        s->b.labels[j] = label;
        s->b.indices[j] = index;
        s->b.read_ns += a.read_ns;
        s->b.decode_ns += a.decode_ns;
        s->b.augment_ns += a.augment_ns;
        s->b.bytes_read += a.bytes;
        s->b.bad += a.bad;
        dlp_loader_stats *t = &l->stats;  // files found bad count at once; the rest when the batch is delivered
        for (int k = 0; k < DLP_BAD_KIND_COUNT; k++) {
            t->bad_by_kind[k] += a.new_bad[k];
            t->bad_files += a.new_bad[k];
        }
        t->images_made++;
        s->acc.throttle_ns += a.throttle_ns;
        s->acc.dct_scale_count[a.scale]++;
        s->acc.decoded_pixels += a.decoded_pixels;
        s->acc.source_pixels += a.source_pixels;
        if (++s->done == s->b.n) {
            s->state = SLOT_READY;
            pthread_cond_broadcast(&l->ready_cv);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void stop_workers(dlp_loader *l) {
    dlp_throttle_cancel(&l->throttle);
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nworkers; i++)
        if (l->w[i].started) pthread_join(l->w[i].th, NULL);
}

void dlp_loader_free(dlp_loader *l) {
    if (!l) return;
    if (l->w) stop_workers(l);
    for (int i = 0; l->w && i < l->nworkers; i++) {
        dlp_transformer_free(l->w[i].x);
        free(l->w[i].buf);
    }
    free(l->w);
    const dlp_allocator *al = l->cfg.alloc ? l->cfg.alloc : dlp_allocator_default();
    for (int i = 0; l->slots && i < l->nslots; i++) {
        if (l->slots[i].b.data) al->free(al->ctx, l->slots[i].b.data);
        free(l->slots[i].b.labels);
        free(l->slots[i].b.indices);
    }
    free(l->slots);
    free(l->order);
    free(l->order_next);
    free(l->subset);
    free((void *)l->bad_mark);
    dlp_throttle_destroy(&l->throttle);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->idle_cv);
    free(l);
}

dlp_status dlp_loader_create(const dlp_loader_cfg *cfg, dlp_loader **out) {
    *out = NULL;
    const dlp_dataset *ds = cfg->dataset;
    if (!ds || ds->n < 1) return DLP_ERR(DLP_ERR_INVALID, "loader: no dataset, or an empty one");
    if (cfg->batch < 1) return DLP_ERR(DLP_ERR_INVALID, "batch size %d must be at least 1", cfg->batch);
    if (cfg->workers < 1 || cfg->workers > 1024) return DLP_ERR(DLP_ERR_INVALID, "loader workers %d not in 1..1024", cfg->workers);
    if (cfg->prefetch < 0 || cfg->prefetch > 4096) return DLP_ERR(DLP_ERR_INVALID, "prefetch %d not in 1..4096", cfg->prefetch);
    int world = cfg->world ? cfg->world : 1;
    if (world < 1 || cfg->rank < 0 || cfg->rank >= world)
        return DLP_ERR(DLP_ERR_INVALID, "rank %d is not in a world of %d", cfg->rank, world);
    if (cfg->read_limit_bytes_per_s < 0) return DLP_ERR(DLP_ERR_INVALID, "negative read limit");
    DLP_CHECK(dlp_transform_check(&cfg->transform));

    dlp_loader *l = calloc(1, sizeof *l);
    DLP_TRY_ALLOC(l);
    l->cfg = *cfg;
    l->cfg.world = world;
    if (l->cfg.prefetch == 0) l->cfg.prefetch = 2 * cfg->workers;
    if (l->cfg.max_file_bytes <= 0) l->cfg.max_file_bytes = 64LL << 20;
    l->ds = ds;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    pthread_cond_init(&l->idle_cv, NULL);
    dlp_throttle_init(&l->throttle, cfg->read_limit_bytes_per_s);
    dlp_status st = DLP_OK;

    l->n_used = ds->n;
    if (cfg->limit_samples > 0 && cfg->limit_samples < ds->n) {
        l->n_used = cfg->limit_samples;
        l->subset = malloc(sizeof(int64_t) * (size_t)l->n_used);
        if (!l->subset) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (int64_t i = 0; i < l->n_used; i++) l->subset[i] = (int64_t)((double)i * ds->n / l->n_used);
    }
    l->shard_n = dlp_shard_size(l->n_used, cfg->rank, world);
    l->nbatches = dlp_shard_batches(l->n_used, cfg->rank, world, cfg->batch, cfg->drop_last);
    l->samples_epoch = cfg->drop_last ? l->nbatches * cfg->batch : l->shard_n;
    if (l->nbatches < 1) {
        st = DLP_ERR(DLP_ERR_INVALID, "%s: %lld samples for rank %d of %d give no batch of %d%s", ds->root,
                     (long long)l->shard_n, cfg->rank, world, cfg->batch, cfg->drop_last ? " (drop_last)" : "");
        goto fail;
    }
    l->sample_bytes = dlp_transform_sample_bytes(&cfg->transform);
    l->order = malloc(sizeof(int64_t) * (size_t)l->shard_n);
    l->order_next = malloc(sizeof(int64_t) * (size_t)l->shard_n);
    l->bad_mark = calloc((size_t)ds->n, 1);
    l->nslots = l->cfg.prefetch;
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->nworkers = cfg->workers;
    l->w = calloc((size_t)l->nworkers, sizeof *l->w);
    if (!l->order || !l->order_next || !l->bad_mark || !l->slots || !l->w) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory creating the loader");
        goto fail;
    }
    const dlp_allocator *al = cfg->alloc ? cfg->alloc : dlp_allocator_default();
    for (int i = 0; i < l->nslots; i++) {
        dlp_batch *b = &l->slots[i].b;
        b->sample_bytes = l->sample_bytes;
        b->data = al->alloc(al->ctx, l->sample_bytes * (size_t)cfg->batch);
        b->labels = calloc((size_t)cfg->batch, sizeof(int32_t));
        b->indices = calloc((size_t)cfg->batch, sizeof(int64_t));
        if (!b->data || !b->labels || !b->indices) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d batch slots of %zu bytes (allocator %s)", l->nslots,
                         l->sample_bytes * (size_t)cfg->batch, al->name ? al->name : "?");
            goto fail;
        }
    }
    if (cfg->drop_cache) {
        DLP_CHECK_GOTO(st, make_order(l, 0, l->order), fail);  // the shard's files (any epoch's order has the same set)
        int64_t t0 = dlp_now_ns();
        dlp_dataset_drop_cache(ds, l->order, l->shard_n, &l->stats.dropped_files);
        DLP_INFO("dropped %lld files of %s from the page cache in %.0f ms", (long long)l->stats.dropped_files, ds->root,
                 dlp_ns_to_ms(dlp_now_ns() - t0));
    }
    for (int i = 0; i < l->nworkers; i++) {
        l->w[i].l = l;
        DLP_CHECK_GOTO(st, dlp_transformer_create(&cfg->transform, &l->w[i].x), fail);
    }
    for (int i = 0; i < l->nworkers; i++) {
        int e = pthread_create(&l->w[i].th, NULL, worker_main, &l->w[i]);
        if (e) {
            st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start loader thread %d: %s", i, strerror(e));
            goto fail;
        }
        l->w[i].started = 1;
    }
    *out = l;
    return DLP_OK;
fail:
    dlp_loader_free(l);
    return st;
}

// Under mu.
static dlp_status start_epoch_locked(dlp_loader *l, int64_t epoch, int64_t first_batch) {
    if (first_batch < 0 || first_batch > l->nbatches)
        return DLP_ERR(DLP_ERR_INVALID, "cannot start epoch %lld at batch %lld: an epoch has %lld batches",
                       (long long)epoch, (long long)first_batch, (long long)l->nbatches);
    for (int i = 0; i < l->nslots; i++)
        if (l->slots[i].state == SLOT_HELD)
            return DLP_ERR(DLP_ERR_BUSY, "batch %lld of epoch %lld is still held: release every batch before starting "
                           "an epoch", (long long)l->slots[i].b.index, (long long)l->slots[i].b.epoch);
    if (l->started && l->active && l->fatal == DLP_OK && epoch == l->epoch + 1 && first_batch == 0 &&
        l->next_out == l->nbatches) {
        // The epoch after the one just finished: keep what the workers made ahead of it.
        if (l->claim_epoch == l->epoch + 1) {
            int64_t *t = l->order;
            l->order = l->order_next;
            l->order_next = t;
        } else {  // they had not gone on yet
            DLP_CHECK(make_order(l, epoch, l->order));
            l->claim_epoch = epoch;
            l->next_sample = 0;
        }
        l->order_next_ok = 0;
        l->epoch = epoch;
        l->seq_base += l->nbatches;
        l->next_out = 0;
        pthread_cond_broadcast(&l->work_cv);
        return DLP_OK;
    }
    l->active = 0;
    l->gen++;
    while (l->inflight > 0) pthread_cond_wait(&l->idle_cv, &l->mu);
    for (int i = 0; i < l->nslots; i++) l->slots[i].state = SLOT_FREE;
    DLP_CHECK(make_order(l, epoch, l->order));
    l->epoch = l->claim_epoch = epoch;
    l->order_next_ok = 0;
    l->next_sample = first_batch * l->cfg.batch;  // batch b holds positions [b * B, (b + 1) * B)
    l->seq_base = 0;
    l->next_out = first_batch;
    l->fatal = DLP_OK;
    l->fatal_msg[0] = '\0';
    l->started = 1;
    l->active = 1;
    pthread_cond_broadcast(&l->work_cv);
    return DLP_OK;
}

dlp_status dlp_loader_start_epoch(dlp_loader *l, int64_t epoch) { return dlp_loader_start_epoch_at(l, epoch, 0); }

dlp_status dlp_loader_start_epoch_at(dlp_loader *l, int64_t epoch, int64_t first_batch) {
    pthread_mutex_lock(&l->mu);
    dlp_status st = start_epoch_locked(l, epoch, first_batch);
    pthread_mutex_unlock(&l->mu);
    return st;
}

dlp_status dlp_loader_next(dlp_loader *l, dlp_batch **out) {
    *out = NULL;
    pthread_mutex_lock(&l->mu);
    dlp_status st = DLP_OK;
    if (!l->started) st = start_epoch_locked(l, l->cfg.epoch, 0);
    if (st == DLP_OK && l->fatal) st = DLP_ERR(l->fatal, "%s", l->fatal_msg);
    if (st != DLP_OK || l->next_out >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    const int64_t seq = l->seq_base + l->next_out;
    slot *s = &l->slots[seq % l->nslots];
    if (s->state == SLOT_HELD) {
        pthread_mutex_unlock(&l->mu);
        return DLP_ERR(DLP_ERR_BUSY, "the consumer holds all %d prefetch slots (batch %lld is still out): release a "
                       "batch before asking for the next", l->nslots, (long long)s->b.index);
    }
    int64_t t0 = dlp_now_ns();
    while (!(s->state == SLOT_READY && s->seq == seq) && l->fatal == DLP_OK) pthread_cond_wait(&l->ready_cv, &l->mu);
    int64_t waited = dlp_now_ns() - t0;
    l->stats.wait_ns += waited;
    if (l->fatal) {
        st = DLP_ERR(l->fatal, "%s", l->fatal_msg);
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    s->state = SLOT_HELD;
    s->b.wait_ns = waited;
    dlp_loader_stats *t = &l->stats;
    t->batches++;
    t->images += s->b.n;
    t->read_ns += s->b.read_ns;
    t->decode_ns += s->b.decode_ns;
    t->augment_ns += s->b.augment_ns;
    t->bytes_read += s->b.bytes_read;
    t->bad += s->b.bad;
    t->throttle_ns += s->acc.throttle_ns;
    for (int k = 0; k < 9; k++) t->dct_scale_count[k] += s->acc.dct_scale_count[k];
    t->decoded_pixels += s->acc.decoded_pixels;
    t->source_pixels += s->acc.source_pixels;
    l->next_out++;
    pthread_mutex_unlock(&l->mu);
    *out = &s->b;
    return DLP_OK;
}

void dlp_loader_release(dlp_loader *l, dlp_batch *b) {
    if (!b) return;
    pthread_mutex_lock(&l->mu);
    slot *s = (slot *)((char *)b - offsetof(slot, b));
    if (s >= l->slots && s < l->slots + l->nslots && s->state == SLOT_HELD) {
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&l->work_cv);
    } else {
        DLP_WARN("dlp_loader_release: batch %p is not held by the consumer", (void *)b);
    }
    pthread_mutex_unlock(&l->mu);
}

void dlp_loader_get_stats(dlp_loader *l, dlp_loader_stats *s) {
    pthread_mutex_lock(&l->mu);
    *s = l->stats;
    pthread_mutex_unlock(&l->mu);
}

static json_t *worker_ms_write(const void *rec) {
    const dlp_loader_stats *s = rec;
    double n = s->images > 0 ? (double)s->images : 1.0;
    json_t *ms = json_object();
    json_object_set_new(ms, "read", json_real(dlp_ns_to_ms(s->read_ns) / n));
    json_object_set_new(ms, "decode", json_real(dlp_ns_to_ms(s->decode_ns) / n));
    json_object_set_new(ms, "augment", json_real(dlp_ns_to_ms(s->augment_ns) / n));
    return ms;
}

static json_t *bad_write(const void *rec) {
    const dlp_loader_stats *s = rec;
    json_t *bad = json_object();
    json_object_set_new(bad, "replaced_samples", json_integer(s->bad));
    json_object_set_new(bad, "files", json_integer(s->bad_files));
    for (int k = 1; k < DLP_BAD_KIND_COUNT; k++)
        json_object_set_new(bad, dlp_bad_kind_name((dlp_bad_kind)k), json_integer(s->bad_by_kind[k]));
    return bad;
}

static json_t *dct_scale_count_write(const void *rec) {
    const dlp_loader_stats *s = rec;
    json_t *sc = json_object();
    for (int k = 1; k <= 8; k++) {
        char key[8];
        snprintf(key, sizeof key, "%d/8", k);
        json_object_set_new(sc, key, json_integer(s->dct_scale_count[k]));
    }
    return sc;
}

static json_t *decoded_pixel_fraction_write(const void *rec) {
    const dlp_loader_stats *s = rec;
    return json_real(s->source_pixels ? (double)s->decoded_pixels / (double)s->source_pixels : 0.0);
}

#define STATS_I(m) {DLP_FIELD(dlp_loader_stats, m, DLP_FT_INT, 0)}
static const dlp_field_def k_loader_stats_fields[] = {
    STATS_I(images), STATS_I(images_made), STATS_I(batches), STATS_I(bytes_read),
    {DLP_FIELD_CB("worker_ms_per_image", NULL, worker_ms_write)},
    STATS_I(read_ns), STATS_I(decode_ns), STATS_I(augment_ns), STATS_I(throttle_ns), STATS_I(wait_ns),
    {DLP_FIELD_CB("bad", NULL, bad_write)},
    {DLP_FIELD_CB("dct_scale_count", NULL, dct_scale_count_write)},
    {DLP_FIELD_CB("decoded_pixel_fraction", NULL, decoded_pixel_fraction_write)},
    STATS_I(dropped_files),
    {0}};

json_t *dlp_loader_stats_to_json(const dlp_loader_stats *s) { return dlp_fields_to_json(k_loader_stats_fields, s); }
