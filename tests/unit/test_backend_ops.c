// Every backend against `ref` (ggml's test-backend-ops pattern): for each backend in dlp_backends() other than
// ref and each precision it accepts (fp32; bf16 where it plans it), every op — convolutions with stride, padding
// and kernel variants (7x7/2 on the raw input, 3x3/1, 3x3/2, 1x1/1, 1x1/2, odd channel counts, non-square), BN
// (training forward, running statistics, eval, backward), BN+ReLU, ReLU, add, add+ReLU, maxpool, global avgpool,
// fc, the loss, the SGD update, gradient buckets — and whole ResNet training steps (resnet-mini, its bottleneck
// twin, resnet18, resnet50 at small sizes), on fresh random inputs, compared with ref.
//
// Error measure, per tensor: max_i |a_i - b_i| / max_i |b_i| (a = backend, b = ref; an all-zero b uses the
// absolute error). Every value we compare is a sum of many terms (convolutions, fc, BN statistics, weight
// gradients over N*H*W positions); the rounding error of such a sum scales with the magnitude of its terms, not
// with the sum itself, which can cancel to ~0. So an element-wise relative error would flag harmless
// cancellation, while the max-norm of the tensor is the scale of the terms: the norm-wise error is the
// meaningful one (it is also the parity test's measure against torchvision).
//
// Tolerances:
// - fp32: 1e-4. fp32 rounding is u = 2^-24 = 6e-8; a length-K dot product is off by <= K u relative to the sum
//   of |terms| (worst case; ~sqrt(K) u typically). Our longest reductions: conv weight gradients over N*P*Q <= 2k
//   terms and 3x3x64 = 576-term dot products, i.e. <= 1.2e-4 worst case and ~3e-6 typically; ref sums in double.
//   Whole ResNet steps pass through 20-50 layers and batch-norm over small batches: measured ~1e-5 (printed).
// - bf16 (8 significant bits, u = 2^-8 = 3.9e-3): the backend rounds its inputs, weights and every stored
//   activation and activation gradient to bf16 and accumulates in fp32. We give ref the same bf16-rounded input,
//   weights and output gradient, so what remains per op is the rounding of the tensors the backend stores (the
//   1x1 "stem" conv's output, the op's output, their gradients: <= u each, relative to the tensor's max) and
//   fp32 accumulation (K 2^-24 << u). Per op: 4u = 1.6e-2 (two roundings plus a factor-2 margin). A whole
//   network compounds one rounding per stored tensor along its depth D (~20 for resnet18, ~50 for resnet50),
//   as a random walk, and gradients meet ReLU masks and maxpool winners that bf16 rounding moves (a pre-activation
//   within ~u of 0 changes side). At test sizes (small batches, layer4 BN over 8-16 values) a whole ResNet step
//   is poorly conditioned: ref's own fp32 gradients move by 14-39% (relative L2) and its logits by 1-3% when only
//   its input is perturbed by u. So the whole-step bf16 check is relative to that conditioning, measured in the
//   test: S = ref's change under a u-perturbation of the input; the backend's bf16 step must be within 3 S of ref
//   (measured ratios 1.2-2.4) for the logits, eval and inference outputs (max-norm), and the gradients, running
//   statistics and updated parameters (relative L2 over the whole array); floors 4u. The per-op checks above
//   are the sharp ones.
// - resnet50 whole step in fp32: with the default init at 64 px the step is chaotic even in fp32 — perturbing
//   ref's input by 1e-6 changes ref's own gradients by 30% (a ReLU decision flips, and a layer4 weight gradient
//   sums over 8 positions) — so that case scales each bottleneck's last BN weight by 0.2 (zero_init_residual in
//   spirit, branches still trained), where a 1e-7 perturbation moves gradients by 8e-6 and cpu matches at ~3e-5.
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
#include "core/tensor.h"
#include "nn/resnet.h"
#include "testutil.h"

#define TOL_F32 1e-4
#define U_BF16 (1.0 / 256.0)
#define TOL_BF16_OP (4 * U_BF16)
#define BF16_NET_FACTOR 3.0

static int g_sanitizer;   // DLPERF_SANITIZER=1: smaller whole-network cases
static int g_small_nets;  // the sanitizer pass, or DLPERF_TEST_SMALL_NETS=1 (the ISA matrix's lower ISAs): only the
                          // resnet-mini whole-network cases (ResNet-18/50's run on the machine's best ISA)

// ---- helpers ----

static double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d)) d = isnan(e) ? INFINITY : e;
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return m > 0 ? d / m : d;
}

static float *randn(int64_t n, uint64_t seed, uint64_t stream, double scale) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    dlp_rng r;
    dlp_rng_init(&r, seed, stream);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * dlp_rng_normal(&r));
    return x;
}

// Backends the harness compares with ref: available, computing (not sim), and not ref itself.
static int computes(const dlp_backend *o) {
    return dlp_backend_get_caps(o)->kind != DLP_BACKEND_KIND_SIM && dlp_backend_available(o, NULL, 0) == DLP_OK;
}
static int is_ref(const dlp_backend *o) { return dlp_backend_get_caps(o)->reference; }

static void round_bf16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = dlp_bf16_to_f32(dlp_f32_to_bf16(x[i]));
}


// conv and fc weights (what a bf16 plan computes with) rounded to bf16, for ref.
static void round_weights(const dlp_net *net, float *params) {
    for (int i = 0; i < net->nlayers; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->kind != DLP_LAYER_CONV && l->kind != DLP_LAYER_FC) continue;
        const dlp_param *p = &net->params[l->param0];
        round_bf16(params + p->offset, p->numel);
    }
}

// What one training step (plus an eval pass and an inference plan) gives.
typedef struct step_out {
    float *out, *eval_out, *infer_out, *gx, *grads, *bufs, *updated;
    dlp_loss_out lo;
    int64_t n_out, n_in;
    int64_t conversions_train, conversions_infer;  // plan_info's activation_conversions (-1: not reported)
    int64_t grad_copies, shortcut_aliases, fused_acc_relu;  // training plan_info: gradient copies, aliases, fusions
    int64_t winograd_train, winograd_infer;        // plan_info's winograd_convs
    int avx512;                                    // cpu backend on an AVX-512 ISA
    int wino_lib;                                  // ... with a oneDNN that has Winograd on x86 CPUs (2.x)
    int onednn3;                                   // cpu backend on oneDNN 3.x
    int infer_prop_inference;                      // the inference plan's convolutions are forward_inference
} step_out;

// An integer field of plan_info (-1: not reported).
static int64_t info_int(const dlp_backend *o, const dlp_plan *p, const char *field) {
    if (!dlp_backend_has(o, DLP_BACKEND_PLAN_INFO)) return -1;
    json_t *info = json_object();
    int64_t n = -1;
    if (dlp_plan_info(p, info) == DLP_OK && json_object_get(info, field))
        n = json_integer_value(json_object_get(info, field));
    json_decref(info);
    return n;
}

// The oneDNN implementations the plans of one test used (plan_info's "kernels": name -> primitives, summed over
// plans) and the ISA they ran on, printed at the end of the test so a run under an ISA cap or a forced algorithm
// (tests/cli/backend_cpu_isa_matrix.sh) shows what it exercised.
static json_t *g_kernels;
static char g_isa[32];

static void note_kernels(const dlp_backend *o, const dlp_plan *p) {
    if (!dlp_backend_has(o, DLP_BACKEND_PLAN_INFO) || strcmp(dlp_backend_name(o), "cpu") != 0) return;
    json_t *info = json_object();
    if (dlp_plan_info(p, info) == DLP_OK) {
        const char *isa = json_string_value(json_object_get(info, "isa"));
        if (isa) snprintf(g_isa, sizeof g_isa, "%s", isa);
        if (!g_kernels) g_kernels = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(info, "kernels"), k, v) {
            json_t *have = json_object_get(g_kernels, k);
            json_object_set_new(g_kernels, k, json_integer(json_integer_value(have) + json_integer_value(v)));
        }
    }
    json_decref(info);
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void print_kernels(const char *test) {
    if (!g_kernels) {
        printf("  kernels [%s]: no cpu plan was built\n", test);
        return;
    }
    const char *names[128];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(g_kernels, k, v) if (n < 128) names[n++] = k;
    qsort(names, n, sizeof names[0], by_name);
    const char *w = getenv("DLPERF_CPU_WINOGRAD"), *pr = getenv("DLPERF_CPU_INFER_PROP"),
               *cap = getenv("ONEDNN_MAX_CPU_ISA");
    printf("  kernels [%s] oneDNN ISA %s (ONEDNN_MAX_CPU_ISA=%s, DLPERF_CPU_WINOGRAD=%s, DLPERF_CPU_INFER_PROP=%s):\n",
           test, g_isa, cap && cap[0] ? cap : "-", w && w[0] ? w : "-", pr && pr[0] ? pr : "-");
    for (size_t i = 0; i < n; i++)
        printf("  kernels [%s]   %-48s %5lld primitives\n", test, names[i],
               (long long)json_integer_value(json_object_get(g_kernels, names[i])));
    json_decref(g_kernels);
    g_kernels = NULL;
}

// Whether DLPERF_CPU_WINOGRAD=0 forces the direct algorithm.
static int winograd_off(void) {
    const char *w = getenv("DLPERF_CPU_WINOGRAD");
    return w && w[0] == '0';
}

// Whether the cpu backend runs here on an AVX-512 ISA (where oneDNN 2.6 has its Winograd kernels).
static int cpu_avx512(const dlp_backend *o, const dlp_plan *p) {
    if (!dlp_backend_has(o, DLP_BACKEND_PLAN_INFO) || strcmp(dlp_backend_name(o), "cpu") != 0) return 0;
    json_t *info = json_object();
    int yes = 0;
    if (dlp_plan_info(p, info) == DLP_OK) {
        const char *isa = json_string_value(json_object_get(info, "isa"));
        yes = isa && strncmp(isa, "avx512_core", 11) == 0;
    }
    json_decref(info);
    return yes;
}

// Whether the cpu backend runs on oneDNN 2.x (3.x has no Winograd convolutions on x86 CPUs: the plan falls
// back to direct ones).
static int cpu_onednn2(const dlp_backend *o, const dlp_plan *p) {
    json_t *info = json_object();
    int yes = 0;
    if (dlp_plan_info(p, info) == DLP_OK) {
        const char *v = json_string_value(json_object_get(info, "library_version"));
        yes = v && strncmp(v, "2.", 2) == 0;
    }
    json_decref(info);
    return yes;
}

static void step_out_free(step_out *s) {
    free(s->out);
    free(s->eval_out);
    free(s->infer_out);
    free(s->gx);
    free(s->grads);
    free(s->bufs);
    free(s->updated);
    memset(s, 0, sizeof *s);
}

typedef struct step_in {
    const dlp_net *net;
    int batch;
    dlp_dtype prec;
    const float *params, *bufs, *x;
    const float *dy;          // gradient of the output (NULL: from the loss with labels)
    const int32_t *labels;
    float smoothing;
    const dlp_sgd *hp;        // NULL: no update
} step_in;

static void run_step(const dlp_backend *o, const step_in *in, step_out *r) {
    const dlp_net *net = in->net;
    memset(r, 0, sizeof *r);
    r->n_out = (int64_t)in->batch * dlp_net_layer_numel(net, dlp_net_output(net));
    r->n_in = (int64_t)in->batch * dlp_net_layer_numel(net, 0);
    r->out = malloc((size_t)r->n_out * sizeof(float));
    r->eval_out = malloc((size_t)r->n_out * sizeof(float));
    r->infer_out = malloc((size_t)r->n_out * sizeof(float));
    r->gx = malloc((size_t)r->n_in * sizeof(float));
    r->grads = malloc((size_t)net->param_count * sizeof(float) + 4);
    r->bufs = malloc((size_t)net->buf_count * sizeof(float) + 4);
    r->updated = malloc((size_t)net->param_count * sizeof(float) + 4);
    dlp_plan_cfg cfg = {.batch = in->batch, .train = 1, .precision = in->prec, .threads = 2};
    dlp_plan *p = NULL;
    dlp_status st = dlp_plan_create(o, net, &cfg, &p);
    if (st) dlp_err_print(stderr);
    assert_int_equal(st, DLP_OK);
    note_kernels(o, p);
    r->conversions_train = info_int(o, p, "activation_conversions");
    r->grad_copies = info_int(o, p, "gradient_copies");
    r->shortcut_aliases = info_int(o, p, "shortcut_gradient_aliases");
    r->fused_acc_relu = info_int(o, p, "fused_accumulate_relu_bwd");
    r->winograd_train = info_int(o, p, "winograd_convs");
    r->avx512 = cpu_avx512(o, p);
    r->wino_lib = r->avx512 && cpu_onednn2(o, p);
    r->onednn3 = dlp_backend_has(o, DLP_BACKEND_PLAN_INFO) && strcmp(dlp_backend_name(o), "cpu") == 0 &&
                 !cpu_onednn2(o, p);
    assert_int_equal(dlp_plan_set_params(p, in->params, in->bufs), DLP_OK);
    assert_int_equal(dlp_test_set_input(p, net, in->x, in->batch), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, r->out), DLP_OK);
    if (in->labels) {
        assert_int_equal(dlp_plan_loss(p, in->labels, in->smoothing, &r->lo), DLP_OK);
        assert_int_equal(dlp_plan_backward(p, NULL), DLP_OK);
    } else {
        assert_int_equal(dlp_plan_backward(p, in->dy), DLP_OK);
    }
    assert_int_equal(dlp_plan_get_grads(p, r->grads), DLP_OK);
    assert_int_equal(dlp_plan_get_params(p, NULL, r->bufs), DLP_OK);
    if (in->hp) {
        assert_int_equal(dlp_plan_update(p, in->hp), DLP_OK);
        assert_int_equal(dlp_plan_get_params(p, r->updated, NULL), DLP_OK);
    }
    // the input gradient is the step's, even when read after the update (dlperf nn step does that)
    assert_true(dlp_backend_has(o, DLP_BACKEND_INPUT_GRAD));
    assert_int_equal(dlp_plan_get_input_grad(p, r->gx), DLP_OK);
    // the training plan's eval pass (running statistics as updated by the training pass)
    assert_int_equal(dlp_test_set_input(p, net, in->x, in->batch), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, r->eval_out), DLP_OK);
    dlp_plan_free(p);
    // an inference plan (BN folded, fusions) with the same weights and the updated running statistics
    cfg.train = 0;
    assert_int_equal(dlp_plan_create(o, net, &cfg, &p), DLP_OK);
    note_kernels(o, p);
    r->conversions_infer = info_int(o, p, "activation_conversions");
    r->winograd_infer = info_int(o, p, "winograd_convs");
    if (dlp_backend_has(o, DLP_BACKEND_PLAN_INFO)) {
        json_t *info = json_object();
        if (dlp_plan_info(p, info) == DLP_OK) {
            const char *pk = json_string_value(json_object_get(info, "conv_prop_kind"));
            r->infer_prop_inference = pk && strcmp(pk, "forward_inference") == 0;
        }
        json_decref(info);
    }
    assert_int_equal(dlp_plan_set_params(p, in->params, r->bufs), DLP_OK);
    assert_int_equal(dlp_test_set_input(p, net, in->x, in->batch), DLP_OK);
    assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
    assert_int_equal(dlp_plan_get_output(p, r->infer_out), DLP_OK);
    dlp_plan_free(p);
}

// Worst per-parameter-tensor error; *which gets its name.
static double worst_param(const dlp_net *net, const float *a, const float *b, const char **which) {
    double w = 0;
    *which = "-";
    for (int i = 0; i < net->nparams; i++) {
        const dlp_param *p = &net->params[i];
        double e = rel_err(a + p->offset, b + p->offset, p->numel);
        if (!(e <= w)) {
            w = e;
            *which = p->name;
        }
    }
    return w;
}

static double worst_buf(const dlp_net *net, const float *a, const float *b, const char **which) {
    double w = 0;
    *which = "-";
    for (int i = 0; i < net->nbufs; i++) {
        const dlp_param *p = &net->bufs[i];
        double e = rel_err(a + p->offset, b + p->offset, p->numel);
        if (!(e <= w)) {
            w = e;
            *which = p->name;
        }
    }
    return w;
}

typedef struct cmp_line {
    int fails;
    char buf[1024];
    size_t used;
} cmp_line;

static void check(cmp_line *c, const char *what, double err, double tol) {
    int ok = err <= tol;
    c->fails += !ok;
    int w = snprintf(c->buf + c->used, sizeof c->buf - c->used, " %s %.1e%s", what, err, ok ? "" : "(FAIL)");
    if (w > 0 && c->used + (size_t)w < sizeof c->buf) c->used += (size_t)w;
}

// Compares a backend's step with ref's; tol_out for outputs/loss, tol_grad for gradients/updates.
static int compare(const char *label, const dlp_net *net, const step_out *a, const step_out *b, int have_update,
                   int have_loss, double tol_out, double tol_grad) {
    cmp_line c = {0};
    const char *wn;
    check(&c, "out", rel_err(a->out, b->out, a->n_out), tol_out);
    if (have_loss) {
        check(&c, "loss", fabs(a->lo.loss - b->lo.loss) / fmax(fabs(b->lo.loss), 1e-12), tol_out);
        // top-k counts: equal unless two logits are within the tolerance of each other
        int dt1 = abs(a->lo.correct_top1 - b->lo.correct_top1), dt5 = abs(a->lo.correct_top5 - b->lo.correct_top5);
        check(&c, "topk", (double)(dt1 + dt5), tol_out > TOL_F32 ? 2.0 : 0.0);
    }
    check(&c, "dx", rel_err(a->gx, b->gx, a->n_in), tol_grad);
    if (net->nparams) {
        double e = worst_param(net, a->grads, b->grads, &wn);
        check(&c, "grads", e, tol_grad);
        int w = snprintf(c.buf + c.used, sizeof c.buf - c.used, "[%s]", wn);
        if (w > 0 && c.used + (size_t)w < sizeof c.buf) c.used += (size_t)w;
    }
    if (net->nbufs) check(&c, "running", worst_buf(net, a->bufs, b->bufs, &wn), tol_out);
    if (have_update && net->nparams) check(&c, "updated", worst_param(net, a->updated, b->updated, &wn), tol_grad);
    check(&c, "eval", rel_err(a->eval_out, b->eval_out, a->n_out), tol_out);
    check(&c, "infer", rel_err(a->infer_out, b->infer_out, a->n_out), tol_out);
    printf("  %-44s%s\n", label, c.buf);
    fflush(stdout);
    return c.fails;
}

// ---- per-op cases ----

typedef enum {
    OP_CONV, OP_BN, OP_BN_RELU, OP_RELU, OP_ADD, OP_ADD_RELU, OP_ADD2, OP_ADD2_RELU, OP_MAXPOOL, OP_AVGPOOL, OP_FC,
    OP_LOSS
} op_kind;

typedef struct op_case {
    const char *name;
    op_kind kind;
    int stem;              // a 1x1 conv first, so the op runs on the backend's own layout and type
    int n, c, h, w;        // input
    int out, k, stride, pad;
} op_case;

static const op_case k_ops[] = {
    {"conv 7x7/2 pad 3, 3->16, raw input", OP_CONV, 0, 2, 3, 21, 20, 16, 7, 2, 3},
    {"conv 3x3/1 pad 1, 16->16", OP_CONV, 1, 2, 16, 10, 10, 16, 3, 1, 1},
    {"conv 3x3/1 pad 1, 32->32, 16x16 (cpu: Winograd)", OP_CONV, 1, 2, 32, 16, 16, 32, 3, 1, 1},
    {"conv 3x3/2 pad 1, 16->32", OP_CONV, 1, 2, 16, 11, 11, 32, 3, 2, 1},
    {"conv 1x1/1, 32->16", OP_CONV, 1, 2, 32, 7, 7, 16, 1, 1, 0},
    {"conv 1x1/2, 16->32 (downsample)", OP_CONV, 1, 2, 16, 9, 9, 32, 1, 2, 0},
    {"conv 3x3/1 pad 1, 5->7, 9x6", OP_CONV, 1, 3, 5, 9, 6, 7, 3, 1, 1},
    {"conv 5x5/1 pad 0, 8->8", OP_CONV, 0, 2, 8, 9, 9, 8, 5, 1, 0},
    {"bn (train, running stats, eval, backward)", OP_BN, 1, 3, 16, 6, 5, 0, 0, 0, 0},
    {"bn, 12 channels on the raw input", OP_BN, 0, 4, 12, 5, 5, 0, 0, 0, 0},
    {"bn + relu (fused)", OP_BN_RELU, 1, 3, 16, 6, 6, 0, 0, 0, 0},
    {"relu", OP_RELU, 1, 2, 16, 5, 5, 0, 0, 0, 0},
    {"add (conv(x) + x)", OP_ADD, 1, 2, 16, 6, 6, 0, 0, 0, 0},
    {"add + relu (fused)", OP_ADD_RELU, 1, 2, 16, 6, 6, 0, 0, 0, 0},
    {"add (relu(x) + x): no conv to fuse into", OP_ADD2, 1, 2, 16, 5, 6, 0, 0, 0, 0},
    {"relu(relu(x) + x)", OP_ADD2_RELU, 1, 2, 16, 5, 6, 0, 0, 0, 0},
    {"maxpool 3x3/2 pad 1", OP_MAXPOOL, 1, 2, 16, 9, 9, 0, 3, 2, 1},
    {"maxpool 2x2/2", OP_MAXPOOL, 1, 2, 16, 8, 6, 0, 2, 2, 0},
    {"avgpool (global)", OP_AVGPOOL, 1, 2, 32, 5, 7, 0, 0, 0, 0},
    {"fc on (C,1,1)", OP_FC, 1, 3, 32, 1, 1, 10, 0, 0, 0},
    {"fc on (C,H,W)", OP_FC, 1, 3, 8, 3, 2, 10, 0, 0, 0},
    {"loss: fc + cross-entropy (smoothing 0.1)", OP_LOSS, 1, 4, 16, 1, 1, 10, 0, 0, 0},
};

static void build_op(const op_case *c, dlp_net *net) {
    assert_int_equal(dlp_net_init(net, "op", c->c, c->h, c->w), DLP_OK);
    int x = 0;
    if (c->stem) assert_true((x = dlp_net_conv(net, "stem", 0, c->c, 1, 1, 0)) > 0);
    int y = -1;
    switch (c->kind) {
    case OP_CONV: y = dlp_net_conv(net, "conv", x, c->out, c->k, c->stride, c->pad); break;
    case OP_BN: y = dlp_net_bn(net, "bn", x); break;
    case OP_BN_RELU: y = dlp_net_relu(net, dlp_net_bn(net, "bn", x)); break;
    case OP_RELU: y = dlp_net_relu(net, x); break;
    case OP_ADD:
    case OP_ADD_RELU: {
        int a = dlp_net_conv(net, "branch", x, c->c, 3, 1, 1);
        y = dlp_net_add(net, a, x);
        if (c->kind == OP_ADD_RELU) y = dlp_net_relu(net, y);
        break;
    }
    case OP_ADD2:
    case OP_ADD2_RELU:
        y = dlp_net_add(net, dlp_net_relu(net, x), x);
        if (c->kind == OP_ADD2_RELU) y = dlp_net_relu(net, y);
        break;
    case OP_MAXPOOL: y = dlp_net_maxpool(net, x, c->k, c->stride, c->pad); break;
    case OP_AVGPOOL: y = dlp_net_avgpool(net, x); break;
    case OP_FC:
    case OP_LOSS: y = dlp_net_fc(net, "fc", x, c->out); break;
    }
    assert_true(y > 0);
}

// bf16: the stem and the add's branch become identity convolutions, so the op under test sees exactly the
// bf16 values ref is given. (With random weights the backend's bf16-rounded stem output and ref's fp32 one
// differ by ~u, which moves ReLU masks and maxpool winners near ties: a real difference, but of the
// comparison, not of the op.)
static void exact_helpers(const dlp_net *net, float *params) {
    for (int i = 0; i < net->nlayers; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->kind != DLP_LAYER_CONV || (strcmp(l->name, "stem") != 0 && strcmp(l->name, "branch") != 0)) continue;
        const dlp_param *p = &net->params[l->param0];
        const int64_t K = p->shape[0], C = p->shape[1], R = p->shape[2], S = p->shape[3];
        memset(params + p->offset, 0, (size_t)p->numel * sizeof(float));
        for (int64_t k = 0; k < K && k < C; k++) params[p->offset + ((k * C + k) * R + R / 2) * S + S / 2] = 1.0f;
    }
}

// The precisions a backend plans for this net (fp32 always; bf16 if plan_create accepts it).
static int has_bf16(const dlp_backend *o, const dlp_net *net, int batch) {
    dlp_plan_cfg cfg = {.batch = batch, .train = 1, .precision = DLP_DTYPE_BF16, .threads = 2};
    dlp_plan *p = NULL;
    if (dlp_plan_create(o, net, &cfg, &p) != DLP_OK) return 0;
    dlp_plan_free(p);
    return 1;
}

static int op_case_run(const dlp_backend *ref, const dlp_backend *o, const op_case *c, dlp_dtype prec,
                       uint64_t seed) {
    dlp_net net;
    build_op(c, &net);
    const int out = dlp_net_output(&net);
    float *params = malloc((size_t)net.param_count * sizeof(float) + 4), *bufs = malloc((size_t)net.buf_count * sizeof(float) + 4);
    dlp_test_init_params(&net, seed, params, bufs);
    if (prec == DLP_DTYPE_BF16) exact_helpers(&net, params);
    const int64_t nin = (int64_t)c->n * c->c * c->h * c->w, nout = (int64_t)c->n * dlp_net_layer_numel(&net, out);
    float *x = randn(nin, seed, 1, 1.0), *dy = randn(nout, seed, 2, 1.0);
    int32_t labels[16];
    dlp_rng r;
    dlp_rng_init(&r, seed, 3);
    for (int i = 0; i < 16; i++) labels[i] = (int32_t)dlp_rng_below(&r, (uint64_t)(c->out > 0 ? c->out : 1));
    dlp_sgd hp = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-2f, .nesterov = (int)(seed & 1)};
    // ref sees what a bf16 plan computes with: the input, conv/fc weights and the output gradient in bf16
    float *rparams = malloc((size_t)net.param_count * sizeof(float) + 4), *rx = malloc((size_t)nin * sizeof(float)),
          *rdy = malloc((size_t)nout * sizeof(float));
    memcpy(rparams, params, (size_t)net.param_count * sizeof(float));
    memcpy(rx, x, (size_t)nin * sizeof(float));
    memcpy(rdy, dy, (size_t)nout * sizeof(float));
    if (prec == DLP_DTYPE_BF16) {
        round_weights(&net, rparams);
        round_bf16(rx, nin);
        if (net.layers[out].kind != DLP_LAYER_FC) round_bf16(rdy, nout);
    }
    const int loss = c->kind == OP_LOSS;
    step_in si = {.net = &net, .batch = c->n, .prec = prec, .params = params, .bufs = bufs, .x = x, .dy = dy,
                  .labels = loss ? labels : NULL, .smoothing = 0.1f, .hp = &hp};
    step_in ri = si;
    ri.prec = DLP_DTYPE_F32;
    ri.params = rparams;
    ri.x = rx;
    ri.dy = rdy;
    step_out a, b;
    run_step(o, &si, &a);
    run_step(ref, &ri, &b);
    char label[96];
    snprintf(label, sizeof label, "%s %s: %s", dlp_backend_name(o), dlp_dtype_name(prec), c->name);
    double tol = prec == DLP_DTYPE_BF16 ? TOL_BF16_OP : TOL_F32;
    int fails = compare(label, &net, &a, &b, 1, loss, tol, tol);
    if (strstr(c->name, "Winograd") && prec == DLP_DTYPE_F32 && a.avx512) {
        // backward data + backward weights in training, forward in inference; none when direct is forced
        printf("  %-44s Winograd primitives: training plan %lld, inference plan %lld%s\n", "",
               (long long)a.winograd_train, (long long)a.winograd_infer,
               winograd_off() ? " (DLPERF_CPU_WINOGRAD=0: direct forced)" : "");
        if (winograd_off() || !a.wino_lib) fails += a.winograd_train != 0 || a.winograd_infer != 0;
        else fails += a.winograd_train < 2 || a.winograd_infer < 1;
    }
    step_out_free(&a);
    step_out_free(&b);
    free(params);
    free(bufs);
    free(rparams);
    free(x);
    free(rx);
    free(dy);
    free(rdy);
    dlp_net_free(&net);
    return fails;
}

static const dlp_backend *get_ref(void) {
    const dlp_backend *r = dlp_backend_find("ref", NULL);
    assert_non_null(r);
    return r;
}

static int n_others(void) {
    int n = 0;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++)
        if (!is_ref(*b) && computes(*b)) n++;
    return n;
}

static void test_ops(void **state) {
    (void)state;
    const dlp_backend *ref = get_ref();
    if (!n_others()) skip();
    int fails = 0;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++) {
        const dlp_backend *o = *b;
        if (is_ref(o) || !computes(o)) continue;
        for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++) {
            fails += op_case_run(ref, o, &k_ops[i], DLP_DTYPE_F32, 11 + i);
            dlp_net net;
            build_op(&k_ops[i], &net);
            int bf = has_bf16(o, &net, k_ops[i].n);
            dlp_net_free(&net);
            if (bf) fails += op_case_run(ref, o, &k_ops[i], DLP_DTYPE_BF16, 101 + i);
            else printf("  %s bf16: %s: not planned here (skipped)\n", dlp_backend_name(o), k_ops[i].name);
        }
    }
    print_kernels("ops");
    assert_int_equal(fails, 0);
}

// ---- whole networks ----

typedef struct net_case {
    const char *model;
    int size, batch, classes;
    float last_bn_gamma;  // > 0: each residual block's last BN weight scaled by this (see the header)
    int sanitizer_ok;     // small enough for the sanitizer pass
} net_case;

static const net_case k_nets[] = {
    {"resnet-mini", 32, 4, 10, 0, 1},
    {"resnet-mini-bottleneck", 32, 4, 10, 0, 1},
    {"resnet18", 64, 2, 10, 0, 0},
    {"resnet50", 64, 2, 10, 0.2f, 0},
};

static double l2_err(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)a[i] - (double)b[i];
        d += e * e;
        m += (double)b[i] * b[i];
    }
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

// bf16 whole step: errors relative to ref's own sensitivity s (ref perturbed by u) as described in the header.
static int compare_bf16_net(const char *label, const dlp_net *net, const step_out *a, const step_out *b,
                            const step_out *s) {
    cmp_line c = {0};
    const double floor = 4 * U_BF16;
    double so = fmax(BF16_NET_FACTOR * rel_err(s->out, b->out, b->n_out), floor);
    double sg = fmax(BF16_NET_FACTOR * l2_err(s->grads, b->grads, net->param_count), floor);
    double sx = fmax(BF16_NET_FACTOR * l2_err(s->gx, b->gx, b->n_in), floor);
    double sb = fmax(BF16_NET_FACTOR * l2_err(s->bufs, b->bufs, net->buf_count), floor);
    double su = fmax(BF16_NET_FACTOR * l2_err(s->updated, b->updated, net->param_count), floor);
    double se = fmax(BF16_NET_FACTOR * rel_err(s->eval_out, b->eval_out, b->n_out), floor);
    double si = fmax(BF16_NET_FACTOR * rel_err(s->infer_out, b->infer_out, b->n_out), floor);
    check(&c, "out", rel_err(a->out, b->out, a->n_out), so);
    check(&c, "loss", fabs(a->lo.loss - b->lo.loss) / fmax(fabs(b->lo.loss), 1e-12), so);
    check(&c, "dx(L2)", l2_err(a->gx, b->gx, a->n_in), sx);
    check(&c, "grads(L2)", l2_err(a->grads, b->grads, net->param_count), sg);
    check(&c, "running(L2)", l2_err(a->bufs, b->bufs, net->buf_count), sb);
    check(&c, "updated(L2)", l2_err(a->updated, b->updated, net->param_count), su);
    check(&c, "eval", rel_err(a->eval_out, b->eval_out, a->n_out), se);
    check(&c, "infer", rel_err(a->infer_out, b->infer_out, a->n_out), si);
    printf("  %-44s%s\n  %-44s tolerances (3x ref's sensitivity): out %.1e grads %.1e infer %.1e\n", label, c.buf, "",
           so, sg, si);
    fflush(stdout);
    return c.fails;
}

// An fp32 whole step that missed TOL_F32 in its gradients: is that the backend, or the step's conditioning? Other
// kernels (another ISA's, another algorithm's) round differently, and a whole ResNet step at test sizes has
// pre-activations and maxpool candidates within rounding of a ReLU's or a maxpool's decision: one decision taken
// the other way moves a gradient far more than rounding (a layer4 BN at batch 2 averages over 8 values). Seen with
// ONEDNN_MAX_CPU_ISA=AVX2 on resnet50: forward 3e-6 of ref, gradients 8e-2 apart. So, only then, ref's own
// sensitivity: S = its largest change over 3 runs with the input perturbed by EPS_F32_NET (relative, random signs;
// the order of the fp32 kernels' forward deviation on whole networks, 2e-6..7e-6). The step passes if the forward
// quantities (outputs, loss, running statistics, the inference plan) still meet TOL_F32 — decisions do not move
// them — and the gradients, the updated parameters and the eval pass after the update are within 3 S (L2 over the
// whole array, as the bf16 check). Any other error still fails.
#define EPS_F32_NET 1e-5
static int fp32_conditioning(const dlp_backend *ref, const step_in *ri, const dlp_net *net, const step_out *a,
                             const step_out *b, int64_t nin, uint64_t seed) {
    double sg = 0, sx = 0, su = 0, se = 0;
    for (int k = 0; k < 3; k++) {
        float *px = randn(nin, seed, 20 + (uint64_t)k, EPS_F32_NET);
        for (int64_t i = 0; i < nin; i++) px[i] = ri->x[i] * (1.0f + px[i]);
        step_in pi = *ri;
        pi.x = px;
        step_out sv;
        run_step(ref, &pi, &sv);
        sg = fmax(sg, l2_err(sv.grads, b->grads, net->param_count));
        sx = fmax(sx, l2_err(sv.gx, b->gx, b->n_in));
        su = fmax(su, l2_err(sv.updated, b->updated, net->param_count));
        se = fmax(se, rel_err(sv.eval_out, b->eval_out, b->n_out));
        step_out_free(&sv);
        free(px);
    }
    cmp_line c = {0};
    const char *wn;
    check(&c, "out", rel_err(a->out, b->out, a->n_out), TOL_F32);
    check(&c, "loss", fabs(a->lo.loss - b->lo.loss) / fmax(fabs(b->lo.loss), 1e-12), TOL_F32);
    check(&c, "running", worst_buf(net, a->bufs, b->bufs, &wn), TOL_F32);
    check(&c, "infer", rel_err(a->infer_out, b->infer_out, a->n_out), TOL_F32);
    check(&c, "dx(L2)", l2_err(a->gx, b->gx, a->n_in), fmax(3 * sx, TOL_F32));
    check(&c, "grads(L2)", l2_err(a->grads, b->grads, net->param_count), fmax(3 * sg, TOL_F32));
    check(&c, "updated(L2)", l2_err(a->updated, b->updated, net->param_count), fmax(3 * su, TOL_F32));
    check(&c, "eval", rel_err(a->eval_out, b->eval_out, a->n_out), fmax(3 * se, TOL_F32));
    printf("  %-44s conditioning: ref's own change under an input perturbation of %.0e: dx %.1e grads %.1e "
           "updated %.1e eval %.1e\n  %-44s against 3x that:%s\n",
           "", EPS_F32_NET, sx, sg, su, se, "", c.buf);
    fflush(stdout);
    return c.fails;
}

static int net_case_run(const dlp_backend *ref, const dlp_backend *o, const net_case *c, dlp_dtype prec,
                        uint64_t seed) {
    dlp_net net;
    assert_int_equal(dlp_model_build(c->model, c->classes, c->size, &net), DLP_OK);
    float *params = malloc((size_t)net.param_count * sizeof(float)), *bufs = malloc((size_t)net.buf_count * sizeof(float));
    // torchvision's initialization; running statistics away from (0, 1) so the inference plan folds something
    dlp_test_init_params(&net, seed, params, bufs);
    dlp_resnet_init_params(&net, seed, 0, params, NULL);
    if (c->last_bn_gamma > 0)
        for (int i = 0; i < net.nparams; i++)
            if (strstr(net.params[i].name, "bn3.weight"))
                for (int64_t j = 0; j < net.params[i].numel; j++) params[net.params[i].offset + j] *= c->last_bn_gamma;
    const int64_t nin = (int64_t)c->batch * 3 * c->size * c->size;
    float *x = randn(nin, seed, 1, 1.0);
    int32_t labels[64];
    dlp_rng r;
    dlp_rng_init(&r, seed, 3);
    for (int i = 0; i < c->batch; i++) labels[i] = (int32_t)dlp_rng_below(&r, (uint64_t)c->classes);
    dlp_sgd hp = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = (int)(seed & 1),
                  .decay_no_decay_params = (int)((seed >> 1) & 1)};
    float *rparams = malloc((size_t)net.param_count * sizeof(float)), *rx = malloc((size_t)nin * sizeof(float));
    memcpy(rparams, params, (size_t)net.param_count * sizeof(float));
    memcpy(rx, x, (size_t)nin * sizeof(float));
    if (prec == DLP_DTYPE_BF16) {
        round_weights(&net, rparams);
        round_bf16(rx, nin);
    }
    step_in si = {.net = &net, .batch = c->batch, .prec = prec, .params = params, .bufs = bufs, .x = x,
                  .labels = labels, .smoothing = 0.1f, .hp = &hp};
    step_in ri = si;
    ri.prec = DLP_DTYPE_F32;
    ri.params = rparams;
    ri.x = rx;
    step_out a, b;
    run_step(o, &si, &a);
    run_step(ref, &ri, &b);
    char label[96];
    snprintf(label, sizeof label, "%s %s: %s %dx%d batch %d step", dlp_backend_name(o), dlp_dtype_name(prec), c->model, c->size,
             c->size, c->batch);
    int fails;
    if (prec == DLP_DTYPE_BF16) {
        // ref's sensitivity: the same step with its input perturbed by u (relative, random signs)
        float *px = randn(nin, seed, 9, U_BF16);
        for (int64_t i = 0; i < nin; i++) px[i] = rx[i] * (1.0f + px[i]);
        step_in pi = ri;
        pi.x = px;
        step_out sens;
        run_step(ref, &pi, &sens);
        fails = compare_bf16_net(label, &net, &a, &b, &sens);
        step_out_free(&sens);
        free(px);
    } else {
        fails = compare(label, &net, &a, &b, 1, 1, TOL_F32, TOL_F32);
        if (fails) fails = fp32_conditioning(ref, &ri, &net, &a, &b, nin, seed);
    }
    // activations stay in the primitives' layouts: ResNet-50 converts only the input batch (and, in bf16, the
    // pooled features for the fc). An inference plan of forward_inference convolutions (the AMX default, or
    // DLPERF_CPU_INFER_PROP=inference) runs oneDNN's brgemm kernels in NHWC, while its Winograd kernel keeps the
    // blocked layout: each Winograd convolution may then convert its input and its output (at most 2 more each).
    // oneDNN 3.x's fp32 forward_inference without AMX runs the 7x7 stem (3 input channels) in a direct kernel with
    // a blocked output: the maxpool after it keeps that layout and layer1.0's two convolutions convert it (2 more).
    if (strcmp(c->model, "resnet50") == 0 && a.conversions_train >= 0) {
        const int64_t most = prec == DLP_DTYPE_BF16 ? 2 : 1;
        const int64_t most_infer = most + (a.infer_prop_inference ? 2 * a.winograd_infer : 0) +
                                   (a.infer_prop_inference && a.onednn3 ? 2 : 0);
        printf("  %-44s activation conversions: training plan %lld, inference plan %lld (at most %lld, %lld)\n", "",
               (long long)a.conversions_train, (long long)a.conversions_infer, (long long)most,
               (long long)most_infer);
        fails += a.conversions_train > most || a.conversions_infer > most_infer;
        // ResNet-50's 12 identity blocks pass the add's gradient to the shortcut without a copy, and 15 of its 16
        // add+ReLUs take their output's last gradient contribution in the ReLU backward (the last block's output
        // gets only the pooling's); the results above are the ref comparison of exactly this plan
        printf("  %-44s gradient copies %lld, shortcut aliases %lld, accumulations fused into add+ReLU backward %lld "
               "(want 0, 12, 15)\n", "", (long long)a.grad_copies, (long long)a.shortcut_aliases,
               (long long)a.fused_acc_relu);
        fails += a.grad_copies != 0 || a.shortcut_aliases != 12 || a.fused_acc_relu != 15;
    }
    step_out_free(&a);
    step_out_free(&b);
    free(params);
    free(bufs);
    free(rparams);
    free(x);
    free(rx);
    dlp_net_free(&net);
    return fails;
}

static void test_resnet_steps(void **state) {
    (void)state;
    const dlp_backend *ref = get_ref();
    if (!n_others()) skip();
    int fails = 0;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++) {
        const dlp_backend *o = *b;
        if (is_ref(o) || !computes(o)) continue;
        for (size_t i = 0; i < sizeof k_nets / sizeof k_nets[0]; i++) {
            const net_case *c = &k_nets[i];
            if (g_small_nets && !c->sanitizer_ok) {
                printf("  %s: %s skipped (%s: time)\n", dlp_backend_name(o), c->model,
                       g_sanitizer ? "under the sanitizers" : "DLPERF_TEST_SMALL_NETS");
                continue;
            }
            fails += net_case_run(ref, o, c, DLP_DTYPE_F32, 7 + i);
            dlp_net net;
            assert_int_equal(dlp_model_build(c->model, c->classes, c->size, &net), DLP_OK);
            int bf = has_bf16(o, &net, c->batch);
            dlp_net_free(&net);
            if (bf) fails += net_case_run(ref, o, c, DLP_DTYPE_BF16, 70 + i);
        }
    }
    print_kernels("resnet steps");
    assert_int_equal(fails, 0);
}

// ---- the interface contract (docs/nn.md, backend.h), for every backend ----

static void test_contract(void **state) {
    (void)state;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++) {
        const dlp_backend *o = *b;
        if (!computes(o)) continue;
        dlp_net net;
        assert_int_equal(dlp_model_build("resnet-mini", 5, 32, &net), DLP_OK);
        dlp_plan *p = NULL;
        dlp_plan_cfg cfg = {.batch = 0, .train = 1, .precision = DLP_DTYPE_F32, .threads = 2};
        assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_INVALID);
        cfg.batch = 2;
        cfg.precision = DLP_DTYPE_F16;  // a GPU plans fp16 (its default precision); a CPU backend refuses it clearly
        const dlp_backend_caps *caps = dlp_backend_get_caps(o);
        dlp_status st16 = dlp_plan_create(o, &net, &cfg, &p);
        if (caps->kind == DLP_BACKEND_KIND_GPU) {
            assert_int_equal(st16, DLP_OK);
            dlp_plan_free(p);
        } else {
            assert_int_equal(st16, DLP_ERR_UNSUPPORTED);
            assert_non_null(strstr(dlp_err_msg(), "fp16"));
        }
        p = NULL;
        cfg.precision = DLP_DTYPE_F32;
        cfg.batch = 1;  // layer4 is 1x1 at 32 px: training BN over a single value
        assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_INVALID);
        assert_non_null(strstr(dlp_err_msg(), "more than one value per channel"));
        if (caps->kind == DLP_BACKEND_KIND_CPU && !caps->reference) {  // more memory than the machine has: a clear error, not the OOM killer
            cfg.batch = 1 << 22;
            assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_ERR_NOMEM);
            assert_non_null(strstr(dlp_err_msg(), "smaller --batch"));
            cfg.batch = 1;
        }
        cfg.train = 0;
        assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
        if (dlp_backend_has(o, DLP_BACKEND_PLAN_INFO)) {  // what the plan chose, for results
            json_t *info = json_object();
            assert_int_equal(dlp_plan_info(p, info), DLP_OK);
            if (strcmp(dlp_backend_name(o), "cpu") == 0) {
                assert_non_null(json_string_value(json_object_get(info, "isa")));
                assert_int_equal(json_integer_value(json_object_get(info, "threads")), 2);
                int nbn = 0;
                for (int i = 0; i < net.nlayers; i++) nbn += net.layers[i].kind == DLP_LAYER_BN;
                assert_int_equal(json_integer_value(json_object_get(info, "folded_bn")), nbn);  // each BN follows a conv
                assert_true(json_integer_value(json_object_get(info, "activation_conversions")) >= 1);  // the input
            }
            json_decref(info);
        }
        float out[10], *x = randn(2 * 3 * 32 * 32, 3, 1, 1.0), *g = malloc((size_t)net.param_count * 4);
        int32_t labels[2] = {0, 4}, bad[2] = {0, 5};
        dlp_loss_out lo;
        assert_int_equal(dlp_plan_get_grads(p, g), DLP_ERR_INVALID);  // inference plan
        assert_int_equal(dlp_plan_get_output(p, out), DLP_ERR_INVALID);  // before forward
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_ERR_INVALID);  // before set_input
        assert_int_equal(dlp_test_set_input(p, &net, x, 2), DLP_ERR_INVALID);  // more than the batch
        assert_int_equal(dlp_test_set_input(p, &net, x, 1), DLP_OK);
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_ERR_INVALID);  // inference plan
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
        assert_int_equal(dlp_plan_loss(p, labels, 0.0f, &lo), DLP_OK);  // loss and top-k on an inference plan
        assert_int_equal(dlp_plan_update(p, &(dlp_sgd){.lr = 0.1f}), DLP_ERR_INVALID);
        dlp_plan_free(p);
        cfg.train = 1;
        cfg.batch = 2;
        assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
        assert_int_equal(dlp_test_set_input(p, &net, x, 1), DLP_OK);
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_ERR_INVALID);  // partial batch in training
        assert_non_null(strstr(dlp_err_msg(), "full batch"));
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
        assert_int_equal(dlp_plan_backward(p, NULL), DLP_ERR_INVALID);  // after an eval pass
        assert_int_equal(dlp_test_set_input(p, &net, x, 2), DLP_OK);
        assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
        assert_int_equal(dlp_plan_backward(p, NULL), DLP_ERR_INVALID);  // loss() not called
        assert_int_equal(dlp_plan_loss(p, bad, 0.0f, &lo), DLP_ERR_INVALID);  // label out of range
        assert_non_null(strstr(dlp_err_msg(), "sample 1"));
        assert_int_equal(dlp_plan_loss(p, labels, 1.5f, &lo), DLP_ERR_INVALID);  // smoothing outside [0, 1]
        assert_int_equal(dlp_plan_loss(p, labels, 0.1f, &lo), DLP_OK);
        assert_int_equal(dlp_plan_backward(p, NULL), DLP_OK);
        dlp_plan_free(p);
        free(x);
        free(g);
        dlp_net_free(&net);
    }
}

// An eval pass on n < batch samples gives what a plan of batch n gives (padding does not leak in), on training
// and inference plans, fp32 and bf16.
static void test_partial_batch(void **state) {
    (void)state;
    for (const dlp_backend *const *b = dlp_backends(); *b; b++) {
        const dlp_backend *o = *b;
        if (!computes(o)) continue;
        dlp_net net;
        assert_int_equal(dlp_model_build("resnet-mini-bottleneck", 7, 40, &net), DLP_OK);
        float *w = malloc((size_t)net.param_count * 4), *bufs = malloc((size_t)net.buf_count * 4);
        dlp_test_init_params(&net, 9, w, bufs);
        float *x = randn(5 * 3 * 40 * 40, 9, 1, 1.0), ya[5 * 7], yb[3 * 7];
        for (int prec = 0; prec < 2; prec++)
            for (int train = 0; train < 2; train++) {
                dlp_plan_cfg ca = {.batch = 5, .train = train, .precision = prec ? DLP_DTYPE_BF16 : DLP_DTYPE_F32,
                                   .threads = 2};
                dlp_plan_cfg cb = ca;
                cb.batch = 3;
                dlp_plan *pa, *pb;
                if (dlp_plan_create(o, &net, &ca, &pa) != DLP_OK) continue;  // bf16 not planned here
                assert_int_equal(dlp_plan_create(o, &net, &cb, &pb), DLP_OK);
                assert_int_equal(dlp_plan_set_params(pa, w, bufs), DLP_OK);
                assert_int_equal(dlp_plan_set_params(pb, w, bufs), DLP_OK);
                assert_int_equal(dlp_test_set_input(pa, &net, x, 5), DLP_OK);  // fill the padding with real data first
                assert_int_equal(dlp_plan_forward(pa, DLP_PASS_EVAL), DLP_OK);
                assert_int_equal(dlp_test_set_input(pa, &net, x + 3 * 40 * 40, 3), DLP_OK);
                assert_int_equal(dlp_test_set_input(pb, &net, x + 3 * 40 * 40, 3), DLP_OK);
                assert_int_equal(dlp_plan_forward(pa, DLP_PASS_EVAL), DLP_OK);
                assert_int_equal(dlp_plan_forward(pb, DLP_PASS_EVAL), DLP_OK);
                assert_int_equal(dlp_plan_get_output(pa, ya), DLP_OK);
                assert_int_equal(dlp_plan_get_output(pb, yb), DLP_OK);
                double e = rel_err(ya, yb, 3 * 7);
                printf("  %s %s %s: 3 of 5 samples vs a plan of 3: %.1e\n", dlp_backend_name(o), prec ? "bf16" : "fp32",
                       train ? "training plan" : "inference plan", e);
                assert_true(e <= (prec ? TOL_BF16_OP : TOL_F32));
                dlp_plan_free(pa);
                dlp_plan_free(pb);
            }
        free(w);
        free(bufs);
        free(x);
        dlp_net_free(&net);
    }
}

// ---- SGD update and gradient buckets, on the backend's own gradients ----

typedef struct bucket_rec {
    dlp_plan *plan;
    const dlp_backend *ops;
    int n;
    int64_t offset[256], count[256];
    float *snap;  // the gradient array as it was when each bucket was announced (its part)
    float *tmp;   // the whole gradient array, read through dlp_plan_get_grads (device memory on a GPU)
} bucket_rec;

static void on_bucket(void *ctx, int64_t offset, int64_t count) {
    bucket_rec *r = ctx;
    assert_true(r->n < 256);
    r->offset[r->n] = offset;
    r->count[r->n] = count;
    r->n++;
    // dlp_plan_grad_buffer may be device memory: read through the backend's own copy (it waits for the queued work)
    assert_int_equal(dlp_plan_get_grads(r->plan, r->tmp), DLP_OK);
    memcpy(r->snap + offset, r->tmp + offset, (size_t)count * sizeof(float));
}

// Buckets are announced in dlp_net_buckets order with their final values; update is torch.optim.SGD on the
// flat arrays (checked against the formula of docs/nn.md applied to the backend's own gradients, momentum and
// weights: only float rounding may differ), weight decay skipped on no_decay parameters, and the compute copies
// follow: a forward pass after the update equals a fresh plan given the updated weights.
static void test_sgd_and_buckets(void **state) {
    (void)state;
    if (!n_others()) skip();
    for (const dlp_backend *const *b = dlp_backends(); *b; b++) {
        const dlp_backend *o = *b;
        if (is_ref(o) || !computes(o)) continue;
        for (int prec = 0; prec < 2; prec++) {
            dlp_net net;
            assert_int_equal(dlp_model_build("resnet-mini", 10, 32, &net), DLP_OK);
            const dlp_dtype pt = prec ? DLP_DTYPE_BF16 : DLP_DTYPE_F32;
            if (prec && !has_bf16(o, &net, 4)) {
                dlp_net_free(&net);
                continue;
            }
            const int64_t P = net.param_count;
            float *w = malloc((size_t)P * 4), *bufs = malloc((size_t)net.buf_count * 4), *v = randn(P, 5, 7, 0.01);
            float *g = malloc((size_t)P * 4), *w2 = malloc((size_t)P * 4), *v2 = malloc((size_t)P * 4);
            dlp_test_init_params(&net, 5, w, bufs);
            float *x = randn(4 * 3 * 32 * 32, 5, 1, 1.0);
            int32_t labels[4] = {1, 7, 3, 3};
            bucket_rec rec = {.ops = o, .snap = calloc((size_t)P, 4), .tmp = calloc((size_t)P, 4)};
            dlp_plan_cfg cfg = {.batch = 4, .train = 1, .precision = pt, .threads = 2, .bucket_elems = 2000,
                                .on_bucket = on_bucket, .bucket_ctx = &rec};
            dlp_plan *p;
            assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
            rec.plan = p;
            assert_int_equal(dlp_plan_set_params(p, w, bufs), DLP_OK);
            assert_int_equal(dlp_plan_set_momentum(p, v), DLP_OK);
            assert_int_equal(dlp_test_set_input(p, &net, x, 4), DLP_OK);
            assert_int_equal(dlp_plan_forward(p, DLP_PASS_TRAIN), DLP_OK);
            dlp_loss_out lo;
            assert_int_equal(dlp_plan_loss(p, labels, 0.0f, &lo), DLP_OK);
            assert_int_equal(dlp_plan_backward(p, NULL), DLP_OK);
            assert_int_equal(dlp_plan_get_grads(p, g), DLP_OK);
            dlp_bucket *bk;
            int nb;
            assert_int_equal(dlp_net_buckets(&net, 2000, &bk, &nb), DLP_OK);
            assert_true(nb > 2);
            assert_int_equal(rec.n, nb);
            for (int i = 0; i < nb; i++) {
                assert_int_equal(rec.offset[i], bk[i].offset);
                assert_int_equal(rec.count[i], bk[i].count);
            }
            assert_memory_equal(rec.snap, g, (size_t)P * 4);  // every bucket was final when announced
            free(bk);
            const dlp_sgd hp = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = prec,
                                .decay_no_decay_params = 0};
            assert_int_equal(dlp_plan_update(p, &hp), DLP_OK);
            assert_int_equal(dlp_plan_get_params(p, w2, NULL), DLP_OK);
            assert_int_equal(dlp_plan_get_momentum(p, v2), DLP_OK);
            double ew = 0, ev = 0;
            for (int i = 0; i < net.nparams; i++) {
                const dlp_param *q = &net.params[i];
                const double wd = q->no_decay ? 0.0 : hp.weight_decay;
                for (int64_t j = q->offset; j < q->offset + q->numel; j++) {
                    double d = (double)g[j] + wd * w[j];
                    double vv = hp.momentum * (double)v[j] + d;
                    d = hp.nesterov ? d + hp.momentum * vv : vv;
                    double ww = w[j] - hp.lr * d;
                    // in units of fp32 rounding of the terms involved (a few roundings happen in float)
                    const double sv = fabs(hp.momentum * v[j]) + fabs(g[j]) + fabs(wd * w[j]);
                    const double sw = fabs(w[j]) + hp.lr * (sv + fabs(d));
                    ew = fmax(ew, fabs(ww - w2[j]) / (0x1p-24 * sw + 1e-30));
                    ev = fmax(ev, fabs(vv - v2[j]) / (0x1p-24 * sv + 1e-30));
                }
            }
            printf("  %s %s: %d buckets announced final and in order; update vs formula: weights %.1f, momentum %.1f "
                   "fp32 roundings of the terms (tolerance 8)\n", dlp_backend_name(o), dlp_dtype_name(pt), nb, ew, ev);
            assert_true(ew <= 8 && ev <= 8);
            // the compute copies follow the update: same outputs as a fresh plan with the new weights
            float y1[40], y2[40];
            assert_int_equal(dlp_test_set_input(p, &net, x, 4), DLP_OK);
            assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
            assert_int_equal(dlp_plan_get_output(p, y1), DLP_OK);
            float *b2 = malloc((size_t)net.buf_count * 4);
            assert_int_equal(dlp_plan_get_params(p, NULL, b2), DLP_OK);
            dlp_plan_free(p);
            cfg.on_bucket = NULL;
            assert_int_equal(dlp_plan_create(o, &net, &cfg, &p), DLP_OK);
            assert_int_equal(dlp_plan_set_params(p, w2, b2), DLP_OK);
            assert_int_equal(dlp_test_set_input(p, &net, x, 4), DLP_OK);
            assert_int_equal(dlp_plan_forward(p, DLP_PASS_EVAL), DLP_OK);
            assert_int_equal(dlp_plan_get_output(p, y2), DLP_OK);
            if (dlp_backend_get_caps(o)->kind == DLP_BACKEND_KIND_CPU) {
                assert_memory_equal(y1, y2, sizeof y1);
            } else {  // a new plan may pick other convolution algorithms: rounding apart, not bitwise
                const double e12 = rel_err(y1, y2, 40);
                printf("  %s %s: forward after update vs a fresh plan: %.1e\n", dlp_backend_name(o), dlp_dtype_name(pt), e12);
                assert_true(e12 <= (prec ? TOL_BF16_OP : TOL_F32));
            }
            dlp_plan_free(p);
            free(b2);
            free(w);
            free(bufs);
            free(v);
            free(g);
            free(w2);
            free(v2);
            free(x);
            free(rec.snap);
            free(rec.tmp);
            dlp_net_free(&net);
        }
    }
}

int main(void) {
    const char *san = getenv("DLPERF_SANITIZER");
    g_sanitizer = san && san[0] == '1';
    const char *small = getenv("DLPERF_TEST_SMALL_NETS");
    g_small_nets = g_sanitizer || (small && small[0] == '1');
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_contract),
        cmocka_unit_test(test_partial_batch),
        cmocka_unit_test(test_sgd_and_buckets),
        cmocka_unit_test(test_resnet_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
