// serve/pipeline: admission -> preprocess workers -> dynamic batcher -> runner (engine) -> top-k.
//
// One mutex guards the queues and counters; nothing slow runs under it (preprocessing, inference and the
// done callbacks all run outside). Every admitted request owns one input slot of the engine's sample size,
// taken from a pool as large as the queue, so nothing is allocated per request after start.
// The batcher forms a batch only when the runner is free (so a batch takes everything that arrived while
// the previous one ran, up to max_batch) and meanwhile watches deadlines: a request that expires while
// waiting — for a worker or behind a long batch — is answered 504 at its deadline, without being run.
#include "serve/pipeline.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "data/jpeg.h"
#include "monitor/monitor.h"

struct dlp_serve_pipeline {
    dlp_serve_cfg cfg;
    const dlp_serve_engine *engine;
    const dlp_serve_preprocess *pre;
    dlp_serve_metrics *metrics;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;   // workers: decode queue not empty, or stop
    pthread_cond_t batch_cv;  // batcher: ready queue changed, runner free, or stop/drain
    pthread_cond_t run_cv;    // runner: a batch was handed over, or stop
    pthread_cond_t idle_cv;   // drain: admitted reached 0
    dlp_serve_req *dq_head, *dq_tail;  // waiting for a preprocess worker
    dlp_serve_req *rq_head, *rq_tail;  // preprocessed, waiting for a batch
    int dq_len, rq_len, decoding, admitted;
    int draining, cutoff, stop;
    int *free_slots;
    int nfree;

    uint8_t *slots;        // queue_capacity * sample_bytes
    uint8_t *batch;        // max_batch * sample_bytes
    float *logits;         // max_batch * num_classes
    dlp_serve_req **running;  // the batch handed to the runner
    int running_n;            // > 0 while the runner has a batch
    pthread_t batcher, runner;
    int runner_started;
    pthread_t *workers;
    struct worker_arg *wargs;
    int nworkers;
    int batcher_started;
};

typedef struct worker_arg {
    dlp_serve_pipeline *p;
    int index;
} worker_arg;


static void push(dlp_serve_req **head, dlp_serve_req **tail, dlp_serve_req *r) {
    r->next = NULL;
    if (*tail) (*tail)->next = r;
    else *head = r;
    *tail = r;
}

static dlp_serve_req *pop(dlp_serve_req **head, dlp_serve_req **tail) {
    dlp_serve_req *r = *head;
    if (r) {
        *head = r->next;
        if (!*head) *tail = NULL;
        r->next = NULL;
    }
    return r;
}

static void set_error(dlp_serve_req *r, int status, const char *msg) {
    r->status = status;
    snprintf(r->error, sizeof r->error, "%s", msg);
}

// Gives the slot back (admission depends on slots only), calls done outside the lock, then counts the
// request out: a drain that sees admitted reach 0 knows every done callback has returned.
static void finish(dlp_serve_pipeline *p, dlp_serve_req *r) {
    pthread_mutex_lock(&p->mu);
    p->free_slots[p->nfree++] = r->slot;
    pthread_mutex_unlock(&p->mu);
    r->slot = -1;
    r->done(r);  // the last touch of r
    pthread_mutex_lock(&p->mu);
    p->admitted--;
    if (p->admitted == 0) pthread_cond_broadcast(&p->idle_cv);
    pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    dlp_serve_pipeline *p = wa->p;
    size_t sb = p->engine->sample_bytes;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->dq_head && !p->stop) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        dlp_serve_req *r = pop(&p->dq_head, &p->dq_tail);
        p->dq_len--;
        p->decoding++;
        int cutoff = p->cutoff;
        pthread_mutex_unlock(&p->mu);

        int64_t now = dlp_now_ns();
        int ok = 0;
        if (cutoff) {
            set_error(r, 503, "the server is shutting down");
        } else if (r->deadline_ns > 0 && now > r->deadline_ns) {
            set_error(r, 504, "deadline exceeded while waiting to be decoded");
        } else if (r->kind == DLP_SERVE_IN_TENSOR) {
            char why[sizeof r->error];
            r->t_decode_start_ns = now;
            size_t need = (size_t)r->tensor.c * (size_t)r->tensor.h * (size_t)r->tensor.w * dlp_dtype_size(r->tensor.dtype);
            if (dlp_serve_tensor_check(&r->tensor, p->pre, why, sizeof why) != 0) {
                set_error(r, 400, why);
            } else if (r->len != need) {
                snprintf(why, sizeof why, "tensor data of %zu bytes: its shape and datatype need %zu", r->len, need);
                set_error(r, 400, why);
            } else {
                dlp_serve_tensor_convert(&r->tensor, r->body, p->pre, p->slots + (size_t)r->slot * sb);
                ok = 1;
            }
        } else {
            r->t_decode_start_ns = now;
            dlp_status st = p->pre->run(p->pre->ctx, wa->index, r->body, r->len, p->slots + (size_t)r->slot * sb);
            if (st == DLP_OK) {
                ok = 1;
            } else {
                int code = st == DLP_ERR_FORMAT ? 400 : st == DLP_ERR_UNSUPPORTED ? 415 : 500;
                const char *m = dlp_err_msg();
                set_error(r, code, m[0] ? m : dlp_status_str(st));
                if (code == 500) dlp_log_warn_limited("serve-pre", 5, "preprocessing failed: %s", r->error);
                dlp_err_clear();
            }
        }
        pthread_mutex_lock(&p->mu);
        p->decoding--;
        if (ok) {
            r->t_ready_ns = dlp_now_ns();
            dlp_serve_hist_observe(&p->metrics->decode_seconds, (double)(r->t_ready_ns - r->t_decode_start_ns) * 1e-9);
            push(&p->rq_head, &p->rq_tail, r);
            p->rq_len++;
            pthread_cond_signal(&p->batch_cv);
        }
        pthread_mutex_unlock(&p->mu);
        if (!ok) finish(p, r);
    }
    return NULL;
}

// Answers expired (or, when cutting off, all) requests of the ready queue. Under mu; the answered ones are
// chained into *out to be finished after unlocking.
static void take_expired(dlp_serve_pipeline *p, int64_t now, dlp_serve_req **out) {
    dlp_serve_req **pp = &p->rq_head, *prev = NULL;
    while (*pp) {
        dlp_serve_req *r = *pp;
        int expired = r->deadline_ns > 0 && now > r->deadline_ns;
        if (expired || p->cutoff) {
            *pp = r->next;
            if (p->rq_tail == r) p->rq_tail = prev;
            p->rq_len--;
            if (expired) set_error(r, 504, "deadline exceeded while waiting for a batch");
            else set_error(r, 503, "the server is shutting down");
            r->next = *out;
            *out = r;
        } else {
            prev = r;
            pp = &r->next;
        }
    }
}

static void run_batch(dlp_serve_pipeline *p, dlp_serve_req **rs, int n) {
    size_t sb = p->engine->sample_bytes;
    int nc = p->engine->num_classes;
    int64_t t0 = dlp_now_ns();
    for (int i = 0; i < n; i++) {
        memcpy(p->batch + (size_t)i * sb, p->slots + (size_t)rs[i]->slot * sb, sb);
        rs[i]->t_infer_start_ns = t0;
        rs[i]->batch_size = n;
        dlp_serve_hist_observe(&p->metrics->queue_seconds, (double)(t0 - rs[i]->t_arrival_ns) * 1e-9);
    }
    dlp_status st = p->engine->infer(p->engine->ctx, p->batch, n, p->logits);
    int64_t t1 = dlp_now_ns();
    dlp_serve_metrics_batch(p->metrics, n, t1 - t0);
    if (st == DLP_OK) dlp_monitor_count(p->cfg.monitor, DLP_MONITOR_IMAGES, n);
    if (st != DLP_OK) {
        char msg[200];
        snprintf(msg, sizeof msg, "inference failed: %s", dlp_err_msg());
        dlp_log_warn_limited("serve-infer", 5, "%s", msg);
        dlp_err_clear();
        for (int i = 0; i < n; i++) set_error(rs[i], 500, msg);
    } else {
        for (int i = 0; i < n; i++) {
            dlp_serve_req *r = rs[i];
            r->ntop = p->cfg.topk < nc ? p->cfg.topk : nc;
            dlp_stats_topk(p->logits + (size_t)i * nc, nc, r->ntop, r->top_class, r->top_prob);
            if (r->logits) memcpy(r->logits, p->logits + (size_t)i * nc, (size_t)nc * sizeof(float));
            r->status = 200;
        }
    }
    for (int i = 0; i < n; i++) {
        rs[i]->t_infer_end_ns = t1;
        finish(p, rs[i]);
    }
}

static void *runner_main(void *arg) {
    dlp_serve_pipeline *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->running_n == 0 && !p->stop) pthread_cond_wait(&p->run_cv, &p->mu);
        if (p->running_n == 0 && p->stop) break;
        int n = p->running_n;
        pthread_mutex_unlock(&p->mu);
        run_batch(p, p->running, n);
        pthread_mutex_lock(&p->mu);
        p->running_n = 0;
        pthread_cond_broadcast(&p->batch_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *batcher_main(void *arg) {
    dlp_serve_pipeline *p = arg;
    int mb = p->cfg.max_batch;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        dlp_serve_req *expired = NULL;
        int64_t now = dlp_now_ns();
        take_expired(p, now, &expired);
        if (expired) {
            pthread_mutex_unlock(&p->mu);
            while (expired) {
                dlp_serve_req *r = expired;
                expired = r->next;
                finish(p, r);
            }
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (p->stop) break;
        if (p->rq_len == 0) {
            pthread_cond_wait(&p->batch_cv, &p->mu);
            continue;
        }
        // A batch closes when full, when its oldest request has waited max_delay (since it was decoded), or
        // at once when draining; and only once the runner is free.
        int64_t close_at = p->rq_head->t_ready_ns + p->cfg.max_delay_ns;
        int can_close = p->rq_len >= mb || now >= close_at || p->draining;
        if (!can_close || p->running_n > 0) {
            int64_t until = can_close ? INT64_MAX : close_at;
            // Wake for the earliest deadline too, so an expiring request is answered on time.
            for (dlp_serve_req *r = p->rq_head; r; r = r->next)
                if (r->deadline_ns > 0 && r->deadline_ns + 1 < until) until = r->deadline_ns + 1;
            if (until == INT64_MAX) {
                pthread_cond_wait(&p->batch_cv, &p->mu);
            } else {
                struct timespec ts = {.tv_sec = until / 1000000000LL, .tv_nsec = until % 1000000000LL};
                pthread_cond_timedwait(&p->batch_cv, &p->mu, &ts);
            }
            continue;
        }
        int n = 0;
        while (n < mb && p->rq_head) {
            p->running[n++] = pop(&p->rq_head, &p->rq_tail);
            p->rq_len--;
        }
        p->running_n = n;
        pthread_cond_signal(&p->run_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dlp_status dlp_serve_pipeline_create(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine,
                                     const dlp_serve_preprocess *pre, dlp_serve_metrics *metrics,
                                     dlp_serve_pipeline **out) {
    *out = NULL;
    DLP_CHECK(dlp_serve_cfg_check(cfg, engine));
    if (!pre || !pre->run) return DLP_ERR(DLP_ERR_INVALID, "the service needs a preprocess function");
    if (pre->channels > 0 && (pre->height <= 0 || pre->width <= 0 || pre->dtype < 0 || pre->dtype >= DLP_DTYPE_COUNT ||
                              (size_t)pre->channels * (size_t)pre->height * (size_t)pre->width *
                                      dlp_dtype_size((dlp_dtype)pre->dtype) != engine->sample_bytes))
        return DLP_ERR(DLP_ERR_INVALID, "preprocess '%s' describes %dx%dx%d %s samples, the engine takes %zu bytes",
                       pre->name ? pre->name : "?", pre->channels, pre->height, pre->width,
                       dlp_dtype_name((dlp_dtype)pre->dtype), engine->sample_bytes);
    dlp_serve_pipeline *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->cfg = *cfg;
    p->engine = engine;
    p->pre = pre;
    p->metrics = metrics;
    size_t sb = engine->sample_bytes;
    p->slots = dlp_alloc_aligned((size_t)cfg->queue_capacity * sb);
    p->batch = dlp_alloc_aligned((size_t)cfg->max_batch * sb);
    p->logits = dlp_alloc_aligned((size_t)cfg->max_batch * (size_t)engine->num_classes * sizeof(float));
    p->running = calloc((size_t)cfg->max_batch, sizeof *p->running);
    p->free_slots = malloc((size_t)cfg->queue_capacity * sizeof *p->free_slots);
    p->workers = calloc((size_t)cfg->workers, sizeof *p->workers);
    worker_arg *wa = p->wargs = calloc((size_t)cfg->workers, sizeof *wa);
    if (!p->slots || !p->batch || !p->logits || !p->running || !p->free_slots || !p->workers || !wa) {
        dlp_serve_pipeline_free(p);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the request pipeline (%d slots of %zu bytes)",
                       cfg->queue_capacity, sb);
    }
    for (int i = 0; i < cfg->queue_capacity; i++) p->free_slots[i] = cfg->queue_capacity - 1 - i;
    p->nfree = cfg->queue_capacity;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->run_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->batch_cv, &ca);
    pthread_cond_init(&p->idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < cfg->workers; i++) {
        wa[i].p = p;
        wa[i].index = i;
    }
    dlp_status st = DLP_OK;
    if (pthread_create(&p->runner, NULL, runner_main, p) != 0) st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start the runner");
    else p->runner_started = 1;
    if (st == DLP_OK && pthread_create(&p->batcher, NULL, batcher_main, p) != 0)
        st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start the batcher");
    else if (st == DLP_OK) p->batcher_started = 1;
    for (int i = 0; st == DLP_OK && i < cfg->workers; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, &wa[i]) != 0)
            st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start preprocess worker %d", i);
        else p->nworkers = i + 1;
    }
    if (st != DLP_OK) {
        dlp_serve_pipeline_free(p);
        return st;
    }
    *out = p;
    return DLP_OK;
}

dlp_status dlp_serve_pipeline_submit(dlp_serve_pipeline *p, dlp_serve_req *r) {
    pthread_mutex_lock(&p->mu);
    if (p->draining || p->stop) {
        pthread_mutex_unlock(&p->mu);
        return DLP_ERR_CANCELLED;
    }
    if (p->nfree == 0) {
        pthread_mutex_unlock(&p->mu);
        return DLP_ERR_BUSY;
    }
    r->slot = p->free_slots[--p->nfree];
    r->status = 0;
    r->error[0] = '\0';
    r->ntop = 0;
    r->batch_size = 0;
    r->t_decode_start_ns = r->t_ready_ns = r->t_infer_start_ns = r->t_infer_end_ns = 0;
    p->admitted++;
    push(&p->dq_head, &p->dq_tail, r);
    p->dq_len++;
    atomic_fetch_add(&p->metrics->admitted_total, 1);
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    return DLP_OK;
}

void dlp_serve_pipeline_depth(dlp_serve_pipeline *p, int *admitted, int *waiting) {
    pthread_mutex_lock(&p->mu);
    if (admitted) *admitted = p->admitted;
    if (waiting) *waiting = p->dq_len + p->decoding + p->rq_len;
    pthread_mutex_unlock(&p->mu);
}

static int wait_idle(dlp_serve_pipeline *p, int64_t deadline_ns) {
    while (p->admitted > 0) {
        if (deadline_ns > 0 && dlp_now_ns() >= deadline_ns) return 0;
        if (deadline_ns > 0) {
            struct timespec ts = {.tv_sec = deadline_ns / 1000000000LL, .tv_nsec = deadline_ns % 1000000000LL};
            pthread_cond_timedwait(&p->idle_cv, &p->mu, &ts);
        } else {
            pthread_cond_wait(&p->idle_cv, &p->mu);
        }
    }
    return 1;
}

dlp_status dlp_serve_pipeline_drain(dlp_serve_pipeline *p, int64_t timeout_ns) {
    pthread_mutex_lock(&p->mu);
    p->draining = 1;
    pthread_cond_broadcast(&p->batch_cv);  // no more waiting for fuller batches
    int ok = wait_idle(p, dlp_now_ns() + (timeout_ns > 0 ? timeout_ns : 1));
    int left = p->admitted;
    if (!ok) {
        p->cutoff = 1;  // answer what is queued 503; the running batch finishes
        pthread_cond_broadcast(&p->batch_cv);
        pthread_cond_broadcast(&p->work_cv);
        wait_idle(p, 0);
    }
    pthread_mutex_unlock(&p->mu);
    if (!ok) return DLP_ERR(DLP_ERR_TIMEOUT, "%d requests were still in flight after the drain timeout; the queued "
                            "ones were answered 503", left);
    return DLP_OK;
}

void dlp_serve_pipeline_free(dlp_serve_pipeline *p) {
    if (!p) return;
    if (p->runner_started || p->batcher_started || p->nworkers > 0) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        p->cutoff = 1;
        pthread_cond_broadcast(&p->work_cv);
        pthread_cond_broadcast(&p->batch_cv);
        pthread_cond_broadcast(&p->run_cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
        if (p->batcher_started) pthread_join(p->batcher, NULL);
        if (p->runner_started) pthread_join(p->runner, NULL);  // finishes the batch it has
        // Whatever is still queued gets an answer, so no connection waits forever.
        dlp_serve_req *r;
        while ((r = pop(&p->dq_head, &p->dq_tail)) || (r = pop(&p->rq_head, &p->rq_tail))) {
            set_error(r, 503, "the server is shutting down");
            finish(p, r);
        }
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->work_cv);
        pthread_cond_destroy(&p->run_cv);
        pthread_cond_destroy(&p->batch_cv);
        pthread_cond_destroy(&p->idle_cv);
    }
    free(p->wargs);
    dlp_free_aligned(p->slots);
    dlp_free_aligned(p->batch);
    dlp_free_aligned(p->logits);
    free(p->running);
    free(p->free_slots);
    free(p->workers);
    free(p);
}

int dlp_serve_is_jpeg(const uint8_t *b, size_t len) {
    const char *what;
    dlp_bad_kind k = dlp_jpeg_sniff(b, len, &what);
    return k != DLP_BAD_EMPTY && k != DLP_BAD_NOT_JPEG;  // a truncated JPEG is the decoder's to report
}
