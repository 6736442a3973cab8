// Unit tests for loadgen/session.c: the log directory's names and the no-overwrite check, config files read with
// the keys dlperf does not use reported, the service check, and the sweep and accuracy JSON.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "loadgen/session.h"
#include "testutil.h"

static void test_logs_dir(void **state) {
    (void)state;
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    char d[256];
    dlp_lg_logs_default_dir(&s, d, sizeof d);
    assert_true(strncmp(d, "mlperf_logs/Server-PerformanceOnly-", 35) == 0);
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    assert_int_equal(dlp_lg_logs_prepare(dir), DLP_OK);
    snprintf(path, sizeof path, "%s/mlperf_log_detail.txt", dir);
    assert_int_equal(dlp_write_atomic(path, "x", 1, DLP_WRITE_NOCLOBBER), DLP_OK);
    assert_int_equal(dlp_lg_logs_prepare(dir), DLP_ERR_EXISTS);  // never over an earlier run's logs
    assert_non_null(strstr(dlp_err_msg(), "mlperf_log_detail.txt"));
    dlp_err_clear();
    dlp_test_rmtree(dir);
}

static void test_conf_file(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/user.conf", dir);
    static const char conf[] = "*.Server.target_qps = 42\nresnet50.Server.coalesce_queries = 1\n";
    assert_int_equal(dlp_write_atomic(path, conf, strlen(conf), DLP_WRITE_NOCLOBBER), DLP_OK);
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    unsigned mask = 0;
    char ignored[256];
    assert_int_equal(dlp_lg_conf_apply_file(path, "resnet50", &s, &mask, ignored, sizeof ignored), DLP_OK);
    assert_true(s.target_qps == 42 && (mask & DLP_LG_CONF_TARGET_QPS));
    assert_non_null(strstr(ignored, "coalesce_queries"));
    assert_null(strchr(ignored, '\n'));  // one line
    snprintf(path, sizeof path, "%s/missing.conf", dir);
    assert_int_not_equal(dlp_lg_conf_apply_file(path, "resnet50", &s, &mask, ignored, sizeof ignored), DLP_OK);
    dlp_err_clear();
    dlp_test_rmtree(dir);
}

// Port 1 on the loopback: nothing listens there, which is an error naming the URL.
static void test_url_check(void **state) {
    (void)state;
    assert_int_not_equal(dlp_lg_url_check("http://127.0.0.1:1/v1/classify", 500), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "127.0.0.1:1"));
    dlp_err_clear();
    assert_int_not_equal(dlp_lg_url_check("ftp://x", 500), DLP_OK);
    dlp_err_clear();
}

static void test_sweep_json(void **state) {
    (void)state;
    dlp_lg_sweep_point p[2] = {{.level = 1, .stable = 1, .windows = 3, .count = 10, .infer_per_s = 5, .p99_ns = 2e6},
                               {.level = 2, .stable = 0, .windows = 10, .count = 20, .failed = 1}};
    json_t *a = dlp_lg_sweep_to_json(p, 2, 0);
    assert_int_equal(json_array_size(a), 2);
    json_t *e = json_array_get(a, 0);
    assert_true(json_real_value(json_object_get(e, "concurrency")) == 1);
    assert_true(json_is_true(json_object_get(e, "stable")));
    assert_true(json_real_value(json_object_get(e, "p99_ms")) == 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 1), "failed")), 1);
    json_decref(a);
    a = dlp_lg_sweep_to_json(p, 1, 1);
    assert_non_null(json_object_get(json_array_get(a, 0), "request_rate"));
    json_decref(a);
}

static int32_t label_of(void *ctx, uint32_t idx) {
    (void)ctx;
    return idx < 3 ? (int32_t)idx : -1;  // samples 0..2 labelled with their index; the others unknown
}

// Top-1 over the labelled samples; no JSON for a timed run.
static void test_accuracy_json(void **state) {
    (void)state;
    dlp_lg_accuracy_entry acc[4] = {{.qsl_idx = 0, .top1 = 0}, {.qsl_idx = 1, .top1 = 5}, {.qsl_idx = 2, .top1 = 2},
                                    {.qsl_idx = 7, .top1 = 7}};
    dlp_lg_result r;
    memset(&r, 0, sizeof r);
    r.accuracy = acc;
    r.naccuracy = 4;
    int64_t good, total;
    r.settings.mode = DLP_LG_PERFORMANCE;
    assert_null(dlp_lg_accuracy_json(&r, label_of, NULL, &good, &total));
    r.settings.mode = DLP_LG_ACCURACY;
    json_t *j = dlp_lg_accuracy_json(&r, label_of, NULL, &good, &total);
    assert_true(good == 2 && total == 3);
    assert_int_equal(json_integer_value(json_object_get(j, "logged")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "labelled")), 3);
    assert_true(json_real_value(json_object_get(j, "top1")) == 2.0 / 3.0);
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logs_dir),
        cmocka_unit_test(test_conf_file),
        cmocka_unit_test(test_url_check),
        cmocka_unit_test(test_sweep_json),
        cmocka_unit_test(test_accuracy_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
