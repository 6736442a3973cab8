// serve/metrics: counters, histograms and the Prometheus text rendering of /metrics.
#include "serve/metrics.h"

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
    static const double fast[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
    hist_init(&m->read_seconds, fast, (int)(sizeof fast / sizeof fast[0]));
    hist_init(&m->decode_seconds, fast, (int)(sizeof fast / sizeof fast[0]));
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
    atomic_fetch_add(&h->sum_micro, (long long)(v * 1e6 + 0.5));
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

static void hist(dlp_prom_buf *b, const char *name, const char *help, const dlp_serve_hist *h) {
    char bucket[128], sum[128], count[128], le[32];
    snprintf(bucket, sizeof bucket, "%s_bucket", name);
    snprintf(sum, sizeof sum, "%s_sum", name);
    snprintf(count, sizeof count, "%s_count", name);
    dlp_prom_family(b, name, "histogram", help);
    long long cum = 0;
    for (int i = 0; i < h->nbounds; i++) {
        cum += atomic_load(&h->counts[i]);
        snprintf(le, sizeof le, "%g", h->bounds[i]);
        dlp_prom_sample(b, bucket, (double)cum, "le", le, (char *)NULL);
    }
    cum += atomic_load(&h->counts[h->nbounds]);
    dlp_prom_sample(b, bucket, (double)cum, "le", "+Inf", (char *)NULL);
    dlp_prom_sample(b, sum, (double)atomic_load(&h->sum_micro) / 1e6, (char *)NULL);
    dlp_prom_sample(b, count, (double)cum, (char *)NULL);  // consistent with +Inf by construction
}

static void one(dlp_prom_buf *b, const char *name, const char *type, const char *help, double v) {
    dlp_prom_family(b, name, type, help);
    dlp_prom_sample(b, name, v, (char *)NULL);
}

void dlp_serve_metrics_render(const dlp_serve_metrics *m, const dlp_serve_gauges *g, dlp_prom_buf *b) {
    dlp_prom_family(b, "dlperf_serve_requests_total", "counter", "HTTP requests answered, by status code.");
    for (int c = 100; c < 600; c++) {
        long long v = atomic_load(&m->requests_by_status[c]);
        if (v > 0 || c == 200) {
            char code[8];
            snprintf(code, sizeof code, "%d", c);
            dlp_prom_sample(b, "dlperf_serve_requests_total", (double)v, "code", code, (char *)NULL);
        }
    }
    hist(b, "dlperf_serve_request_duration_seconds", "Time from a request's arrival to its response, every status.",
         &m->request_seconds);
    hist(b, "dlperf_serve_queue_wait_seconds", "Time from a request's arrival to the start of its batch.",
         &m->queue_seconds);
    hist(b, "dlperf_serve_inference_duration_seconds", "Time of one engine call (one batch).", &m->infer_seconds);
    hist(b, "dlperf_serve_read_duration_seconds", "Time from a request's header to its whole body.", &m->read_seconds);
    hist(b, "dlperf_serve_decode_duration_seconds",
         "Time of one request's preprocessing: JPEG decode + transform, or a tensor's conversion.", &m->decode_seconds);
    hist(b, "dlperf_serve_batch_size", "Requests per engine call (dynamic batching).", &m->batch_size);
    one(b, "dlperf_serve_queue_depth", "gauge", "Requests admitted and waiting (decoding or for a batch).", g->queue_depth);
    one(b, "dlperf_serve_inflight_requests", "gauge", "Requests admitted and not yet answered.", g->inflight);
    one(b, "dlperf_serve_queue_capacity", "gauge", "Requests that can be admitted at once (503 beyond).",
        g->queue_capacity);
    one(b, "dlperf_serve_max_batch", "gauge", "Largest batch the batcher forms.", g->max_batch);
    one(b, "dlperf_serve_open_connections", "gauge", "HTTP connections open now.", g->connections);
    one(b, "dlperf_serve_draining", "gauge", "1 while shutting down gracefully.", g->draining);
    one(b, "dlperf_serve_admitted_total", "counter", "Requests admitted into the pipeline.",
        (double)atomic_load(&m->admitted_total));
    one(b, "dlperf_serve_images_total", "counter", "Images run through the engine.", (double)atomic_load(&m->images_total));
    one(b, "dlperf_serve_batches_total", "counter", "Engine calls.", (double)atomic_load(&m->batches_total));
    one(b, "dlperf_serve_connections_total", "counter", "HTTP connections accepted.",
        (double)atomic_load(&m->connections_total));
    one(b, "dlperf_serve_connections_reaped_total", "counter", "Connections cut off for sending a request too slowly.",
        (double)atomic_load(&m->reaped_total));
    one(b, "dlperf_serve_client_gone_total", "counter", "Admitted requests whose client hung up before the answer.",
        (double)atomic_load(&m->client_gone_total));
    one(b, "dlperf_serve_aborted_total", "counter", "Requests that ended without an answer (the client hung up).",
        (double)atomic_load(&m->aborted_total));
}
