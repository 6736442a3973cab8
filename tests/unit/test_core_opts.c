// Unit tests for core/: status chain, options table, sizes, atomic/no-clobber writes, JSON errors, RNG.
// Main file: src/core/opts.c; also src/core/status.c, stats.c, fs.c, json.c, rng.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/status.h"
#include "testutil.h"

static dlp_status inner(void) { return DLP_ERR(DLP_ERR_FORMAT, "cannot decode %s: not a JPEG", "x.JPEG"); }
static dlp_status outer(void) {
    DLP_CHECK(inner());
    return DLP_OK;
}

static void test_status_chain(void **state) {
    (void)state;
    dlp_err_clear();
    assert_int_equal(outer(), DLP_ERR_FORMAT);
    assert_string_equal(dlp_err_msg(), "cannot decode x.JPEG: not a JPEG");
    dlp_err_context("loading %s", "train");
    assert_string_equal(dlp_err_msg(), "loading train: cannot decode x.JPEG: not a JPEG");
    assert_string_equal(dlp_status_str(DLP_ERR_NOMEM), "out of memory");
    assert_string_equal(dlp_status_str((dlp_status)999), "unknown status");
    dlp_err_clear();
    assert_string_equal(dlp_err_msg(), "");
}

static void test_parse_size(void **state) {
    (void)state;
    static const struct { const char *in; int64_t want; int ok; } rows[] = {
        {"0", 0, 1}, {"512", 512, 1}, {"1K", 1024, 1}, {"200M", 200LL << 20, 1}, {"1.5G", 3LL << 29, 1},
        {"2MiB", 2LL << 20, 1}, {"3MB", 3LL << 20, 1}, {"1T", 1LL << 40, 1},
        {"", 0, 0}, {"abc", 0, 0}, {"-1", 0, 0}, {"5X", 0, 0}, {"1e30", 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t v = -1;
        dlp_status st = dlp_parse_size(rows[i].in, &v);
        assert_int_equal(st == DLP_OK, rows[i].ok);
        if (rows[i].ok) assert_int_equal(v, rows[i].want);
    }
    int xs[8];
    assert_int_equal(dlp_parse_int_list("1,2,4", xs, 8), 3);
    assert_int_equal(xs[2], 4);
    assert_int_equal(dlp_parse_int_list("1,,2", xs, 8), -1);
    assert_int_equal(dlp_parse_int_list("1,x", xs, 8), -1);
}

// Every table gets -v/--verbose (error locations) unless it has its own; error locations are printed only then.
static void test_opts_verbose(void **state) {
    (void)state;
    int batch = 0;
    dlp_opt t[] = {{"batch", 'b', DLP_OPT_INT, &batch, "32", NULL, "batch size", NULL, 0}, {0}};
    char *argv[] = {"x", "-b", "8", NULL};
    dlp_err_set_verbose(0);
    assert_int_equal(dlp_opts_parse(t, NULL, 3, argv, NULL), DLP_OK);
    assert_int_equal(dlp_err_verbose(), 0);
    dlp_err_clear();
    dlp_err_set(DLP_ERR_INVALID, "src/core/x.c", 7, "bad thing");
    char buf[256] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    dlp_err_print(f);
    fclose(f);
    assert_string_equal(buf, "error: bad thing\n");  // no "at core/x.c:7" for users
    char *argv2[] = {"x", "--verbose", NULL};
    assert_int_equal(dlp_opts_parse(t, NULL, 2, argv2, NULL), DLP_OK);
    assert_int_equal(dlp_err_verbose(), 1);
    memset(buf, 0, sizeof buf);
    f = fmemopen(buf, sizeof buf, "w");
    dlp_err_print(f);
    fclose(f);
    assert_string_equal(buf, "error: bad thing\n  at core/x.c:7\n");
    dlp_err_set_verbose(0);
    dlp_err_clear();
}

static void test_opts(void **state) {
    (void)state;
    int batch = 0, flag = 0, prec = 0;
    int64_t lim = 0;
    double lr = 0;
    const char *data = NULL;
    dlp_opt t[] = {
        {"batch", 'b', DLP_OPT_INT, &batch, "32", NULL, "batch size", NULL, 0},
        {"data", 0, DLP_OPT_STR, &data, "synthetic", "DIR", "dataset", NULL, 0},
        {"read-limit", 0, DLP_OPT_SIZE, &lim, "0", NULL, "read rate", NULL, 0},
        {"lr", 0, DLP_OPT_DOUBLE, &lr, "0.1", NULL, "learning rate", NULL, 0},
        {"precision", 0, DLP_OPT_CHOICE, &prec, "fp32", NULL, "precision", "fp32|bf16|fp16", 0},
        {"verbose", 'v', DLP_OPT_FLAG, &flag, NULL, NULL, "more output", NULL, 0},
        {0},
    };
    char *argv[] = {"train", "-b", "64", "pos", "--read-limit", "200M", "--precision", "bf16", "-v", NULL};
    int rest = 0;
    assert_int_equal(dlp_opts_parse(t, NULL, 9, argv, &rest), DLP_OK);
    assert_int_equal(batch, 64);
    assert_string_equal(data, "synthetic");
    assert_int_equal(lim, 200LL << 20);
    assert_true(lr > 0.0999 && lr < 0.1001);
    assert_int_equal(prec, 1);
    assert_int_equal(flag, 1);
    assert_int_equal(rest, 8);
    assert_string_equal(argv[rest], "pos");
    assert_true(dlp_opt_given(t, "batch"));
    assert_false(dlp_opt_given(t, "lr"));
    json_t *j = dlp_opts_to_json(t);
    assert_string_equal(json_string_value(json_object_get(j, "precision")), "bf16");
    assert_int_equal(json_integer_value(json_object_get(j, "batch")), 64);
    json_decref(j);

    char *bad1[] = {"train", "--batch", "x12", NULL};
    assert_int_equal(dlp_opts_parse(t, NULL, 3, bad1, &rest), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "--batch"));
    char *bad2[] = {"train", "--precision", "fp64", NULL};
    assert_int_equal(dlp_opts_parse(t, NULL, 3, bad2, &rest), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "fp32|bf16|fp16"));
    char *bad3[] = {"train", "--nope", NULL};
    assert_int_equal(dlp_opts_parse(t, NULL, 2, bad3, &rest), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "--nope"));
    char *bad4[] = {"train", "--batch", NULL};
    assert_int_equal(dlp_opts_parse(t, NULL, 2, bad4, &rest), DLP_ERR_INVALID);
}

static void test_atomic_write(void **state) {
    (void)state;
    char dir[256], path[300];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.json", dir);
    assert_int_equal(dlp_write_atomic(path, "one", 3, DLP_WRITE_NOCLOBBER), DLP_OK);
    assert_int_equal(dlp_write_atomic(path, "two", 3, DLP_WRITE_NOCLOBBER), DLP_ERR_EXISTS);
    char *d;
    size_t n;
    assert_int_equal(dlp_read_file(path, &d, &n, 0), DLP_OK);
    assert_string_equal(d, "one");  // the existing file is untouched
    free(d);
    assert_int_equal(dlp_write_atomic(path, "three", 5, DLP_WRITE_REPLACE), DLP_OK);
    assert_int_equal(dlp_read_file(path, &d, &n, 0), DLP_OK);
    assert_string_equal(d, "three");
    assert_int_equal(n, 5);
    free(d);
    assert_int_equal(dlp_check_new_output(path, "--json"), DLP_ERR_EXISTS);
    FILE *f;
    assert_int_equal(dlp_fopen_new(path, &f), DLP_ERR_EXISTS);
    // no temporary files are left behind
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(dlp_read_file("/nonexistent/x", &d, &n, 0), DLP_ERR_NOTFOUND);
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    assert_int_equal(dlp_mkdirs(path), DLP_OK);
    assert_true(dlp_is_dir(path));
    dlp_test_rmtree(dir);
}

static void test_json_errors(void **state) {
    (void)state;
    char dir[256], path[300];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    assert_int_equal(dlp_write_atomic(path, "{\"a\": 1,\n \"b\": }", 17, 0), DLP_OK);
    json_t *j = NULL;
    assert_int_equal(dlp_json_load(path, &j), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "bad.json:2:"));
    snprintf(path, sizeof path, "%s/ok.json", dir);
    assert_int_equal(dlp_write_atomic(path, "{\"a\": 1.5, \"s\": \"x\"}", 20, 0), DLP_OK);
    assert_int_equal(dlp_json_load(path, &j), DLP_OK);
    double a;
    const char *s;
    int64_t i;
    assert_int_equal(dlp_json_get_num(j, "a", &a, "ok.json"), DLP_OK);
    assert_true(a == 1.5);
    assert_int_equal(dlp_json_get_str(j, "s", &s, "ok.json"), DLP_OK);
    assert_int_equal(dlp_json_get_int(j, "a", &i, "ok.json"), DLP_ERR_FORMAT);
    assert_int_equal(dlp_json_get_num(j, "missing_field", &a, "ok.json"), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "ok.json: field 'missing_field'"));
    assert_int_equal(dlp_json_opt_num(j, "absent", 7.0, &a, "ok.json"), DLP_OK);
    assert_true(a == 7.0);
    json_decref(j);
    dlp_test_rmtree(dir);
}

static void test_rng(void **state) {
    (void)state;
    dlp_rng a, b, c;
    dlp_rng_init(&a, 42, 7);
    dlp_rng_init(&b, 42, 7);
    dlp_rng_init(&c, 42, 8);
    int same = 0;
    double sum = 0, sq = 0;
    for (int k = 0; k < 1000; k++) {
        uint64_t x = dlp_rng_u64(&a);
        assert_true(x == dlp_rng_u64(&b));
        same += x == dlp_rng_u64(&c);
    }
    for (int k = 0; k < 100000; k++) {
        double n = dlp_rng_normal(&a);
        sum += n;
        sq += n * n;
        assert_true(dlp_rng_below(&b, 10) < 10);
    }
    assert_true(same < 3);
    assert_true(sum / 1e5 < 0.02 && sum / 1e5 > -0.02);
    assert_true(sq / 1e5 > 0.98 && sq / 1e5 < 1.02);
}

// core/stats: the order statistics every module uses (the loadgen, infer, monitor and probe tests check their
// callers' tables too).
static void test_stats(void **state) {
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    assert_true(fabs(dlp_stats_quantile_f64(v, 5, 0.95) - 4.8) < 1e-12);  // sorts v: 4 + 0.8 (5 - 4)
    assert_true(v[0] == 1 && v[4] == 5);
    assert_true(dlp_stats_quantile_f64(v, 5, 0) == 1 && dlp_stats_quantile_f64(v, 5, 1) == 5);
    assert_true(isnan(dlp_stats_quantile_f64(v, 0, 0.5)));
    float f[] = {3, 1, 2, 4};
    assert_true(fabs(dlp_stats_quantile_f32(f, 4, 0.5) - 2.5) < 1e-12);
    const double m[] = {9, 1, 5, 3};
    assert_true(dlp_stats_median_f64(m, 4) == 4 && dlp_stats_median_f64(m, 3) == 5 && dlp_stats_median_f64(m, 0) == 0);
    assert_true(m[0] == 9);  // left unchanged
    int64_t r[10];
    for (int i = 0; i < 10; i++) r[i] = 10 - i;
    dlp_stats_sort_i64(r, 10);
    assert_true(r[0] == 1 && r[9] == 10);
    // MLPerf: sorted[floor(n p)], clamped
    assert_true(dlp_stats_rank_i64(r, 10, 0.5) == 6 && dlp_stats_rank_i64(r, 10, 0.99) == 10 &&
                dlp_stats_rank_i64(r, 10, 1.5) == 10 && dlp_stats_rank_i64(r, 10, -1) == 1 && dlp_stats_rank_i64(r, 0, 0.5) == 0);
    // top-k: best first, ties to the lower index, non-finite logits never chosen, probabilities over the finite ones
    const float lg[] = {1, 3, NAN, 3, INFINITY, 0};
    int c[6];
    float p[6];
    dlp_stats_topk(lg, 6, 6, c, p);
    assert_true(c[0] == 1 && c[1] == 3 && c[2] == 0 && c[3] == 5 && c[4] == -1 && c[5] == -1);
    assert_true(fabs(p[0] + p[1] + p[2] + p[3] - 1) < 1e-6 && p[4] == 0 && p[0] == p[1]);
    c[0] = 7;
    dlp_stats_topk(lg, 6, 0, c, p);  // k = 0: nothing written
    assert_int_equal(c[0], 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_chain), cmocka_unit_test(test_stats), cmocka_unit_test(test_parse_size), cmocka_unit_test(test_opts), cmocka_unit_test(test_opts_verbose),
        cmocka_unit_test(test_atomic_write), cmocka_unit_test(test_json_errors), cmocka_unit_test(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
