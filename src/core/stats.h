// core/stats: order statistics for every module — MLPerf's rank percentile (latencies), linearly interpolated
// quantiles (step times, monitor samples), the median, the sorts they need, and the top-k of a logit vector with
// its softmax probabilities (the same answer from `dlperf infer --top5`, `serve` and the tests).
// Defines: dlp_stats_sort_f64, dlp_stats_sort_f32, dlp_stats_sort_i64, dlp_stats_rank_i64, dlp_stats_quantile_f64,
//          dlp_stats_quantile_f32, dlp_stats_median_f64, dlp_stats_topk.
#ifndef DLP_CORE_STATS_H
#define DLP_CORE_STATS_H
#include <stddef.h>
#include <stdint.h>

void dlp_stats_sort_f64(double *v, size_t n);  // ascending
void dlp_stats_sort_f32(float *v, size_t n);
void dlp_stats_sort_i64(int64_t *v, size_t n);
// MLPerf LoadGen's percentile of ascending values: the element at index floor(n p), clamped to [0, n-1]; 0 when n is 0.
int64_t dlp_stats_rank_i64(const int64_t *sorted, size_t n, double p);
// The q-quantile (q in [0, 1]) with linear interpolation between order statistics (numpy's default); sorts v in
// place. NAN when n is 0.
double dlp_stats_quantile_f64(double *v, size_t n, double q);
double dlp_stats_quantile_f32(float *v, size_t n, double q);
// The median of v (left unchanged; the mean of the middle two for even n); 0 when n is 0.
double dlp_stats_median_f64(const double *v, size_t n);
// The k largest finite logits of n, best first (ties keep the lower index), with their softmax probabilities over
// the finite logits: cls[j] = -1 and prob[j] = 0 past the finite ones. k > n is clamped to n.
void dlp_stats_topk(const float *logits, int n, int k, int *cls, float *prob);

#endif
