// cli/run: `dlperf run` — the main job, the whole flow of the evaluation on this machine in one command: the host,
// the input pipeline alone (data preparation rate over loader threads), a short ResNet training run through the
// real pipeline with the hardware monitored, the online phase (offline throughput and batch-1 latency of an
// inference plan), what held training back, the cost per image when the machine's rate is given, and the catalog's
// GPU systems predicted for the same workload beside it. Each stage is the subcommand users run on its own (data
// bench, train, infer, predict), called with its options; their results land in one run directory next to the
// summary (dlperf.run/1). A stage that fails is recorded and the run goes on with the next.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/host.h"
#include "perf/evaluate.h"
#include "report/report.h"

typedef struct run_opts {
    const char *data, *device, *model, *infer_batches, *compare, *out, *json, *online;
    int precision, size, batch, threads, workers, quick, bench_images;
    double train_seconds, infer_seconds, usd_per_hour;
} run_opts;

static void banner(const char *title) {
    printf("\n== %s\n", title);
    fflush(stdout);
}

static void on_stage(void *ctx, dlp_eval_stage_id id, const char *title, int ranks) {
    (void)ctx;
    banner(title);
    if (id == DLP_EVAL_TRAIN && ranks > 1)
        printf("%d GPUs: one training process per GPU (mpirun -np %d, gradients over NCCL)\n", ranks, ranks);
}

static void fmt_dur(char *buf, size_t len, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, len, "-");
    else if (s < 90) snprintf(buf, len, "%.0f s", s);
    else if (s < 5400) snprintf(buf, len, "%.0f min", s / 60);
    else if (s < 172800) snprintf(buf, len, "%.1f h", s / 3600);
    else snprintf(buf, len, "%.1f days", s / 86400);
}

static void fmt_rate(char *buf, size_t len, double v) {
    if (!isfinite(v)) snprintf(buf, len, "-");
    else if (v >= 1000) snprintf(buf, len, "%.0f", v);
    else if (v >= 10) snprintf(buf, len, "%.1f", v);
    else snprintf(buf, len, "%.2f", v);
}

static int allowed_cpus(const dlp_host_info *h) { return h->cpus_allowed > 0 ? h->cpus_allowed : 1; }

// The hardware monitor's summary of a stage: one line.
static void print_hw(const char *label, const dlp_eval_hw *h) {
    if (!h->have) return;
    char pw[64] = "power not measurable here (no RAPL)", gp[64] = "";
    if (h->npower) snprintf(pw, sizeof pw, "CPU packages %.0f W", h->cpu_package_power_w);
    if (h->ngpu) snprintf(gp, sizeof gp, ", GPUs %.0f%% busy", h->gpu_util_pct);
    printf("  %-15s CPU %.0f%% busy (this stage %.2f cores), peak RSS %.0f MiB, disk read %.1f MB/s, %s%s\n", label,
           h->cpu_util_pct, h->process_cores, h->peak_rss_bytes / (1 << 20), h->disk_read_bytes_per_s / 1e6, pw, gp);
}

// The online phase per precision: throughput and what a million images cost in each (measured here).
static void print_online(const dlp_eval_summary *s) {
    if (s->n_online < 2) return;  // only the served precision: the inference and cost lines said it
    printf("online phase by precision (measured here by dlperf infer; each other precision at the served "
           "throughput batch):\n  %-14s %10s %9s %14s\n", "precision", "img/s", "x served", "$/1M images");
    for (int k = 0; k < s->n_online; k++) {
        const dlp_eval_online *e = &s->online[k];
        char name[32], b1[32], x[32] = "-", c[32] = "-";
        snprintf(name, sizeof name, "%s%s", dlp_dtype_name(e->precision), e->served ? " (served)" : "");
        if (!e->have) {
            printf("  %-14s %s\n", name, e->why ? e->why : "not measured");
            continue;
        }
        fmt_rate(b1, sizeof b1, e->img_per_s);
        if (s->online[0].have) snprintf(x, sizeof x, "%.2f", e->img_per_s / s->online[0].img_per_s);
        if (isfinite(e->usd_per_million_images)) snprintf(c, sizeof c, "%.2f", e->usd_per_million_images);
        printf("  %-14s %10s %9s %14s  batch %d\n", name, b1, x, c, e->batch);
    }
    if (!isfinite(s->usd_per_hour)) printf("  ($/1M images: give --usd-per-hour)\n");
}

// The measured figures: data preparation, training, the verdict, inference, the hardware and the cost.
static void print_measured(const run_opts *o, const dlp_eval_cfg *c, const dlp_eval *ev, const dlp_eval_summary *s) {
    char b1[32], b2[32];
    if (s->have_prep) {
        fmt_rate(b1, sizeof b1, s->prep_img_per_s);
        fmt_rate(b2, sizeof b2, s->prep_img_per_s_one_thread);
        printf("data preparation  %s img/s with %d loader thread%s (%s img/s with one) at %d px\n", b1,
               s->prep_workers, s->prep_workers == 1 ? "" : "s", b2, o->size);
    } else {
        printf("data preparation  %s\n", dlp_eval_stage_why(&ev->stage[DLP_EVAL_DATA]));
    }
    if (s->have_train) {
        double frac = s->train_fraction_of_peak;
        fmt_rate(b1, sizeof b1, s->train_img_per_s);
        printf("training          %s img/s (%s %s, batch %d, %d compute + %d loader threads); data wait %.1f%% of "
               "the step; %.0f GFLOP/s%s",
               b1, o->model, dlp_dtype_name(c->precision), o->batch, s->train_threads_compute, s->train_threads_loader,
               100 * s->train_data_wait_frac, s->train_gflop_per_s, isfinite(frac) ? "" : "\n");
        if (isfinite(frac)) printf(", %.0f%% of the measured peak\n", 100 * frac);
        if (s->train_stall_text) printf("                  %s\n", s->train_stall_text);
    } else {
        printf("training          %s\n", dlp_eval_stage_why(&ev->stage[DLP_EVAL_TRAIN]));
    }
    if (s->bottleneck) printf("bottleneck        %s\n", s->bottleneck_text);
    if (s->have_infer) {
        fmt_rate(b1, sizeof b1, s->infer_img_per_s);
        printf("inference         %s img/s offline at batch %d%s; batch %d latency p50 %.1f ms, p99 %.1f ms\n", b1,
               s->infer_batch, c->infer_int8 ? " (int8)" : "", s->latency_batch, s->latency_p50_ms, s->latency_p99_ms);
    } else {
        printf("inference         %s\n", dlp_eval_stage_why(&ev->stage[DLP_EVAL_INFER]));
    }
    if (s->have_train || s->have_infer) {
        printf("hardware (monitored every 500 ms; time series in %s/*-monitor.csv):\n", c->out);
        print_hw("training", &s->hw_train);
        print_hw("inference", &s->hw_infer);
    }
    if (o->usd_per_hour > 0) {
        double tr = s->usd_per_million_train_images;
        printf("cost              $%.2f/h: $%.2f per million training images, $%.2f per million inferences; a "
               "90-epoch ImageNet training (115.3M images) $%.0f\n",
               o->usd_per_hour, tr, s->usd_per_million_inferences, isfinite(tr) ? tr * 115.3 : NAN);
    } else {
        printf("cost              give --usd-per-hour (rent, or amortization + power) to price this machine's images\n");
    }
    print_online(s);
}

// The catalog's systems beside this machine.
static void print_compare(const dlp_eval_summary *s) {
    char b1[32];
    double train_rate = s->train_img_per_s;
    printf("\n%-14s %10s %10s %12s %12s  %s\n", "system", "img/s", "x here", "$/1M img", "epoch", "bottleneck");
    if (isfinite(train_rate)) {
        fmt_rate(b1, sizeof b1, train_rate);
        char c[32] = "-";
        if (isfinite(s->usd_per_million_train_images)) snprintf(c, sizeof c, "%.2f", s->usd_per_million_train_images);
        char ep[32];
        fmt_dur(ep, sizeof ep, 1281167 / train_rate);  // an ImageNet-1k training epoch
        printf("%-14s %10s %10s %12s %12s  %s (measured)\n", "this machine", b1, "1.0", c, ep,
               s->bottleneck ? s->bottleneck : "-");
    }
    for (int i = 0; i < s->n_compare; i++) {
        const dlp_eval_system *e = &s->compare[i];
        fmt_rate(b1, sizeof b1, e->img_per_s);
        char x[32] = "-", cs[32] = "-";
        if (isfinite(train_rate) && train_rate > 0) snprintf(x, sizeof x, "%.0f", e->img_per_s / train_rate);
        if (isfinite(e->usd_per_million_images)) snprintf(cs, sizeof cs, "%.3f", e->usd_per_million_images);
        char eps[32];
        fmt_dur(eps, sizeof eps, e->epoch_s);
        printf("%-14s %10s %10s %12s %12s  %s (predicted)\n", e->id ? e->id : "?", b1, x, cs, eps,
               e->bottleneck ? e->bottleneck : "-");
    }
}

// The report page, from the files just written (what `dlperf report` writes again).
static void write_report(const char *out, int own_json) {
    if (!own_json) {
        printf("report: not written (--json put run.json outside %s; `dlperf report` reads DIR/run.json)\n", out);
        return;
    }
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
}

// The run directory: --out, or dlperf-run-<UTC time>.
static void run_dir(const run_opts *o, char *out, size_t len) {
    if (o->out) {
        snprintf(out, len, "%s", o->out);
        return;
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tm);
    snprintf(out, len, "dlperf-run-%s", ts);
}

// --online-precisions into c->online_precisions: the list given (the served precision left out), or auto's: fp32,
// bf16 where the CPU runs it and int8 on the cpu device (oneDNN's int8 convolutions); none for other devices.
static dlp_status online_precisions(const run_opts *o, const dlp_host_info *h, const dlp_backend *dev_b,
                                    dlp_eval_cfg *c) {
    const dlp_dtype served = c->infer_int8 ? DLP_DTYPE_I8 : c->precision;
    dlp_dtype want[8];
    int n = 0;
    c->n_online = 0;
    if (strcmp(o->online, "none") == 0) return DLP_OK;
    if (strcmp(o->online, "auto") == 0) {
        const int cpu = dev_b && strcmp(dlp_backend_name(dev_b), "cpu") == 0;
        if (!cpu) return DLP_OK;
        want[n++] = DLP_DTYPE_F32;
        if (dlp_backend_get_caps(dev_b)->host_bf16 && (h->avx512_bf16 || h->amx_bf16)) want[n++] = DLP_DTYPE_BF16;
        want[n++] = DLP_DTYPE_I8;
    } else {
        const char *p = o->online;
        while (*p && n < 8) {
            char name[16];
            const size_t len = strcspn(p, ",");
            snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
            int v;
            if (len >= sizeof name || dlp_opt_choice_parse(dlp_precision_choices, "--online-precisions", name, &v) ||
                v == DLP_PRECISION_AUTO) {
                dlp_err_clear();
                return DLP_ERR(DLP_ERR_INVALID, "--online-precisions: auto, none, or a list of fp32|bf16|fp16|int8 "
                               "like bf16,int8 (got '%s')", o->online);
            }
            want[n++] = (dlp_dtype)v;
            p += len + (p[len] == ',');
        }
        if (n == 0) return DLP_ERR(DLP_ERR_INVALID, "--online-precisions: an empty list (none: no other precision)");
    }
    for (int i = 0; i < n; i++) {
        int dup = want[i] == served;
        for (int k = 0; k < c->n_online; k++) dup |= c->online_precisions[k] == want[i];
        if (!dup && c->n_online < DLP_EVAL_MAX_ONLINE) c->online_precisions[c->n_online++] = want[i];
    }
    return DLP_OK;
}

int dlp_cli_run(int argc, char **argv) {
    run_opts o;
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &o.data, "synthetic", "DIR|synthetic", "dataset: ImageNet root, ImageFolder, list file, or the synthetic ImageNet (generated and cached on first use)", NULL, 0},
        {"device", 0, DLP_OPT_STR, &o.device, "cpu", "DEV", "training and inference backend: cpu | ref | cuda | sim:<gpu>", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &o.model, "resnet50", "NAME", "resnet18|34|50|101|152", NULL, 0},
        {"size", 0, DLP_OPT_INT, &o.size, "224", "PX", "image size (crop) for training and inference", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &o.batch, "32", "N", "training batch", NULL, 0},
        DLP_CLI_PRECISION_ROW(&o.precision, "compute precision (auto: bf16 on CPUs with avx512_bf16 or AMX and on GPUs, "
                              "else fp32; int8: the online phase in int8 (cpu), training at auto's precision)"),
        {"threads", 't', DLP_OPT_INT, &o.threads, "0", "N", "compute threads (0: the default rule)", NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &o.workers, "0", "N", "loader threads for training (0: the default rule)", NULL, 0},
        {"train-seconds", 0, DLP_OPT_DOUBLE, &o.train_seconds, "60", "S", "length of the training run (after its setup)", NULL, 0},
        {"infer-batch", 0, DLP_OPT_STR, &o.infer_batches, "1,32", "LIST", "inference batch sizes (the first is the latency point)", NULL, 0},
        {"infer-seconds", 0, DLP_OPT_DOUBLE, &o.infer_seconds, "5", "S", "timed seconds per inference batch size", NULL, 0},
        {"bench-images", 0, DLP_OPT_INT, &o.bench_images, "512", "N", "images per data-preparation measurement", NULL, 0},
        {"compare", 0, DLP_OPT_STR, &o.compare, "dgx-a100,dgx-station,desktop-4090", "ID,..", "catalog systems predicted for the same workload (none: skip)", NULL, 0},
        {"online-precisions", 0, DLP_OPT_STR, &o.online, "auto", "LIST", "the online phase's throughput and cost per million images also in these precisions, at the served throughput batch (auto: fp32, bf16 where the CPU has it and int8 on the cpu device; none)", NULL, 0},
        {"usd-per-hour", 0, DLP_OPT_DOUBLE, &o.usd_per_hour, "0", "X", "what an hour of this machine costs (rent, or amortization + power): prices its images", NULL, 0},
        {"quick", 0, DLP_OPT_FLAG, &o.quick, NULL, NULL, "a short run for a first look and tests: resnet18 at 112 px, batch 16, 15 s of training, 1 s per inference batch", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &o.out, NULL, "DIR", "run directory for every stage's result and time series (new; default dlperf-run-<UTC time>)", NULL, 0},
        {"json", 'j', DLP_OPT_STR, &o.json, NULL, "FILE", "the summary (dlperf.run/1; default <out>/run.json)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(
        opts,
        "usage: dlperf run [--data DIR|synthetic] [--model resnet50] [--precision auto] [--train-seconds 60]\n"
        "                  [--usd-per-hour X] [--compare ID,..] [--out DIR] [--quick]\n"
        "The whole flow on this machine: host, data preparation rate, a monitored training run through the real\n"
        "input pipeline, inference throughput and latency, what held training back, cost per image, and the\n"
        "catalog's GPU systems predicted for the same workload. Every stage's result goes into the run directory,\n"
        "and report.html (charts and tables of them all; `dlperf report DIR` writes it again).",
        argc, argv);
    if (st) return dlp_cli_fail(st);
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
    dlp_eval_cfg c = {.data = o.data, .device = o.device, .model = o.model, .compare = o.compare, .size = o.size,
                      .batch = o.batch, .threads = o.threads, .workers = o.workers, .bench_images = o.bench_images,
                      .cpus = allowed_cpus(&h), .infer_batch_list = o.infer_batches, .n_infer_batches = nib,
                      .train_seconds = o.train_seconds, .infer_seconds = o.infer_seconds,
                      .usd_per_hour = o.usd_per_hour};
    memcpy(c.infer_batches, ib, sizeof ib);
    const dlp_backend_kind kind = dlp_backend_kind_of(o.device);
    const dlp_backend *dev_b = dlp_backend_find(o.device, NULL);
    dlp_err_clear();
    c.is_gpu = kind == DLP_BACKEND_KIND_GPU || kind == DLP_BACKEND_KIND_SIM;
    c.precision = (dlp_dtype)o.precision;  // run's own auto: for speed
    c.infer_int8 = o.precision == DLP_DTYPE_I8;  // int8: the online phase; training at the auto precision
    if (o.precision == DLP_PRECISION_AUTO || c.infer_int8)
        c.precision = c.is_gpu || (dev_b && dlp_backend_get_caps(dev_b)->host_bf16 && (h.avx512_bf16 || h.amx_bf16))
                          ? DLP_DTYPE_BF16
                          : DLP_DTYPE_F32;

    if ((st = online_precisions(&o, &h, dev_b, &c))) return dlp_cli_fail(st);

    char out[4096];
    run_dir(&o, out, sizeof out);
    c.out = out;
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
           (double)h.mem_total_bytes / (1024.0 * 1024 * 1024), o.device, dlp_dtype_name(c.precision), o.size, out);
    fflush(stdout);

    dlp_eval ev;
    dlp_eval_signals sigs;
    dlp_eval_catch_signals(&sigs);
    st = dlp_eval_run_stages(&c, &ev, on_stage, NULL);
    if (st) {
        dlp_eval_release_signals(&sigs);
        return dlp_cli_fail(st);
    }
    const int stop = dlp_eval_stop_signal();
    if (stop) fprintf(stderr, "run: stopped by signal %d; the stages not run are skipped\n", stop);

    // ---- the summary ----
    json_t *res = dlp_json_result_new("dlperf.run/1", argc, argv);
    json_object_set_new(res, "options", dlp_opts_to_json(opts));
    json_object_set_new(res, "host", dlp_host_to_json(&h));
    json_object_set_new(res, "versions", dlp_versions_to_json());
    json_object_set_new(res, "precision", json_string(dlp_dtype_name(c.precision)));
    json_object_set_new(res, "infer_precision", json_string(dlp_dtype_name(c.infer_int8 ? DLP_DTYPE_I8 : c.precision)));
    json_object_set_new(res, "device_kind", json_string(dlp_backend_kind_name(kind)));  // report's verdict reads it
    json_object_set_new(res, "out", json_string(out));
    int failed = 0;
    json_object_set_new(res, "stages", dlp_eval_stages_json(&ev, &failed));

    banner("summary");
    dlp_eval_summary s;
    st = dlp_eval_summarize(&c, &ev, &s);
    if (!st) {
        print_measured(&o, &c, &ev, &s);
        if (s.have_compare) print_compare(&s);
        json_t *sum = dlp_eval_summary_json(&s);
        double wall = dlp_ns_to_s(dlp_now_ns() - t0);
        json_object_set_new(sum, "wall_s", dlp_json_real_or_null(wall));
        json_object_set_new(res, "summary", sum);
        st = dlp_json_write(res, json_path, 0);
        printf("\nrun: %.0f s; %s written%s\n", wall, json_path,
               failed ? " (some stages failed: see above and the stages in the result)" : "");
    }
    json_decref(res);
    dlp_eval_summary_free(&s);
    dlp_eval_free(&ev);
    if (!st) write_report(out, !o.json);
    dlp_eval_release_signals(&sigs);
    if (st) return dlp_cli_fail(st);
    if (dlp_eval_stop_signal()) return 128 + dlp_eval_stop_signal();
    return failed ? 1 : 0;
}
