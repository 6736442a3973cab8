// loadgen/stats: the arithmetic behind the rules, private to loadgen/ — MLPerf's early stopping (binomial,
// confidence c) and the Poisson schedule. The latency summary (dlp_lg_latency_summarize) is public (loadgen.h).
// Defines: dlp_lg_poisson_schedule, dlp_lg_es_min_passing, dlp_lg_binomial_cdf, dlp_lg_es_estimate.
#ifndef DLP_LOADGEN_STATS_H
#define DLP_LOADGEN_STATS_H
#include <stdint.h>

// Arrival times of a Poisson process at rate_per_s: t[0] = 0, then exponential gaps with mean 1/rate,
// cumulative, in ns. Deterministic from seed.
void dlp_lg_poisson_schedule(double rate_per_s, uint64_t seed, int64_t n, int64_t *t_ns);

// MLPerf's early-stopping arithmetic (binomial, confidence c, tolerance 0). The least number h of passing
// queries such that seeing h passes and t failures gives, with confidence c, a true failure rate < 1 - p.
int64_t dlp_lg_es_min_passing(int64_t t, double p, double c);
// P(X <= t) for X ~ Binomial(n, q), computed in log space.
double dlp_lg_binomial_cdf(int64_t t, int64_t n, double q);
// SingleStream/MultiStream: the early-stopping estimate of the p-percentile from sorted latencies (the t-th
// highest, t as large as the query count allows). Returns 0 with *need set to the minimum query count when
// n is too small, else 1 with *estimate_ns and *discarded (t - 1) set.
int dlp_lg_es_estimate(const int64_t *sorted, int64_t n, double p, double c, int64_t *estimate_ns,
                       int64_t *discarded, int64_t *need);

#endif
