// hw/profile: the machine profile — what `dlperf probe` measures on a machine, or what the catalog says about
// one — as a versioned JSON document (schema "dlperf.profile/1"). The performance model (perf/model) and the
// sim backend read only this. The reader validates every field: a missing, mistyped or out-of-range field is an
// error naming the field and the file. docs/model.md describes each parameter and how probe measures it.
// Defines: dlp_prec, dlp_task, dlp_device_kind, dlp_image_size, dlp_dataset_stats, dlp_scaling_point,
//          dlp_pipeline_profile, dlp_storage_profile, dlp_host_profile, dlp_rate, dlp_device_profile,
//          dlp_interconnect_profile, dlp_cost_profile, dlp_profile and their readers, writers and lookups.
#ifndef DLP_HW_PROFILE_H
#define DLP_HW_PROFILE_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/opts.h"
#include "core/status.h"
#include "core/tensor.h"

#define DLP_PROFILE_SCHEMA "dlperf.profile/1"
#define DLP_PROFILE_MAX_DEVICES 8
#define DLP_DEVICE_MAX_RATES 48
#define DLP_DEVICE_MAX_CONTENTION 16
#define DLP_PIPELINE_MAX_SCALING 32
#define DLP_DATASET_MAX_SIZES 256

// Compute precision. fp32 is strict FP32; tf32 is FP32 storage with TF32 tensor-core math (PyTorch's default on
// Ampere and newer GPUs); fp16 is mixed precision (AMP); int8 only for inference.
typedef enum { DLP_PREC_FP32 = 0, DLP_PREC_TF32, DLP_PREC_BF16, DLP_PREC_FP16, DLP_PREC_INT8, DLP_PREC_COUNT } dlp_prec;
const char *dlp_prec_name(dlp_prec p);
extern const char *const dlp_prec_names[DLP_PREC_COUNT];  // by dlp_prec (field tables' DLP_FT_ENUM)
dlp_status dlp_prec_parse(const char *s, dlp_prec *out);  // DLP_ERR_INVALID naming the choices
// The model's --precision choices (core/opts): auto|fp32|tf32|bf16|fp16|int8 -> DLP_PRECISION_AUTO, DLP_PREC_*;
// the training ones (no int8) for commands that size training runs.
extern const dlp_opt_choice dlp_prec_choices[], dlp_prec_train_choices[];
// Bytes per input element the device is fed at this precision: fp32/tf32 4, bf16/fp16 2, int8 1.
size_t dlp_prec_input_bytes(dlp_prec p);
// The precision a backend plan runs: F32 (+tf32 flag), BF16, F16.
dlp_prec dlp_prec_from_dtype(dlp_dtype t, int tf32);

typedef enum { DLP_TASK_TRAIN = 0, DLP_TASK_INFER } dlp_task;
const char *dlp_task_name(dlp_task t);
extern const char *const dlp_task_names[2];  // by dlp_task

typedef enum { DLP_DEVICE_CPU = 0, DLP_DEVICE_GPU } dlp_device_kind;

// --- workload statistics (a dataset's JPEGs) ----------------------------------------------------------------
typedef struct dlp_image_size {
    int w, h;
    double weight;       // share of images with this size (weights sum to 1 after dlp_dataset_stats_normalize)
    double mean_bytes;   // mean file size of these images; 0: the dataset's mean_bytes
} dlp_image_size;

typedef struct dlp_dataset_stats {
    char name[96];
    int64_t images;              // images per epoch
    double mean_bytes;           // mean JPEG file size
    double progressive_fraction; // share of progressive JPEGs (decoded whole: no crop window)
    int nsizes;
    dlp_image_size sizes[DLP_DATASET_MAX_SIZES];
} dlp_dataset_stats;
dlp_status dlp_dataset_stats_normalize(dlp_dataset_stats *s, const char *where);  // checks, weights sum to 1

// --- input pipeline: CPU seconds per image on one thread of this host ------------------------------------------
typedef struct dlp_scaling_point {
    int threads;
    double efficiency;  // aggregate rate at `threads` = threads x efficiency x single-thread rate
    double speed_rel;   // probe: the cores' speed the rate was measured at over the reference (0: not so measured)
} dlp_scaling_point;

typedef struct dlp_pipeline_profile {
    char name[32];                 // "dlperf", "torchvision"
    int dct_scaling;               // decodes at the smallest DCT scale M/8 keeping the crop >= output size
    unsigned dct_scale_mask;       // the scales M it chooses from (bit M, M = 1..8); 0: all of 1..8
    int crop_window;               // decodes only the crop window's columns and stops after its last row
    double read_per_file_s;        // read from the page cache: per file (open, read, close) ...
    double read_per_byte_s;        // ... and per byte copied
    double decode_per_image_s;     // decode: per image ...
    double decode_per_pixel_s;     // ... per decoded pixel (IDCT output at the chosen scale, in the window) ...
    double decode_per_byte_s;      // ... per entropy-coded byte (Huffman decoding up to the window's last row)
    double augment_per_image_s;    // augment: per image ...
    double augment_per_in_pixel_s; // ... per decoded pixel resized from ...
    double augment_per_out_pixel_s;// ... per output pixel (resize, flip, normalize, write in the batch type)
    double loader_cost_scale;      // the loader's CPU per image over the stage fits (its bookkeeping, its memory
                                   // traffic: measured on the loader itself); 1 when not measured
    double cost_cv;                // coefficient of variation of one image's CPU cost (0: not measured)
    int nscaling;                  // measured efficiencies at 1..N threads (N <= cores); none: 1.0
    dlp_scaling_point scaling[DLP_PIPELINE_MAX_SCALING];
    double oversub_efficiency;     // more loader threads than cores: extra threads add this fraction of a core (0)
    double work_img_per_s;         // probe: the loader's work speed its CPU costs hold at — images per CPU-second of a
                                   // fixed decode and transform (dlp_data_decode_speed), the probe's median; a run that
                                   // reads another speed w takes work_img_per_s / w as long per image
                                   // (dlp_profile_at_decode); 0: not measured
} dlp_pipeline_profile;
// Efficiency at n threads: the measured point, linear between points, the last point beyond.
double dlp_pipeline_efficiency(const dlp_pipeline_profile *p, int threads);
// The coefficient fields of a pipeline object (everything but its name); `where` names the object.
dlp_status dlp_pipeline_coeffs_from_json(const json_t *o, const char *where, dlp_pipeline_profile *p);

// --- storage -------------------------------------------------------------------------------------------------
typedef struct dlp_storage_profile {
    char desc[96];
    double cold_read_bytes_per_s;    // aggregate read rate from the device with many readers
    double cold_stream_bytes_per_s;  // one reader's rate
    double cold_latency_s;           // wall time per file beyond the transfer (a reader waits; no CPU)
    double cold_latency_busy_s;      // the same when every core runs a loader thread (0: as cold_latency_s)
    double page_cache_bytes;         // memory that can keep the dataset cached (warm reads)
} dlp_storage_profile;

// --- host ----------------------------------------------------------------------------------------------------
typedef struct dlp_host_profile {
    char cpu_model[128];
    int cores;                  // physical cores per node (probe: CPUs allowed to this process)
    int threads;                // hardware threads per node
    double smt_yield;           // a second hardware thread on a core adds this fraction of a core (0..1)
    double core_speed_rel;      // per-core pipeline speed relative to the development core (record only)
    double mhz;
    double mem_bytes;
    double mem_bw_bytes_per_s;  // sustained memory bandwidth (0: unknown, no memory stage)
    double loop_overhead_s;     // host time per training step outside the device ops (the loop's own work)
    double wake_latency_busy_s; // a device op's host thread, waking at its deadline while loader threads keep every
                                // core busy, resumes this much later (per op; 0 with a free core)
    double canary_gflops;       // the cores' speed while probed (hw/canary; 0: not measured): the median of the probe's
                                // readings on every CPU, the reference speed its timed rows are normalised to;
                                // validate and predict scale a prediction to another speed by speed / this
    double canary_p10_gflops;   // the readings' 10th and 90th percentiles (0: not measured): predict's band
    double canary_p90_gflops;
    int canary_samples;         // readings behind them
    double canary1_gflops;      // the same loop on one thread (median): the reference of one-thread rows
    double cpu_share;           // probe: the median CPU share its rows' threads got (hw/cpushare; 0: not measured):
                                // the reference the rows measured by their share are normalised to
    double cpu_share1;          // the same over the one-thread rows
    double cpu_share_slowest;   // the median over the multi-thread compute rows of their slowest thread's share
                                // (hw/cpushare): the reference those rows are normalised to — a fork-join step goes
                                // at its slowest thread, not at the process's mean share (0: not measured; older
                                // profiles: those rows by cpu_share)
    double steal_fraction;      // share of the CPUs' time the hypervisor stole while probed (record only)
} dlp_host_profile;

// --- a compute device's step-time model ------------------------------------------------------------------------
// For `batch` images of work ratio r (model FLOPs / ResNet-50 at 224x224):
//   train:  fwd + bwd = t0_s + batch x per_image_s x r  (forward: fwd_fraction of it),  update = update_s x p
//   infer:  fwd       = t0_s + batch x per_image_s x r
// where p = parameters / ResNet-50's. hw/steptime computes it; predict and the sim backend both use that.
typedef struct dlp_rate {
    dlp_task task;
    dlp_prec prec;
    int threads;          // compute threads this row is for (cpu device); 0 for GPUs
    int batch_ref;        // batch the figure was taken or fitted at (0: not stated)
    char model[24];       // the model it was measured with ("" : any; per_image_s is per image of reference work)
    int size;             // the image size it was measured at (0: any)
    double t0_s;          // fixed time per step
    double per_image_s;   // per image of reference work
    double update_s;      // optimizer step for reference parameters (train)
    double cores_busy;    // host cores kept busy while the device computes (cpu device ~ threads; sim 0)
    int estimate;         // 1 when derived rather than published or measured
    char basis[256];      // where the figure comes from
    double speed_rel;     // probe: the cores' speed it was measured at over the profile's reference (its times are
                          // normalised to the reference; 0: not measured so)
    double share_exp;     // probe: the row's step time goes as (reference share / share)^share_exp, measured by the
                          // probe (the row timed again beside a spinner of its own: issue 35, a spinning fork-join
                          // team loses more than its share); 0: not measured, linear (as 1)
    double work_gflops;   // probe: the work speed its times hold at — GFLOP per CPU-second of a small convolution of
                          // its precision (dlp_backend_measure_speed), the probe's median; a run that reads another
                          // work speed w takes work_gflops / w as long (dlp_profile_at_work); 0: not measured
} dlp_rate;

// The cpu device and the loader running at once on the same cores, both flat out (probe): each one's rate as a
// share of its rate alone. Perfect sharing gives compute_share + loader_share = 1; threads preempted inside a
// parallel region (the others wait at its barrier) give less.
typedef struct dlp_contention_point {
    int threads;           // compute threads
    int workers;           // loader threads
    double compute_share;  // compute's rate while the loader runs / alone (0..1]
    double loader_share;   // the loader's rate while compute runs / alone (0..1]
} dlp_contention_point;

typedef struct dlp_device_profile {
    char name[48];                   // "cpu", "a100-80gb", "custom"
    dlp_device_kind kind;
    char source[16];                 // "measured", "catalog", "custom"
    double fwd_fraction;             // share of a training step's compute spent in forward (1/3)
    double h2d_bytes_per_s;          // pinned host-to-device copy rate (0: no copy, e.g. the cpu device)
    double h2d_pageable_bytes_per_s; // pageable copies (record; the loader's batches are pinned)
    int h2d_overlap;                 // copies run on a copy engine while the previous step computes
    double contention_efficiency;    // cpu device: useful share of CPU time when loader and compute share cores
                                     // (used when no contention points were measured)
    int ncontention;                 // cpu device: measured contention points
    dlp_contention_point contention[DLP_DEVICE_MAX_CONTENTION];
    double mem_bytes, power_w, price_usd;  // 0: unknown
    int nrates;
    dlp_rate rates[DLP_DEVICE_MAX_RATES];
} dlp_device_profile;
// The row for (task, prec): for the cpu device the row with the most threads <= `threads` (0: the most),
// else the fewest above. NULL if the device has no row for that task and precision.
const dlp_rate *dlp_device_find_rate(const dlp_device_profile *d, dlp_task task, dlp_prec prec, int threads);
// The same thread choice, then among the rows with that thread count the one measured closest to the workload:
// the same model first, then the nearest image size (in log scale; rows without a size count as 224).
// model NULL / size 0: no preference (the first such row).
const dlp_rate *dlp_device_find_rate_for(const dlp_device_profile *d, dlp_task task, dlp_prec prec, int threads,
                                         const char *model, int size);
// The measured contention point for (threads, workers): the same threads and workers, else the nearest
// (threads first). NULL when none was measured.
const dlp_contention_point *dlp_device_find_contention(const dlp_device_profile *d, int threads, int workers);

// --- interconnect, cost --------------------------------------------------------------------------------------
typedef struct dlp_interconnect_profile {
    double pcie_uplink_bytes_per_s;     // host link shared by gpus_per_uplink GPUs (0: no sharing modelled)
    int gpus_per_uplink;
    double allreduce_busbw_bytes_per_s; // nccl-tests bus bandwidth inside a node (0: unknown)
    double nic_bytes_per_s;             // network bandwidth per node (multi-node allreduce)
    double nic_latency_s;               // one ring step between nodes (probe --hostfile; 0: unknown)
} dlp_interconnect_profile;

typedef struct dlp_cost_profile {
    double price_usd;      // purchase price (owned); 0: unknown
    int price_year;
    double power_w;        // power drawn under training load; 0: unknown
    double usd_per_hour;   // rent (cloud); 0: not rented
    double usd_per_hour_alt;  // alternative rent (e.g. capacity blocks); 0: none
} dlp_cost_profile;

// --- the profile -----------------------------------------------------------------------------------------------
typedef struct dlp_profile {
    char source[16];        // "probe" (measured), "catalog" (derived from catalog/*.json)
    char id[48];            // catalog system id, or the host name
    char name[128];
    char created[32];
    dlp_host_profile host;
    dlp_storage_profile storage;
    dlp_pipeline_profile pipeline;
    int devices_per_node;   // accelerators per node (0: CPU-only host)
    int ndevices;
    dlp_device_profile devices[DLP_PROFILE_MAX_DEVICES];
    dlp_interconnect_profile net;
    dlp_cost_profile cost;
    int has_stats;          // the workload's dataset as probe measured it (optional)
    dlp_dataset_stats stats;
    char notes[512];
} dlp_profile;

void dlp_profile_init(dlp_profile *p);  // empty profile with neutral defaults
// Reads and validates a profile file. Errors name the file and the field.
dlp_status dlp_profile_read(const char *path, dlp_profile *p);
dlp_status dlp_profile_from_json(const json_t *o, const char *where, dlp_profile *p);
json_t *dlp_profile_to_json(const dlp_profile *p);
// Writes atomically; refuses to overwrite an existing file.
dlp_status dlp_profile_write(const dlp_profile *p, const char *path);
// Checks the values a profile built in code holds (what the reader checks after parsing).
dlp_status dlp_profile_validate(const dlp_profile *p, const char *where);
const dlp_device_profile *dlp_profile_find_device(const dlp_profile *p, const char *name);
// Scales a profile's CPU-side timings (the pipeline's costs, the cpu device's step times, the loop's overhead) to the
// cores running at `speed_rel` times its reference speed (host.canary_gflops): what the machine does at that speed.
// GPU devices and storage are left as they are.
void dlp_profile_at_speed(dlp_profile *p, double speed_rel);
// The profile as a run whose threads got `share` of the cores (hw/cpushare) sees it: each CPU-side rate the probe
// normalised by its CPU share brought from its class's reference (host.cpu_share1 for one-thread rows — the cpu
// device's one-thread rates, the loader's one-thread efficiency — host.cpu_share for the rest) to `share`; the loop's
// overhead by share / host.cpu_share. Nothing when the profile states no share or share is not in (0, 1].
void dlp_profile_at_share(dlp_profile *p, double share);
// The same, with the multi-thread cpu training rows brought from host.cpu_share_slowest to `slowest`, the share of the
// run's slowest compute thread (a fork-join step's pace). slowest <= 0 (unknown): the run's mean share taken for it;
// a profile without cpu_share_slowest: those rows by the mean share from host.cpu_share, as before.
void dlp_profile_at_shares(dlp_profile *p, double share, double slowest);

// Whether a cpu rate row goes at its slowest thread's share (a multi-thread training step, fork-join: the probe
// normalises those rows by host.cpu_share_slowest) rather than the mean share (one-thread rows: cpu_share1; the rest:
// cpu_share). One rule for the probe's normalisation, its merge and dlp_profile_at_shares.
static inline int dlp_rate_by_slowest(const dlp_rate *r) { return r->threads > 1 && r->task == DLP_TASK_TRAIN; }
// The same for one device (a cpu device's step times; a GPU is left as it is).
void dlp_device_at_speed(dlp_device_profile *d, double speed_rel);
// The cpu device's rows of precision `prec` that hold at a measured work speed (dlp_rate.work_gflops) brought to the
// work speed w (GFLOP per CPU-second, dlp_backend_measure_speed): their times x work_gflops / w. Other rows as they
// are. validate applies it at the work speed read around a run; predict with --work-speed.
void dlp_profile_at_work(dlp_profile *p, dlp_prec prec, double w);
// The pipeline's CPU costs, where they hold at a measured loader work speed (pipeline.work_img_per_s), brought to the
// loader work speed w (images per CPU-second, dlp_data_decode_speed): x work_img_per_s / w.
void dlp_profile_at_decode(dlp_profile *p, double w);

// Device and dataset pieces on their own (GPU profiles, `dlperf predict --data` statistics).
dlp_status dlp_device_from_json(const json_t *o, const char *where, dlp_device_profile *d);
json_t *dlp_device_to_json(const dlp_device_profile *d);
dlp_status dlp_device_validate(const dlp_device_profile *d, const char *where);
dlp_status dlp_dataset_stats_from_json(const json_t *o, const char *where, dlp_dataset_stats *s);
json_t *dlp_dataset_stats_to_json(const dlp_dataset_stats *s);

#endif
