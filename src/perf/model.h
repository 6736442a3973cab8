// perf/model: the analytical performance model. From a machine profile (hw/profile), a device profile and a
// workload it predicts each stage's capacity in images/s — storage read, decode+augment on the loader threads,
// host memory, host-to-device copies, device compute, gradient allreduce (and, for the cpu device, the cores
// that compute and loader share) — then the pipeline's throughput (the slowest stage sets the pace), the
// bottleneck, the data-stall fraction, epoch time, and what would keep the device busy. The equations are in
// docs/model.md; every number comes from the profile and the workload, never from a run.
// Defines: dlp_storage_state, dlp_workload, dlp_workload_init, dlp_stage, dlp_stage_name, dlp_stage_cap,
//          dlp_prediction, dlp_predict, dlp_loader_parallelism, dlp_loader_rate, dlp_prediction_to_json.
#ifndef DLP_PERF_MODEL_H
#define DLP_PERF_MODEL_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "hw/profile.h"
#include "hw/steptime.h"
#include "perf/imgwork.h"

typedef enum { DLP_STORAGE_AUTO = 0, DLP_STORAGE_WARM, DLP_STORAGE_COLD } dlp_storage_state;
const char *dlp_storage_state_name(dlp_storage_state s);

typedef struct dlp_workload {
    char model[16];              // resnet18 .. resnet152
    int classes;                 // 1000
    dlp_task task;
    dlp_prec prec;
    int batch;                   // per device
    int devices;                 // devices per node (0: the profile's devices_per_node, at least 1)
    int nodes;                   // 1
    int workers;                 // loader threads per device (0: the host's free hardware threads / devices)
    int prefetch;                // batch slots in the loader's ring (0: 2 x loader threads, the loader's default)
    int threads;                 // compute threads of the cpu device (0: all cores)
    dlp_img_transform tf;            // RandomResizedCrop(224) for train, resize 256 + center crop 224 for infer
    dlp_storage_state storage;   // auto: warm when the dataset fits in the page cache (the first epoch is cold)
    double read_limit_bytes_per_s;  // a read-rate limit (0: none)
    int input_bytes;             // bytes per input element sent to the device (0: from the precision)
    double bucket_bytes;         // gradient bucket size for allreduce overlap (25 MB, as PyTorch DDP)
    double grad_bytes_per_param; // 4 (fp32 gradients)
    double net_latency_s;        // nodes > 1: a ring step's fixed cost between nodes (perf/model_net; 0: none)
    const struct dlp_net_link *net_link;  // nodes > 1: the link as measured across hosts, with its time by message
                                          // size (perf/model_net; NULL: the profile's rate and net_latency_s)
    double step_loss_per_device; // data parallel: the step takes (1 + this x (devices - 1)) x longer (a GPU stack's
                                 // fitted loss per added GPU, hw/gpumodel; 0: none)
    dlp_dataset_stats stats;     // the dataset (images per epoch, JPEG sizes)
    int epochs;                  // for the total time (90)
    uint64_t seed;               // crop sampler of the expectations
    int samples;                 // crops per image size in the expectations (0: 4096)
} dlp_workload;

// Defaults: resnet50, 1000 classes, train, fp32, batch 32, 1 node, torchvision's transforms at 224, 90 epochs.
// stats is left empty: the caller fills it (catalog dataset, dlperf's scan of a directory, or the profile's).
void dlp_workload_init(dlp_workload *w);

typedef enum {
    DLP_STAGE_READ = 0,    // storage: device bandwidth, read-rate limit (cold); page cache (warm)
    DLP_STAGE_PREP,        // decode + augment (+ read syscalls) on the loader threads
    DLP_STAGE_IOWAIT,      // loader threads that wait for cold reads: threads / (CPU time + wait) per image
    DLP_STAGE_HOSTMEM,     // host memory bandwidth
    DLP_STAGE_SHARED_CPU,  // cpu device: compute and loader threads share the cores
    DLP_STAGE_H2D,         // host-to-device copies
    DLP_STAGE_COMPUTE,     // the device's forward/backward/update
    DLP_STAGE_ALLREDUCE,   // gradient allreduce (ring), overlapped with backward by bucket
    DLP_STAGE_COUNT
} dlp_stage;
const char *dlp_stage_name(dlp_stage s);

typedef struct dlp_stage_cap {
    int present;
    double img_per_s;     // node-wide capacity if this stage alone set the pace
    char detail[200];
} dlp_stage_cap;

typedef struct dlp_prediction {
    // resolved inputs
    int devices, nodes, batch, workers_total, threads, storage_cold;
    dlp_task task;
    dlp_prec prec;
    double work_ratio, params_ratio;
    dlp_image_work work;
    double input_bytes_per_image;   // as copied to the device
    // loader
    double read_cpu_s, decode_cpu_s, augment_cpu_s;  // one thread, per image
    double loader_cost_scale;       // the profile's loader_cost_scale (c = scale x (read + decode + augment))
    double loader_cpu_s_per_image;  // their sum
    double io_wait_s_per_image;     // cold reads: latency + bytes / one reader's rate
    double loader_cores;            // cores the loader can use
    double loader_parallelism;      // single-thread equivalents of the loader's threads
    // device
    dlp_step_times step;            // per device, one step
    double h2d_bytes_per_s;         // effective per device (link shared by GPUs on one uplink)
    double allreduce_s, allreduce_exposed_s;
    double device_step_s;           // step time on the device side (+ exposed allreduce + loop overhead)
    // stages and the pipeline
    dlp_stage_cap stages[DLP_STAGE_COUNT];
    double device_img_per_s;        // node: devices x batch / device_step_s
    double loader_img_per_s;        // node: the loader's slowest stage (reads, decode+augment, read waits, host memory)
    double busy_img_per_s;          // what keeps the device busy (device side; for the cpu device also shared cores)
    double img_per_s;               // node throughput: the slowest stage
    double cluster_img_per_s;       // x nodes
    double per_device_img_per_s;
    dlp_stage bottleneck;
    double ring_factor;             // throughput / the slower of loader and device, from the ring's slack (<= 1)
    double first_batch_s;           // once per run: the device waits for the loader's first batch (in total_s)
    double data_stall_fraction;     // 1 - img_per_s / busy_img_per_s
    double step_s;                  // wall time per step
    double epoch_s;                 // steady-state epoch (warm when the dataset stays cached)
    double first_epoch_s;           // the first epoch reads cold when storage is auto
    double total_s;                 // first + (epochs - 1) x steady
    // what would keep the device busy
    double loader_cores_needed;        // node
    int loader_threads_needed;         // node (0: none would do)
    double storage_bytes_per_s_needed; // node, for cold reads
    double page_cache_bytes_needed;    // to keep the dataset cached
    double h2d_bytes_per_s_needed;     // per device
    double net_bytes_per_s_needed;     // nodes > 1: the link rate at which compute becomes the bottleneck
    double busbw_needed;               // allreduce bus bandwidth that would hide it under backward (0: hidden)
    int nfix;
    char fix[4][400];
    int nnotes;
    char notes[8][300];
} dlp_prediction;

// Single-thread equivalents of `workers` loader threads on a host with `cores` free cores (fractional),
// hw_threads hardware threads: measured efficiency up to the cores, SMT yield and oversubscription beyond.
double dlp_loader_parallelism(const dlp_host_profile *h, const dlp_pipeline_profile *p, double cores, int workers);
// The loader's rate (images/s) at `workers` threads: c CPU seconds per image on one thread, w_io seconds per image
// waiting for a cold read without using the CPU (0: warm). A closed network of the threads between the CPU and
// the wait (exact product form); par(W)/c when w_io = 0.
double dlp_loader_rate(const dlp_host_profile *h, const dlp_pipeline_profile *p, double cores, int workers, double c,
                       double w_io);

// The two-stage line of a loader and a device with a ring of `slots` batch slots between them (a slot is refilled
// once the device released its batch): the loader takes gamma-distributed times per batch (mean loader_batch_s,
// coefficient of variation cv), the device a fixed device_batch_s. Returns the throughput over the slower stage's
// rate (<= 1; 1 when cv is 0): a deterministic 20,000-batch recursion.
double dlp_ring_factor(double loader_batch_s, double device_batch_s, double cv, int slots);

dlp_status dlp_predict(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w, dlp_prediction *out);
json_t *dlp_prediction_to_json(const dlp_prediction *pr);

#endif
