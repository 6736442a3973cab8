// run/train_impl: internals shared by the files of the training loop (not a public header).
// Files: train.c (setup, the loop, evaluation, checkpoints), train_result.c (figures, verdict, the JSON result),
// train_peak.c (the backend's peak GFLOP/s with its cache, default thread counts).
// Defines: dlp_trainer, dlp_train_epoch_stats, DLP_TRAIN_* limits, dlp_train_finish_result.
#ifndef DLP_RUN_TRAIN_IMPL_H
#define DLP_RUN_TRAIN_IMPL_H
#include <jansson.h>
#include <stdint.h>

#include "backend/backend.h"
#include "data/loader.h"
#include "dist/comm.h"
#include "hw/cpushare.h"
#include "monitor/monitor.h"
#include "nn/checkpoint.h"
#include "nn/schedule.h"
#include "run/train.h"


// Figures each rank of a data-parallel run sends rank 0 at the end (train.c gather_ranks), in this order.
enum { DLP_TRAIN_RANK_STEPS, DLP_TRAIN_RANK_IMAGES, DLP_TRAIN_RANK_DATA_WAIT_MS, DLP_TRAIN_RANK_COMPUTE_MS,
       DLP_TRAIN_RANK_ALLREDUCE_MS, DLP_TRAIN_RANK_LOOP_MS, DLP_TRAIN_RANK_CPU_SHARE, DLP_TRAIN_RANK_FIGS };

// Per-epoch accounting (one entry per epoch of the run, allocated before the loop).
typedef struct dlp_train_epoch_stats {
    int64_t steps, images, correct_top1;
    double loss_sum;      // sum of step losses
    int64_t loop_ns;      // training loop time spent in this epoch
    int64_t data_wait_ns;
    int has_val;
    double val_top1, val_top5, val_loss;
} dlp_train_epoch_stats;

typedef struct dlp_trainer {
    dlp_train_cfg c;               // the configuration with defaults resolved
    const dlp_backend *ops;
    const char *dev_arg;
    dlp_dataset *train_ds, *val_ds;
    int own_train_ds, own_val_ds;
    char train_where[4096], val_where[4096];
    dlp_net net;
    int have_net;
    float *params, *bufs, *mom;
    dlp_plan *plan;
    dlp_comm *comm;                // the run's communicator (local: one process)
    int rank, world;               // dlp_comm_rank / dlp_comm_size
    struct dlp_step_overlap *overlap;  // several ranks: gradient buckets reduced during backward (run/step.h)
    char dev_arg_buf[16];          // cuda under mpirun: the local rank as the device index
    double *rank_figs;             // rank 0, at the end: DLP_TRAIN_RANK_FIGS figures per rank (train.c gather_ranks)
    double plan_ms;
    dlp_layout in_layout;
    dlp_dtype in_dtype;
    dlp_loader *tl, *vl;
    dlp_monitor *mon;
    dlp_lr_schedule sched;
    dlp_train_pos pos;
    int64_t spe, total_steps, nepochs, stop_at;
    int async;                     // the backend has sync: its calls may return before the device is done
    // resume
    int resumed;
    char resume_path[1024];
    dlp_train_pos resume_pos;
    // accounting
    int64_t t_run0, t_loop0, t_setup_end;
    struct dlp_cpushare *share_meter;         // the run's threads' CPU share, start to end (hw/cpushare)
    dlp_cpushare_sample share;                // its reading at the end
    struct dlp_cpushare *loop_meter;          // the same over the training loop alone (setup is one thread)
    dlp_cpushare_sample loop_share;           // its reading at the end: the slowest thread's share comes from it
    int64_t ph_ns[DLP_TRAIN_PH_COUNT];
    int64_t steady_ph_ns[DLP_TRAIN_PH_COUNT];
    int64_t steps_run, images, steady_steps, steady_images;
    int64_t eval_ns, ck_ns;
    double first_loss, last_loss, last_lr;
    dlp_train_epoch_stats *epochs;  // (nepochs)
    json_t *evals;                  // array of eval records
    double best_top1, last_top1, last_top5;
    int64_t last_eval_step, last_ck_step;
    int64_t eval_passes;  // the validation loader's "epoch": consecutive, so it makes the next pass's first batches
                          // while training goes on (val order and crops do not depend on it)
    json_t *ck_written;             // array of paths
    int ck_lock_fd;                 // the checkpoint directory's writer lock (-1: none)
    char last_ck[1024];
    // LOG interval
    int64_t log_loop_ns, log_step0, log_wait_ns;  // loop time, first step and data wait of the interval
    double recent_step_ns;          // exponential average of the step time (ETA)
    // peak
    double peak_gflops;
    const char *peak_source;
    char peak_note[256];
    // device-side input totals (input_stats)
    double in_copy_ms, in_stall_ms;
    int64_t in_copies;
    int have_input_stats;
    char stopped_by[32];
} dlp_trainer;

// Fills r (figures, verdict) and r->json from t; safe to call on a partly set-up trainer.
void dlp_train_finish_result(dlp_trainer *t, dlp_train_result *r);

#endif
