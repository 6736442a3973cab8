// Unit tests for loadgen/search.c: the Server search converging on a SUT of known capacity.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "loadgen/loadgen.h"
#include "loadgen_suts.h"

static void on_trial(void *ctx, const dlp_lg_trial *t, int i) {
    (void)ctx;
    fprintf(stderr, "  trial %d: %.1f QPS -> %s (p99 %.2f ms, %.1f samples/s) %s\n", i, t->target_qps,
            t->valid ? "VALID" : "INVALID", t->p99_ns == INT64_MAX ? -1.0 : dlp_ns_to_ms(t->p99_ns),
            t->completed_samples_per_s, t->reason);
}

static void test_server_search(void **state) {
    (void)state;
    // One server of capacity 1000 samples/s (1 ms each, one at a time) and a loose 150 ms bound (threads on
    // this shared machine stall for tens of ms, so a tight bound would measure the machine, not the SUT).
    // Below capacity the 99th percentile stays far under 150 ms; past it the backlog grows by (rate - 1000)
    // samples per second of schedule, i.e. by 1 ms of latency per sample: at 1.25x capacity over a >= 1 s
    // trial the late samples pass 250 ms. So the highest VALID rate must lie within [0.75, 1.25] x capacity.
    // Trials share one schedule seed, so validity falls monotonically with the rate.
    const double cap = 1000;
    delay_sut *d;
    dlp_lg_sut sut = lgt_delay_sut_new(0, &d);
    d->service_ns = 1000000;
    dlp_lg_settings s;
    lgt_fast_settings(&s, DLP_LG_SERVER);
    s.target_latency_ns = 150 * MS;
    s.min_query_count = 500;
    s.min_duration_ns = 1000 * MS;
    dlp_lg_search_cfg c = {.start_qps = 500, .tolerance = 0.05, .budget_ns = 20000 * MS, .max_trials = 20,
                           .on_trial = on_trial};
    dlp_lg_search_result sr;
    int64_t t0 = dlp_now_ns();
    assert_int_equal(dlp_lg_search(&s, &sut, &c, &sr), DLP_OK);
    double took = dlp_ns_to_s(dlp_now_ns() - t0);
    fprintf(stderr, "  search: best %.1f QPS, lowest INVALID %.1f, %d trials, %.1f s: %s\n", sr.best_qps, sr.hi_qps,
            sr.ntrials, took, sr.stop_reason);
    assert_true(sr.found);
    assert_true(sr.converged);
    assert_true(sr.best_qps >= 0.75 * cap && sr.best_qps <= 1.25 * cap);
    assert_true(sr.hi_qps > sr.best_qps && sr.hi_qps / sr.best_qps - 1 <= 0.05 + 1e-9);
    assert_true(sr.best.valid);
    assert_true(fabs(sr.best.settings.target_qps - sr.best_qps) < 1e-9);
    for (int i = 0; i < sr.ntrials; i++) {
        if (sr.trials[i].target_qps >= 1.5 * cap) assert_false(sr.trials[i].valid);
        assert_int_equal(sr.trials[i].valid, sr.trials[i].target_qps <= sr.best_qps);  // monotone
        if (sr.trials[i].valid) assert_true(sr.trials[i].p99_ns <= 150 * MS);
        // Overloaded trials complete at the SUT's capacity: the known 1000 samples/s.
        if (sr.trials[i].target_qps >= 1.25 * cap)
            assert_true(sr.trials[i].completed_samples_per_s > 0.9 * cap &&
                        sr.trials[i].completed_samples_per_s < 1.02 * cap);
    }
    assert_true(took < 20.5);
    json_t *j = dlp_lg_search_to_json(&sr);
    assert_int_equal((int)json_array_size(json_object_get(j, "trials")), sr.ntrials);
    json_decref(j);
    dlp_lg_search_result_free(&sr);
    // A budget too small for a second trial stops after the first, saying so.
    c.budget_ns = 100 * MS;
    assert_int_equal(dlp_lg_search(&s, &sut, &c, &sr), DLP_OK);
    assert_int_equal(sr.ntrials, 1);
    assert_non_null(strstr(sr.stop_reason, "budget"));
    dlp_lg_search_result_free(&sr);
    dlp_lg_sut_destroy(&sut);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
