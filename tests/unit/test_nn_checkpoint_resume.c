// A training run interrupted by a checkpoint and resumed in a new plan continues with exactly the same losses and
// weights as the uninterrupted run: what nn/checkpoint saves (parameters, BN statistics, momentum, position,
// schedule) is all a step depends on. The "loop" here draws each step's batch from the stream (seed, step), as a
// real loop draws its data order from (seed, epoch).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "testutil.h"

enum { BATCH = 2, SIZE = 32, CLASSES = 3, STEPS = 6, CUT = 3 };

typedef struct run {
    const dlp_backend *ops;
    dlp_net net;
    dlp_plan *plan;
    dlp_lr_schedule sched;
    dlp_train_pos pos;
    double loss[STEPS];
} run;

static void new_plan(run *r) {
    dlp_plan_cfg cfg = {.batch = BATCH, .train = 1, .precision = DLP_DTYPE_F32, .threads = 2};
    assert_int_equal(dlp_plan_create(r->ops, &r->net, &cfg, &r->plan), DLP_OK);
}

static void train_steps(run *r, int until) {
    float x[BATCH * 3 * SIZE * SIZE];
    int32_t y[BATCH];
    while (r->pos.step < until) {
        dlp_rng g;
        dlp_rng_init(&g, r->pos.seed, (uint64_t)r->pos.step);
        for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)dlp_rng_normal(&g);
        for (int i = 0; i < BATCH; i++) y[i] = (int32_t)dlp_rng_below(&g, CLASSES);
        dlp_loss_out lo;
        assert_int_equal(dlp_plan_set_input(r->plan, x, BATCH), DLP_OK);
        assert_int_equal(dlp_plan_forward(r->plan, DLP_PASS_TRAIN), DLP_OK);
        assert_int_equal(dlp_plan_loss(r->plan, y, 0.1f, &lo), DLP_OK);
        assert_int_equal(dlp_plan_backward(r->plan, NULL), DLP_OK);
        dlp_sgd hp = {.lr = (float)dlp_lr_at(&r->sched, r->pos.step), .momentum = 0.9f, .weight_decay = 5e-4f};
        assert_int_equal(dlp_plan_update(r->plan, &hp), DLP_OK);
        r->loss[r->pos.step] = lo.loss;
        r->pos.last_loss = lo.loss;
        r->pos.step++;
        r->pos.step_in_epoch++;
        r->pos.samples_seen += BATCH;
    }
}

static void run_init(run *r) {
    memset(r, 0, sizeof *r);
    r->ops = dlp_backend_find("ref", NULL);
    assert_non_null(r->ops);
    assert_int_equal(dlp_model_build("resnet-mini", CLASSES, SIZE, &r->net), DLP_OK);
    dlp_lr_schedule_default(&r->sched);
    r->sched.batch = BATCH;
    r->sched.base_lr = 12.8;  // peak 0.1 at batch 2
    r->sched.total_steps = STEPS;
    r->sched.warmup_steps = 2;
    r->pos.seed = 42;
}

static void test_resume_same_curve(void **state) {
    (void)state;
    char dir[512], ck_path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(ck_path, sizeof ck_path, "%s/ck.safetensors", dir);
    run a, b;
    run_init(&a);
    run_init(&b);
    const size_t pb = (size_t)a.net.param_count * sizeof(float), bb = (size_t)a.net.buf_count * sizeof(float);
    float *p = malloc(pb), *bufs = malloc(bb), *v = malloc(pb), *pa = malloc(pb), *pb2 = malloc(pb);
    float *ba = malloc(bb), *bb2 = malloc(bb);
    dlp_resnet_init_params(&a.net, a.pos.seed, 1, p, bufs);

    // uninterrupted
    new_plan(&a);
    assert_int_equal(dlp_plan_set_params(a.plan, p, bufs), DLP_OK);
    train_steps(&a, STEPS);
    assert_int_equal(dlp_plan_get_params(a.plan, pa, ba), DLP_OK);

    // interrupted at CUT: checkpoint, throw the plan away, resume in a new one
    new_plan(&b);
    assert_int_equal(dlp_plan_set_params(b.plan, p, bufs), DLP_OK);
    train_steps(&b, CUT);
    dlp_checkpoint ck = {.pos = b.pos, .sched = b.sched, .config = NULL};
    assert_int_equal(dlp_plan_get_params(b.plan, p, bufs), DLP_OK);
    assert_int_equal(dlp_plan_get_momentum(b.plan, v), DLP_OK);
    assert_int_equal(dlp_checkpoint_save(ck_path, &b.net, p, bufs, v, &ck), DLP_OK);
    dlp_plan_free(b.plan);
    memset(p, 0, pb);
    memset(v, 0, pb);
    memset(&b.pos, 0, sizeof b.pos);
    dlp_checkpoint back;
    assert_int_equal(dlp_checkpoint_load(ck_path, &b.net, p, bufs, v, 0, &back), DLP_OK);
    b.pos = back.pos;
    b.sched = back.sched;
    assert_int_equal(b.pos.step, CUT);
    assert_true(b.pos.last_loss == a.loss[CUT - 1]);
    new_plan(&b);
    assert_int_equal(dlp_plan_set_params(b.plan, p, bufs), DLP_OK);
    assert_int_equal(dlp_plan_set_momentum(b.plan, v), DLP_OK);
    train_steps(&b, STEPS);
    assert_int_equal(dlp_plan_get_params(b.plan, pb2, bb2), DLP_OK);

    for (int s = 0; s < STEPS; s++) {
        printf("step %d: loss %.9f / %.9f (lr %.4f)\n", s, a.loss[s], b.loss[s], dlp_lr_at(&a.sched, s));
        assert_true(a.loss[s] == b.loss[s]);
    }
    assert_true(a.loss[STEPS - 1] != a.loss[CUT]);  // it did train on
    assert_memory_equal(pa, pb2, pb);
    assert_memory_equal(ba, bb2, bb);
    dlp_plan_free(a.plan);
    dlp_plan_free(b.plan);
    dlp_checkpoint_free(&back);
    dlp_net_free(&a.net);
    dlp_net_free(&b.net);
    free(p);
    free(bufs);
    free(v);
    free(pa);
    free(pb2);
    free(ba);
    free(bb2);
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_same_curve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
