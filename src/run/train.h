// run/train: the training loop — loader -> backend (set_input, forward, loss, backward, update) -> SGD with an LR
// schedule, every phase timed, the data stall measured, validation at epoch ends, atomic checkpoints and an exact
// resume, the hardware monitor, and a versioned JSON result ("dlperf.train/1"). `dlperf train` is a thin CLI over
// it; `dlperf validate` calls it as a library to measure configurations (borrowed datasets, a step count, no eval,
// a per-step callback).
//
//   dlp_train_cfg c;  dlp_train_cfg_defaults(&c);
//   c.model = "resnet50";  c.device = "cpu";  c.batch = 32;  c.steps = 100;
//   dlp_train_result r;  dlp_status st = dlp_train_run(&c, &r);   // r.json: the full result
//   ...  dlp_train_result_free(&r);
//
// Defines: dlp_train_phase, dlp_train_cfg, dlp_train_cfg_defaults, dlp_train_event_kind, dlp_train_event,
//          dlp_train_verdict, dlp_train_eval, dlp_train_result, dlp_train_run, dlp_train_result_free,
//          dlp_train_phase_name, dlp_train_verdict_name, dlp_train_default_threads, dlp_train_peak.
#ifndef DLP_RUN_TRAIN_H
#define DLP_RUN_TRAIN_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "nn/schedule.h"

// The phases of a training step, in order. Their totals plus OTHER (the loop's own bookkeeping: releasing the
// batch, counters, callbacks) add up to the training loop's wall time; evaluation and checkpoints are timed apart.
typedef enum {
    DLP_TRAIN_PH_DATA_WAIT = 0,  // blocked in dlp_loader_next: the data stall
    DLP_TRAIN_PH_INPUT,          // set_input (the host-to-device copy on a GPU)
    DLP_TRAIN_PH_FORWARD,
    DLP_TRAIN_PH_LOSS,
    DLP_TRAIN_PH_BACKWARD,       // includes the gradient-bucket callbacks
    DLP_TRAIN_PH_ALLREDUCE,      // the gradients' mean over the ranks (0 with one process)
    DLP_TRAIN_PH_UPDATE,
    DLP_TRAIN_PH_OTHER,
    DLP_TRAIN_PH_COUNT
} dlp_train_phase;

typedef enum {
    DLP_TRAIN_EV_STEP = 0,    // after every optimizer step
    DLP_TRAIN_EV_LOG,         // every log_every steps (or ~log_interval_s): the step line's figures
    DLP_TRAIN_EV_EVAL,        // a validation pass finished
    DLP_TRAIN_EV_CHECKPOINT,  // a checkpoint was written (path)
    DLP_TRAIN_EV_EPOCH,       // an epoch of training data was completed
    DLP_TRAIN_EV_START,       // once, set up and about to take the first step (world, train_images, val_images)
} dlp_train_event_kind;

// What a callback sees. Figures marked "interval" cover the steps since the previous LOG event.
typedef struct dlp_train_event {
    dlp_train_event_kind kind;
    int64_t step;             // optimizer steps taken since the start of training (resumed runs included)
    int64_t total_steps;      // the run's length in steps
    int64_t epoch;            // 0-based epoch of the last step
    int64_t step_in_epoch;    // steps of that epoch taken (1..steps_per_epoch)
    int64_t steps_per_epoch;
    double loss;              // the last step's training loss (EVAL: the validation loss)
    double lr;                // the last step's learning rate
    double img_per_s;         // interval: images / wall time
    double data_wait_frac;    // interval: data wait / wall time
    double ms_per_step;       // interval
    double eta_s;             // estimated time to the end (steps left x recent step time; the time limit if sooner)
    double elapsed_s;         // since the run started
    double top1, top5;        // EVAL: validation accuracy in [0, 1]
    int64_t val_images;       // EVAL
    const char *path;         // CHECKPOINT: the model file written
    const double *phase_ms;   // STEP: this step's phase times (DLP_TRAIN_PH_COUNT)
    int rank;                 // the process's rank (data-parallel runs: only rank 0 reports)
    int world;                // START: the number of ranks (global batch = batch x world)
    int64_t train_images;     // START: this rank's training samples per epoch
} dlp_train_event;

// Return non-zero to stop the run after this step (the result then says "stopped by the caller").
typedef int (*dlp_train_callback)(void *ctx, const dlp_train_event *ev);

// MEASURE: at the start of the run, under the same conditions as the run (and stored in the cache); CACHED: the
// cache's value for this backend, precision, thread count, CPU and build when there is one, else measured.
typedef enum { DLP_TRAIN_PEAK_OFF = 0, DLP_TRAIN_PEAK_MEASURE, DLP_TRAIN_PEAK_CACHED } dlp_train_peak_mode;
// The --peak choices (core/opts): measure|cached|off.
extern const dlp_opt_choice dlp_train_peak_choices[];

typedef struct dlp_train_cfg {
    // ---- model and data ----
    const char *model;          // resnet18|34|50|101|152|resnet-mini|... (default resnet50)
    int classes;                // fc outputs; 0: the training set's class count
    int size;                   // crop (= input) size in pixels (default 224)
    int val_resize;             // validation: shorter side before the centre crop; 0: round(size * 256 / 224)
    double crop_scale_lo, crop_scale_hi;  // RandomResizedCrop area range (default 0.08, 1)
    const char *data;           // --data: ImageNet root, ImageFolder, list file, synthetic[:k=v,...] (NULL: synthetic)
    const char *val_data;       // validation set; NULL: <data>/val when data is a root with train/ and val/ (or the
                                // synthetic set's val split); "none": no validation
    dlp_dataset *train_ds;      // optional, borrowed: use these instead of opening data / val_data
    dlp_dataset *val_ds;
    int64_t limit_samples;      // > 0: train on this many samples only (spread over the set)
    int64_t val_limit_samples;  // > 0: validate on this many
    // ---- length ----
    int batch;                  // per step (default 32)
    int64_t epochs;             // default 1 when steps is 0
    int64_t steps;              // > 0: stop after this many optimizer steps (overrides epochs)
    double time_limit_s;        // > 0: stop training after this much wall time from the first step, evaluations
                                // and checkpoints included (the final evaluation follows)
    int64_t stop_at_step;       // > 0: stop once this many steps are done (as if interrupted: the schedule still
                                // spans steps/epochs); a checkpoint is written there when checkpoint_dir is set
    double target_top1;         // > 0: stop at the first evaluation whose validation top-1 (percent) reaches this —
                                // MLPerf's quality target (75.9 for ResNet-50 on ImageNet); the time to it is reported
    // ---- compute ----
    const char *device;         // cpu|ref|cuda|sim:<gpu>[,...] (default: cpu if compiled in, else ref)
    dlp_dtype precision;        // F32 (default) or BF16
    int threads;                // compute threads; 0: dlp_train_default_threads
    int workers;                // loader threads; 0: dlp_train_default_threads
    int prefetch;               // batch slots in the loader's ring; 0: 2 x workers
    int64_t bucket_elems;       // gradient bucket size (0: one bucket)
    const char *dist;           // communicator: NULL/"auto" (mpi when started by mpirun/srun, else local), "local",
                                // "mpi"; with several ranks each trains on its shard and gradients are averaged
    uint64_t seed;              // weights, data order, augmentation (default 0)
    // ---- optimizer and schedule ----
    dlp_lr_schedule sched;      // base_lr per 256 images when scale_by_batch, warm-up, decay, final_lr, step
                                // milestones: dlp_lr_schedule_default's; batch, world, steps_per_epoch and
                                // total_steps are set by the run
    double momentum;            // default 0.9
    int nesterov;
    double weight_decay;        // default 1e-4
    int no_bn_decay;            // no weight decay on BN parameters and biases
    double label_smoothing;     // default 0
    int zero_init_residual;     // zero each residual block's last BN gamma at initialization
    // ---- evaluation ----
    int eval;                   // 1 (default): validate at the end of every epoch and at the end of training
    int64_t eval_every;         // > 0: also every N steps
    // ---- checkpoints ----
    const char *checkpoint_dir; // NULL: none. Written as <dir>/step-<N>.safetensors (+ .state.safetensors)
    int64_t checkpoint_every;   // steps; 0: at each epoch end. A last checkpoint is always written at the end
    int keep_checkpoints;       // keep the newest N (default 2; 0: all)
    const char *resume;         // a checkpoint file, or a checkpoint directory (its newest)
    // ---- input pipeline ----
    int64_t read_limit_bytes_per_s;  // emulate slow storage (0: unlimited)
    int drop_cache;             // drop the dataset from the page cache first (cold reads)
    // ---- measurement and reporting ----
    int measure_warmup_steps;   // steps excluded from steady-state figures; -1 (default): min(10, steps / 10)
    dlp_train_peak_mode peak;   // the backend's peak GFLOP/s: MEASURE (default), CACHED or OFF
    int sync_phases;            // asynchronous devices: 1 = wait for the device after each phase (exact split,
                                // less overlap); 0 (default) = host-observed phases (docs/training.md)
    int monitor;                // 1 (default): run the hardware monitor (summary per phase in the result)
    int monitor_interval_ms;    // 0: the monitor's default (500)
    const char *monitor_csv, *monitor_jsonl;  // time series files (never overwritten)
    int64_t log_every;          // LOG event every N steps; 0 (default): about every log_interval_s
    double log_interval_s;      // default 5
    dlp_train_callback callback;
    void *callback_ctx;
    json_t *options;            // borrowed: the command's option echo, stored as the result's "config.options"
} dlp_train_cfg;

void dlp_train_cfg_defaults(dlp_train_cfg *c);

// Default thread counts for a device on this machine (docs/training.md has the measurements behind them):
// compute threads = the CPUs this process may use; loader threads = max(1, cpus / 4) when the CPU computes
// (cpu, ref), all CPUs when a device computes (cuda, sim).
void dlp_train_default_threads(const char *device, int *threads, int *workers);

typedef enum {
    DLP_TRAIN_COMPUTE_BOUND = 0,  // the loader kept up: data wait under 5 % of the step
    DLP_TRAIN_PIPELINE_BOUND,     // the step waited for data
    DLP_TRAIN_INPUT_BOUND,        // a GPU waited for its host-to-device copies (input_stats)
} dlp_train_verdict;

typedef struct dlp_train_eval {
    int64_t step, epoch;        // after this many steps; epoch: the 0-based epoch just completed, or -1 mid-epoch
    double top1, top5, loss;    // validation
    int64_t images;
    double ms;
} dlp_train_eval;

typedef struct dlp_train_result {
    int64_t steps;              // optimizer steps taken in this run (not counting those before a resume)
    int64_t first_step;         // the step it started at (0, or the checkpoint's)
    int64_t images;             // training images
    int64_t steps_per_epoch;
    double epochs_done;         // fractional, at the end
    double wall_s;              // the whole run (setup, training, evaluation, checkpoints)
    double setup_s;             // before the first step: datasets, plan, weights, peak
    double train_s;             // the training loop (the sum of the phases)
    double eval_s, checkpoint_s;
    double phase_ms[DLP_TRAIN_PH_COUNT];
    double img_per_s;           // images / train_s
    double steady_img_per_s;    // excluding the first measure_warmup_steps steps
    double compute_img_per_s;   // steady images / steady compute time (input..update): what the device could take
    double loader_img_per_s;    // what the loader's workers could deliver: workers / worker time per image
    double gflop_per_image;     // 3 x forward
    double gflop_per_s;         // steady, over the loop's wall time
    double compute_gflop_per_s; // steady, over compute time only
    double peak_gflop_per_s;    // 0: not measured
    double fraction_of_peak;    // gflop_per_s / peak
    double data_wait_frac;      // steady data wait / steady loop time
    dlp_train_verdict verdict;
    char verdict_text[256];     // "pipeline-bound: the loader delivered X img/s while compute could take Y"
    double first_loss, last_loss;
    double best_top1, last_top1, last_top5;  // -1 when there was no validation
    int nevals;
    char stopped_by[32];        // "steps", "epochs", "time-limit", "target-top1", "callback"
    char last_checkpoint[1024];
    int threads, workers;       // as used
    int rank, world;            // this process's rank of `world` (1: one process); only rank 0 reports
    json_t *json;               // the "dlperf.train/1" result (owned)
} dlp_train_result;

// Runs the training described by cfg. On success r is filled (r->json too). On failure the status and the
// error chain say why, and r->json (when not NULL) holds what was measured before the failure.
dlp_status dlp_train_run(const dlp_train_cfg *cfg, dlp_train_result *r);
void dlp_train_result_free(dlp_train_result *r);

const char *dlp_train_phase_name(dlp_train_phase p);  // "data_wait", "input", "forward", ...
const char *dlp_train_verdict_name(dlp_train_verdict v);  // "compute-bound", "pipeline-bound", "input-bound"

// The backend's peak GFLOP/s at a precision and thread count (backend measure_peak): measured (and stored in
// dlp_cache_dir()/peak/<backend>-<precision>-t<threads>.json with the CPU model and library versions), or with
// mode CACHED taken from that file when it matches this machine and build. *source gets "measured" or "cached".
// DLP_ERR_UNSUPPORTED if the backend cannot measure one.
dlp_status dlp_train_peak(const char *device, dlp_dtype precision, int threads, dlp_train_peak_mode mode,
                          double *gflops, const char **source);

#endif
