// Unit tests for serve/ without HTTP: softmax top-k, labels, the SOI check, and the request pipeline —
// dynamic batching (by size and by delay), every request getting its own answer, the bounded queue (busy),
// deadlines (504 without running), decode errors (400), draining, and the Prometheus rendering.
// The engine and preprocess are the test double of serve_fake.c.
// Main file: src/serve/pipeline.c; also src/serve/topk.c, labels.c, metrics.c, engine_plan.c, ladder.c,
// config.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "backend/backend.h"
#include "core/stats.h"
#include "core/clock.h"
#include "core/rng.h"
#include "run/infer.h"
#include "serve/pipeline.h"
#include "serve_fake.h"
#include "testutil.h"

#define MS 1000000LL

static void test_topk(void **state) {
    (void)state;
    float l[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    int c[5];
    float p[5];
    dlp_stats_topk(l, 6, 5, c, p);
    int want[5] = {1, 3, 2, 0, 5};  // the tie 3.0 keeps the lower index first
    assert_memory_equal(c, want, sizeof want);
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(l[i]);
    for (int i = 0; i < 5; i++) assert_true(fabs(p[i] - exp(l[c[i]]) / z) < 1e-6);
    assert_true(p[0] == p[1] && p[1] > p[2]);
    // Large logits do not overflow (max subtracted); k larger than n pads with -1.
    float big[3] = {1000.0f, 999.0f, -1000.0f};
    int c2[4];
    float p2[4];
    dlp_stats_topk(big, 3, 4, c2, p2);
    assert_int_equal(c2[0], 0);
    assert_int_equal(c2[2], 2);
    assert_true(fabs(p2[0] - 1 / (1 + exp(-1.0))) < 1e-6);
    assert_false(isnan(p2[0]));
    // is_jpeg: SOI FF D8 FF at the start, nothing else.
    const uint8_t j[] = {0xFF, 0xD8, 0xFF, 0xE0}, png[] = {0x89, 'P', 'N', 'G'}, shortj[] = {0xFF, 0xD8};
    assert_true(dlp_serve_is_jpeg(j, 4));
    assert_false(dlp_serve_is_jpeg(png, 4));
    assert_false(dlp_serve_is_jpeg(shortj, 2));
    assert_false(dlp_serve_is_jpeg(j, 0));
}

static void test_labels(void **state) {
    (void)state;
    char dir[256], path[300];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    FILE *f = fopen(path, "wb");
    fputs("tench\r\ngoldfish\n\ngreat white shark", f);
    fclose(f);
    char **l;
    int n;
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_OK);
    assert_int_equal(n, 4);
    assert_string_equal(l[0], "tench");
    assert_string_equal(l[1], "goldfish");
    assert_string_equal(l[2], "");
    assert_string_equal(l[3], "great white shark");
    dlp_infer_labels_free(l, n);
    f = fopen(path, "wb");
    fclose(f);
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "empty"));
    f = fopen(path, "wb");
    fwrite("a\0b\n", 1, 4, f);
    fclose(f);
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_ERR_FORMAT);
    snprintf(path, sizeof path, "%s/missing.txt", dir);
    assert_int_not_equal(dlp_infer_labels_load(path, &l, &n), DLP_OK);
    dlp_err_clear();
    dlp_test_rmtree(dir);
}

// A request the test waits on.
typedef struct treq {
    dlp_serve_req r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int64_t t_done;
} treq;

static void on_done(dlp_serve_req *r) {
    treq *t = r->user;
    pthread_mutex_lock(&t->mu);
    t->done = 1;
    t->t_done = dlp_now_ns();
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void treq_init(treq *t, const uint8_t *body, size_t len, int64_t timeout_ns) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->r.body = body;
    t->r.len = len;
    t->r.t_arrival_ns = dlp_now_ns();
    t->r.deadline_ns = timeout_ns > 0 ? t->r.t_arrival_ns + timeout_ns : 0;
    t->r.done = on_done;
    t->r.user = t;
}

static void treq_wait(treq *t) {
    pthread_mutex_lock(&t->mu);
    while (!t->done) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static void treq_destroy(treq *t) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

typedef struct fixture {
    fake_engine fe;
    dlp_serve_engine eng;
    dlp_serve_preprocess pre;
    dlp_serve_metrics m;
    dlp_serve_pipeline *p;
    dlp_serve_cfg cfg;
} fixture;

static void fx_start(fixture *fx, int max_batch, int64_t max_delay_ns, int queue, int64_t base_ns) {
    fake_engine_init(&fx->fe, max_batch, base_ns, 0);
    fx->eng = fake_engine_iface(&fx->fe);
    fx->pre = fake_preprocess_iface();
    dlp_serve_cfg_default(&fx->cfg);
    fx->cfg.max_batch = max_batch;
    fx->cfg.max_delay_ns = max_delay_ns;
    fx->cfg.queue_capacity = queue;
    fx->cfg.workers = 2;
    dlp_serve_metrics_init(&fx->m, max_batch);
    assert_int_equal(dlp_serve_pipeline_create(&fx->cfg, &fx->eng, &fx->pre, &fx->m, &fx->p), DLP_OK);
}

static void fx_stop(fixture *fx) {
    dlp_serve_pipeline_free(fx->p);
    fake_engine_destroy(&fx->fe);
}

static void test_batch_by_size_and_answers(void **state) {
    (void)state;
    // 16 distinct images at once, max batch 8, a long max delay: exactly two full batches, and each request
    // gets the answer for its own image (the batch's rows are not mixed up).
    fixture fx;
    fx_start(&fx, 8, 1000 * MS, 32, 5 * MS);
    fake_engine_gate(&fx.fe, 1);  // hold the engine until all 16 are queued
    enum { N = 16 };
    uint8_t *jp[N];
    size_t jl[N];
    treq t[N];
    for (int i = 0; i < N; i++) {
        fake_make_jpeg((uint64_t)i + 1, 64 + 8 * i, 48 + 4 * i, 90, &jp[i], &jl[i]);
        treq_init(&t[i], jp[i], jl[i], 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[i].r), DLP_OK);
    }
    int admitted, waiting;
    dlp_serve_pipeline_depth(fx.p, &admitted, &waiting);
    assert_int_equal(admitted, N);
    fake_engine_gate(&fx.fe, 0);
    for (int i = 0; i < N; i++) treq_wait(&t[i]);
    assert_int_equal(fx.fe.samples, N);
    // The first batch may have closed with fewer than 8 only if it formed while requests were still being
    // decoded; with the gate closed it filled up first. Either way no batch exceeds 8 and all 16 ran.
    for (int b = 9; b <= 256; b++) assert_int_equal(fx.fe.batch_hist[b], 0);
    assert_true(fx.fe.calls >= 2 && fx.fe.calls <= 3);
    for (int i = 0; i < N; i++) {
        assert_int_equal(t[i].r.status, 200);
        int c[5];
        float p[5];
        assert_int_equal(fake_classify(jp[i], jl[i], 5, c, p), 0);
        assert_int_equal(t[i].r.ntop, 5);
        assert_memory_equal(t[i].r.top_class, c, sizeof c);
        for (int k = 0; k < 5; k++) assert_true(fabs(t[i].r.top_prob[k] - p[k]) < 1e-6);
        assert_true(t[i].r.batch_size >= 1 && t[i].r.batch_size <= 8);
    }
    // Distinct images give distinct answers (the double is not constant).
    assert_memory_not_equal(t[0].r.top_class, t[1].r.top_class, 5 * sizeof(int));
    assert_int_equal(atomic_load(&fx.m.images_total), N);
    for (int i = 0; i < N; i++) {
        treq_destroy(&t[i]);
        free(jp[i]);
    }
    fx_stop(&fx);
}

static void test_batch_by_delay(void **state) {
    (void)state;
    // 3 requests, max batch 8, max delay 40 ms: one batch of 3, closed by the delay (not before ~40 ms).
    fixture fx;
    fx_start(&fx, 8, 40 * MS, 16, 0);
    uint8_t *jp;
    size_t jl;
    fake_make_jpeg(9, 64, 64, 90, &jp, &jl);
    treq t[3];
    int64_t t0 = dlp_now_ns();
    for (int i = 0; i < 3; i++) {
        treq_init(&t[i], jp, jl, 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[i].r), DLP_OK);
    }
    for (int i = 0; i < 3; i++) treq_wait(&t[i]);
    assert_int_equal(fx.fe.calls, 1);
    assert_int_equal(fx.fe.batch_hist[3], 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t[i].r.batch_size, 3);
        assert_true(t[i].t_done - t0 >= 38 * MS);
    }
    // max delay 0: no waiting — a lone request runs at once.
    fx_stop(&fx);
    fx_start(&fx, 8, 0, 16, 0);
    treq one;
    treq_init(&one, jp, jl, 0);
    t0 = dlp_now_ns();
    assert_int_equal(dlp_serve_pipeline_submit(fx.p, &one.r), DLP_OK);
    treq_wait(&one);
    assert_int_equal(one.r.status, 200);
    assert_int_equal(one.r.batch_size, 1);
    assert_true(one.t_done - t0 < 30 * MS || one.t_done - t0 < 200 * MS);  // no batching delay (loose: busy box)
    for (int i = 0; i < 3; i++) treq_destroy(&t[i]);
    treq_destroy(&one);
    free(jp);
    fx_stop(&fx);
}

static void test_queue_full_and_deadline(void **state) {
    (void)state;
    fixture fx;
    fx_start(&fx, 2, 0, 4, 0);
    uint8_t *jp;
    size_t jl;
    fake_make_jpeg(3, 64, 64, 90, &jp, &jl);
    fake_engine_gate(&fx.fe, 1);
    // Capacity 4: the 5th is refused (busy), nothing else is lost.
    treq t[5];
    for (int i = 0; i < 4; i++) {
        treq_init(&t[i], jp, jl, i < 2 ? 0 : 100 * MS);  // the last two expire in 100 ms
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[i].r), DLP_OK);
        // the stuck batch must hold only the first two (two workers may finish decoding out of order, and a
        // batch may close with one): the expiring ones come once the engine holds it
        if (i == 1) assert_true(fake_engine_wait_entered(&fx.fe, 1));
    }
    treq_init(&t[4], jp, jl, 0);
    assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[4].r), DLP_ERR_BUSY);
    // The first batch (2) is stuck in the engine; the other two wait past their deadline -> 504, not run.
    dlp_sleep_ns(20 * MS);
    treq_wait(&t[2]);
    treq_wait(&t[3]);
    assert_int_equal(t[2].r.status, 504);
    assert_int_equal(t[3].r.status, 504);
    assert_non_null(strstr(t[2].r.error, "deadline"));
    assert_true(t[2].t_done - t[2].r.t_arrival_ns >= 99 * MS);
    assert_true(t[2].t_done - t[2].r.t_arrival_ns < 1000 * MS);  // answered on time, not after the stuck batch
    fake_engine_gate(&fx.fe, 0);
    treq_wait(&t[0]);
    treq_wait(&t[1]);
    assert_int_equal(t[0].r.status, 200);
    assert_int_equal(fx.fe.samples, 2);  // the expired ones never ran
    // Slots came back: 4 more fit again.
    treq u[4];
    for (int i = 0; i < 4; i++) {
        treq_init(&u[i], jp, jl, 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &u[i].r), DLP_OK);
    }
    for (int i = 0; i < 4; i++) {
        treq_wait(&u[i]);
        assert_int_equal(u[i].r.status, 200);
        treq_destroy(&u[i]);
    }
    for (int i = 0; i < 5; i++) treq_destroy(&t[i]);
    free(jp);
    fx_stop(&fx);
}

static void test_decode_errors(void **state) {
    (void)state;
    fixture fx;
    fx_start(&fx, 4, 0, 8, 0);
    uint8_t *jp;
    size_t jl;
    fake_make_jpeg(5, 96, 64, 90, &jp, &jl);
    // Corrupt: SOI then garbage; truncated: the first 60%; a flipped byte inside the header.
    uint8_t garbage[64] = {0xFF, 0xD8, 0xFF};
    for (int i = 3; i < 64; i++) garbage[i] = (uint8_t)(i * 37);
    uint8_t *bad = malloc(jl);
    memcpy(bad, jp, jl);
    bad[3] ^= 0xFF;  // APP0 marker -> junk marker
    struct { const uint8_t *b; size_t n; } cases[] = {{garbage, sizeof garbage}, {jp, jl * 6 / 10}, {bad, jl}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        treq t;
        treq_init(&t, cases[i].b, cases[i].n, 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t.r), DLP_OK);
        treq_wait(&t);
        fprintf(stderr, "  case %zu: %d %s\n", i, t.r.status, t.r.error);
        assert_int_equal(t.r.status, 400);
        assert_non_null(strstr(t.r.error, "JPEG"));
        treq_destroy(&t);
    }
    assert_int_equal(fx.fe.samples, 0);
    free(bad);
    free(jp);
    fx_stop(&fx);
}

static void test_drain(void **state) {
    (void)state;
    // Draining finishes everything admitted (slow engine: 30 ms per batch of up to 2), refuses new ones.
    fixture fx;
    fx_start(&fx, 2, 1000 * MS, 16, 30 * MS);
    uint8_t *jp;
    size_t jl;
    fake_make_jpeg(11, 64, 64, 90, &jp, &jl);
    treq t[10];
    for (int i = 0; i < 10; i++) {
        treq_init(&t[i], jp, jl, 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[i].r), DLP_OK);
    }
    assert_int_equal(dlp_serve_pipeline_drain(fx.p, 10000 * MS), DLP_OK);
    for (int i = 0; i < 10; i++) {
        assert_true(t[i].done);
        assert_int_equal(t[i].r.status, 200);
    }
    treq late;
    treq_init(&late, jp, jl, 0);
    assert_int_equal(dlp_serve_pipeline_submit(fx.p, &late.r), DLP_ERR_CANCELLED);
    fx_stop(&fx);
    // A drain timeout shorter than the work: the running batch finishes, the queued ones get 503.
    fx_start(&fx, 2, 0, 16, 100 * MS);
    for (int i = 0; i < 10; i++) {
        treq_destroy(&t[i]);
        treq_init(&t[i], jp, jl, 0);
        assert_int_equal(dlp_serve_pipeline_submit(fx.p, &t[i].r), DLP_OK);
    }
    dlp_sleep_ns(20 * MS);
    assert_int_equal(dlp_serve_pipeline_drain(fx.p, 150 * MS), DLP_ERR_TIMEOUT);
    dlp_err_clear();
    int ok = 0, unavailable = 0;
    for (int i = 0; i < 10; i++) {
        assert_true(t[i].done);
        ok += t[i].r.status == 200;
        unavailable += t[i].r.status == 503;
    }
    assert_int_equal(ok + unavailable, 10);
    assert_true(ok >= 2 && ok <= 6);
    assert_int_equal(ok, fx.fe.samples);
    for (int i = 0; i < 10; i++) treq_destroy(&t[i]);
    treq_destroy(&late);
    free(jp);
    fx_stop(&fx);
}

// A test-only preprocess for a real backend: decode with libjpeg and average the image down to 3 x 8 x 8 fp32
// (NCHW), the input of the tiny net below. (The data module's val transform does this for 224 x 224.)
static dlp_status tiny_pre(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    (void)ctx, (void)worker;
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, jpeg, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);  // the bodies here are valid: libjpeg's default error handling is fine
    ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    int w = (int)ci.output_width, h = (int)ci.output_height;
    uint8_t *row = malloc((size_t)w * 3);
    double acc[3 * 64] = {0};
    int cnt[64] = {0};
    while (ci.output_scanline < ci.output_height) {
        int y = (int)ci.output_scanline;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&ci, &rp, 1);
        for (int x = 0; x < w; x++) {
            int cell = (y * 8 / h) * 8 + x * 8 / w;
            for (int c = 0; c < 3; c++) acc[c * 64 + cell] += row[x * 3 + c] / 255.0;
            cnt[cell]++;
        }
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    float *o = dst;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 64; i++) o[c * 64 + i] = (float)(acc[c * 64 + i] / (cnt[i] ? cnt[i] : 1) - 0.5);
    return DLP_OK;
}

// A tiny conv net (3x8x8 -> conv 6 -> ReLU -> global avgpool -> fc 20) and uniform(-1, 1) parameters drawn
// from rng seeded with seed (rng goes on from there); the caller frees the parameters.
static float *tiny_net(dlp_net *net, uint64_t seed, dlp_rng *rng) {
    assert_int_equal(dlp_net_init(net, "tiny", 3, 8, 8), DLP_OK);
    int l = dlp_net_conv(net, "conv1", 0, 6, 3, 1, 1);
    l = dlp_net_relu(net, l);
    l = dlp_net_avgpool(net, l);
    assert_true(dlp_net_fc(net, "fc", l, 20) > 0);
    float *params = malloc((size_t)net->param_count * sizeof(float));
    assert_non_null(params);
    dlp_rng_init(rng, seed, 0);
    for (int64_t i = 0; i < net->param_count; i++) params[i] = (float)dlp_rng_range(rng, -1, 1);
    return params;
}

static void test_engine_from_ref_plan(void **state) {
    (void)state;
    // The service over a real backend plan (ref, inference, batch 4) of a tiny conv net: every answer equals
    // a direct one-sample forward of the same plan, also for batches the batcher leaves partly empty.
    const dlp_backend *ops = dlp_backend_find("ref", NULL);
    assert_non_null(ops);
    dlp_net net;
    dlp_rng rng;
    float *params = tiny_net(&net, 5, &rng);
    dlp_plan_cfg pc = {.batch = 4, .train = 0, .precision = DLP_DTYPE_F32, .threads = 1};
    dlp_plan *plan;
    assert_int_equal(dlp_plan_create(ops, &net, &pc, &plan), DLP_OK);
    assert_int_equal(dlp_plan_set_params(plan, params, NULL), DLP_OK);
    dlp_serve_engine eng;
    assert_int_equal(dlp_serve_engine_from_plan(plan, &net, 4, &eng), DLP_OK);
    assert_int_equal(eng.num_classes, 20);
    assert_int_equal((int)eng.sample_bytes, 3 * 8 * 8 * 4);
    dlp_serve_preprocess pre = {.name = "tiny", .run = tiny_pre};
    dlp_serve_cfg cfg;
    dlp_serve_cfg_default(&cfg);
    cfg.max_batch = 4;
    cfg.max_delay_ns = 5 * MS;
    dlp_serve_metrics m;
    dlp_serve_metrics_init(&m, 4);
    dlp_serve_pipeline *p;
    assert_int_equal(dlp_serve_pipeline_create(&cfg, &eng, &pre, &m, &p), DLP_OK);
    enum { N = 10 };
    uint8_t *jp[N];
    size_t jl[N];
    treq t[N];
    for (int i = 0; i < N; i++) {
        fake_make_jpeg(40 + (uint64_t)i, 48, 40, 90, &jp[i], &jl[i]);
        treq_init(&t[i], jp[i], jl[i], 0);
        assert_int_equal(dlp_serve_pipeline_submit(p, &t[i].r), DLP_OK);
    }
    for (int i = 0; i < N; i++) treq_wait(&t[i]);
    dlp_serve_pipeline_free(p);  // the plan is ours again
    int partial = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(t[i].r.status, 200);
        partial += t[i].r.batch_size < 4;
        float x[192], logits[20];
        int c[5];
        float pr[5];
        assert_int_equal(tiny_pre(NULL, 0, jp[i], jl[i], x), DLP_OK);
        assert_int_equal(dlp_plan_set_input(plan, x, 1), DLP_OK);
        assert_int_equal(dlp_plan_forward(plan, DLP_PASS_EVAL), DLP_OK);
        assert_int_equal(dlp_plan_get_output(plan, logits), DLP_OK);
        dlp_stats_topk(logits, 20, 5, c, pr);
        assert_memory_equal(t[i].r.top_class, c, sizeof c);
        for (int k = 0; k < 5; k++) assert_true(fabs(t[i].r.top_prob[k] - pr[k]) < 1e-5);
        treq_destroy(&t[i]);
        free(jp[i]);
    }
    assert_true(partial > 0);  // 10 requests in batches of at most 4: at least one partial batch
    dlp_serve_engine_from_plan_free(&eng);
    dlp_plan_free(plan);
    free(params);
    dlp_net_free(&net);
}

static void test_engine_plan_ladder(void **state) {
    (void)state;
    // A ladder of plans (batches 1, 2, 4) of one net and weights: each call runs on the smallest plan that holds
    // its n samples, and its logits equal a batch-4 plan's for the same samples; malformed ladders are refused.
    const dlp_backend *ops = dlp_backend_find("ref", NULL);
    assert_non_null(ops);
    dlp_net net;
    dlp_rng rng;
    float *params = tiny_net(&net, 7, &rng);
    int batches[3] = {1, 2, 4};
    dlp_plan *plans[3], *big;
    for (int i = 0; i < 3; i++) {
        dlp_plan_cfg pc = {.batch = batches[i], .train = 0, .precision = DLP_DTYPE_F32, .threads = 1};
        assert_int_equal(dlp_plan_create(ops, &net, &pc, &plans[i]), DLP_OK);
        assert_int_equal(dlp_plan_set_params(plans[i], params, NULL), DLP_OK);
    }
    dlp_plan_cfg pc4 = {.batch = 4, .train = 0, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_plan_create(ops, &net, &pc4, &big), DLP_OK);
    assert_int_equal(dlp_plan_set_params(big, params, NULL), DLP_OK);
    dlp_serve_engine eng;
    assert_int_equal(dlp_serve_engine_from_plans(plans, batches, 3, &net, &eng), DLP_OK);
    assert_int_equal(eng.max_batch, 4);
    float x[4 * 192], got[4 * 20], want[4 * 20];
    for (int i = 0; i < 4 * 192; i++) x[i] = (float)dlp_rng_range(&rng, -1, 1);
    const int ns[5] = {1, 2, 3, 4, 1};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(eng.infer(eng.ctx, x, ns[k], got), DLP_OK);
        assert_int_equal(dlp_plan_set_input(big, x, ns[k]), DLP_OK);
        assert_int_equal(dlp_plan_forward(big, DLP_PASS_EVAL), DLP_OK);
        assert_int_equal(dlp_plan_get_output(big, want), DLP_OK);
        for (int i = 0; i < ns[k] * 20; i++) assert_true(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i])));
    }
    int b = 0;
    assert_int_equal(dlp_serve_engine_plan_calls(&eng, 0, &b), 2);  // n = 1 twice
    assert_int_equal(b, 1);
    assert_int_equal(dlp_serve_engine_plan_calls(&eng, 1, &b), 1);  // n = 2
    assert_int_equal(dlp_serve_engine_plan_calls(&eng, 2, &b), 2);  // n = 3 and 4
    assert_int_equal(b, 4);
    assert_int_equal(dlp_serve_engine_plan_calls(&eng, 3, &b), -1);
    dlp_serve_engine_from_plan_free(&eng);
    // refused: batches not ascending, no plans, a missing plan
    int bad[3] = {1, 4, 2};
    assert_int_equal(dlp_serve_engine_from_plans(plans, bad, 3, &net, &eng), DLP_ERR_INVALID);
    dlp_err_clear();
    assert_int_equal(dlp_serve_engine_from_plans(plans, batches, 0, &net, &eng), DLP_ERR_INVALID);
    dlp_err_clear();
    dlp_plan *holes[2] = {plans[0], NULL};
    assert_int_equal(dlp_serve_engine_from_plans(holes, batches, 2, &net, &eng), DLP_ERR_INVALID);
    dlp_err_clear();
    for (int i = 0; i < 3; i++) dlp_plan_free(plans[i]);
    dlp_plan_free(big);
    free(params);
    dlp_net_free(&net);
}

static void test_cfg_bounds(void **state) {
    (void)state;
    // Every queue and request is bounded: the checks refuse settings that would not be.
    fake_engine fe;
    fake_engine_init(&fe, 8, 0, 0);
    dlp_serve_engine e = fake_engine_iface(&fe);
    dlp_serve_cfg c;
    dlp_serve_cfg_default(&c);
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_OK);
    c.max_body_bytes = (int64_t)2 << 30;  // one body over 1 GiB
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "--max-body"));
    dlp_err_clear();
    c.max_body_bytes = (int64_t)512 << 20;  // 512 MiB x 256 connections: 128 GiB of bodies
    c.max_connections = 256;
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "32 GiB"));
    dlp_err_clear();
    c.max_connections = 16;  // 8 GiB: allowed
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_OK);
    dlp_serve_cfg_default(&c);
    c.queue_capacity = 0;
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_ERR_INVALID);
    dlp_err_clear();
    c.queue_capacity = 70000;
    assert_int_equal(dlp_serve_cfg_check(&c, &e), DLP_ERR_INVALID);
    dlp_err_clear();
    fake_engine_destroy(&fe);
}

static void test_metrics_render(void **state) {
    (void)state;
    dlp_serve_metrics m;
    dlp_serve_metrics_init(&m, 8);
    dlp_serve_metrics_request(&m, 200, 3 * MS);
    dlp_serve_metrics_request(&m, 200, 40 * MS);
    dlp_serve_metrics_request(&m, 503, 1 * MS / 2);
    dlp_serve_metrics_batch(&m, 3, 20 * MS);
    dlp_serve_gauges g = {.queue_depth = 2, .inflight = 3, .queue_capacity = 64, .connections = 5, .max_batch = 8};
    dlp_prom_buf b;
    dlp_prom_init(&b);
    dlp_serve_metrics_render(&m, &g, &b);
    assert_false(b.failed);
    const char *t = b.data;
    assert_non_null(strstr(t, "dlperf_serve_requests_total{code=\"200\"} 2\n"));
    assert_non_null(strstr(t, "dlperf_serve_requests_total{code=\"503\"} 1\n"));
    assert_non_null(strstr(t, "# TYPE dlperf_serve_request_duration_seconds histogram\n"));
    assert_non_null(strstr(t, "dlperf_serve_request_duration_seconds_bucket{le=\"0.001\"} 1\n"));
    assert_non_null(strstr(t, "dlperf_serve_request_duration_seconds_bucket{le=\"0.005\"} 2\n"));
    assert_non_null(strstr(t, "dlperf_serve_request_duration_seconds_bucket{le=\"0.05\"} 3\n"));
    assert_non_null(strstr(t, "dlperf_serve_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(t, "dlperf_serve_request_duration_seconds_count 3\n"));
    assert_non_null(strstr(t, "dlperf_serve_batch_size_bucket{le=\"2\"} 0\n"));
    assert_non_null(strstr(t, "dlperf_serve_batch_size_bucket{le=\"4\"} 1\n"));
    assert_non_null(strstr(t, "dlperf_serve_batch_size_sum 3\n"));
    assert_non_null(strstr(t, "dlperf_serve_queue_depth 2\n"));
    assert_non_null(strstr(t, "dlperf_serve_images_total 3\n"));
    dlp_prom_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_batch_by_size_and_answers),
        cmocka_unit_test(test_batch_by_delay),
        cmocka_unit_test(test_queue_full_and_deadline),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_engine_from_ref_plan),
        cmocka_unit_test(test_engine_plan_ladder),
        cmocka_unit_test(test_cfg_bounds),
        cmocka_unit_test(test_metrics_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
