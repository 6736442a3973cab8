// Unit tests for loadgen/scenarios.c: the registry of scenarios.
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
#include "loadgen/scenario.h"

// The registry: every scenario's table is complete and reachable by its name, the built-in four keep their
// indices, names, defaults and their place in the CLI's choice string. (Written so that adding a scenario
// needs no edit here.)
static void test_scenario_registry(void **state) {
    (void)state;
    int n = dlp_lg_scenario_count();
    assert_true(n >= 4);
    const char *choices = dlp_lg_scenario_choices();
    assert_int_equal(strncmp(choices, "SingleStream|MultiStream|Server|Offline", 39), 0);
    assert_true(choices[39] == '\0' || choices[39] == '|');
    static const struct { dlp_lg_scenario sc; const char *name; int spq; int64_t minq; double p; int search; } want[] = {
        {DLP_LG_SINGLE_STREAM, "SingleStream", 1, 64, 0.90, 0},
        {DLP_LG_MULTI_STREAM, "MultiStream", 8, 662, 0.99, 0},
        {DLP_LG_SERVER, "Server", 1, 500, 0.99, 1},
        {DLP_LG_OFFLINE, "Offline", 1, 256, 0.99, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(dlp_lg_scenario_name(want[i].sc), want[i].name);
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, want[i].sc);
        assert_int_equal(s.samples_per_query, want[i].spq);
        assert_int_equal(s.min_query_count, want[i].minq);
        assert_true(fabs(s.target_latency_percentile - want[i].p) < 1e-12);
        assert_int_equal(dlp_lg_scenario_searchable(want[i].sc), want[i].search);
    }
    for (int i = 0; i < n; i++) {
        const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of((dlp_lg_scenario)i);
        assert_non_null(ops);
        assert_non_null(ops->name);
        assert_non_null(ops->aliases);
        assert_non_null(ops->aliases[0]);
        assert_non_null(ops->issue);
        assert_non_null(ops->measure);
        assert_non_null(ops->metric_sep);
        dlp_lg_scenario sc = (dlp_lg_scenario)-1;
        assert_int_equal(dlp_lg_scenario_parse(ops->name, &sc), DLP_OK);
        assert_int_equal(sc, i);
        for (const char *const *a = ops->aliases; *a; a++) {
            assert_int_equal(dlp_lg_scenario_parse(*a, &sc), DLP_OK);
            assert_int_equal(sc, i);
        }
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, (dlp_lg_scenario)i);
        assert_int_equal(dlp_lg_settings_check(&s), DLP_OK);
    }
    dlp_lg_scenario sc;
    assert_int_equal(dlp_lg_scenario_parse("ss", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_SINGLE_STREAM);
    assert_int_equal(dlp_lg_scenario_parse("OFFLINE", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_OFFLINE);
    assert_int_equal(dlp_lg_scenario_parse("stream", &sc), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "use SingleStream, MultiStream, Server"));
    dlp_err_clear();
    assert_null(dlp_lg_scenario_ops_of((dlp_lg_scenario)n));
    assert_string_equal(dlp_lg_scenario_name((dlp_lg_scenario)n), "?");
    assert_int_equal(dlp_lg_scenario_searchable((dlp_lg_scenario)n), 0);
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    s.scenario = (dlp_lg_scenario)n;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_err_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenario_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
