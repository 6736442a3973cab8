// perf/validate: the model against real runs. Each configuration of a sweep is a short training run through the
// training loop library (run/train: the real loader, the real backend or an emulated device), measured in its
// steady state, and predicted by perf/model from a machine profile alone (measured by `dlperf probe` before the
// sweep) and the configuration — never from the run. The table says, per configuration, the regime predicted and
// observed, predicted and measured images/s and the absolute percentage error; the sweep's MAPE sums it up.
// Defines: dlp_validate_config, dlp_validate_config_default, dlp_validate_config_label, dlp_validate_configs_from_json,
//          dlp_validate_builtin, dlp_validate_row, dlp_validate_cfg, dlp_validate_cfg_init, dlp_validate_run_config,
//          dlp_validate_predict, dlp_validate_ape, dlp_validate_measured_at_share, dlp_validate_mape, dlp_validate_regime_of_stage,
//          dlp_validate_observed_regime, dlp_validate_row_to_json, dlp_validate_scaling (pairs, JSON).
#ifndef DLP_PERF_VALIDATE_H
#define DLP_PERF_VALIDATE_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "data/dataset.h"
#include "hw/catalog.h"
#include "hw/profile.h"
#include "perf/model.h"

#define DLP_VALIDATE_MAX_CONFIGS 128

typedef struct dlp_validate_config {
    char name[48];            // label ("" : made from the fields)
    char device[128];         // cpu, ref, sim:<gpu>[,options]
    char model[24];           // resnet50
    int size;                 // input (crop) size, px
    int batch;
    int workers;              // loader threads
    int threads;              // compute threads (cpu/ref device; 0: all); per rank
    int ranks;                // data-parallel processes (mpirun -np ranks dlperf train; 1: in this process); per node
    int nodes;                // > 1: ranks x nodes processes across the hostfile's hosts (0, 1: this machine)
    char hostfile[256];       // nodes > 1: the MPI hostfile (validate_sweep: nodes_from_json)
    char launcher[256];       // nodes > 1: the mpirun to start them with ("": mpirun; e.g. tests/netns-hosts.sh's)
    dlp_prec prec;            // fp32 or bf16
    int cold;                 // drop the dataset from the page cache first (the run stays in its first epoch)
    int64_t read_limit_bytes_per_s;  // 0: none
    int64_t images;           // train on this many images of the set (spread over it; epochs of images/batch steps);
                              // 0: all of it
    double balance;           // > 0: an emulated device this many times as fast as the loader is predicted to be for
                              // this configuration (sim:custom,img_per_s=<balance x that rate>; near 1: the knee)
} dlp_validate_config;

// resnet50, 224 px, batch 32, 1 loader thread, all compute threads, fp32, warm, no limit; device "".
void dlp_validate_config_default(dlp_validate_config *c);
// "sim:custom,img_per_s=400 r50/224 b32 w2 warm" style label (name when set).
void dlp_validate_config_label(const dlp_validate_config *c, char *buf, size_t len);
// A JSON array of objects: {"device", "model", "size", "batch", "workers", "threads", "precision", "storage":
// "warm"|"cold", "read_limit": "20M" or bytes/s, "images", "balance", "name"}; with "balance" the device is
// sim:custom (its rate set by dlp_validate_resolve_balance); absent keys take the defaults. Errors name the entry.
dlp_status dlp_validate_configs_from_json(const json_t *a, const char *where, dlp_validate_config *out, int max, int *n);
// The built-in sweep (>= 20 configurations spanning pipeline-, device- and storage-bound regimes on a small
// machine; docs/model.md lists it). quick: a handful of them. Returns the count.
int dlp_validate_builtin(int quick, dlp_validate_config *out, int max);

// Regimes: "device" (compute, copies, allreduce: the device is busy), "pipeline" (the loader's CPU work),
// "storage" (reads: cold storage, a read-rate limit).
const char *dlp_validate_regime_of_stage(dlp_stage s);
// From a run: data wait under 10 % of the loop's time -> device; else storage when reads (cold waits or the
// read limit's sleep) take at least a quarter of the loader threads' time, else pipeline.
const char *dlp_validate_observed_regime(double data_wait_frac, double read_share_of_worker_time);

// |predicted - measured| / measured (measured > 0; else NAN).
double dlp_validate_ape(double predicted, double measured);
// Mean of the finite values of ape[0..n) (NAN when none).
double dlp_validate_mape(const double *ape, int n);

typedef struct dlp_validate_row {
    dlp_validate_config cfg;
    char label[160];
    int ok;                        // 0: the run or the prediction failed (error says why)
    char error[512];
    // prediction
    double predicted_img_per_s;
    char predicted_bottleneck[24];
    const char *predicted_regime;
    double predicted_stall;
    // measurement
    double measured_img_per_s;     // median of the windows' rates over the steady steps
    double measured_mean_img_per_s;// all steady steps together
    double window_spread;          // (max - min) / median of the window rates
    int windows, steps_measured, warmup_steps;
    double measured_s;             // wall time of the steady steps
    double run_s;                  // the whole run (setup included)
    double observed_stall;         // data wait / loop time over the steady steps
    double read_share;             // reads (incl. waits and limit sleeps) / the loader threads' time
    const char *observed_regime;
    double other_load_cores;       // other processes' CPU use while measured, in cores (/proc/stat; NAN: unknown)
    int runs;                      // runs made (1 + retries while disturbed)
    double speed;                  // the cores' speed around the run over the profile's (hw/canary; NAN: unknown)
    double speed_drift;            // |after - before| / their mean: how much the speed moved during the run (NAN)
    double speed_one;              // one loader thread feeding a device off the host's cores: the one-thread canary
                                   // around the run over the profile's (the prediction at speed uses it; NAN: not)
    double steal;                  // share of the CPUs' time stolen by the hypervisor during the run (NAN: unknown)
    // The cores' work speed around a cpu-device run (dlp_backend_measure_speed at its precision and threads: GFLOP per
    // CPU-second, read just before and after it, each only while its threads had the cores; NAN: unknown), and over
    // the profile's (its rows' work_gflops): the prediction at share also brings those rows to it (dlp_profile_at_work).
    double work;
    double work_rel;
    // The loader's work speed around the run (dlp_data_decode_speed on its loader threads: images per CPU-second, read
    // as the work speed is; NAN: unknown), and over the profile's (pipeline.work_img_per_s): the prediction at share
    // also brings the pipeline's CPU costs to it (dlp_profile_at_decode).
    double decode_work;
    double decode_rel;
    double ape;
    // The prediction at the speed the run saw (the profile's CPU-side timings scaled by `speed`, hw/profile
    // dlp_profile_at_speed): the model's error with the host's drift taken out (NAN when the speed is unknown).
    double predicted_at_speed_img_per_s;
    double ape_at_speed;
    // The CPU share the run's threads got while it was measured (hw/cpushare: CPU time over CPU time plus run-queue
    // wait, the process's own oversubscription taken out; NAN: unknown), and the prediction at that share: the
    // profile's CPU-side timings scaled by it over the share the probe's rows got (host.cpu_share, or cpu_share1 for
    // one loader thread feeding a device off the host's cores). NAN when either is unknown.
    double cpu_share;
    double predicted_at_share_img_per_s;
    double ape_at_share;
    // The share of the run's slowest thread that wanted a core (hw/cpushare slowest_share; NAN: unknown): a
    // multi-thread cpu compute step goes at it (fork-join), so the prediction at share brings those rows from the
    // profile's host.cpu_share_slowest to it. The prediction with those rows at the run's mean share instead is kept
    // beside it for comparison (which of the two a run's pace follows).
    double cpu_share_slowest;
    double cpu_runnable;  // the run's threads that wanted a core, on average (hw/cpushare runnable; NAN: unknown)
    double predicted_at_mean_share_img_per_s;
    double ape_at_mean_share;
} dlp_validate_row;
// The rate a prediction at the run's CPU share is compared with: over the interval the share was measured on (every
// measured step: images over their time), not the median window — a short run's windows can lie 100% apart
// (issue 35: a bf16 cpu run's two windows) while its share is the mean over all of them.
double dlp_validate_measured_at_share(const dlp_validate_row *r);

// Scale-out against one process on the same cores: a row of R ranks x t threads paired with the row of one process
// x R*t threads of an otherwise equal configuration; their throughput ratio predicted and measured.
typedef struct dlp_validate_scaling {
    int ranks_row, single_row;     // indices into the rows
    double predicted_ratio, measured_ratio, ape;
} dlp_validate_scaling;
// The pairs found in rows[0..n) (at most max).
int dlp_validate_scaling_pairs(const dlp_validate_row *rows, int n, dlp_validate_scaling *out, int max);
json_t *dlp_validate_scaling_to_json(const dlp_validate_row *rows, const dlp_validate_scaling *s, int n);

typedef struct dlp_validate_cfg {
    const dlp_profile *profile;    // the machine (from dlperf probe)
    const dlp_catalog *catalog;    // for sim:<gpu> devices (may be NULL for sim:custom and cpu/ref)
    dlp_dataset *ds;               // borrowed: the training set every run uses
    const dlp_dataset_stats *stats;// its statistics (for the predictions)
    int min_steps;                 // measured steps at least (after the warm-up)
    double min_seconds;            // measured time at least
    double max_seconds;            // and at most (a run ends at its first epoch's end when cold)
    int retries;                   // runs again (up to this many times) while other processes kept more than
                                   // disturbed_cores busy; the least disturbed run is kept
    double disturbed_cores;
    double quiet_wait_s;           // before a retry, wait up to this long for the other work to stop
    double canary_base_gflops;     // the cores' speed as probed (profile host.canary_gflops; 0: not compared)
    double speed_tolerance;        // runs again while the cores ran more than this fraction off that speed
    int at_speed;                  // the profile states its speed's distribution (a normalised probe): each run is
                                   // also predicted at its own speed, and runs again only while the speed moved
                                   // more than speed_tolerance during it
    uint64_t seed;
    const char *self_exe;          // the dlperf binary a multi-rank configuration runs under mpirun (NULL: this one)
} dlp_validate_cfg;

// A configuration with balance > 0: predicts its loader rate (its slowest loader-side stage) from the profile and
// sets the device to sim:custom,img_per_s=<balance x that rate>. Others are left as they are.
dlp_status dlp_validate_resolve_balance(const dlp_validate_cfg *vc, dlp_validate_config *c);

// 8 measured steps, 10 s, at most 30 s; 2 retries above 0.2 cores of other work, each after waiting up to 20 s.
void dlp_validate_cfg_init(dlp_validate_cfg *c);

// The prediction for one configuration from the profile alone.
dlp_status dlp_validate_predict(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_prediction *out);
// How far a run was from the machine the profile describes, in units of the tolerances (<= 1: as probed): other
// processes' load over disturbed_cores, and |speed - 1| over speed_tolerance, whichever is larger (0: unknown).
double dlp_validate_disturbance(const dlp_validate_cfg *vc, const dlp_validate_row *r);
// A run of *row predicted from another profile (vc2->profile): at that profile's probed speed (*pred) and at the
// speed the run saw (*pred_speed; the row's canary readings in GFLOP/s, ref_gflops and ref1_gflops the references
// of the profile the row was run against). NAN when unknown.
void dlp_validate_predict_other(const dlp_validate_cfg *vc2, const dlp_validate_row *row, double ref_gflops,
                                double ref1_gflops, double *pred, double *pred_speed);
// The same run from another profile at the CPU share the run saw (NAN when the run's share or that profile's
// reference share is unknown).
double dlp_validate_predict_other_share(const dlp_validate_cfg *vc2, const dlp_validate_row *row);
// The same with every multi-thread row by the run's mean share (the model before the slowest thread's share).
double dlp_validate_predict_other_mean_share(const dlp_validate_cfg *vc2, const dlp_validate_row *row);
// Predicts, runs and measures one configuration into *row (row->ok = 0 and row->error on failure: the sweep goes on).
void dlp_validate_run_config(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row);

json_t *dlp_validate_row_to_json(const dlp_validate_row *r);

// --- the GPU model against published figures (perf/validate_published.c) ---------------------------------------
// Leave-one-GPU-out within each stack: for every GPU of a stack, hw/gpumodel's stack fitted without any record of
// that GPU (from its own stack or, through the prior, any other), then every training record of that GPU in that
// stack predicted from the datasheet. GPUs alone in their stack are counted in *skipped.
#include "hw/gpumodel.h"
typedef struct dlp_vp_row {
    const dlp_published *pub;
    char stack[32];
    int batch;            // the record's (0: not stated; predicted at DLP_GM_DEFAULT_BATCH)
    double predicted;     // whole-run img/s
    double error;         // (predicted - published) / published
    dlp_gm_stack fit;     // the held-out fit it was predicted with
} dlp_vp_row;
dlp_status dlp_validate_published(const dlp_catalog *c, dlp_vp_row *rows, int max, int *n, int *skipped);
// by_sheet: hold out a GPU together with every GPU of the same datasheet (V100 16GB and 32GB), the stricter test.
dlp_status dlp_validate_published_by(const dlp_catalog *c, int by_sheet, dlp_vp_row *rows, int max, int *n, int *skipped);
// `dlperf validate --published`: the table, the MAPE overall and per stack, each stack's parameters fitted on all
// its records; json_path (may be NULL) gets schema dlperf.validate_published/1 (never overwritten).
dlp_status dlp_validate_published_run(const char *catalog_dir, const char *json_path);

#endif
