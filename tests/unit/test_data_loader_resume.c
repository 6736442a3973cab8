// Unit tests for dlp_loader_start_epoch_at (resuming mid-epoch): starting epoch e at batch k delivers exactly
// batches k, k+1, ... of a full epoch e — the same samples, labels and bytes (augmentation depends on (seed, epoch,
// position) only) — for every k, with 1 and 3 workers, a partial last batch, and bad files being replaced; k out of
// range is an error; a later plain start_epoch starts at batch 0 again.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/synth.h"
#include "testutil.h"

static char g_tmp[512], g_train[600];

static int setup(void **state) {
    (void)state;
    dlp_test_tmpdir(g_tmp, sizeof g_tmp);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ds", g_tmp);
    dlp_synth_params p;
    dlp_synth_defaults(&p);
    p.classes = 2;
    p.per_class = 11;
    p.val_per_class = 0;
    p.size_min = 30;
    p.size_max = 50;
    p.workers = 1;
    dlp_synth_report rep;
    assert_int_equal(dlp_synth_generate(&p, dir, &rep), DLP_OK);
    snprintf(g_train, sizeof g_train, "%s/train", dir);
    // Two bad files among the good ones (replaced by the next good sample of the epoch order).
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "d=$(ls -d '%s'/*/ | head -1); : > \"$d/b_empty.JPEG\"; echo text > \"$d/b_text.JPEG\"",
             g_train);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    dlp_test_rmtree(g_tmp);
    return 0;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

typedef struct batch_rec {
    int64_t index;
    int n;
    uint64_t hash;
    int64_t idx[8];
    int32_t lab[8];
} batch_rec;

// Runs epoch `epoch` from batch `first`; returns the batches delivered.
static int collect(dlp_loader *l, int64_t epoch, int64_t first, batch_rec *out, int max) {
    assert_int_equal(dlp_loader_start_epoch_at(l, epoch, first), DLP_OK);
    int k = 0;
    dlp_batch *b;
    while (dlp_loader_next(l, &b) == DLP_OK && b) {
        assert_true(k < max);
        out[k].index = b->index;
        out[k].n = b->n;
        out[k].hash = hash_bytes(b->data, b->sample_bytes * (size_t)b->n);
        for (int j = 0; j < b->n; j++) {
            out[k].idx[j] = b->indices[j];
            out[k].lab[j] = b->labels[j];
        }
        k++;
        dlp_loader_release(l, b);
    }
    return k;
}

static void test_start_at_every_batch(void **state) {
    (void)state;
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(g_train, &ds), DLP_OK);
    assert_int_equal(ds->n, 24);
    for (int workers = 1; workers <= 3; workers += 2) {
        dlp_loader_cfg c;
        dlp_loader_cfg_defaults(&c, ds, DLP_XFORM_TRAIN);
        c.transform.out_w = c.transform.out_h = 16;
        c.batch = 5;
        c.drop_last = 0;  // 24 = 4 x 5 + 4: a partial last batch
        c.workers = workers;
        c.prefetch = 2;
        c.seed = 7;
        dlp_loader *l;
        assert_int_equal(dlp_loader_create(&c, &l), DLP_OK);
        const int64_t nb = dlp_loader_batches_per_epoch(l);
        assert_int_equal(nb, 5);
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            batch_rec full[8], part[8];
            assert_int_equal(collect(l, epoch, 0, full, 8), nb);
            for (int64_t k = 0; k <= nb; k++) {
                int got = collect(l, epoch, k, part, 8);
                assert_int_equal(got, nb - k);
                for (int i = 0; i < got; i++) {
                    const batch_rec *a = &full[k + i], *b = &part[i];
                    assert_int_equal(b->index, a->index);
                    assert_int_equal(b->n, a->n);
                    for (int j = 0; j < a->n; j++) {
                        assert_int_equal(b->idx[j], a->idx[j]);
                        assert_int_equal(b->lab[j], a->lab[j]);
                    }
                    if (a->hash != b->hash)
                        fail_msg("workers %d epoch %lld: batch %lld differs when the epoch starts at batch %lld",
                                 workers, (long long)epoch, (long long)a->index, (long long)k);
                }
            }
            // A plain start of the same epoch is the full epoch again.
            batch_rec again[8];
            assert_int_equal(collect(l, epoch, 0, again, 8), nb);
            for (int i = 0; i < nb; i++) assert_true(again[i].hash == full[i].hash);
        }
        dlp_loader_stats s;
        dlp_loader_get_stats(l, &s);
        assert_int_equal(s.bad_files, 2);
        assert_int_equal(dlp_loader_start_epoch_at(l, 0, nb + 1), DLP_ERR_INVALID);
        assert_int_equal(dlp_loader_start_epoch_at(l, 0, -1), DLP_ERR_INVALID);
        dlp_loader_free(l);
    }
    dlp_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_at_every_batch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
