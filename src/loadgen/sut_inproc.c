// loadgen/sut_inproc: the in-process System Under Test — a queue of samples served by worker threads that
// call a given C function on up to max_batch samples at a time (the inference engine plugs in there).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loadgen/loadgen.h"

typedef struct inproc_item {
    dlp_lg_sample s;
    const dlp_lg_done *done;
} inproc_item;

typedef struct inproc_worker inproc_worker;

typedef struct inproc {
    dlp_lg_inproc_cfg cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    inproc_item *ring;  // FIFO: head .. head+count (mod cap)
    size_t cap, head, count;
    int stop;
    pthread_t *threads;
    inproc_worker *workers;
    int nthreads;
    int64_t calls, samples, failed_calls;
} inproc;

struct inproc_worker {
    inproc *ip;
    int index;
};

static void answer(const inproc_item *it, size_t n, const int32_t *top1, dlp_lg_outcome outcome) {
    // Group consecutive items with the same done target into one call.
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        dlp_lg_response resp[64];
        size_t k = 0;
        while (j < n && it[j].done == it[i].done && k < 64) {
            resp[k].id = it[j].s.id;
            resp[k].outcome = outcome;
            resp[k].top1 = top1 ? top1[j] : -1;
            k++, j++;
        }
        it[i].done->fn(it[i].done->ctx, resp, k);
        i = j;
    }
}

static void *worker_main(void *arg) {
    inproc_worker *w = arg;
    inproc *ip = w->ip;
    int mb = ip->cfg.max_batch;
    inproc_item *batch = malloc((size_t)mb * sizeof *batch);
    uint32_t *idx = malloc((size_t)mb * sizeof *idx);
    int32_t *top1 = malloc((size_t)mb * sizeof *top1);
    if (!batch || !idx || !top1) {
        DLP_ERROR("in-process SUT worker %d: out of memory", w->index);
        free(batch), free(idx), free(top1);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&ip->mu);
        while (ip->count == 0 && !ip->stop) pthread_cond_wait(&ip->cv, &ip->mu);
        if (ip->stop) {
            pthread_mutex_unlock(&ip->mu);
            break;
        }
        int n = 0;
        while (n < mb && ip->count > 0) {
            batch[n++] = ip->ring[ip->head];
            ip->head = (ip->head + 1) % ip->cap;
            ip->count--;
        }
        pthread_mutex_unlock(&ip->mu);
        for (int i = 0; i < n; i++) {
            idx[i] = batch[i].s.index;
            top1[i] = -1;
        }
        dlp_status st = ip->cfg.fn(ip->cfg.ctx, w->index, idx, n, top1);
        pthread_mutex_lock(&ip->mu);
        ip->calls++;
        ip->samples += n;
        if (st != DLP_OK) ip->failed_calls++;
        pthread_mutex_unlock(&ip->mu);
        if (st != DLP_OK) {
            dlp_log_warn_limited("lg-inproc", 5, "in-process SUT: the inference call failed: %s", dlp_err_msg());
            dlp_err_clear();
        }
        answer(batch, (size_t)n, st == DLP_OK ? top1 : NULL, st == DLP_OK ? DLP_LG_OK : DLP_LG_ERROR);
    }
    free(batch), free(idx), free(top1);
    return NULL;
}

static dlp_status inproc_issue(void *ctx, const dlp_lg_sample *s, size_t n, const dlp_lg_done *done) {
    inproc *ip = ctx;
    pthread_mutex_lock(&ip->mu);
    if (ip->stop) {
        pthread_mutex_unlock(&ip->mu);
        return DLP_ERR(DLP_ERR_CANCELLED, "the in-process SUT is shutting down");
    }
    if (ip->count + n > ip->cap) {  // grow the ring, unwrapping it
        size_t ncap = ip->cap;
        while (ncap < ip->count + n) ncap *= 2;
        inproc_item *nr = malloc(ncap * sizeof *nr);
        if (!nr) {
            pthread_mutex_unlock(&ip->mu);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory queueing %zu samples", n);
        }
        for (size_t i = 0; i < ip->count; i++) nr[i] = ip->ring[(ip->head + i) % ip->cap];
        free(ip->ring);
        ip->ring = nr;
        ip->cap = ncap;
        ip->head = 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = (ip->head + ip->count) % ip->cap;
        ip->ring[at].s = s[i];
        ip->ring[at].done = done;
        ip->count++;
    }
    pthread_cond_broadcast(&ip->cv);
    pthread_mutex_unlock(&ip->mu);
    return DLP_OK;
}

static json_t *inproc_stats(void *ctx) {
    inproc *ip = ctx;
    pthread_mutex_lock(&ip->mu);
    json_t *o = json_pack("{s:I, s:I, s:I, s:f, s:i, s:i}", "calls", (json_int_t)ip->calls, "samples",
                          (json_int_t)ip->samples, "failed_calls", (json_int_t)ip->failed_calls, "mean_batch",
                          ip->calls ? (double)ip->samples / (double)ip->calls : 0.0, "max_batch", ip->cfg.max_batch,
                          "threads", ip->nthreads);
    pthread_mutex_unlock(&ip->mu);
    return o;
}

static void inproc_destroy(void *ctx) {
    inproc *ip = ctx;
    pthread_mutex_lock(&ip->mu);
    ip->stop = 1;
    pthread_cond_broadcast(&ip->cv);
    pthread_mutex_unlock(&ip->mu);
    for (int i = 0; i < ip->nthreads; i++) pthread_join(ip->threads[i], NULL);
    // Answer what is left, unserved, so no caller waits for it.
    while (ip->count > 0) {
        inproc_item it = ip->ring[ip->head];
        ip->head = (ip->head + 1) % ip->cap;
        ip->count--;
        answer(&it, 1, NULL, DLP_LG_ERROR);
    }
    free(ip->threads);
    free(ip->workers);
    free(ip->ring);
    pthread_mutex_destroy(&ip->mu);
    pthread_cond_destroy(&ip->cv);
    free(ip);
}

dlp_status dlp_lg_sut_inproc_create(const dlp_lg_inproc_cfg *cfg, dlp_lg_sut *out) {
    memset(out, 0, sizeof *out);
    if (!cfg || !cfg->fn) return DLP_ERR(DLP_ERR_INVALID, "the in-process SUT needs an inference function");
    if (cfg->max_batch < 1 || cfg->threads < 1 || cfg->threads > 256)
        return DLP_ERR(DLP_ERR_INVALID, "in-process SUT: max batch %d must be >= 1 and threads %d in [1, 256]",
                       cfg->max_batch, cfg->threads);
    inproc *ip = calloc(1, sizeof *ip);
    DLP_TRY_ALLOC(ip);
    ip->cfg = *cfg;
    ip->cap = 1024;
    ip->ring = malloc(ip->cap * sizeof *ip->ring);
    ip->threads = calloc((size_t)cfg->threads, sizeof *ip->threads);
    inproc_worker *ws = ip->workers = calloc((size_t)cfg->threads, sizeof *ws);
    if (!ip->ring || !ip->threads || !ws) {
        free(ip->ring), free(ip->threads), free(ws), free(ip);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory creating the in-process SUT");
    }
    pthread_mutex_init(&ip->mu, NULL);
    pthread_cond_init(&ip->cv, NULL);
    out->name = cfg->name ? cfg->name : "inproc";
    out->ctx = ip;
    out->issue_query = inproc_issue;
    out->stats_json = inproc_stats;
    out->destroy = inproc_destroy;
    for (int i = 0; i < cfg->threads; i++) {
        ws[i].ip = ip;
        ws[i].index = i;
        if (pthread_create(&ip->threads[i], NULL, worker_main, &ws[i]) != 0) {
            ip->nthreads = i;
            inproc_destroy(ip);
            return DLP_ERR(DLP_ERR_INTERNAL, "cannot start in-process SUT thread %d", i);
        }
        ip->nthreads = i + 1;
    }
    return DLP_OK;
}
