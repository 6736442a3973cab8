// perf/probe_steps: a GPU's step time against batch size, measured through run/step's harness with CUDA events as
// its clock (perf/probe_steps_cuda.c; built only with CUDA). `dlperf gpu bench|probe` and the probe's cuda part.
// Defines: dlp_cuda_probe_steps.
#ifndef DLP_PERF_PROBE_STEPS_H
#define DLP_PERF_PROBE_STEPS_H
#include "backend/cuda/cuda.h"

// Step time of `net` (with parameters params/bufs, e.g. nn's initialization) against batch size on random
// inputs: `warmup` untimed steps (graphs are captured there), then `steps` timed ones, each timed with CUDA
// events. h2d 0: the input stays on the device; 1: each step copies the batch from pinned host memory through
// set_input (the training loop's path).
dlp_status dlp_cuda_probe_steps(const dlp_net *net, const float *params, const float *bufs, int train,
                                dlp_dtype precision, int tf32, const int *batches, int nbatches, int warmup,
                                int steps, int h2d, dlp_cuda_step_point *out);

#endif
