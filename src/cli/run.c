// cli/run: `dlperf run` — the main job, the whole flow of the evaluation on this machine in one command: the host,
// the input pipeline alone (data preparation rate over loader threads), a short ResNet training run through the
// real pipeline with the hardware monitored, the online phase (offline throughput and batch-1 latency of an
// inference plan), what held training back, the cost per image when the machine's rate is given, and the catalog's
// GPU systems predicted for the same workload beside it. Each stage is the subcommand users run on its own (data
// bench, train, infer, predict), called with its options; their results land in one run directory next to the
// summary (dlperf.run/1). A stage that fails is recorded and the run goes on with the next.
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "dist/launch.h"
#include "hw/host.h"
#include "report/report.h"
#ifdef DLP_HAVE_NCCL
#include "backend/cuda/cuda.h"
#endif

#define MAX_ARGS 64

typedef struct run_opts {
    const char *data, *device, *model, *infer_batches, *compare, *out, *json;
    int precision, size, batch, threads, workers, quick, bench_images;
    double train_seconds, infer_seconds, usd_per_hour;
} run_opts;

typedef struct stage {
    const char *name;   // "data", "train", "infer", "predict"
    int rc;             // the subcommand's exit status (-1: not run)
    double seconds;
    char json_path[4200];
    json_t *result;     // the subcommand's JSON result, when it wrote one
    int ranks;          // > 1: run under `mpirun -np ranks` (one process per GPU)
} stage;

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
static void model_opts(argbuf *a, const run_opts *o, const char *prec) {
    opt(a, "--data", "%s", o->data);
    opt(a, "--model", "%s", o->model);
    opt(a, "--size", "%d", o->size);
    opt(a, "--device", "%s", o->device);
    opt(a, "--precision", "%s", prec);
    opt(a, "--threads", "%d", o->threads);
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

static void banner(const char *title) {
    printf("\n== %s\n", title);
    fflush(stdout);
}

// SIGINT/SIGTERM while a stage runs: passed on to the stage once (it stops cleanly and writes its result), and
// the run stops after it. The stage runs in its own process group, so a Ctrl-C at the terminal reaches the run
// only and is not delivered twice (dlperf train takes a second signal as "stop now, write nothing").
static volatile sig_atomic_t g_child, g_stop;

static void on_signal(int sig) {
    g_stop = sig;
    if (g_child > 0) kill((pid_t)g_child, sig);
}

// Runs one stage's subcommand as a child process (dlperf <args>): a stage that crashes or runs out of memory does
// not take the run with it, each stage's memory and monitor figures are its own, and a subcommand may re-execute
// itself (dlperf train does, to set OpenMP's wait policy). Then loads the result the stage wrote.
static void run_stage(stage *s, argbuf *a) {
    uint64_t t0 = dlp_now_ns();
    if (a->overflow) {
        fprintf(stderr, "run: the %s stage's command line is too long (a path over 4 KB?): not run\n", s->name);
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
    if (pid == 0) {
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
    if (pid < 0) {
        fprintf(stderr, "run: cannot start the %s stage: %s\n", s->name, strerror(errno));
        s->rc = 126;
    } else {
        setpgid(pid, pid);  // also here: whichever runs first
        g_child = pid;
        if (g_stop) kill(pid, g_stop);  // a signal that came between the check and the fork
        int status = 0, w;
        while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
        }
        g_child = 0;
        if (w < 0) {
            fprintf(stderr, "run: lost the %s stage (pid %d): %s\n", s->name, (int)pid, strerror(errno));
            s->rc = 125;
        } else if (WIFEXITED(status)) {
            s->rc = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            s->rc = 128 + WTERMSIG(status);
            fprintf(stderr, "run: the %s stage was killed by signal %d (%s)\n", s->name, WTERMSIG(status),
                    strsignal(WTERMSIG(status)));
        } else {
            s->rc = 125;
        }
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
        fprintf(stderr, "run: the %s stage ended with exit status %d; going on with the next\n", s->name, s->rc);
}

// Why a stage has no figures, for the summary.
static const char *no_figures(const stage *s) {
    if (s->rc < 0) return "not run (the run was stopped)";
    if (s->rc == 0) return "not measured (the stage's result could not be read)";
    return "not measured (the stage failed: see above)";
}

static void fmt_dur(char *buf, size_t len, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, len, "-");
    else if (s < 90) snprintf(buf, len, "%.0f s", s);
    else if (s < 5400) snprintf(buf, len, "%.0f min", s / 60);
    else if (s < 172800) snprintf(buf, len, "%.1f h", s / 3600);
    else snprintf(buf, len, "%.1f days", s / 86400);
}

static int allowed_cpus(const dlp_host_info *h) { return h->cpus_allowed > 0 ? h->cpus_allowed : 1; }

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

// The hardware monitor's summary of a stage (its result's monitor.total): one line, and the figures in out.
static void print_hw(const char *label, const json_t *result, json_t *out) {
    const json_t *m = jget(result, "monitor.total.metrics");
    if (!m || !json_is_object(m)) return;
    double util = jnum(json_object_get(m, "cpu.all.util_pct"), "mean");
    double proc = jnum(json_object_get(m, "proc.cpu_pct"), "mean");
    double rss = jnum(json_object_get(m, "proc.rss_bytes"), "max");
    double disk = 0, power = 0, gpu = 0;
    int npower = 0, ngpu = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        size_t n = strlen(k);
        double mean = jnum(v, "mean");
        if (!isfinite(mean)) continue;
        if (strncmp(k, "disk.", 5) == 0 && n > 19 && strcmp(k + n - 19, ".read_bytes_per_s") == 0) disk += mean;
        if (strncmp(k, "rapl.package", 12) == 0 && n > 8 && strcmp(k + n - 8, ".power_w") == 0) power += mean, npower++;
        if (strncmp(k, "gpu.", 4) == 0 && n > 9 && strcmp(k + n - 9, ".util_pct") == 0) gpu += mean, ngpu++;
    }
    char pw[64] = "power not measurable here (no RAPL)", gp[64] = "";
    if (npower) snprintf(pw, sizeof pw, "CPU packages %.0f W", power);
    if (ngpu) snprintf(gp, sizeof gp, ", GPUs %.0f%% busy", gpu / ngpu);
    printf("  %-15s CPU %.0f%% busy (this stage %.2f cores), peak RSS %.0f MiB, disk read %.1f MB/s, %s%s\n", label,
           util, proc / 100, rss / (1 << 20), disk / 1e6, pw, gp);
    json_t *o = json_object();
    json_object_set_new(o, "cpu_util_pct", dlp_json_real_or_null(util));
    json_object_set_new(o, "process_cores", dlp_json_real_or_null(proc / 100));
    json_object_set_new(o, "peak_rss_bytes", dlp_json_real_or_null(rss));
    json_object_set_new(o, "disk_read_bytes_per_s", dlp_json_real_or_null(disk));
    json_object_set_new(o, "cpu_package_power_w", npower ? dlp_json_real_or_null(power) : json_null());
    json_object_set_new(o, "gpu_util_pct", ngpu ? dlp_json_real_or_null(gpu / ngpu) : json_null());
    json_object_set_new(out, label, o);
}

static void fmt_rate(char *buf, size_t len, double v) {
    if (!isfinite(v)) snprintf(buf, len, "-");
    else if (v >= 1000) snprintf(buf, len, "%.0f", v);
    else if (v >= 10) snprintf(buf, len, "%.1f", v);
    else snprintf(buf, len, "%.2f", v);
}

int dlp_cli_run(int argc, char **argv) {
    run_opts o;
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &o.data, "synthetic", "DIR|synthetic", "dataset: ImageNet root, ImageFolder, list file, or the synthetic ImageNet (generated and cached on first use)", NULL, 0},
        {"device", 0, DLP_OPT_STR, &o.device, "cpu", "DEV", "training and inference backend: cpu | ref | cuda | sim:<gpu>", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &o.model, "resnet50", "NAME", "resnet18|34|50|101|152", NULL, 0},
        {"size", 0, DLP_OPT_INT, &o.size, "224", "PX", "image size (crop) for training and inference", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &o.batch, "32", "N", "training batch", NULL, 0},
        {"precision", 'p', DLP_OPT_CHOICE, &o.precision, "auto", NULL, "compute precision (auto: bf16 on CPUs with avx512_bf16 or AMX and on GPUs, else fp32)", "auto|fp32|bf16|fp16", 0},
        {"threads", 't', DLP_OPT_INT, &o.threads, "0", "N", "compute threads (0: the default rule)", NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &o.workers, "0", "N", "loader threads for training (0: the default rule)", NULL, 0},
        {"train-seconds", 0, DLP_OPT_DOUBLE, &o.train_seconds, "60", "S", "length of the training run (after its setup)", NULL, 0},
        {"infer-batch", 0, DLP_OPT_STR, &o.infer_batches, "1,32", "LIST", "inference batch sizes (the first is the latency point)", NULL, 0},
        {"infer-seconds", 0, DLP_OPT_DOUBLE, &o.infer_seconds, "5", "S", "timed seconds per inference batch size", NULL, 0},
        {"bench-images", 0, DLP_OPT_INT, &o.bench_images, "512", "N", "images per data-preparation measurement", NULL, 0},
        {"compare", 0, DLP_OPT_STR, &o.compare, "dgx-a100,dgx-station,desktop-4090", "ID,..", "catalog systems predicted for the same workload (none: skip)", NULL, 0},
        {"usd-per-hour", 0, DLP_OPT_DOUBLE, &o.usd_per_hour, "0", "X", "what an hour of this machine costs (rent, or amortization + power): prices its images", NULL, 0},
        {"quick", 0, DLP_OPT_FLAG, &o.quick, NULL, NULL, "a short run for a first look and tests: resnet18 at 112 px, batch 16, 15 s of training, 1 s per inference batch", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &o.out, NULL, "DIR", "run directory for every stage's result and time series (new; default dlperf-run-<UTC time>)", NULL, 0},
        {"json", 'j', DLP_OPT_STR, &o.json, NULL, "FILE", "the summary (dlperf.run/1; default <out>/run.json)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(
        opts,
        "usage: dlperf run [--data DIR|synthetic] [--model resnet50] [--precision auto] [--train-seconds 60]\n"
        "                  [--usd-per-hour X] [--compare ID,..] [--out DIR] [--quick]\n"
        "The whole flow on this machine: host, data preparation rate, a monitored training run through the real\n"
        "input pipeline, inference throughput and latency, what held training back, cost per image, and the\n"
        "catalog's GPU systems predicted for the same workload. Every stage's result goes into the run directory,\n"
        "and report.html (charts and tables of them all; `dlperf report DIR` writes it again).",
        argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    if (rest < argc) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "unexpected argument '%s'", argv[rest]));
    if (o.quick) {
        if (!dlp_opt_given(opts, "model")) o.model = "resnet18";
        if (!dlp_opt_given(opts, "size")) o.size = 112;
        if (!dlp_opt_given(opts, "batch")) o.batch = 16;
        if (!dlp_opt_given(opts, "train-seconds")) o.train_seconds = 15;
        if (!dlp_opt_given(opts, "infer-seconds")) o.infer_seconds = 1;
        if (!dlp_opt_given(opts, "infer-batch")) o.infer_batches = "1,16";
        if (!dlp_opt_given(opts, "bench-images")) o.bench_images = 128;
    }
    if (o.size < 32 || o.batch < 1 || !(o.train_seconds > 0) || !(o.infer_seconds > 0) || o.bench_images < 1 ||
        o.threads < 0 || o.workers < 0 || !(o.usd_per_hour >= 0))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "run: --size >= 32, --batch >= 1, --train-seconds > 0, "
                                                     "--infer-seconds > 0, --bench-images >= 1, --usd-per-hour >= 0"));
    int ib[16];
    int nib = dlp_parse_int_list(o.infer_batches, ib, 16);
    for (int i = 0; i < nib; i++)
        if (ib[i] < 1) nib = -1;
    if (nib <= 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--infer-batch: a list of batch sizes >= 1 like 1,32 (got '%s')",
                                    o.infer_batches));

    dlp_host_info h;
    dlp_host_probe(&h);
    const dlp_backend_kind kind = dlp_backend_kind_of(o.device);
    const dlp_backend *dev_b = dlp_backend_find(o.device, NULL);
    dlp_err_clear();
    const int is_gpu = kind == DLP_BACKEND_KIND_GPU || kind == DLP_BACKEND_KIND_SIM;
    static const char *const k_prec[] = {"auto", "fp32", "bf16", "fp16"};
    const char *prec = k_prec[o.precision];
    if (o.precision == 0)
        prec = is_gpu || (dev_b && dlp_backend_get_caps(dev_b)->host_bf16 && (h.avx512_bf16 || h.amx_bf16)) ? "bf16"
                                                                                                           : "fp32";

    // the run directory
    char out[4096];
    if (o.out) {
        snprintf(out, sizeof out, "%s", o.out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char ts[32];
        strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tm);
        snprintf(out, sizeof out, "dlperf-run-%s", ts);
    }
    if (dlp_path_exists(out))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_EXISTS, "--out %s already exists (a run directory is never reused)", out));
    char json_path[4200];
    snprintf(json_path, sizeof json_path, "%s%s", o.json ? "" : out, o.json ? o.json : "/run.json");
    if ((st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if ((st = dlp_mkdirs(out))) return dlp_cli_fail(st);

    const uint64_t t0 = dlp_now_ns();
    printf("dlperf run: %s on %s (%d CPUs allowed, %s%s%s, %.1f GiB), %s %s at %d px, results in %s/\n",
           o.model, h.cpu_model, allowed_cpus(&h), h.avx512 ? "AVX-512" : h.avx2 ? "AVX2" : "no AVX2",
           h.avx512_bf16 ? " + avx512_bf16" : "", h.amx_bf16 ? " + AMX-BF16" : "",
           (double)h.mem_total_bytes / (1024.0 * 1024 * 1024), o.device, prec, o.size, out);
    fflush(stdout);

    stage st_data = {.name = "data", .rc = -1}, st_train = {.name = "train", .rc = -1},
          st_infer = {.name = "infer", .rc = -1}, st_pred = {.name = "predict", .rc = -1};
    stage *stages[] = {&st_data, &st_train, &st_infer, &st_pred};
    char csv[4200];
    argbuf *a = calloc(1, sizeof *a);
    if (!a) return dlp_cli_fail(DLP_ERR(DLP_ERR_NOMEM, "out of memory"));
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    // 1. data preparation: the loader alone over 1..N threads (the preparation rate of a data-stall analysis)
    banner("data preparation: the input pipeline alone (read, JPEG decode, random-resized crop, flip, normalize)");
    {
        int n = allowed_cpus(&h);
        char list[128] = "";
        int nlist = 0;
        int last = 0;
        for (int w = 1; w <= n && nlist < 7; w *= 2, nlist++, last = w / 2)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", nlist ? "," : "", w);
        if (last != n) snprintf(list + strlen(list), sizeof list - strlen(list), ",%d", n);  // always all CPUs
        snprintf(st_data.json_path, sizeof st_data.json_path, "%s/data.json", out);
        a->argc = 0;
        arg(a, "data");
        arg(a, "bench");
        opt(a, "--data", "%s", o.data);
        opt(a, "--crop", "%d", o.size);
        opt(a, "--batch", "%d", o.batch);
        opt(a, "--workers", "%s", list);
        opt(a, "--images", "%d", o.bench_images);
        opt(a, "--dtype", "%s", strcmp(prec, "fp16") == 0 ? "fp16" : strcmp(prec, "bf16") == 0 && is_gpu ? "bf16" : "fp32");
        opt(a, "--json", "%s", st_data.json_path);
        run_stage(&st_data, a);
    }

    // 2. training through the real pipeline, monitored
    if (!g_stop) {
        banner("training: the real loader feeding the backend, every phase timed, the hardware monitored");
        snprintf(st_train.json_path, sizeof st_train.json_path, "%s/train.json", out);
        snprintf(csv, sizeof csv, "%s/train-monitor.csv", out);
        a->argc = 0;
        arg(a, "train");
        model_opts(a, &o, prec);
        st_train.ranks = train_ranks(o.device);
        if (st_train.ranks > 1) {
            printf("%d GPUs: one training process per GPU (mpirun -np %d, gradients over NCCL)\n", st_train.ranks,
                   st_train.ranks);
            opt(a, "--dist", "nccl");
        }
        opt(a, "--batch", "%d", o.batch);
        opt(a, "--workers", "%d", o.workers);
        opt(a, "--epochs", "1000");  // the time limit ends the run; a fast device goes through several epochs
        opt(a, "--time-limit", "%g", o.train_seconds);
        arg(a, "--no-eval");
        opt(a, "--warmup-steps", "5");
        opt(a, "--measure-warmup", "2");  // a time-limited run: its length in steps is not known up front
        opt(a, "--json", "%s", st_train.json_path);
        opt(a, "--monitor-csv", "%s", csv);
        run_stage(&st_train, a);
    }

    // 3. the online phase: inference throughput and latency
    if (!g_stop) {
        banner("inference: offline throughput and per-call latency of the inference plan (BN folded, fusions)");
        snprintf(st_infer.json_path, sizeof st_infer.json_path, "%s/infer.json", out);
        snprintf(csv, sizeof csv, "%s/infer-monitor.csv", out);
        a->argc = 0;
        arg(a, "infer");
        model_opts(a, &o, prec);
        opt(a, "--batch", "%s", o.infer_batches);
        int maxb = 1;
        for (int i = 0; i < nib; i++)
            if (ib[i] > maxb) maxb = ib[i];
        opt(a, "--samples", "%d", maxb > 64 ? maxb : 64);
        opt(a, "--min-duration", "%g", o.infer_seconds);
        opt(a, "--iters", "3");
        opt(a, "--json", "%s", st_infer.json_path);
        opt(a, "--monitor-csv", "%s", csv);
        run_stage(&st_infer, a);
    }

    // 4. the catalog's systems for the same workload
    if (strcmp(o.compare, "none") != 0 && !g_stop) {
        banner("the catalog's GPU systems, predicted for the same training workload (dlperf predict)");
        snprintf(st_pred.json_path, sizeof st_pred.json_path, "%s/predict.json", out);
        a->argc = 0;
        arg(a, "predict");
        opt(a, "--system", "%s", o.compare);
        opt(a, "--model", "%s", o.model);
        opt(a, "--size", "%d", o.size);
        opt(a, "--json", "%s", st_pred.json_path);
        run_stage(&st_pred, a);
    }
    free(a);
    if (g_stop) fprintf(stderr, "run: stopped by signal %d; the stages not run are skipped\n", (int)g_stop);

    // ---- the summary ----
    json_t *res = dlp_json_result_new("dlperf.run/1", argc, argv);
    json_object_set_new(res, "options", dlp_opts_to_json(opts));
    json_object_set_new(res, "host", dlp_host_to_json(&h));
    json_object_set_new(res, "versions", dlp_versions_to_json());
    json_object_set_new(res, "precision", json_string(prec));
    json_object_set_new(res, "device_kind", json_string(dlp_backend_kind_name(kind)));  // report's verdict reads it
    json_object_set_new(res, "out", json_string(out));
    json_t *jst = json_object();
    int failed = 0;
    for (size_t i = 0; i < sizeof stages / sizeof *stages; i++) {
        stage *s = stages[i];
        json_t *e = json_object();
        json_object_set_new(e, "exit_status", json_integer(s->rc));
        json_object_set_new(e, "ran", json_boolean(s->rc >= 0));
        json_object_set_new(e, "seconds", dlp_json_real_or_null(s->seconds));
        if (s->result) json_object_set_new(e, "result", json_string(s->json_path));
        json_object_set_new(jst, s->name, e);
        if (s->rc > 0) failed++;
    }
    json_object_set_new(res, "stages", jst);

    banner("summary");
    json_t *sum = json_object();
    char b1[32], b2[32];
    // data preparation
    double prep = NAN, prep1 = NAN;
    int prep_w = 0;
    if (st_data.result) {
        const json_t *runs = json_object_get(st_data.result, "runs"), *r;
        size_t i;
        json_array_foreach(runs, i, r) {
            double v = jnum(r, "img_per_s");
            if (jint(r, "workers", -1) == 1) prep1 = v;
            if (!isfinite(prep) || v > prep) {
                prep = v;
                prep_w = jint(r, "workers", 0);
            }
        }
        fmt_rate(b1, sizeof b1, prep);
        fmt_rate(b2, sizeof b2, prep1);
        printf("data preparation  %s img/s with %d loader thread%s (%s img/s with one) at %d px\n", b1, prep_w,
               prep_w == 1 ? "" : "s", b2, o.size);
        json_object_set_new(sum, "prep_img_per_s", dlp_json_real_or_null(prep));
        json_object_set_new(sum, "prep_workers", json_integer(prep_w));
        json_object_set_new(sum, "prep_img_per_s_one_thread", dlp_json_real_or_null(prep1));
    } else {
        printf("data preparation  %s\n", no_figures(&st_data));
    }
    // training
    double train_rate = NAN;
    if (st_train.result) {
        const json_t *t = st_train.result;
        train_rate = jnum(t, "throughput.steady_img_per_s");
        double wait = jnum(t, "stall.data_wait_frac"), frac = jnum(t, "gflop.fraction_of_peak");
        double gf = jnum(t, "gflop.achieved_per_s");
        fmt_rate(b1, sizeof b1, train_rate);
        printf("training          %s img/s (%s %s, batch %d, %d compute + %d loader threads); data wait %.1f%% of "
               "the step; %.0f GFLOP/s%s",
               b1, o.model, prec, o.batch, jint(t, "threads.compute", 0), jint(t, "threads.loader", 0),
               100 * wait, gf, isfinite(frac) ? "" : "\n");
        if (isfinite(frac)) printf(", %.0f%% of the measured peak\n", 100 * frac);
        const char *text = jstr(t, "stall.text");
        if (text) printf("                  %s\n", text);
        json_object_set_new(sum, "train_img_per_s", dlp_json_real_or_null(train_rate));
        json_object_set_new(sum, "train_data_wait_frac", dlp_json_real_or_null(wait));
        json_object_set_new(sum, "train_gflop_per_s", dlp_json_real_or_null(gf));
        json_object_set_new(sum, "train_fraction_of_peak", dlp_json_real_or_null(frac));
        const char *verdict = jstr(t, "stall.verdict");
        json_object_set_new(sum, "train_verdict", verdict ? json_string(verdict) : json_null());
    } else {
        printf("training          %s\n", no_figures(&st_train));
    }
    // what holds it back
    const char *bottleneck = NULL;
    if (isfinite(train_rate) && train_rate > 0 && isfinite(prep) && prep > 0) {
        const char *verdict = jstr(st_train.result, "stall.verdict");
        double headroom = prep / train_rate;
        char why[512];
        if (verdict && strcmp(verdict, "pipeline-bound") == 0) {
            bottleneck = "input pipeline";
            snprintf(why, sizeof why,
                     "the input pipeline: training waited for data; more loader threads (or faster cores/storage) "
                     "would raise it (the pipeline alone reached %.0f img/s with %d threads)",
                     prep, prep_w);
        } else if (headroom < 1.25) {
            bottleneck = "balanced";
            snprintf(why, sizeof why,
                     "balanced: compute took %.0f img/s and the input pipeline alone reaches %.0f img/s with %d "
                     "threads (%.2fx): a faster device would wait for data; it needs more or faster loader cores",
                     train_rate, prep, prep_w, headroom);
        } else {
            bottleneck = "compute";
            if (!is_gpu)
                snprintf(why, sizeof why,
                         "compute: the loader kept up; the input pipeline alone could feed %.1fx this rate, so the "
                         "same CPU could keep a device ~%.0fx faster busy before decode becomes the limit",
                         headroom, headroom);
            else
                snprintf(why, sizeof why,
                         "the device's compute: the loader kept up (it alone delivers %.1fx this rate)", headroom);
        }
        printf("bottleneck        %s\n", why);
        json_object_set_new(sum, "bottleneck", json_string(bottleneck));
        json_object_set_new(sum, "bottleneck_text", json_string(why));
        json_object_set_new(sum, "prep_over_train", dlp_json_real_or_null(headroom));
    }
    // inference
    double inf_rate = NAN, lat50 = NAN, lat99 = NAN;
    int inf_batch = 0;
    if (st_infer.result) {
        const json_t *best = infer_best(st_infer.result), *p1 = infer_point(st_infer.result, ib[0]);
        if (best) {
            inf_rate = jnum(best, "images_per_s");
            inf_batch = jint(best, "batch", 0);
        }
        if (p1) {
            lat50 = jnum(p1, "latency_ms.p50");
            lat99 = jnum(p1, "latency_ms.p99");
        }
        fmt_rate(b1, sizeof b1, inf_rate);
        printf("inference         %s img/s offline at batch %d; batch %d latency p50 %.1f ms, p99 %.1f ms\n", b1,
               inf_batch, ib[0], lat50, lat99);
        json_object_set_new(sum, "infer_img_per_s", dlp_json_real_or_null(inf_rate));
        json_object_set_new(sum, "infer_batch", json_integer(inf_batch));
        json_object_set_new(sum, "latency_batch", json_integer(ib[0]));
        json_object_set_new(sum, "latency_p50_ms", dlp_json_real_or_null(lat50));
        json_object_set_new(sum, "latency_p99_ms", dlp_json_real_or_null(lat99));
    } else {
        printf("inference         %s\n", no_figures(&st_infer));
    }
    // the hardware behind the figures
    if (st_train.result || st_infer.result) {
        printf("hardware (monitored every 500 ms; time series in %s/*-monitor.csv):\n", out);
        json_t *hw = json_object();
        if (st_train.result) print_hw("training", st_train.result, hw);
        if (st_infer.result) print_hw("inference", st_infer.result, hw);
        json_object_set_new(sum, "hardware", hw);
    }
    // cost
    // $ per million images: the hour's price over the images of an hour (NAN when either is unknown)
    const double tr = o.usd_per_hour > 0 && isfinite(train_rate) && train_rate > 0
                          ? o.usd_per_hour / (train_rate * 3600) * 1e6
                          : NAN;
    if (o.usd_per_hour > 0) {
        double ir = isfinite(inf_rate) && inf_rate > 0 ? o.usd_per_hour / (inf_rate * 3600) * 1e6 : NAN;
        printf("cost              $%.2f/h: $%.2f per million training images, $%.2f per million inferences; a "
               "90-epoch ImageNet training (115.3M images) $%.0f\n",
               o.usd_per_hour, tr, ir, isfinite(tr) ? tr * 115.3 : NAN);
        json_object_set_new(sum, "usd_per_hour", dlp_json_real_or_null(o.usd_per_hour));
        json_object_set_new(sum, "usd_per_million_train_images", dlp_json_real_or_null(tr));
        json_object_set_new(sum, "usd_per_million_inferences", dlp_json_real_or_null(ir));
    } else {
        printf("cost              give --usd-per-hour (rent, or amortization + power) to price this machine's images\n");
    }
    // the catalog beside it
    if (st_pred.result) {
        const json_t *preds = json_object_get(st_pred.result, "predictions"), *p;
        size_t i;
        json_t *cmp = json_array();
        printf("\n%-14s %10s %10s %12s %12s  %s\n", "system", "img/s", "x here", "$/1M img", "epoch", "bottleneck");
        if (isfinite(train_rate)) {
            fmt_rate(b1, sizeof b1, train_rate);
            char c[32] = "-";
            if (isfinite(tr)) snprintf(c, sizeof c, "%.2f", tr);
            char ep[32];
            fmt_dur(ep, sizeof ep, 1281167 / train_rate);  // an ImageNet-1k training epoch
            printf("%-14s %10s %10s %12s %12s  %s (measured)\n", "this machine", b1, "1.0", c, ep,
                   bottleneck ? bottleneck : "-");
        }
        json_array_foreach(preds, i, p) {
            const char *id = jstr(p, "machine.id");
            double r = jnum(p, "prediction.img_per_s"), c = jnum(p, "cost.usd_per_million_images");
            double ep = jnum(p, "prediction.epoch_s");
            const char *bn = jstr(p, "prediction.bottleneck");
            fmt_rate(b1, sizeof b1, r);
            char x[32] = "-", cs[32] = "-";
            if (isfinite(train_rate) && train_rate > 0) snprintf(x, sizeof x, "%.0f", r / train_rate);
            if (isfinite(c)) snprintf(cs, sizeof cs, "%.3f", c);
            char eps[32];
            fmt_dur(eps, sizeof eps, ep);
            printf("%-14s %10s %10s %12s %12s  %s (predicted)\n", id ? id : "?", b1, x, cs, eps,
                   bn ? bn : "-");
            json_t *row = json_pack("{s:s?, s:o, s:o, s:o, s:s?}", "system", id, "img_per_s", dlp_json_real_or_null(r), "epoch_s",
                                    dlp_json_real_or_null(ep), "usd_per_million_images", dlp_json_real_or_null(c), "bottleneck", bn);
            if (row) json_array_append_new(cmp, row);
        }
        json_object_set_new(sum, "compare", cmp);
    }
    double wall = dlp_ns_to_s(dlp_now_ns() - t0);
    json_object_set_new(sum, "wall_s", dlp_json_real_or_null(wall));
    json_object_set_new(res, "summary", sum);
    st = dlp_json_write(res, json_path, 0);
    json_decref(res);
    for (size_t i = 0; i < sizeof stages / sizeof *stages; i++) json_decref(stages[i]->result);
    printf("\nrun: %.0f s; %s written%s\n", wall, json_path,
           failed ? " (some stages failed: see above and the stages in the result)" : "");
    // the report page, from the files just written (what `dlperf report` writes again)
    if (!st && !o.json) {
        char page[4200];
        snprintf(page, sizeof page, "%s/report.html", out);
        const char *dirs[] = {out};
        dlp_report_info ri;
        dlp_status rs = dlp_report_write(dirs, 1, page, &ri);
        if (rs) {
            dlp_err_print(stderr);
            dlp_err_clear();
        } else {
            printf("report: %s (%.0f KB%s)\n", page, (double)ri.bytes / 1024,
                   ri.chartjs ? "" : "; charts unavailable: install libjs-chart.js");
        }
    } else if (!st) {
        printf("report: not written (--json put run.json outside %s; `dlperf report` reads DIR/run.json)\n", out);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (st) return dlp_cli_fail(st);
    if (g_stop) return 128 + g_stop;
    return failed ? 1 : 0;
}
