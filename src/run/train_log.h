// run/train_log: the machine-readable logs of a training run, written from its events (dlp_train_event): MLPerf
// Training's log with ResNet's keys in the reference's order (docs/training.md, "MLPerf log"), and the per-step
// JSON lines (--steps-jsonl).
// Defines: dlp_train_mllog, dlp_train_mllog_status_choices, dlp_train_mllog_start, dlp_train_mllog_event,
//          dlp_train_mllog_stop, dlp_train_steps_line.
#ifndef DLP_RUN_TRAIN_LOG_H
#define DLP_RUN_TRAIN_LOG_H
#include <stdio.h>

#include "core/opts.h"
#include "run/mllog.h"
#include "run/train.h"

typedef struct dlp_train_mllog {
    dlp_mllog *ml;  // NULL: no log (every call does nothing)
    const dlp_train_cfg *c;
    const char *org, *platform;  // submission_org and _platform (NULL or "": dlperf, the device and this CPU)
    int status;                  // submission_status: a value of dlp_train_mllog_status_choices
    int64_t t_init_ms;           // init_start's time (the log opens once the run is set up)
    int world, in_block, in_epoch, in_eval, has_val;
    int64_t epoch;  // the epoch open in the log (0-based)
} dlp_train_mllog;

// onprem|cloud|preview|research
extern const dlp_opt_choice dlp_train_mllog_status_choices[];

// At the START event: opens the log at path, writes the submission and the configuration, init_stop, run_start and
// the first block and epoch.
dlp_status dlp_train_mllog_start(dlp_train_mllog *x, const char *path, const dlp_train_event *ev);
// Blocks, epochs and evaluations from the STEP, EPOCH and EVAL events.
void dlp_train_mllog_event(dlp_train_mllog *x, const dlp_train_event *ev);
// Closes the open epoch, writes run_stop (success or aborted) and closes the log.
dlp_status dlp_train_mllog_stop(dlp_train_mllog *x, int success);

// One STEP event as a JSON line: step, epoch, time, loss, lr, images, ms, img/s and the phases' ms.
void dlp_train_steps_line(FILE *f, const dlp_train_event *ev, int batch);

#endif
