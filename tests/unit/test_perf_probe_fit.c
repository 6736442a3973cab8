// Unit tests for the probe's arithmetic (perf/lsq, perf/probe_fit): least squares recovers known coefficients
// (exactly without noise, within tolerance with it), non-negativity, weights, bad input; the pipeline's per-sample
// fits, a backend's step-time line, the loader's scaling and the contention shares, each on synthetic measurements
// made from known coefficients.
// Main file: src/perf/probe_fit.c; also src/perf/lsq.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "perf/lsq.h"
#include "perf/probe_fit.h"
#include "testutil.h"

#define NEAR(a, b, rel) assert_true(fabs((double)(a) - (double)(b)) <= (rel) * fabs((double)(b)) + 1e-15)

// --- least squares -------------------------------------------------------------------------------------------------

static void test_lsq_exact(void **state) {
    (void)state;
    // Regressors of very different magnitudes (1, pixels, bytes), as the pipeline fit has them.
    enum { N = 60 };
    double X[N * 3], y[N];
    const double c[3] = {1.5e-4, 2.2e-9, 8.5e-9};
    dlp_rng r;
    dlp_rng_init(&r, 7, 0);
    for (int i = 0; i < N; i++) {
        X[3 * i] = 1;
        X[3 * i + 1] = dlp_rng_range(&r, 5e3, 2e5);
        X[3 * i + 2] = dlp_rng_range(&r, 2e4, 3e5);
        y[i] = c[0] + c[1] * X[3 * i + 1] + c[2] * X[3 * i + 2];
    }
    for (int nonneg = 0; nonneg <= 1; nonneg++) {
        dlp_lsq_fit f;
        assert_int_equal(dlp_lsq_solve(X, y, NULL, N, 3, nonneg, &f), DLP_OK);
        for (int j = 0; j < 3; j++) NEAR(f.coef[j], c[j], 1e-8);
        assert_true(f.rms < 1e-15);
        assert_true(f.mape < 1e-9);
        NEAR(f.r2, 1.0, 1e-12);
        assert_int_equal(f.n, N);
        assert_int_equal(f.k, 3);
        NEAR(dlp_lsq_eval(&f, X + 3 * 5), y[5], 1e-10);
    }
}

static void test_lsq_noise(void **state) {
    (void)state;
    // y = 2 + 3x with N(0, 0.1) noise over x in [0, 10]: the slope's standard error is about 0.1/sqrt(N x var(x)).
    enum { N = 400 };
    double X[N * 2], y[N];
    dlp_rng r;
    dlp_rng_init(&r, 3, 1);
    for (int i = 0; i < N; i++) {
        double x = 10.0 * i / N;
        X[2 * i] = 1;
        X[2 * i + 1] = x;
        y[i] = 2 + 3 * x + 0.1 * dlp_rng_normal(&r);
    }
    dlp_lsq_fit f;
    assert_int_equal(dlp_lsq_solve(X, y, NULL, N, 2, 0, &f), DLP_OK);
    NEAR(f.coef[0], 2, 0.02);
    NEAR(f.coef[1], 3, 0.002);
    NEAR(f.rms, 0.1, 0.15);
    assert_true(f.r2 > 0.999);
}

static void test_lsq_nonneg_and_weights(void **state) {
    (void)state;
    // The truth has a negative intercept: NNLS sets it to 0 and fits the slope alone, which is the least-squares
    // line through the origin: sum(x y) / sum(x^2).
    double X[] = {1, 1, 1, 2, 1, 3, 1, 4}, y[] = {0.5, 1.5, 2.5, 3.5};  // y = x - 0.5
    dlp_lsq_fit f;
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 4, 2, 0, &f), DLP_OK);
    NEAR(f.coef[0], -0.5, 1e-12);
    NEAR(f.coef[1], 1.0, 1e-12);
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 4, 2, 1, &f), DLP_OK);
    assert_true(f.coef[0] == 0);
    NEAR(f.coef[1], (0.5 + 3 + 7.5 + 14) / 30.0, 1e-12);
    // A zero weight removes an outlier.
    double X2[] = {1, 0, 1, 1, 1, 2, 1, 3}, y2[] = {1, 3, 5, 1000}, w2[] = {1, 1, 1, 0};
    assert_int_equal(dlp_lsq_solve(X2, y2, w2, 4, 2, 0, &f), DLP_OK);
    NEAR(f.coef[0], 1, 1e-12);
    NEAR(f.coef[1], 2, 1e-12);
    // A column of zeros gets 0, the others still fit.
    double X3[] = {1, 0, 1, 1, 0, 2, 1, 0, 3}, y3[] = {2, 2, 2};
    assert_int_equal(dlp_lsq_solve(X3, y3, NULL, 3, 3, 0, &f), DLP_OK);
    NEAR(f.coef[0], 2, 1e-12);
    assert_true(f.coef[1] == 0);
    assert_true(fabs(f.coef[2]) < 1e-12);
}

static void test_lsq_errors(void **state) {
    (void)state;
    double X[] = {1, 2, 3, 4}, y[] = {1, NAN};
    dlp_lsq_fit f;
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 1, 2, 0, &f), DLP_ERR_INVALID);   // fewer rows than coefficients
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 2, 0, 0, &f), DLP_ERR_INVALID);   // no coefficient
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 1, 9, 0, &f), DLP_ERR_INVALID);   // too many
    assert_int_equal(dlp_lsq_solve(X, y, NULL, 2, 2, 0, &f), DLP_ERR_INVALID);   // a NaN observation
    double w[] = {1, -1}, y2[] = {1, 2};
    assert_int_equal(dlp_lsq_solve(X, y2, w, 2, 2, 0, &f), DLP_ERR_INVALID);     // a negative weight
    dlp_err_clear();
}

// --- the probe's fits ------------------------------------------------------------------------------------------------

// Samples as the transformer produces them: output sizes 64..288, decoded windows and entropy bytes that vary
// with the crop, with known costs and a relative noise.
static void make_samples(dlp_pipeline_sample *s, int n, double noise, uint64_t seed) {
    static const int sizes[] = {64, 96, 128, 160, 224, 288};
    dlp_rng r;
    dlp_rng_init(&r, seed, 2);
    for (int i = 0; i < n; i++) {
        int out = sizes[i % 6];
        double crop = dlp_rng_range(&r, 0.08, 1.0) * 500 * 375;
        double scale = out * out * 4.0 > crop ? 1.0 : (out * out * 16.0 > crop ? 0.5 : 0.25);
        s[i].rsz_px = crop * scale * scale;
        s[i].dec_px = s[i].rsz_px * dlp_rng_range(&r, 1.02, 1.25);
        s[i].ent_bytes = 110000 * dlp_rng_range(&r, 0.2, 1.0);
        s[i].out_px = (double)out * out;
        double dec = 1.5e-4 + 2.3e-9 * s[i].dec_px + 8.2e-9 * s[i].ent_bytes;
        double aug = 2.5e-5 + 1.1e-9 * s[i].rsz_px + 2.9e-9 * s[i].out_px;
        s[i].dec_s = dec * (1 + noise * dlp_rng_normal(&r));
        s[i].aug_s = aug * (1 + noise * dlp_rng_normal(&r));
    }
}

static void test_fit_pipeline(void **state) {
    (void)state;
    enum { N = 3000 };
    dlp_pipeline_sample *s = malloc(sizeof *s * N);
    dlp_pipeline_profile pp;
    memset(&pp, 0, sizeof pp);
    dlp_lsq_fit fd, fa;
    // Exact measurements: the coefficients come back exactly.
    make_samples(s, N, 0, 1);
    assert_int_equal(dlp_probe_fit_pipeline(s, N, &pp, &fd, &fa), DLP_OK);
    NEAR(pp.decode_per_image_s, 1.5e-4, 1e-7);
    NEAR(pp.decode_per_pixel_s, 2.3e-9, 1e-7);
    NEAR(pp.decode_per_byte_s, 8.2e-9, 1e-7);
    NEAR(pp.augment_per_image_s, 2.5e-5, 1e-7);
    NEAR(pp.augment_per_in_pixel_s, 1.1e-9, 1e-7);
    NEAR(pp.augment_per_out_pixel_s, 2.9e-9, 1e-7);
    // 5 % noise per sample: within a few per cent (the per-pixel terms carry most of the cost and come best).
    make_samples(s, N, 0.05, 2);
    assert_int_equal(dlp_probe_fit_pipeline(s, N, &pp, &fd, &fa), DLP_OK);
    NEAR(pp.decode_per_image_s, 1.5e-4, 0.05);
    NEAR(pp.decode_per_pixel_s, 2.3e-9, 0.02);
    NEAR(pp.decode_per_byte_s, 8.2e-9, 0.03);
    NEAR(pp.augment_per_image_s, 2.5e-5, 0.10);
    NEAR(pp.augment_per_in_pixel_s, 1.1e-9, 0.02);
    NEAR(pp.augment_per_out_pixel_s, 2.9e-9, 0.03);
    NEAR(fd.rel_rms, 0.05, 0.1);  // the residuals are the noise put in
    NEAR(fa.rel_rms, 0.05, 0.1);
    assert_int_equal(dlp_probe_fit_pipeline(s, 2, &pp, NULL, NULL), DLP_ERR_INVALID);
    dlp_err_clear();
    free(s);
}

static void test_fit_step(void **state) {
    (void)state;
    // t = 40 ms + b x 20 ms for a net doing half the reference work: per reference image 40 ms.
    const int b[] = {8, 16, 32};
    double t[3];
    for (int i = 0; i < 3; i++) t[i] = 0.040 + b[i] * 0.020;
    double t0, pi;
    dlp_lsq_fit f;
    assert_int_equal(dlp_probe_fit_step(b, t, 3, 0.5, &t0, &pi, &f), DLP_OK);
    NEAR(t0, 0.040, 1e-9);
    NEAR(pi, 0.040, 1e-9);
    assert_true(f.rms < 1e-12);
    // Noise that makes the slope negative: the largest batch alone, no fixed time.
    double bad[] = {0.5, 0.45};
    const int b2[] = {8, 32};
    assert_int_equal(dlp_probe_fit_step(b2, bad, 2, 1.0, &t0, &pi, NULL), DLP_OK);
    assert_true(t0 == 0);
    NEAR(pi, 0.45 / 32, 1e-12);
    // One point: the same rule.
    assert_int_equal(dlp_probe_fit_step(b2 + 1, bad + 1, 1, 2.0, &t0, &pi, NULL), DLP_OK);
    NEAR(pi, 0.45 / 32 / 2, 1e-12);
    assert_int_equal(dlp_probe_fit_step(b, t, 3, 0, &t0, &pi, NULL), DLP_ERR_INVALID);
    dlp_err_clear();
}

static void test_scaling(void **state) {
    (void)state;
    // 2 cores: 100 img/s on one thread, 180 on two (efficiency 0.9); 3 and 4 threads add 190 / 180 - 1 = 5.6 % of
    // the 2-core rate over 2 extra threads: each adds (190/180 - 1) x 2 / 2 = 0.0556 of a core.
    const int w[] = {1, 2, 3, 4};
    const double x[] = {100, 180, 185, 190};
    dlp_pipeline_profile pp;
    memset(&pp, 0, sizeof pp);
    dlp_probe_scaling(w, x, 4, 2, 0, &pp);
    assert_int_equal(pp.nscaling, 2);
    assert_int_equal(pp.scaling[0].threads, 1);
    NEAR(pp.scaling[0].efficiency, 1.0, 1e-12);
    assert_int_equal(pp.scaling[1].threads, 2);
    NEAR(pp.scaling[1].efficiency, 0.9, 1e-12);
    NEAR(pp.oversub_efficiency, (190.0 / 180 - 1) * 2 / 2, 1e-12);
    // Fewer threads beyond the cores than measured: none; slower with more threads: 0, not negative.
    const double y[] = {100, 180, 150, 120};
    dlp_probe_scaling(w, y, 4, 2, 0, &pp);
    assert_true(pp.oversub_efficiency == 0);
    dlp_probe_scaling(w, x, 2, 2, 0, &pp);
    assert_true(pp.oversub_efficiency == 0);
    assert_int_equal(pp.nscaling, 2);
    // Against the model's cost per image (9.5 ms: 105.26 img/s on one thread's CPU): 100 img/s measured on one thread
    // is an efficiency of 0.95, 180 on two 0.855 — the model then gives back 100 and 180.
    dlp_probe_scaling(w, x, 4, 2, 0.0095, &pp);
    NEAR(pp.scaling[0].efficiency, 0.95, 1e-12);
    NEAR(pp.scaling[1].efficiency, 180 * 0.0095 / 2, 1e-12);
    NEAR(1 * pp.scaling[0].efficiency / 0.0095, 100, 1e-9);
    NEAR(2 * pp.scaling[1].efficiency / 0.0095, 180, 1e-9);
    NEAR(pp.oversub_efficiency, (190.0 / 180 - 1) * 2 / 2, 1e-12);
}

static void test_contention_shares(void **state) {
    (void)state;
    dlp_contention_point pt;
    dlp_probe_contention_shares(30, 24, 800, 200, 2, 1, &pt);
    assert_int_equal(pt.threads, 2);
    assert_int_equal(pt.workers, 1);
    NEAR(pt.compute_share, 0.8, 1e-12);
    NEAR(pt.loader_share, 0.25, 1e-12);
    dlp_probe_contention_shares(30, 45, 800, 0, 1, 1, &pt);  // clamped to (0.01, 1.2]
    NEAR(pt.compute_share, 1.2, 1e-12);
    NEAR(pt.loader_share, 0.01, 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lsq_exact),
        cmocka_unit_test(test_lsq_noise),
        cmocka_unit_test(test_lsq_nonneg_and_weights),
        cmocka_unit_test(test_lsq_errors),
        cmocka_unit_test(test_fit_pipeline),
        cmocka_unit_test(test_fit_step),
        cmocka_unit_test(test_scaling),
        cmocka_unit_test(test_contention_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
