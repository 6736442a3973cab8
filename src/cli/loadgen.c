// cli/loadgen: `dlperf loadgen` — MLPerf's four LoadGen scenarios against an HTTP URL or the in-process engine
// (--sut local), with the mlperf_log_summary-style text on stdout and a JSON result.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "loadgen/images.h"
#include "loadgen/loadgen.h"
#include "loadgen/session.h"
#include "loadgen/sut_local.h"

static void print_trial(void *ctx, const dlp_lg_trial *t, int i) {
    (void)ctx;
    if (t->p99_ns == INT64_MAX)
        fprintf(stderr, "search trial %2d: %9.2f QPS -> %-7s p99 unbounded, %.2f samples/s completed%s%s\n", i + 1,
                t->target_qps, t->valid ? "VALID" : "INVALID", t->completed_samples_per_s, t->valid ? "" : ": ", t->reason);
    else
        fprintf(stderr, "search trial %2d: %9.2f QPS -> %-7s p99 %.2f ms, %.2f samples/s completed%s%s\n", i + 1,
                t->target_qps, t->valid ? "VALID" : "INVALID", dlp_ns_to_ms(t->p99_ns), t->completed_samples_per_s,
                t->valid ? "" : ": ", t->valid ? "" : t->reason);
}

// "A", "A:B" or "A:B:S" (perf_analyzer's ranges; step 1 by default).
static dlp_status parse_range(const char *s, const char *what, double *a, double *b, double *step) {
    char *e;
    *a = strtod(s, &e);
    *b = *a;
    *step = 1;
    if (*e == ':') *b = strtod(e + 1, &e);
    if (*e == ':') *step = strtod(e + 1, &e);
    if (*e || !(*a > 0) || !(*b >= *a) || !(*step > 0))
        return DLP_ERR(DLP_ERR_INVALID, "%s '%s': expected start:end:step with 0 < start <= end, step > 0", what, s);
    return DLP_OK;
}

static void print_point(void *ctx, const dlp_lg_sweep_point *p) {
    int by_rate = *(const int *)ctx;
    fprintf(stderr, "%s: %g, throughput: %.2f infer/sec, latency %.0f usec (p99 %.0f usec)%s, %d windows%s\n",
            by_rate ? "Request Rate" : "Concurrency", p->level, p->infer_per_s, p->avg_ns / 1e3, p->p99_ns / 1e3,
            p->failed ? " with failures" : "", p->windows, p->stable ? "" : ": NOT STABLE (reported: the last 3 windows)");
}

// --mlperf-conf then --user-conf onto s, as LoadGen's FromConfig; what they set is reported on stderr.
static dlp_status apply_conf(const char *path, const char *model, dlp_lg_settings *s, unsigned *mask) {
    char ignored[1024];
    DLP_CHECK(dlp_lg_conf_apply_file(path, model, s, mask, ignored, sizeof ignored));
    if (ignored[0]) fprintf(stderr, "loadgen: %s: keys dlperf does not use: %s\n", path, ignored);
    return DLP_OK;
}

// Every option of `dlperf loadgen`.
typedef struct lg_args {
    int scenario_i, sut_i, connections, spq, early, search, offline_batch, samples;
    int mode_i, rules, max_trials, format_i, input_size;
    const char *input_name;
    const char *conc_range, *rate_range, *csv_path;
    double interval_ms, stability_pct;
    const char *url, *images, *json_path, *summary_path, *out_dir;
    const char *user_conf, *mlperf_conf, *conf_model, *labels_path;
    double qps, bound_ms, pct, min_dur_s, max_dur_s, max_failed, idle_s;
    double connect_ms, recv_ms, budget_s, tol, max_qps, progress_s;
    int64_t min_q, max_q, seed;
    const char *data;
    int sut_threads;
    dlp_cli_engine_opts eo;
    int sweeping, by_rate;
} lg_args;

#define LG_MAX_OPTS 64

static void lg_options(lg_args *a, dlp_opt *out) {
    dlp_opt t[] = {
        {"scenario", 0, DLP_OPT_CHOICE, &a->scenario_i, "Server", NULL, "MLPerf scenario", dlp_lg_scenario_choices(), 0},
        {"mode", 0, DLP_OPT_CHOICE, &a->mode_i, "PerformanceOnly", NULL, "LoadGen's test mode: timing, or every sample once with mlperf_log_accuracy.json", "PerformanceOnly|AccuracyOnly", 0},
        {"url", 'u', DLP_OPT_STR, &a->url, NULL, "URL", "the service to load (POSTs each image), e.g. http://127.0.0.1:8080/v1/classify", NULL, 0},
        {"sut", 0, DLP_OPT_CHOICE, &a->sut_i, "http", NULL, "system under test: http (--url) or local (in-process engine)", "http|local", 0},
        {"request-format", 0, DLP_OPT_CHOICE, &a->format_i, "jpeg", NULL, "HTTP bodies: the JPEG (dlperf serve's /v1/classify), or a KServe v2 / Triton inference request (POST /v2/models/NAME/infer) with the preprocessed FP32 (1,3,S,S) tensor as JSON or with the binary-data extension", "jpeg|kserve-json|kserve-binary", 0},
        {"input-name", 0, DLP_OPT_STR, &a->input_name, "input", "NAME", "kserve: the model's input tensor name", NULL, 0},
        {"input-size", 0, DLP_OPT_INT, &a->input_size, "224", "S", "kserve: the tensor's height and width (Resize + CenterCrop, ImageNet normalization)", NULL, 0},
        {"images", 'i', DLP_OPT_STR, &a->images, NULL, "PATH", "a JPEG file or a directory of them (searched recursively, sorted)", NULL, 0},
        {"labels", 0, DLP_OPT_STR, &a->labels_path, NULL, "FILE", "ImageNet val_map.txt ('path label' lines): the library is these images of the --images directory, in this order; AccuracyOnly reports top-1", NULL, 0},
        {"data", 0, DLP_OPT_STR, &a->data, "synthetic", "DIR|synthetic", "local: the dataset whose val images form the sample library (when no --images)", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_MODEL, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_WEIGHTS, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CLASSES, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_SIZE, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_DEVICE, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_PRECISION, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_THREADS, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_MAX_BATCH, &a->eo),
        {"sut-threads", 0, DLP_OPT_INT, &a->sut_threads, "1", "N", "local: SUT threads, one inference plan each", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_DCT, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CALIB, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CALIB_DATA, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CALIB_IMAGES, &a->eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CALIB_METHOD, &a->eo),
        {"samples", 0, DLP_OPT_INT, &a->samples, "1024", "N", "images loaded as the sample library (MLPerf's performance_sample_count)", NULL, 0},
        {"qps", 0, DLP_OPT_DOUBLE, &a->qps, "10", "X", "Server: Poisson arrival rate; Offline: expected samples/s (sizes the query)", NULL, 0},
        {"latency-bound", 0, DLP_OPT_DOUBLE, &a->bound_ms, "15", "MS", "Server: the latency bound at the target percentile (MLPerf ResNet-50: 15)", NULL, 0},
        {"percentile", 0, DLP_OPT_DOUBLE, &a->pct, "0", "P", "target percentile, e.g. 99 (0: 90 SingleStream, 99 otherwise)", NULL, 0},
        {"samples-per-query", 0, DLP_OPT_INT, &a->spq, "0", "N", "MultiStream query size (0: 8, MLPerf's)", NULL, 0},
        {"min-duration", 0, DLP_OPT_DOUBLE, &a->min_dur_s, "10", "S", "minimum run time in seconds (MLPerf: 600)", NULL, 0},
        {"max-duration", 0, DLP_OPT_DOUBLE, &a->max_dur_s, "0", "S", "stop issuing after this many seconds (0: no limit)", NULL, 0},
        {"min-queries", 0, DLP_OPT_I64, &a->min_q, "-1", "N", "minimum queries (Offline: samples); -1: 64/662/500/256 by scenario", NULL, 0},
        {"max-queries", 0, DLP_OPT_I64, &a->max_q, "0", "N", "stop issuing after this many queries (0: no limit)", NULL, 0},
        {"mlperf-rules", 0, DLP_OPT_FLAG, &a->rules, NULL, NULL, "MLPerf's official minimums (600 s, 24,576 Offline samples, 15 ms p99 Server, ...); a run below any is INVALID naming the rule", NULL, 0},
        {"user-conf", 0, DLP_OPT_STR, &a->user_conf, NULL, "FILE", "LoadGen settings file (user.conf: 'model.scenario.key = value'); options given on the command line win", NULL, 0},
        {"mlperf-conf", 0, DLP_OPT_STR, &a->mlperf_conf, NULL, "FILE", "a LoadGen mlperf.conf, read before --user-conf", NULL, 0},
        {"conf-model", 0, DLP_OPT_STR, &a->conf_model, "resnet50", "NAME", "the model name the config files' keys are looked up under", NULL, 0},
        {"early-stopping", 0, DLP_OPT_INT, &a->early, "1", "0|1", "apply MLPerf's early-stopping rule", NULL, 0},
        {"max-failed", 0, DLP_OPT_DOUBLE, &a->max_failed, "0", "F", "fraction of failed samples (503, timeouts, errors) still VALID", NULL, 0},
        {"offline-batch", 0, DLP_OPT_INT, &a->offline_batch, "0", "N", "Offline: issue the samples in queries of N (0: one query)", NULL, 0},
        {"idle-timeout", 0, DLP_OPT_DOUBLE, &a->idle_s, "60", "S", "give up when no response came for this long (the rest count as lost)", NULL, 0},
        {"connections", 0, DLP_OPT_INT, &a->connections, "16", "N", "HTTP: keep-alive connections (one thread each)", NULL, 0},
        {"connect-timeout", 0, DLP_OPT_DOUBLE, &a->connect_ms, "2000", "MS", "HTTP: connect timeout", NULL, 0},
        {"recv-timeout", 0, DLP_OPT_DOUBLE, &a->recv_ms, "30000", "MS", "HTTP: time for a whole response", NULL, 0},
        {"search", 0, DLP_OPT_FLAG, &a->search, NULL, NULL, "Server: search for the highest VALID QPS, starting at --qps", NULL, 0},
        {"search-budget", 0, DLP_OPT_DOUBLE, &a->budget_s, "300", "S", "search: total time for all trials", NULL, 0},
        {"search-tolerance", 0, DLP_OPT_DOUBLE, &a->tol, "0.05", "F", "search: stop when the bracket is this narrow (relative)", NULL, 0},
        {"search-max-qps", 0, DLP_OPT_DOUBLE, &a->max_qps, "0", "X", "search: never try above this (0: no cap)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &a->seed, "0", "N", "schedule and sample seed (0: MLPerf's seeds)", NULL, 0},
        {"progress", 0, DLP_OPT_DOUBLE, &a->progress_s, "2", "S", "a progress line on stderr this often (0: none)", NULL, 0},
        {"concurrency-range", 0, DLP_OPT_STR, &a->conc_range, NULL, "A:B:S", "perf_analyzer's sweep: closed loop at concurrency A, A+S, .. B (instead of a scenario)", NULL, 0},
        {"request-rate-range", 0, DLP_OPT_STR, &a->rate_range, NULL, "A:B:S", "perf_analyzer's sweep: constant request rates A, A+S, .. B per second", NULL, 0},
        {"measurement-interval", 0, DLP_OPT_DOUBLE, &a->interval_ms, "5000", "MS", "sweep: the measurement window", NULL, 0},
        {"stability-percentage", 0, DLP_OPT_DOUBLE, &a->stability_pct, "10", "P", "sweep: 3 windows in a row within +-P% on throughput and latency make a level stable", NULL, 0},
        {"max-trials", 0, DLP_OPT_INT, &a->max_trials, "10", "N", "sweep: windows per level before it is reported unstable", NULL, 0},
        {"csv", 'f', DLP_OPT_STR, &a->csv_path, NULL, "FILE", "sweep: perf_analyzer's CSV (-f) here (never overwritten)", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &a->out_dir, NULL, "DIR", "write mlperf_log_summary.txt, mlperf_log_detail.txt (and mlperf_log_accuracy.json) here; default mlperf_logs/<Scenario>-<Mode>-<UTC time>; never overwritten", NULL, 0},
        {"summary", 0, DLP_OPT_STR, &a->summary_path, NULL, "FILE", "also write the summary text here (never overwritten)", NULL, 0},
        {"json", 0, DLP_OPT_STR, &a->json_path, NULL, "FILE", "write the JSON result here (never overwritten)", NULL, 0},
        {0},
    };
    _Static_assert(sizeof t / sizeof t[0] <= LG_MAX_OPTS, "raise LG_MAX_OPTS");
    memcpy(out, t, sizeof t);
}

// The checks between options, before anything is opened.
static dlp_status check_args(const lg_args *a, dlp_lg_sweep_cfg *swc) {
    if (a->search && !dlp_lg_scenario_searchable((dlp_lg_scenario)a->scenario_i))
        return DLP_ERR(DLP_ERR_INVALID, "--search is for the Server scenario (--scenario Server)");
    if (a->search && a->mode_i == 1) return DLP_ERR(DLP_ERR_INVALID, "--search times runs; it has no AccuracyOnly mode");
    if (a->json_path) DLP_CHECK(dlp_check_new_output(a->json_path, "--json"));
    if (a->summary_path) DLP_CHECK(dlp_check_new_output(a->summary_path, "--summary"));
    if (a->samples < 1) return DLP_ERR(DLP_ERR_INVALID, "--samples must be >= 1");
    if (a->conc_range && a->rate_range)
        return DLP_ERR(DLP_ERR_INVALID, "give --concurrency-range or --request-rate-range, not both");
    if (a->sweeping && (a->search || a->mode_i == 1 || a->out_dir))
        return DLP_ERR(DLP_ERR_INVALID, "a sweep is its own run: no --search, AccuracyOnly or --out (use --csv, --json)");
    if (a->sweeping)
        DLP_CHECK(parse_range(a->conc_range ? a->conc_range : a->rate_range,
                              a->conc_range ? "--concurrency-range" : "--request-rate-range", &swc->start, &swc->end,
                              &swc->step));
    if (a->csv_path && !a->sweeping) return DLP_ERR(DLP_ERR_INVALID, "--csv is for a sweep (--concurrency-range)");
    if (a->csv_path) DLP_CHECK(dlp_check_new_output(a->csv_path, "--csv"));
    if (a->format_i > 0 && a->sut_i == 1) return DLP_ERR(DLP_ERR_INVALID, "--request-format is for --sut http");
    if (a->labels_path && a->sut_i == 1)
        return DLP_ERR(DLP_ERR_INVALID, "--labels is for --sut http; --sut local takes the labels of --data");
    return DLP_OK;
}

// Settings: dlperf's defaults, MLPerf's minimums (--mlperf-rules), the config files, then the options given.
static dlp_status make_settings(lg_args *a, const dlp_opt *opts, dlp_lg_settings *s) {
    int rules = a->rules;
    dlp_lg_settings_default(s, (dlp_lg_scenario)a->scenario_i);
    if (rules) {
        s->mlperf_rules = 1;
        dlp_lg_settings_mlperf(s);
    }
    unsigned conf_mask = 0;
    if (a->mlperf_conf) DLP_CHECK(apply_conf(a->mlperf_conf, a->conf_model, s, &conf_mask));
    if (a->user_conf) DLP_CHECK(apply_conf(a->user_conf, a->conf_model, s, &conf_mask));
    if (dlp_opt_given(opts, "mode") || !(conf_mask & DLP_LG_CONF_MODE))
        s->mode = a->mode_i == 1 ? DLP_LG_ACCURACY : DLP_LG_PERFORMANCE;
    if (dlp_opt_given(opts, "qps") || !(conf_mask & DLP_LG_CONF_TARGET_QPS)) s->target_qps = a->qps;
    if (dlp_opt_given(opts, "latency-bound") || (!rules && !(conf_mask & DLP_LG_CONF_TARGET_LATENCY)))
        s->target_latency_ns = (int64_t)(a->bound_ms * 1e6);
    if (a->pct > 0) s->target_latency_percentile = a->pct / 100.0;
    if (a->spq > 0) s->samples_per_query = a->spq;
    if (dlp_opt_given(opts, "min-duration") || (!rules && !(conf_mask & DLP_LG_CONF_MIN_DURATION)))
        s->min_duration_ns = (int64_t)(a->min_dur_s * 1e9);
    if (dlp_opt_given(opts, "max-duration")) s->max_duration_ns = (int64_t)(a->max_dur_s * 1e9);
    if (a->min_q >= 0) s->min_query_count = a->min_q;
    if (dlp_opt_given(opts, "max-queries")) s->max_query_count = a->max_q;
    if (dlp_opt_given(opts, "early-stopping") || !rules) s->early_stopping = a->early != 0;
    if (dlp_opt_given(opts, "max-failed") || !rules) s->max_failed_fraction = a->max_failed;
    s->offline_batch = a->offline_batch;
    s->idle_timeout_ns = (int64_t)(a->idle_s * 1e9);
    s->progress_interval_ns = a->progress_s > 0 ? (int64_t)(a->progress_s * 1e9) : 0;
    if (a->seed != 0) {
        s->schedule_seed = (uint64_t)a->seed;
        s->sample_seed = (uint64_t)a->seed ^ 0x9e3779b97f4a7c15ULL;
    }
    if ((conf_mask & DLP_LG_CONF_SAMPLES) && !dlp_opt_given(opts, "samples"))
        a->samples = s->sample_count > INT32_MAX ? INT32_MAX : (int)s->sample_count;
    return dlp_lg_settings_check(s);
}

// What the run is against: the local SUT or the HTTP one (with its images), and what is open.
typedef struct lg_target {
    dlp_lg_sut sut;
    dlp_lg_local *local;
    dlp_lg_images imgs;
    char kheader[96];  // the HTTP SUT keeps a pointer to it: lives as long as the SUT
} lg_target;

static void target_close(lg_target *t) {
    dlp_lg_sut_destroy(&t->sut);
    dlp_lg_local_free(t->local);
    dlp_lg_images_free(&t->imgs);
}

static dlp_status open_http_sut(const lg_args *a, dlp_lg_settings *s, const char *out_dir, lg_target *t) {
    if (!a->url)
        return DLP_ERR(DLP_ERR_INVALID, "give the service's URL with --url (e.g. http://127.0.0.1:8080/v1/classify)");
    if (!a->images)
        return DLP_ERR(DLP_ERR_INVALID, "give the images to send with --images (a JPEG file or a directory, e.g. an "
                       "ImageNet val/ folder)");
    DLP_CHECK(dlp_lg_images_load(a->images, a->labels_path, a->samples, &t->imgs));
    size_t header_len = 0;
    if (a->format_i > 0) DLP_CHECK(dlp_lg_images_to_kserve(&t->imgs, a->input_size, a->input_name, a->format_i == 2,
                                                           &header_len));
    if (a->format_i == 2) snprintf(t->kheader, sizeof t->kheader, "Inference-Header-Content-Length: %zu\r\n", header_len);
    DLP_CHECK(dlp_lg_url_check(a->url, a->connect_ms));
    s->sample_count = t->imgs.n;
    static const char *const ctypes[] = {"image/jpeg", "application/json", "application/octet-stream"};
    dlp_lg_http_cfg hc = {.url = a->url, .bodies = (const void *const *)t->imgs.bodies, .body_lens = t->imgs.lens,
                          .nbodies = t->imgs.n, .content_type = ctypes[a->format_i], .connections = a->connections,
                          .connect_timeout_ns = (int64_t)(a->connect_ms * 1e6),
                          .recv_timeout_ns = (int64_t)(a->recv_ms * 1e6),
                          .extra_headers = a->format_i == 2 ? t->kheader : NULL, .kserve = a->format_i > 0};
    DLP_CHECK(dlp_lg_sut_http_create(&hc, &t->sut));
    double kb = 0;
    for (int i = 0; i < t->imgs.n; i++) kb += (double)t->imgs.lens[i] / 1024.0 / t->imgs.n;
    if (a->sweeping)
        DLP_INFO("loadgen: %s sweep %s against %s, %d images (%.1f KB mean), %d connections",
                 a->by_rate ? "request-rate" : "concurrency", a->by_rate ? a->rate_range : a->conc_range, a->url,
                 t->imgs.n, kb, a->connections);
    else
        DLP_INFO("loadgen: %s %s against %s, %d images (%.1f KB mean), %d connections; logs in %s/",
                 dlp_lg_scenario_name(s->scenario), dlp_lg_mode_name(s->mode), a->url, t->imgs.n, kb, a->connections,
                 out_dir);
    return DLP_OK;
}

static dlp_status open_target(const lg_args *a, dlp_lg_settings *s, const char *out_dir, lg_target *t) {
    if (a->sut_i != 1) return open_http_sut(a, s, out_dir, t);
    if (a->url) return DLP_ERR(DLP_ERR_INVALID, "--url is for --sut http; --sut local runs the engine in this process");
    dlp_lg_local_cfg lc = {.data = a->data, .images = a->images, .samples = a->samples, .threads = a->sut_threads};
    dlp_cli_engine_cfg(&a->eo, &lc.stack);
    DLP_CHECK(dlp_lg_sut_local_open(&lc, &t->sut, &t->local));
    s->sample_count = dlp_lg_local_samples(t->local);
    return DLP_OK;
}

// perf_analyzer's sweep: the CSV on stdout (and --csv), the points in --json. Exit 0 when every level was stable
// without failures, else 3.
static int run_sweep(const lg_args *a, const dlp_opt *opts, dlp_lg_sweep_cfg *swc, const dlp_lg_settings *s,
                     lg_target *t) {
    if (!t->local && swc->end > a->connections && !a->by_rate)
        fprintf(stderr, "loadgen: note: concurrency above --connections %d waits for a free connection "
                "(raise --connections)\n", a->connections);
    swc->sample_count = s->sample_count;
    swc->max_outstanding = a->connections * 4 < 4096 ? a->connections * 4 : 4096;
    dlp_lg_sweep_point *pts = NULL;
    int npts = 0;
    dlp_status st = dlp_lg_sweep(swc, &t->sut, &pts, &npts);
    if (st == DLP_OK && npts > 0) {
        char *csv = dlp_lg_sweep_csv(pts, npts, a->by_rate);
        if (csv) fputs(csv, stdout);
        if (csv && a->csv_path) {
            dlp_status ws = dlp_write_atomic(a->csv_path, csv, strlen(csv), DLP_WRITE_NOCLOBBER);
            if (ws) dlp_err_print(stderr), dlp_err_clear();
            else fprintf(stderr, "loadgen: CSV written to %s\n", a->csv_path);
        }
        free(csv);
        if (a->json_path) {
            json_t *j = dlp_json_result_new("dlperf.loadgen/1", 0, NULL);
            json_object_set_new(j, "options", dlp_opts_to_json(opts));
            json_object_set_new(j, "sweep", dlp_lg_sweep_to_json(pts, npts, a->by_rate));
            dlp_status ws = dlp_cli_write_result(j, a->json_path);
            if (ws) dlp_err_print(stderr), dlp_err_clear();
        }
    }
    int stable = 1;
    for (int i = 0; i < npts; i++) stable &= pts[i].stable && pts[i].failed == 0;
    free(pts);
    target_close(t);
    if (st) return dlp_cli_fail(st);
    return stable ? 0 : 3;
}

// A sample's label: the HTTP SUT's --labels, or the local SUT's dataset; -1 when none is known.
static int32_t sample_label(void *ctx, uint32_t q) {
    const lg_target *t = ctx;
    return t->imgs.labels && q < (uint32_t)t->imgs.n ? t->imgs.labels[q] : t->local ? dlp_lg_local_label(t->local, q) : -1;
}

// AccuracyOnly: top-1 of the accuracy log against the labels; NULL in a timed run.
static json_t *accuracy_json(const dlp_lg_result *r, lg_target *t) {
    int64_t good, total;
    json_t *acc_j = dlp_lg_accuracy_json(r, sample_label, t, &good, &total);
    if (!acc_j) return NULL;
    if (total > 0)
        fprintf(stderr, "loadgen: accuracy=%.3f%%, good=%lld, total=%lld (top-1 of %lld logged samples)\n",
                100.0 * (double)good / (double)total, (long long)good, (long long)total, (long long)r->naccuracy);
    else
        fprintf(stderr, "loadgen: %lld samples in the accuracy log; no labels to score them (give --labels "
                "val_map.txt)\n", (long long)r->naccuracy);
    return acc_j;
}

// The summary on stdout and in the logs (and --summary).
static void write_summary(const lg_args *a, const char *out_dir, const dlp_lg_result *shown, json_t *acc_j) {
    char *txt = dlp_lg_summary_text(shown);
    if (txt) fputs(txt, stdout);
    fflush(stdout);
    if (txt) {
        json_t *extra = json_object();
        if (acc_j) json_object_set(extra, "dlperf_accuracy", acc_j);
        dlp_status st = dlp_lg_logs_write(out_dir, shown, extra, txt);
        json_decref(extra);
        if (st) dlp_err_print(stderr), dlp_err_clear();
        else fprintf(stderr, "loadgen: %s/mlperf_log_summary.txt, mlperf_log_detail.txt%s written\n", out_dir,
                     shown->settings.mode == DLP_LG_ACCURACY ? ", mlperf_log_accuracy.json" : "");
    }
    if (a->summary_path && txt) {
        dlp_status st = dlp_write_atomic(a->summary_path, txt, strlen(txt), DLP_WRITE_NOCLOBBER);
        if (st) dlp_err_print(stderr), dlp_err_clear();
    }
    free(txt);
}

static void write_json(const lg_args *a, const dlp_opt *opts, const char *out_dir, const dlp_lg_result *shown,
                       const dlp_lg_search_result *sr, json_t *acc_j, const lg_target *t) {
    json_t *j = dlp_json_result_new("dlperf.loadgen/1", 0, NULL);
    json_object_set_new(j, "options", dlp_opts_to_json(opts));
    json_object_set_new(j, "result", dlp_lg_result_to_json(shown));
    json_object_set_new(j, "out_dir", json_string(out_dir));
    if (acc_j) json_object_set(j, "accuracy", acc_j);
    if (a->search) json_object_set_new(j, "search", dlp_lg_search_to_json(sr));
    json_t *imj = json_object();
    json_object_set_new(imj, "count", json_integer(t->local ? dlp_lg_local_samples(t->local) : t->imgs.n));
    json_object_set_new(imj, "path", a->images ? json_string(a->images) : t->local ? json_string(a->data) : json_null());
    if (t->local) json_object_set_new(j, "local_sut", dlp_lg_local_json(t->local));
    json_object_set_new(j, "images", imj);
    dlp_status st = dlp_cli_write_result(j, a->json_path);
    if (st) dlp_err_print(stderr), dlp_err_clear();
    else fprintf(stderr, "loadgen: result written to %s\n", a->json_path);
}

// The service went away during the run: no sample answered, every one a connection error.
static int service_lost(const lg_args *a, const dlp_lg_result *shown, const lg_target *t) {
    if (t->local || shown->samples_by_outcome[DLP_LG_OK] != 0 || !shown->sut_stats) return 0;
    json_t *ce = json_object_get(json_object_get(shown->sut_stats, "errors"), "connect");
    if (!ce || json_integer_value(ce) <= 0) return 0;
    fprintf(stderr, "dlperf: error: no sample was answered: %lld connection errors to %s (the service stopped "
            "or refused connections during the run)\n", (long long)json_integer_value(ce), a->url);
    return 1;
}

int dlp_cli_loadgen(int argc, char **argv) {
    lg_args a = {.scenario_i = 2, .connections = 16, .early = 1, .samples = 1024, .max_trials = 10, .input_size = 224,
                 .interval_ms = 5000, .stability_pct = 10, .qps = 10, .bound_ms = 15, .min_dur_s = 10, .idle_s = 60,
                 .connect_ms = 2000, .recv_ms = 30000, .budget_s = 300, .tol = 0.05, .progress_s = 2, .min_q = -1,
                 .sut_threads = 1,
                 .eo = {.seed = 1}};  // loadgen's --seed is the schedule's; the random init's stays 1
    dlp_opt opts[LG_MAX_OPTS];
    lg_options(&a, opts);
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf loadgen [options] --url URL --images PATH\n"
                                        "MLPerf LoadGen's scenarios and rules against a classification service.\n"
                                        "Exit status: 0 VALID, 3 INVALID, 1 error, 2 bad options.",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    a.sweeping = a.conc_range || a.rate_range;
    a.by_rate = a.rate_range != NULL;
    dlp_lg_sweep_cfg swc = {.by_rate = a.by_rate, .window_ns = (int64_t)(a.interval_ms * 1e6),
                            .stability = a.stability_pct / 100, .windows = 3, .max_windows = a.max_trials,
                            .on_point = print_point, .on_point_ctx = &a.by_rate};
    dlp_lg_settings s;
    if ((st = check_args(&a, &swc)) || (st = make_settings(&a, opts, &s))) return dlp_cli_fail(st);

    char out_buf[512];
    const char *out_dir = a.out_dir;
    if (!out_dir && !a.sweeping) {
        dlp_lg_logs_default_dir(&s, out_buf, sizeof out_buf);
        out_dir = out_buf;
    }
    if (!a.sweeping && (st = dlp_lg_logs_prepare(out_dir))) return dlp_cli_fail(st);

    lg_target t = {0};
    if ((st = open_target(&a, &s, out_dir, &t))) {
        target_close(&t);
        return dlp_cli_fail(st);
    }
    if (a.sweeping) return run_sweep(&a, opts, &swc, &s, &t);

    dlp_lg_result res;
    dlp_lg_search_result sr;
    memset(&sr, 0, sizeof sr);
    const dlp_lg_result *shown = &res;
    if (a.search) {
        dlp_lg_search_cfg cfg = {.start_qps = a.qps, .max_qps = a.max_qps, .tolerance = a.tol,
                                 .budget_ns = (int64_t)(a.budget_s * 1e9), .on_trial = print_trial};
        st = dlp_lg_search(&s, &t.sut, &cfg, &sr);
        shown = &sr.best;
        if (st == DLP_OK)
            fprintf(stderr, "search: %s; best VALID %.2f QPS (%d trials)\n", sr.stop_reason,
                    sr.found ? sr.best_qps : 0.0, sr.ntrials);
    } else {
        st = dlp_lg_run(&s, &t.sut, &res);
    }
    if (st) {
        target_close(&t);
        return dlp_cli_fail(st);
    }
    int rc = 1;
    if (!service_lost(&a, shown, &t)) {
        long long answered = 0, correct = 0;
        if (t.local) dlp_lg_local_top1(t.local, &answered, &correct);
        if (answered > 0)
            fprintf(stderr, "loadgen: in-process SUT top-1 against the dataset's labels: %.2f%% of %lld answered "
                    "samples\n", 100.0 * (double)correct / (double)answered, answered);
        json_t *acc_j = accuracy_json(shown, &t);
        write_summary(&a, out_dir, shown, acc_j);
        if (a.json_path) write_json(&a, opts, out_dir, shown, &sr, acc_j, &t);
        json_decref(acc_j);
        rc = (a.search ? sr.found : shown->valid) ? 0 : 3;
    }
    if (a.search) dlp_lg_search_result_free(&sr);
    else dlp_lg_result_free(&res);
    target_close(&t);
    return rc;
}
