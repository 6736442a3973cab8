// perf/probe_impl: what the probe's parts share — the run's context, progress lines, small statistics (defined in
// probe_util.c, so the parts depend on it and not on the driver probe.c) — and each
// part's entry point (one file per part: probe_mem.c, probe_storage.c, probe_pipeline.c, probe_compute.c,
// probe_loop.c, probe_cuda.c, probe_interconnect.c), and the machine's speed around each timed row (probe_speed.c).
// Defines: dlp_probe_ctx, dlp_probe_say, dlp_probe_bg (start, images, stop), dlp_probe_memory, dlp_probe_storage, dlp_probe_pipeline,
//          dlp_probe_compute, dlp_probe_contention, dlp_probe_infer_rows, dlp_probe_loop, dlp_probe_checks, dlp_probe_cuda,
//          dlp_probe_fit_json, dlp_probe_row_new, dlp_probe_speed (spread, mean), dlp_probe_norm_add, dlp_probe_normalise,
//          DLP_PROBE_SPEED_BAND, DLP_PROBE_SPEED_TRIES, DLP_PROBE_CANARY_S.
#ifndef DLP_PERF_PROBE_IMPL_H
#define DLP_PERF_PROBE_IMPL_H
#include <jansson.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "data/dataset.h"
#include "perf/lsq.h"
#include "perf/probe.h"

#define DLP_PROBE_MAX_READINGS 1024
#define DLP_PROBE_MAX_NORMS 256
#define DLP_PROBE_WORK_KINDS 4  // fp32, bf16, int8 (dlp_probe_work_kind), the loader's decode (DLP_PROBE_WORK_DECODE)
#define DLP_PROBE_WORK_DECODE 3
#define DLP_PROBE_MAX_WORK 256
struct dlp_probe_norm;

typedef struct dlp_probe_ctx {
    const dlp_probe_cfg *cfg;
    dlp_profile *p;
    json_t *details;         // one object per part
    dlp_dataset *ds;         // the training split of --data
    char data_dir[4096];     // where its files are
    int threads;             // loader/compute threads up to this
    int64_t t_start_ns;
    int nsubset;             // images the pipeline and contention parts use (evenly spaced over the dataset)
    double quiet_budget_s;   // what is left of the time the probe may spend waiting for other work to stop
    int gpus;                // CUDA devices here (the cuda part counts them)
    // The machine's speed through the probe (probe_speed.c): every canary reading, on all CPUs and on one thread,
    // and each timed value to normalise to the reference speed (the readings' median) once the probe is over.
    double canary_all[DLP_PROBE_MAX_READINGS], canary_one[DLP_PROBE_MAX_READINGS];
    int ncanary_all, ncanary_one;
    struct dlp_probe_norm *norms;
    int nnorms;
    // The cores' speed at the rows' own kind of work (dlp_probe_work): every reading per precision (fp32, bf16, int8)
    double work[DLP_PROBE_WORK_KINDS][DLP_PROBE_MAX_WORK];
    int nwork[DLP_PROBE_WORK_KINDS];
    double pipe_work;  // the loader's work speed while the pipeline's CPU costs were measured (0: not read)
} dlp_probe_ctx;

// --- the machine's speed around each timed row (probe_speed.c) --------------------------------------------------
// A row is stable when every canary reading around it (before, between its points, after) lies within
// DLP_PROBE_SPEED_BAND of their median; an unstable row is measured again (DLP_PROBE_SPEED_TRIES tries in all), and the
// steadiest try is kept (named in the profile's notes when none was stable).
#define DLP_PROBE_SPEED_BAND 0.05
#define DLP_PROBE_SPEED_TRIES 2
// A compute row whose threads got less than this share of their time is measured again (up to 3 tries).
#define DLP_PROBE_QUIET_SHARE 0.9
#define DLP_PROBE_CANARY_S 0.12
// One canary reading (DLP_PROBE_CANARY_S) on `threads` threads (1: one thread; else every allowed CPU), recorded in
// the probe's distribution. GFLOP/s.
double dlp_probe_speed(dlp_probe_ctx *c, int threads);
// The work speed (issue 35, "a canary that is the workload itself"): GFLOP per CPU-second of a small convolution of
// the row's precision, one on each of `threads` threads (dlp_backend_measure_speed, DLP_PROBE_WORK_S), recorded per
// precision; 0 where the backend does not measure it. The share says how much of the cores a row got; this says how
// fast the cores were at the row's kind of work meanwhile — what a VM's neighbours move without steal showing it.
#define DLP_PROBE_WORK_S 0.1
// Readings of DLP_PROBE_WORK_S in a row whose median is one reading (dlp_work_read, dlp_decode_read).
#define DLP_PROBE_WORK_READS 3
double dlp_probe_work(dlp_probe_ctx *c, const dlp_backend *ops, dlp_dtype dt, int threads);
// One reading as dlp_probe_work and dlp_probe_decode_work take it, recorded nowhere (validate's readings around a
// run): the median of DLP_PROBE_WORK_READS readings on `threads` threads, those whose threads were time-shared
// (share below DLP_PROBE_QUIET_SHARE) left out; 0: not read, or time-shared every time.
double dlp_work_read(const dlp_backend *ops, dlp_dtype dt, int threads);
double dlp_decode_read(int threads);
// The loader's work speed (dlp_data_decode_speed: images per CPU-second of a fixed decode and transform) on `threads`
// threads, recorded as DLP_PROBE_WORK_DECODE; 0 when not read (or the threads were time-shared meanwhile).
double dlp_probe_decode_work(dlp_probe_ctx *c, int threads);
// Median of the readings r[0..n) that were taken (> 0); 0 when none was: a row's work speed (a reading taken in one
// of the VM's moments at half speed does not move it).
double dlp_probe_work_median(const double *r, int n);
// 0 fp32, 1 bf16, 2 int8; -1 for other types.
int dlp_probe_work_kind(dlp_dtype dt);
// The row just added was measured at work speed `w` (the median of the readings around it; 0: unknown) of kind `kind`:
// at the end of the probe it is also rescaled by w / (the probe's median of that kind), and *ref (may be NULL; the
// row's dlp_rate.work_gflops) gets that median — the work speed the profile's value holds at.
void dlp_probe_norm_work(dlp_probe_ctx *c, int kind, double w, double *ref);
// The work readings around the row just added (fp32, bf16 or int8 convolution) spread by `spread` ((max - min) /
// median of those read): over 2 x DLP_PROBE_SPEED_BAND the machine's speed moved within the row by more than its
// normalisation by their median can follow, and the row is named among those not stabilised (issue 35: a bf16 row
// whose readings went 2014, 2033, 1831 was 6% off the other probe's as normalised, not named).
void dlp_probe_norm_work_spread(dlp_probe_ctx *c, double spread);
// Readings r[0..n) where read (> 0): (max - min) / median; 0 for fewer than two.
double dlp_probe_work_spread(const double *r, int n);
// Readings r[0..n): (max - min) / median (0 for fewer than two).
double dlp_probe_speed_spread(const double *r, int n);
// Mean of the readings taken just before and after each of the row's parts: the row's speed.
double dlp_probe_speed_mean(const double *r, int n);
// A timed value measured at `speed` GFLOP/s on `threads` threads (1 or all): at the end of the probe it is rescaled
// to the reference speed of its class — a time by speed / reference, a rate by reference / speed — and listed under
// the profile's "probe.normalisation"; speed_rel (may be NULL) gets speed / reference. spread: the readings' spread
// around it; tries: measurements made.
// share: the CPU share the row's own threads got while it ran (hw/cpushare; 0: unknown). Where it is known the value
// is normalised by it (to the probe's median share of the row's class) rather than by the canary: a time-shared
// machine moves the share, which the row's threads measure over the whole row; both are recorded.
void dlp_probe_norm_add(dlp_probe_ctx *c, double *value, int is_rate, double speed, double share, int threads,
                        double spread, int tries, double *speed_rel, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));
// The row just added (dlp_probe_norm_add) was measured `reps` times: its repeats' normalised values spread by `spread`
// ((max - min) / median). Such a row is stable only when they agree within DLP_PROBE_SPEED_BAND (it is named
// otherwise). value may be NULL in dlp_probe_norm_add for a row only checked (not a profile value).
void dlp_probe_norm_repeats(dlp_probe_ctx *c, double spread, int reps);
// The row just added is a multi-thread fork-join computation (the cpu device's compute rows on two threads or more)
// whose `share` is its slowest thread's share (hw/cpushare's slowest_share): normalised to the median of such rows
// (host.cpu_share_slowest), not to the mean share of the other rows. Issue 35: a step goes at its slowest thread.
void dlp_probe_norm_slowest(dlp_probe_ctx *c);
// The row just added goes as its share ratio to the power e (> 0; measured by the row, probe_compute.c): normalised
// by (share / reference)^e instead of linearly.
void dlp_probe_norm_share_exp(dlp_probe_ctx *c, double e);
// The exponent e of  step time ~ share^-e  through (s_a, t_a) and (s_b, t_b) (s_b the lower share, beside the probe's
// spinner); 0 when it cannot be told: a point unknown, s_b not 15% below s_a (too little to measure a slope), or e
// outside 0.25..6 (the machine moved between the points). *why gets the reason ("measured" otherwise).
double dlp_probe_share_exp_fit(double t_a, double s_a, double t_b, double s_b, const char **why);
// A multi-thread compute row's share by its slowest thread: the points' slowest_share weighted by their wall time
// (shares[i] each point's, when not NULL); 0 when a point lacks it (no schedstat, or no thread wanted a core).
struct dlp_cpushare_sample;
double dlp_probe_slowest_row_share(const struct dlp_cpushare_sample *pts, int n, double *shares);
// The spread of a row's repeated values (normalised) about the value kept, their median: (max - min) / median of all
// of them for up to four; from five on, the lowest and the highest left out (one pass whose start a neighbour
// preempted does not move the median, and does not make the row unstable).
double dlp_probe_repeat_spread(const double *v, int n);
// The stability rule: a row measured more than once (reps >= 2) is stable when its repeats agree within the band after
// normalisation (what the profile keeps; the canary's moves are what the normalisation is for); a row measured once
// when the readings around it (its parts' CPU shares, else the canary) lie within 2 x the band.
int dlp_probe_row_stable(double readings_spread, double rep_spread, int reps);
// The end of the probe: the reference speeds (medians), host.canary_* (the distribution), every value rescaled, the
// rows that could not be stabilised said and noted. Returns the "normalisation" details object.
json_t *dlp_probe_normalise(dlp_probe_ctx *c);

// Before measuring again because other processes disturbed a measurement: waits for them to stop (up to 15 s, within
// the probe's waiting budget: 2 minutes, 40 s with --quick).
void dlp_probe_retry_wait(dlp_probe_ctx *c);

void dlp_probe_say(dlp_probe_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// A new rate row on dev (zeroed, then its identity and line: t0 + per_image x batch) — NULL when dev has no room.
dlp_rate *dlp_probe_row_new(dlp_device_profile *dev, dlp_task task, dlp_prec prec, int threads, int batch_ref,
                            const char *model, int size, double t0_s, double per_image_s, double cores_busy);
// A loader running flat out in the background on the probe's subset (warm), with `workers` threads at `size` px.
typedef struct dlp_probe_bg dlp_probe_bg;
dlp_status dlp_probe_bg_start(dlp_probe_ctx *c, int size, int workers, dlp_probe_bg **out);
int64_t dlp_probe_bg_images(dlp_probe_bg *k);  // images delivered so far
dlp_status dlp_probe_bg_stop(dlp_probe_bg *k);  // stops and frees it (NULL: nothing)
// The loader alone (data bench on the subset, `repeat` measurements, the median), measured again (up to
// DLP_PROBE_TRIES) while other processes disturb it: the least disturbed measurement, and how disturbed.
struct dlp_data_bench_run;
// The canary is read before and after each try (one thread for one worker, else all CPUs): *speed (may be NULL)
// gets the kept try's speed and *spread its readings' spread; a try is repeated while the speed moved (see
// DLP_PROBE_SPEED_BAND) and the steadiest kept.
// *share (may be NULL) gets the CPU share the kept try's threads got (hw/cpushare; 0: unknown).
dlp_status dlp_probe_loader_rate(dlp_probe_ctx *c, int size, int workers, int cold, uint64_t seed, int repeat,
                                 struct dlp_data_bench_run *out, double *other_cores, double *speed, double *spread,
                                 double *share);

// Other processes keeping more than this many cores busy make a wall-clock measurement worth repeating.
#define DLP_PROBE_DISTURBED_CORES 0.25
#define DLP_PROBE_TRIES 3

// Median of n values (sorts a copy; 0 for n = 0).
// {"coef": {name: value...}, "n", "rms", "mape", "max_ape", "r2"}
json_t *dlp_probe_fit_json(const dlp_lsq_fit *f, const char *const *names);

dlp_status dlp_probe_memory(dlp_probe_ctx *c);
dlp_status dlp_probe_storage(dlp_probe_ctx *c);
dlp_status dlp_probe_pipeline(dlp_probe_ctx *c);
// One backend ("ref", "cpu", "cuda"): a device entry with rates per (precision, threads, model, size).
dlp_status dlp_probe_compute(dlp_probe_ctx *c, const char *backend);
dlp_status dlp_probe_contention(dlp_probe_ctx *c);
// The cpu device's inference rows, fp32, bf16 (where the CPU has it) and int8 (probe_infer.c; after the compute part).
dlp_status dlp_probe_infer_rows(dlp_probe_ctx *c);
dlp_status dlp_probe_loop(dlp_probe_ctx *c);
// The allreduce bus bandwidth inside the node (mpirun -np R dlperf dist bench); unknown without mpirun.
dlp_status dlp_probe_interconnect(dlp_probe_ctx *c);
// The finished profile's loader predictions against data bench, warm and cold, 1..N threads (recorded).
dlp_status dlp_probe_checks(dlp_probe_ctx *c);
#ifdef DLP_HAVE_CUDA
dlp_status dlp_probe_cuda(dlp_probe_ctx *c);
#endif

#endif
