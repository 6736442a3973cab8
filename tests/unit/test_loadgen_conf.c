// Unit tests for loadgen/conf.c: LoadGen's config files (mlperf.conf, user.conf).
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

// LoadGen's config files: precedence (model.scenario > *.scenario > model.* > *.*, later lines win), units
// (ms, percent), the keys of other scenarios left alone, and errors naming the line.
static void test_user_conf(void **state) {
    (void)state;
    static const char conf[] =
        "# comment line\n"
        "*.*.min_duration = 100       # ms\n"
        "resnet50.*.min_duration = 200\n"
        "*.Server.min_duration = 300\n"
        "resnet50.Server.min_duration = 400\n"
        "resnet50.Server.min_duration = 450\n"   // the later line wins
        "*.Server.target_qps = 123.5\n"
        "resnet50.Server.target_latency = 7\n"   // ms
        "*.Server.target_latency_percentile = 97\n"
        "*.Offline.target_qps = 9999\n"           // another scenario: not read
        "bert.Server.min_query_count = 5\n"       // another model: not read
        "*.*.schedule_rng_seed = 0x10\n"
        "resnet50.Server.coalesce_queries = 1\n"; // a LoadGen key dlperf does not use
    static const struct {
        const char *model;
        dlp_lg_scenario sc;
        int64_t min_dur_ms;
        double qps;
    } rows[] = {
        {"resnet50", DLP_LG_SERVER, 450, 123.5},
        {"other", DLP_LG_SERVER, 300, 123.5},
        {"resnet50", DLP_LG_OFFLINE, 200, 9999},
        {"other", DLP_LG_SINGLE_STREAM, 100, 10},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, rows[i].sc);
        unsigned mask = 0;
        char ignored[256];
        assert_int_equal(dlp_lg_conf_apply(conf, rows[i].model, &s, &mask, ignored, sizeof ignored), DLP_OK);
        assert_int_equal(s.min_duration_ns, rows[i].min_dur_ms * MS);
        assert_true(fabs(s.target_qps - rows[i].qps) < 1e-9);
        assert_int_equal(s.schedule_seed, 16);
        assert_true(mask & DLP_LG_CONF_MIN_DURATION);
        assert_non_null(strstr(ignored, "resnet50.Server.coalesce_queries"));
        if (rows[i].sc == DLP_LG_SERVER) {
            assert_true(fabs(s.target_latency_percentile - 0.97) < 1e-12);
            if (strcmp(rows[i].model, "resnet50") == 0) assert_int_equal(s.target_latency_ns, 7 * MS);
            assert_int_not_equal(s.min_query_count, 5);
        }
    }
    static const char *const bad[] = {"a.b.c = x\n", "a.b.c 5\n", "nodots = 5\n", "*.Server.mode = 3\n"};
    for (size_t i = 0; i < 4; i++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, DLP_LG_SERVER);
        unsigned mask;
        assert_int_not_equal(dlp_lg_conf_apply(bad[i], "resnet50", &s, &mask, NULL, 0), DLP_OK);
        dlp_err_clear();
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_conf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
