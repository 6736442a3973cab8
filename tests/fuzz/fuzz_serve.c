// tests/fuzz/fuzz_serve: a request body on the serve path, in process — what server_mhd.c does with a complete
// POST body (empty -> 400, no SOI marker -> 400), then serve/pipeline (admission, a preprocess worker, the
// batcher) with the real single-image val transform (data/transform's dlp_transform_jpeg, at 16x16) as the
// preprocess and a tiny fake classifier as the engine, and the answer's JSON (serve/response.c), which must parse as JSON.
// The HTTP parsing itself (headers, content type, chunking, limits) is fuzz_http's: the real server on loopback.
// Also defines dlp_fuzz_serve_parts (the fake engine and preprocess both harnesses use).
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "core/clock.h"
#include "data/transform.h"
#include "fuzz.h"
#include "serve/pipeline.h"
#include "serve/serve.h"

#define NCLASS 10
#define OUT 16

static dlp_status fake_infer(void *ctx, const void *batch, int n, float *logits) {
    const float *in = batch;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < NCLASS; k++) logits[i * NCLASS + k] = in[(size_t)i * 3 * OUT * OUT + k * 7] * (float)(k + 1);
    return DLP_OK;
}

static dlp_transform g_t;
static dlp_status pre_run(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    return dlp_transform_jpeg(&g_t, jpeg, len, dst);
}

static dlp_serve_engine g_engine;
static dlp_serve_preprocess g_pre;
static dlp_serve_metrics g_metrics;
static dlp_serve_cfg g_cfg;
static dlp_serve_pipeline *g_pipe;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static void on_done(dlp_serve_req *r) {
    pthread_mutex_lock(&g_mu);
    *(int *)r->user = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static void shutdown_pipe(void) {
    if (g_pipe) dlp_serve_pipeline_free(g_pipe);
    g_pipe = NULL;
}

void dlp_fuzz_serve_parts(dlp_serve_cfg *cfg, const dlp_serve_engine **engine, const dlp_serve_preprocess **pre) {
    static int ready;
    if (!ready) {
        dlp_transform_defaults(&g_t, DLP_XFORM_VAL);
        g_t.out_w = g_t.out_h = OUT;
        g_t.resize_short = 0;
        g_t.limits.max_side = 2048;
        g_t.limits.max_pixels = (int64_t)1 << 20;
        g_engine = (dlp_serve_engine){"fuzz", NULL, 2, dlp_transform_sample_bytes(&g_t), NCLASS, fake_infer};
        g_pre = (dlp_serve_preprocess){"fuzz", NULL, pre_run, 3, OUT, OUT, (int)g_t.layout, (int)g_t.dtype};
        ready = 1;
    }
    dlp_serve_cfg_default(cfg);
    cfg->max_batch = 2;
    cfg->workers = 1;
    cfg->queue_capacity = 4;
    cfg->max_delay_ns = 100000;
    cfg->timeout_ns = (int64_t)10 * 1000000000;
    cfg->topk = 3;
    *engine = &g_engine;
    *pre = &g_pre;
}

static void start(void) {
    const dlp_serve_engine *e;
    const dlp_serve_preprocess *p;
    dlp_fuzz_serve_parts(&g_cfg, &e, &p);
    dlp_serve_metrics_init(&g_metrics, g_cfg.max_batch);
    DLP_FUZZ_CHECK(dlp_serve_cfg_check(&g_cfg, e) == DLP_OK);
    DLP_FUZZ_CHECK(dlp_serve_pipeline_create(&g_cfg, e, p, &g_metrics, &g_pipe) == DLP_OK);
    atexit(shutdown_pipe);
}

static void check_json(char *body, size_t len, int status) {
    DLP_FUZZ_CHECK(body != NULL);
    json_error_t e;
    json_t *o = json_loadb(body, len, 0, &e);
    DLP_FUZZ_CHECK(o != NULL && json_is_object(o));
    if (status == 200) DLP_FUZZ_CHECK(json_is_array(json_object_get(o, "top3")));  // "top<k>", k = cfg.topk
    else DLP_FUZZ_CHECK(json_is_string(json_object_get(o, "error")));
    json_decref(o);
    free(body);
}

int dlp_fuzz_serve(const uint8_t *data, size_t size) {
    size_t len = 0;
    char *answer;
    if (size == 0 || !dlp_serve_is_jpeg(data, size)) {  // server_mhd.c's checks before the pipeline
        answer = dlp_serve_error_json(400, size ? "not a JPEG" : "empty body", &len);
        check_json(answer, len, 400);
        return 0;
    }
    if (!g_pipe) start();
    uint8_t *body = malloc(size);  // exactly the body: ASan sees reads past it
    DLP_FUZZ_CHECK(body != NULL);
    memcpy(body, data, size);
    int done = 0;
    dlp_serve_req r;
    memset(&r, 0, sizeof r);
    r.body = body;
    r.len = size;
    r.t_arrival_ns = dlp_now_ns();
    r.deadline_ns = 0;
    r.done = on_done;
    r.user = &done;
    DLP_FUZZ_CHECK(dlp_serve_pipeline_submit(g_pipe, &r) == DLP_OK);  // one at a time: never full
    pthread_mutex_lock(&g_mu);
    while (!done) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    DLP_FUZZ_CHECK(r.status == 200 || r.status == 400 || r.status == 415);
    if (r.status == 200) {
        DLP_FUZZ_CHECK(r.ntop == g_cfg.topk);
        for (int i = 0; i < r.ntop; i++) DLP_FUZZ_CHECK(r.top_class[i] >= 0 && r.top_class[i] < NCLASS);
    }
    answer = dlp_serve_answer_json(&r, NULL, 0, &len);
    check_json(answer, len, r.status);
    free(body);
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_serve)
