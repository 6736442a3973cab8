// loadgen/sut_http: the HTTP System Under Test — samples wait in a queue for one of a bounded number of
// keep-alive connections (a thread each), which POSTs the sample's body and maps the answer to an outcome.
// Every HTTP status and every kind of transport error is counted.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "loadgen/http_client.h"
#include "loadgen/kserve.h"
#include "loadgen/loadgen.h"

typedef struct http_item {
    dlp_lg_sample s;
    const dlp_lg_done *done;
} http_item;

typedef struct http_sut http_sut;

typedef struct http_worker {
    http_sut *h;
    int index;
    dlp_http_conn *conn;
    int64_t connects;  // TCP connections this worker opened (under the SUT's mu)
} http_worker;

struct http_sut {
    dlp_lg_http_cfg cfg;
    dlp_http_url url;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_item *ring;
    size_t cap, head, count;
    int stop;
    pthread_t *threads;
    http_worker *workers;
    int nthreads;
    // counters (under mu)
    int64_t requests, responses, rejected_locally;
    int64_t status[1000];
    int64_t errors[DLP_HTTP_ERR_COUNT];
};

static void answer1(const http_item *it, dlp_lg_response *r) {
    r->id = it->s.id;
    it->done->fn(it->done->ctx, r, 1);
}

// A number after "key": in a JSON answer (dlperf serve's "queue_ms", "infer_ms"); -1 when absent.
static double parse_ms(const char *body, const char *key) {
    const char *p = body ? strstr(body, key) : NULL;
    if (!p) return -1;
    p += strlen(key);
    while (*p == ' ' || *p == ':' || *p == '"') p++;
    char *e;
    double v = strtod(p, &e);
    return e == p || !(v >= 0 && v < 1e9) ? -1 : v;
}

// The first "class": N in a classification answer, or -1.
static int32_t parse_top1(const char *body) {
    const char *p = body ? strstr(body, "\"class\"") : NULL;
    if (!p) return -1;
    p += 7;
    while (*p == ' ' || *p == ':') p++;
    char *e;
    long v = strtol(p, &e, 10);
    return e == p || v < 0 || v > 1000000 ? -1 : (int32_t)v;
}

static void *http_worker_main(void *arg) {
    http_worker *w = arg;
    http_sut *h = w->h;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        while (h->count == 0 && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
        if (h->stop) {
            pthread_mutex_unlock(&h->mu);
            break;
        }
        http_item it = h->ring[h->head];
        h->head = (h->head + 1) % h->cap;
        h->count--;
        h->requests++;
        pthread_mutex_unlock(&h->mu);

        int bi = (int)(it.s.index % (uint32_t)h->cfg.nbodies);
        dlp_http_response resp;
        dlp_http_error err = DLP_HTTP_ERR_NONE;
        dlp_status st = dlp_http_request(w->conn, "POST", h->url.path, h->cfg.content_type, h->cfg.bodies[bi],
                                         h->cfg.body_lens[bi], h->cfg.extra_headers, &resp, &err);
        dlp_lg_outcome o;
        int32_t top1 = -1;
        dlp_lg_response r = {0};
        int64_t connects = dlp_http_conn_connects(w->conn);
        if (st == DLP_OK && resp.status == 200) {  // parsed before taking the lock every worker shares
            top1 = h->cfg.kserve ? dlp_lg_kserve_top1(resp.body, resp.body_len) : parse_top1(resp.body);
            double qms = parse_ms(resp.body, "\"queue_ms\""), ims = parse_ms(resp.body, "\"infer_ms\"");
            if (qms >= 0 && ims >= 0) {
                r.has_server_times = 1;
                r.server_queue_ns = (int64_t)(qms * 1e6);
                r.server_infer_ns = (int64_t)(ims * 1e6);
            }
        }
        pthread_mutex_lock(&h->mu);
        w->connects = connects;
        if (st == DLP_OK) {
            h->responses++;
            if (resp.status >= 0 && resp.status < 1000) h->status[resp.status]++;
            if (resp.status == 200) {
                o = DLP_LG_OK;
            } else if (resp.status == 503) {
                o = DLP_LG_REJECTED;
            } else if (resp.status == 504 || resp.status == 408) {
                o = DLP_LG_TIMEOUT;
            } else {
                o = DLP_LG_ERROR;
            }
        } else {
            h->errors[err == DLP_HTTP_ERR_NONE ? DLP_HTTP_ERR_RECV : err]++;
            o = err == DLP_HTTP_ERR_TIMEOUT ? DLP_LG_TIMEOUT : DLP_LG_ERROR;
        }
        pthread_mutex_unlock(&h->mu);
        if (st != DLP_OK) {
            dlp_log_warn_limited("lg-http", 5, "HTTP SUT: %s", dlp_err_msg());
            dlp_err_clear();
        } else if (o == DLP_LG_ERROR) {
            dlp_log_warn_limited("lg-http-status", 5, "HTTP SUT: %s answered %d: %.200s", h->url.authority,
                                 resp.status, resp.body ? resp.body : "");
        }
        dlp_http_response_free(&resp);
        r.outcome = o;
        r.top1 = top1;
        answer1(&it, &r);
    }
    return NULL;
}

static dlp_status http_issue(void *ctx, const dlp_lg_sample *s, size_t n, const dlp_lg_done *done) {
    http_sut *h = ctx;
    size_t rejected_from = n;
    pthread_mutex_lock(&h->mu);
    if (h->stop) {
        pthread_mutex_unlock(&h->mu);
        return DLP_ERR(DLP_ERR_CANCELLED, "the HTTP SUT is shutting down");
    }
    for (size_t i = 0; i < n; i++) {
        if (h->count == h->cap) {
            size_t limit = (size_t)h->cfg.max_pending;
            if (h->cap >= limit) {
                rejected_from = i;
                h->rejected_locally += (int64_t)(n - i);
                break;
            }
            size_t ncap = h->cap * 2 < limit ? h->cap * 2 : limit;
            http_item *nr = malloc(ncap * sizeof *nr);
            if (!nr) {
                rejected_from = i;
                h->rejected_locally += (int64_t)(n - i);
                break;
            }
            for (size_t k = 0; k < h->count; k++) nr[k] = h->ring[(h->head + k) % h->cap];
            free(h->ring);
            h->ring = nr;
            h->cap = ncap;
            h->head = 0;
        }
        size_t at = (h->head + h->count) % h->cap;
        h->ring[at].s = s[i];
        h->ring[at].done = done;
        h->count++;
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (size_t i = rejected_from; i < n; i++) {  // beyond max_pending: answered at once, counted
        http_item it = {s[i], done};
        dlp_lg_response r = {.outcome = DLP_LG_REJECTED, .top1 = -1};
        answer1(&it, &r);
    }
    return DLP_OK;
}

static json_t *http_stats(void *ctx) {
    http_sut *h = ctx;
    json_t *o = json_object(), *st = json_object(), *er = json_object();
    int64_t connects = 0;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < 1000; i++)
        if (h->status[i]) {
            char k[8];
            snprintf(k, sizeof k, "%d", i);
            json_object_set_new(st, k, json_integer(h->status[i]));
        }
    for (int e = 1; e < DLP_HTTP_ERR_COUNT; e++)
        json_object_set_new(er, dlp_http_error_name((dlp_http_error)e), json_integer(h->errors[e]));
    for (int i = 0; i < h->nthreads; i++) connects += h->workers[i].connects;
    json_object_set_new(o, "url", json_string(h->cfg.url));
    json_object_set_new(o, "connections", json_integer(h->cfg.connections));
    json_object_set_new(o, "requests", json_integer(h->requests));
    json_object_set_new(o, "responses", json_integer(h->responses));
    json_object_set_new(o, "status", st);
    json_object_set_new(o, "errors", er);
    json_object_set_new(o, "rejected_locally", json_integer(h->rejected_locally));
    json_object_set_new(o, "tcp_connects", json_integer(connects));
    pthread_mutex_unlock(&h->mu);
    return o;
}

static void http_destroy(void *ctx) {
    http_sut *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->nthreads; i++) pthread_join(h->threads[i], NULL);
    while (h->count > 0) {
        http_item it = h->ring[h->head];
        h->head = (h->head + 1) % h->cap;
        h->count--;
        dlp_lg_response r = {.outcome = DLP_LG_ERROR, .top1 = -1};
        answer1(&it, &r);
    }
    for (int i = 0; i < h->cfg.connections; i++) dlp_http_conn_close(h->workers[i].conn);
    free(h->workers);
    free(h->threads);
    free(h->ring);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

dlp_status dlp_lg_sut_http_create(const dlp_lg_http_cfg *cfg, dlp_lg_sut *out) {
    memset(out, 0, sizeof *out);
    if (!cfg || !cfg->url) return DLP_ERR(DLP_ERR_INVALID, "the HTTP SUT needs a URL");
    if (cfg->nbodies < 1 || !cfg->bodies || !cfg->body_lens)
        return DLP_ERR(DLP_ERR_INVALID, "the HTTP SUT needs at least one request body");
    if (cfg->connections < 1 || cfg->connections > 4096)
        return DLP_ERR(DLP_ERR_INVALID, "connections %d must be in [1, 4096]", cfg->connections);
    http_sut *h = calloc(1, sizeof *h);
    DLP_TRY_ALLOC(h);
    h->cfg = *cfg;
    if (!h->cfg.content_type) h->cfg.content_type = "image/jpeg";
    if (h->cfg.connect_timeout_ns <= 0) h->cfg.connect_timeout_ns = 2000000000LL;
    if (h->cfg.send_timeout_ns <= 0) h->cfg.send_timeout_ns = 10000000000LL;
    if (h->cfg.recv_timeout_ns <= 0) h->cfg.recv_timeout_ns = 30000000000LL;
    if (h->cfg.max_pending <= 0) h->cfg.max_pending = (int64_t)1 << 22;
    dlp_status st = dlp_http_url_parse(cfg->url, &h->url);
    if (st != DLP_OK) {
        free(h);
        return st;
    }
    h->cap = h->cfg.max_pending < 1024 ? (size_t)h->cfg.max_pending : 1024;
    h->ring = malloc(h->cap * sizeof *h->ring);
    h->threads = calloc((size_t)cfg->connections, sizeof *h->threads);
    h->workers = calloc((size_t)cfg->connections, sizeof *h->workers);
    if (!h->ring || !h->threads || !h->workers) {
        free(h->ring), free(h->threads), free(h->workers), free(h);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory creating the HTTP SUT");
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    dlp_http_timeouts t = {h->cfg.connect_timeout_ns, h->cfg.send_timeout_ns, h->cfg.recv_timeout_ns};
    for (int i = 0; i < cfg->connections; i++) {
        h->workers[i].h = h;
        h->workers[i].index = i;
        st = dlp_http_conn_open(&h->url, &t, &h->workers[i].conn);
        if (st != DLP_OK) break;
    }
    if (st == DLP_OK)
        for (int i = 0; i < cfg->connections; i++) {
            if (pthread_create(&h->threads[i], NULL, http_worker_main, &h->workers[i]) != 0) {
                st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start HTTP connection thread %d", i);
                break;
            }
            h->nthreads = i + 1;
        }
    out->name = "http";
    out->ctx = h;
    out->issue_query = http_issue;
    out->stats_json = http_stats;
    out->destroy = http_destroy;
    if (st != DLP_OK) {
        http_destroy(h);
        memset(out, 0, sizeof *out);
    }
    return st;
}
