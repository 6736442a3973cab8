// loadgen/sut: the System Under Test interface (MLPerf's SystemUnderTest: IssueQuery / FlushQueries) and the
// SUTs loadgen ships: HTTP (any service), in-process (worker threads around an inference callback) and local
// (dlperf's own inference engine, loadgen/sut_local.h).
// Defines: dlp_lg_sample, dlp_lg_outcome (dlp_lg_outcome_name), dlp_lg_response, dlp_lg_done, dlp_lg_sut
//          (dlp_lg_sut_destroy), dlp_lg_infer_fn, dlp_lg_inproc_cfg (dlp_lg_sut_inproc_create), dlp_lg_http_cfg
//          (dlp_lg_sut_http_create).
#ifndef DLP_LOADGEN_SUT_H
#define DLP_LOADGEN_SUT_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// --- the System Under Test interface (MLPerf's SystemUnderTest: IssueQuery / FlushQueries) ---------------
typedef struct dlp_lg_sample {
    uint64_t id;     // response id: pass it back in dlp_lg_response
    uint32_t index;  // which sample of the library (the SUT maps it to its data: a JPEG body, a tensor)
} dlp_lg_sample;

typedef enum {
    DLP_LG_OK = 0,
    DLP_LG_REJECTED,  // the SUT refused it (HTTP 503: queue full)
    DLP_LG_TIMEOUT,   // a deadline passed (HTTP 504, or the client's receive timeout)
    DLP_LG_ERROR,     // anything else (connection refused or reset, HTTP 4xx/5xx, engine error)
    DLP_LG_OUTCOME_COUNT
} dlp_lg_outcome;
const char *dlp_lg_outcome_name(dlp_lg_outcome o);

typedef struct dlp_lg_response {
    uint64_t id;
    dlp_lg_outcome outcome;
    int32_t top1;  // predicted class when known (-1 otherwise); for accuracy runs
    int has_server_times;             // the service reported where the time went (dlperf serve's JSON does)
    int64_t server_queue_ns, server_infer_ns;
} dlp_lg_response;

// Where a SUT reports responses: fn(ctx, responses, n) from any thread, exactly once per sample.
typedef struct dlp_lg_done {
    void (*fn)(void *ctx, const dlp_lg_response *r, size_t n);
    void *ctx;
} dlp_lg_done;

typedef struct dlp_lg_sut {
    const char *name;
    void *ctx;
    // Starts work on n samples and returns without waiting for them. Each sample is answered through
    // done->fn exactly once, from any thread, possibly before issue_query returns; `done` stays valid until
    // the last answer. On a non-OK return none of these samples was taken (the harness counts them failed).
    dlp_status (*issue_query)(void *ctx, const dlp_lg_sample *s, size_t n, const dlp_lg_done *done);
    void (*flush)(void *ctx);          // optional: no more queries for now (MLPerf's FlushQueries)
    json_t *(*stats_json)(void *ctx);  // optional: the SUT's own counters, for the result
    void (*destroy)(void *ctx);        // optional: joins the SUT's threads (answering what is left) and frees
} dlp_lg_sut;

void dlp_lg_sut_destroy(dlp_lg_sut *sut);

// In-process SUT: worker threads take up to max_batch queued samples at a time (never waiting for more) and
// call fn(ctx, worker, indices, n, top1) synchronously. The inference engine plugs in here: fn looks the
// samples up in its preloaded library, runs the plan and writes each sample's top-1 class (or -1).
// fn returns DLP_OK or an error (every sample of that call is then answered DLP_LG_ERROR).
typedef dlp_status (*dlp_lg_infer_fn)(void *ctx, int worker, const uint32_t *indices, int n, int32_t *top1);
typedef struct dlp_lg_inproc_cfg {
    dlp_lg_infer_fn fn;
    void *ctx;
    int max_batch;  // samples per call (>= 1)
    int threads;    // worker threads (>= 1); a plan is not re-entrant, so one plan per worker
    const char *name;
} dlp_lg_inproc_cfg;
dlp_status dlp_lg_sut_inproc_create(const dlp_lg_inproc_cfg *cfg, dlp_lg_sut *out);

// HTTP SUT: POSTs sample i's body (bodies[i % nbodies]) to url over at most `connections` keep-alive
// connections (one thread each). 200 -> OK (top-1 taken from the JSON when present), 503 -> REJECTED,
// 504 or a receive timeout -> TIMEOUT, anything else -> ERROR; every status and error kind is counted.
typedef struct dlp_lg_http_cfg {
    const char *url;                 // http://host:port/path
    const void *const *bodies;       // not copied: must outlive the SUT
    const size_t *body_lens;
    int nbodies;
    const char *content_type;        // "image/jpeg"
    int connections;                 // >= 1
    int64_t connect_timeout_ns, send_timeout_ns, recv_timeout_ns;
    int64_t max_pending;             // samples waiting for a free connection beyond this are REJECTED locally
    const char *extra_headers;       // NULL or "Name: value\r\n" lines sent with every request
    int kserve;                      // answers are KServe v2 inference responses: top-1 is the argmax of
                                     // outputs[0].data (else the first "class" of dlperf serve's answer)
} dlp_lg_http_cfg;

dlp_status dlp_lg_sut_http_create(const dlp_lg_http_cfg *cfg, dlp_lg_sut *out);

#endif
