// Gradient checks of the ref backend by central finite differences, for every layer type (conv with stride,
// padding and kernel variants, BN in training mode, ReLU, add with fan-out, maxpool with -inf padding, global
// avgpool, FC, softmax cross-entropy with and without label smoothing) and for a whole tiny ResNet.
//
// Method. A one-layer net gets the objective f = sum_i r_i * y_i (r fixed random), so backward(dy = r) gives
// df/dx and df/dw; the loss test uses the loss itself. Each checked coordinate u gets two central differences,
// D(h) = (f(u+h) - f(u-h)) / 2h and D(h/2), and the Richardson estimate R = (4 D(h/2) - D(h)) / 3 (error O(h^4)).
// "Double-checked": the analytic gradient g must match R, and D(h) must match D(h/2) (so the estimate is
// converged, not rounding noise), both within |a - b| <= ATOL + RTOL * max(|a|, |b|). f is accumulated in double
// from fp32 outputs, so rounding noise in D is about 1e-7 * |f| / h; with h = 1e-2 (inputs are O(1)) and the
// small sizes here that is < 1e-4, well under ATOL = 2e-3, RTOL = 1e-2. Inputs keep ReLU and maxpool away from
// their kinks (|x| >= 0.1, maxpool values spaced >= 0.05 apart) so h/2.. h never crosses one.
// Main file: src/backend/ref/ref.c (its backward passes).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/resnet.h"

#define ATOL 2e-3
#define RTOL 1e-2

typedef struct gcheck {
    const dlp_backend *ops;
    dlp_net *net;
    dlp_plan *plan;
    int n;
    float *x;          // (n, input numel)
    float *params, *bufs;
    float *r;          // (n, output numel): objective weights (NULL: use the loss)
    int32_t *labels;
    float smoothing;
    float *g, *gx;     // analytic gradients
    int checked, failed;
} gcheck;

static double objective(gcheck *c) {
    assert_int_equal(dlp_plan_set_params(c->plan, c->params, c->bufs), DLP_OK);
    assert_int_equal(dlp_plan_set_input(c->plan, c->x, c->n), DLP_OK);
    assert_int_equal(dlp_plan_forward(c->plan, DLP_PASS_TRAIN), DLP_OK);
    if (!c->r) {
        dlp_loss_out lo;
        assert_int_equal(dlp_plan_loss(c->plan, c->labels, c->smoothing, &lo), DLP_OK);
        return lo.loss;
    }
    int64_t m = (int64_t)c->n * dlp_net_layer_numel(c->net, dlp_net_output(c->net));
    float *y = malloc((size_t)m * sizeof *y);
    assert_int_equal(dlp_plan_get_output(c->plan, y), DLP_OK);
    double f = 0;
    for (int64_t i = 0; i < m; i++) f += (double)c->r[i] * y[i];
    free(y);
    return f;
}

static void gcheck_init(gcheck *c, dlp_net *net, int n, uint64_t seed, int with_r) {
    memset(c, 0, sizeof *c);
    c->ops = dlp_backend_find("ref", NULL);
    assert_non_null(c->ops);
    c->net = net;
    c->n = n;
    dlp_plan_cfg cfg = {.batch = n, .train = 1, .precision = DLP_DTYPE_F32, .threads = 2};
    assert_int_equal(dlp_plan_create(c->ops, net, &cfg, &c->plan), DLP_OK);
    const int64_t nin = (int64_t)n * dlp_net_layer_numel(net, 0);
    const int64_t nout = (int64_t)n * dlp_net_layer_numel(net, dlp_net_output(net));
    c->x = malloc((size_t)nin * sizeof(float));
    c->params = malloc((size_t)(net->param_count + 1) * sizeof(float));
    c->bufs = malloc((size_t)(net->buf_count + 1) * sizeof(float));
    c->g = malloc((size_t)(net->param_count + 1) * sizeof(float));
    c->gx = malloc((size_t)nin * sizeof(float));
    dlp_rng rng;
    dlp_rng_init(&rng, seed, 1);
    for (int64_t i = 0; i < nin; i++) {  // |x| in [0.1, 1.1): away from ReLU's kink
        double v = 0.1 + dlp_rng_uniform(&rng);
        c->x[i] = (float)(dlp_rng_uniform(&rng) < 0.5 ? -v : v);
    }
    for (int64_t i = 0; i < net->param_count; i++) c->params[i] = (float)dlp_rng_range(&rng, -0.5, 0.5);
    for (int i = 0; i < net->nparams; i++)  // BN gamma around 1
        if (net->layers[net->params[i].layer].kind == DLP_LAYER_BN && strstr(net->params[i].name, ".weight"))
            for (int64_t j = 0; j < net->params[i].numel; j++) c->params[net->params[i].offset + j] += 1.0f;
    dlp_resnet_init_params(net, seed, 0, NULL, c->bufs);
    if (with_r) {
        c->r = malloc((size_t)nout * sizeof(float));
        for (int64_t i = 0; i < nout; i++) c->r[i] = (float)dlp_rng_range(&rng, -1, 1);
    }
    c->labels = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) c->labels[i] = (int32_t)dlp_rng_below(&rng, (uint64_t)dlp_net_layer_numel(net, dlp_net_output(net)));
}

static void gcheck_analytic(gcheck *c) {
    objective(c);
    assert_int_equal(dlp_plan_backward(c->plan, c->r), DLP_OK);
    assert_int_equal(dlp_plan_get_grads(c->plan, c->g), DLP_OK);
    assert_int_equal(dlp_plan_get_input_grad(c->plan, c->gx), DLP_OK);
}

static void gcheck_free(gcheck *c) {
    dlp_plan_free(c->plan);
    free(c->x);
    free(c->params);
    free(c->bufs);
    free(c->g);
    free(c->gx);
    free(c->r);
    free(c->labels);
}

static int close_enough(double a, double b, double atol, double rtol) {
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= atol + rtol * m;
}

// Checks coordinate u (a pointer into c->x or c->params) against the analytic value g.
// Returns the relative difference between g and the Richardson estimate.
static double check_coord(gcheck *c, float *u, double g, double h, const char *what, int64_t idx, double atol,
                          double rtol) {
    const float u0 = *u;
    double d[2];
    for (int k = 0; k < 2; k++) {
        double hk = k ? h / 2 : h;
        *u = (float)(u0 + hk);
        double hp = (double)*u - u0;  // the step actually taken in fp32
        double fp = objective(c);
        *u = (float)(u0 - hk);
        double hm = u0 - (double)*u;
        double fm = objective(c);
        d[k] = (fp - fm) / (hp + hm);
    }
    *u = u0;
    double rich = (4 * d[1] - d[0]) / 3;
    c->checked++;
    if (!close_enough(g, rich, atol, rtol) || !close_enough(d[0], d[1], atol, rtol)) {
        c->failed++;
        if (c->failed <= 10)
            fprintf(stderr, "  %s[%lld]: analytic %.6g, finite difference %.6g (D(h) %.6g, D(h/2) %.6g)\n", what,
                    (long long)idx, g, rich, d[0], d[1]);
    }
    double m = fabs(g) > fabs(rich) ? fabs(g) : fabs(rich);
    return m > 0 ? fabs(g - rich) / m : 0;
}

// Checks every input coordinate and every parameter (or up to `max_per` evenly spaced ones per tensor).
static void check_all(gcheck *c, double h, int64_t max_per, double atol) {
    const int64_t nin = (int64_t)c->n * dlp_net_layer_numel(c->net, 0);
    int64_t step = max_per > 0 && nin > max_per ? nin / max_per : 1;
    for (int64_t i = 0; i < nin; i += step) check_coord(c, &c->x[i], c->gx[i], h, "input", i, atol, RTOL);
    for (int pi = 0; pi < c->net->nparams; pi++) {
        const dlp_param *p = &c->net->params[pi];
        step = max_per > 0 && p->numel > max_per ? p->numel / max_per : 1;
        for (int64_t i = 0; i < p->numel; i += step)
            check_coord(c, &c->params[p->offset + i], c->g[p->offset + i], h, p->name, i, atol, RTOL);
    }
}

static void run_layer_check(dlp_net *net, int n, uint64_t seed, const char *label) {
    gcheck c;
    gcheck_init(&c, net, n, seed, 1);
    gcheck_analytic(&c);
    check_all(&c, 1e-2, 0, ATOL);
    if (c.failed) fprintf(stderr, "%s: %d of %d coordinates off\n", label, c.failed, c.checked);
    assert_int_equal(c.failed, 0);
    assert_true(c.checked > 0);
    gcheck_free(&c);
}

static void test_conv(void **state) {
    (void)state;
    static const struct { int c, h, w, k, r, stride, pad; } rows[] = {
        {3, 7, 7, 4, 3, 1, 1},  // 3x3 same
        {3, 8, 8, 4, 3, 2, 1},  // 3x3 stride 2 (v1.5 downsampling conv)
        {2, 9, 7, 3, 1, 2, 0},  // 1x1 stride 2 (downsample.0), odd sizes
        {2, 11, 11, 3, 7, 2, 3},  // the stem's 7x7/2 pad 3
        {3, 6, 6, 2, 3, 1, 0},  // no padding
        {2, 5, 5, 2, 1, 1, 0},  // 1x1
        {1, 4, 4, 2, 5, 1, 2},  // kernel larger than the input minus padding
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_net net;
        assert_int_equal(dlp_net_init(&net, "conv", rows[i].c, rows[i].h, rows[i].w), DLP_OK);
        assert_true(dlp_net_conv(&net, "conv", 0, rows[i].k, rows[i].r, rows[i].stride, rows[i].pad) > 0);
        char label[64];
        snprintf(label, sizeof label, "conv row %zu", i);
        run_layer_check(&net, 2, 100 + i, label);
        dlp_net_free(&net);
    }
}

static void test_bn_train(void **state) {
    (void)state;
    static const struct { int n, c, h, w; } rows[] = {{3, 3, 4, 4}, {2, 2, 1, 1}, {4, 2, 3, 2}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_net net;
        assert_int_equal(dlp_net_init(&net, "bn", rows[i].c, rows[i].h, rows[i].w), DLP_OK);
        assert_true(dlp_net_bn(&net, "bn", 0) > 0);
        run_layer_check(&net, rows[i].n, 200 + i, "bn");
        dlp_net_free(&net);
    }
}

static void test_relu_add(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "relu-add", 3, 5, 4), DLP_OK);
    int r = dlp_net_relu(&net, 0);
    assert_true(dlp_net_add(&net, r, 0) > 0);  // input feeds two layers: its gradient is the sum of both
    run_layer_check(&net, 2, 300, "relu+add");
    dlp_net_free(&net);
}

static void test_pools(void **state) {
    (void)state;
    static const struct { int h, w, k, stride, pad; } rows[] = {{7, 7, 3, 2, 1}, {6, 8, 2, 2, 0}, {5, 5, 3, 1, 1}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_net net;
        assert_int_equal(dlp_net_init(&net, "maxpool", 2, rows[i].h, rows[i].w), DLP_OK);
        assert_true(dlp_net_maxpool(&net, 0, rows[i].k, rows[i].stride, rows[i].pad) > 0);
        gcheck c;
        gcheck_init(&c, &net, 2, 400 + i, 1);
        // distinct values spaced 0.05 apart (a shuffled ramp), so no window has a near-tie
        int64_t m = 2LL * 2 * rows[i].h * rows[i].w;
        dlp_rng rng;
        dlp_rng_init(&rng, 9, i);
        for (int64_t j = 0; j < m; j++) c.x[j] = (float)(-2.0 + 0.05 * j);
        for (int64_t j = m - 1; j > 0; j--) {
            int64_t k = (int64_t)dlp_rng_below(&rng, (uint64_t)j + 1);
            float t = c.x[j];
            c.x[j] = c.x[k];
            c.x[k] = t;
        }
        gcheck_analytic(&c);
        check_all(&c, 1e-2, 0, ATOL);
        assert_int_equal(c.failed, 0);
        gcheck_free(&c);
        dlp_net_free(&net);
    }
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "avgpool", 3, 5, 3), DLP_OK);
    assert_true(dlp_net_avgpool(&net, 0) > 0);
    run_layer_check(&net, 2, 500, "avgpool");
    dlp_net_free(&net);
}

static void test_maxpool_padding_is_neg_inf(void **state) {
    (void)state;
    // All inputs negative: with zero padding a border window would give 0; with -inf it gives the input's max.
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "maxpool", 1, 4, 4), DLP_OK);
    assert_true(dlp_net_maxpool(&net, 0, 3, 2, 1) > 0);
    const dlp_backend *ops = dlp_backend_find("ref", NULL);
    dlp_plan_cfg cfg = {.batch = 1, .train = 0, .precision = DLP_DTYPE_F32, .threads = 1};
    dlp_plan *p;
    assert_int_equal(dlp_plan_create(ops, &net, &cfg, &p), DLP_OK);
    float x[16], y[4];
    for (int i = 0; i < 16; i++) x[i] = -1.0f - (float)i;
    assert_int_equal(dlp_plan_set_input(p, x, 1), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, y), DLP_OK);
    // windows: rows {-1..1}x cols {-1..1} -> x[0]; cols {1..3} -> max(x[1],x[2],x[3],x[5],...) = x[1]
    assert_true(y[0] == -1.0f && y[1] == -2.0f && y[2] == -5.0f && y[3] == -6.0f);
    dlp_plan_free(p);
    dlp_net_free(&net);
}

static void test_fc(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "fc", 3, 2, 2), DLP_OK);  // flattened: 12 features
    assert_true(dlp_net_fc(&net, "fc", 0, 5) > 0);
    run_layer_check(&net, 3, 600, "fc");
    dlp_net_free(&net);
}

// Loss: input (K,1,1) -> avgpool (identity on 1x1) so that d loss / d input = d loss / d logits.
static void test_loss(void **state) {
    (void)state;
    static const float smooth[] = {0.0f, 0.1f, 0.5f};
    for (size_t i = 0; i < sizeof smooth / sizeof smooth[0]; i++) {
        dlp_net net;
        assert_int_equal(dlp_net_init(&net, "loss", 7, 1, 1), DLP_OK);
        assert_true(dlp_net_avgpool(&net, 0) > 0);
        gcheck c;
        gcheck_init(&c, &net, 4, 700 + i, 0);
        c.smoothing = smooth[i];
        for (int j = 0; j < 28; j++) c.x[j] *= 3;
        gcheck_analytic(&c);
        check_all(&c, 1e-2, 0, 1e-4);  // loss is O(1) and smooth: a tighter absolute floor
        assert_int_equal(c.failed, 0);
        gcheck_free(&c);
        dlp_net_free(&net);
    }
}

// Hand-computed: logits (0, ln 3) for label 0: softmax (1/4, 3/4), loss = ln 4; with smoothing e = 0.2 the
// target is (0.9, 0.1): loss = 0.9 ln 4 + 0.1 (ln 4 - ln 3) = ln 4 - 0.1 ln 3.
static void test_loss_values(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "loss", 2, 1, 1), DLP_OK);
    assert_true(dlp_net_avgpool(&net, 0) > 0);
    const dlp_backend *ops = dlp_backend_find("ref", NULL);
    dlp_plan_cfg cfg = {.batch = 2, .train = 1, .precision = DLP_DTYPE_F32, .threads = 1};
    dlp_plan *p;
    assert_int_equal(dlp_plan_create(ops, &net, &cfg, &p), DLP_OK);
    float x[4] = {0.0f, logf(3.0f), 5.0f, 1.0f};
    int32_t y[2] = {0, 0};
    dlp_loss_out lo;
    assert_int_equal(dlp_plan_set_input(p, x, 2), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
    assert_int_equal(dlp_plan_loss(p, y, 0.0f, &lo), DLP_OK);
    double l2 = log(1 + exp(-4.0));  // sample 2: logits (5, 1), label 0
    assert_true(fabs(lo.loss - (log(4.0) + l2) / 2) < 1e-6);
    assert_int_equal(lo.correct_top1, 1);
    assert_int_equal(lo.correct_top5, 2);  // 2 classes: top-5 is everything
    assert_int_equal(dlp_plan_loss(p, y, 0.2f, &lo), DLP_OK);
    double l2s = 0.9 * l2 + 0.1 * (l2 + 4.0);
    assert_true(fabs(lo.loss - (log(4.0) - 0.1 * log(3.0) + l2s) / 2) < 1e-6);
    int32_t bad[2] = {0, 2};
    assert_int_equal(dlp_plan_loss(p, bad, 0.0f, &lo), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "label 2 of sample 1"));
    dlp_plan_free(p);
    dlp_net_free(&net);
}

// The whole tiny ResNet (resnet-mini: every layer type, downsampling blocks) from the loss with label smoothing,
// in training mode, on the coordinates where the gradient is largest: the 2 largest of every parameter tensor
// and the 4 largest of the input. A whole ReLU network is only piecewise smooth (every ReLU and maxpool is a
// kink, and BN couples the batch), so the finite differences use a smaller step, h = 3e-4, and a looser
// tolerance, 5%: rounding noise in the fp32 loss (~1e-7) over 2h is ~2e-4, kinks crossed within h add O(h).
// The exact whole-network check is tests/py/test_torch_parity.py (every gradient against torchvision in
// float64, to ~1e-6).
static void test_tiny_resnet(void **state) {
    (void)state;
    const int size = 64, n = 4;  // layer4 is 2x2: BN sees 16 values per channel
    const double h = 3e-4;       // worst difference seen here 1.4e-2 (3e-2 with h = 1e-3 or 1e-4)
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 3, size, &net), DLP_OK);
    gcheck c;
    gcheck_init(&c, &net, n, 800, 0);
    dlp_resnet_init_params(&net, 800, 0, c.params, c.bufs);
    c.smoothing = 0.1f;
    gcheck_analytic(&c);
    double worst = 0;
    for (int pi = -1; pi < net.nparams; pi++) {
        const int64_t cnt = pi < 0 ? (int64_t)n * dlp_net_layer_numel(&net, 0) : net.params[pi].numel;
        float *u = pi < 0 ? c.x : c.params + net.params[pi].offset;
        const float *g = pi < 0 ? c.gx : c.g + net.params[pi].offset;
        const int want = pi < 0 ? 4 : 2;
        int64_t best[4] = {-1, -1, -1, -1};
        for (int k = 0; k < want; k++)
            for (int64_t i = 0; i < cnt; i++) {
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= best[j] == i;
                if (!taken && (best[k] < 0 || fabsf(g[i]) > fabsf(g[best[k]]))) best[k] = i;
            }
        for (int k = 0; k < want; k++) {
            double e = check_coord(&c, &u[best[k]], g[best[k]], h, pi < 0 ? "input" : net.params[pi].name, best[k],
                                   1e-4, 5e-2);
            if (e > worst) worst = e;
        }
    }
    printf("tiny resnet: %d coordinates, worst relative difference %.2e\n", c.checked, worst);
    if (c.failed) fprintf(stderr, "tiny resnet: %d of %d coordinates off\n", c.failed, c.checked);
    assert_int_equal(c.failed, 0);
    assert_true(c.checked >= 2 * net.nparams);
    gcheck_free(&c);
    dlp_net_free(&net);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_bn_train),
        cmocka_unit_test(test_relu_add),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_maxpool_padding_is_neg_inf),
        cmocka_unit_test(test_fc),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_loss_values),
        cmocka_unit_test(test_tiny_resnet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
