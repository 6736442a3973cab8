// nn/checkpoint: training checkpoints that a run can resume from with the same loss curve as an uninterrupted
// run. Two files, each written atomically (temporary file, fsync, rename; core/fs):
//   <path>                 the model: safetensors with torchvision's state_dict names (num_batches_tracked
//                          included), loadable by torchvision with load_state_dict(strict=True);
//   <stem>.state.safetensors  the optimizer's momentum buffers ("momentum.<param name>", F32) and, in its
//                          __metadata__, the position (JSON), the LR schedule (JSON) and the run's config (JSON).
// Both carry the same "dlperf.checkpoint_id"; a load refuses a pair from different saves. Published as one unit,
// safe against SIGKILL at any instant (tests/unit/test_nn_checkpoint_crash.c): with no model at the path, the state is
// renamed into place and the model's rename completes the pair — a state without its model is an unpublished
// leftover (nn/ckdir.h removes it). Replacing a pair, the earlier one stays until the new model is published: the
// new state is written as <stem>.state.safetensors.next, the model renamed over the old one, then the .next renamed
// over the old state; a load whose model's id matches the .next (killed between the two renames) takes the .next,
// and the next save (or dlp_checkpoint_settle) finishes or discards what a killed save left.
// Defines: dlp_train_pos, dlp_checkpoint, dlp_checkpoint_save, dlp_checkpoint_load, dlp_checkpoint_free,
//          dlp_checkpoint_state_path, dlp_checkpoint_next_path, dlp_checkpoint_settle.
#ifndef DLP_NN_CHECKPOINT_H
#define DLP_NN_CHECKPOINT_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"
#include "core/status.h"
#include "nn/schedule.h"

// Where a training run stands. A loop that draws its data order from (seed, epoch) and its augmentation from
// (seed, epoch, sample) continues exactly from here: skip step_in_epoch batches of epoch `epoch`.
typedef struct dlp_train_pos {
    int64_t epoch;          // the epoch in progress (0-based); epochs before it are complete
    int64_t step_in_epoch;  // optimizer steps already taken in that epoch
    int64_t step;           // optimizer steps taken since the start (the LR schedule's argument)
    int64_t samples_seen;   // training samples consumed, all processes together
    uint64_t seed;          // the run's seed (init, data order, augmentation)
    uint64_t rng[4];        // a generator state the loop wants back verbatim (dlp_rng.s); zeros if unused
    double last_loss;       // the loss of the last step taken (a resume check)
    double best_top1;       // best validation top-1 so far, in [0, 1] (0 if none yet)
} dlp_train_pos;

typedef struct dlp_checkpoint {
    dlp_train_pos pos;
    dlp_lr_schedule sched;
    json_t *config;         // the run's configuration, free-form (NULL: none); owned after a load
    int64_t num_batches_tracked;
} dlp_checkpoint;

// "run/ck.safetensors" -> "run/ck.state.safetensors" (a name without ".safetensors" gets ".state.safetensors").
void dlp_checkpoint_state_path(const char *path, char *out, size_t len);
// "run/ck.safetensors" -> "run/ck.state.safetensors.next" (a replacing save's state before it is renamed).
void dlp_checkpoint_next_path(const char *path, char *out, size_t len);
// Finishes a replacing save that was killed after publishing its model (renames the .next over the state) or
// discards its .next when the model was not published; *settled (may be NULL) is 1 when there was a .next.
dlp_status dlp_checkpoint_settle(const char *path, int *settled);
// Saves params/bufs (net->param_count / net->buf_count) and momentum (param_count; NULL: zeros) with ck's
// position, schedule and config. num_batches_tracked is written as ck->pos.step. Replaces existing files.
dlp_status dlp_checkpoint_save(const char *path, const dlp_net *net, const float *params, const float *bufs,
                               const float *momentum, const dlp_checkpoint *ck);
// Loads a checkpoint saved for the same net (strict names and shapes). momentum may be NULL (not read). If the
// state sidecar is absent, only the model is loaded and the function fails unless allow_model_only (then the
// position is zero and ck->sched is the default).
dlp_status dlp_checkpoint_load(const char *path, const dlp_net *net, float *params, float *bufs, float *momentum,
                               int allow_model_only, dlp_checkpoint *ck);
void dlp_checkpoint_free(dlp_checkpoint *ck);  // the config

#endif
