// core/stats: order statistics shared by every module (see stats.h).
#include "core/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_f32(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void dlp_stats_sort_f64(double *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_f64);
}

void dlp_stats_sort_f32(float *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_f32);
}

void dlp_stats_sort_i64(int64_t *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, cmp_i64);
}

int64_t dlp_stats_rank_i64(const int64_t *sorted, size_t n, double p) {
    if (n == 0) return 0;
    double x = (double)n * p;
    size_t i = x <= 0 ? 0 : (size_t)x;
    if (i >= n) i = n - 1;
    return sorted[i];
}

// Position q (n - 1) (clamped to [0, n - 1]) as the order statistics around it and the upper one's weight.
static void interp_at(size_t n, double q, size_t *lo, size_t *hi, double *f) {
    double pos = q * (double)(n - 1);
    if (!(pos > 0)) pos = 0;
    if (pos > (double)(n - 1)) pos = (double)(n - 1);
    *lo = (size_t)floor(pos);
    *hi = *lo + 1 < n ? *lo + 1 : *lo;
    *f = pos - (double)*lo;
}

double dlp_stats_quantile_f64(double *v, size_t n, double q) {
    if (n == 0) return NAN;
    dlp_stats_sort_f64(v, n);
    size_t lo, hi;
    double f;
    interp_at(n, q, &lo, &hi, &f);
    return v[lo] + (v[hi] - v[lo]) * f;
}

double dlp_stats_quantile_f32(float *v, size_t n, double q) {
    if (n == 0) return NAN;
    dlp_stats_sort_f32(v, n);
    size_t lo, hi;
    double f;
    interp_at(n, q, &lo, &hi, &f);
    return (double)v[lo] + ((double)v[hi] - (double)v[lo]) * f;
}

double dlp_stats_median_f64(const double *v, size_t n) {
    if (n == 0) return 0;
    double *s = malloc(sizeof(double) * n);
    if (!s) return v[0];
    memcpy(s, v, sizeof(double) * n);
    dlp_stats_sort_f64(s, n);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

void dlp_stats_topk(const float *logits, int n, int k, int *cls, float *prob) {
    if (k > n) k = n;
    if (k <= 0) return;
    // Softmax over the finite logits only: a NaN or infinite logit (bad weights, an fp16 overflow) would make every
    // probability NaN; such a class is never selected and its probability would be meaningless anyway.
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(logits[i]) && logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(logits[i])) sum += exp((double)logits[i] - mx);
    // Selection by insertion into a k-long sorted list: k is small (5).
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        if (!isfinite(v)) continue;
        if (m == k && !(v > logits[cls[m - 1]])) continue;  // ties keep the lower index
        int j = m < k ? m++ : k - 1;
        while (j > 0 && v > logits[cls[j - 1]]) {
            cls[j] = cls[j - 1];
            j--;
        }
        cls[j] = i;
    }
    for (int j = m; j < k; j++) cls[j] = -1;
    for (int j = 0; j < k; j++) prob[j] = cls[j] >= 0 ? (float)(exp((double)logits[cls[j]] - mx) / sum) : 0.0f;
}
