// serve/stack: everything a served model is made of, opened and closed by one call each — the model with its
// weights (or its seeded init), one plan ladder per calling thread (serve/ladder), the JPEG preprocessing in the
// first plan's input format, checked against the engine's sample size and optionally warmed up. `dlperf serve` opens
// one with one ladder; `dlperf loadgen --sut local` one with a ladder per SUT thread. The one constructor of both.
// Defines: dlp_serve_stack_cfg, dlp_serve_stack, dlp_serve_stack_open, dlp_serve_stack_close.
#ifndef DLP_SERVE_STACK_H
#define DLP_SERVE_STACK_H
#include "run/infer.h"
#include "serve/ladder.h"
#include "serve/serve.h"

typedef struct dlp_serve_stack_cfg {
    dlp_infer_model_cfg model;  // arch, classes, size, weights (NULL: the seeded random init), seed
    // DLP_WARN format when the model has no weights: %s the arch, %lld the seed (NULL: no warning).
    const char *random_init_warning;
    const char *device;         // cpu | ref | cuda | sim:<gpu>
    dlp_dtype precision;
    int threads;                // compute threads: each plan's (0: the backend's default), or with share_threads...
    int share_threads;          // ...1: all copies' together (0: all allowed CPUs), at least 1 per copy
    int max_batch;              // the largest batch of each ladder
    int single_plan;            // one plan of max_batch only, no ladder
    int copies;                 // ladders (a plan is not re-entrant: one per calling thread); 0 counts as 1
    int workers;                // threads calling the preprocessing at once (0 counts as 1)
    int dct_scaling;            // the preprocessing may decode at a DCT scale (faster, not bit-exact with Pillow)
    int warm;                   // one call per plan on zeros before returning
    dlp_infer_calib_cfg calib;  // precision int8: how the model's activation ranges are found (run/infer.h)
} dlp_serve_stack_cfg;

typedef struct dlp_serve_stack {
    dlp_infer_model model;
    int have_model;
    dlp_serve_ladder *ladders;       // (copies); ladders[i].engine is the serving engine of calling thread i
    int copies;
    dlp_infer_prep *prep;            // the first plan's input format, cfg.workers transformers
    dlp_serve_preprocess preprocess; // prep as the service's request preprocessing
} dlp_serve_stack;

// On error nothing stays open (*out zeroed).
dlp_status dlp_serve_stack_open(const dlp_serve_stack_cfg *cfg, dlp_serve_stack *out);
// Safe on a zeroed or already closed stack.
void dlp_serve_stack_close(dlp_serve_stack *s);

#endif
