// Unit tests for perf/evaluate's summary: the figures read from the stages' results, the bottleneck verdict (rows:
// pipeline-bound, balanced, compute on a CPU and on a GPU, a missing stage), the price per million images through
// perf/cost, and the catalog rows.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "perf/evaluate.h"

#define assert_double_equal(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

typedef struct {
    double prep, train;
    const char *stall;  // the train stage's stall.verdict
    int is_gpu, have_data;
    const char *bottleneck;  // NULL: no verdict
    const char *text;        // the start of the verdict's text
} verdict_case;

static json_t *train_result(double rate, const char *verdict) {
    return json_pack("{s:{s:f}, s:{s:f, s:s}, s:{s:f, s:f}, s:{s:i, s:i}}", "throughput", "steady_img_per_s", rate,
                     "stall", "data_wait_frac", 0.05, "verdict", verdict, "gflop", "achieved_per_s", 123.0,
                     "fraction_of_peak", 0.5, "threads", "compute", 2, "loader", 1);
}

static void test_verdict(void **state) {
    (void)state;
    static const verdict_case cases[] = {
        {400, 100, "pipeline-bound", 0, 1, "input pipeline", "the input pipeline: training waited"},
        {110, 100, "compute-bound", 0, 1, "balanced", "balanced: compute took 100 img/s"},
        {400, 100, "compute-bound", 0, 1, "compute", "compute: the loader kept up; the input pipeline alone could feed 4.0x"},
        {400, 100, "compute-bound", 1, 1, "compute", "the device's compute: the loader kept up (it alone delivers 4.0x"},
        {400, 100, "compute-bound", 0, 0, NULL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const verdict_case *c = &cases[i];
        dlp_eval_cfg cfg = {.is_gpu = c->is_gpu, .infer_batches = {1}, .n_infer_batches = 1, .usd_per_hour = 1.8};
        dlp_eval ev;
        memset(&ev, 0, sizeof ev);
        if (c->have_data)
            ev.stage[DLP_EVAL_DATA].result = json_pack("{s:[{s:i, s:f}, {s:i, s:f}]}", "runs", "workers", 1,
                                                       "img_per_s", c->prep / 2, "workers", 2, "img_per_s", c->prep);
        ev.stage[DLP_EVAL_TRAIN].result = train_result(c->train, c->stall);
        dlp_eval_summary s;
        assert_int_equal(dlp_eval_summarize(&cfg, &ev, &s), DLP_OK);
        if (c->bottleneck) {
            assert_non_null(s.bottleneck);
            assert_string_equal(s.bottleneck, c->bottleneck);
            assert_true(strncmp(s.bottleneck_text, c->text, strlen(c->text)) == 0);
            assert_double_equal(s.prep_over_train, c->prep / c->train, 1e-12);
            assert_int_equal(s.prep_workers, 2);
            assert_double_equal(s.prep_img_per_s_one_thread, c->prep / 2, 1e-9);
        } else {
            assert_null(s.bottleneck);
        }
        // $1.80/h at 100 img/s: 1.8 / 360000 * 1e6 = $5 per million
        assert_double_equal(s.usd_per_million_train_images, 5.0, 1e-12);
        assert_true(isnan(s.usd_per_million_inferences));  // no infer stage
        json_t *j = dlp_eval_summary_json(&s);
        assert_int_equal(json_object_get(j, "bottleneck") != NULL, c->bottleneck != NULL);
        assert_non_null(json_object_get(j, "usd_per_million_train_images"));
        json_decref(j);
        dlp_eval_summary_free(&s);
        dlp_eval_free(&ev);
    }
}

static void test_infer_and_compare(void **state) {
    (void)state;
    dlp_eval_cfg cfg = {.infer_batches = {1, 32}, .n_infer_batches = 2};  // no price
    dlp_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.stage[DLP_EVAL_INFER].result = json_pack(
        "{s:[{s:i, s:f, s:{s:f, s:f}}, {s:i, s:f, s:{s:f, s:f}}]}", "results", "batch", 1, "images_per_s", 50.0,
        "latency_ms", "p50", 20.0, "p99", 25.0, "batch", 32, "images_per_s", 300.0, "latency_ms", "p50", 100.0, "p99", 120.0);
    ev.stage[DLP_EVAL_PREDICT].result = json_pack("{s:[{s:{s:s}, s:{s:f, s:f, s:s}, s:{s:f}}]}", "predictions", "machine",
                                                  "id", "dgx-a100", "prediction", "img_per_s", 20000.0, "epoch_s", 64.0,
                                                  "bottleneck", "compute", "cost", "usd_per_million_images", 0.4);
    dlp_eval_summary s;
    assert_int_equal(dlp_eval_summarize(&cfg, &ev, &s), DLP_OK);
    assert_true(s.have_infer);
    assert_double_equal(s.infer_img_per_s, 300.0, 0);
    assert_int_equal(s.infer_batch, 32);
    assert_int_equal(s.latency_batch, 1);
    assert_double_equal(s.latency_p50_ms, 20.0, 0);
    assert_double_equal(s.latency_p99_ms, 25.0, 0);
    assert_true(isnan(s.usd_per_million_inferences));
    assert_int_equal(s.n_compare, 1);
    assert_string_equal(s.compare[0].id, "dgx-a100");
    assert_string_equal(s.compare[0].bottleneck, "compute");
    assert_double_equal(s.compare[0].usd_per_million_images, 0.4, 0);
    json_t *j = dlp_eval_summary_json(&s);
    assert_null(json_object_get(j, "usd_per_hour"));  // not priced
    assert_int_equal(json_array_size(json_object_get(j, "compare")), 1);
    json_decref(j);
    dlp_eval_summary_free(&s);
    dlp_eval_free(&ev);
}

// The online phase per precision (dlperf run --online-precisions): the served precision's best batch first, each
// other one measured at that batch, each priced through perf/cost; a stage that failed is said, not priced.
static void test_online_cost(void **state) {
    (void)state;
    dlp_eval_cfg cfg = {.precision = DLP_DTYPE_BF16, .infer_batches = {1, 32}, .n_infer_batches = 2, .usd_per_hour = 1.8,
                        .online_precisions = {DLP_DTYPE_F32, DLP_DTYPE_I8, DLP_DTYPE_F16}, .n_online = 3};
    dlp_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.stage[DLP_EVAL_INFER].result = json_pack("{s:[{s:i, s:f}, {s:i, s:f}]}", "results", "batch", 1, "images_per_s",
                                                40.0, "batch", 32, "images_per_s", 100.0);
    ev.online[0].result = json_pack("{s:[{s:i, s:f}]}", "results", "batch", 32, "images_per_s", 50.0);
    ev.online[1].result = json_pack("{s:[{s:i, s:f}]}", "results", "batch", 32, "images_per_s", 200.0);
    ev.online[2].rc = 1;  // failed: no result
    dlp_eval_summary s;
    assert_int_equal(dlp_eval_summarize(&cfg, &ev, &s), DLP_OK);
    assert_int_equal(s.n_online, 4);
    static const struct { dlp_dtype p; int have; double img_per_s, usd; } want[] = {
        {DLP_DTYPE_BF16, 1, 100, 5.0}, {DLP_DTYPE_F32, 1, 50, 10.0}, {DLP_DTYPE_I8, 1, 200, 2.5}, {DLP_DTYPE_F16, 0, NAN, NAN}};
    for (int k = 0; k < 4; k++) {  // $1.80/h at 100 img/s: $5 per million
        assert_int_equal(s.online[k].precision, want[k].p);
        assert_int_equal(s.online[k].served, k == 0);
        assert_int_equal(s.online[k].have, want[k].have);
        if (want[k].have) {
            assert_int_equal(s.online[k].batch, 32);
            assert_double_equal(s.online[k].img_per_s, want[k].img_per_s, 0);
            assert_double_equal(s.online[k].usd_per_million_images, want[k].usd, 1e-12);
        } else {
            assert_true(isnan(s.online[k].usd_per_million_images));
            assert_string_equal(s.online[k].why, "not measured (the stage failed: see above)");
        }
    }
    json_t *j = dlp_eval_summary_json(&s);
    const json_t *arr = json_object_get(json_object_get(j, "online_cost"), "precisions");
    assert_int_equal(json_array_size(arr), 4);
    const json_t *i8 = json_array_get(arr, 2);
    assert_string_equal(json_string_value(json_object_get(i8, "precision")), "int8");
    assert_double_equal(json_real_value(json_object_get(i8, "x_served")), 2.0, 1e-12);
    assert_double_equal(json_real_value(json_object_get(i8, "usd_per_million_images")), 2.5, 1e-12);
    assert_true(json_is_null(json_object_get(json_array_get(arr, 3), "img_per_s")));
    assert_non_null(json_object_get(json_array_get(arr, 3), "not_measured"));
    json_decref(j);
    dlp_eval_summary_free(&s);
    dlp_eval_free(&ev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_infer_and_compare),
        cmocka_unit_test(test_online_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
