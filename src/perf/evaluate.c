// perf/evaluate: `dlperf run`'s stages as child processes, their figures read back, the verdict and the prices.
#include "perf/evaluate.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/fields.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "dist/launch.h"
#include "hw/profile.h"
#include "perf/cost.h"
#ifdef DLP_HAVE_NCCL
#include "backend/cuda/cuda.h"
#endif

#define MAX_ARGS 64

typedef struct argbuf {
    char *argv[MAX_ARGS];
    char store[MAX_ARGS][4608];
    int argc;
    int overflow;  // an argument did not fit: the stage is not run
} argbuf;

static void vadd(argbuf *a, const char *fmt, va_list ap) {
    if (a->argc >= MAX_ARGS - 1) {
        a->overflow = 1;
        return;
    }
    int n = vsnprintf(a->store[a->argc], sizeof a->store[0], fmt, ap);
    if (n < 0 || (size_t)n >= sizeof a->store[0]) a->overflow = 1;
    a->argv[a->argc] = a->store[a->argc];
    a->argc++;
    a->argv[a->argc] = NULL;
}

static void arg(argbuf *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(argbuf *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vadd(a, fmt, ap);
    va_end(ap);
}

// "--name" and its value
static void opt(argbuf *a, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void opt(argbuf *a, const char *name, const char *fmt, ...) {
    arg(a, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vadd(a, fmt, ap);
    va_end(ap);
}

// The options the training and inference stages share.
static void model_opts(argbuf *a, const dlp_eval_cfg *c, dlp_dtype precision) {
    opt(a, "--data", "%s", c->data);
    opt(a, "--model", "%s", c->model);
    opt(a, "--size", "%d", c->size);
    opt(a, "--device", "%s", c->device);
    opt(a, "--precision", "%s", dlp_dtype_name(precision));
    opt(a, "--threads", "%d", c->threads);
}

// The value at a dotted path ("throughput.img_per_s"); NULL when absent.
static const json_t *jget(const json_t *o, const char *path) {
    char key[128];
    const char *p = path;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key) return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        o = json_object_get(o, key);
        p = dot ? dot + 1 : p + n;
    }
    return o;
}

static double jnum(const json_t *o, const char *path) {
    const json_t *v = jget(o, path);
    return v && json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *path) {
    const json_t *v = jget(o, path);
    return v && json_is_string(v) ? json_string_value(v) : NULL;
}

// An integer field; def when it is missing.
static int jint(const json_t *o, const char *path, int def) {
    double v = jnum(o, path);
    return isfinite(v) && fabs(v) < 2e9 ? (int)v : def;
}

// Processes for the training stage: on a machine with several CUDA GPUs (--device cuda without an index) and
// mpirun, one per GPU; otherwise 1.
static int train_ranks(const char *device) {
#ifdef DLP_HAVE_NCCL
    if (dlp_backend_kind_of(device) != DLP_BACKEND_KIND_GPU || strchr(device, ':') || !dlp_mpirun_available()) return 1;
    int n = 0;
    dlp_cuda_device_info d;
    while (n < 64 && dlp_cuda_device_query(n, &d) == DLP_OK) n++;
    dlp_err_clear();
    return n > 1 ? n : 1;
#else
    (void)device;
    return 1;
#endif
}

// SIGINT/SIGTERM while a stage runs: passed on to the stage once (it stops cleanly and writes its result), and
// the run stops after it. The stage runs in its own process group, so a Ctrl-C at the terminal reaches the run
// only and is not delivered twice (dlperf train takes a second signal as "stop now, write nothing").
static volatile sig_atomic_t g_child, g_stop;

static void on_signal(int sig) {
    g_stop = sig;
    if (g_child > 0) kill((pid_t)g_child, sig);
}

void dlp_eval_catch_signals(dlp_eval_signals *saved) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
}

void dlp_eval_release_signals(const dlp_eval_signals *saved) {
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}

int dlp_eval_stop_signal(void) { return (int)g_stop; }

// The child: its own process group, default signals, then dlperf (or mpirun over it) with the stage's argv.
static void exec_stage(const dlp_eval_stage *s, char **argv) {
    setpgid(0, 0);
    signal(SIGTTOU, SIG_IGN);  // a background group may still write to the terminal
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (s->ranks > 1) {
        if (getuid() == 0) {  // Open MPI refuses root unless told
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
        }
        execvp("mpirun", argv);
    } else {
        execv("/proc/self/exe", argv);
    }
    fprintf(stderr, "run: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

// Waits for the stage's process and sets its exit status (128 + signal when killed).
static void wait_stage(dlp_eval_stage *s, pid_t pid) {
    setpgid(pid, pid);  // also here: whichever runs first
    g_child = pid;
    if (g_stop) kill(pid, g_stop);  // a signal that came between the check and the fork
    int status = 0, w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    g_child = 0;
    if (w < 0) {
        DLP_INFO("run: lost the %s stage (pid %d): %s", s->name, (int)pid, strerror(errno));
        s->rc = 125;
    } else if (WIFEXITED(status)) {
        s->rc = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        s->rc = 128 + WTERMSIG(status);
        DLP_INFO("run: the %s stage was killed by signal %d (%s)", s->name, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        s->rc = 125;
    }
}

// Runs one stage's subcommand as a child process (dlperf <args>): a stage that crashes or runs out of memory does
// not take the run with it, each stage's memory and monitor figures are its own, and a subcommand may re-execute
// itself (dlperf train does, to set OpenMP's wait policy). Then loads the result the stage wrote.
static void run_stage(dlp_eval_stage *s, argbuf *a) {
    uint64_t t0 = dlp_now_ns();
    if (a->overflow) {
        DLP_INFO("run: the %s stage's command line is too long (a path over 4 KB?): not run", s->name);
        s->rc = 2;
        return;
    }
    char *argv[MAX_ARGS + 8], np[16], self[4096] = "/proc/self/exe";
    int k = 0;
    if (s->ranks > 1) {  // one process per GPU: mpirun starts them, each a rank of the nccl communicator
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        snprintf(np, sizeof np, "%d", s->ranks);
        argv[k++] = "mpirun";
        argv[k++] = "--oversubscribe";
        argv[k++] = "-np";
        argv[k++] = np;
        argv[k++] = self;
    } else {
        argv[k++] = "dlperf";
    }
    for (int i = 0; i < a->argc; i++) argv[k++] = a->argv[i];
    argv[k] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) exec_stage(s, argv);
    if (pid < 0) {
        DLP_INFO("run: cannot start the %s stage: %s", s->name, strerror(errno));
        s->rc = 126;
    } else {
        wait_stage(s, pid);
    }
    s->seconds = dlp_ns_to_s(dlp_now_ns() - t0);
    if (dlp_path_exists(s->json_path)) {
        dlp_status st = dlp_json_load(s->json_path, &s->result);
        if (st) {
            dlp_err_print(stderr);
            dlp_err_clear();
            s->result = NULL;
        }
    }
    if (s->rc != 0 && !g_stop)
        DLP_INFO("run: the %s stage ended with exit status %d; going on with the next", s->name, s->rc);
}

// A stage's command line starts empty and writes <out>/<stage>.json.
static void stage_start(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    snprintf(s->json_path, sizeof s->json_path, "%s/%s.json", c->out, s->name);
    a->argc = 0;
}

// Runs a stage that also writes its result and the monitor's time series (<out>/<stage>-monitor.csv).
static void run_stage_monitored(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    char csv[4200];
    snprintf(csv, sizeof csv, "%s/%s-monitor.csv", c->out, s->name);
    opt(a, "--json", "%s", s->json_path);
    opt(a, "--monitor-csv", "%s", csv);
    run_stage(s, a);
}

// 1. data preparation: the loader alone over 1, 2, 4 .. and all allowed CPUs (a data-stall analysis' rate)
static void data_stage(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    int n = c->cpus;
    char list[128] = "";
    int nlist = 0;
    int last = 0;
    for (int w = 1; w <= n && nlist < 7; w *= 2, nlist++, last = w / 2)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", nlist ? "," : "", w);
    if (last != n) snprintf(list + strlen(list), sizeof list - strlen(list), ",%d", n);  // always all CPUs
    stage_start(c, s, a);
    arg(a, "data");
    arg(a, "bench");
    opt(a, "--data", "%s", c->data);
    opt(a, "--crop", "%d", c->size);
    opt(a, "--batch", "%d", c->batch);
    opt(a, "--workers", "%s", list);
    opt(a, "--images", "%d", c->bench_images);
    // the batches' element type: what the device is fed (a CPU takes bf16 batches as fp32)
    dlp_dtype dt = c->precision == DLP_DTYPE_BF16 && !c->is_gpu ? DLP_DTYPE_F32 : c->precision;
    opt(a, "--dtype", "%s", dlp_dtype_name(dt));
    opt(a, "--json", "%s", s->json_path);
    run_stage(s, a);
}

// 2. training through the real pipeline, monitored
static void train_stage(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    stage_start(c, s, a);
    arg(a, "train");
    model_opts(a, c, c->precision);
    if (s->ranks > 1) opt(a, "--dist", "nccl");
    opt(a, "--batch", "%d", c->batch);
    opt(a, "--workers", "%d", c->workers);
    opt(a, "--epochs", "1000");  // the time limit ends the run; a fast device goes through several epochs
    opt(a, "--time-limit", "%g", c->train_seconds);
    arg(a, "--no-eval");
    opt(a, "--warmup-steps", "5");
    opt(a, "--measure-warmup", "2");  // a time-limited run: its length in steps is not known up front
    run_stage_monitored(c, s, a);
}

// `dlperf infer` in `precision` over `batches` ("1,32"), up to batch `maxb`.
static void infer_args(const dlp_eval_cfg *c, argbuf *a, dlp_dtype precision, const char *batches, int maxb) {
    arg(a, "infer");
    model_opts(a, c, precision);
    if (precision == DLP_DTYPE_I8) opt(a, "--calib-images", "%d", 64);
    opt(a, "--batch", "%s", batches);
    opt(a, "--samples", "%d", maxb > 64 ? maxb : 64);
    opt(a, "--min-duration", "%g", c->infer_seconds);
    opt(a, "--iters", "3");
}

static dlp_dtype served_precision(const dlp_eval_cfg *c) { return c->infer_int8 ? DLP_DTYPE_I8 : c->precision; }

// 3. the online phase: inference throughput and latency
static void infer_stage(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    stage_start(c, s, a);
    int maxb = 1;
    for (int i = 0; i < c->n_infer_batches; i++)
        if (c->infer_batches[i] > maxb) maxb = c->infer_batches[i];
    infer_args(c, a, served_precision(c), c->infer_batch_list, maxb);
    run_stage_monitored(c, s, a);
}

static const json_t *infer_best(const json_t *inf);
static int jint(const json_t *o, const char *path, int def);

// The batch the online phase's throughput was best at (the largest asked when the infer stage gave none).
static int throughput_batch(const dlp_eval_cfg *c, const dlp_eval *ev) {
    const json_t *best = infer_best(ev->stage[DLP_EVAL_INFER].result);
    int b = best ? jint(best, "batch", 0) : 0;
    for (int i = 0; b < 1 && i < c->n_infer_batches; i++)
        if (c->infer_batches[i] > b) b = c->infer_batches[i];
    return b > 0 ? b : 1;
}

// 3b. the online phase's throughput in another precision, at the served phase's throughput batch: its cost
static void online_stage(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a, dlp_dtype precision, int batch) {
    stage_start(c, s, a);
    char b[16];
    snprintf(b, sizeof b, "%d", batch);
    infer_args(c, a, precision, b, batch);
    opt(a, "--monitor-interval", "0");
    opt(a, "--json", "%s", s->json_path);
    run_stage(s, a);
}

static const char *online_name(dlp_dtype t) {
    switch (t) {
    case DLP_DTYPE_F32: return "infer-fp32";
    case DLP_DTYPE_BF16: return "infer-bf16";
    case DLP_DTYPE_F16: return "infer-fp16";
    case DLP_DTYPE_I8: return "infer-int8";
    default: return "infer-other";
    }
}

// 4. the catalog's systems for the same workload
static void predict_stage(const dlp_eval_cfg *c, dlp_eval_stage *s, argbuf *a) {
    stage_start(c, s, a);
    arg(a, "predict");
    opt(a, "--system", "%s", c->compare);
    opt(a, "--model", "%s", c->model);
    opt(a, "--size", "%d", c->size);
    opt(a, "--json", "%s", s->json_path);
    run_stage(s, a);
}

dlp_status dlp_eval_run_stages(const dlp_eval_cfg *c, dlp_eval *ev, dlp_eval_progress_fn progress, void *ctx) {
    static const char *const names[DLP_EVAL_NSTAGES] = {"data", "train", "infer", "predict"};
    static const char *const titles[DLP_EVAL_NSTAGES] = {
        "data preparation: the input pipeline alone (read, JPEG decode, random-resized crop, flip, normalize)",
        "training: the real loader feeding the backend, every phase timed, the hardware monitored",
        "inference: offline throughput and per-call latency of the inference plan (BN folded, fusions)",
        "the catalog's GPU systems, predicted for the same training workload (dlperf predict)",
    };
    memset(ev, 0, sizeof *ev);
    for (int i = 0; i < DLP_EVAL_NSTAGES; i++) {
        ev->stage[i].name = names[i];
        ev->stage[i].rc = -1;
    }
    for (int k = 0; k < DLP_EVAL_MAX_ONLINE; k++) {
        ev->online[k].name = k < c->n_online ? online_name(c->online_precisions[k]) : NULL;
        ev->online[k].rc = -1;
    }
    argbuf *a = calloc(1, sizeof *a);
    if (!a) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < DLP_EVAL_NSTAGES; i++) {
        dlp_eval_stage *s = &ev->stage[i];
        if (i > 0 && g_stop) break;
        if (i == DLP_EVAL_PREDICT && strcmp(c->compare, "none") == 0) break;
        if (i == DLP_EVAL_TRAIN) s->ranks = train_ranks(c->device);
        if (progress) progress(ctx, (dlp_eval_stage_id)i, titles[i], s->ranks);
        if (i == DLP_EVAL_DATA) data_stage(c, s, a);
        else if (i == DLP_EVAL_TRAIN) train_stage(c, s, a);
        else if (i == DLP_EVAL_INFER) infer_stage(c, s, a);
        else predict_stage(c, s, a);
        if (i != DLP_EVAL_INFER) continue;
        const int b = throughput_batch(c, ev);
        for (int k = 0; k < c->n_online && k < DLP_EVAL_MAX_ONLINE && !g_stop; k++) {
            char title[160];
            snprintf(title, sizeof title, "the online phase in %s: throughput at batch %d, for its cost per image",
                     dlp_dtype_name(c->online_precisions[k]), b);
            if (progress) progress(ctx, DLP_EVAL_INFER, title, 0);
            online_stage(c, &ev->online[k], a, c->online_precisions[k], b);
        }
    }
    free(a);
    return DLP_OK;
}

void dlp_eval_free(dlp_eval *ev) {
    for (int i = 0; i < DLP_EVAL_NSTAGES; i++) {
        json_decref(ev->stage[i].result);
        ev->stage[i].result = NULL;
    }
    for (int k = 0; k < DLP_EVAL_MAX_ONLINE; k++) {
        json_decref(ev->online[k].result);
        ev->online[k].result = NULL;
    }
}

json_t *dlp_eval_stages_json(const dlp_eval *ev, int *failed) {
    json_t *jst = json_object();
    *failed = 0;
    for (int i = 0; i < DLP_EVAL_NSTAGES + DLP_EVAL_MAX_ONLINE; i++) {
        const dlp_eval_stage *s = i < DLP_EVAL_NSTAGES ? &ev->stage[i] : &ev->online[i - DLP_EVAL_NSTAGES];
        if (i >= DLP_EVAL_NSTAGES && !s->name) continue;  // the online phase in other precisions: those asked
        json_t *e = json_object();
        json_object_set_new(e, "exit_status", json_integer(s->rc));
        json_object_set_new(e, "ran", json_boolean(s->rc >= 0));
        json_object_set_new(e, "seconds", dlp_json_real_or_null(s->seconds));
        if (s->result) json_object_set_new(e, "result", json_string(s->json_path));
        json_object_set_new(jst, s->name, e);
        if (s->rc > 0) (*failed)++;
    }
    return jst;
}

// ---- the summary ----------------------------------------------------------------------------------------------

// The result of the infer stage at one batch size.
static const json_t *infer_point(const json_t *inf, int batch) {
    const json_t *res = json_object_get(inf, "results");
    size_t i;
    const json_t *r;
    json_array_foreach(res, i, r) {
        if (jint(r, "batch", -1) == batch) return r;
    }
    return NULL;
}

static const json_t *infer_best(const json_t *inf) {
    const json_t *res = json_object_get(inf, "results"), *best = NULL;
    size_t i;
    const json_t *r;
    json_array_foreach(res, i, r) {
        if (!best || jnum(r, "images_per_s") > jnum(best, "images_per_s")) best = r;
    }
    return best;
}

// The hardware monitor's summary of a stage (its result's monitor.total).
static void hw_of(const json_t *result, dlp_eval_hw *hw) {
    memset(hw, 0, sizeof *hw);
    const json_t *m = jget(result, "monitor.total.metrics");
    if (!m || !json_is_object(m)) return;
    hw->have = 1;
    hw->cpu_util_pct = jnum(json_object_get(m, "cpu.all.util_pct"), "mean");
    hw->process_cores = jnum(json_object_get(m, "proc.cpu_pct"), "mean") / 100;
    hw->peak_rss_bytes = jnum(json_object_get(m, "proc.rss_bytes"), "max");
    double gpu = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        size_t n = strlen(k);
        double mean = jnum(v, "mean");
        if (!isfinite(mean)) continue;
        if (strncmp(k, "disk.", 5) == 0 && n > 19 && strcmp(k + n - 19, ".read_bytes_per_s") == 0)
            hw->disk_read_bytes_per_s += mean;
        if (strncmp(k, "rapl.package", 12) == 0 && n > 8 && strcmp(k + n - 8, ".power_w") == 0)
            hw->cpu_package_power_w += mean, hw->npower++;
        if (strncmp(k, "gpu.", 4) == 0 && n > 9 && strcmp(k + n - 9, ".util_pct") == 0) gpu += mean, hw->ngpu++;
    }
    if (hw->ngpu) hw->gpu_util_pct = gpu / hw->ngpu;
}

const char *dlp_eval_stage_why(const dlp_eval_stage *st) {
    if (st->rc < 0) return "not run (the run was stopped)";
    if (st->rc == 0) return "not measured (the stage's result could not be read)";
    return "not measured (the stage failed: see above)";
}

// $ per million images at a machine's hourly price (perf/cost); NAN when either is unknown.
static double usd_per_million(double usd_per_hour, double img_per_s) {
    if (!(usd_per_hour > 0) || !isfinite(img_per_s) || !(img_per_s > 0)) return NAN;
    dlp_cost_profile machine = {.usd_per_hour = usd_per_hour};
    dlp_cost_params params;
    dlp_cost_params_init(&params);
    dlp_cost c;
    if (dlp_cost_compute(&machine, &params, 1, img_per_s, 0, 0, &c)) {
        dlp_err_clear();
        return NAN;
    }
    return c.usd_per_million_images;
}

static void prep_figures(const json_t *data, dlp_eval_summary *s) {
    double prep = NAN, prep1 = NAN;
    int prep_w = 0;
    const json_t *runs = json_object_get(data, "runs"), *r;
    size_t i;
    json_array_foreach(runs, i, r) {
        double v = jnum(r, "img_per_s");
        if (jint(r, "workers", -1) == 1) prep1 = v;
        if (!isfinite(prep) || v > prep) {
            prep = v;
            prep_w = jint(r, "workers", 0);
        }
    }
    s->have_prep = 1;
    s->prep_img_per_s = prep;
    s->prep_img_per_s_one_thread = prep1;
    s->prep_workers = prep_w;
}

static void train_figures(const json_t *t, dlp_eval_summary *s) {
    s->have_train = 1;
    s->train_img_per_s = jnum(t, "throughput.steady_img_per_s");
    s->train_data_wait_frac = jnum(t, "stall.data_wait_frac");
    s->train_fraction_of_peak = jnum(t, "gflop.fraction_of_peak");
    s->train_gflop_per_s = jnum(t, "gflop.achieved_per_s");
    s->train_threads_compute = jint(t, "threads.compute", 0);
    s->train_threads_loader = jint(t, "threads.loader", 0);
    s->train_stall_text = jstr(t, "stall.text");
    s->train_verdict = jstr(t, "stall.verdict");
}

// What holds training back: the pipeline when training waited for data; balanced when the pipeline alone is
// less than 1.25x the training rate; else compute.
static void verdict(const dlp_eval_cfg *c, dlp_eval_summary *s) {
    double train_rate = s->train_img_per_s, prep = s->prep_img_per_s;
    if (!(isfinite(train_rate) && train_rate > 0 && isfinite(prep) && prep > 0)) return;
    const char *v = s->train_verdict;
    double headroom = prep / train_rate;
    char *why = s->bottleneck_text;
    size_t len = sizeof s->bottleneck_text;
    if (v && strcmp(v, "pipeline-bound") == 0) {
        s->bottleneck = "input pipeline";
        snprintf(why, len,
                 "the input pipeline: training waited for data; more loader threads (or faster cores/storage) "
                 "would raise it (the pipeline alone reached %.0f img/s with %d threads)",
                 prep, s->prep_workers);
    } else if (headroom < 1.25) {
        s->bottleneck = "balanced";
        snprintf(why, len,
                 "balanced: compute took %.0f img/s and the input pipeline alone reaches %.0f img/s with %d "
                 "threads (%.2fx): a faster device would wait for data; it needs more or faster loader cores",
                 train_rate, prep, s->prep_workers, headroom);
    } else {
        s->bottleneck = "compute";
        if (!c->is_gpu)
            snprintf(why, len,
                     "compute: the loader kept up; the input pipeline alone could feed %.1fx this rate, so the "
                     "same CPU could keep a device ~%.0fx faster busy before decode becomes the limit",
                     headroom, headroom);
        else
            snprintf(why, len, "the device's compute: the loader kept up (it alone delivers %.1fx this rate)",
                     headroom);
    }
    s->prep_over_train = headroom;
}

static void infer_figures(const dlp_eval_cfg *c, const json_t *inf, dlp_eval_summary *s) {
    const json_t *best = infer_best(inf), *p1 = infer_point(inf, c->infer_batches[0]);
    s->have_infer = 1;
    s->infer_img_per_s = s->latency_p50_ms = s->latency_p99_ms = NAN;
    s->latency_batch = c->infer_batches[0];
    if (best) {
        s->infer_img_per_s = jnum(best, "images_per_s");
        s->infer_batch = jint(best, "batch", 0);
    }
    if (p1) {
        s->latency_p50_ms = jnum(p1, "latency_ms.p50");
        s->latency_p99_ms = jnum(p1, "latency_ms.p99");
    }
}

// The online phase per precision: the served one (the infer stage's best batch) first, then each other precision
// measured at that batch; each priced at the machine's hourly price (usd_per_million, as the other figures).
static void online_figures(const dlp_eval_cfg *c, const dlp_eval *ev, dlp_eval_summary *s) {
    s->n_online = 0;
    if (ev->stage[DLP_EVAL_INFER].rc < 0) return;  // the run stopped before the online phase
    if (!s->have_infer && c->n_online == 0) return;
    dlp_eval_online *o = &s->online[s->n_online++];
    o->precision = served_precision(c);
    o->served = 1;
    o->img_per_s = s->have_infer ? s->infer_img_per_s : NAN;
    o->batch = s->have_infer ? s->infer_batch : 0;
    o->have = isfinite(o->img_per_s) && o->img_per_s > 0;
    if (!o->have) o->why = "not measured (the infer stage gave no throughput)";
    for (int k = 0; k < c->n_online && k < DLP_EVAL_MAX_ONLINE; k++) {
        const dlp_eval_stage *st = &ev->online[k];
        const json_t *pt = st->result ? infer_best(st->result) : NULL;
        o = &s->online[s->n_online++];
        o->precision = c->online_precisions[k];
        o->img_per_s = pt ? jnum(pt, "images_per_s") : NAN;
        o->batch = pt ? jint(pt, "batch", 0) : 0;
        o->have = isfinite(o->img_per_s) && o->img_per_s > 0;
        if (!o->have) o->why = dlp_eval_stage_why(st);
    }
    for (int k = 0; k < s->n_online; k++)
        s->online[k].usd_per_million_images = usd_per_million(c->usd_per_hour, s->online[k].img_per_s);
}

static dlp_status compare_figures(const json_t *pred, dlp_eval_summary *s) {
    const json_t *preds = json_object_get(pred, "predictions"), *p;
    size_t i, n = json_is_array(preds) ? json_array_size(preds) : 0;
    s->have_compare = 1;
    s->compare = n ? calloc(n, sizeof *s->compare) : NULL;
    if (n && !s->compare) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    json_array_foreach(preds, i, p) {
        dlp_eval_system *e = &s->compare[s->n_compare++];
        e->id = jstr(p, "machine.id");
        e->img_per_s = jnum(p, "prediction.img_per_s");
        e->usd_per_million_images = jnum(p, "cost.usd_per_million_images");
        e->epoch_s = jnum(p, "prediction.epoch_s");
        e->bottleneck = jstr(p, "prediction.bottleneck");
    }
    return DLP_OK;
}

dlp_status dlp_eval_summarize(const dlp_eval_cfg *c, const dlp_eval *ev, dlp_eval_summary *s) {
    memset(s, 0, sizeof *s);
    s->prep_img_per_s = s->prep_img_per_s_one_thread = s->train_img_per_s = s->infer_img_per_s = NAN;
    s->latency_p50_ms = s->latency_p99_ms = NAN;
    const json_t *data = ev->stage[DLP_EVAL_DATA].result, *train = ev->stage[DLP_EVAL_TRAIN].result;
    const json_t *inf = ev->stage[DLP_EVAL_INFER].result, *pred = ev->stage[DLP_EVAL_PREDICT].result;
    if (data) prep_figures(data, s);
    if (train) train_figures(train, s);
    verdict(c, s);
    if (inf) infer_figures(c, inf, s);
    if (train) hw_of(train, &s->hw_train);
    if (inf) hw_of(inf, &s->hw_infer);
    s->usd_per_hour = c->usd_per_hour > 0 ? c->usd_per_hour : NAN;
    s->usd_per_million_train_images = usd_per_million(c->usd_per_hour, s->train_img_per_s);
    s->usd_per_million_inferences = usd_per_million(c->usd_per_hour, s->infer_img_per_s);
    online_figures(c, ev, s);
    return pred ? compare_figures(pred, s) : DLP_OK;
}

void dlp_eval_summary_free(dlp_eval_summary *s) {
    free(s->compare);
    s->compare = NULL;
    s->n_compare = 0;
}

static json_t *hw_json(const dlp_eval_hw *h) {
    json_t *o = json_object();
    json_object_set_new(o, "cpu_util_pct", dlp_json_real_or_null(h->cpu_util_pct));
    json_object_set_new(o, "process_cores", dlp_json_real_or_null(h->process_cores));
    json_object_set_new(o, "peak_rss_bytes", dlp_json_real_or_null(h->peak_rss_bytes));
    json_object_set_new(o, "disk_read_bytes_per_s", dlp_json_real_or_null(h->disk_read_bytes_per_s));
    json_object_set_new(o, "cpu_package_power_w", h->npower ? dlp_json_real_or_null(h->cpu_package_power_w) : json_null());
    json_object_set_new(o, "gpu_util_pct", h->ngpu ? dlp_json_real_or_null(h->gpu_util_pct) : json_null());
    return o;
}

// The summary's sections, each written when its stage ran (NaN and infinite figures as null).
#define SUM_N(m) {DLP_FIELD(dlp_eval_summary, m, DLP_FT_NUM, DLP_FF_NULLNF)}
#define SUM_I(m) {DLP_FIELD(dlp_eval_summary, m, DLP_FT_INT, 0)}
static json_t *train_verdict_write(const void *rec) {
    const dlp_eval_summary *s = rec;
    return s->train_verdict ? json_string(s->train_verdict) : json_null();
}
static json_t *bottleneck_write(const void *rec) { return json_string(((const dlp_eval_summary *)rec)->bottleneck); }
static const dlp_field_def k_summary_prep_fields[] = {
    SUM_N(prep_img_per_s), SUM_I(prep_workers), SUM_N(prep_img_per_s_one_thread), {0}};
static const dlp_field_def k_summary_train_fields[] = {
    SUM_N(train_img_per_s), SUM_N(train_data_wait_frac), SUM_N(train_gflop_per_s), SUM_N(train_fraction_of_peak),
    {DLP_FIELD_CB("train_verdict", NULL, train_verdict_write)}, {0}};
static const dlp_field_def k_summary_bottleneck_fields[] = {
    {DLP_FIELD_CB("bottleneck", NULL, bottleneck_write)},
    {DLP_FIELD(dlp_eval_summary, bottleneck_text, DLP_FT_STR, 0)},
    SUM_N(prep_over_train),
    {0}};
static const dlp_field_def k_summary_infer_fields[] = {
    SUM_N(infer_img_per_s), SUM_I(infer_batch), SUM_I(latency_batch), SUM_N(latency_p50_ms), SUM_N(latency_p99_ms),
    {0}};
static const dlp_field_def k_summary_cost_fields[] = {
    SUM_N(usd_per_hour), SUM_N(usd_per_million_train_images), SUM_N(usd_per_million_inferences), {0}};

// {"source", "usd_per_hour", "precisions": [{precision, served, batch, img_per_s, x_served, usd_per_million_images,
// not_measured}]}
static json_t *online_json(const dlp_eval_summary *s) {
    const double served = s->online[0].img_per_s;
    json_t *arr = json_array();
    for (int k = 0; k < s->n_online; k++) {
        const dlp_eval_online *o = &s->online[k];
        json_t *e = json_object();
        json_object_set_new(e, "precision", json_string(dlp_dtype_name(o->precision)));
        json_object_set_new(e, "served", json_boolean(o->served));
        json_object_set_new(e, "batch", o->have ? json_integer(o->batch) : json_null());
        json_object_set_new(e, "img_per_s", o->have ? dlp_json_real_or_null(o->img_per_s) : json_null());
        json_object_set_new(e, "x_served", o->have && served > 0 ? dlp_json_real_or_null(o->img_per_s / served) : json_null());
        json_object_set_new(e, "usd_per_million_images", dlp_json_real_or_null(o->usd_per_million_images));
        if (!o->have) json_object_set_new(e, "not_measured", json_string(o->why ? o->why : "not measured"));
        json_array_append_new(arr, e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "source", json_string("measured: dlperf infer on this machine, the served precision over "
                                                 "its batch sizes (best), each other one at that batch"));
    json_object_set_new(o, "usd_per_hour", dlp_json_real_or_null(s->usd_per_hour));
    json_object_set_new(o, "precisions", arr);
    return o;
}

json_t *dlp_eval_summary_json(const dlp_eval_summary *s) {
    json_t *sum = json_object();
    if (s->have_prep) dlp_fields_write(sum, k_summary_prep_fields, s);
    if (s->have_train) dlp_fields_write(sum, k_summary_train_fields, s);
    if (s->bottleneck) dlp_fields_write(sum, k_summary_bottleneck_fields, s);
    if (s->have_infer) dlp_fields_write(sum, k_summary_infer_fields, s);
    if (s->have_train || s->have_infer) {
        json_t *hw = json_object();
        if (s->hw_train.have) json_object_set_new(hw, "training", hw_json(&s->hw_train));
        if (s->hw_infer.have) json_object_set_new(hw, "inference", hw_json(&s->hw_infer));
        json_object_set_new(sum, "hardware", hw);
    }
    if (isfinite(s->usd_per_hour)) dlp_fields_write(sum, k_summary_cost_fields, s);
    if (s->n_online) json_object_set_new(sum, "online_cost", online_json(s));
    if (s->have_compare) {
        json_t *cmp = json_array();
        for (int i = 0; i < s->n_compare; i++) {
            const dlp_eval_system *e = &s->compare[i];
            json_t *row = json_pack("{s:s?, s:o, s:o, s:o, s:s?}", "system", e->id, "img_per_s",
                                    dlp_json_real_or_null(e->img_per_s), "epoch_s", dlp_json_real_or_null(e->epoch_s),
                                    "usd_per_million_images", dlp_json_real_or_null(e->usd_per_million_images),
                                    "bottleneck", e->bottleneck);
            if (row) json_array_append_new(cmp, row);
        }
        json_object_set_new(sum, "compare", cmp);
    }
    return sum;
}
