// The backend interface's contract where it is the same for every backend (backend.h), checked on each backend
// compiled in and available here (ref and cpu on this machine; cuda where a GPU is):
// - capabilities: dlp_backend_kind_of agrees with each backend's caps, also for names this build lacks; the default
//   precision and host allocator come from the caps;
// - dlp_plan_get_input_grad gives the input gradient of the last backward however often it is read and whether it
//   is read before or after dlp_plan_update (update changes the weights and, in fp16, the loss scale that the
//   gradient of the first convolution is computed from; a backend may put that computation off until it is read);
//   a new backward gives a new one, equal to a fresh plan's with the same weights.
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
#include "core/tensor.h"
#include "nn/resnet.h"
#include "testutil.h"

#define CLASSES 10
#define SIZE 32
#define BATCH 2

static float *randn(int64_t n, uint64_t seed, uint64_t stream, double scale) {
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    dlp_rng r;
    dlp_rng_init(&r, seed, stream);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(dlp_rng_normal(&r) * scale);
    return x;
}

// max_i |a_i - b_i| / max_i |b_i|
static double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static void test_caps(void **state) {
    (void)state;
    int n = 0;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++, n++) {
        const dlp_backend_caps *c = dlp_backend_get_caps(*b);
        const char *name = dlp_backend_name(*b);
        assert_int_equal(dlp_backend_kind_of(name), c->kind);  // registry.c's list agrees with the ops table
        assert_true(c->kind == DLP_BACKEND_KIND_CPU || c->kind == DLP_BACKEND_KIND_GPU || c->kind == DLP_BACKEND_KIND_SIM);
        assert_int_equal(dlp_device_default_precision(name), c->default_precision);
        // what the caps say follows from the kind: a CPU backend computes fp32 by default and needs no pinned memory
        if (c->kind == DLP_BACKEND_KIND_CPU) {
            assert_int_equal(c->default_precision, DLP_DTYPE_F32);
            assert_null(c->host_allocator);
            assert_false(dlp_backend_has(*b, DLP_BACKEND_ASYNC));
        }
        if (c->kind == DLP_BACKEND_KIND_GPU) {
            assert_non_null(c->host_allocator);
            assert_non_null(c->host_allocator());
            assert_true(dlp_backend_has(*b, DLP_BACKEND_ASYNC));
        }
        printf("  %-5s kind %s, default %s%s%s%s\n", name, dlp_backend_kind_name(c->kind),
               dlp_dtype_name(c->default_precision), c->host_allocator ? ", pinned host memory" : "",
               c->host_bf16 ? ", bf16 on the host's instructions" : "", c->reference ? ", the reference" : "");
    }
    assert_true(n >= 2);  // ref and sim are always built
    // names whether or not this build has them; arguments after ':' do not matter
    assert_int_equal(dlp_backend_kind_of("ref"), DLP_BACKEND_KIND_CPU);
    assert_int_equal(dlp_backend_kind_of("cpu"), DLP_BACKEND_KIND_CPU);
    assert_int_equal(dlp_backend_kind_of("cuda"), DLP_BACKEND_KIND_GPU);
    assert_int_equal(dlp_backend_kind_of("cuda:1"), DLP_BACKEND_KIND_GPU);
    assert_int_equal(dlp_backend_kind_of("sim:h100,scale=0.5"), DLP_BACKEND_KIND_SIM);
    assert_int_equal(dlp_backend_kind_of("tpu"), DLP_BACKEND_KIND_UNKNOWN);
    assert_int_equal(dlp_backend_kind_of("cud"), DLP_BACKEND_KIND_UNKNOWN);
    assert_int_equal(dlp_backend_kind_of(""), DLP_BACKEND_KIND_UNKNOWN);
    assert_int_equal(dlp_backend_kind_of(NULL), DLP_BACKEND_KIND_UNKNOWN);
    assert_int_equal(dlp_device_default_precision("sim:a100"), DLP_DTYPE_F16);
    assert_int_equal(dlp_device_default_precision("tpu"), DLP_DTYPE_F32);
    assert_string_equal(dlp_backend_kind_name(DLP_BACKEND_KIND_GPU), "gpu");
    assert_string_equal(dlp_backend_kind_name(DLP_BACKEND_KIND_UNKNOWN), "unknown");
}

typedef struct ig_case {
    const dlp_backend *o;
    dlp_dtype prec;
    dlp_net net;
    float *params, *bufs, *x, *x2;
    int32_t labels[BATCH];
    int64_t nin;
    dlp_sgd hp;
} ig_case;

static dlp_plan *new_plan(const ig_case *c, const float *params, const float *bufs) {
    dlp_plan_cfg cfg = {.batch = BATCH, .train = 1, .precision = c->prec, .threads = 2};
    dlp_plan *p = NULL;
    dlp_status st = dlp_plan_create(c->o, &c->net, &cfg, &p);
    if (st) dlp_err_print(stderr);
    assert_int_equal(st, DLP_OK);
    assert_int_equal(dlp_plan_set_params(p, params, bufs), DLP_OK);
    return p;
}

static void train_step(const ig_case *c, dlp_plan *p, const float *x) {
    dlp_loss_out lo;
    assert_int_equal(dlp_test_set_input(p, &c->net, x, BATCH), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
    assert_int_equal(dlp_plan_loss(p, c->labels, 0.1f, &lo), DLP_OK);
    assert_int_equal(dlp_plan_backward(p, NULL), DLP_OK);
}

// Equal within tol (0: bitwise), printed.
static void same(const char *what, const float *a, const float *b, int64_t n, double tol) {
    const double e = rel_err(a, b, n);
    printf("      %-52s %.1e\n", what, e);
    if (tol == 0) assert_memory_equal(a, b, (size_t)n * sizeof(float));
    else assert_true(e <= tol);
}

static void input_grad_case(ig_case *c) {
    const int64_t nin = c->nin;
    // a host backend is deterministic: the same computation gives the same bits; a device may pick atomics-based
    // algorithms (rounding order), so there: within a few roundings of the compute type
    const double tol = dlp_backend_get_caps(c->o)->kind == DLP_BACKEND_KIND_CPU ? 0
                       : c->prec == DLP_DTYPE_F32                                 ? 1e-5
                                                                                  : 1e-2;
    float *before = malloc((size_t)nin * 4), *again = malloc((size_t)nin * 4), *after = malloc((size_t)nin * 4);
    float *after2 = malloc((size_t)nin * 4), *only_after = malloc((size_t)nin * 4), *next = malloc((size_t)nin * 4);
    float *fresh = malloc((size_t)nin * 4), *w = malloc((size_t)c->net.param_count * 4 + 4);
    float *b = malloc((size_t)c->net.buf_count * 4 + 4);
    // plan 1: read before the update, twice, then after one and two updates
    dlp_plan *p = new_plan(c, c->params, c->bufs);
    train_step(c, p, c->x);
    assert_int_equal(dlp_plan_get_input_grad(p, before), DLP_OK);
    double mx = 0;
    for (int64_t i = 0; i < nin; i++) mx = fmax(mx, fabs(before[i]));
    assert_true(mx > 0 && isfinite(mx));  // a real gradient, not zeros
    assert_int_equal(dlp_plan_get_input_grad(p, again), DLP_OK);
    assert_int_equal(dlp_plan_update(p, &c->hp), DLP_OK);
    assert_int_equal(dlp_plan_get_input_grad(p, after), DLP_OK);
    assert_int_equal(dlp_plan_update(p, &c->hp), DLP_OK);
    assert_int_equal(dlp_plan_get_input_grad(p, after2), DLP_OK);
    same("read twice", again, before, nin, tol);
    same("read after update vs before", after, before, nin, tol);
    same("read after a second update vs before", after2, before, nin, tol);
    // the next step's gradient is its own, and equals a fresh plan's with the same weights
    train_step(c, p, c->x2);
    assert_int_equal(dlp_plan_get_input_grad(p, next), DLP_OK);
    assert_true(rel_err(next, before, nin) > 1e-3);  // not the stale one
    assert_int_equal(dlp_plan_get_params(p, w, b), DLP_OK);
    dlp_plan_free(p);
    // plan 2: first read only after the update
    p = new_plan(c, c->params, c->bufs);
    train_step(c, p, c->x);
    assert_int_equal(dlp_plan_update(p, &c->hp), DLP_OK);
    assert_int_equal(dlp_plan_get_input_grad(p, only_after), DLP_OK);
    same("first read after update vs read before (other plan)", only_after, before, nin, tol);
    dlp_plan_free(p);
    // plan 3: fresh, with plan 1's weights after its two updates
    p = new_plan(c, w, b);
    train_step(c, p, c->x2);
    assert_int_equal(dlp_plan_get_input_grad(p, fresh), DLP_OK);
    same("next step's vs a fresh plan's with the same weights", next, fresh, nin, tol ? tol : 1e-6);
    dlp_plan_free(p);
    free(before);
    free(again);
    free(after);
    free(after2);
    free(only_after);
    free(next);
    free(fresh);
    free(w);
    free(b);
}

static void test_input_grad_after_update(void **state) {
    (void)state;
    int ran = 0;
    for (const dlp_backend *const *bk = dlp_backends(); *bk; bk++) {
        const dlp_backend *o = *bk;
        if (dlp_backend_available(o, NULL, 0) != DLP_OK || !dlp_backend_has(o, DLP_BACKEND_INPUT_GRAD)) continue;
        static const dlp_dtype k_prec[] = {DLP_DTYPE_F32, DLP_DTYPE_BF16, DLP_DTYPE_F16};
        for (size_t k = 0; k < sizeof k_prec / sizeof k_prec[0]; k++) {
            ig_case c = {.o = o, .prec = k_prec[k]};
            assert_int_equal(dlp_model_build("resnet-mini", CLASSES, SIZE, &c.net), DLP_OK);
            dlp_plan_cfg cfg = {.batch = BATCH, .train = 1, .precision = c.prec, .threads = 2};
            dlp_plan *probe = NULL;
            if (dlp_plan_create(o, &c.net, &cfg, &probe) != DLP_OK) {  // a precision this backend does not plan
                dlp_err_clear();
                dlp_net_free(&c.net);
                continue;
            }
            dlp_plan_free(probe);
            printf("  %s %s:\n", dlp_backend_name(o), dlp_dtype_name(c.prec));
            c.params = malloc((size_t)c.net.param_count * 4);
            c.bufs = malloc((size_t)c.net.buf_count * 4 + 4);
            dlp_resnet_init_params(&c.net, 11, 0, c.params, c.bufs);
            c.nin = (int64_t)BATCH * 3 * SIZE * SIZE;
            c.x = randn(c.nin, 11, 1, 1.0);
            c.x2 = randn(c.nin, 11, 2, 1.0);
            c.labels[0] = 3;
            c.labels[1] = 8;
            c.hp = (dlp_sgd){.lr = 0.5f, .momentum = 0.9f, .weight_decay = 1e-2f};  // large: the weights move
            input_grad_case(&c);
            free(c.params);
            free(c.bufs);
            free(c.x);
            free(c.x2);
            dlp_net_free(&c.net);
            ran++;
        }
    }
    assert_true(ran >= 1);  // ref at least
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_input_grad_after_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
