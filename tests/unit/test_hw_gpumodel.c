// Unit tests for hw/gpumodel and perf/validate_published: one layer's roofline against a hand calculation, the fit
// recovering known stack parameters from records made with them, and a leave-one-GPU-out that cannot see the
// record it holds out (poisoning that record leaves its prediction unchanged, while other GPUs' predictions move).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/catalog.h"
#include "hw/gpumodel.h"
#include "hw/work.h"
#include "perf/validate.h"
#include "testutil.h"

static dlp_gpu_spec made_up_gpu(void) {
    dlp_gpu_spec g;
    memset(&g, 0, sizeof g);
    g.id = "made-up";
    g.fp16_tflops = 100;     // 1e14 FLOP/s
    g.fp32_tflops = 10;
    g.mem_bw_gb_s = 1000;    // 1e12 B/s
    return g;
}

// ResNet-50's second convolution (stage 1, 3x3, 64 -> 64 at 56x56) and its batch norm, by hand.
static void test_layer_roofline(void **state) {
    (void)state;
    dlp_wlayer L[DLP_WORK_MAX_LAYERS];
    int n = 0;
    assert_int_equal(dlp_work_layers("resnet50", 224, 224, 1000, L, DLP_WORK_MAX_LAYERS, &n), DLP_OK);
    // stem conv, bn, relu, maxpool, then block 1: conv 1x1 64->64, bn, relu, conv 3x3 64->64 (index 7), bn (8)
    const dlp_wlayer *conv = &L[7], *bn = &L[8];
    assert_int_equal(conv->kind, DLP_WL_CONV);
    assert_int_equal(bn->kind, DLP_WL_BN);
    const double flops = 2.0 * 64 * 56 * 56 * 64 * 9, elems = 64.0 * 56 * 56;
    assert_true(conv->flops == flops && conv->in_elems == elems && conv->out_elems == elems);
    dlp_gpu_spec g = made_up_gpu();
    dlp_gm_stack s = {.name = "hand", .ce = 0.5, .me = 0.25, .kernel_s = 0, .overlap = 0.8};
    int mem = -1;
    // forward fp16: compute 231.2 MFLOP / (1e14 x 0.5) = 4.624 us; memory 2 B x (in + out) / (1e12 x 0.25) = 3.211 us
    double t = dlp_gm_layer_time(conv, 0, &g, DLP_PREC_FP16, &s, &mem);
    assert_true(fabs(t - flops / 0.5e14) < 1e-15 && mem == 0);
    // backward: 2x the FLOPs (9.248 us); dY, dX, Y, X: 4 x elems x 2 B / 0.25e12 = 6.42 us -> compute-bound
    t = dlp_gm_layer_time(conv, 1, &g, DLP_PREC_FP16, &s, &mem);
    assert_true(fabs(t - 2 * flops / 0.5e14) < 1e-15 && mem == 0);
    // fp32 on 10 TFLOPS: 46.2 us of compute vs 6.42 us of memory
    t = dlp_gm_layer_time(conv, 0, &g, DLP_PREC_FP32, &s, &mem);
    assert_true(fabs(t - flops / 0.5e13) < 1e-14 && mem == 0);
    // batch norm forward: 3 x elems x 2 B / (1e12 x 0.25) = 4.817 us, memory-bound (no FLOPs counted)
    t = dlp_gm_layer_time(bn, 0, &g, DLP_PREC_FP16, &s, &mem);
    assert_true(fabs(t - 3 * elems * 2 / 0.25e12) < 1e-15 && mem == 1);
    // ... backward 5 passes over the tensor
    t = dlp_gm_layer_time(bn, 1, &g, DLP_PREC_FP16, &s, &mem);
    assert_true(fabs(t - 5 * elems * 2 / 0.25e12) < 1e-15 && mem == 1);
    // The SMs' limit: 10 SMs x 1 GHz x 8 B = 80 GB/s, below the 1 TB/s of HBM; it now bounds the convolution too.
    g.sms = 10;
    g.boost_mhz = 1000;
    s.sm_bytes_per_clk = 8;
    t = dlp_gm_layer_time(conv, 0, &g, DLP_PREC_FP16, &s, &mem);
    assert_true(fabs(t - 2 * elems * 2 / (80e9 * 0.25)) < 1e-15 && mem == 1);
    // The whole step sums the passes; kernel and update terms come on top.
    g.sms = 0;
    s.kernel_s = 1e-5;
    dlp_gm_step st;
    assert_int_equal(dlp_gm_step_compute(&g, DLP_PREC_FP16, &s, &st), DLP_OK);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += dlp_gm_layer_time(&L[i], 0, &g, DLP_PREC_FP16, &s, NULL) + dlp_gm_layer_time(&L[i], 1, &g, DLP_PREC_FP16, &s, NULL);
    assert_true(fabs(st.fwd_s + st.bwd_s - sum) < 1e-12 * sum);
    double update = (double)dlp_work_ref()->params * 22 / (1e12 * 0.25);
    assert_true(fabs(st.update_s - update) < 1e-12 * update);
    assert_true(fabs(dlp_gm_step_time(&st, 64) - (st.kernels * 1e-5 + 64 * sum + update)) < 1e-12);
    // No rate at the precision: an error naming it.
    assert_int_equal(dlp_gm_step_compute(&g, DLP_PREC_TF32, &s, &st), DLP_ERR_UNSUPPORTED);
    assert_non_null(strstr(dlp_err_msg(), "tf32"));
}

// Records made by the model with known parameters on real datasheets; the fit (no prior) gets them back.
static void test_fit_recovers(void **state) {
    (void)state;
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_gm_stack truth = {.name = "truth", .ce = 0.55, .me = 0.7, .kernel_s = 12e-6, .loss = 0.02, .overlap = DLP_GM_OVERLAP,
                          .sm_bytes_per_clk = 8};
    static const char *const gpus[] = {"v100", "a100-80gb", "h100", "rtx-3090", "rtx-4090", "t4"};
    static const int batches[] = {64, 256, 512};
    dlp_gm_record r[64];
    int n = 0;
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        const dlp_gpu_spec *g = dlp_catalog_gpu(c, gpus[i]);
        assert_non_null(g);
        for (int p = 0; p < 2; p++) {
            dlp_prec prec = p ? DLP_PREC_FP16 : (g->tf32_tflops > 0 ? DLP_PREC_TF32 : DLP_PREC_FP32);
            dlp_gm_step st;
            assert_int_equal(dlp_gm_step_compute(g, prec, &truth, &st), DLP_OK);
            int gpus_n = (i % 2 == 0 && p == 1) ? 8 : 1;
            int b = batches[(i + p) % 3];
            r[n] = (dlp_gm_record){g, prec, b, gpus_n, 0, dlp_gm_busbw(g), NULL};
            r[n].img_per_s = dlp_gm_img_per_s(&st, &truth, b, gpus_n, r[n].busbw_bytes_per_s);
            n++;
            if (gpus_n == 8) {  // its 1-GPU figure too
                r[n] = r[n - 1];
                r[n].gpus = 1;
                r[n].img_per_s = dlp_gm_img_per_s(&st, &truth, b, 1, 0);
                n++;
            }
        }
    }
    dlp_gm_stack fit;
    assert_int_equal(dlp_gm_fit("made-up", r, n, NULL, &fit), DLP_OK);
    printf("fit: ce %.4f me %.4f kernel %.2f us loss %.4f k %.0f mape %.2e\n", fit.ce, fit.me, fit.kernel_s * 1e6,
           fit.loss, fit.sm_bytes_per_clk, fit.fit_mape);
    assert_true(fabs(fit.ce - truth.ce) < 1e-3 * truth.ce);
    assert_true(fabs(fit.me - truth.me) < 1e-3 * truth.me);
    assert_true(fabs(fit.kernel_s - truth.kernel_s) < 1e-2 * truth.kernel_s);
    assert_true(fabs(fit.loss - truth.loss) < 1e-3 * truth.loss);
    assert_true(fit.sm_bytes_per_clk == 8 && !fit.scaled && fit.nrecords == n && fit.ngpus == 6);
    assert_true(fit.fit_mape < 1e-4);
    // With a prior and a single GPU: only a scale on the prior is fitted (two parameters cannot be told apart).
    dlp_gm_stack one;
    dlp_gm_record two[2] = {r[0], r[2]};  // v100 fp32 and fp16, 1 GPU each
    for (int i = 0; i < 2; i++) two[i].img_per_s *= 0.5;  // a stack half as fast
    assert_int_equal(dlp_gm_fit("slow", two, 2, &fit, &one), DLP_OK);
    assert_true(one.scaled && fabs(one.scale - 2) < 1e-3 && one.ce == fit.ce);
    for (int k = 0; k < DLP_GM_PCLASSES; k++) assert_true(fabs(one.pscale[k] - 2) < 1e-3);  // fp16, fp32 and (mean) tf32

    // Bad input: no records, a zero throughput.
    assert_int_not_equal(dlp_gm_fit("none", r, 0, NULL, &one), DLP_OK);
    two[0].img_per_s = 0;
    assert_int_not_equal(dlp_gm_fit("zero", two, 2, &fit, &one), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "zero"));
    dlp_catalog_free(c);
}

// A stack slower at TF32 and faster at strict FP32 than its 16-bit shape says: the fit gets the factors back; and two
// GPUs of one datasheet (V100 16 and 32 GB) do not make a full fit: with a prior, only the factors are fitted.
static void test_fit_precision_factors(void **state) {
    (void)state;
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_gm_stack truth = {.name = "truth", .ce = 0.6, .me = 0.75, .kernel_s = 8e-6, .loss = 0.01, .overlap = DLP_GM_OVERLAP,
                          .pscale = {1, 1.3, 0.8}};
    static const char *const gpus[] = {"v100", "a100-80gb", "h100", "rtx-3090", "rtx-4090"};
    static const dlp_prec precs[] = {DLP_PREC_FP16, DLP_PREC_TF32, DLP_PREC_FP32};
    dlp_gm_record r[32];
    int n = 0;
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
        for (size_t p = 0; p < 3; p++) {
            const dlp_gpu_spec *g = dlp_catalog_gpu(c, gpus[i]);
            dlp_gm_step st;
            if (dlp_gm_step_compute(g, precs[p], &truth, &st) != DLP_OK) {  // no TF32 on a V100
                dlp_err_clear();
                continue;
            }
            int b = 128 << (i % 3);
            r[n] = (dlp_gm_record){g, precs[p], b, 1, dlp_gm_img_per_s(&st, &truth, b, 1, 0), 0, NULL};
            n++;
        }
    assert_true(n >= 12);
    dlp_gm_stack fit;
    assert_int_equal(dlp_gm_fit("made-up", r, n, NULL, &fit), DLP_OK);
    printf("factors: %.4f %.4f %.4f ce %.4f me %.4f mape %.1e\n", fit.pscale[0], fit.pscale[1], fit.pscale[2], fit.ce,
           fit.me, fit.fit_mape);
    // The 16-bit class has the most records and is held at 1; the others come back relative to it.
    // (The shape and the factors are fitted in turns, stopped at a relative step of 1e-5: within 0.5%.)
    assert_true(fit.pscale[0] == 1 && fabs(fit.pscale[1] - 1.3) < 5e-3 * 1.3 && fabs(fit.pscale[2] - 0.8) < 5e-3 * 0.8);
    assert_true(fabs(fit.ce - truth.ce) < 5e-3 * truth.ce && fabs(fit.me - truth.me) < 5e-3 * truth.me);
    assert_true(fit.pn[0] == 5 && fit.pn[1] == 4 && fit.pn[2] == 5 && fit.fit_mape < 2e-3);
    double ce, me, ks;
    dlp_gm_effective(&fit, DLP_PREC_TF32, &ce, &me, &ks);
    assert_true(ce == fit.ce / fit.pscale[1] && me == fit.me / fit.pscale[1] && ks == fit.kernel_s * fit.pscale[1]);
    // Twins: the V100's records again on a 32 GB V100, with the prior above: one datasheet, so a scaled prior.
    const dlp_gpu_spec *v16 = dlp_catalog_gpu(c, "v100-16gb"), *v32 = dlp_catalog_gpu(c, "v100-32gb");
    assert_true(v16 && v32 && v16 != v32 && dlp_gm_same_sheet(v16, v32) && !dlp_gm_same_sheet(v16, r[3].gpu));
    dlp_gm_record tw[4] = {r[0], r[1], r[0], r[1]};
    tw[2].gpu = tw[3].gpu = v32;
    dlp_gm_stack one;
    assert_int_equal(dlp_gm_fit("twins", tw, 4, &fit, &one), DLP_OK);
    assert_true(one.scaled && one.ngpus == 2 && one.ce == fit.ce && one.me == fit.me);
    dlp_catalog_free(c);
}

// --- leave-one-GPU-out cannot see the held-out record --------------------------------------------------------------

static const char *const k_files[] = {"sources", "gpus", "cpus", "systems", "throughput", "datasets", "pipelines"};

static void copy_catalog(const char *src, const char *dst, const char *poison_gpu, double factor) {
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s.json", src, k_files[i]);
        snprintf(b, sizeof b, "%s/%s.json", dst, k_files[i]);
        json_error_t e;
        json_t *j = json_load_file(a, 0, &e);
        assert_non_null(j);
        json_t *recs = json_object_get(j, "records");
        for (size_t k = 0; poison_gpu && k < json_array_size(recs); k++) {
            json_t *rec = json_array_get(recs, k);
            if (strcmp(json_string_value(json_object_get(rec, "gpu")), poison_gpu) != 0) continue;
            if (strcmp(json_string_value(json_object_get(rec, "task")), "train") != 0) continue;
            double v = json_number_value(json_object_get(rec, "img_per_s"));
            json_object_set_new(rec, "img_per_s", json_real(v * factor));
        }
        assert_int_equal(json_dump_file(j, b, JSON_INDENT(1) | JSON_PRESERVE_ORDER), 0);
        json_decref(j);
    }
}

static void run_loo(const char *dir, dlp_vp_row *rows, int *n) {
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(dir, &c), DLP_OK);
    int skipped = 0;
    assert_int_equal(dlp_validate_published(c, rows, DLP_GM_MAX_RECORDS, n, &skipped), DLP_OK);
    // keep what the rows point into: compare by index; the catalogs are loaded in the same order
    dlp_catalog_free(c);
    for (int i = 0; i < *n; i++) rows[i].pub = NULL;
}

// Held out by datasheet: poisoning the V100 32GB's records leaves every V100 16GB prediction where it was (its twin
// is out of the fit with it), while GPU by GPU the 16GB's predictions see the poison.
static void loo_by(const char *dir, int by_sheet, dlp_vp_row *rows, int *n, int *is16) {
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(dir, &c), DLP_OK);
    int skipped = 0;
    assert_int_equal(dlp_validate_published_by(c, by_sheet, rows, DLP_GM_MAX_RECORDS, n, &skipped), DLP_OK);
    for (int i = 0; i < *n; i++) is16[i] = strcmp(rows[i].pub->gpu->id, "v100-16gb") == 0;
    dlp_catalog_free(c);
}

// The catalog-wide leave-one-out fits take about 80 s under the sanitizers (20 s without): tests/run.sh's normal pass
// runs them; its sanitizer pass (DLPERF_SANITIZER=1) covers the same fitting code through test_fit_recovers and
// test_fit_precision_factors, and validate_published's loop through tests/cli/perf_predict.sh.
static int sanitizer_pass(void) {
    const char *s = getenv("DLPERF_SANITIZER");
    return s && strcmp(s, "1") == 0;
}

// Two copies of the default catalog in temporary folders: a as it is, b with gpu's training records x factor.
static void catalog_and_poisoned(char a[512], char b[512], const char *gpu, double factor) {
    char src[1024];
    assert_int_equal(dlp_catalog_default_dir(src, sizeof src), DLP_OK);
    dlp_test_tmpdir(a, 512);
    dlp_test_tmpdir(b, 512);
    copy_catalog(src, a, NULL, 1);
    copy_catalog(src, b, gpu, factor);
}

static void test_loo_blind_by_sheet(void **state) {
    (void)state;
    if (sanitizer_pass()) skip();
    char a[512], b[512];
    catalog_and_poisoned(a, b, "v100-32gb", 2.0);
    dlp_vp_row *ra = calloc(DLP_GM_MAX_RECORDS, sizeof *ra), *rb = calloc(DLP_GM_MAX_RECORDS, sizeof *rb);
    int *is16 = calloc(DLP_GM_MAX_RECORDS, sizeof *is16), *is16b = calloc(DLP_GM_MAX_RECORDS, sizeof *is16b);
    assert_true(ra && rb && is16 && is16b);
    for (int by_sheet = 0; by_sheet < 2; by_sheet++) {
        int na = 0, nb = 0, n16 = 0, moved16 = 0;
        loo_by(a, by_sheet, ra, &na, is16);
        loo_by(b, by_sheet, rb, &nb, is16b);
        assert_int_equal(na, nb);
        for (int i = 0; i < na; i++) {
            assert_int_equal(is16[i], is16b[i]);
            if (!is16[i]) continue;
            n16++;
            moved16 += fabs(ra[i].predicted - rb[i].predicted) > 1e-6 * ra[i].predicted;
        }
        assert_true(n16 >= 8);
        if (by_sheet) assert_int_equal(moved16, 0);  // the twin is held out with it
        else assert_true(moved16 > 0);               // GPU by GPU the twin is in the fit: the test can fail
    }
    free(ra);
    free(rb);
    free(is16);
    free(is16b);
    dlp_test_rmtree(a);
    dlp_test_rmtree(b);
}

static void test_loo_blind(void **state) {
    (void)state;
    if (sanitizer_pass()) skip();
    char a[512], b[512];
    catalog_and_poisoned(a, b, "rtx-4090", 3.0);  // the 4090's training records three times as fast
    dlp_vp_row *ra = calloc(DLP_GM_MAX_RECORDS, sizeof *ra), *rb = calloc(DLP_GM_MAX_RECORDS, sizeof *rb);
    assert_true(ra && rb);
    int na = 0, nb = 0;
    // Which rows are the 4090's: from the unpoisoned run, before the pointers go.
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(a, &c), DLP_OK);
    int skipped = 0;
    assert_int_equal(dlp_validate_published(c, ra, DLP_GM_MAX_RECORDS, &na, &skipped), DLP_OK);
    int is4090[DLP_GM_MAX_RECORDS];
    for (int i = 0; i < na; i++) is4090[i] = strcmp(ra[i].pub->gpu->id, "rtx-4090") == 0;
    dlp_catalog_free(c);
    run_loo(b, rb, &nb);
    assert_int_equal(na, nb);
    assert_true(na >= 20);
    int n4090 = 0, moved = 0;
    for (int i = 0; i < na; i++) {
        assert_string_equal(ra[i].stack, rb[i].stack);
        if (is4090[i]) {
            // Held out: its predictions do not move although its published figures tripled ...
            assert_true(fabs(ra[i].predicted - rb[i].predicted) <= 1e-9 * ra[i].predicted);
            // ... and its error says so: (pred - 3 x pub) / (3 x pub)
            assert_true(fabs((1 + rb[i].error) * 3 - (1 + ra[i].error)) < 1e-9);
            n4090++;
        } else {
            moved += fabs(ra[i].predicted - rb[i].predicted) > 1e-3 * ra[i].predicted;
        }
    }
    assert_true(n4090 >= 2);
    assert_true(moved > 0);  // the poison is seen wherever the 4090 is not held out: the test can fail
    free(ra);
    free(rb);
    dlp_test_rmtree(a);
    dlp_test_rmtree(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_roofline),
        cmocka_unit_test(test_fit_recovers),
        cmocka_unit_test(test_fit_precision_factors),
        cmocka_unit_test(test_loo_blind),
        cmocka_unit_test(test_loo_blind_by_sheet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
