// Unit tests for the backend registry and the ref backend's contract: errors, partial eval batches, BN running
// statistics, SGD with PyTorch's semantics, gradient buckets, momentum state, determinism across thread counts.
// Main file: src/backend/ref/ref.c; also src/backend/registry.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_impl.h"  // the table entries themselves are checked here
#include "core/rng.h"
#include "nn/resnet.h"

static const dlp_backend *ref(void) {
    const dlp_backend *o = dlp_backend_find("ref", NULL);
    assert_non_null(o);
    return o;
}

static float *randf(int64_t n, uint64_t seed, double scale) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    dlp_rng r;
    dlp_rng_init(&r, seed, 3);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * dlp_rng_normal(&r));
    return x;
}

static void test_registry(void **state) {
    (void)state;
    const char *arg = "x";
    const dlp_backend *o = dlp_backend_find("ref", &arg);
    assert_non_null(o);
    assert_string_equal(dlp_backend_name(o), "ref");
    assert_null(arg);
    assert_non_null(dlp_backend_find("ref:whatever", &arg));
    assert_string_equal(arg, "whatever");
    assert_null(dlp_backend_find("tpu", &arg));
    assert_int_equal(dlp_err_status(), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "unknown device 'tpu'"));
    assert_non_null(strstr(dlp_err_msg(), "ref"));
    assert_null(dlp_backend_find("", &arg));
    int n = 0, has_ref = 0;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++, n++) {
        has_ref |= strcmp(dlp_backend_name(*b), "ref") == 0;
        assert_non_null((*b)->plan_create);
        assert_non_null(dlp_backend_summary(*b));
        // every name in the table is found by dlp_backend_find
        assert_ptr_equal(dlp_backend_find(dlp_backend_name(*b), NULL), *b);
    }
    assert_true(n >= 1 && has_ref);
    if (!dlp_backend_find("cuda", NULL)) assert_non_null(strstr(dlp_err_msg(), "not compiled"));
}

static void test_plan_errors(void **state) {
    (void)state;
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 3, 32, &net), DLP_OK);
    dlp_plan *p = NULL;
    dlp_plan_cfg cfg = {.batch = 0, .train = 1, .precision = DLP_DTYPE_F32};
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_INVALID);
    cfg.batch = 2;
    cfg.precision = DLP_DTYPE_BF16;
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_UNSUPPORTED);
    cfg.precision = DLP_DTYPE_F32;
    cfg.batch = 1;  // layer4 is 1x1 at 32 px: BN would normalize a single value
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "more than one value per channel"));
    cfg.train = 0;  // fine for inference
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
    float *g = malloc((size_t)net.param_count * sizeof(float));
    assert_int_equal(dlp_plan_get_grads(p, g), DLP_ERR_INVALID);
    float out[3];
    assert_int_equal(dlp_plan_get_output(p, out), DLP_ERR_INVALID);  // before forward
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_ERR_INVALID);  // before set_input
    float *x = randf(3 * 32 * 32, 1, 1);
    assert_int_equal(dlp_plan_set_input(p, x, 2), DLP_ERR_INVALID);  // more than the batch
    assert_int_equal(dlp_plan_set_input(p, x, 1), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_ERR_INVALID);  // inference plan
    dlp_plan_free(p);
    cfg.train = 1;
    cfg.batch = 2;
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
    assert_int_equal(dlp_plan_set_input(p, x, 1), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_ERR_INVALID);  // partial batch in training
    assert_non_null(strstr(dlp_err_msg(), "full batch"));
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_backward(p, NULL), DLP_ERR_INVALID);  // after an eval forward
    dlp_plan_free(p);
    free(g);
    free(x);
    dlp_net_free(&net);
}

// Eval with n < batch gives the same outputs as a plan of batch n, and a train plan's eval pass as an
// inference plan's.
static void test_partial_eval_batch(void **state) {
    (void)state;
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 5, 40, &net), DLP_OK);
    float *params = malloc((size_t)net.param_count * sizeof(float)), *bufs = randf(net.buf_count, 2, 0.1);
    dlp_resnet_init_params(&net, 3, 0, params, NULL);
    for (int i = 0; i < net.nbufs; i++)  // running_var must stay positive
        if (strstr(net.bufs[i].name, "running_var"))
            for (int64_t j = 0; j < net.bufs[i].numel; j++) bufs[net.bufs[i].offset + j] = 0.5f + fabsf(bufs[net.bufs[i].offset + j]);
    const int64_t in1 = 3 * 40 * 40;
    float *x = randf(4 * in1, 4, 1);
    float ya[4 * 5], yb[3 * 5], yc[4 * 5];
    dlp_plan *pa, *pb, *pc;
    dlp_plan_cfg ca = {.batch = 4, .train = 0, .precision = DLP_DTYPE_F32, .threads = 2};
    dlp_plan_cfg cb = {.batch = 3, .train = 0, .precision = DLP_DTYPE_F32, .threads = 1};
    dlp_plan_cfg cc = {.batch = 4, .train = 1, .precision = DLP_DTYPE_F32, .threads = 2};
    assert_int_equal(dlp_plan_create(o, &net, &ca, &pa), DLP_OK);
    assert_int_equal(dlp_plan_create(o, &net, &cb, &pb), DLP_OK);
    assert_int_equal(dlp_plan_create(o, &net, &cc, &pc), DLP_OK);
    for (dlp_plan **pp = (dlp_plan *[]){pa, pb, pc}, **e = pp + 3; pp < e; pp++)
        assert_int_equal(dlp_plan_set_params(*pp, params, bufs), DLP_OK);
    assert_int_equal(dlp_plan_set_input(pa, x, 3), DLP_OK);
    assert_int_equal(dlp_plan_forward(pa, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(pa, ya), DLP_OK);
    assert_int_equal(dlp_plan_set_input(pb, x, 3), DLP_OK);
    assert_int_equal(dlp_plan_forward(pb, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(pb, yb), DLP_OK);
    assert_memory_equal(ya, yb, sizeof yb);  // same arithmetic, any thread count: bitwise equal
    assert_int_equal(dlp_plan_set_input(pc, x, 4), DLP_OK);
    assert_int_equal(dlp_plan_forward(pc, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(pc, yc), DLP_OK);
    assert_memory_equal(yc, yb, sizeof yb);
    // an eval pass leaves the running statistics alone
    float *b2 = malloc((size_t)net.buf_count * sizeof(float));
    assert_int_equal(dlp_plan_get_params(pc, NULL, b2), DLP_OK);
    assert_memory_equal(b2, bufs, (size_t)net.buf_count * sizeof(float));
    dlp_plan_free(pa);
    dlp_plan_free(pb);
    dlp_plan_free(pc);
    free(params);
    free(bufs);
    free(b2);
    free(x);
    dlp_net_free(&net);
}

// running = 0.9 running + 0.1 batch statistic, with the unbiased variance; normalization uses the biased one.
static void test_bn_running_stats(void **state) {
    (void)state;
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "bn", 2, 1, 2), DLP_OK);
    assert_true(dlp_net_bn(&net, "bn", 0) > 0);
    dlp_plan *p;
    dlp_plan_cfg cfg = {.batch = 2, .train = 1, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
    // channel 0 sees {1, 3, 5, 7}: mean 4, biased var 5, unbiased 20/3; channel 1 sees {2, 2, 2, 2}
    float x[8] = {1, 3, 2, 2, 5, 7, 2, 2}, params[4] = {2, 0.5f, 1, 0}, bufs[4] = {1, 0, 2, 1}, y[8], b[4];
    assert_int_equal(dlp_plan_set_params(p, params, bufs), DLP_OK);
    assert_int_equal(dlp_plan_set_input(p, x, 2), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, y), DLP_OK);
    assert_int_equal(dlp_plan_get_params(p, NULL, b), DLP_OK);
    assert_true(fabsf(b[0] - (0.9f * 1 + 0.1f * 4)) < 1e-6f);           // running_mean[0]
    assert_true(fabsf(b[1] - (0.9f * 0 + 0.1f * 2)) < 1e-6f);           // running_mean[1]
    assert_true(fabsf(b[2] - (0.9f * 2 + 0.1f * 20.0f / 3)) < 1e-6f);   // running_var[0]
    assert_true(fabsf(b[3] - 0.9f) < 1e-6f);                            // running_var[1]: batch var 0
    // y = gamma (x - mean) / sqrt(var + eps) + beta, biased var
    assert_true(fabsf(y[0] - (float)(2 * (1 - 4) / sqrt(5 + 1e-5) + 1)) < 1e-5f);
    assert_true(fabsf(y[2] - 0.0f) < 1e-6f);  // constant channel -> beta
    // eval uses the running statistics
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, y), DLP_OK);
    assert_true(fabsf(y[0] - (float)(2 * (1 - b[0]) / sqrt(b[2] + 1e-5) + 1)) < 1e-5f);
    dlp_plan_free(p);
    dlp_net_free(&net);
}

// torch.optim.SGD, worked by hand for one weight w = 1 with gradient g: a plan with a single FC(1 -> 1) and
// backward(dy) so that g is known: dw = dy * x, db = dy.
static void sgd_case(const dlp_sgd *hp, int steps, float x, float dy, float *w_out, float *b_out, float *v_out) {
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "fc", 1, 1, 1), DLP_OK);
    assert_true(dlp_net_fc(&net, "fc", 0, 1) > 0);
    dlp_plan *p;
    dlp_plan_cfg cfg = {.batch = 1, .train = 1, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
    float params[2] = {1.0f, 0.5f}, zero[2] = {0, 0};
    assert_int_equal(dlp_plan_set_params(p, params, NULL), DLP_OK);
    assert_int_equal(dlp_plan_set_momentum(p, zero), DLP_OK);
    for (int s = 0; s < steps; s++) {
        assert_int_equal(dlp_plan_set_input(p, &x, 1), DLP_OK);
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
        assert_int_equal(dlp_plan_backward(p, &dy), DLP_OK);
        assert_int_equal(dlp_plan_update(p, hp), DLP_OK);
    }
    assert_int_equal(dlp_plan_get_params(p, params, NULL), DLP_OK);
    float v[2];
    assert_int_equal(dlp_plan_get_momentum(p, v), DLP_OK);
    *w_out = params[0];
    *b_out = params[1];
    *v_out = v[0];
    dlp_plan_free(p);
    dlp_net_free(&net);
}

static void test_sgd(void **state) {
    (void)state;
    float w, b, v;
    // plain: w = 1 - 0.1 * (2 * 3) = 0.4; bias: 0.5 - 0.1 * 2 = 0.3
    dlp_sgd plain = {.lr = 0.1f};
    sgd_case(&plain, 1, 3.0f, 2.0f, &w, &b, &v);
    assert_true(fabsf(w - 0.4f) < 1e-6f && fabsf(b - 0.3f) < 1e-6f);
    // momentum 0.9, wd 0.01 on everything, two steps with g = 1 (x = 1, dy = 1):
    //   step 1: d = 1 + 0.01*1 = 1.01, v = 1.01, w = 1 - 0.1*1.01 = 0.899
    //   step 2: d = 1 + 0.01*0.899 = 1.00899, v = 0.9*1.01 + 1.00899 = 1.91799, w = 0.899 - 0.191799 = 0.707201
    dlp_sgd mom = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .decay_no_decay_params = 1};
    sgd_case(&mom, 2, 1.0f, 1.0f, &w, &b, &v);
    assert_true(fabsf(w - 0.707201f) < 1e-6f);
    assert_true(fabsf(v - 1.91799f) < 1e-6f);
    //   the bias (no_decay) with decay_no_decay_params = 1: d1 = 1 + 0.005 = 1.005, b1 = 0.3995;
    //   d2 = 1 + 0.003995 = 1.003995, v2 = 0.9045 + 1.003995 = 1.908495, b2 = 0.3995 - 0.1908495 = 0.2086505
    assert_true(fabsf(b - 0.2086505f) < 1e-6f);
    // ... and with 0, no decay on the bias: v2 = 1.9, b = 0.5 - 0.1 - 0.19 = 0.21
    mom.decay_no_decay_params = 0;
    sgd_case(&mom, 2, 1.0f, 1.0f, &w, &b, &v);
    assert_true(fabsf(w - 0.707201f) < 1e-6f);
    assert_true(fabsf(b - 0.21f) < 1e-6f);
    // Nesterov, no decay: step 1: v = 1, d = 1 + 0.9 = 1.9, w = 0.81; step 2: v = 1.9, d = 1 + 1.71 = 2.71,
    // w = 0.81 - 0.271 = 0.539
    dlp_sgd nest = {.lr = 0.1f, .momentum = 0.9f, .nesterov = 1};
    sgd_case(&nest, 2, 1.0f, 1.0f, &w, &b, &v);
    assert_true(fabsf(w - 0.539f) < 1e-6f);
    assert_true(fabsf(v - 1.9f) < 1e-6f);
}

typedef struct bucket_log {
    int n;
    int64_t off[64], cnt[64];
    int final_ok[64];
    const dlp_backend *ops;
    dlp_plan *plan;
    float *want;  // the final gradients, from a first run
} bucket_log;

static void on_bucket(void *ctx, int64_t offset, int64_t count) {
    bucket_log *l = ctx;
    if (l->n >= 64) return;
    l->off[l->n] = offset;
    l->cnt[l->n] = count;
    // the bucket's gradients must be final when it is announced
    const float *g = dlp_plan_grad_buffer(l->plan);
    l->final_ok[l->n] = !l->want || memcmp(g + offset, l->want + offset, (size_t)count * sizeof(float)) == 0;
    l->n++;
}

static void test_buckets_and_momentum(void **state) {
    (void)state;
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 3, 32, &net), DLP_OK);
    bucket_log log;
    memset(&log, 0, sizeof log);
    log.ops = o;
    dlp_plan_cfg cfg = {.batch = 2, .train = 1, .precision = DLP_DTYPE_F32, .threads = 2, .bucket_elems = 5000,
                        .on_bucket = on_bucket, .bucket_ctx = &log};
    assert_int_equal(dlp_plan_create(o, &net, &cfg, &log.plan), DLP_OK);
    float *params = malloc((size_t)net.param_count * sizeof(float)), *x = randf(2 * 3 * 32 * 32, 7, 1);
    dlp_resnet_init_params(&net, 1, 0, params, NULL);
    assert_int_equal(dlp_plan_set_params(log.plan, params, NULL), DLP_OK);
    int32_t labels[2] = {0, 2};
    dlp_loss_out lo;
    for (int run = 0; run < 2; run++) {  // run 0 records the final gradients; run 1 checks the buckets
        log.n = 0;
        assert_int_equal(dlp_plan_set_input(log.plan, x, 2), DLP_OK);
        assert_int_equal(dlp_plan_forward(log.plan, DLP_PASS_TRAIN), DLP_OK);
        assert_int_equal(dlp_plan_loss(log.plan, labels, 0.0f, &lo), DLP_OK);
        if (run == 1) memset(dlp_plan_grad_buffer(log.plan), 0xff, (size_t)net.param_count * sizeof(float));  // NaN
        assert_int_equal(dlp_plan_backward(log.plan, NULL), DLP_OK);
        if (run == 0) {
            log.want = malloc((size_t)net.param_count * sizeof(float));
            assert_int_equal(dlp_plan_get_grads(log.plan, log.want), DLP_OK);
        }
    }
    assert_true(log.n > 3);
    int64_t end = net.param_count;
    for (int i = 0; i < log.n; i++) {  // from the end, contiguous, all final when announced
        assert_int_equal(log.off[i] + log.cnt[i], end);
        assert_true(log.final_ok[i]);
        end = log.off[i];
    }
    assert_int_equal(end, 0);
    // momentum round trip, and update uses it
    float *v = randf(net.param_count, 8, 0.01), *v2 = malloc((size_t)net.param_count * sizeof(float));
    assert_int_equal(dlp_plan_set_momentum(log.plan, v), DLP_OK);
    assert_int_equal(dlp_plan_get_momentum(log.plan, v2), DLP_OK);
    assert_memory_equal(v, v2, (size_t)net.param_count * sizeof(float));
    dlp_sgd hp = {.lr = 0.1f, .momentum = 0.9f};
    assert_int_equal(dlp_plan_update(log.plan, &hp), DLP_OK);
    assert_int_equal(dlp_plan_get_momentum(log.plan, v2), DLP_OK);
    assert_true(fabsf(v2[0] - (0.9f * v[0] + log.want[0])) < 1e-6f);
    dlp_plan_free(log.plan);
    free(params);
    free(x);
    free(v);
    free(v2);
    free(log.want);
    dlp_net_free(&net);
}

// A training step gives bitwise the same loss, gradients and parameters with 1 or 2 threads.
static void test_thread_determinism(void **state) {
    (void)state;
    const dlp_backend *o = ref();
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini-bottleneck", 4, 48, &net), DLP_OK);
    float *params = malloc((size_t)net.param_count * sizeof(float)), *x = randf(3 * 3 * 48 * 48, 9, 1);
    dlp_resnet_init_params(&net, 2, 1, params, NULL);
    float *g[2], *w[2];
    double loss[2];
    int32_t labels[3] = {1, 3, 0};
    for (int t = 0; t < 2; t++) {
        dlp_plan *p;
        dlp_plan_cfg cfg = {.batch = 3, .train = 1, .precision = DLP_DTYPE_F32, .threads = t + 1};
        assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
        assert_int_equal(dlp_plan_set_params(p, params, NULL), DLP_OK);
        assert_int_equal(dlp_plan_set_input(p, x, 3), DLP_OK);
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
        dlp_loss_out lo;
        assert_int_equal(dlp_plan_loss(p, labels, 0.1f, &lo), DLP_OK);
        loss[t] = lo.loss;
        assert_int_equal(dlp_plan_backward(p, NULL), DLP_OK);
        g[t] = malloc((size_t)net.param_count * sizeof(float));
        w[t] = malloc((size_t)net.param_count * sizeof(float));
        assert_int_equal(dlp_plan_get_grads(p, g[t]), DLP_OK);
        dlp_sgd hp = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = 1};
        assert_int_equal(dlp_plan_update(p, &hp), DLP_OK);
        assert_int_equal(dlp_plan_get_params(p, w[t], NULL), DLP_OK);
        dlp_plan_free(p);
    }
    assert_true(loss[0] == loss[1]);
    assert_memory_equal(g[0], g[1], (size_t)net.param_count * sizeof(float));
    assert_memory_equal(w[0], w[1], (size_t)net.param_count * sizeof(float));
    for (int t = 0; t < 2; t++) {
        free(g[t]);
        free(w[t]);
    }
    free(params);
    free(x);
    dlp_net_free(&net);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_partial_eval_batch),
        cmocka_unit_test(test_bn_running_stats),
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_buckets_and_momentum),
        cmocka_unit_test(test_thread_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
