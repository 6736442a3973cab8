// Unit tests for loadgen/run.c and the scenarios it runs (scenario_*.c): each scenario's issuing rules,
// VALID/INVALID verdicts, latency counted from the scheduled time, lost and duplicate answers, failures.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "core/clock.h"
#include "loadgen/loadgen.h"
#include "loadgen_suts.h"

static void test_single_stream(void **state) {
    (void)state;
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(2 * MS, &d);
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_query_count = 80;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    // One query of one sample at a time, the next only after the previous answer.
    assert_int_equal(d->max_outstanding, 1);
    assert_int_equal(d->max_call_samples, 1);
    assert_true(r.queries_issued >= 80);
    assert_true(r.last_issued_ns >= 200 * MS);
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], r.samples_issued);
    assert_true(r.valid);
    assert_true(r.early_stopping_met);
    // Every latency is at least the SUT's 2 ms; the metric is the 90th percentile.
    assert_true(r.sample_latency.min_ns >= 2 * MS);
    assert_true(r.metric_value >= 2e6 && r.metric_value < 200e6);
    assert_true(r.metric_value == (double)r.sample_latency.p90_ns);
    assert_true(r.qps_without_overhead > 10 && r.qps_without_overhead <= 500);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Scenario : SingleStream"));
    assert_non_null(strstr(txt, "90.0th percentile latency (ns) : "));
    assert_non_null(strstr(txt, "Result is : VALID"));
    free(txt);
    dlp_lg_result_free(&r);
    // Too few queries for early stopping at p90: INVALID with the reason.
    s.min_query_count = 20;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_false(r.valid);
    assert_false(r.early_stopping_met);
    assert_non_null(strstr(r.reasons[0], "at least 64 queries"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_multi_stream(void **state) {
    (void)state;
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(1 * MS, &d);
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_MULTI_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 662;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(d->max_outstanding, 8);
    assert_int_equal(d->max_call_samples, 8);
    assert_int_equal(d->min_call_samples, 8);
    assert_int_equal(r.queries_issued, 662);
    assert_int_equal(r.samples_issued, 662 * 8);
    assert_true(r.valid);
    // The metric is the 99th percentile of query latency (the last of its 8 answers).
    assert_int_equal(r.query_latency.count, 662);
    assert_true(r.metric_value == (double)r.query_latency.p99_ns);
    assert_true(r.query_latency.p99_ns >= r.sample_latency.p50_ns);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "99.0th percentile latency (ns) : "));
    assert_non_null(strstr(txt, "Per-query latency:"));
    free(txt);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_offline(void **state) {
    (void)state;
    rate_engine e = {.service_ns = 250000};  // 4000 samples/s, in batches of up to 16
    dlp_lg_sut sut = lgt_rate_sut_new(&e, 16);
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_OFFLINE);
    s.target_qps = 4000;
    s.min_duration_ns = 250 * MS;
    s.min_query_count = 512;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    // One query with every sample: max(512, 4000 * 0.25 s * 1.1) = 1100.
    assert_int_equal(r.queries_issued, 1);
    assert_int_equal(r.samples_issued, 1100);
    assert_int_equal(e.samples, 1100);
    assert_true(e.calls >= 1100 / 16);  // the worker took at most 16 at a time
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], 1100);
    // Samples/s is the SUT's capacity (within 40% below: this machine is shared and threads stall).
    assert_true(r.metric_value > 2400 && r.metric_value <= 4100);
    assert_true(r.valid);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Samples per second: "));
    free(txt);
    dlp_lg_result_free(&r);
    // Offline in batches of 100: 11 queries, all scheduled at the start.
    s.offline_batch = 100;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.queries_issued, 11);
    assert_true(r.issue_lag.max_ns < 100 * MS);
    dlp_lg_result_free(&r);
    // A SUT faster than expected: the run ends before the min duration -> INVALID, with MLPerf's advice.
    s.offline_batch = 0;
    s.target_qps = 100;
    s.min_query_count = 16;
    s.min_duration_ns = 500 * MS;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.samples_issued, 55);
    assert_false(r.min_duration_met);
    assert_false(r.valid);
    assert_non_null(strstr(r.reasons[0], "min duration"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_server_valid_invalid(void **state) {
    (void)state;
    // A pure 5 ms delay under a 200 ms bound (loose: threads on this shared machine stall for tens of ms):
    // VALID whatever the rate.
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(5 * MS, &d);
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SERVER);
    s.target_latency_ns = 200 * MS;
    s.target_qps = 1000;
    s.min_query_count = 600;
    s.min_duration_ns = 300 * MS;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.valid);
    assert_true(r.perf_constraints_met);
    assert_int_equal(d->max_call_samples, 1);
    // The schedule: until both minimums are met; the scheduled rate is the target within Poisson noise.
    assert_true(r.queries_issued >= 600);
    assert_true(r.last_scheduled_ns >= 300 * MS);
    assert_true(fabs(r.scheduled_samples_per_s / 1000 - 1) < 0.15);
    assert_true(d->max_outstanding > 1);  // arrivals overlap: not closed-loop
    assert_true(r.sample_latency.min_ns >= 5 * MS);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Scheduled samples per second : "));
    assert_non_null(strstr(txt, "Performance constraints satisfied : Yes"));
    assert_non_null(strstr(txt, "Early Stopping Result:\n * Run successful."));
    free(txt);
    json_t *j = dlp_lg_result_to_json(&r);
    assert_true(json_is_true(json_object_get(j, "valid")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "samples"), "ok")), r.samples_issued);
    json_decref(j);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);

    // A pure 250 ms delay: every sample is over the bound -> INVALID, "reduce the target QPS".
    sut = lgt_delay_sut_new(250 * MS, &d);
    s.target_qps = 500;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_false(r.valid);
    assert_false(r.perf_constraints_met);
    assert_false(r.early_stopping_met);
    assert_int_equal(r.overlatency_count, r.samples_issued);
    assert_non_null(strstr(r.reasons[0], "exceeds the bound 200.000 ms"));
    txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Result is : INVALID"));
    assert_non_null(strstr(txt, "Recommendations:"));
    free(txt);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_latency_from_schedule(void **state) {
    (void)state;
    // The SUT answers at once but stalls the issuing thread for 60 ms once: the queries scheduled during the
    // stall are issued late and that lateness is their latency (MLPerf counts from the scheduled time).
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(0, &d);
    d->stall_call = 50;
    d->stall_ns = 60 * MS;
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SERVER);
    s.target_qps = 1000;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.issue_lag.max_ns >= 50 * MS);
    assert_true(r.sample_latency.max_ns >= 50 * MS);
    assert_true(r.sample_latency.p50_ns < 10 * MS);
    // About 60 queries were scheduled inside the stall; those over 15 ms late make it INVALID at p99.
    assert_true(r.overlatency_count >= 20);
    assert_false(r.valid);
    assert_true(r.nwarnings >= 1);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_lost_and_duplicates(void **state) {
    (void)state;
    // Samples the SUT never answers: the run gives up after the idle timeout and counts them lost.
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(1 * MS, &d);
    d->drop_every = 50;
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SERVER);
    s.target_qps = 2000;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    s.idle_timeout_ns = 300 * MS;
    dlp_lg_result r;
    int64_t t0 = dlp_now_ns();
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(dlp_now_ns() - t0 < 3000 * MS);
    assert_int_equal(r.samples_lost, r.samples_issued / 50);
    assert_int_equal(r.samples_lost + r.samples_by_outcome[DLP_LG_OK], r.samples_issued);
    assert_false(r.none_lost);
    assert_false(r.valid);
    int found = 0;
    for (int i = 0; i < r.nreasons; i++) found |= strstr(r.reasons[i], "never answered") != NULL;
    assert_true(found);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);  // answers the dropped ones now: the harness must ignore them safely

    // A sample answered twice is a SUT bug, reported.
    sut = lgt_delay_sut_new(0, &d);
    d->answer_twice_id = 7;
    lgt_fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_query_count = 64;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.duplicate_responses, 1);
    assert_false(r.valid);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_failures_and_max_queries(void **state) {
    (void)state;
    // An engine failing one call in 10: those samples are ERROR; INVALID unless the allowed fraction covers it.
    rate_engine e = {.service_ns = 100000, .fail_every = 10};
    dlp_lg_sut sut = lgt_rate_sut_new(&e, 1);
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 200;
    s.sample_count = 100;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.samples_by_outcome[DLP_LG_ERROR] > 0);
    assert_int_equal(r.samples_by_outcome[DLP_LG_ERROR] + r.samples_by_outcome[DLP_LG_OK], 200);
    assert_false(r.valid);
    assert_non_null(strstr(r.reasons[r.nreasons - 1], "samples failed"));
    int64_t errors = r.samples_by_outcome[DLP_LG_ERROR];
    dlp_lg_result_free(&r);
    s.max_failed_fraction = 0.5;
    s.early_stopping = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.samples_by_outcome[DLP_LG_ERROR], errors);  // same sample seed, same samples
    assert_true(r.valid);
    dlp_lg_result_free(&r);
    // max_query_count stops issuing before the minimums: INVALID, saying why.
    s.max_failed_fraction = 0;
    e.fail_every = 0;
    s.min_duration_ns = 5000 * MS;
    s.max_query_count = 30;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.queries_issued, 30);
    assert_false(r.valid);
    assert_false(r.min_duration_met);
    assert_false(r.min_queries_met);
    assert_non_null(strstr(r.stop_reason, "max query count"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_stream),
        cmocka_unit_test(test_multi_stream),
        cmocka_unit_test(test_offline),
        cmocka_unit_test(test_server_valid_invalid),
        cmocka_unit_test(test_latency_from_schedule),
        cmocka_unit_test(test_lost_and_duplicates),
        cmocka_unit_test(test_failures_and_max_queries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
