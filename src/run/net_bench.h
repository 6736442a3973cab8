// run/net_bench: `dlperf nn bench`: a model's plan on a backend timed phase by phase on random tensors (no data
// loading), through run/step's bench harness; optionally the backend's convolution peak beside it.
// Defines: dlp_net_bench_cfg, dlp_net_bench_result, dlp_net_bench, dlp_net_bench_free, dlp_net_bench_json.
#ifndef DLP_RUN_NET_BENCH_H
#define DLP_RUN_NET_BENCH_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "run/step.h"

typedef struct dlp_net_bench_cfg {
    const char *model, *device;
    int classes, size, batch, threads, steps, warmup;
    dlp_dtype precision;
    int infer;  // inference plan: forward only, BN with running stats
    int peak;   // also measure the backend's convolution peak GFLOP/s
    uint64_t seed;
    // Called once the plan is built and the inputs are ready, before the timed steps (may be NULL).
    void (*on_ready)(void *ctx, const char *arch, const char *backend);
    void *ctx;
} dlp_net_bench_cfg;

typedef struct dlp_net_bench_result {
    char arch[32];
    const char *backend;
    double plan_ms, step_ms, img_per_s, gflop_per_image, gflop_per_s;
    double peak_gflop_per_s;  // 0: not measured
    dlp_step_bench_result phases;
    json_t *plan_info;  // what the backend chose (NULL: it says nothing)
} dlp_net_bench_result;

dlp_status dlp_net_bench(const dlp_net_bench_cfg *c, dlp_net_bench_result *r);
void dlp_net_bench_free(dlp_net_bench_result *r);
// The figures of dlperf.nn-bench/1 into res: backend, threads, mode, plan, throughput, step quantiles, FLOPs, peak,
// each phase's mean and quantiles, and the loss of a training plan.
void dlp_net_bench_json(const dlp_net_bench_cfg *c, const dlp_net_bench_result *r, json_t *res);

#endif
