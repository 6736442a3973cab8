// run/step (the step runner and the bench harness) and dist/comm (the local communicator), on the ref backend:
// the phases run in the table's order and only those a step has; a step through the runner leaves the plan exactly
// where the same calls made by hand do; the bench's figures are the steps' (host clock or a given timer); errors
// from a phase, a hook or a non-finite loss end the step with the status.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "dist/comm.h"
#include "nn/resnet.h"
#include "run/step.h"

#define BATCH 2
#define CLASSES 4

typedef struct fixture {
    dlp_net net;
    float *params, *bufs;
    float *input;
    int32_t labels[BATCH];
} fixture;

static void fixture_open(fixture *f) {
    memset(f, 0, sizeof *f);
    assert_int_equal(dlp_model_build("resnet-mini", CLASSES, 32, &f->net), DLP_OK);
    f->params = malloc((size_t)f->net.param_count * sizeof(float));
    f->bufs = malloc((size_t)f->net.buf_count * sizeof(float));
    const int64_t n = (int64_t)BATCH * dlp_net_layer_numel(&f->net, 0);
    f->input = malloc((size_t)n * sizeof(float));
    assert_non_null(f->params);
    assert_non_null(f->bufs);
    assert_non_null(f->input);
    dlp_resnet_init_params(&f->net, 7, 0, f->params, f->bufs);
    dlp_rng r;
    dlp_rng_init(&r, 3, 1);
    dlp_step_fill_random(f->input, n, DLP_DTYPE_F32, &r);
    for (int i = 0; i < BATCH; i++) f->labels[i] = (int32_t)dlp_rng_below(&r, CLASSES);
}

static void fixture_close(fixture *f) {
    free(f->params);
    free(f->bufs);
    free(f->input);
    dlp_net_free(&f->net);
}

static dlp_plan *make_plan(fixture *f, int train) {
    const dlp_backend *ref = dlp_backend_find("ref", NULL);
    assert_non_null(ref);
    dlp_plan_cfg cfg = {.batch = BATCH, .train = train, .precision = DLP_DTYPE_F32};
    dlp_plan *p = NULL;
    assert_int_equal(dlp_plan_create(ref, &f->net, &cfg, &p), DLP_OK);
    assert_int_equal(dlp_plan_param_count(p), f->net.param_count);
    assert_int_equal(dlp_plan_set_params(p, f->params, f->bufs), DLP_OK);
    return p;
}

static const dlp_sgd k_sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};

// ---- the phases a step runs ------------------------------------------------------------------------------------

typedef struct seen {
    int n;
    dlp_step_phase order[16];
    int fail_at;  // a phase whose hook fails (-1: none)
} seen;

static dlp_status record(void *ctx, dlp_step_phase p) {
    seen *s = ctx;
    if (s->n < 16) s->order[s->n++] = p;
    if ((int)p == s->fail_at) return DLP_ERR(DLP_ERR_INTERNAL, "hook refused phase %s", dlp_step_phase_name(p));
    return DLP_OK;
}

static void test_phase_order(void **state) {
    (void)state;
    fixture f;
    fixture_open(&f);
    dlp_plan *tp = make_plan(&f, 1), *ip = make_plan(&f, 0);
    seen s = {.fail_at = -1};
    dlp_step_cfg cfg = {.plan = tp, .train = 1, .sync_phases = 1, .after_phase = record, .hook_ctx = &s};
    dlp_step_batch b = {.input = f.input, .n = BATCH, .labels = f.labels, .sgd = k_sgd};
    dlp_step_result r;
    assert_int_equal(dlp_step_run(&cfg, &b, -1, &r), DLP_OK);
    assert_int_equal(s.n, DLP_STEP_NPHASES);
    for (int i = 0; i < DLP_STEP_NPHASES; i++) assert_int_equal(s.order[i], i);
    int64_t sum = 0;
    for (int i = 0; i < DLP_STEP_NPHASES; i++) sum += r.phase_ns[i];
    assert_int_equal(sum, r.t1_ns - r.t0_ns);  // the phases are chained: they add up to the step
    assert_true(isfinite(r.loss.loss) && r.loss.loss > 0);

    // inference: input and forward; the loss too when the batch has labels
    s.n = 0;
    cfg.plan = ip;
    cfg.train = 0;
    b.labels = NULL;
    assert_int_equal(dlp_step_run(&cfg, &b, -1, &r), DLP_OK);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.order[0], DLP_STEP_INPUT);
    assert_int_equal(s.order[1], DLP_STEP_FORWARD);
    assert_int_equal(r.phase_ns[DLP_STEP_BACKWARD], 0);
    s.n = 0;
    b.labels = f.labels;
    assert_int_equal(dlp_step_run(&cfg, &b, -1, &r), DLP_OK);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.order[2], DLP_STEP_LOSS);
    assert_true(r.loss.correct_top5 >= r.loss.correct_top1 && r.loss.correct_top5 <= BATCH);

    // names, and out of range
    assert_string_equal(dlp_step_phase_name(DLP_STEP_ALLREDUCE), "allreduce");
    assert_string_equal(dlp_step_phase_name(DLP_STEP_NPHASES), "?");
    dlp_plan_free(tp);
    dlp_plan_free(ip);
    fixture_close(&f);
}

// ---- the runner's step is the hand-made one ----------------------------------------------------------------------

static void test_same_as_by_hand(void **state) {
    (void)state;
    fixture f;
    fixture_open(&f);
    dlp_plan *a = make_plan(&f, 1), *b = make_plan(&f, 1);
    dlp_comm *local;
    assert_int_equal(dlp_comm_open("local", &local), DLP_OK);
    const dlp_step_cfg cfg = {.plan = a, .comm = local, .train = 1, .label_smoothing = 0.1f};
    const dlp_step_batch sb = {.input = f.input, .n = BATCH, .labels = f.labels, .sgd = k_sgd};
    double la[2], lb[2];
    for (int s = 0; s < 2; s++) {
        dlp_step_result r;
        assert_int_equal(dlp_step_run(&cfg, &sb, -1, &r), DLP_OK);
        la[s] = r.loss.loss;
        dlp_loss_out lo;
        assert_int_equal(dlp_plan_set_input(b, f.input, BATCH), DLP_OK);
        assert_int_equal(dlp_plan_forward(b, DLP_PASS_TRAIN), DLP_OK);
        assert_int_equal(dlp_plan_loss(b, f.labels, 0.1f, &lo), DLP_OK);
        assert_int_equal(dlp_plan_backward(b, NULL), DLP_OK);
        assert_int_equal(dlp_plan_update(b, &k_sgd), DLP_OK);
        lb[s] = lo.loss;
    }
    assert_true(la[0] == lb[0] && la[1] == lb[1]);
    const size_t np = (size_t)f.net.param_count, nb = (size_t)f.net.buf_count;
    float *pa = malloc(np * 4), *pb = malloc(np * 4), *ba = malloc(nb * 4), *bb = malloc(nb * 4);
    assert_int_equal(dlp_plan_get_params(a, pa, ba), DLP_OK);
    assert_int_equal(dlp_plan_get_params(b, pb, bb), DLP_OK);
    assert_memory_equal(pa, pb, np * 4);  // the same arithmetic in the same order: bit for bit
    assert_memory_equal(ba, bb, nb * 4);
    assert_memory_not_equal(pa, f.params, np * 4);  // and the steps did update
    free(pa);
    free(pb);
    free(ba);
    free(bb);
    dlp_comm_free(local);
    dlp_plan_free(a);
    dlp_plan_free(b);
    fixture_close(&f);
}

// ---- errors end the step ------------------------------------------------------------------------------------------

static void test_errors(void **state) {
    (void)state;
    fixture f;
    fixture_open(&f);
    dlp_plan *p = make_plan(&f, 1);
    // a hook that fails after the backward: the update never runs
    seen s = {.fail_at = DLP_STEP_BACKWARD};
    dlp_step_cfg cfg = {.plan = p, .train = 1, .after_phase = record, .hook_ctx = &s};
    dlp_step_batch b = {.input = f.input, .n = BATCH, .labels = f.labels, .sgd = k_sgd};
    dlp_step_result r;
    assert_int_equal(dlp_step_run(&cfg, &b, -1, &r), DLP_ERR_INTERNAL);
    assert_non_null(strstr(dlp_err_msg(), "hook refused phase backward"));
    assert_int_equal(s.n, DLP_STEP_BACKWARD + 1);
    float *now = malloc((size_t)f.net.param_count * 4);
    assert_int_equal(dlp_plan_get_params(p, now, NULL), DLP_OK);
    assert_memory_equal(now, f.params, (size_t)f.net.param_count * 4);
    free(now);

    // a phase's own error, named
    int32_t bad[BATCH] = {0, CLASSES + 3};
    cfg.after_phase = NULL;
    b.labels = bad;
    assert_int_not_equal(dlp_step_run(&cfg, &b, -1, &r), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "outside [0, 4)"));
    dlp_err_clear();

    // a non-finite loss stops the bench
    b.labels = f.labels;
    for (int64_t i = 0; i < f.net.param_count; i++) f.params[i] = NAN;
    assert_int_equal(dlp_plan_set_params(p, f.params, f.bufs), DLP_OK);
    dlp_step_bench_result br;
    const dlp_step_bench_cfg bc = {.warmup = 0, .min_steps = 2};
    assert_int_equal(dlp_step_bench(&cfg, &b, &bc, &br), DLP_ERR_NUMERIC);
    assert_non_null(strstr(dlp_err_msg(), "loss is nan at step 0"));
    assert_null(br.ms);
    dlp_err_clear();
    const dlp_step_bench_cfg bad_cfg = {.warmup = -1, .min_steps = 1};
    assert_int_equal(dlp_step_bench(&cfg, &b, &bad_cfg, &br), DLP_ERR_INVALID);
    dlp_err_clear();
    dlp_plan_free(p);
    fixture_close(&f);
}

// ---- the bench ------------------------------------------------------------------------------------------------

static void test_bench_host_clock(void **state) {
    (void)state;
    fixture f;
    fixture_open(&f);
    dlp_plan *p = make_plan(&f, 1);
    const dlp_step_cfg cfg = {.plan = p, .train = 1, .sync_phases = 1};
    const dlp_step_batch b = {.input = f.input, .n = BATCH, .labels = f.labels, .sgd = k_sgd};
    const dlp_step_bench_cfg bc = {.warmup = 1, .min_steps = 3, .max_steps = 3};
    dlp_step_bench_result br;
    assert_int_equal(dlp_step_bench(&cfg, &b, &bc, &br), DLP_OK);
    assert_int_equal(br.steps, 3);
    double sum = 0;
    for (int p2 = 0; p2 < DLP_STEP_NPHASES; p2++) {
        const dlp_step_stats *s = &br.phase[p2];
        assert_true(s->p10_ms <= s->p50_ms && s->p50_ms <= s->p90_ms);
        sum += s->mean_ms;
    }
    assert_true(br.phase[DLP_STEP_FORWARD].mean_ms > 0 && br.phase[DLP_STEP_BACKWARD].mean_ms > 0);
    assert_true(fabs(br.step.mean_ms - sum) <= 1e-9 * br.step.mean_ms + 1e-9);  // chained phases
    assert_true(br.wall_s >= 3 * br.step.mean_ms * 1e-3 * 0.999);
    assert_true(isfinite(br.loss_first) && isfinite(br.loss_last) && br.loss_first != br.loss_last);
    // the rows hold each step's phases and its whole time
    for (int i = 0; i < br.steps; i++) {
        const double *row = br.ms + (size_t)i * (DLP_STEP_NPHASES + 1);
        double t = 0;
        for (int p2 = 0; p2 < DLP_STEP_NPHASES; p2++) t += row[p2];
        assert_true(fabs(t - row[DLP_STEP_NPHASES]) <= 1e-6);
    }
    dlp_step_bench_free(&br);
    assert_null(br.ms);

    // min_s keeps stepping past min_steps, up to max_steps
    const dlp_step_bench_cfg timed = {.warmup = 0, .min_steps = 1, .max_steps = 4, .min_s = 1e6};
    assert_int_equal(dlp_step_bench(&cfg, &b, &timed, &br), DLP_OK);
    assert_int_equal(br.steps, 4);
    dlp_step_bench_free(&br);
    dlp_plan_free(p);
    fixture_close(&f);
}

// A timer that hands out fixed times: phase p of every step took p + 1 ms, the step 100 ms.
typedef struct fake_timer {
    int marks, bad;
} fake_timer;

static dlp_status fake_mark(void *ctx, int step, int boundary) {
    fake_timer *t = ctx;
    if (step < 0 || boundary < 0 || boundary > DLP_STEP_NPHASES) t->bad++;
    t->marks++;
    return DLP_OK;
}

static dlp_status fake_read(void *ctx, int step, double *phase_ms, double *step_ms) {
    for (int p = 0; p < DLP_STEP_NPHASES; p++) phase_ms[p] = p + 1;
    *step_ms = 100;
    return DLP_OK;
}

static void test_bench_timer(void **state) {
    (void)state;
    fixture f;
    fixture_open(&f);
    dlp_plan *p = make_plan(&f, 0);
    fake_timer ft = {0};
    const dlp_step_timer timer = {&ft, fake_mark, fake_read};
    const dlp_step_cfg cfg = {.plan = p, .train = 0, .timer = &timer};
    const dlp_step_batch b = {.input = f.input, .n = BATCH};
    const dlp_step_bench_cfg bc = {.warmup = 2, .min_steps = 3};
    dlp_step_bench_result br;
    assert_int_equal(dlp_step_bench(&cfg, &b, &bc, &br), DLP_OK);
    assert_int_equal(br.steps, 3);
    assert_int_equal(ft.marks, 3 * (DLP_STEP_NPHASES + 1));  // every boundary of the timed steps, none in warm-up
    assert_int_equal(ft.bad, 0);
    for (int p2 = 0; p2 < DLP_STEP_NPHASES; p2++) {
        assert_true(br.phase[p2].p50_ms == p2 + 1 && br.phase[p2].mean_ms == p2 + 1);
        assert_true(br.phase[p2].p10_ms == p2 + 1 && br.phase[p2].p90_ms == p2 + 1);
    }
    assert_true(br.step.p50_ms == 100 && br.step.mean_ms == 100);
    dlp_step_bench_free(&br);
    dlp_plan_free(p);
    fixture_close(&f);
}

// ---- the local communicator ---------------------------------------------------------------------------------

static void test_comm_local(void **state) {
    (void)state;
    dlp_comm *c = NULL;
    assert_int_equal(dlp_comm_open("auto", &c), DLP_OK);  // not started by a launcher: one process
    assert_string_equal(dlp_comm_name(c), "local");
    assert_int_equal(dlp_comm_rank(c), 0);
    assert_int_equal(dlp_comm_size(c), 1);
    assert_int_equal(dlp_comm_local_rank(c), 0);
    float g[5] = {1, -2, 3.5f, 0, 1e-3f}, keep[5];
    memcpy(keep, g, sizeof g);
    dlp_comm_req *req = (dlp_comm_req *)1;
    assert_int_equal(dlp_comm_allreduce_start(c, g, 5, NULL, &req), DLP_OK);
    assert_null(req);
    assert_int_equal(dlp_comm_wait(c, req), DLP_OK);
    assert_int_equal(dlp_comm_allreduce(c, g, 5, NULL), DLP_OK);
    assert_memory_equal(g, keep, sizeof g);  // the mean over one rank
    assert_int_equal(dlp_comm_broadcast(c, g, sizeof g, 0), DLP_OK);
    assert_int_equal(dlp_comm_barrier(c), DLP_OK);
    assert_int_equal(dlp_comm_broadcast(c, g, sizeof g, 1), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "rank 1 of 1"));
    assert_int_equal(dlp_comm_allreduce(c, g, -1, NULL), DLP_ERR_INVALID);
    dlp_err_clear();
    dlp_comm_free(c);
    dlp_comm_free(NULL);

    assert_non_null(strstr(dlp_comm_kinds(), "local"));
    assert_int_equal(dlp_comm_open(NULL, &c), DLP_OK);  // no kind: auto
    dlp_comm_free(c);
    assert_int_equal(dlp_comm_open("carrier-pigeon", &c), DLP_ERR_INVALID);
    assert_null(c);
    assert_non_null(strstr(dlp_err_msg(), "--dist carrier-pigeon: unknown communicator"));
    if (!strstr(dlp_comm_kinds(), "nccl")) {
        assert_int_equal(dlp_comm_open("nccl", &c), DLP_ERR_UNSUPPORTED);
        assert_non_null(strstr(dlp_err_msg(), "this build has no nccl communicator"));
    }
    dlp_err_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phase_order),   cmocka_unit_test(test_same_as_by_hand),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_bench_host_clock),
        cmocka_unit_test(test_bench_timer),   cmocka_unit_test(test_comm_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
