// perf/evaluate: the whole evaluation of this machine (`dlperf run`): each stage (data bench, train, infer,
// predict) runs as a child process of this executable and writes its result into one run directory; then the
// figures are read back, the bottleneck named, the images priced (perf/cost) and the catalog's systems set beside
// them. It lives in perf/ rather than run/ because it prices through perf/cost (run/ comes before perf/).
// Defines: dlp_eval_cfg, dlp_eval_stage, dlp_eval, dlp_eval_progress_fn, dlp_eval_run_stages, dlp_eval_hw,
//          dlp_eval_system, dlp_eval_summary, dlp_eval_summarize, dlp_eval_summary_free, dlp_eval_summary_json,
//          dlp_eval_stage_why, dlp_eval_online, dlp_eval_catch_signals, dlp_eval_release_signals, dlp_eval_stop_signal, dlp_eval_free.
#ifndef DLP_PERF_EVALUATE_H
#define DLP_PERF_EVALUATE_H
#include <jansson.h>
#include <signal.h>

#include "core/status.h"
#include "core/tensor.h"

#define DLP_EVAL_MAX_BATCHES 16
#define DLP_EVAL_MAX_ONLINE 4  // precisions the online phase's cost is measured in beside the served one

typedef struct dlp_eval_cfg {
    const char *data, *device, *model, *compare;  // compare: catalog system ids ("none": no predict stage)
    const char *out;                              // the run directory (exists)
    dlp_dtype precision;                          // resolved: F32, BF16 or F16
    int infer_int8;                               // 1: the online phase in int8 (`run --precision int8`; training
                                                  // then in `precision`, its calibration on --data's train split)
    int size, batch, threads, workers, bench_images;
    int is_gpu;  // the device is cuda or sim:<gpu>
    int cpus;    // CPUs this process may use (the data stage's loader threads go up to it)
    const char *infer_batch_list;                              // "1,32": as given to the infer stage
    int infer_batches[DLP_EVAL_MAX_BATCHES], n_infer_batches;  // the list parsed; the first is the latency point
    double train_seconds, infer_seconds, usd_per_hour;         // usd_per_hour 0: not priced
    // The online phase's cost per precision: these precisions' throughput is also measured (dlperf infer at the
    // served phase's throughput batch, infer_seconds), beside the precision served (never listed here).
    dlp_dtype online_precisions[DLP_EVAL_MAX_ONLINE];
    int n_online;
} dlp_eval_cfg;

typedef enum { DLP_EVAL_DATA = 0, DLP_EVAL_TRAIN, DLP_EVAL_INFER, DLP_EVAL_PREDICT, DLP_EVAL_NSTAGES } dlp_eval_stage_id;

typedef struct dlp_eval_stage {
    const char *name;  // "data", "train", "infer", "predict"
    int rc;            // the subcommand's exit status (-1: not run)
    double seconds;
    char json_path[4200];
    json_t *result;  // the subcommand's JSON result, when it wrote one
    int ranks;       // > 1: run under `mpirun -np ranks` (one process per GPU)
} dlp_eval_stage;

typedef struct dlp_eval {
    dlp_eval_stage stage[DLP_EVAL_NSTAGES];
    dlp_eval_stage online[DLP_EVAL_MAX_ONLINE];  // cfg's online_precisions' throughput ("infer-int8", ...)
} dlp_eval;

// Called before a stage starts (the stage's title, and for training the processes it runs as).
typedef void (*dlp_eval_progress_fn)(void *ctx, dlp_eval_stage_id id, const char *title, int ranks);

// SIGINT/SIGTERM while a stage runs are passed on to the stage once and stop the run after it; catch before
// dlp_eval_run_stages and release when the run is over. dlp_eval_stop_signal: the signal that stopped it, or 0.
typedef struct dlp_eval_signals {
    struct sigaction old_int, old_term;
} dlp_eval_signals;
void dlp_eval_catch_signals(dlp_eval_signals *saved);
void dlp_eval_release_signals(const dlp_eval_signals *saved);
int dlp_eval_stop_signal(void);

// Runs the stages in order (predict only when cfg->compare is not "none"); a stage that fails is recorded in its
// rc and the run goes on with the next. Returns an error only when it cannot allocate.
dlp_status dlp_eval_run_stages(const dlp_eval_cfg *cfg, dlp_eval *ev, dlp_eval_progress_fn progress, void *ctx);
void dlp_eval_free(dlp_eval *ev);
// Why a stage has no figures: not run (the run was stopped), its result unreadable, or it failed.
const char *dlp_eval_stage_why(const dlp_eval_stage *s);

// The hardware monitor's summary of a stage (its result's monitor.total).
typedef struct dlp_eval_hw {
    int have;
    double cpu_util_pct, process_cores, peak_rss_bytes, disk_read_bytes_per_s;
    double cpu_package_power_w;  // summed over packages; npower 0: not measurable
    double gpu_util_pct;         // mean over GPUs; ngpu 0: none
    int npower, ngpu;
} dlp_eval_hw;

// A catalog system predicted for the same workload.
typedef struct dlp_eval_system {
    const char *id, *bottleneck;  // point into the predict stage's result (NULL: absent)
    double img_per_s, epoch_s, usd_per_million_images;
} dlp_eval_system;

// The online phase in one precision: its throughput and what a million images cost in it.
typedef struct dlp_eval_online {
    dlp_dtype precision;
    int served;                    // 1: the precision the online phase served in (the infer stage's best batch)
    int have;                      // 0: not measured (why says so)
    int batch;
    double img_per_s, usd_per_million_images;  // NAN when unknown / not priced
    const char *why;               // not measured: why
} dlp_eval_online;

typedef struct dlp_eval_summary {
    int have_prep;
    double prep_img_per_s, prep_img_per_s_one_thread;
    int prep_workers;
    int have_train;
    double train_img_per_s, train_data_wait_frac, train_gflop_per_s, train_fraction_of_peak;
    int train_threads_compute, train_threads_loader;
    const char *train_stall_text, *train_verdict;  // point into the train stage's result
    const char *bottleneck;  // "input pipeline" | "balanced" | "compute"; NULL: not judged (a figure is missing)
    char bottleneck_text[512];
    double prep_over_train;
    int have_infer;
    double infer_img_per_s, latency_p50_ms, latency_p99_ms;
    int infer_batch, latency_batch;
    dlp_eval_hw hw_train, hw_infer;
    double usd_per_hour, usd_per_million_train_images, usd_per_million_inferences;  // NAN when unknown
    int n_online;                                  // the served precision first, then cfg's online_precisions
    dlp_eval_online online[DLP_EVAL_MAX_ONLINE + 1];
    int have_compare, n_compare;
    dlp_eval_system *compare;
} dlp_eval_summary;

// The figures of the stages' results, the verdict and the prices. The summary points into ev's results: keep ev
// until the summary is no longer used.
dlp_status dlp_eval_summarize(const dlp_eval_cfg *cfg, const dlp_eval *ev, dlp_eval_summary *s);
void dlp_eval_summary_free(dlp_eval_summary *s);
// The summary object of dlperf.run/1 (wall_s is the caller's to add).
json_t *dlp_eval_summary_json(const dlp_eval_summary *s);
// The stages object of dlperf.run/1; *failed gets the number of stages that failed.
json_t *dlp_eval_stages_json(const dlp_eval *ev, int *failed);

#endif
