// loadgen/stats: MLPerf's percentile, latency summaries, the Poisson arrival schedule and the binomial
// arithmetic behind MLPerf's early-stopping rule.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/rng.h"
#include "loadgen/loadgen.h"
#include "loadgen/stats.h"

void dlp_lg_latency_summarize(int64_t *lat, size_t n, dlp_lg_latency *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return;
    dlp_stats_sort_i64(lat, n);
    long double sum = 0;
    for (size_t i = 0; i < n; i++) sum += lat[i];
    out->count = (int64_t)n;
    out->min_ns = lat[0];
    out->max_ns = lat[n - 1];
    out->mean_ns = (int64_t)(sum / n);
    out->p50_ns = dlp_stats_rank_i64(lat, n, 0.50);
    out->p90_ns = dlp_stats_rank_i64(lat, n, 0.90);
    out->p95_ns = dlp_stats_rank_i64(lat, n, 0.95);
    out->p97_ns = dlp_stats_rank_i64(lat, n, 0.97);
    out->p99_ns = dlp_stats_rank_i64(lat, n, 0.99);
    out->p999_ns = dlp_stats_rank_i64(lat, n, 0.999);
}

void dlp_lg_poisson_schedule(double rate_per_s, uint64_t seed, int64_t n, int64_t *t_ns) {
    dlp_rng r;
    dlp_rng_init(&r, seed, 0x5c4ed01e);
    double t = 0;  // seconds, in double: 2^53 ns of headroom is far beyond any run
    for (int64_t i = 0; i < n; i++) {
        t_ns[i] = (int64_t)llround(t * 1e9);
        double u = dlp_rng_uniform(&r);            // [0, 1)
        t += -log1p(-u) / rate_per_s;              // exponential gap, mean 1/rate
    }
}

// P(X <= t), X ~ Binomial(n, q): sum of pmf(x) for x = 0..t, by the ratio recurrence in log space.
double dlp_lg_binomial_cdf(int64_t t, int64_t n, double q) {
    if (t < 0) return 0;
    if (t >= n) return 1;
    if (q <= 0) return 1;
    if (q >= 1) return 0;
    double lq = log(q), l1q = log1p(-q);
    double lp = (double)n * l1q;  // log pmf(0)
    double lsum = lp;
    for (int64_t x = 0; x < t; x++) {
        lp += log((double)(n - x)) - log((double)(x + 1)) + lq - l1q;
        double hi = lsum > lp ? lsum : lp, lo = lsum > lp ? lp : lsum;
        lsum = hi + log1p(exp(lo - hi));
    }
    double v = exp(lsum);
    return v > 1 ? 1 : v;
}

// Least h with P(at most t failures in h + t queries | failure rate 1 - p) < 1 - c.
int64_t dlp_lg_es_min_passing(int64_t t, double p, double c) {
    double q = 1 - p, alpha = 1 - c;
    int64_t lo = 0, hi = 1;
    while (dlp_lg_binomial_cdf(t, hi + t, q) >= alpha) {  // the cdf falls as h grows
        lo = hi;
        hi *= 2;
        if (hi > ((int64_t)1 << 40)) return hi;
    }
    while (lo < hi) {  // first h in [lo, hi] that passes
        int64_t mid = lo + (hi - lo) / 2;
        if (dlp_lg_binomial_cdf(t, mid + t, q) < alpha) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int dlp_lg_es_estimate(const int64_t *sorted, int64_t n, double p, double c, int64_t *estimate_ns,
                       int64_t *discarded, int64_t *need) {
    int64_t h1 = dlp_lg_es_min_passing(1, p, c);
    if (need) *need = h1 + 1;
    if (n < h1 + 1) return 0;
    // The largest t with h(t) + t <= n: h(t) + t grows with t, so bisect.
    // h(t) >= t p / (1 - p) roughly, so t <= n (1 - p) + 1 bounds the search.
    int64_t lo = 1, hi = (int64_t)ceil((double)n * (1 - p)) + 1;
    if (hi > n) hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (dlp_lg_es_min_passing(mid, p, c) + mid <= n) lo = mid;
        else hi = mid - 1;
    }
    if (estimate_ns) *estimate_ns = sorted[n - lo];
    if (discarded) *discarded = lo - 1;
    return 1;
}
