// perf/probe_fit: measurements -> profile fields.
#include "perf/probe_fit.h"

#include <stdlib.h>

dlp_status dlp_probe_fit_pipeline(const dlp_pipeline_sample *s, int n, dlp_pipeline_profile *pp, dlp_lsq_fit *fd,
                                  dlp_lsq_fit *fa) {
    if (n < 3) return DLP_ERR(DLP_ERR_INVALID, "pipeline fit: %d samples (need at least 3)", n);
    double *X = malloc(sizeof(double) * 3 * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    if (!X || !y) {
        free(X);
        free(y);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    dlp_lsq_fit d, a;
    for (int i = 0; i < n; i++) {
        X[3 * i] = 1;
        X[3 * i + 1] = s[i].dec_px;
        X[3 * i + 2] = s[i].ent_bytes;
        y[i] = s[i].dec_s;
    }
    dlp_status st = dlp_lsq_solve(X, y, NULL, n, 3, 1, &d);
    if (st == DLP_OK) {
        for (int i = 0; i < n; i++) {
            X[3 * i] = 1;
            X[3 * i + 1] = s[i].rsz_px;
            X[3 * i + 2] = s[i].out_px;
            y[i] = s[i].aug_s;
        }
        st = dlp_lsq_solve(X, y, NULL, n, 3, 1, &a);
    }
    free(X);
    free(y);
    DLP_CHECK(st);
    pp->decode_per_image_s = d.coef[0];
    pp->decode_per_pixel_s = d.coef[1];
    pp->decode_per_byte_s = d.coef[2];
    pp->augment_per_image_s = a.coef[0];
    pp->augment_per_in_pixel_s = a.coef[1];
    pp->augment_per_out_pixel_s = a.coef[2];
    if (fd) *fd = d;
    if (fa) *fa = a;
    return DLP_OK;
}

dlp_status dlp_probe_fit_step(const int *batch, const double *t_s, int n, double work_ratio, double *t0_s,
                              double *per_image_s, dlp_lsq_fit *f) {
    if (n < 1 || n > 64 || !(work_ratio > 0)) return DLP_ERR(DLP_ERR_INVALID, "step fit: %d points, work ratio %g", n, work_ratio);
    double X[128], lf_y[64];
    int big = 0;
    for (int i = 0; i < n; i++) {
        X[2 * i] = 1;
        X[2 * i + 1] = batch[i];
        lf_y[i] = t_s[i];
        if (batch[i] > batch[big]) big = i;
    }
    dlp_lsq_fit lf;
    if (n >= 2) {
        DLP_CHECK(dlp_lsq_solve(X, lf_y, NULL, n, 2, 1, &lf));
    } else {
        lf = (dlp_lsq_fit){.n = 1, .k = 2};
    }
    double t0 = lf.coef[0], k = lf.coef[1];
    if (n < 2 || !(k > 0)) {  // one point, or noise swamped the slope: the largest batch alone, no fixed time
        t0 = 0;
        k = t_s[big] / batch[big];
        lf.coef[0] = 0;
        lf.coef[1] = k;
    }
    if (!(k > 0)) return DLP_ERR(DLP_ERR_NUMERIC, "step fit: no positive time per image");
    *t0_s = t0;
    *per_image_s = k / work_ratio;
    if (f) *f = lf;
    return DLP_OK;
}

void dlp_probe_scaling(const int *workers, const double *img_per_s, int n, int cores, double cost_s,
                       dlp_pipeline_profile *pp) {
    pp->nscaling = 0;
    pp->oversub_efficiency = 0;
    if (n < 1 || !(img_per_s[0] > 0) || workers[0] != 1) return;
    const double x1 = cost_s > 0 ? 1 / cost_s : img_per_s[0];
    double x_cores = 0;
    int imax = 0;
    for (int i = 0; i < n; i++) {
        if (workers[i] > workers[imax]) imax = i;
        if (workers[i] == cores) x_cores = img_per_s[i];
        if (workers[i] > cores || pp->nscaling >= DLP_PIPELINE_MAX_SCALING) continue;
        if (pp->nscaling > 0 && workers[i] <= pp->scaling[pp->nscaling - 1].threads) continue;
        double eff = cost_s > 0 || i > 0 ? img_per_s[i] / (workers[i] * x1) : 1.0;
        if (!(eff > 0)) continue;
        if (eff > 1.5) eff = 1.5;
        pp->scaling[pp->nscaling].threads = workers[i];
        pp->scaling[pp->nscaling].efficiency = eff;
        pp->nscaling++;
    }
    // Threads beyond the cores: par(W) = par(cores) + (W - cores) x oversub x eff(cores), so
    // oversub = (x(W) / x(cores) - 1) x cores x eff(cores) / ((W - cores) x eff(cores)) = (x(W)/x(cores) - 1) x cores / (W - cores)
    double extra = workers[imax] - cores;
    if (extra > 0 && x_cores > 0) {
        double ov = (img_per_s[imax] / x_cores - 1) * cores / extra;
        pp->oversub_efficiency = ov > 0 ? (ov < 1 ? ov : 1) : 0;
    }
}

static double clamp_share(double v) { return v > 1.2 ? 1.2 : v < 0.01 ? 0.01 : v; }

void dlp_probe_contention_shares(double compute_alone, double compute_shared, double loader_alone, double loader_shared,
                                 int threads, int workers, dlp_contention_point *pt) {
    pt->threads = threads;
    pt->workers = workers;
    pt->compute_share = clamp_share(compute_alone > 0 ? compute_shared / compute_alone : 1);
    pt->loader_share = clamp_share(loader_alone > 0 ? loader_shared / loader_alone : 1);
}
