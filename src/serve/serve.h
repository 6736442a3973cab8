// serve: the image-classification service — an HTTP/1.1 front end (libmicrohttpd) over a request pipeline:
// bounded admission queue -> preprocess workers (JPEG decode/resize) -> dynamic batcher -> inference engine ->
// softmax top-k -> JSON. The engine and the preprocessing plug in through two small interfaces.
// Defines: dlp_serve_engine, dlp_serve_preprocess, dlp_serve_cfg, dlp_serve_cfg_default, dlp_server and its
//          start/stop/stats, dlp_serve_run (until SIGINT/SIGTERM), dlp_serve_block_stop_signals,
//          dlp_serve_is_jpeg, dlp_serve_engine_from_plan(s), dlp_serve_plan_ladder,
//          dlp_serve_engine_plan_calls.
#ifndef DLP_SERVE_H
#define DLP_SERVE_H
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DLP_SERVE_MAX_TOPK 10

// The inference engine: the lead wires the backend plan in (set_input + forward(DLP_PASS_EVAL) + get_output).
// infer() is called from one thread only (the batcher), with 1 <= n <= max_batch samples laid out back to
// back in `batch` (n * sample_bytes, each as the preprocess wrote it); it writes n * num_classes logits.
typedef struct dlp_serve_engine {
    const char *name;
    void *ctx;
    int max_batch;        // the plan's batch: the largest n infer() takes
    size_t sample_bytes;  // one preprocessed input sample (e.g. 3*224*224*4 for fp32 NCHW)
    int num_classes;
    dlp_status (*infer)(void *ctx, const void *batch, int n, float *logits);
} dlp_serve_engine;

// The engine over a backend inference plan made by the caller (dlp_plan_create(ops, net, {batch, train = 0,
// precision, threads}), weights set): infer = set_input(n) + forward(DLP_PASS_EVAL) + get_output. The input
// sample is net layer 0 in the plan's input_format (layout, dtype); the classes are the last layer's outputs.
// The plan stays the caller's; free the adapter with dlp_serve_engine_from_plan_free.
struct dlp_plan;
struct dlp_net;
dlp_status dlp_serve_engine_from_plan(struct dlp_plan *plan, const struct dlp_net *net, int batch,
                                      dlp_serve_engine *out);
// A ladder of plans of the same model, precision and input format with ascending batches (e.g. 1, 2, 4, 8): each
// call runs on the smallest plan that holds its n samples (a plan computes its whole batch whatever n is), so a
// lone request costs one image, not max_batch. max_batch is the last plan's.
#define DLP_SERVE_MAX_PLANS 8
// The ladder's batches for a largest batch: 1, 2, 4, ... below max_batch, then max_batch (at most
// DLP_SERVE_MAX_PLANS entries, into batches); returns how many.
int dlp_serve_plan_ladder(int max_batch, int *batches);
dlp_status dlp_serve_engine_from_plans(struct dlp_plan *const *plans, const int *batches, int nplans,
                                       const struct dlp_net *net, dlp_serve_engine *out);
// Calls run so far on plan i of an engine made by dlp_serve_engine_from_plan(s) (its batch in *batch); -1 when
// there is no plan i. Read it after the batcher stopped.
int64_t dlp_serve_engine_plan_calls(const dlp_serve_engine *e, int i, int *batch);
void dlp_serve_engine_from_plan_free(dlp_serve_engine *e);

// Request preprocessing: one JPEG body -> one input sample in the engine's layout and type. Called
// concurrently from `workers` threads; `worker` in [0, workers) lets it keep per-thread state (decompressor,
// scratch). Errors decide the answer: DLP_ERR_FORMAT -> 400 (the message says what is wrong with the image),
// DLP_ERR_UNSUPPORTED -> 415, anything else -> 500. The data module's single-image val transform
// (shorter side 256, centre crop 224, normalize) plugs in here.
// The sample format run() writes (channels, height, width, layout, element type) also lets the service take
// tensors (KServe v2 /infer with FP32/BF16/UINT8 data): they are converted into this format by serve/tensor.c.
// channels == 0: the format is not described and tensor inputs are refused (400).
typedef struct dlp_serve_preprocess {
    const char *name;
    void *ctx;
    dlp_status (*run)(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst);
    int channels, height, width;
    int layout;  // dlp_layout of the sample
    int dtype;   // dlp_dtype of the sample
} dlp_serve_preprocess;

typedef struct dlp_serve_cfg {
    const char *host;          // bind address: "127.0.0.1" (default), "::1", "0.0.0.0"
    int port;                  // 0: any free port (dlp_server_port tells which)
    int max_batch;             // dynamic batching: a batch closes at this many requests...
    int64_t max_delay_ns;      // ...or when its oldest request has waited this long (2 ms)
    int queue_capacity;        // requests admitted at once (decoding, waiting, running); beyond: 503
    int workers;               // preprocess threads
    int64_t timeout_ns;        // per-request deadline from arrival; expired requests get 504 without running
    int64_t max_body_bytes;    // 413 beyond
    int max_connections;       // open connections at once; a new one beyond evicts the oldest connection still
                               // sending its header (MHD_OPTION_CONNECTION_LIMIT is this plus a reserve)
    int max_conns_per_ip;      // per client address (MHD_OPTION_PER_IP_CONNECTION_LIMIT); 0: no limit
    int64_t header_timeout_ns; // a request's header must arrive within this of the connection's start or the
                               // previous answer (keep-alive waits included), else the connection is cut
    int idle_timeout_s;        // a connection with no traffic is closed (MHD_OPTION_CONNECTION_TIMEOUT)
    int64_t read_timeout_ns;   // a whole request (header + body) must arrive within this: slowloris cut-off
    size_t conn_memory_bytes;  // per-connection header/buffer memory (MHD_OPTION_CONNECTION_MEMORY_LIMIT)
    int http_threads;          // MHD polling threads
    int64_t drain_timeout_ns;  // graceful stop: how long requests in flight may take to finish
    int topk;                  // classes in each answer (5)
    const char *const *labels; // optional class names (labels[i] for class i), nlabels of them
    int nlabels;
    const char *model_name;    // the KServe v2 model name (/v2/models/NAME); NULL: "model"
    struct dlp_monitor *monitor;  // optional: counts requests, images and body bytes into it, and GET /metrics
                                  // appends its exposition (CPU, memory, ... of the machine while serving)
} dlp_serve_cfg;

void dlp_serve_cfg_default(dlp_serve_cfg *c);
dlp_status dlp_serve_cfg_check(const dlp_serve_cfg *c, const dlp_serve_engine *e);

// Counters since start, by HTTP status (also in /metrics).
typedef struct dlp_serve_stats {
    int64_t requests;          // answered, every status
    int64_t by_status[600];
    int64_t admitted;          // taken into the pipeline
    int64_t inferred;          // samples run through the engine
    int64_t batches;
    int64_t connections_total;
    int64_t reaped;            // connections cut off by the read timeout
    int64_t aborted;           // requests that ended with no answer sent (the client hung up)
    int64_t client_gone;       // ...of which admitted and answered by the pipeline: undeliverable
    int inflight;              // admitted and not yet answered, now
    int open_connections;      // now
} dlp_serve_stats;

typedef struct dlp_server dlp_server;

// Starts listening. Neither engine nor preprocess is copied: they must outlive the server.
dlp_status dlp_server_start(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine,
                            const dlp_serve_preprocess *pre, dlp_server **out);
int dlp_server_port(const dlp_server *s);
// Graceful stop: stop accepting connections, answer new requests on open ones 503 (Connection: close),
// finish every request in flight (up to drain_timeout; what is still queued then gets 503), then close.
dlp_status dlp_server_stop(dlp_server *s);
void dlp_server_free(dlp_server *s);
void dlp_server_stats(dlp_server *s, dlp_serve_stats *out);
json_t *dlp_serve_stats_to_json(const dlp_serve_stats *st);
// The Prometheus text that GET /metrics returns (malloc'd).
char *dlp_server_metrics_text(dlp_server *s);

// Runs the server until SIGINT or SIGTERM, then stops gracefully. Blocks both signals in the calling thread
// before its threads start (so sigwait gets them) and restores the mask at the end; a caller that starts
// threads of its own before (a monitor) must block SIGINT and SIGTERM first. port_file: when not
// NULL, the bound port is written there (atomically) once listening. *signo gets the signal that stopped it.
dlp_status dlp_serve_run(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine, const dlp_serve_preprocess *pre,
                         const char *port_file, dlp_serve_stats *stats, int *signo);
// Blocks SIGINT and SIGTERM in the calling thread, so threads started after inherit the mask and only a sigwait
// receives them; set gets the two (for sigwait), old the mask to restore (pthread_sigmask(SIG_SETMASK, old, NULL)).
void dlp_serve_block_stop_signals(sigset_t *set, sigset_t *old);

// Class names (cfg.labels) come from run/infer's dlp_infer_labels_load, so `dlperf infer` and the service agree.

// 1 when the body starts with a JPEG SOI marker (FF D8 FF): data/jpeg's dlp_jpeg_sniff, the one signature check.
int dlp_serve_is_jpeg(const uint8_t *b, size_t len);

#endif
