// serve/metrics: the service's counters and histograms (lock-free, updated from any thread) and their
// Prometheus text for GET /metrics, written with the monitor's exposition writer (monitor/prom.h).
// Defines: dlp_serve_hist, dlp_serve_metrics, dlp_serve_gauges, dlp_serve_metrics_init/request/batch/render.
#ifndef DLP_SERVE_METRICS_H
#define DLP_SERVE_METRICS_H
#include <stdatomic.h>
#include <stdint.h>

#include "monitor/prom.h"

#define DLP_SERVE_HIST_MAX 24

typedef struct dlp_serve_hist {
    int nbounds;
    double bounds[DLP_SERVE_HIST_MAX];        // upper bounds, ascending (in the metric's unit)
    atomic_llong counts[DLP_SERVE_HIST_MAX + 1];  // per bucket (not cumulative); the last is +Inf
    atomic_llong count;
    atomic_llong sum_micro;                   // sum in microseconds for time metrics, x1e6 otherwise (sub-ms stages add up)
} dlp_serve_hist;

typedef struct dlp_serve_metrics {
    atomic_llong requests_by_status[600];
    dlp_serve_hist request_seconds;   // from the request's arrival to its response being queued
    dlp_serve_hist queue_seconds;     // arrival to the start of the batch it ran in
    dlp_serve_hist infer_seconds;     // one engine call
    dlp_serve_hist read_seconds;      // a request's header to its whole body (the upload)
    dlp_serve_hist decode_seconds;    // one request's JPEG decode + transform, or its tensor's conversion
    dlp_serve_hist batch_size;        // requests per engine call
    atomic_llong admitted_total, images_total, batches_total;
    atomic_llong connections_total, reaped_total;
    atomic_llong client_gone_total;   // admitted, answered by the pipeline, but the client had hung up
    atomic_llong aborted_total;       // requests that ended without any answer (client hung up mid-request)
} dlp_serve_metrics;

typedef struct dlp_serve_gauges {
    int queue_depth;      // admitted and not yet in a running batch
    int inflight;         // admitted and not yet answered
    int queue_capacity;
    int connections;      // open now
    int draining;
    int max_batch;
} dlp_serve_gauges;

void dlp_serve_metrics_init(dlp_serve_metrics *m, int max_batch);
void dlp_serve_hist_observe(dlp_serve_hist *h, double v);
void dlp_serve_metrics_request(dlp_serve_metrics *m, int status, int64_t duration_ns);
void dlp_serve_metrics_batch(dlp_serve_metrics *m, int n, int64_t infer_ns);
// Appends the Prometheus text (exposition format 0.0.4) to out.
void dlp_serve_metrics_render(const dlp_serve_metrics *m, const dlp_serve_gauges *g, dlp_prom_buf *out);

#endif
