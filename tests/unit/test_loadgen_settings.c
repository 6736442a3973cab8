// Unit tests for loadgen/settings.c: the defaults and their checks, MLPerf's minimums (from each scenario's table).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

#define MS 1000000LL

static void test_settings(void **state) {
    (void)state;
    dlp_lg_settings s;
    dlp_lg_scenario sc;
    assert_int_equal(dlp_lg_scenario_parse("Server", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_SERVER);
    assert_int_equal(dlp_lg_scenario_parse("multistream", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_MULTI_STREAM);
    assert_int_equal(dlp_lg_scenario_parse("bogus", &sc), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "bogus"));
    dlp_lg_settings_default(&s, DLP_LG_MULTI_STREAM);
    assert_int_equal(s.samples_per_query, 8);
    assert_true(fabs(s.target_latency_percentile - 0.99) < 1e-12);
    assert_int_equal(s.target_latency_ns, 15 * MS);
    dlp_lg_settings_default(&s, DLP_LG_SINGLE_STREAM);
    assert_true(fabs(s.target_latency_percentile - 0.90) < 1e-12);
    assert_int_equal(dlp_lg_settings_check(&s), DLP_OK);
    s.target_latency_percentile = 1.0;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    s.target_qps = 0;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_err_clear();
}


// MLPerf's minimums: our defaults break them (and say which), dlp_lg_settings_mlperf meets them.
static void test_mlperf_rules(void **state) {
    (void)state;
    for (int sc = 0; sc < 4; sc++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, (dlp_lg_scenario)sc);
        char lines[8][160];
        int n = dlp_lg_settings_mlperf_breaks(&s, lines, 8);
        assert_true(n >= 1);
        assert_non_null(strstr(lines[0], "min_duration 10000 ms < 600000 ms"));
        dlp_lg_settings_mlperf(&s);
        assert_int_equal(dlp_lg_settings_mlperf_breaks(&s, lines, 8), 0);
        if (sc == DLP_LG_OFFLINE) assert_int_equal(s.min_query_count, 24576);
        if (sc == DLP_LG_SERVER) assert_int_equal(s.target_latency_ns, 15 * MS);
        s.target_latency_ns = 20 * MS;
        if (sc == DLP_LG_SERVER) {
            assert_int_equal(dlp_lg_settings_mlperf_breaks(&s, lines, 8), 1);
            assert_non_null(strstr(lines[0], "target_latency 20.000 ms > 15 ms"));
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_mlperf_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
