// Unit tests for data/synth: the same files byte for byte whatever the thread count, never overwriting, the
// temporary-directory-then-rename protocol, the cache (generated once, then reused), and the spec/size parsers.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "data/dataset.h"
#include "data/jpeg.h"
#include "data/synth.h"
#include "testutil.h"

static void small_params(dlp_synth_params *p) {
    dlp_synth_defaults(p);
    p->classes = 3;
    p->per_class = 4;
    p->val_per_class = 2;
    p->size_min = 32;
    p->size_max = 56;
    p->seed = 12;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void test_deterministic_over_threads(void **state) {
    (void)state;
    char dir[256], a[300], b[300], cmd[700];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/one", dir);
    snprintf(b, sizeof b, "%s/three", dir);
    dlp_synth_params p;
    small_params(&p);
    p.workers = 1;
    dlp_synth_report ra, rb;
    assert_int_equal(dlp_synth_generate(&p, a, &ra), DLP_OK);
    p.workers = 3;
    assert_int_equal(dlp_synth_generate(&p, b, &rb), DLP_OK);
    assert_int_equal(ra.images, 18);
    assert_int_equal(ra.bytes, rb.bytes);
    snprintf(cmd, sizeof cmd, "diff -r '%s/train' '%s/train' && diff -r '%s/val' '%s/val' && cmp '%s/train.txt' '%s/train.txt'", a, b,
             a, b, a, b);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(count_entries(dir), 2);  // no temporary directory left
    // The layout: classes sorted = wnids increasing = labels; every file a JPEG within the size range.
    char sub[400];
    snprintf(sub, sizeof sub, "%s/train", a);
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(sub, &ds), DLP_OK);
    assert_int_equal(ds->n, 12);
    assert_int_equal(ds->nclasses, 3);
    for (int c = 0; c < 3; c++) {
        char w[16];
        dlp_synth_wnid(c, w, sizeof w);
        assert_string_equal(ds->class_names[c], w);
        assert_int_equal(strlen(w), 9);
    }
    dlp_jpeg_dec *d;
    assert_int_equal(dlp_jpeg_dec_create(&d), DLP_OK);
    for (int64_t i = 0; i < ds->n; i++) {
        char path[600], *buf;
        size_t len;
        dlp_dataset_path(ds, i, path, sizeof path);
        assert_int_equal(dlp_read_file(path, &buf, &len, 0), DLP_OK);
        dlp_jpeg_info info;
        assert_int_equal(dlp_jpeg_open(d, (const uint8_t *)buf, len, &info), DLP_OK);
        dlp_jpeg_close(d);
        int s = info.width < info.height ? info.width : info.height;
        assert_true(s >= 32 && s <= 56);
        assert_int_equal(ds->labels[i], (int)(i / 4));
        free(buf);
    }
    dlp_jpeg_dec_free(d);
    dlp_dataset_free(ds);
    snprintf(sub, sizeof sub, "%s/val.txt", a);
    assert_int_equal(dlp_dataset_open(sub, &ds), DLP_OK);  // the list file works as a dataset
    assert_int_equal(ds->n, 6);
    dlp_dataset_free(ds);
    // Never overwrites.
    assert_int_equal(dlp_synth_generate(&p, a, &ra), DLP_ERR_EXISTS);
    // A different seed gives different files.
    p.seed = 13;
    snprintf(b, sizeof b, "%s/other", dir);
    assert_int_equal(dlp_synth_generate(&p, b, &rb), DLP_OK);
    assert_true(rb.bytes != ra.bytes);
    dlp_test_rmtree(dir);
}

static void test_cache(void **state) {
    (void)state;
    char dir[256], got[4096], again[4096];
    dlp_test_tmpdir(dir, sizeof dir);
    const char *old = getenv("DLPERF_CACHE");
    char *saved = old ? strdup(old) : NULL;
    setenv("DLPERF_CACHE", dir, 1);
    // A stale temporary directory of a dead run is cleaned up.
    char stale[400];
    snprintf(stale, sizeof stale, "%s/synthetic-0000.tmp-999999999-1", dir);
    assert_int_equal(dlp_mkdirs(stale), DLP_OK);
    dlp_synth_params p;
    small_params(&p);
    assert_int_equal(dlp_synth_ensure(&p, got, sizeof got), DLP_OK);
    assert_non_null(strstr(got, dir));
    assert_non_null(strstr(got, "/synthetic-"));
    assert_false(dlp_path_exists(stale));
    char marker[4200];
    snprintf(marker, sizeof marker, "%s/dataset.json", got);
    struct stat s1, s2;
    assert_int_equal(stat(marker, &s1), 0);
    assert_int_equal(dlp_synth_ensure(&p, again, sizeof again), DLP_OK);  // reused, not regenerated
    assert_string_equal(got, again);
    assert_int_equal(stat(marker, &s2), 0);
    assert_int_equal(s1.st_ino, s2.st_ino);
    p.per_class = 5;  // other parameters, other directory
    assert_int_equal(dlp_synth_ensure(&p, again, sizeof again), DLP_OK);
    assert_string_not_equal(got, again);
    assert_int_equal(count_entries(dir), 2);
    if (saved) {
        setenv("DLPERF_CACHE", saved, 1);
        free(saved);
    } else {
        unsetenv("DLPERF_CACHE");
    }
    dlp_test_rmtree(dir);
}

static void test_parsers(void **state) {
    (void)state;
    dlp_synth_params p;
    dlp_synth_defaults(&p);
    assert_int_equal(dlp_synth_parse_spec("synthetic", &p), DLP_OK);
    assert_int_equal(p.classes, 10);
    assert_int_equal(dlp_synth_parse_spec("synthetic:classes=4,per-class=9,val-per-class=0,size=64-112,seed=3", &p), DLP_OK);
    assert_int_equal(p.classes, 4);
    assert_int_equal(p.per_class, 9);
    assert_int_equal(p.val_per_class, 0);
    assert_int_equal(p.size_min, 64);
    assert_int_equal(p.size_max, 112);
    assert_int_equal(p.seed, 3);
    assert_int_equal(dlp_synth_parse_spec("synthetic:classes=x", &p), DLP_ERR_INVALID);
    assert_int_equal(dlp_synth_parse_spec("synthetic:colour=red", &p), DLP_ERR_INVALID);
    assert_int_equal(dlp_synth_parse_spec("synthetics", &p), DLP_ERR_INVALID);
    assert_int_equal(dlp_synth_parse_size("imagenet", &p), DLP_OK);
    assert_int_equal(p.size_max, 0);
    assert_int_equal(dlp_synth_parse_size("96", &p), DLP_OK);
    assert_int_equal(p.size_min, 96);
    assert_int_equal(p.size_max, 96);
    assert_int_equal(dlp_synth_parse_size("112-64", &p), DLP_ERR_INVALID);
    assert_int_equal(dlp_synth_parse_size("4-8", &p), DLP_ERR_INVALID);
    assert_int_equal(dlp_synth_parse_size("64-", &p), DLP_ERR_INVALID);
    dlp_synth_params q;
    small_params(&p);
    small_params(&q);
    q.workers = 7;  // the thread count is not part of the dataset's identity
    assert_true(dlp_synth_hash(&p) == dlp_synth_hash(&q));
    q.seed++;
    assert_true(dlp_synth_hash(&p) != dlp_synth_hash(&q));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_over_threads),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_parsers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
