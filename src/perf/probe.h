// perf/probe: measures this machine into a machine profile (hw/profile, dlperf.profile/1) — cores and frequency,
// memory bandwidth (copy/triad on 1..N threads), storage (warm and cold per-file cost and bandwidth), the input
// pipeline's CPU cost per image as a function of the work it does (least squares over its own stages, with
// residuals) and its scaling over threads, each compute backend's step time against batch and image size, the
// contention between compute and the loader on shared cores, the training loop's own time per step, and for cuda
// the copy rates and step times. Each part is a microbenchmark of its own: nothing here is a training run that
// `dlperf validate` checks. docs/model.md describes every measurement and fit.
// Defines: dlp_probe_progress_fn, dlp_probe_cfg, dlp_probe_cfg_init, dlp_probe_run, dlp_probe_merge, DLP_PROBE_PART_*.
#ifndef DLP_PERF_PROBE_H
#define DLP_PERF_PROBE_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "hw/profile.h"

typedef void (*dlp_probe_progress_fn)(void *ctx, const char *line);

// Parts of the probe (bits of dlp_probe_cfg.parts).
enum {
    DLP_PROBE_PART_MEMORY = 1 << 0,
    DLP_PROBE_PART_STORAGE = 1 << 1,
    DLP_PROBE_PART_PIPELINE = 1 << 2,
    DLP_PROBE_PART_COMPUTE = 1 << 3,     // step-time fits of each backend asked for
    DLP_PROBE_PART_CONTENTION = 1 << 4,  // cpu backend and loader on the same cores
    DLP_PROBE_PART_LOOP = 1 << 5,        // the training loop's own time per step (on a sim device)
    DLP_PROBE_PART_INTERCONNECT = 1 << 6,  // allreduce bus bandwidth inside the node (mpirun -np R dist bench)
    DLP_PROBE_PART_ALL = (1 << 7) - 1,
};

typedef struct dlp_probe_cfg {
    const char *data;        // dataset (--data: a directory, a list file or synthetic[:...]; NULL: synthetic)
    int quick;               // fewer points: about a minute on a 2-core machine
    const char *devices;     // compute backends to probe, comma-separated ("ref,cpu", "cuda"); NULL: ref and cpu
                             // where available (cuda only when asked; sim is never probed: it is what it is told)
    int max_threads;         // loader and compute threads up to this (0: the CPUs this process may use)
    unsigned parts;          // DLP_PROBE_PART_* (0: all)
    const char *models;      // models of the compute fits, comma-separated (NULL: resnet18,resnet50)
    const char *sizes;       // image sizes of the compute fits (NULL: 64,112; quick: 64)
    uint64_t seed;
    const char *self_exe;    // the dlperf binary the interconnect part launches under mpirun (NULL: this process's)
    const char *hostfile;    // also measure between nodes: one rank per host of this hostfile (NULL: not)
    const char *mpirun;      // the launcher for that (NULL: mpirun)
    dlp_probe_progress_fn progress;  // one line per step, for stderr (NULL: silent)
    void *progress_ctx;
} dlp_probe_cfg;

void dlp_probe_cfg_init(dlp_probe_cfg *c);

// Measures the machine into *out (a validated profile, source "probe") and returns the measurements and fits
// behind every field in *details (the caller owns it; it goes into the profile file under "probe").
dlp_status dlp_probe_run(const dlp_probe_cfg *cfg, dlp_profile *out, json_t **details);

// probe --repeat: n probes of one machine (the same options) into one profile — every timed value (each normalised
// to its probe's reference speed) brought to the pooled median speed of all their canary readings and the median
// over the probes taken; the CPU-time costs and contention shares as medians; host.canary_* over every reading.
// *summary (may be NULL) gets the references and how many rows some probe lacked.
#define DLP_PROBE_MAX_REPEAT 16
dlp_status dlp_probe_merge(const dlp_profile *ps, json_t *const *details, int n, dlp_profile *out, json_t **summary);

#endif
