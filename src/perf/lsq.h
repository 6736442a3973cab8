// perf/lsq: the least-squares fits behind `dlperf probe` — ordinary or non-negative (Lawson-Hanson) weighted least
// squares for a handful of coefficients, with the fit's residual statistics, so every fitted coefficient of a
// machine profile says how well it explains the measurements it came from.
// Defines: DLP_LSQ_MAX_COEFS, dlp_lsq_fit, dlp_lsq_solve, dlp_lsq_eval.
#ifndef DLP_PERF_LSQ_H
#define DLP_PERF_LSQ_H
#include "core/status.h"

#define DLP_LSQ_MAX_COEFS 8

typedef struct dlp_lsq_fit {
    int n, k;                        // observations, coefficients
    double coef[DLP_LSQ_MAX_COEFS];  // the solution
    double rms;                      // root mean square residual (unweighted, in y's unit)
    double rel_rms;                  // root mean square of residual / y (y != 0 rows)
    double mape;                     // mean |residual / y| (y != 0 rows)
    double max_ape;                  // the largest |residual / y|
    double r2;                       // 1 - SS_res / SS_tot (unweighted; 1 when y is constant and fitted exactly)
} dlp_lsq_fit;

// Minimizes sum_i w_i (y_i - X_i . c)^2 over c (c >= 0 when nonneg). X is n x k, row-major; w may be NULL (all 1).
// Columns are scaled to unit norm internally, so regressors of very different magnitudes (1, pixels, bytes) fit
// together. Needs n >= k, 1 <= k <= DLP_LSQ_MAX_COEFS and finite inputs; a column of zeros gets coefficient 0.
dlp_status dlp_lsq_solve(const double *X, const double *y, const double *w, int n, int k, int nonneg, dlp_lsq_fit *out);

// X_i . coef for one row of k regressors.
double dlp_lsq_eval(const dlp_lsq_fit *f, const double *row);

#endif
