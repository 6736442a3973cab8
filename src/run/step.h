// run/step: one step runner and one bench harness (nccl-tests' common.cu: the harness owns warm-up, timing and
// checking; callers supply only the plan and the batch). A step walks its phases from a table — input copy,
// forward, loss, backward, allreduce, update (an inference step: input and forward) — times each, and handles
// synchronous and asynchronous backends once: with sync_phases the device is waited for after every phase, so each
// phase's time is its own; without, queued work lands on whichever phase waits (the pipelined timing a training run
// wants). A device timer (CUDA events) may replace the host clock. Training (run/train.c), `dlperf nn bench`, the
// probe (perf/probe_compute.c) and the GPU probe (backend/cuda/cuda_probe.c) all step through here.
// Defines: dlp_step_phase, dlp_step_cfg, dlp_step_batch, dlp_step_result, dlp_step_timer, dlp_step_run,
//          dlp_step_bench_cfg, dlp_step_stats, dlp_step_bench_result, dlp_step_bench, dlp_step_bench_free,
//          dlp_step_phase_name, dlp_step_fill_random, dlp_step_overlap (buckets reduced during backward).
#ifndef DLP_RUN_STEP_H
#define DLP_RUN_STEP_H
#include <stdint.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "dist/comm.h"

typedef enum {
    DLP_STEP_INPUT = 0,  // set_input: the host-to-device copy on a GPU (skipped when the batch has no input)
    DLP_STEP_FORWARD,
    DLP_STEP_LOSS,
    DLP_STEP_BACKWARD,   // includes the gradient-bucket callbacks
    DLP_STEP_ALLREDUCE,  // the gradients' mean over the communicator's ranks (nothing on one rank)
    DLP_STEP_UPDATE,
    DLP_STEP_NPHASES
} dlp_step_phase;

const char *dlp_step_phase_name(dlp_step_phase p);  // "input", "forward", "loss", "backward", "allreduce", "update"

// Replaces the host clock (e.g. CUDA events recorded on the plan's stream). mark is called at every phase boundary
// of every step; read gives a step's phase times once the device is done (after the harness's final sync).
typedef struct dlp_step_timer {
    void *ctx;
    // boundary 0: the step starts; boundary k: phase k-1 ended (DLP_STEP_NPHASES: the step ended).
    dlp_status (*mark)(void *ctx, int step, int boundary);
    // Milliseconds of each phase of the timed step (phase_ms[DLP_STEP_NPHASES]) and of the whole step; step
    // counts the timed steps from 0.
    dlp_status (*read)(void *ctx, int step, double *phase_ms, double *step_ms);
} dlp_step_timer;

// Gradient buckets reduced while backward goes on: the plan announces each bucket as its gradients become final
// (dlp_plan_cfg.on_bucket = dlp_step_on_bucket, bucket_ctx = the overlap) and the communicator starts reducing it at
// once; the step's allreduce phase then only waits for what is still in flight. Without announcements the phase
// reduces the whole gradient array itself.
typedef struct dlp_step_overlap dlp_step_overlap;
dlp_status dlp_step_overlap_new(dlp_comm *comm, dlp_step_overlap **out);
void dlp_step_overlap_bind(dlp_step_overlap *o, dlp_plan *plan);  // the plan made with it (its gradient array)
void dlp_step_on_bucket(void *ctx, int64_t offset, int64_t count);
// Totals since it was made: buckets started during backward, and the time from each step's first bucket to the end
// of its backward (reduction hidden behind compute, at most).
void dlp_step_overlap_stats(const dlp_step_overlap *o, int64_t *buckets, int64_t *hidden_ns);
void dlp_step_overlap_free(dlp_step_overlap *o);

typedef struct dlp_step_cfg {
    dlp_plan *plan;
    dlp_comm *comm;         // NULL: one process (the allreduce phase does nothing)
    dlp_step_overlap *overlap;  // NULL: the allreduce phase reduces the whole gradient array after backward
    int train;              // 1: every phase, DLP_PASS_TRAIN; 0: input, forward with DLP_PASS_EVAL, and the loss
                            // when the batch has labels
    int sync_phases;        // wait for the device after each phase (each phase's time its own)
    float label_smoothing;
    const dlp_step_timer *timer;  // NULL: the host clock
    // Optional: called after each phase that ran (timed with it), e.g. to read the output after the forward or the
    // gradients before the update; a status other than DLP_OK ends the step.
    dlp_status (*after_phase)(void *ctx, dlp_step_phase p);
    void *hook_ctx;
} dlp_step_cfg;

typedef struct dlp_step_batch {
    const void *input;      // in the plan's input format; NULL: keep the input already set
    int n;                  // samples (a training step: the plan's batch)
    const int32_t *labels;  // n labels (training; an inference step with labels also computes the loss)
    dlp_sgd sgd;            // the update's hyper-parameters (training)
} dlp_step_batch;

typedef struct dlp_step_result {
    dlp_loss_out loss;                     // steps with a loss phase
    int64_t phase_ns[DLP_STEP_NPHASES];    // host clock
    int64_t t0_ns, t1_ns;                  // the step's start and end (dlp_now_ns)
} dlp_step_result;

// One step. With a timer, marks its boundaries as step number `timed` (negative: not a timed step, no marks).
dlp_status dlp_step_run(const dlp_step_cfg *cfg, const dlp_step_batch *b, int timed, dlp_step_result *r);

typedef struct dlp_step_bench_cfg {
    int warmup;     // untimed steps first
    int min_steps;  // timed steps at least
    int max_steps;  // and at most
    double min_s;   // keep stepping (up to max_steps) until this much time has passed (0: exactly min_steps)
} dlp_step_bench_cfg;

typedef struct dlp_step_stats {
    double mean_ms, p10_ms, p50_ms, p90_ms;
} dlp_step_stats;

typedef struct dlp_step_bench_result {
    int steps;                                 // timed steps
    dlp_step_stats phase[DLP_STEP_NPHASES];
    dlp_step_stats step;                       // the whole step
    double wall_s, cpu_s;                      // over the timed steps: wall time and this process's CPU time
    double loss_first, loss_last;              // training: the first step's loss (warm-up included), the last's
    double *ms;  // steps x (DLP_STEP_NPHASES + 1): each timed step's phases, then its whole time (for other sums)
} dlp_step_bench_result;

// Warm-up, then timed steps; a non-finite training loss is an error (DLP_ERR_NUMERIC). Ends with a sync, so the
// figures hold all the device work. Free the result with dlp_step_bench_free.
dlp_status dlp_step_bench(const dlp_step_cfg *cfg, const dlp_step_batch *b, const dlp_step_bench_cfg *bc,
                          dlp_step_bench_result *out);
void dlp_step_bench_free(dlp_step_bench_result *r);

// n random values of type t into dst (normal for float types, uniform bytes for U8): the inputs a bench feeds.
void dlp_step_fill_random(void *dst, int64_t n, dlp_dtype t, dlp_rng *r);

#endif
