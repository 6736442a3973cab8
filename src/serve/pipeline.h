// serve/pipeline: the request path behind the HTTP front end, independent of HTTP — bounded admission, a pool
// of preprocess workers, the dynamic batcher (one thread that also runs the engine), deadlines and draining.
// Defines: dlp_serve_req, dlp_serve_pipeline, dlp_serve_pipeline_create/submit/drain/free, dlp_serve_pipeline_depth.
#ifndef DLP_SERVE_PIPELINE_H
#define DLP_SERVE_PIPELINE_H
#include <stdint.h>

#include "serve/metrics.h"
#include "serve/serve.h"
#include "serve/tensor.h"

enum { DLP_SERVE_IN_JPEG = 0, DLP_SERVE_IN_TENSOR };

typedef struct dlp_serve_req dlp_serve_req;
struct dlp_serve_req {
    // In: set by the submitter.
    const uint8_t *body;
    size_t len;
    int kind;                // DLP_SERVE_IN_JPEG: body is a JPEG; DLP_SERVE_IN_TENSOR: body holds `tensor`'s
    dlp_serve_tensor tensor; // elements, checked against the preprocess format (dlp_serve_tensor_check)
    float *logits;           // optional: the request's num_classes logits are copied here
    int64_t t_arrival_ns;
    int64_t deadline_ns;   // absolute; 0: none
    // Called exactly once, from a pipeline thread, when the request has its answer; the pipeline does not
    // touch the request afterwards.
    void (*done)(dlp_serve_req *r);
    void *user;
    // Out.
    int status;            // 200, 400, 415, 500, 503, 504
    char error[200];
    int ntop;
    int top_class[DLP_SERVE_MAX_TOPK];
    float top_prob[DLP_SERVE_MAX_TOPK];
    int batch_size;        // the batch it ran in
    int64_t t_decode_start_ns, t_ready_ns, t_infer_start_ns, t_infer_end_ns;
    // Private to the pipeline.
    int slot;
    dlp_serve_req *next;
};

typedef struct dlp_serve_pipeline dlp_serve_pipeline;

dlp_status dlp_serve_pipeline_create(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine,
                                     const dlp_serve_preprocess *pre, dlp_serve_metrics *metrics,
                                     dlp_serve_pipeline **out);
// DLP_OK: taken, r->done will be called. DLP_ERR_BUSY: the queue is full. DLP_ERR_CANCELLED: draining.
// On an error r->done is not called (the caller answers 503). No error message is recorded for these two.
dlp_status dlp_serve_pipeline_submit(dlp_serve_pipeline *p, dlp_serve_req *r);
// Requests admitted and not yet answered; of those, waiting (not yet in a running batch).
void dlp_serve_pipeline_depth(dlp_serve_pipeline *p, int *admitted, int *waiting);
// Stops admitting and waits up to timeout_ns for every admitted request to be answered; then answers what is
// still queued 503 and waits for the running batch. Returns DLP_ERR_TIMEOUT if it had to cut requests off.
dlp_status dlp_serve_pipeline_drain(dlp_serve_pipeline *p, int64_t timeout_ns);
// Joins the threads (answering anything left 503) and frees.
void dlp_serve_pipeline_free(dlp_serve_pipeline *p);

// The answer's JSON body (malloc'd; *len its length). 200: {"top5": [{"class", "label"?, "prob"}...], "batch",
// "queue_ms", "infer_ms"}; otherwise {"error": "...", "status": N}.
char *dlp_serve_answer_json(const dlp_serve_req *r, const char *const *labels, int nlabels, size_t *len);
char *dlp_serve_error_json(int status, const char *msg, size_t *len);

#endif
