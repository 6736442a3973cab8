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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_infer_and_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
