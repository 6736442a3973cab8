// perf/lsq: weighted least squares by Householder QR; non-negative by Lawson-Hanson's active set.
#include "perf/lsq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Solves min |A_S c - b| for the columns listed in cols (m of them) of A (n x k, row-major) by Householder QR.
// Writes c[cols[j]]; columns that are numerically dependent on earlier ones get 0. Returns 0, or -1 (no memory).
static int qr_solve(const double *A, const double *b, int n, int k, const int *cols, int m, double *c) {
    double *Q = malloc(sizeof(double) * (size_t)n * (size_t)m), *r = malloc(sizeof(double) * (size_t)n);
    if (!Q || !r) {
        free(Q);
        free(r);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < m; j++) Q[(size_t)i * m + j] = A[(size_t)i * k + cols[j]];
        r[i] = b[i];
    }
    double diag[DLP_LSQ_MAX_COEFS];
    int ok[DLP_LSQ_MAX_COEFS];
    for (int j = 0; j < m; j++) {
        double norm = 0;
        for (int i = j; i < n; i++) norm += Q[(size_t)i * m + j] * Q[(size_t)i * m + j];
        norm = sqrt(norm);
        ok[j] = norm > 1e-10;  // columns are unit-norm scaled: a tiny remainder means dependence
        if (!ok[j]) {
            diag[j] = 0;
            continue;
        }
        double a0 = Q[(size_t)j * m + j];
        double alpha = a0 > 0 ? -norm : norm;
        // v = x - alpha e1, stored in place; H = I - 2 v v^T / (v^T v)
        Q[(size_t)j * m + j] = a0 - alpha;
        double vtv = 0;
        for (int i = j; i < n; i++) vtv += Q[(size_t)i * m + j] * Q[(size_t)i * m + j];
        for (int jj = j + 1; jj < m; jj++) {
            double d = 0;
            for (int i = j; i < n; i++) d += Q[(size_t)i * m + j] * Q[(size_t)i * m + jj];
            double f = 2 * d / vtv;
            for (int i = j; i < n; i++) Q[(size_t)i * m + jj] -= f * Q[(size_t)i * m + j];
        }
        double d = 0;
        for (int i = j; i < n; i++) d += Q[(size_t)i * m + j] * r[i];
        double f = 2 * d / vtv;
        for (int i = j; i < n; i++) r[i] -= f * Q[(size_t)i * m + j];
        diag[j] = alpha;
    }
    // Back substitution on R (diag + the upper triangle left in Q).
    double x[DLP_LSQ_MAX_COEFS];
    for (int j = m - 1; j >= 0; j--) {
        if (!ok[j]) {
            x[j] = 0;
            continue;
        }
        double s = r[j];
        for (int jj = j + 1; jj < m; jj++) s -= Q[(size_t)j * m + jj] * x[jj];
        x[j] = s / diag[j];
    }
    for (int j = 0; j < m; j++) c[cols[j]] = x[j];
    free(Q);
    free(r);
    return 0;
}

// Lawson-Hanson NNLS on the scaled system.
static int nnls(const double *A, const double *b, int n, int k, double *x) {
    int inP[DLP_LSQ_MAX_COEFS] = {0};
    double s[DLP_LSQ_MAX_COEFS];
    double *res = malloc(sizeof(double) * (size_t)n);
    if (!res) return -1;
    for (int j = 0; j < k; j++) x[j] = 0;
    for (int outer = 0; outer < 3 * k + 10; outer++) {
        for (int i = 0; i < n; i++) {
            double p = 0;
            for (int j = 0; j < k; j++) p += A[(size_t)i * k + j] * x[j];
            res[i] = b[i] - p;
        }
        int t = -1;
        double best = 1e-12;
        for (int j = 0; j < k; j++) {
            if (inP[j]) continue;
            double d = 0;
            for (int i = 0; i < n; i++) d += A[(size_t)i * k + j] * res[i];
            if (d > best) {
                best = d;
                t = j;
            }
        }
        if (t < 0) break;
        inP[t] = 1;
        for (int inner = 0; inner < 3 * k + 10; inner++) {
            int cols[DLP_LSQ_MAX_COEFS], m = 0;
            for (int j = 0; j < k; j++) {
                s[j] = 0;
                if (inP[j]) cols[m++] = j;
            }
            if (qr_solve(A, b, n, k, cols, m, s) != 0) {
                free(res);
                return -1;
            }
            int allpos = 1;
            for (int j = 0; j < k; j++)
                if (inP[j] && s[j] <= 0) allpos = 0;
            if (allpos) break;
            double alpha = 1;
            for (int j = 0; j < k; j++)
                if (inP[j] && s[j] <= 0) {
                    double a = x[j] / (x[j] - s[j]);
                    if (a < alpha) alpha = a;
                }
            for (int j = 0; j < k; j++) {
                x[j] += alpha * (s[j] - x[j]);
                if (inP[j] && x[j] <= 1e-15) {
                    inP[j] = 0;
                    x[j] = 0;
                }
            }
        }
        for (int j = 0; j < k; j++) x[j] = inP[j] ? s[j] : 0;
    }
    free(res);
    return 0;
}

dlp_status dlp_lsq_solve(const double *X, const double *y, const double *w, int n, int k, int nonneg, dlp_lsq_fit *out) {
    memset(out, 0, sizeof *out);
    if (k < 1 || k > DLP_LSQ_MAX_COEFS) return DLP_ERR(DLP_ERR_INVALID, "least squares: %d coefficients (1..%d)", k, DLP_LSQ_MAX_COEFS);
    if (n < k) return DLP_ERR(DLP_ERR_INVALID, "least squares: %d observations for %d coefficients", n, k);
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i]) || (w && !(w[i] >= 0 && isfinite(w[i]))))
            return DLP_ERR(DLP_ERR_INVALID, "least squares: observation %d is not finite (y %g)", i, y[i]);
        for (int j = 0; j < k; j++)
            if (!isfinite(X[(size_t)i * k + j]))
                return DLP_ERR(DLP_ERR_INVALID, "least squares: regressor %d of observation %d is not finite", j, i);
    }
    double *A = malloc(sizeof(double) * (size_t)n * (size_t)k), *b = malloc(sizeof(double) * (size_t)n);
    if (!A || !b) {
        free(A);
        free(b);
        return DLP_ERR(DLP_ERR_NOMEM, "least squares: out of memory for %d x %d", n, k);
    }
    double scale[DLP_LSQ_MAX_COEFS] = {0};
    for (int i = 0; i < n; i++) {
        double sw = w ? sqrt(w[i]) : 1.0;
        b[i] = sw * y[i];
        for (int j = 0; j < k; j++) {
            A[(size_t)i * k + j] = sw * X[(size_t)i * k + j];
            scale[j] += A[(size_t)i * k + j] * A[(size_t)i * k + j];
        }
    }
    for (int j = 0; j < k; j++) scale[j] = scale[j] > 0 ? sqrt(scale[j]) : 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) A[(size_t)i * k + j] = scale[j] > 0 ? A[(size_t)i * k + j] / scale[j] : 0;
    double c[DLP_LSQ_MAX_COEFS] = {0};
    int cols[DLP_LSQ_MAX_COEFS];
    for (int j = 0; j < k; j++) cols[j] = j;
    int rc = nonneg ? nnls(A, b, n, k, c) : qr_solve(A, b, n, k, cols, k, c);
    free(A);
    free(b);
    if (rc != 0) return DLP_ERR(DLP_ERR_NOMEM, "least squares: out of memory");
    out->n = n;
    out->k = k;
    for (int j = 0; j < k; j++) out->coef[j] = scale[j] > 0 ? c[j] / scale[j] : 0;
    double ss = 0, mean = 0, sst = 0, rel = 0, ape = 0, maxape = 0;
    int nrel = 0;
    for (int i = 0; i < n; i++) mean += y[i] / n;
    for (int i = 0; i < n; i++) {
        double e = y[i] - dlp_lsq_eval(out, X + (size_t)i * k);
        ss += e * e;
        sst += (y[i] - mean) * (y[i] - mean);
        if (y[i] != 0) {
            double a = fabs(e / y[i]);
            rel += a * a;
            ape += a;
            if (a > maxape) maxape = a;
            nrel++;
        }
    }
    out->rms = sqrt(ss / n);
    out->rel_rms = nrel ? sqrt(rel / nrel) : 0;
    out->mape = nrel ? ape / nrel : 0;
    out->max_ape = maxape;
    out->r2 = sst > 0 ? 1 - ss / sst : (ss < 1e-30 ? 1 : 0);
    return DLP_OK;
}

double dlp_lsq_eval(const dlp_lsq_fit *f, const double *row) {
    double s = 0;
    for (int j = 0; j < f->k; j++) s += f->coef[j] * row[j];
    return s;
}
