// Unit tests for data/loader: 1..4 workers x prefetch 1, 2, 5 x two batch sizes (in order, nothing lost or duplicated,
// labels right, output independent of the worker count), shards across ranks, every bad-input kind (skipped, counted,
// replaced; batches stay full), a dataset that is all bad (an error, not a hang), consumer misuse (clear errors, no
// deadlock), the allocator hook, the read-rate limit, and the val transform writing each sample to its slot.
// An alarm turns any deadlock into a failure. Runs under ASan + UBSan in `make asan`.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/jpeg_encode.h"
#include "data/loader.h"
#include "testutil.h"

static char g_dir[256];      // good dataset: 3 classes x 11 images
static char g_bad_dir[256];  // 20 good + one file of each bad kind
static char g_all_bad[256];  // nothing usable

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void make_jpeg(int cls, int idx, int w, int h, uint8_t **jpg, size_t *len) {
    uint8_t *rgb = malloc((size_t)w * h * 3);
    dlp_rng r;
    dlp_rng_init(&r, (uint64_t)cls, (uint64_t)idx);
    for (int i = 0; i < w * h; i++) {
        rgb[3 * i + 0] = (uint8_t)(60 * cls + dlp_rng_below(&r, 40));
        rgb[3 * i + 1] = (uint8_t)(7 * idx + (i % w) * 2);
        rgb[3 * i + 2] = (uint8_t)dlp_rng_below(&r, 256);
    }
    dlp_jpeg_enc_opts o;
    dlp_jpeg_enc_defaults(&o);
    o.quality = 90;
    o.h_samp = o.v_samp = idx % 2 ? 1 : 2;
    o.progressive = idx % 5 == 0;
    if (idx % 7 == 3) o.color = DLP_JPEG_ENC_GRAY;
    assert_int_equal(dlp_jpeg_encode(rgb, w, h, &o, jpg, len), DLP_OK);
    free(rgb);
}

static void add_good(const char *dir, int cls, int idx) {
    char p[512];
    snprintf(p, sizeof p, "%s/c%d", dir, cls);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/c%d/img%02d.JPEG", dir, cls, idx);
    uint8_t *jpg;
    size_t len;
    make_jpeg(cls, idx, 40 + (idx * 13) % 50, 36 + (idx * 7) % 45, &jpg, &len);
    write_file(p, jpg, len);
    free(jpg);
}

// One file of every bad kind into dir/c0 (names sort before the good ones: "a*"), plus a dangling symlink and a
// FIFO (io).
static void add_bad_files(const char *dir) {
    char p[512], cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/c0'", dir);
    assert_int_equal(system(cmd), 0);
    uint8_t *jpg;
    size_t len;
    make_jpeg(0, 99, 64, 48, &jpg, &len);
    snprintf(p, sizeof p, "%s/c0/a0_empty.JPEG", dir);
    write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/c0/a1_png.JPEG", dir);
    write_file(p, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10", 20);
    snprintf(p, sizeof p, "%s/c0/a2_text.JPEG", dir);
    write_file(p, "this is not an image\n", 21);
    snprintf(p, sizeof p, "%s/c0/a3_truncated.JPEG", dir);
    write_file(p, jpg, len / 2);
    uint8_t *b = malloc(len);
    memcpy(b, jpg, len);
    for (size_t i = 2; i + 1 < len; i++)
        if (b[i] == 0xFF && b[i + 1] == 0xC4) {  // DHT marker -> a reserved one
            b[i + 1] = 0x02;
            break;
        }
    snprintf(p, sizeof p, "%s/c0/a4_corrupt.JPEG", dir);
    write_file(p, b, len);
    memcpy(b, jpg, len);
    for (size_t i = 2; i + 9 < len; i++)
        if (b[i] == 0xFF && b[i + 1] == 0xC0) {
            b[i + 5] = 0xFD, b[i + 6] = 0xE8, b[i + 7] = 0xFD, b[i + 8] = 0xE8;  // 65000 x 65000
            break;
        }
    snprintf(p, sizeof p, "%s/c0/a5_huge.JPEG", dir);
    write_file(p, b, len);
    snprintf(p, sizeof p, "%s/c0/a6_dangling.JPEG", dir);
    assert_int_equal(symlink("/nonexistent/nothing.JPEG", p), 0);
    snprintf(p, sizeof p, "%s/c0/a7_fifo.JPEG", dir);  // opening it must not block a worker
    assert_int_equal(mkfifo(p, 0644), 0);
    free(b);
    free(jpg);
}

static int setup(void **state) {
    (void)state;
    dlp_test_tmpdir(g_dir, sizeof g_dir);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 11; i++) add_good(g_dir, c, i);
    dlp_test_tmpdir(g_bad_dir, sizeof g_bad_dir);
    for (int i = 0; i < 20; i++) add_good(g_bad_dir, i % 2, i);
    add_bad_files(g_bad_dir);
    dlp_test_tmpdir(g_all_bad, sizeof g_all_bad);
    add_bad_files(g_all_bad);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    dlp_test_rmtree(g_dir);
    dlp_test_rmtree(g_bad_dir);
    dlp_test_rmtree(g_all_bad);
    return 0;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void small_cfg(dlp_loader_cfg *c, const dlp_dataset *ds) {
    dlp_loader_cfg_defaults(c, ds, DLP_XFORM_TRAIN);
    c->transform.out_w = c->transform.out_h = 24;
    c->drop_last = 0;
    c->seed = 17;
}

// Runs one epoch; checks order, counts, labels; returns per-batch data hashes in hashes[] (if not NULL).
static int64_t run_epoch(dlp_loader *l, const dlp_dataset *ds, const dlp_loader_cfg *c, int64_t epoch, int *seen,
                         uint64_t *hashes) {
    assert_int_equal(dlp_loader_start_epoch(l, epoch), DLP_OK);
    int64_t n_shard = dlp_shard_size(ds->n, c->rank, c->world ? c->world : 1);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n_shard);
    assert_int_equal(dlp_epoch_order(ds->n, c->seed, epoch, c->shuffle, c->rank, c->world ? c->world : 1, order), DLP_OK);
    dlp_batch *b;
    int64_t k = 0, pos = 0;
    while (1) {
        assert_int_equal(dlp_loader_next(l, &b), DLP_OK);
        if (!b) break;
        assert_int_equal(b->index, k);
        assert_int_equal(b->epoch, epoch);
        assert_true(b->n == c->batch || (!c->drop_last && k == dlp_loader_batches_per_epoch(l) - 1));
        for (int j = 0; j < b->n; j++) {
            int64_t idx = b->indices[j];
            assert_true(idx >= 0 && idx < ds->n);
            assert_int_equal(b->labels[j], ds->labels[idx]);
            assert_int_equal(idx, order[pos]);  // no bad files: exactly the epoch's order
            seen[idx]++;
            pos++;
        }
        if (hashes) hashes[k] = hash_bytes(b->data, b->sample_bytes * (size_t)b->n);
        dlp_loader_release(l, b);
        k++;
    }
    assert_int_equal(k, dlp_loader_batches_per_epoch(l));
    // After the end, next keeps saying "end".
    assert_int_equal(dlp_loader_next(l, &b), DLP_OK);
    assert_null(b);
    free(order);
    return pos;
}

static void test_workers_prefetch_matrix(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    assert_int_equal(ds->n, 33);
    static const int batches[] = {4, 7};
    static const int prefetches[] = {1, 2, 5};
    uint64_t ref[2][2][16];  // [batch][epoch][batch index] from the 1-worker run
    for (size_t bi = 0; bi < 2; bi++)
        for (int w = 1; w <= 4; w++)
            for (size_t pi = 0; pi < 3; pi++) {
                dlp_loader_cfg c;
                small_cfg(&c, ds);
                c.batch = batches[bi];
                c.workers = w;
                c.prefetch = prefetches[pi];
                c.no_lookahead = w % 2 == 0;  // half the runs stop at each epoch end: the batches must not differ
                dlp_loader *l;
                assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
                for (int e = 0; e < 2; e++) {
                    int seen[33] = {0};
                    uint64_t h[16];
                    assert_int_equal(run_epoch(l, ds, &c, e, seen, h), 33);
                    for (int i = 0; i < 33; i++)
                        if (seen[i] != 1) fail_msg("workers %d prefetch %d batch %d epoch %d: sample %d seen %d times", w,
                                                   c.prefetch, c.batch, e, i, seen[i]);
                    int64_t nb = dlp_loader_batches_per_epoch(l);
                    for (int64_t k = 0; k < nb; k++) {
                        if (w == 1 && pi == 0) ref[bi][e][k] = h[k];
                        else if (h[k] != ref[bi][e][k])
                            fail_msg("workers %d prefetch %d: batch %lld of epoch %d differs from the 1-worker run", w,
                                     c.prefetch, (long long)k, e);
                    }
                }
                dlp_loader_stats s;
                dlp_loader_get_stats(l, &s);
                assert_int_equal(s.images, 66);  // delivered
                // Working ahead, the loader also made (some of) epoch 2's first batches: at most its free slots.
                if (c.no_lookahead) assert_int_equal(s.images_made, 66);
                else assert_true(s.images_made >= 66 && s.images_made <= 66 + (int64_t)c.prefetch * c.batch);
                assert_int_equal(s.bad, 0);
                assert_true(s.bytes_read > 0 && s.decode_ns > 0 && s.augment_ns > 0 && s.read_ns > 0);
                dlp_loader_free(l);
            }
    dlp_dataset_free(ds);
}

static int64_t images_done(dlp_loader *l) {
    dlp_loader_stats s;
    dlp_loader_get_stats(l, &s);
    return s.images_made;
}

// Waits (at most 30 s) until the loader has made n images in all.
static void wait_images(dlp_loader *l, int64_t n) {
    int64_t t0 = dlp_now_ns();
    while (images_done(l) < n && dlp_now_ns() - t0 < 30000000000LL) usleep(2000);
    assert_true(images_done(l) >= n);
}

// Epochs without a gap: after the consumer took the last batch of epoch 0, the workers go on into epoch 1 (its
// first batches fill the free slots while nobody asks), and starting epoch 1 delivers them at once, the same
// batches a loader that stopped at the epoch end makes. Starting any other epoch discards the work done ahead.
static void test_lookahead(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    dlp_loader_cfg c;
    small_cfg(&c, ds);
    c.batch = 4;
    c.workers = 2;
    c.prefetch = 3;
    dlp_loader *l, *ref;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    c.no_lookahead = 1;
    assert_int_equal(dlp_loader_create(&c, &ref), DLP_OK);
    int seen[33] = {0};
    assert_int_equal(run_epoch(l, ds, &c, 0, seen, NULL), 33);
    wait_images(l, 33 + 3 * 4);  // the 3 free slots: epoch 1's batches 0..2, and no more than that
    usleep(20000);
    assert_int_equal(images_done(l), 33 + 3 * 4);

    uint64_t want[16], got[16];
    memset(seen, 0, sizeof seen);
    assert_int_equal(run_epoch(ref, ds, &c, 1, seen, want), 33);
    assert_int_equal(dlp_loader_start_epoch(l, 1), DLP_OK);
    dlp_batch *b;
    int64_t k = 0;
    while (dlp_loader_next(l, &b) == DLP_OK && b) {
        assert_int_equal(b->epoch, 1);
        assert_int_equal(b->index, k);
        if (k < 3 && b->wait_ns > 50000000)  // made ahead: ready when asked for
            fail_msg("batch %lld of epoch 1 was made ahead but the consumer waited %.1f ms for it", (long long)k,
                     b->wait_ns / 1e6);
        got[k] = hash_bytes(b->data, b->sample_bytes * (size_t)b->n);
        assert_true(got[k] == want[k]);
        dlp_loader_release(l, b);
        k++;
    }
    assert_int_equal(k, dlp_loader_batches_per_epoch(l));

    // Epoch 2's first batches get made ahead too; starting epoch 5 instead drops them and delivers epoch 5.
    wait_images(l, 2 * 33 + 3 * 4);
    memset(seen, 0, sizeof seen);
    assert_int_equal(run_epoch(l, ds, &c, 5, seen, got), 33);
    memset(seen, 0, sizeof seen);
    assert_int_equal(run_epoch(ref, ds, &c, 5, seen, want), 33);
    for (int64_t i = 0; i < k; i++) assert_true(got[i] == want[i]);
    for (int i = 0; i < 33; i++) assert_int_equal(seen[i], 1);
    dlp_loader_free(l);
    dlp_loader_free(ref);
    dlp_dataset_free(ds);
}

static void test_shards_through_loader(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    for (int drop = 0; drop < 2; drop++) {
        int seen[33] = {0};
        int64_t nb0 = -1;
        for (int r = 0; r < 4; r++) {
            dlp_loader_cfg c;
            small_cfg(&c, ds);
            c.batch = 3;
            c.workers = 2;
            c.rank = r;
            c.world = 4;
            c.drop_last = drop;
            dlp_loader *l;
            assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
            if (drop) {  // lock-step: every rank has the same number of batches
                if (nb0 < 0) nb0 = dlp_loader_batches_per_epoch(l);
                assert_int_equal(dlp_loader_batches_per_epoch(l), nb0);
                assert_int_equal(nb0, 8 / 3);
                assert_int_equal(dlp_loader_start_epoch(l, 2), DLP_OK);
                dlp_batch *b;
                int64_t k = 0;
                while (dlp_loader_next(l, &b) == DLP_OK && b) {
                    assert_int_equal(b->n, 3);
                    dlp_loader_release(l, b);
                    k++;
                }
                assert_int_equal(k, nb0);
            } else {
                run_epoch(l, ds, &c, 2, seen, NULL);
            }
            dlp_loader_free(l);
        }
        if (!drop)
            for (int i = 0; i < 33; i++) assert_int_equal(seen[i], 1);  // exactly once across the 4 ranks
    }
    dlp_dataset_free(ds);
}

static void test_bad_inputs(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_bad_dir, &ds), DLP_OK);
    assert_int_equal(ds->n, 28);
    char *is_bad = calloc((size_t)ds->n, 1);
    for (int64_t i = 0; i < ds->n; i++) is_bad[i] = strstr(dlp_dataset_relpath(ds, i), "/a") != NULL;
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        dlp_loader_cfg c;
        small_cfg(&c, ds);
        c.batch = 4;  // unshuffled, the first batch is all bad files: it must still come out full
        c.workers = 3;
        c.prefetch = 2;
        c.no_lookahead = 1;  // the counts below are one epoch's
        c.shuffle = shuffle;
        dlp_loader *l;
        assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
        for (int e = 0; e < 2; e++) {
            assert_int_equal(dlp_loader_start_epoch(l, e), DLP_OK);
            dlp_batch *b;
            int64_t total = 0, bad = 0;
            int *seen = calloc((size_t)ds->n, sizeof(int));
            while (dlp_loader_next(l, &b) == DLP_OK && b) {
                assert_true(b->n == 4 || b->index == dlp_loader_batches_per_epoch(l) - 1);
                for (int j = 0; j < b->n; j++) {
                    assert_false(is_bad[b->indices[j]]);  // bad files never come out
                    assert_int_equal(b->labels[j], ds->labels[b->indices[j]]);
                    seen[b->indices[j]]++;
                }
                if (!shuffle && b->index == 0) assert_int_equal(b->bad, 4);
                total += b->n;
                bad += b->bad;
                dlp_loader_release(l, b);
            }
            assert_int_equal(total, 28);  // batches stay full: 8 bad samples replaced
            assert_int_equal(bad, 8);
            for (int64_t i = 0; i < ds->n; i++)
                if (!is_bad[i]) assert_true(seen[i] >= 1);  // every good file still seen
            free(seen);
        }
        dlp_loader_stats s;
        dlp_loader_get_stats(l, &s);
        assert_int_equal(s.bad, 16);
        assert_int_equal(s.bad_files, 8);
        assert_int_equal(s.bad_by_kind[DLP_BAD_EMPTY], 1);
        assert_int_equal(s.bad_by_kind[DLP_BAD_NOT_JPEG], 2);
        assert_int_equal(s.bad_by_kind[DLP_BAD_TRUNCATED], 1);
        assert_int_equal(s.bad_by_kind[DLP_BAD_CORRUPT], 1);
        assert_int_equal(s.bad_by_kind[DLP_BAD_TOO_LARGE], 1);
        assert_int_equal(s.bad_by_kind[DLP_BAD_IO], 2);
        assert_int_equal(s.images, 56);
        json_t *j = dlp_loader_stats_to_json(&s);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "bad"), "truncated")), 1);
        json_decref(j);
        dlp_loader_free(l);
    }
    free(is_bad);
    dlp_dataset_free(ds);
}

static void test_all_bad(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_all_bad, &ds), DLP_OK);
    for (int w = 1; w <= 3; w += 2) {
        dlp_loader_cfg c;
        small_cfg(&c, ds);
        c.batch = 2;
        c.workers = w;
        dlp_loader *l;
        assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
        dlp_batch *b;
        assert_int_equal(dlp_loader_next(l, &b), DLP_ERR_FORMAT);
        assert_null(b);
        assert_non_null(strstr(dlp_err_msg(), "every one of the 8 samples"));
        assert_int_equal(dlp_loader_next(l, &b), DLP_ERR_FORMAT);  // stays failed, does not hang
        dlp_loader_free(l);
    }
    dlp_dataset_free(ds);
}

static void test_consumer_misuse(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    dlp_loader_cfg c;
    small_cfg(&c, ds);
    c.batch = 2;
    c.workers = 3;
    c.prefetch = 2;
    dlp_loader *l;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    dlp_batch *a, *b, *x;
    assert_int_equal(dlp_loader_next(l, &a), DLP_OK);  // implicit start of epoch c.epoch
    assert_int_equal(dlp_loader_next(l, &b), DLP_OK);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(dlp_loader_next(l, &x), DLP_ERR_BUSY);  // holds both slots
    assert_int_equal(dlp_loader_start_epoch(l, 1), DLP_ERR_BUSY);
    dlp_loader_release(l, b);  // out of order is fine
    dlp_loader_release(l, a);
    // Restart mid-epoch (work in flight is discarded), then a full epoch comes out right.
    int seen[33] = {0};
    assert_int_equal(run_epoch(l, ds, &c, 1, seen, NULL), 33);
    for (int i = 0; i < 33; i++) assert_int_equal(seen[i], 1);
    dlp_loader_free(l);
    // Bad configurations are refused.
    small_cfg(&c, ds);
    c.batch = 0;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_ERR_INVALID);
    small_cfg(&c, ds);
    c.rank = 2;
    c.world = 2;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_ERR_INVALID);
    small_cfg(&c, ds);
    c.batch = 40;
    c.drop_last = 1;  // 33 samples, no full batch
    assert_int_equal(dlp_loader_create(&c, &l), DLP_ERR_INVALID);
    dlp_loader_free(NULL);
    dlp_dataset_free(ds);
}

typedef struct count_alloc {
    int allocs, frees;
} count_alloc;
static void *ca_alloc(void *ctx, size_t n) {
    ((count_alloc *)ctx)->allocs++;
    return dlp_allocator_default()->alloc(NULL, n);
}
static void ca_free(void *ctx, void *p) {
    ((count_alloc *)ctx)->frees++;
    dlp_allocator_default()->free(NULL, p);
}

static void test_allocator_and_read_limit(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    count_alloc ca = {0, 0};
    dlp_allocator al = {"counting", ca_alloc, ca_free, &ca};
    dlp_loader_cfg c;
    small_cfg(&c, ds);
    c.alloc = &al;
    c.prefetch = 3;
    c.workers = 2;
    c.no_lookahead = 1;  // one epoch's bytes set the read limit below
    dlp_loader *l;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    assert_int_equal(ca.allocs, 3);
    int seen[33] = {0};
    run_epoch(l, ds, &c, 0, seen, NULL);
    dlp_loader_stats s;
    dlp_loader_get_stats(l, &s);
    int64_t bytes = s.bytes_read;
    dlp_loader_free(l);
    assert_int_equal(ca.frees, 3);

    // Read limit: the bucket holds 64 KiB; the rest comes at the limited rate.
    assert_true(bytes > 65536 + 20000);
    double want_s = 0.4;
    c.alloc = NULL;
    c.read_limit_bytes_per_s = (int64_t)((bytes - 65536) / want_s);
    c.drop_cache = 1;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    int64_t t0 = dlp_now_ns();
    memset(seen, 0, sizeof seen);
    run_epoch(l, ds, &c, 0, seen, NULL);
    double took = dlp_ns_to_s(dlp_now_ns() - t0);
    dlp_loader_get_stats(l, &s);
    assert_true(s.throttle_ns > 0);
    assert_int_equal(s.dropped_files, 33);
    if (took < 0.8 * want_s) fail_msg("read limit: %lld bytes took %.3f s, want >= %.3f s", (long long)bytes, took, 0.8 * want_s);
    dlp_loader_free(l);
    // A loader reading from very slow "storage" (1 KB/s) still stops promptly.
    c.read_limit_bytes_per_s = 1024;
    c.drop_cache = 0;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    assert_int_equal(dlp_loader_start_epoch(l, 0), DLP_OK);
    dlp_sleep_ns(300 * 1000 * 1000);  // the workers are now sleeping off their reads
    t0 = dlp_now_ns();
    dlp_loader_free(l);
    took = dlp_ns_to_s(dlp_now_ns() - t0);
    if (took > 1.0) fail_msg("freeing a loader with sleeping readers took %.2f s", took);
    dlp_dataset_free(ds);
}

// Val transform, no shuffle, NHWC uint8: each slot holds exactly what the one-shot transform gives for its sample.
static void test_val_slots(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_dir, &ds), DLP_OK);
    dlp_loader_cfg c;
    dlp_loader_cfg_defaults(&c, ds, DLP_XFORM_VAL);
    c.transform.out_w = c.transform.out_h = 32;
    c.transform.dtype = DLP_DTYPE_U8;
    c.transform.layout = DLP_LAYOUT_NHWC;
    c.batch = 5;
    c.workers = 4;
    c.prefetch = 1;
    dlp_loader *l;
    assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
    assert_int_equal(dlp_loader_batches_per_epoch(l), 7);  // val: no drop_last
    size_t nb = dlp_transform_sample_bytes(&c.transform);
    uint8_t *want = malloc(nb);
    dlp_batch *b;
    int64_t pos = 0;
    while (dlp_loader_next(l, &b) == DLP_OK && b) {
        for (int j = 0; j < b->n; j++, pos++) {
            assert_int_equal(b->indices[j], pos);  // natural order
            char path[600];
            dlp_dataset_path(ds, pos, path, sizeof path);
            FILE *f = fopen(path, "rb");
            static uint8_t buf[1 << 16];
            size_t len = fread(buf, 1, sizeof buf, f);
            fclose(f);
            assert_int_equal(dlp_transform_jpeg(&c.transform, buf, len, want), DLP_OK);
            assert_memory_equal((uint8_t *)b->data + (size_t)j * nb, want, nb);
        }
        dlp_loader_release(l, b);
    }
    assert_int_equal(pos, 33);
    free(want);
    dlp_loader_free(l);
    dlp_dataset_free(ds);
}

int main(void) {
    alarm(300);  // a deadlock fails the test instead of hanging the suite
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_prefetch_matrix),
        cmocka_unit_test(test_lookahead),
        cmocka_unit_test(test_shards_through_loader),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_all_bad),
        cmocka_unit_test(test_consumer_misuse),
        cmocka_unit_test(test_allocator_and_read_limit),
        cmocka_unit_test(test_val_slots),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
