// serve/server_mhd: the HTTP/1.1 front end on libmicrohttpd.
//
// MHD runs its own polling thread(s) (epoll); a classification request whose body has arrived is checked
// (size, SOI marker), then its connection is *suspended* and the request handed to the pipeline, so waiting
// requests hold no thread. The pipeline's done callback resumes the connection and MHD calls the handler
// again, which queues the answer. Routes: POST /v1/classify, GET /healthz, GET /metrics; 404 / 405 otherwise.
//
// Slow clients: MHD closes a connection idle for idle_timeout_s (MHD_OPTION_CONNECTION_TIMEOUT), limits the
// number of connections (and, optionally, those per client address) and each one's header memory. MHD's timeout
// restarts with every byte, so a client that trickles a byte now and then could hold a connection for ever; a
// reaper thread therefore shuts down (shutdown(2), which MHD then sees as a closed peer) any connection whose
// current request's header has not arrived within header_timeout, or whose whole request has not within
// read_timeout, of its start. Connections with a complete request in the pipeline are exempt.
// A flood of slow-header connections must not lock out health checks and well-behaved clients until those
// timeouts expire: max_connections is a soft limit. A connection that arrives when it is reached evicts the
// oldest connection still sending its header, if that one has been at it for 0.5 s (a real client's header comes
// in one packet, so the oldest such is the slowest), and MHD's hard limit is max_connections plus a reserve, so
// the newcomer is accepted meanwhile.
//
// Graceful stop: stop listening (MHD_quiesce_daemon), answer new requests on open connections 503 with
// "Connection: close", drain the pipeline, wait for the answers to be sent, then stop MHD (which must not be
// stopped with suspended connections: all of them have been resumed by then).
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "monitor/monitor.h"
#include "serve/kserve.h"
#include "serve/pipeline.h"

typedef struct conn_ctx {
    int fd;
    int64_t phase_start_ns;  // when the current request began: connection start or the previous answer
    int busy;                // a complete request is in the pipeline or being answered
    int shut;                // the reaper already cut it off
    int header_done;         // the current request's header has arrived
    struct conn_ctx *prev, *next;
} conn_ctx;

enum { RQ_RECEIVING = 0, RQ_QUEUED, RQ_DONE };
enum { ROUTE_CLASSIFY = 1, ROUTE_INFER, ROUTE_OTHER };  // INFER: KServe v2 POST /v2/models/NAME/infer

typedef struct http_req {
    struct dlp_server *srv;
    struct MHD_Connection *conn;
    int route;
    int64_t t_start_ns;
    uint8_t *body;
    size_t len, cap;
    int too_large;
    int responded;  // a response was queued
    int admitted;   // taken by the pipeline (else refused with 503)
    int fd;         // the connection's socket, for answer_half_closed (-1: unknown)
    int direct;     // answered by answer_half_closed, not through MHD
    atomic_int state;
    dlp_serve_req req;
    dlp_kserve_req kr;  // ROUTE_INFER: the parsed request (its tensor or JPEG points into body or kr.owned)
    float *logits;      // ROUTE_INFER: the request's logits, filled by the pipeline
    int v2;             // a /v2 path: errors in the protocol's form
} http_req;

struct dlp_server {
    dlp_serve_cfg cfg;
    const dlp_serve_engine *engine;
    const dlp_serve_preprocess *pre;
    dlp_serve_metrics metrics;
    dlp_serve_pipeline *pipe;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t cv;       // active requests reached 0; reaper wake-ups
    conn_ctx *conns;
    int nconns;
    int active;              // http_req objects alive
    atomic_int draining;
    int reaper_stop;
    pthread_t reaper;
    int reaper_started;
    int stopped;
};

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    DLP_DEBUG("libmicrohttpd: %s", buf);
}

// Queues a response with a body and the headers every answer gets. Records the request in the metrics.
// extra: optional "Name: value" header lines, each ending in "\r\n" (the binary-data header, Server-Timing).
static enum MHD_Result reply_ex(http_req *h, int status, const char *body, size_t len, const char *ctype,
                                const char *allow, const char *extra) {
    dlp_server *s = h->srv;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (const char *l = extra; l && *l;) {
        const char *colon = strchr(l, ':'), *end = strstr(l, "\r\n");
        if (!colon || !end || colon > end) break;
        char name[64], value[256];
        snprintf(name, sizeof name, "%.*s", (int)(colon - l), l);
        const char *v = colon + 1;
        while (*v == ' ') v++;
        snprintf(value, sizeof value, "%.*s", (int)(end - v), v);
        MHD_add_response_header(resp, name, value);
        l = end + 2;
    }
    if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (atomic_load(&s->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(h->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    h->responded = r == MHD_YES;
    dlp_serve_metrics_request(&s->metrics, status, dlp_now_ns() - h->t_start_ns);
    dlp_monitor_count(s->cfg.monitor, DLP_MONITOR_REQUESTS, 1);
    return r;
}

static enum MHD_Result reply(http_req *h, int status, const char *body, size_t len, const char *ctype,
                             const char *allow) {
    return reply_ex(h, status, body, len, ctype, allow, NULL);
}

// Errors: /v1's {"error", "status"}; the KServe v2 routes answer the protocol's {"error": "..."}.
static enum MHD_Result reply_error(http_req *h, int status, const char *msg, const char *allow) {
    size_t len = 0;
    char *b = h->v2 ? dlp_kserve_error_json(msg, &len) : dlp_serve_error_json(status, msg, &len);
    enum MHD_Result r = reply(h, status, b ? b : "{}", b ? len : 2, "application/json", allow);
    free(b);
    return r;
}

static void gauges(dlp_server *s, dlp_serve_gauges *g) {
    memset(g, 0, sizeof *g);
    dlp_serve_pipeline_depth(s->pipe, &g->inflight, &g->queue_depth);
    g->queue_capacity = s->cfg.queue_capacity;
    g->max_batch = s->cfg.max_batch;
    g->draining = atomic_load(&s->draining);
    pthread_mutex_lock(&s->mu);
    g->connections = s->nconns;
    pthread_mutex_unlock(&s->mu);
}

char *dlp_server_metrics_text(dlp_server *s) {
    dlp_serve_gauges g;
    gauges(s, &g);
    dlp_prom_buf b;
    dlp_prom_init(&b);
    dlp_serve_metrics_render(&s->metrics, &g, &b);
    if (s->cfg.monitor) dlp_monitor_render_prom(s->cfg.monitor, &b);
    if (b.failed) {
        dlp_prom_free(&b);
        return NULL;
    }
    return b.data;  // malloc'd by the writer
}

static conn_ctx *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_ctx *)ci->socket_context : NULL;
}

static const char *status_text(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
    }
}

// A client that half-closed its side after the request (shutdown(SHUT_WR)): its FIN is already queued, and MHD,
// resuming the connection, would read that EOF first and close before queueing the answer. So answer here on the
// socket (with Connection: close; MHD does not touch a suspended connection's socket), and let MHD close it on
// resume. The answer is small and the socket buffer empty, so a non-blocking send takes it whole; if not, it is
// abandoned like any answer to a client that left. (A FIN arriving between this check and MHD's read still loses
// the answer: that window is microseconds, not the whole inference.)
static const char *model_name(const dlp_server *s) { return s->cfg.model_name ? s->cfg.model_name : "model"; }

// The answer to a request the pipeline answered: its body (malloc'd), content type and extra header lines (the
// binary-data extension's length; Server-Timing: where the request's time went, in ms).
static char *answer_body(http_req *h, size_t *len, const char **ctype, char *extra, size_t extra_cap) {
    dlp_server *s = h->srv;
    const dlp_serve_req *r = &h->req;
    size_t json_len = 0;
    char *b;
    if (h->route == ROUTE_INFER)
        b = dlp_kserve_answer(&h->kr, r, model_name(s), h->logits, s->engine->num_classes,
                              (const char *const *)s->cfg.labels, s->cfg.nlabels, len, &json_len);
    else
        b = dlp_serve_answer_json(r, (const char *const *)s->cfg.labels, s->cfg.nlabels, len);
    *ctype = json_len ? "application/octet-stream" : "application/json";
    int n = 0;
    if (json_len) n = snprintf(extra, extra_cap, "Inference-Header-Content-Length: %zu\r\n", json_len);
    if (r->status == 200 && n >= 0 && (size_t)n < extra_cap) {
        // read: header to whole body; decode: JPEG decode + transform (or tensor conversion); queue: waiting for a
        // worker and for a batch; infer: the batch's engine call.
        double rd = dlp_ns_to_ms(r->t_arrival_ns - h->t_start_ns), dec = dlp_ns_to_ms(r->t_ready_ns - r->t_decode_start_ns),
               q = dlp_ns_to_ms((r->t_decode_start_ns - r->t_arrival_ns) + (r->t_infer_start_ns - r->t_ready_ns)),
               inf = dlp_ns_to_ms(r->t_infer_end_ns - r->t_infer_start_ns);
        snprintf(extra + n, extra_cap - (size_t)n,
                 "Server-Timing: read;dur=%.3f, decode;dur=%.3f, queue;dur=%.3f, infer;dur=%.3f;desc=\"batch %d\"\r\n",
                 rd, dec, q, inf, r->batch_size);
    }
    return b;
}

static void answer_half_closed(http_req *h) {
    char c;
    if (h->fd < 0 || recv(h->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0) return;  // data, nothing yet, or an error
    dlp_server *s = h->srv;
    size_t len = 0;
    const char *ctype;
    char extra[512] = "";
    char *b = answer_body(h, &len, &ctype, extra, sizeof extra);
    if (!b) return;
    char date[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: %s\r\n"
                      "%s%sContent-Length: %zu\r\n\r\n",
                      h->req.status, status_text(h->req.status), date, ctype,
                      h->req.status == 503 ? "Retry-After: 1\r\n" : "", extra, len);
    h->direct = 1;
    struct iovec iov[2] = {{head, (size_t)hn}, {b, len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w = sendmsg(h->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(b);
    if (w == (ssize_t)((size_t)hn + len)) {
        // The answer said Connection: close: end the connection here (the FIN follows the answer), so the client
        // is not left waiting on MHD, which in some states (after a 100 Continue) does not act on the resume
        // until its timeout. MHD then sees the closed socket and releases the connection.
        shutdown(h->fd, SHUT_RDWR);
        h->responded = 1;
        dlp_serve_metrics_request(&s->metrics, h->req.status, dlp_now_ns() - h->t_start_ns);
        dlp_monitor_count(s->cfg.monitor, DLP_MONITOR_REQUESTS, 1);
    }
}

static void on_pipeline_done(dlp_serve_req *r) {
    http_req *h = r->user;
    answer_half_closed(h);
    atomic_store(&h->state, RQ_DONE);
    MHD_resume_connection(h->conn);  // h may be gone once this returns
}

static enum MHD_Result answer_classify(http_req *h) {
    size_t len = 0;
    const char *ctype;
    char extra[512] = "";
    char *b = answer_body(h, &len, &ctype, extra, sizeof extra);
    if (!b) return reply_error(h, 500, "out of memory for the answer", NULL);
    enum MHD_Result r = reply_ex(h, h->req.status, b, len, ctype, NULL, extra);
    free(b);
    return r;
}

// The KServe v2 GET routes: health, server and model metadata (the protocol's {"error"} otherwise).
static enum MHD_Result answer_v2_get(http_req *h, const char *url, int get) {
    dlp_server *s = h->srv;
    int st = 0;
    char err[300];
    dlp_kserve_route r = dlp_kserve_route_parse(url, model_name(s), &st, err, sizeof err);
    if (st) return reply_error(h, st, err, NULL);
    if (!get) return reply_error(h, 405, "use GET on this /v2 route", "GET, HEAD");
    int draining = atomic_load(&s->draining);
    size_t len = 0;
    char *b = NULL;
    switch (r) {
    case DLP_KSERVE_LIVE: return reply(h, 200, "{\"live\":true}", 13, "application/json", NULL);
    case DLP_KSERVE_READY:
    case DLP_KSERVE_MODEL_READY:
        if (draining) return reply_error(h, 503, "shutting down", NULL);
        return reply(h, 200, "{\"ready\":true}", 14, "application/json", NULL);
    case DLP_KSERVE_SERVER_META: b = dlp_kserve_server_metadata(&len); break;
    case DLP_KSERVE_MODEL_META: {
        char platform[96];
        snprintf(platform, sizeof platform, "dlperf_%s", s->engine->name ? s->engine->name : "engine");
        b = dlp_kserve_model_metadata(model_name(s), platform, s->pre, s->engine->num_classes, s->cfg.max_batch, &len);
        break;
    }
    default: return reply_error(h, 404, "no such /v2 route", NULL);
    }
    if (!b) return reply_error(h, 500, "out of memory", NULL);
    enum MHD_Result res = reply(h, 200, b, len, "application/json", NULL);
    free(b);
    return res;
}

// A complete POST /v2/models/NAME/infer body: parsed into the pipeline request (1), or answered 400 (0, *out set).
static int prepare_infer(http_req *h, struct MHD_Connection *c, enum MHD_Result *out) {
    dlp_server *s = h->srv;
    char err[400];
    const char *ihcl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    int st = dlp_kserve_parse(h->body ? h->body : (const uint8_t *)"", h->len, ihcl, s->pre, s->engine->num_classes,
                              &h->kr, err, sizeof err);
    if (st) {
        *out = reply_error(h, st, err, NULL);
        return 0;
    }
    h->logits = malloc((size_t)s->engine->num_classes * sizeof *h->logits);
    if (!h->logits) {
        *out = reply_error(h, 503, "out of memory for the answer; retry later", NULL);
        return 0;
    }
    h->req.body = h->kr.data;
    h->req.len = h->kr.data_len;
    h->req.kind = h->kr.kind;
    h->req.tensor = h->kr.tensor;
    h->req.logits = h->logits;
    return 1;
}

// The first call of a request: its header has arrived. Answers wait for the final call (MHD closes the connection after
// an answer queued on this first call), except a 413 announced by Content-Length.
static enum MHD_Result on_header(dlp_server *s, struct MHD_Connection *c, const char *url, void **con_cls) {
    http_req *h = calloc(1, sizeof *h);
    if (!h) return MHD_NO;
    h->srv = s;
    h->conn = c;
    h->fd = -1;
    h->t_start_ns = dlp_now_ns();
    *con_cls = h;
    pthread_mutex_lock(&s->mu);
    s->active++;
    pthread_mutex_unlock(&s->mu);
    int kst;
    char kerr[8];
    dlp_kserve_route kr = dlp_kserve_route_parse(url, model_name(s), &kst, kerr, sizeof kerr);
    h->v2 = kr != DLP_KSERVE_NONE;
    h->route = strcmp(url, "/v1/classify") == 0 ? ROUTE_CLASSIFY : kr == DLP_KSERVE_INFER ? ROUTE_INFER : ROUTE_OTHER;
    conn_ctx *hc = conn_of(c);
    if (hc) {
        pthread_mutex_lock(&s->mu);
        hc->header_done = 1;
        pthread_mutex_unlock(&s->mu);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *e;
        unsigned long long v = strtoull(cl, &e, 10);
        if (e != cl && v > (unsigned long long)s->cfg.max_body_bytes) {
            char msg[128];
            snprintf(msg, sizeof msg, "body of %llu bytes is over the limit of %lld bytes", v,
                     (long long)s->cfg.max_body_bytes);
            return reply_error(h, 413, msg, NULL);  // MHD then closes: the body is not read
        }
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size,
                                  void **con_cls) {
    dlp_server *s = cls;
    (void)version;
    http_req *h = *con_cls;
    if (!h) return on_header(s, c, url, con_cls);
    if (h->responded) {  // answered early (413): ignore whatever body comes
        *upload_size = 0;
        return MHD_YES;
    }
    if (h->route == ROUTE_OTHER) {
        if (*upload_size > 0) {  // a body nobody wants: drop it, within the size limit
            h->len += *upload_size;
            *upload_size = 0;
            return h->len > (size_t)s->cfg.max_body_bytes ? MHD_NO : MHD_YES;
        }
        int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        if (h->v2) return answer_v2_get(h, url, get);
        if (strcmp(url, "/healthz") == 0) {
            if (!get) return reply_error(h, 405, "use GET", "GET, HEAD");
            if (atomic_load(&s->draining)) return reply_error(h, 503, "shutting down", NULL);
            static const char ok[] = "{\"status\":\"ok\"}";
            return reply(h, 200, ok, sizeof ok - 1, "application/json", NULL);
        }
        if (strcmp(url, "/metrics") == 0) {
            if (!get) return reply_error(h, 405, "use GET", "GET, HEAD");
            char *t = dlp_server_metrics_text(s);
            if (!t) return reply_error(h, 500, "out of memory", NULL);
            enum MHD_Result r = reply(h, 200, t, strlen(t), DLP_PROM_CONTENT_TYPE, NULL);
            free(t);
            return r;
        }
        return reply_error(h, 404, "no such path: use POST /v1/classify, GET /healthz or GET /metrics", NULL);
    }
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
        if (*upload_size > 0) {
            h->len += *upload_size;
            *upload_size = 0;
            return h->len > (size_t)s->cfg.max_body_bytes ? MHD_NO : MHD_YES;
        }
        return reply_error(h, 405, h->route == ROUTE_INFER ? "use POST with a KServe v2 inference request" :
                                                             "use POST with a JPEG body", "POST");
    }
    int state = atomic_load(&h->state);
    if (state == RQ_DONE) return h->direct ? MHD_NO : answer_classify(h);  // MHD_NO: close (answered already)
    if (state == RQ_QUEUED) return MHD_YES;  // not expected: suspended connections are not called
    if (*upload_size > 0) {
        if (dlp_now_ns() - h->t_start_ns > s->cfg.read_timeout_ns) {
            atomic_fetch_add(&s->metrics.reaped_total, 1);
            return MHD_NO;  // too slow: close the connection
        }
        size_t n = *upload_size;
        if (!h->too_large && h->len + n > (size_t)s->cfg.max_body_bytes) {
            h->too_large = 1;
            free(h->body);
            h->body = NULL;
            h->cap = 0;
        }
        if (!h->too_large) {
            if (h->len + n > h->cap) {
                size_t nc = h->cap ? h->cap : 65536;
                while (nc < h->len + n) nc *= 2;
                if (nc > (size_t)s->cfg.max_body_bytes) nc = (size_t)s->cfg.max_body_bytes;
                uint8_t *nb = realloc(h->body, nc);
                if (!nb) return MHD_NO;
                h->body = nb;
                h->cap = nc;
            }
            memcpy(h->body + h->len, upload_data, n);
        }
        h->len += n;
        *upload_size = 0;
        return MHD_YES;
    }
    // The whole body is here.
    if (h->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "body of %zu bytes is over the limit of %lld bytes", h->len,
                 (long long)s->cfg.max_body_bytes);
        return reply_error(h, 413, msg, NULL);
    }
    if (h->route == ROUTE_INFER) {
        enum MHD_Result r;
        if (!prepare_infer(h, c, &r)) return r;
    } else {
        if (h->len == 0) return reply_error(h, 400, "empty body: POST the JPEG file as the request body", NULL);
        if (!dlp_serve_is_jpeg(h->body, h->len))
            return reply_error(h, 400, "not a JPEG: the body does not start with the SOI marker FF D8 FF", NULL);
        h->req.body = h->body;
        h->req.len = h->len;
        h->req.kind = DLP_SERVE_IN_JPEG;
    }
    dlp_monitor_count(s->cfg.monitor, DLP_MONITOR_INPUT_BYTES, (int64_t)h->len);
    // The deadline runs from the arrival of the whole body: the upload has its own limit (--read-timeout), and a
    // slow upload must not make a request expire "waiting to be decoded" before the server had it.
    h->req.t_arrival_ns = dlp_now_ns();
    dlp_serve_hist_observe(&s->metrics.read_seconds, (double)(h->req.t_arrival_ns - h->t_start_ns) * 1e-9);
    h->req.deadline_ns = h->req.t_arrival_ns + s->cfg.timeout_ns;
    h->req.done = on_pipeline_done;
    h->req.user = h;
    conn_ctx *cc = conn_of(c);
    h->fd = cc ? cc->fd : -1;
    pthread_mutex_lock(&s->mu);
    if (cc) cc->busy = 1;
    pthread_mutex_unlock(&s->mu);
    // Suspend before handing it over: the pipeline may answer (and resume) at once.
    atomic_store(&h->state, RQ_QUEUED);
    MHD_suspend_connection(c);
    dlp_status st = dlp_serve_pipeline_submit(s->pipe, &h->req);
    h->admitted = st == DLP_OK;  // written before any resume: the handler runs again only after one
    if (st != DLP_OK) {
        h->req.status = 503;
        snprintf(h->req.error, sizeof h->req.error, "%s",
                 st == DLP_ERR_BUSY ? "the request queue is full; retry later" : "the server is shutting down");
        atomic_store(&h->state, RQ_DONE);
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    dlp_server *s = cls;
    (void)toe;
    http_req *h = *con_cls;
    if (!h) return;
    if (atomic_load(&h->state) == RQ_QUEUED) {  // cannot happen while suspended; never free what the pipeline holds
        dlp_log_warn_limited("serve-queued", 3, "a request ended while still queued; leaking it rather than freeing");
        return;
    }
    if (!h->responded) {
        atomic_fetch_add(&s->metrics.aborted_total, 1);
        if (h->admitted) atomic_fetch_add(&s->metrics.client_gone_total, 1);
    }
    conn_ctx *cc = conn_of(c);
    pthread_mutex_lock(&s->mu);
    if (cc) {
        cc->busy = 0;
        cc->header_done = 0;
        cc->phase_start_ns = dlp_now_ns();
    }
    s->active--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    dlp_kserve_req_free(&h->kr);
    free(h->logits);
    free(h->body);
    free(h);
    *con_cls = NULL;
}

// A header-phase connection younger than this is never evicted: a real client's header takes one round trip.
static int64_t evict_min_age_ns(const dlp_serve_cfg *c) {
    const int64_t half = c->header_timeout_ns / 2;
    return half < 500000000LL ? half : 500000000LL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    dlp_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_ctx *cc = calloc(1, sizeof *cc);
        if (!cc) return;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        cc->fd = ci ? ci->connect_fd : -1;
        cc->phase_start_ns = dlp_now_ns();
        pthread_mutex_lock(&s->mu);
        if (s->nconns >= s->cfg.max_connections) {
            // At the soft limit: cut the oldest connection still sending its header (the list is newest first),
            // if it has had a fair chance to send it; never one just accepted, which MHD may not even have read
            // yet (a burst of arrivals would otherwise evict each other, well-behaved clients included).
            const int64_t now = dlp_now_ns(), min_age = evict_min_age_ns(&s->cfg);
            conn_ctx *victim = NULL;
            for (conn_ctx *o = s->conns; o; o = o->next)
                if (!o->busy && !o->shut && !o->header_done && o->fd >= 0 && now - o->phase_start_ns >= min_age)
                    victim = o;
            if (victim) {
                shutdown(victim->fd, SHUT_RDWR);
                victim->shut = 1;
                atomic_fetch_add(&s->metrics.reaped_total, 1);
            }
        }
        cc->next = s->conns;
        if (s->conns) s->conns->prev = cc;
        s->conns = cc;
        s->nconns++;
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add(&s->metrics.connections_total, 1);
        *socket_context = cc;
    } else {
        conn_ctx *cc = *socket_context;
        if (!cc) return;
        // Removed before MHD closes the socket, so the reaper never touches a reused descriptor.
        pthread_mutex_lock(&s->mu);
        if (cc->prev) cc->prev->next = cc->next;
        else s->conns = cc->next;
        if (cc->next) cc->next->prev = cc->prev;
        s->nconns--;
        pthread_mutex_unlock(&s->mu);
        free(cc);
        *socket_context = NULL;
    }
}

static void *reaper_main(void *arg) {
    dlp_server *s = arg;
    int64_t period = (s->cfg.header_timeout_ns < s->cfg.read_timeout_ns ? s->cfg.header_timeout_ns
                                                                         : s->cfg.read_timeout_ns) / 4;
    if (period > 250000000) period = 250000000;
    if (period < 10000000) period = 10000000;
    pthread_mutex_lock(&s->mu);
    while (!s->reaper_stop) {
        int64_t now = dlp_now_ns();
        // Above the soft limit (a flood filled the reserve): evict the oldest header-phase connections back down
        // to it, so that the reserve frees up for newcomers even when no accept happens (at MHD's hard limit).
        int live = 0;
        conn_ctx *tail = NULL;
        for (conn_ctx *cc = s->conns; cc; cc = cc->next) {
            live += !cc->shut;
            tail = cc;
        }
        const int64_t min_age = evict_min_age_ns(&s->cfg);
        for (conn_ctx *cc = tail; cc && live > s->cfg.max_connections; cc = cc->prev) {
            if (cc->busy || cc->shut || cc->header_done || cc->fd < 0 || now - cc->phase_start_ns < min_age) continue;
            shutdown(cc->fd, SHUT_RDWR);
            cc->shut = 1;
            live--;
            atomic_fetch_add(&s->metrics.reaped_total, 1);
        }
        for (conn_ctx *cc = s->conns; cc; cc = cc->next) {
            if (cc->busy || cc->shut || cc->fd < 0) continue;
            int64_t limit = s->cfg.read_timeout_ns;  // the header's own limit never extends the whole request's
            if (!cc->header_done && s->cfg.header_timeout_ns < limit) limit = s->cfg.header_timeout_ns;
            if (now - cc->phase_start_ns > limit) {
                shutdown(cc->fd, SHUT_RDWR);
                cc->shut = 1;
                atomic_fetch_add(&s->metrics.reaped_total, 1);
            }
        }
        int64_t until = now + period;
        struct timespec ts = {.tv_sec = until / 1000000000LL, .tv_nsec = until % 1000000000LL};
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

// Room above the soft limit for newcomers while the connections they evicted are being closed.
static int conn_reserve(int max_connections) {
    int r = max_connections / 8;
    return r < 16 ? 16 : r;
}

static dlp_status bind_addr(const char *host, int port, struct sockaddr_storage *ss, int *v6) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0 || !res) return DLP_ERR(DLP_ERR_INVALID, "--host '%s': %s", host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return DLP_OK;
}

dlp_status dlp_server_start(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine,
                            const dlp_serve_preprocess *pre, dlp_server **out) {
    *out = NULL;
    DLP_CHECK(dlp_serve_cfg_check(cfg, engine));
    struct sockaddr_storage ss;
    int v6 = 0;
    DLP_CHECK(bind_addr(cfg->host ? cfg->host : "127.0.0.1", cfg->port, &ss, &v6));
    dlp_server *s = calloc(1, sizeof *s);
    DLP_TRY_ALLOC(s);
    s->cfg = *cfg;
    s->engine = engine;
    s->pre = pre;
    dlp_serve_metrics_init(&s->metrics, cfg->max_batch);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    dlp_status st = dlp_serve_pipeline_create(cfg, engine, pre, &s->metrics, &s->pipe);
    if (st != DLP_OK) {
        dlp_server_free(s);
        return st;
    }
    // poll(2), not MHD_USE_AUTO's epoll: epoll is edge-triggered in MHD, and a client's FIN that arrives with its
    // request (it half-closed after sending) is consumed while the request is processed, so MHD never saw it again
    // and held the answered connection open until the header timeout (10 s; found by tests/fuzz/fuzz_http).
    // poll reports the EOF until it is read. A few hundred connections per polling thread are poll's home ground.
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &ss},
        {MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections + conn_reserve(cfg->max_connections), NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_conns_per_ip, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)cfg->conn_memory_bytes, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 256, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},  // reject sloppy requests (e.g. bare LF, double Content-Length)
        {cfg->http_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, cfg->http_threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_END);
    if (!s->d) {
        dlp_server_free(s);
        return DLP_ERR(DLP_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                       cfg->host ? cfg->host : "127.0.0.1", cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    if (pthread_create(&s->reaper, NULL, reaper_main, s) == 0) s->reaper_started = 1;
    else DLP_WARN("cannot start the slow-connection reaper; only MHD's idle timeout applies");
    *out = s;
    return DLP_OK;
}

int dlp_server_port(const dlp_server *s) { return s->port; }

dlp_status dlp_server_stop(dlp_server *s) {
    if (!s || s->stopped) return DLP_OK;
    s->stopped = 1;
    atomic_store(&s->draining, 1);
    if (s->d) {
        MHD_socket lfd = MHD_quiesce_daemon(s->d);  // no new connections from here on
        if (lfd != MHD_INVALID_SOCKET) close(lfd);
    }
    int64_t t0 = dlp_now_ns();
    dlp_status st = DLP_OK;
    if (s->pipe) st = dlp_serve_pipeline_drain(s->pipe, s->cfg.drain_timeout_ns);
    // Wait for the answers to be written (each request's completion), within what is left of the drain time
    // (at least 2 s).
    int64_t left = s->cfg.drain_timeout_ns - (dlp_now_ns() - t0);
    if (left < 2000000000LL) left = 2000000000LL;
    int64_t until = dlp_now_ns() + left;
    pthread_mutex_lock(&s->mu);
    while (s->active > 0 && dlp_now_ns() < until) {
        int64_t step = dlp_now_ns() + 50000000;
        if (step > until) step = until;
        struct timespec ts = {.tv_sec = step / 1000000000LL, .tv_nsec = step % 1000000000LL};
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    int active = s->active;
    pthread_mutex_unlock(&s->mu);
    if (active > 0) DLP_WARN("stopping with %d requests still being received or sent", active);
    if (s->d) {
        MHD_stop_daemon(s->d);
        s->d = NULL;
    }
    if (s->reaper_started) {
        pthread_mutex_lock(&s->mu);
        s->reaper_stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->reaper, NULL);
        s->reaper_started = 0;
    }
    return st;
}

void dlp_server_free(dlp_server *s) {
    if (!s) return;
    // A stop that fails here has no one to report to; clear only its error, so a caller that frees the server on
    // its own error path still returns that error with its message.
    if ((s->d || s->reaper_started) && dlp_server_stop(s) != DLP_OK) dlp_err_clear();
    dlp_serve_pipeline_free(s->pipe);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void dlp_server_stats(dlp_server *s, dlp_serve_stats *o) {
    memset(o, 0, sizeof *o);
    for (int c = 0; c < 600; c++) {
        o->by_status[c] = atomic_load(&s->metrics.requests_by_status[c]);
        o->requests += o->by_status[c];
    }
    o->admitted = atomic_load(&s->metrics.admitted_total);
    o->inferred = atomic_load(&s->metrics.images_total);
    o->batches = atomic_load(&s->metrics.batches_total);
    o->connections_total = atomic_load(&s->metrics.connections_total);
    o->reaped = atomic_load(&s->metrics.reaped_total);
    o->aborted = atomic_load(&s->metrics.aborted_total);
    o->client_gone = atomic_load(&s->metrics.client_gone_total);
    dlp_serve_gauges g;
    gauges(s, &g);
    o->inflight = g.inflight;
    o->open_connections = g.connections;
}
