// serve/kserve: the Open Inference Protocol (KServe v2, also Triton's HTTP API) on the server side — the /v2
// routes, the model's metadata, an inference request (JSON tensors or the binary-data extension) parsed into one
// pipeline request, and the answer (logits, or top-k with the classification extension; as JSON or binary).
// No HTTP here: serve/server_mhd.c calls it. The client side (loadgen's requests) is loadgen/kserve.
// Defines: dlp_kserve_route, dlp_kserve_route_parse, dlp_kserve_req, dlp_kserve_parse, dlp_kserve_req_free,
//          dlp_kserve_answer, dlp_kserve_error_json, dlp_kserve_server_metadata, dlp_kserve_model_metadata.
#ifndef DLP_SERVE_KSERVE_H
#define DLP_SERVE_KSERVE_H
#include <stddef.h>
#include <stdint.h>

#include "serve/pipeline.h"

typedef enum {
    DLP_KSERVE_NONE = 0,      // not a /v2 path
    DLP_KSERVE_NOT_FOUND,     // under /v2 but no such route
    DLP_KSERVE_LIVE,          // GET /v2/health/live
    DLP_KSERVE_READY,         // GET /v2/health/ready
    DLP_KSERVE_SERVER_META,   // GET /v2
    DLP_KSERVE_MODEL_META,    // GET /v2/models/NAME[/versions/V]
    DLP_KSERVE_MODEL_READY,   // GET /v2/models/NAME[/versions/V]/ready
    DLP_KSERVE_INFER,         // POST /v2/models/NAME[/versions/V]/infer
} dlp_kserve_route;

// The route of a URL path; for the model routes, 0 when NAME (and V, when given: "1") is the served model, else
// 404 with the message in err.
dlp_kserve_route dlp_kserve_route_parse(const char *url, const char *model, int *status, char *err, size_t errlen);

typedef struct dlp_kserve_req {
    char id[128];            // the request's "id", echoed (empty: none)
    int binary_out;          // answer the output with the binary-data extension
    int classification;      // > 0: the top-k classes as BYTES ("value:index[:label]") instead of the logits
    int kind;                // DLP_SERVE_IN_JPEG or DLP_SERVE_IN_TENSOR
    dlp_serve_tensor tensor; // DLP_SERVE_IN_TENSOR: its format
    const uint8_t *data;     // the JPEG or the tensor's elements: into the body (binary) or owned (JSON)
    size_t data_len;
    void *owned;
} dlp_kserve_req;

// Parses a POST /v2/models/NAME/infer body. header_len: the Inference-Header-Content-Length header's value (NULL:
// absent, the whole body is JSON). fmt: the model's sample format; nclasses: its outputs. Returns 0 (k filled;
// free with dlp_kserve_req_free) or the HTTP status (400) with a message in err naming the fault.
int dlp_kserve_parse(const uint8_t *body, size_t len, const char *header_len, const dlp_serve_preprocess *fmt,
                     int nclasses, dlp_kserve_req *k, char *err, size_t errlen);
void dlp_kserve_req_free(dlp_kserve_req *k);

// The answer to an inference request r (answered by the pipeline; logits: its nclasses logits). Returns the body
// (malloc'd, *len); *json_len > 0 when it uses the binary-data extension (the Inference-Header-Content-Length).
// r->status != 200: {"error": r->error}.
char *dlp_kserve_answer(const dlp_kserve_req *k, const dlp_serve_req *r, const char *model, const float *logits,
                        int nclasses, const char *const *labels, int nlabels, size_t *len, size_t *json_len);
char *dlp_kserve_error_json(const char *msg, size_t *len);
char *dlp_kserve_server_metadata(size_t *len);
// The model's metadata: its input in the native format of fmt, its output (nclasses FP32 logits).
char *dlp_kserve_model_metadata(const char *model, const char *platform, const dlp_serve_preprocess *fmt,
                                int nclasses, int max_batch, size_t *len);

#endif
