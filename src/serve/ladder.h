// serve/ladder: the serving engine of a model — its inference plans of batch 1, 2, 4, .. max (or max alone) on one
// backend, wrapped as one dlp_serve_engine whose calls each run on the smallest plan that holds them. `dlperf serve`
// makes one; `dlperf loadgen --sut local` one per SUT thread. The one constructor of both.
// Defines: dlp_serve_ladder_cfg, dlp_serve_ladder, dlp_serve_ladder_open, dlp_serve_ladder_warm,
//          dlp_serve_ladder_describe, dlp_serve_ladder_close.
#ifndef DLP_SERVE_LADDER_H
#define DLP_SERVE_LADDER_H
#include <stddef.h>

#include "run/infer.h"
#include "serve/serve.h"

typedef struct dlp_serve_ladder_cfg {
    const dlp_infer_model *model;  // loaded, with its weights (borrowed: it must outlive the ladder)
    const char *device;            // cpu | ref | cuda | sim:<gpu>
    dlp_dtype precision;
    int threads;                   // compute threads of each plan (0: the backend's default)
    int max_batch;                 // the largest batch
    int single_plan;               // one plan of max_batch only
} dlp_serve_ladder_cfg;

typedef struct dlp_serve_ladder {
    dlp_infer_engine plans[DLP_SERVE_MAX_PLANS];  // ascending batches; the last is max_batch
    int batches[DLP_SERVE_MAX_PLANS];
    int n;
    dlp_serve_engine engine;  // infer() on the smallest plan that holds n samples
    double create_ms;         // all plans together
} dlp_serve_ladder;

dlp_status dlp_serve_ladder_open(const dlp_serve_ladder_cfg *cfg, dlp_serve_ladder *out);
// One call per plan on a full batch of zeros, so first requests do not pay for first-touch costs.
dlp_status dlp_serve_ladder_warm(dlp_serve_ladder *l);
// "1,2,4,8" into buf.
void dlp_serve_ladder_describe(const dlp_serve_ladder *l, char *buf, size_t len);
void dlp_serve_ladder_close(dlp_serve_ladder *l);

#endif
