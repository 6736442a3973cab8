// run/step_file: one training step (forward, loss, backward, SGD update; or an eval forward) on a batch read from a
// safetensors file ('input' (N, C, H, W) F32, 'labels' (N) integers), with the given weights or a seeded
// torchvision init, everything written to a safetensors file: logits, loss, top-1/top-5 counts, and for a training
// step the input gradient, every parameter's gradient and the state_dict after the step (`dlperf nn step`, the
// comparison with PyTorch).
// Defines: dlp_step_file_cfg, dlp_step_file_result, dlp_step_file_run.
#ifndef DLP_RUN_STEP_FILE_H
#define DLP_RUN_STEP_FILE_H
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

typedef struct dlp_step_file_cfg {
    const char *model;            // resnet18, ... (the input size comes from the batch)
    int classes;
    const char *weights;          // safetensors state_dict (NULL: torchvision's init from seed)
    uint64_t seed;
    int zero_init_residual;
    const char *input_path, *out_path;  // out_path: never overwritten
    const char *checkpoint_path;  // NULL: none; else also a checkpoint after the step
    const char *device;           // backend: ref|cpu|cuda|sim:<gpu>
    dlp_dtype precision;
    int threads;
    int eval;                     // inference plan: logits and loss only, BN with running stats
    int plan_batch;               // with eval: the plan's batch (0: the batch's; more: a partial batch)
    double lr, momentum, weight_decay, label_smoothing;
    int nesterov, no_bn_decay;
} dlp_step_file_cfg;

typedef struct dlp_step_file_result {
    const char *backend;  // the backend's name
    int n;                // samples
    double loss;
    int64_t top1, top5;   // correct
} dlp_step_file_result;

dlp_status dlp_step_file_run(const dlp_step_file_cfg *c, dlp_step_file_result *r);

#endif
