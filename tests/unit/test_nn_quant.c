// int8 inference (nn/quant + the cpu backend's int8 plan) against `ref` in fp32.
//
// Every int8 op of the plan — a convolution with BN folded and ReLU fused on a u8 input (3x3 and 1x1, stride 1 and
// 2), the first convolution on the raw (signed) input when it is quantized too, the residual sum read from a u8
// shortcut and from an s8 one (a downsample branch) with ReLU, max pooling on u8, the dequantization before average
// pooling and the fp32 fc — on fresh random inputs and weights, calibrated (min/max and percentile) on the inputs
// themselves by the cpu fp32 plan's observer, compared with ref's fp32 output.
//
// Error measure: max |a - b| / max |b| over the output (the tensor's scale, as in test_backend_ops).
// Tolerance: an int8 op rounds its output to a step of range/255 (u8) or range/127 (s8), its input was rounded to
// such a step, and its weights to max|w[k]|/127 per output channel: each contributes at most half a step to a
// value, and the input and weight errors of a K-term dot product add up like a random walk (relative to the sum
// of |terms|, ~ sqrt(K)/K of the worst case), so one op is within ~1 s8 step of its range (1/127 = 0.8%). The
// longest chain in a case has 4 quantized tensors; TOL = 4 s8 steps (3.1%) relative to the output's max. The
// measured errors are printed (0.6-2.1% here; resnet-mini 3.3%). A whole resnet-mini (11 int8 convolutions) is checked by its
// logits (8 steps) and by top-1 agreement with ref on 16 images.
// Also: the calibration file (save, load, mismatches named), and the plan refusing int8 without ranges.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "core/status.h"
#include "nn/quant.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "testutil.h"

#define STEP_S8 (1.0 / 127.0)
#define TOL_OP (4 * STEP_S8)
#define TOL_NET (8 * STEP_S8)

static const dlp_backend *backend(const char *name) {
    const char *arg = NULL;
    const dlp_backend *b = dlp_backend_find(name, &arg);
    char why[256];
    if (!b || dlp_backend_available(b, why, sizeof why) != DLP_OK) {
        dlp_err_clear();
        return NULL;
    }
    return b;
}


static float *randn(int64_t n, uint64_t seed) {
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    dlp_rng r;
    dlp_rng_init(&r, seed, 7);
    for (int64_t i = 0; i < n; i++) x[i] = (float)dlp_rng_normal(&r);
    return x;
}

typedef struct run_cfg {
    dlp_dtype prec;
    const dlp_quant *q;
    int first_conv;
    dlp_calib *observe;
} run_cfg;

// One inference forward of n images; the output (n, out) into a new array. *info_int8 gets the plan's int8_convs.
static dlp_status run_plan(const dlp_backend *b, const dlp_net *net, const float *params, const float *bufs,
                           const float *x, int n, const run_cfg *rc, float **out, int *int8_convs) {
    dlp_plan_cfg pc;
    memset(&pc, 0, sizeof pc);
    pc.batch = n;
    pc.precision = rc->prec;
    pc.threads = 2;
    if (rc->q) {
        pc.act_range = rc->q->range;
        pc.act_min = rc->q->min;
    }
    pc.int8_first_conv = rc->first_conv;
    if (rc->observe) {
        pc.observe = dlp_calib_observe;
        pc.observe_ctx = rc->observe;
    }
    dlp_plan *p;
    DLP_CHECK(dlp_plan_create(b, net, &pc, &p));
    dlp_status st = dlp_plan_set_params(p, params, bufs);
    if (!st) st = dlp_test_set_input(p, net, x, n);
    if (!st) st = dlp_plan_forward(p, DLP_PASS_EVAL);
    const int64_t per = dlp_net_layer_numel(net, net->nlayers - 1);
    *out = malloc((size_t)(n * per) * sizeof(float));
    assert_non_null(*out);
    if (!st) st = dlp_plan_get_output(p, *out);
    if (int8_convs) {
        json_t *j = dlp_plan_info_json(p);
        json_t *b8 = j ? json_object_get(j, "int8_convs") : NULL;
        *int8_convs = b8 ? (int)json_integer_value(b8) : -1;
        json_decref(j);
    }
    dlp_plan_free(p);
    return st;
}

static double rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

// Calibrates net on x (n images) with the cpu fp32 plan's observer.
static void calibrate(const dlp_backend *cpu, const dlp_net *net, const float *params, const float *bufs,
                      const float *x, int n, dlp_calib_method m, dlp_quant *q) {
    dlp_calib *c;
    assert_int_equal(dlp_calib_create(net, m, 99.99, &c), DLP_OK);
    run_cfg rc = {.prec = DLP_DTYPE_F32, .observe = c};
    float *out;
    assert_int_equal(run_plan(cpu, net, params, bufs, x, n, &rc, &out, NULL), DLP_OK);
    free(out);
    assert_int_equal(dlp_calib_finish(c, n, 1, q), DLP_OK);
    dlp_calib_free(c);
}

typedef enum { NET_CONV, NET_RESIDUAL, NET_DOWNSAMPLE, NET_POOL_FC } net_kind;
typedef struct op_case {
    const char *name;
    net_kind kind;
    int c, hw, int8_convs, int8_convs_first;  // int8 convolutions expected: first conv fp32 / int8
} op_case;

static const op_case k_cases[] = {
    {"conv3x3+bn+relu, 3x3/2, 1x1 (s8 out)", NET_CONV, 8, 12, 3, 4},
    {"residual sum from a u8 shortcut + relu", NET_RESIDUAL, 16, 10, 2, 3},
    {"residual sum from an s8 downsample + relu", NET_DOWNSAMPLE, 16, 12, 3, 4},
    {"maxpool u8, avgpool, fc", NET_POOL_FC, 8, 16, 1, 2},
};

static int cbr(dlp_net *net, const char *name, int x, int c, int k, int s, int relu) {
    char bn[64];
    snprintf(bn, sizeof bn, "%s.bn", name);
    int y = dlp_net_bn(net, bn, dlp_net_conv(net, name, x, c, k, s, k / 2));
    return relu ? dlp_net_relu(net, y) : y;
}

static void build(const op_case *c, dlp_net *net) {
    assert_int_equal(dlp_net_init(net, "op", 3, c->hw, c->hw), DLP_OK);
    int x = cbr(net, "stem", 0, c->c, 3, 1, 1), y = -1;
    switch (c->kind) {
    case NET_CONV:
        y = cbr(net, "a", x, 16, 3, 1, 1);
        y = cbr(net, "b", y, 16, 3, 2, 1);
        y = dlp_net_conv(net, "c", y, 8, 1, 1, 0);
        break;
    case NET_RESIDUAL:
        y = cbr(net, "a", x, c->c, 3, 1, 1);
        y = dlp_net_relu(net, dlp_net_add(net, cbr(net, "b", y, c->c, 3, 1, 0), x));
        break;
    case NET_DOWNSAMPLE: {
        y = cbr(net, "a", x, 32, 3, 2, 1);
        y = cbr(net, "b", y, 32, 3, 1, 0);
        int d = cbr(net, "down", x, 32, 1, 2, 0);
        y = dlp_net_relu(net, dlp_net_add(net, y, d));
        break;
    }
    case NET_POOL_FC:
        y = dlp_net_maxpool(net, x, 3, 2, 1);
        y = cbr(net, "a", y, 16, 3, 1, 1);
        y = dlp_net_fc(net, "fc", dlp_net_avgpool(net, y), 10);
        break;
    }
    assert_true(y > 0);
}

static void test_ops_vs_ref(void **state) {
    (void)state;
    const dlp_backend *ref = backend("ref"), *cpu = backend("cpu");
    if (!cpu) skip();
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        const op_case *c = &k_cases[ci];
        dlp_net net;
        build(c, &net);
        float *params = calloc((size_t)net.param_count, sizeof(float)), *bufs = calloc((size_t)net.buf_count + 1, sizeof(float));
        dlp_test_init_params(&net, 11 + ci, params, bufs);
        const int n = 4;
        float *x = randn(n * dlp_net_layer_numel(&net, 0), 5 + ci);
        const int64_t nout = n * dlp_net_layer_numel(&net, net.nlayers - 1);
        float *want;
        run_cfg rr = {.prec = DLP_DTYPE_F32};
        assert_int_equal(run_plan(ref, &net, params, bufs, x, n, &rr, &want, NULL), DLP_OK);
        for (int m = 0; m < 2; m++) {
            dlp_quant q;
            calibrate(cpu, &net, params, bufs, x, n, m ? DLP_CALIB_PERCENTILE : DLP_CALIB_MINMAX, &q);
            for (int first = 0; first < 2; first++) {
                // first 0: the first convolution kept fp32 (int8_first_conv -1); 1: quantized (0, the default)
                run_cfg rc = {.prec = DLP_DTYPE_I8, .q = &q, .first_conv = first ? 0 : -1};
                float *got;
                int nq = 0;
                dlp_status st = run_plan(cpu, &net, params, bufs, x, n, &rc, &got, &nq);
                if (st) dlp_err_print(stderr);
                assert_int_equal(st, DLP_OK);
                const double e = rel_err(got, want, nout);
                printf("  int8 %-44s %-10s first conv %-4s: %d int8 convs, error %.4f (tol %.4f)\n", c->name,
                       m ? "percentile" : "minmax", first ? "int8" : "fp32", nq, e, TOL_OP);
                assert_int_equal(nq, first ? c->int8_convs_first : c->int8_convs);
                assert_true(e <= TOL_OP);
                assert_true(e > 0);  // it was quantized: int8 is not fp32
                free(got);
            }
            dlp_quant_free(&q);
        }
        free(want);
        free(x);
        free(params);
        free(bufs);
        dlp_net_free(&net);
    }
}

static void argmax_rows(const float *z, int n, int k, int *out) {
    for (int i = 0; i < n; i++) {
        int b = 0;
        for (int j = 1; j < k; j++)
            if (z[i * k + j] > z[i * k + b]) b = j;
        out[i] = b;
    }
}

static void test_resnet_mini(void **state) {
    (void)state;
    const dlp_backend *ref = backend("ref"), *cpu = backend("cpu");
    if (!cpu) skip();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 10, 32, &net), DLP_OK);
    float *params = calloc((size_t)net.param_count, sizeof(float)), *bufs = calloc((size_t)net.buf_count, sizeof(float));
    dlp_test_init_params(&net, 3, params, bufs);
    const int n = 16;
    float *x = randn(n * dlp_net_layer_numel(&net, 0), 9);
    float *want, *got;
    run_cfg rr = {.prec = DLP_DTYPE_F32};
    assert_int_equal(run_plan(ref, &net, params, bufs, x, n, &rr, &want, NULL), DLP_OK);
    dlp_quant q;
    calibrate(cpu, &net, params, bufs, x, n, DLP_CALIB_MINMAX, &q);
    run_cfg rc = {.prec = DLP_DTYPE_I8, .q = &q};
    int nq = 0;
    assert_int_equal(run_plan(cpu, &net, params, bufs, x, n, &rc, &got, &nq), DLP_OK);
    const double e = rel_err(got, want, (int64_t)n * 10);
    int a[16], b[16], agree = 0;
    argmax_rows(got, n, 10, a);
    argmax_rows(want, n, 10, b);
    for (int i = 0; i < n; i++) agree += a[i] == b[i];
    printf("  int8 resnet-mini: %d int8 convs, logits error %.4f (tol %.4f), top-1 agreement %d/%d\n", nq, e, TOL_NET,
           agree, n);
    assert_true(nq > 5);
    assert_true(e <= TOL_NET);
    assert_true(agree >= n - 2);
    free(got);
    free(want);
    dlp_quant_free(&q);
    free(x);
    free(params);
    free(bufs);
    dlp_net_free(&net);
}

static void test_refusals(void **state) {
    (void)state;
    const dlp_backend *cpu = backend("cpu");
    if (!cpu) skip();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 10, 32, &net), DLP_OK);
    dlp_plan_cfg pc;
    memset(&pc, 0, sizeof pc);
    pc.batch = 2;
    pc.precision = DLP_DTYPE_I8;
    dlp_plan *p = NULL;
    assert_int_equal(dlp_plan_create(cpu, &net, &pc, &p), DLP_ERR_INVALID);  // no calibration
    assert_non_null(strstr(dlp_err_msg(), "calibrated"));
    dlp_err_clear();
    pc.train = 1;
    assert_int_equal(dlp_plan_create(cpu, &net, &pc, &p), DLP_ERR_UNSUPPORTED);  // int8 training
    dlp_err_clear();
    // ranges with a hole: the layer is named
    pc.train = 0;
    float *r = calloc((size_t)net.nlayers, sizeof(float)), *mn = calloc((size_t)net.nlayers, sizeof(float));
    for (int i = 0; i < net.nlayers; i++) r[i] = 1.f;
    r[net.nlayers / 2] = 0.f;
    pc.act_range = r;
    pc.act_min = mn;
    dlp_status st = dlp_plan_create(cpu, &net, &pc, &p);
    assert_int_not_equal(st, DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "no range"));
    dlp_err_clear();
    free(r);
    free(mn);
    dlp_net_free(&net);
}

static void test_calibration_file(void **state) {
    (void)state;
    dlp_net net, other;
    assert_int_equal(dlp_model_build("resnet-mini", 10, 32, &net), DLP_OK);
    assert_int_equal(dlp_model_build("resnet18", 10, 32, &other), DLP_OK);
    dlp_calib *c;
    assert_int_equal(dlp_calib_create(&net, DLP_CALIB_PERCENTILE, 99.0, &c), DLP_OK);
    // layer 1: |x| = 1..1000 (percentile 99 -> ~990, within a bin), layer 2: all zero
    float v[1000];
    for (int i = 0; i < 1000; i++) v[i] = (float)(i % 2 ? -(i + 1) : (i + 1));
    dlp_calib_observe(c, 1, v, 1000);
    float z[8] = {0};
    dlp_calib_observe(c, 2, z, 8);
    dlp_quant q, r;
    assert_int_equal(dlp_calib_finish(c, 7, 42, &q), DLP_OK);
    dlp_calib_free(c);
    assert_true(fabsf(q.range[1] - 990.f) <= 990.f * 0.025f);
    assert_true(q.min[1] == -1000.f);
    assert_true(q.range[2] > 0 && q.range[2] < 1e-5f);
    assert_true(q.range[3] == 0.f);  // not observed
    char dir[512], path[600], bad[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.int8-percentile.safetensors", dir);
    char def[600];
    dlp_quant_default_path("/x/m.safetensors", DLP_CALIB_PERCENTILE, def, sizeof def);
    assert_string_equal(def, "/x/m.int8-percentile.safetensors");
    assert_int_equal(dlp_quant_save(&q, path), DLP_OK);
    assert_int_equal(dlp_quant_load(path, &net, 42, &r), DLP_OK);
    assert_int_equal(r.images, 7);
    assert_int_equal(r.method, DLP_CALIB_PERCENTILE);
    assert_memory_equal(r.range, q.range, (size_t)net.nlayers * sizeof(float));
    dlp_quant_free(&r);
    // other weights, another model, not a calibration, missing: refused, naming the file
    assert_int_equal(dlp_quant_load(path, &net, 43, &r), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "other weights"));
    dlp_err_clear();
    assert_int_equal(dlp_quant_load(path, &other, 42, &r), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), path));
    dlp_err_clear();
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    const int64_t shape[1] = {2};
    assert_int_equal(dlp_st_writer_add(&w, "weight", DLP_ST_F32, 1, shape, v), DLP_OK);
    assert_int_equal(dlp_st_writer_write(&w, bad, 0), DLP_OK);
    dlp_st_writer_free(&w);
    assert_int_equal(dlp_quant_load(bad, &net, 42, &r), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), bad));
    dlp_err_clear();
    FILE *f = fopen(bad, "w");
    fputs("garbage", f);
    fclose(f);
    assert_int_not_equal(dlp_quant_load(bad, &net, 42, &r), DLP_OK);
    dlp_err_clear();
    assert_int_not_equal(dlp_quant_load("/nonexistent/c.safetensors", &net, 42, &r), DLP_OK);
    dlp_err_clear();
    dlp_quant_free(&q);
    dlp_test_rmtree(dir);
    dlp_net_free(&net);
    dlp_net_free(&other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calibration_file),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_ops_vs_ref),
        cmocka_unit_test(test_resnet_mini),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
