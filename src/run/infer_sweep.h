// run/infer_sweep: `dlperf infer`'s measurement over batch sizes — the inputs (a dataset's val split or JPEG files),
// the hardware monitor, per batch size an inference plan with the inputs prepared in its input format (again only
// when a plan wants another format), then dlp_infer_bench; the figures go into a dlperf.infer/1 result and, as they
// come, to the caller's callbacks (which print them).
// Defines: dlp_infer_sweep_cfg, dlp_infer_sweep, dlp_infer_plan_summary.
#ifndef DLP_RUN_INFER_SWEEP_H
#define DLP_RUN_INFER_SWEEP_H
#include <jansson.h>
#include <stddef.h>

#include "run/infer.h"

typedef struct dlp_infer_sweep_cfg {
    const char *data;              // the dataset whose val split feeds the runs (when no images)
    const char *images;            // a JPEG file or a directory of them instead
    int samples;                   // images preprocessed into memory (FROM_TENSOR) or cycled through (inline JPEG)
    const int *batches;
    int nbatches;
    dlp_infer_bench_cfg bench;     // from, warmup, iters, min_duration_s, max_iters, workers, dct_scaling (the
                                   // inputs and the monitor are set here)
    int mon_interval_ms;           // 0: no monitor
    const char *mon_csv;
    // Each may be NULL. on_inputs: the model and inputs are ready (src: where the images come from); on_library:
    // the samples were preprocessed for engine e; on_plan: the first plan, as its JSON; on_point: a batch size measured.
    void (*on_inputs)(void *ctx, const dlp_infer_model *m, const char *src);
    void (*on_library)(void *ctx, const dlp_infer_library *lib, const dlp_infer_engine *e);
    void (*on_plan)(void *ctx, const dlp_infer_engine *e, json_t *plan);
    void (*on_point)(void *ctx, const dlp_infer_point *p);
    void *ctx;
} dlp_infer_sweep_cfg;

// result gets "results" (one point per batch size), "samples" (FROM_TENSOR), "plan" and "monitor".
dlp_status dlp_infer_sweep(dlp_infer_model *m, const dlp_infer_engine_cfg *ec0, const dlp_infer_sweep_cfg *c,
                           json_t *result);

// " (oneDNN avx512_core_bf16, 53 BN folded, 16 residual adds fused)" from the backend's plan_info, when given.
void dlp_infer_plan_summary(json_t *plan, char *out, size_t len);

#endif
