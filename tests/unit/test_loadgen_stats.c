// Unit tests for loadgen/stats.c: MLPerf's percentile, the Poisson schedule's statistics, the early-stopping
// arithmetic. Also a helper mode for bench/loadgen_vs_mlperf.sh (--summarize).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "loadgen/loadgen.h"
#include "loadgen/stats.h"

#define MS 1000000LL

static void test_percentile(void **state) {
    (void)state;
    int64_t v[100];
    for (int i = 0; i < 100; i++) v[i] = i + 1;
    static const struct { size_t n; double p; int64_t want; } rows[] = {
        {100, 0.50, 51}, {100, 0.90, 91}, {100, 0.99, 100}, {100, 0.999, 100}, {100, 0.0, 1},
        {10, 0.90, 10},  {10, 0.5, 6},    {1, 0.99, 1},     {2, 0.5, 2},       {64, 0.90, 58},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(dlp_stats_rank_i64(v, rows[i].n, rows[i].p), rows[i].want);
    assert_int_equal(dlp_stats_rank_i64(v, 0, 0.5), 0);
    int64_t lat[7] = {70, 10, 30, 20, 60, 50, 40};
    dlp_lg_latency l;
    dlp_lg_latency_summarize(lat, 7, &l);
    assert_int_equal(l.count, 7);
    assert_int_equal(l.min_ns, 10);
    assert_int_equal(l.max_ns, 70);
    assert_int_equal(l.mean_ns, 40);
    assert_int_equal(l.p50_ns, 40);  // floor(3.5) = 3 -> 40
    assert_int_equal(l.p90_ns, 70);  // floor(6.3) = 6
    assert_int_equal(lat[0], 10);    // sorted in place
    dlp_lg_latency_summarize(lat, 0, &l);
    assert_int_equal(l.count, 0);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_poisson_schedule(void **state) {
    (void)state;
    const double rate = 1000;
    const int64_t n = 200001;
    int64_t *t = malloc((size_t)n * sizeof *t);
    double *gap = malloc((size_t)(n - 1) * sizeof *gap);
    assert_non_null(t);
    assert_non_null(gap);
    dlp_lg_poisson_schedule(rate, 42, n, t);
    assert_int_equal(t[0], 0);
    double sum = 0, sum2 = 0;
    for (int64_t i = 1; i < n; i++) {
        assert_true(t[i] >= t[i - 1]);
        gap[i - 1] = (double)(t[i] - t[i - 1]) * 1e-9;
        sum += gap[i - 1];
        sum2 += gap[i - 1] * gap[i - 1];
    }
    double m = sum / (double)(n - 1), var = sum2 / (double)(n - 1) - m * m, cv = sqrt(var) / m;
    // Mean gap 1/rate: the standard error of the mean is 1/rate/sqrt(n) = 0.22%; allow 1%.
    assert_true(fabs(m * rate - 1) < 0.01);
    // Coefficient of variation of an exponential is 1; allow 2%.
    assert_true(fabs(cv - 1) < 0.02);
    // Kolmogorov-Smirnov against Exp(rate): D < 1.63/sqrt(n) is the 1% critical value.
    qsort(gap, (size_t)(n - 1), sizeof *gap, cmp_dbl);
    double D = 0;
    for (int64_t i = 0; i < n - 1; i++) {
        double F = 1 - exp(-rate * gap[i]);
        double d1 = fabs((double)(i + 1) / (double)(n - 1) - F), d2 = fabs(F - (double)i / (double)(n - 1));
        if (d1 > D) D = d1;
        if (d2 > D) D = d2;
    }
    assert_true(D < 1.63 / sqrt((double)(n - 1)));
    // Counts in 100 ms windows are Poisson(100): mean 100, variance/mean (index of dispersion) 1.
    int nwin = (int)(t[n - 1] / (100 * MS));
    int *cnt = calloc((size_t)nwin, sizeof *cnt);
    for (int64_t i = 0; i < n; i++) {
        int w = (int)(t[i] / (100 * MS));
        if (w < nwin) cnt[w]++;
    }
    double cm = 0, cv2 = 0;
    for (int w = 0; w < nwin; w++) cm += cnt[w];
    cm /= nwin;
    for (int w = 0; w < nwin; w++) cv2 += (cnt[w] - cm) * (cnt[w] - cm);
    cv2 /= (nwin - 1);
    assert_true(nwin >= 1900);
    assert_true(fabs(cm - 100) < 1.5);
    assert_true(fabs(cv2 / cm - 1) < 0.1);  // the dispersion's standard error is sqrt(2/nwin) = 3%
    // Deterministic from the seed; another seed gives another schedule; the rate scales it exactly.
    int64_t a[100], b[100], c[100];
    dlp_lg_poisson_schedule(rate, 42, 100, a);
    dlp_lg_poisson_schedule(rate, 43, 100, b);
    dlp_lg_poisson_schedule(2 * rate, 42, 100, c);
    assert_memory_equal(a, t, sizeof a);
    assert_memory_not_equal(a, b, sizeof a);
    for (int i = 0; i < 100; i++) assert_true(llabs(2 * c[i] - a[i]) <= 2);
    free(cnt);
    free(t);
    free(gap);
}

static void test_early_stopping_math(void **state) {
    (void)state;
    // The binomial cdf against a direct sum.
    double q = 0.1;
    int64_t nn = 30;
    double direct = 0, choose = 1;
    for (int x = 0; x <= 4; x++) {
        if (x > 0) choose = choose * (double)(nn - x + 1) / x;
        direct += choose * pow(q, x) * pow(1 - q, (double)(nn - x));
    }
    assert_true(fabs(dlp_lg_binomial_cdf(4, nn, q) - direct) < 1e-12);
    assert_true(dlp_lg_binomial_cdf(-1, 10, 0.5) == 0);
    assert_true(dlp_lg_binomial_cdf(10, 10, 0.5) == 1);
    // MLPerf's published minimums: 64 queries at p90 (SingleStream), 662 at p99 (MultiStream's
    // min_query_count), and 459 at p99 with no late query.
    assert_int_equal(dlp_lg_es_min_passing(1, 0.90, 0.99) + 1, 64);
    assert_int_equal(dlp_lg_es_min_passing(1, 0.99, 0.99) + 1, 662);
    assert_int_equal(dlp_lg_es_min_passing(0, 0.99, 0.99), 459);
    // It grows with the number of failures.
    for (int t = 1; t < 50; t++) assert_true(dlp_lg_es_min_passing(t, 0.99, 0.99) > dlp_lg_es_min_passing(t - 1, 0.99, 0.99));
    // The estimate: too few queries; then the t-th highest latency, at or above the plain percentile.
    int64_t *lat = malloc(2000 * sizeof *lat);
    for (int i = 0; i < 2000; i++) lat[i] = i + 1;
    int64_t est = 0, disc = 0, need = 0;
    assert_int_equal(dlp_lg_es_estimate(lat, 63, 0.90, 0.99, &est, &disc, &need), 0);
    assert_int_equal(need, 64);
    assert_int_equal(dlp_lg_es_estimate(lat, 64, 0.90, 0.99, &est, &disc, &need), 1);
    assert_int_equal(disc, 0);
    assert_int_equal(est, 64);  // with 64 queries only the maximum can be trusted
    assert_int_equal(dlp_lg_es_estimate(lat, 2000, 0.90, 0.99, &est, &disc, &need), 1);
    assert_true(est >= dlp_stats_rank_i64(lat, 2000, 0.90));
    assert_true(est < 2000);
    // The t found is the largest with h(t) + t <= n.
    int64_t t = disc + 1;
    assert_true(dlp_lg_es_min_passing(t, 0.90, 0.99) + t <= 2000);
    assert_true(dlp_lg_es_min_passing(t + 1, 0.90, 0.99) + t + 1 > 2000);
    free(lat);
}


// Helper mode for bench/loadgen_vs_mlperf.sh: `test_loadgen --summarize P < latencies_ns` prints, as JSON, what
// dlperf's arithmetic makes of those sample latencies (the summary's block and early stopping at percentile P),
// to compare with real LoadGen's summary of the same samples.
static int summarize_main(double p) {
    size_t n = 0, cap = 1024;
    int64_t *lat = malloc(cap * sizeof *lat);
    long long v;
    while (lat && scanf("%lld", &v) == 1) {
        if (n == cap) {
            int64_t *nl = realloc(lat, (cap *= 2) * sizeof *lat);
            if (!nl) break;
            lat = nl;
        }
        lat[n++] = v;
    }
    if (!lat) return 1;
    dlp_lg_latency l;
    dlp_lg_latency_summarize(lat, n, &l);  // sorts
    int64_t est = 0, disc = 0, need = 0;
    int ok = dlp_lg_es_estimate(lat, (int64_t)n, p, 0.99, &est, &disc, &need);
    printf("{\"count\": %lld, \"min\": %lld, \"max\": %lld, \"mean\": %lld, \"p50\": %lld, \"p90\": %lld, \"p95\": %lld, "
           "\"p97\": %lld, \"p99\": %lld, \"p99.9\": %lld, \"es_ok\": %d, \"es_estimate\": %lld, \"es_discard\": %lld, "
           "\"es_need\": %lld}\n", (long long)l.count, (long long)l.min_ns, (long long)l.max_ns, (long long)l.mean_ns,
           (long long)l.p50_ns, (long long)l.p90_ns, (long long)l.p95_ns, (long long)l.p97_ns, (long long)l.p99_ns,
           (long long)l.p999_ns, ok, (long long)est, (long long)disc, (long long)need);
    free(lat);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--summarize") == 0) return summarize_main(atof(argv[2]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_poisson_schedule),
        cmocka_unit_test(test_early_stopping_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
