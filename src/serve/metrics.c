// serve/metrics: counters, histograms and the Prometheus text rendering of /metrics.
#include "serve/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hist_init(dlp_serve_hist *h, const double *b, int n) {
    memset(h, 0, sizeof *h);
    h->nbounds = n < DLP_SERVE_HIST_MAX ? n : DLP_SERVE_HIST_MAX;
    memcpy(h->bounds, b, (size_t)h->nbounds * sizeof *b);
}

void dlp_serve_metrics_init(dlp_serve_metrics *m, int max_batch) {
    memset(m, 0, sizeof *m);
    // Request latency: from a few ms (small batches, fast engine) to seconds (ResNet-50 on 2 CPU cores).
    static const double lat[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1,
                                 0.25,  0.5,    1,     2.5,  5,     10,    30};
    hist_init(&m->request_seconds, lat, (int)(sizeof lat / sizeof lat[0]));
    hist_init(&m->queue_seconds, lat, (int)(sizeof lat / sizeof lat[0]));
    hist_init(&m->infer_seconds, lat, (int)(sizeof lat / sizeof lat[0]));
    double bs[DLP_SERVE_HIST_MAX];
    int nb = 0;
    for (int b = 1; b < max_batch && nb < DLP_SERVE_HIST_MAX - 1; b *= 2) bs[nb++] = b;
    bs[nb++] = max_batch > 0 ? max_batch : 1;
    hist_init(&m->batch_size, bs, nb);
}

void dlp_serve_hist_observe(dlp_serve_hist *h, double v) {
    int i = 0;
    while (i < h->nbounds && v > h->bounds[i]) i++;
    atomic_fetch_add(&h->counts[i], 1);
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_milli, (long long)(v * 1000.0 + 0.5));
}

void dlp_serve_metrics_request(dlp_serve_metrics *m, int status, int64_t duration_ns) {
    if (status >= 100 && status < 600) atomic_fetch_add(&m->requests_by_status[status], 1);
    dlp_serve_hist_observe(&m->request_seconds, (double)duration_ns * 1e-9);
}

void dlp_serve_metrics_batch(dlp_serve_metrics *m, int n, int64_t infer_ns) {
    atomic_fetch_add(&m->batches_total, 1);
    atomic_fetch_add(&m->images_total, n);
    dlp_serve_hist_observe(&m->batch_size, n);
    dlp_serve_hist_observe(&m->infer_seconds, (double)infer_ns * 1e-9);
}

typedef struct out {
    char *p;
    size_t len, cap;
    int failed;
} out;

static void emit(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(out *o, const char *fmt, ...) {
    if (o->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (o->len + (size_t)n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 8192;
        while (o->len + (size_t)n + 1 > nc) nc *= 2;
        char *np = realloc(o->p, nc);
        if (!np) {
            o->failed = 1;
            return;
        }
        o->p = np;
        o->cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(o->p + o->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

static void emit_hist(out *o, const char *name, const char *help, const dlp_serve_hist *h) {
    emit(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long long cum = 0;
    for (int i = 0; i < h->nbounds; i++) {
        cum += atomic_load(&h->counts[i]);
        emit(o, "%s_bucket{le=\"%g\"} %lld\n", name, h->bounds[i], cum);
    }
    cum += atomic_load(&h->counts[h->nbounds]);
    emit(o, "%s_bucket{le=\"+Inf\"} %lld\n", name, cum);
    emit(o, "%s_sum %.3f\n", name, (double)atomic_load(&h->sum_milli) / 1000.0);
    emit(o, "%s_count %lld\n", name, cum);  // consistent with the +Inf bucket by construction
}

char *dlp_serve_metrics_render(const dlp_serve_metrics *m, const dlp_serve_gauges *g) {
    out o = {0};
    emit(&o, "# HELP dlperf_serve_requests_total HTTP requests answered, by status code.\n"
             "# TYPE dlperf_serve_requests_total counter\n");
    for (int c = 100; c < 600; c++) {
        long long v = atomic_load(&m->requests_by_status[c]);
        if (v > 0 || c == 200) emit(&o, "dlperf_serve_requests_total{code=\"%d\"} %lld\n", c, v);
    }
    emit_hist(&o, "dlperf_serve_request_duration_seconds",
              "Time from a request's arrival to its response, every status.", &m->request_seconds);
    emit_hist(&o, "dlperf_serve_queue_wait_seconds", "Time from a request's arrival to the start of its batch.",
              &m->queue_seconds);
    emit_hist(&o, "dlperf_serve_inference_duration_seconds", "Time of one engine call (one batch).",
              &m->infer_seconds);
    emit_hist(&o, "dlperf_serve_batch_size", "Requests per engine call (dynamic batching).", &m->batch_size);
    emit(&o, "# HELP dlperf_serve_queue_depth Requests admitted and waiting (decoding or for a batch).\n"
             "# TYPE dlperf_serve_queue_depth gauge\ndlperf_serve_queue_depth %d\n", g->queue_depth);
    emit(&o, "# HELP dlperf_serve_inflight_requests Requests admitted and not yet answered.\n"
             "# TYPE dlperf_serve_inflight_requests gauge\ndlperf_serve_inflight_requests %d\n", g->inflight);
    emit(&o, "# HELP dlperf_serve_queue_capacity Requests that can be admitted at once (503 beyond).\n"
             "# TYPE dlperf_serve_queue_capacity gauge\ndlperf_serve_queue_capacity %d\n", g->queue_capacity);
    emit(&o, "# HELP dlperf_serve_max_batch Largest batch the batcher forms.\n"
             "# TYPE dlperf_serve_max_batch gauge\ndlperf_serve_max_batch %d\n", g->max_batch);
    emit(&o, "# HELP dlperf_serve_open_connections HTTP connections open now.\n"
             "# TYPE dlperf_serve_open_connections gauge\ndlperf_serve_open_connections %d\n", g->connections);
    emit(&o, "# HELP dlperf_serve_draining 1 while shutting down gracefully.\n"
             "# TYPE dlperf_serve_draining gauge\ndlperf_serve_draining %d\n", g->draining);
    emit(&o, "# HELP dlperf_serve_admitted_total Requests admitted into the pipeline.\n"
             "# TYPE dlperf_serve_admitted_total counter\ndlperf_serve_admitted_total %lld\n",
         (long long)atomic_load(&m->admitted_total));
    emit(&o, "# HELP dlperf_serve_images_total Images run through the engine.\n"
             "# TYPE dlperf_serve_images_total counter\ndlperf_serve_images_total %lld\n",
         (long long)atomic_load(&m->images_total));
    emit(&o, "# HELP dlperf_serve_batches_total Engine calls.\n"
             "# TYPE dlperf_serve_batches_total counter\ndlperf_serve_batches_total %lld\n",
         (long long)atomic_load(&m->batches_total));
    emit(&o, "# HELP dlperf_serve_connections_total HTTP connections accepted.\n"
             "# TYPE dlperf_serve_connections_total counter\ndlperf_serve_connections_total %lld\n",
         (long long)atomic_load(&m->connections_total));
    emit(&o, "# HELP dlperf_serve_connections_reaped_total Connections cut off for sending a request too slowly.\n"
             "# TYPE dlperf_serve_connections_reaped_total counter\ndlperf_serve_connections_reaped_total %lld\n",
         (long long)atomic_load(&m->reaped_total));
    emit(&o, "# HELP dlperf_serve_client_gone_total Admitted requests whose client hung up before the answer.\n"
             "# TYPE dlperf_serve_client_gone_total counter\ndlperf_serve_client_gone_total %lld\n",
         (long long)atomic_load(&m->client_gone_total));
    emit(&o, "# HELP dlperf_serve_aborted_total Requests that ended without an answer (the client hung up).\n"
             "# TYPE dlperf_serve_aborted_total counter\ndlperf_serve_aborted_total %lld\n",
         (long long)atomic_load(&m->aborted_total));
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
