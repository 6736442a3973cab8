// Unit tests for perf/model_net: the ring allreduce's alpha-beta cost per bucket on hand-computed cases, what the
// bucket overlap hides (device collectives) or does not (host MPI), the link rate that makes compute the
// bottleneck, and reading a `dlperf dist bench --json` result as the link (good and bad files): its rate fitted at the
// trainer's bucket size, and each bucket charged the time measured at its size.
// Main file: src/perf/model_net.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/model_net.h"

#define NEAR(a, b, rel) assert_true(fabs((double)(a) - (double)(b)) <= (rel) * fabs((double)(b)) + 1e-12)

static void test_ring_cost(void **state) {
    (void)state;
    const dlp_net_link l = {.bytes_per_s = 1e8, .latency_s = 1e-4};  // 100 MB/s, 100 us per ring step
    static const struct {
        double bytes, bucket;
        int nodes;
        double want_s;
    } rows[] = {
        {1e8, 0, 1, 0},                                 // one node: no allreduce
        {1e8, 0, 2, 1.0 + 2 * 1e-4},                    // 2(N-1)/N = 1: S/B, 2 steps of latency
        {1e8, 0, 4, 1.5 + 6 * 1e-4},                    // 2*3/4 = 1.5
        {1e8, 25e6, 4, 1.5 + 4 * 6 * 1e-4},             // 4 buckets: 4 x 6 steps of latency
        {1e8, 30e6, 2, 1.0 + 4 * 2 * 1e-4},             // ceil(100/30) = 4 buckets
        {0, 0, 4, 0},                                   // nothing to reduce
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        NEAR(dlp_net_ring_s(rows[i].bytes, rows[i].bucket, rows[i].nodes, &l), rows[i].want_s, 1e-12);
}

static void test_exposed(void **state) {
    (void)state;
    // host MPI: everything exposed, whatever backward takes
    NEAR(dlp_net_exposed_s(0.4, 0.5, 10.0, 1), 0.4, 1e-12);
    // device collectives: the last bucket (t f) or what outlasts backward's share
    NEAR(dlp_net_exposed_s(0.4, 0.25, 1.0, 0), 0.1, 1e-12);          // max(0.1, 0.4 - 0.75)
    NEAR(dlp_net_exposed_s(0.4, 0.25, 0.2, 0), 0.4 - 0.15, 1e-12);   // max(0.1, 0.4 - 0.15)
    NEAR(dlp_net_exposed_s(0, 0.25, 0.2, 0), 0, 1e-12);
}

static void test_rate_for_compute(void **state) {
    (void)state;
    // 2 nodes, 100 MB, no latency, host MPI: exposed = S/B <= 0.5 s needs B >= 200 MB/s
    double r = dlp_net_rate_for_exposed(1e8, 0, 2, 0, 0.3, 1, 0.5);
    NEAR(r, 2e8, 2e-3);
    // the found rate really gets there, and a slightly lower one does not
    dlp_net_link l = {.bytes_per_s = r};
    assert_true(dlp_net_ring_s(1e8, 0, 2, &l) <= 0.5 + 1e-12);
    l.bytes_per_s = r * 0.99;
    assert_true(dlp_net_ring_s(1e8, 0, 2, &l) > 0.5);
    // device overlap, 4 buckets (f = 0.25), backward 0.4 s: exposed = max(t/4, t - 0.3) <= 0.1 needs t <= 0.4
    r = dlp_net_rate_for_exposed(1e8, 25e6, 2, 0, 0.4, 0, 0.1);
    NEAR(r, 1e8 / 0.4, 2e-3);
    // a latency alone longer than the target: no rate does it
    assert_true(dlp_net_rate_for_exposed(1e8, 0, 2, 1.0, 0.3, 1, 0.5) == 0);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_link_from_bench(void **state) {
    (void)state;
    char dir[] = "/tmp/dlpnet.XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/b.json", dir);
    write_file(path, "{\"schema\": \"dlperf.dist-bench/1\", \"ranks\": 4, \"points\": ["
                     "{\"bytes\": 8, \"time_us\": 900.0, \"busbw_gb_s\": 0.00001},"
                     "{\"bytes\": 1024, \"time_us\": 600.0, \"busbw_gb_s\": 0.001},"
                     "{\"bytes\": 67108864, \"time_us\": 1e6, \"busbw_gb_s\": 0.1125}]}");
    dlp_net_link l;
    int n = 0;
    assert_int_equal(dlp_net_link_from_bench(path, &l, &n), DLP_OK);
    assert_int_equal(n, 4);
    NEAR(l.latency_s, 600e-6 / 6, 1e-12);  // the quickest message; 2(N-1) = 6 ring steps
    // the time at 25 MiB, on the line between 1 KiB (600 us) and 64 MiB (1 s); the rate gives it with the latency
    const double b = 25.0 * 1024 * 1024, tb = 600e-6 + (b - 1024) / (67108864.0 - 1024) * (1 - 600e-6);
    NEAR(dlp_net_curve_s(&l, b), tb, 1e-12);
    NEAR(l.bytes_per_s, 6.0 / 4 * b / (tb - 600e-6), 1e-12);
    NEAR(dlp_net_ring_s(b, 0, 4, &l), tb, 1e-12);  // over as many nodes as the bench: the measured time
    assert_int_equal(l.npts, 3);
    static const char *const bad[] = {
        "{\"schema\": \"dlperf.dist-bench/1\", \"ranks\": 2, \"points\": [{\"bytes\": 64, \"time_us\": 9, "
        "\"busbw_gb_s\": 1}, {\"bytes\": 8, \"time_us\": 8, \"busbw_gb_s\": 1}]}",  // sizes not ascending
        "{\"schema\": \"dlperf.train/1\", \"ranks\": 2, \"points\": [{\"time_us\": 1, \"busbw_gb_s\": 1}]}",
        "{\"schema\": \"dlperf.dist-bench/1\", \"ranks\": 1, \"points\": [{\"time_us\": 1, \"busbw_gb_s\": 1}]}",
        "{\"schema\": \"dlperf.dist-bench/1\", \"ranks\": 2, \"points\": []}",
        "{\"schema\": \"dlperf.dist-bench/1\", \"ranks\": 2, \"points\": [{\"time_us\": 1, \"busbw_gb_s\": 0}]}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i]);
        dlp_status st = dlp_net_link_from_bench(path, &l, &n);
        assert_int_not_equal(st, DLP_OK);
        assert_non_null(strstr(dlp_err_msg(), "--net-bench"));
    }
    unlink(path);
    rmdir(dir);
}

// Each bucket at the time measured at its size: the trainer's cut (full buckets, the rest in one), over the bench's
// rank count only; below the smallest size its time, above the largest its rate.
static void test_curve(void **state) {
    (void)state;
    dlp_net_link l = {.bytes_per_s = 1e8, .latency_s = 1e-4, .npts = 3, .ranks = 2,
                      .pt_bytes = {1e3, 1e6, 1e8}, .pt_s = {1e-4, 2e-3, 0.5}};
    NEAR(dlp_net_curve_s(&l, 10), 1e-4, 1e-12);
    NEAR(dlp_net_curve_s(&l, 1e6), 2e-3, 1e-12);
    NEAR(dlp_net_curve_s(&l, 5.05e7), 2e-3 + 0.5 * (0.5 - 2e-3), 1e-12);
    NEAR(dlp_net_curve_s(&l, 2e8), 1.0, 1e-12);
    // 70 MB in 30 MB buckets: two of 30 MB and one of 10 MB
    const double t30 = 2e-3 + (3e7 - 1e6) / (1e8 - 1e6) * (0.5 - 2e-3);
    const double t10 = 2e-3 + (1e7 - 1e6) / (1e8 - 1e6) * (0.5 - 2e-3);
    NEAR(dlp_net_ring_s(7e7, 3e7, 2, &l), 2 * t30 + t10, 1e-12);
    NEAR(dlp_net_ring_s(7e7, 0, 2, &l), dlp_net_curve_s(&l, 7e7), 1e-12);
    NEAR(dlp_net_ring_s(7e7, 1e8, 2, &l), dlp_net_curve_s(&l, 7e7), 1e-12);
    // 4 nodes from a 2-rank curve: the alpha-beta line
    NEAR(dlp_net_ring_s(7e7, 0, 4, &l), 1.5 * 7e7 / 1e8 + 6 * 1e-4, 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_cost),
        cmocka_unit_test(test_exposed),
        cmocka_unit_test(test_rate_for_compute),
        cmocka_unit_test(test_link_from_bench),
        cmocka_unit_test(test_curve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
