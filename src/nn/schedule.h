// nn/schedule: the learning rate as a function of the optimizer step — linear scaling by global batch size
// (Goyal et al.: lr = base_lr * batch * world / 256), a linear warm-up, then constant, cosine or step decay.
// The schedule is a pure function of the step, so a resumed run needs only the step (and this config).
// Defines: dlp_lr_decay, dlp_lr_schedule, dlp_lr_schedule_default, dlp_lr_peak, dlp_lr_at, dlp_lr_schedule_check,
//          dlp_lr_schedule_to_json, dlp_lr_schedule_from_json, dlp_lr_decay_name, dlp_lr_decay_choices.
#ifndef DLP_NN_SCHEDULE_H
#define DLP_NN_SCHEDULE_H
#include <jansson.h>
#include <stdint.h>

#include "core/opts.h"
#include "core/status.h"

typedef enum { DLP_LR_CONSTANT = 0, DLP_LR_COSINE, DLP_LR_STEP, DLP_LR_DECAY_COUNT } dlp_lr_decay;

typedef struct dlp_lr_schedule {
    double base_lr;          // learning rate for a global batch of 256 (when scale_by_batch) or the peak itself
    int scale_by_batch;      // 1: peak = base_lr * batch * world / 256; 0: peak = base_lr
    int batch, world;        // per-process batch and number of processes
    int64_t steps_per_epoch; // for the *_epochs fields (0: they must be 0)
    int64_t total_steps;     // the run's length: cosine reaches final_lr here
    double warmup_epochs;    // warm-up length in epochs (converted with steps_per_epoch), or
    int64_t warmup_steps;    //   in steps (the two add up)
    double warmup_start;     // warm-up starts at peak * warmup_start (0.1 by default) and rises linearly
    dlp_lr_decay decay;
    double final_lr;         // cosine: the lr at total_steps (absolute; 0 by default)
    double step_gamma;       // step: multiply by gamma at each milestone (0.1)
    double step_epochs[8];   // step: milestones in epochs from the start (30, 60, 80), ascending; 0 ends the list
} dlp_lr_schedule;

const char *dlp_lr_decay_name(dlp_lr_decay d);  // "constant", "cosine", "step"
// The --schedule choices (core/opts): cosine|step|constant -> DLP_LR_*.
extern const dlp_opt_choice dlp_lr_decay_choices[];
// Defaults: base_lr 0.1 per 256 images, scaled; no warm-up; warmup_start 0.1; cosine to 0; gamma 0.1 at
// epochs 30, 60, 80; batch 256, world 1.
void dlp_lr_schedule_default(dlp_lr_schedule *s);
dlp_status dlp_lr_schedule_check(const dlp_lr_schedule *s);  // names the bad field
double dlp_lr_peak(const dlp_lr_schedule *s);
int64_t dlp_lr_warmup_steps(const dlp_lr_schedule *s);
// The lr for optimizer step `step` (0-based: the first update uses dlp_lr_at(s, 0)):
//   step < W (warm-up):  peak * (warmup_start + (1 - warmup_start) * step / W)
//   cosine:              final + (peak - final) * (1 + cos(pi * min(1, (step - W) / (total - W)))) / 2
//   step decay:          peak * gamma ^ (number of milestones <= step / steps_per_epoch)
//   constant:            peak
double dlp_lr_at(const dlp_lr_schedule *s, int64_t step);

json_t *dlp_lr_schedule_to_json(const dlp_lr_schedule *s);
dlp_status dlp_lr_schedule_from_json(const json_t *o, dlp_lr_schedule *s, const char *where);

#endif
