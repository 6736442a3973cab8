// cli/loadgen: `dlperf loadgen` — MLPerf's four LoadGen scenarios against an HTTP URL or the in-process engine
// (--sut local), with the mlperf_log_summary-style text on stdout and a JSON result.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "data/walk.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "data/source.h"
#include "data/transform.h"
#include "loadgen/http_client.h"
#include "loadgen/loadgen.h"
#include "run/infer.h"
#include "serve/serve.h"
#include "serve/stack.h"

#define LG_MAX_IMAGES 100000

typedef struct image_set {
    char **paths;
    void **bodies;
    size_t *lens;
    int32_t *labels;  // (n) from --labels, else NULL
    int n;
} image_set;

static void images_free(image_set *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->paths[i]);
        free(s->bodies[i]);
    }
    free(s->paths);
    free(s->bodies);
    free(s->lens);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

// --images PATH: one JPEG file, or a directory searched for *.jpg / *.jpeg (sorted); the first `max` are
// loaded into memory (the query sample library, as MLPerf loads its performance samples).
static dlp_status images_load(const char *path, const char *labels, int max, image_set *s) {
    memset(s, 0, sizeof *s);
    if (labels) {
        // ImageNet's val_map.txt: "relative/path label" a line; the library is those files in that order, so
        // qsl_idx i is line i (what MLPerf's accuracy-imagenet.py assumes).
        if (!dlp_is_dir(path)) return DLP_ERR(DLP_ERR_INVALID, "--labels needs --images to be a directory");
        char *text;
        size_t tlen;
        DLP_CHECK(dlp_read_file(labels, &text, &tlen, (size_t)64 << 20));
        int cap = max < LG_MAX_IMAGES ? max : LG_MAX_IMAGES;
        s->paths = calloc((size_t)cap, sizeof *s->paths);
        s->labels = calloc((size_t)cap, sizeof *s->labels);
        if (!s->paths || !s->labels) {
            free(text);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d labels", cap);
        }
        int line = 0;
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l && s->n < cap; l = strtok_r(NULL, "\n", &save)) {
            line++;
            char name[2048];
            long lab;
            if (l[0] == '\r' || l[0] == '\0') continue;
            if (sscanf(l, "%2047s %ld", name, &lab) != 2 || lab < 0 || lab > 1000000) {
                free(text);
                return DLP_ERR(DLP_ERR_FORMAT, "%s line %d: expected 'relative/path.JPEG label'", labels, line);
            }
            size_t plen = strlen(path) + strlen(name) + 2;
            s->paths[s->n] = malloc(plen);
            if (!s->paths[s->n]) {
                free(text);
                return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            }
            snprintf(s->paths[s->n], plen, "%s/%s", path, name);
            s->labels[s->n++] = (int32_t)lab;
        }
        free(text);
        if (s->n == 0) return DLP_ERR(DLP_ERR_FORMAT, "%s lists no image", labels);
    } else if (dlp_is_dir(path)) {
        dlp_path_list l = {0};
        dlp_status st = dlp_jpeg_walk(path, 4, (size_t)(max < LG_MAX_IMAGES ? max : LG_MAX_IMAGES), &l);
        s->paths = l.paths;  // the set owns them now
        s->n = (int)l.n;
        DLP_CHECK(st);
        if (s->n == 0) return DLP_ERR(DLP_ERR_NOTFOUND, "no *.jpg or *.jpeg files under %s", path);
    } else {
        s->paths = malloc(sizeof *s->paths);
        DLP_TRY_ALLOC(s->paths);
        s->paths[0] = strdup(path);
        s->n = 1;
    }
    s->bodies = calloc((size_t)s->n, sizeof *s->bodies);
    s->lens = calloc((size_t)s->n, sizeof *s->lens);
    if (!s->bodies || !s->lens) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d images", s->n);
    for (int i = 0; i < s->n; i++) {
        char *data;
        size_t len;
        dlp_status st = dlp_read_file(s->paths[i], &data, &len, (size_t)64 << 20);
        if (st != DLP_OK) {
            dlp_err_context("loading --images");
            return st;
        }
        s->bodies[i] = data;
        s->lens[i] = len;
    }
    return DLP_OK;
}

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

// The in-process SUT (MLPerf's usual set-up): the sample library is preprocessed into memory before the run
// (the val transform into the plan's input format, as MLPerf loads its performance samples), and each SUT thread
// owns a ladder of inference plans of batch 1, 2, 4, .. up to --max-batch (a plan is not re-entrant, and it computes
// its whole batch whatever the call's n): a call copies the queued samples into the thread's batch buffer, runs the
// smallest plan that holds them and answers each sample's top-1.
typedef struct local_sut {
    dlp_serve_stack stack;      // the model and stack.ladders[t]: thread t's plans of batch 1, 2, 4, .. --max-batch
    uint8_t **batch_bufs;       // (threads) max_batch samples each
    float **logits;             // (threads)
    int threads;
    dlp_infer_files files;
    dlp_infer_library lib;
    // top-1 against the dataset's labels (when the samples come from --data)
    _Atomic long long answered, correct;
} local_sut;

static void local_free(local_sut *ls) {
    for (int t = 0; t < ls->threads; t++) {
        if (ls->batch_bufs) free(ls->batch_bufs[t]);
        if (ls->logits) free(ls->logits[t]);
    }
    free(ls->batch_bufs);
    free(ls->logits);
    dlp_infer_library_free(&ls->lib);
    dlp_infer_files_free(&ls->files);
    dlp_serve_stack_close(&ls->stack);
    free(ls);
}

// dlp_lg_infer_fn: samples by library index -> the worker's plan -> top-1 of each.
static dlp_status local_infer(void *ctx, int worker, const uint32_t *indices, int n, int32_t *top1) {
    local_sut *ls = ctx;
    const dlp_serve_engine *e = &ls->stack.ladders[worker].engine;
    const size_t sb = ls->lib.sample_bytes;
    for (int i = 0; i < n; i++) {
        if (indices[i] >= (uint32_t)ls->lib.n)
            return DLP_ERR(DLP_ERR_INVALID, "sample %u is not in the library of %d", indices[i], ls->lib.n);
        memcpy(ls->batch_bufs[worker] + (size_t)i * sb, ls->lib.data + (size_t)indices[i] * sb, sb);
    }
    DLP_CHECK(e->infer(e->ctx, ls->batch_bufs[worker], n, ls->logits[worker]));
    for (int i = 0; i < n; i++) {
        const float *z = ls->logits[worker] + (size_t)i * e->num_classes;
        int best = 0;
        for (int k = 1; k < e->num_classes; k++)
            if (z[k] > z[best]) best = k;
        top1[i] = best;
        int32_t truth = ls->files.labels[ls->lib.file[indices[i]]];
        if (truth >= 0) {
            ls->answered++;
            ls->correct += best == truth;
        }
    }
    return DLP_OK;
}

// The in-process SUT from the engine options (eo), --data or --images (images) and --samples.
static dlp_status open_local_sut(const dlp_cli_engine_opts *eo, const char *data, const char *images, int samples,
                                 int sut_threads, dlp_lg_sut *sut, local_sut **out) {
    *out = NULL;
    if (eo->max_batch < 1 || sut_threads < 1 || sut_threads > 64)
        return DLP_ERR(DLP_ERR_INVALID, "--max-batch must be >= 1 and --sut-threads in 1..64");
    local_sut *ls = calloc(1, sizeof *ls);
    DLP_TRY_ALLOC(ls);
    dlp_status st = DLP_OK;
    dlp_dataset *ds = NULL;
    char where[4096] = "";
    if (images) st = dlp_infer_files_add(&ls->files, images);
    else {
        st = dlp_data_open(data, "val", NULL, &ds, where, sizeof where);
        if (st == DLP_OK) st = dlp_infer_files_from_dataset(&ls->files, ds, samples);
    }
    // One plan ladder per SUT thread; compute threads (--threads, 0: the CPUs this process may use) divided among
    // them, at least 1 each; the preprocessing (one transformer) fills the sample library below.
    dlp_serve_stack_cfg sc;
    dlp_cli_engine_cfg(eo, &sc);
    sc.copies = sut_threads;
    sc.share_threads = 1;
    sc.workers = 1;
    sc.random_init_warning = "no --weights: %s runs with torchvision's random initialization (seed %lld); timings "
                             "are valid, answers are not";
    if (st == DLP_OK) st = dlp_serve_stack_open(&sc, &ls->stack);
    // The dataset's labels mean something to the model only if it was trained on those classes (same count).
    if (st == DLP_OK && ds && ds->nclasses != ls->stack.model.net.num_classes)
        for (int i = 0; i < ls->files.n; i++) ls->files.labels[i] = -1;
    dlp_dataset_free(ds);
    if (st == DLP_OK) {
        ls->batch_bufs = calloc((size_t)sut_threads, sizeof *ls->batch_bufs);
        ls->logits = calloc((size_t)sut_threads, sizeof *ls->logits);
        if (!ls->batch_bufs || !ls->logits) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the SUT");
        else ls->threads = sut_threads;
    }
    for (int t = 0; st == DLP_OK && t < sut_threads; t++) {
        const dlp_serve_engine *e = &ls->stack.ladders[t].engine;
        ls->batch_bufs[t] = malloc((size_t)eo->max_batch * e->sample_bytes);
        ls->logits[t] = malloc((size_t)eo->max_batch * (size_t)e->num_classes * sizeof(float));
        if (!ls->batch_bufs[t] || !ls->logits[t]) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the SUT's batches");
    }
    int64_t t0 = dlp_now_ns();
    if (st == DLP_OK) st = dlp_infer_library_load(ls->stack.prep, &ls->files, samples, &ls->lib);
    if (st == DLP_OK) {
        const dlp_infer_engine *e = &ls->stack.ladders[0].plans[0];
        char ladder[64];
        dlp_serve_ladder_describe(&ls->stack.ladders[0], ladder, sizeof ladder);
        DLP_INFO("loadgen: in-process SUT: %s (%d classes) on %s %s, %d thread%s with plans of batch %s; %d samples "
                 "of %s preprocessed in %.1f s (%s %s)%s", ls->stack.model.net.arch, ls->stack.model.net.num_classes,
                 dlp_backend_name(e->ops), dlp_dtype_name(e->precision), ls->threads, ls->threads > 1 ? "s" : "", ladder, ls->lib.n,
                 images ? images : where, dlp_ns_to_s(dlp_now_ns() - t0), dlp_layout_name(e->layout),
                 dlp_dtype_name(e->in_dtype), ls->lib.skipped ? " (some images skipped)" : "");
        dlp_lg_inproc_cfg ic = {.fn = local_infer, .ctx = ls, .max_batch = eo->max_batch, .threads = ls->threads,
                                .name = "local"};
        st = dlp_lg_sut_inproc_create(&ic, sut);
    }
    if (st) {
        local_free(ls);
        return st;
    }
    *out = ls;
    return DLP_OK;
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

static json_t *sweep_json(const dlp_lg_sweep_point *p, int n, int by_rate) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:f, s:b, s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:f}",
                                           by_rate ? "request_rate" : "concurrency", p[i].level, "stable", p[i].stable,
                                           "windows", p[i].windows, "count", (json_int_t)p[i].count, "failed",
                                           (json_int_t)p[i].failed, "infer_per_s", p[i].infer_per_s, "avg_ms",
                                           p[i].avg_ns / 1e6, "p50_ms", p[i].p50_ns / 1e6, "p90_ms", p[i].p90_ns / 1e6,
                                           "p95_ms", p[i].p95_ns / 1e6, "p99_ms", p[i].p99_ns / 1e6, "server_reported",
                                           (json_int_t)p[i].server_count, "server_queue_ms", p[i].server_queue_ns / 1e6,
                                           "server_infer_ms", p[i].server_infer_ns / 1e6));
    return a;
}

// --request-format kserve-json|kserve-binary: each image preprocessed (Resize + CenterCrop to size, ImageNet's
// normalization, FP32 NCHW) and made a KServe v2 request body in place of the JPEG.
static dlp_status images_to_kserve(image_set *s, int size, const char *input_name, int binary, size_t *header_len) {
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_VAL);
    t.out_w = t.out_h = size;
    DLP_CHECK(dlp_transform_check(&t));
    float *chw = malloc(dlp_transform_sample_bytes(&t));
    DLP_TRY_ALLOC(chw);
    dlp_status st = DLP_OK;
    for (int i = 0; i < s->n && st == DLP_OK; i++) {
        st = dlp_transform_jpeg(&t, s->bodies[i], s->lens[i], chw);
        if (st) {
            dlp_err_context("preprocessing %s for --request-format", s->paths[i]);
            break;
        }
        char *body;
        size_t len, hl;
        st = dlp_lg_kserve_body(chw, size, size, input_name, binary, &body, &len, &hl);
        if (st) break;
        if (i > 0 && hl != *header_len) st = DLP_ERR(DLP_ERR_INVALID, "KServe headers differ in length");
        *header_len = hl;
        free(s->bodies[i]);
        s->bodies[i] = body;
        s->lens[i] = len;
    }
    free(chw);
    return st;
}

// --mlperf-conf then --user-conf onto s, as LoadGen's FromConfig; what they set is reported on stderr.
static dlp_status apply_conf(const char *path, const char *model, dlp_lg_settings *s, unsigned *mask) {
    char *text;
    size_t len;
    DLP_CHECK(dlp_read_file(path, &text, &len, (size_t)1 << 20));
    char ignored[1024];
    unsigned m = 0;
    dlp_status st = dlp_lg_conf_apply(text, model, s, &m, ignored, sizeof ignored);
    free(text);
    if (st) {
        dlp_err_context("reading %s", path);
        return st;
    }
    *mask |= m;
    if (ignored[0]) {
        for (char *c = ignored; *c; c++)
            if (*c == '\n') *c = ' ';
        fprintf(stderr, "loadgen: %s: keys dlperf does not use: %s\n", path, ignored);
    }
    return DLP_OK;
}

// The output directory's files: all new (never overwritten).
static const char *const lg_files[] = {"mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"};

static dlp_status out_dir_prepare(const char *dir) {
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, lg_files[i]);
        if (dlp_path_exists(p))
            return DLP_ERR(DLP_ERR_EXISTS, "%s already exists: give --out a new directory (nothing is overwritten)", p);
    }
    return DLP_OK;  // created when the logs are written: a run that fails before leaves no empty directory
}

static dlp_status write_logs(const char *dir, const dlp_lg_result *r, json_t *extra, const char *summary) {
    char p[4096];
    DLP_CHECK(dlp_mkdirs(dir));
    snprintf(p, sizeof p, "%s/%s", dir, lg_files[0]);
    DLP_CHECK(dlp_write_atomic(p, summary, strlen(summary), DLP_WRITE_NOCLOBBER));
    FILE *f;
    snprintf(p, sizeof p, "%s/%s", dir, lg_files[1]);
    DLP_CHECK(dlp_fopen_new(p, &f));
    dlp_status st = dlp_lg_detail_write(f, r, extra);
    if (fclose(f) != 0 && st == DLP_OK) st = DLP_ERR(DLP_ERR_IO, "cannot write %s", p);
    DLP_CHECK(st);
    if (r->settings.mode != DLP_LG_ACCURACY) return DLP_OK;
    snprintf(p, sizeof p, "%s/%s", dir, lg_files[2]);
    DLP_CHECK(dlp_fopen_new(p, &f));
    st = dlp_lg_accuracy_write(f, r);
    if (fclose(f) != 0 && st == DLP_OK) st = DLP_ERR(DLP_ERR_IO, "cannot write %s", p);
    return st;
}

// "Nothing listens at the URL" is an error, said before any load: not a run of failed samples.
static dlp_status probe_url(const char *url, double connect_ms) {
    dlp_http_url u;
    DLP_CHECK(dlp_http_url_parse(url, &u));
    dlp_http_timeouts to = {.connect_ns = (int64_t)(connect_ms * 1e6), .send_ns = 1000000000, .recv_ns = 1000000000};
    dlp_http_conn *c;
    dlp_status st = dlp_http_conn_open(&u, &to, &c);
    if (st == DLP_OK) {
        st = dlp_http_conn_probe(c);
        dlp_http_conn_close(c);
    }
    if (st) {
        dlp_err_context("connecting to %s (is the service running there? start it with `dlperf serve`)", url);
        return st;
    }
    return DLP_OK;
}

int dlp_cli_loadgen(int argc, char **argv) {
    int scenario_i = 2, sut_i = 0, connections = 16, spq = 0, early = 1, search = 0, offline_batch = 0, samples = 1024;
    int mode_i = 0, rules = 0, max_trials = 10, format_i = 0, input_size = 224;
    const char *input_name = NULL;
    const char *conc_range = NULL, *rate_range = NULL, *csv_path = NULL;
    double interval_ms = 5000, stability_pct = 10;
    const char *url = NULL, *images = NULL, *json_path = NULL, *summary_path = NULL, *out_dir = NULL;
    const char *user_conf = NULL, *mlperf_conf = NULL, *conf_model = NULL, *labels_path = NULL;
    double qps = 10, bound_ms = 15, pct = 0, min_dur_s = 10, max_dur_s = 0, max_failed = 0, idle_s = 60;
    double connect_ms = 2000, recv_ms = 30000, budget_s = 300, tol = 0.05, max_qps = 0, progress_s = 2;
    int64_t min_q = -1, max_q = 0, seed = 0;
    const char *data = NULL;
    int sut_threads = 1;
    dlp_cli_engine_opts eo = {.seed = 1};  // loadgen's --seed is the schedule's; the random init's stays 1
    local_sut *local = NULL;
    dlp_opt opts[] = {
        {"scenario", 0, DLP_OPT_CHOICE, &scenario_i, "Server", NULL, "MLPerf scenario", dlp_lg_scenario_choices(), 0},
        {"mode", 0, DLP_OPT_CHOICE, &mode_i, "PerformanceOnly", NULL, "LoadGen's test mode: timing, or every sample once with mlperf_log_accuracy.json", "PerformanceOnly|AccuracyOnly", 0},
        {"url", 'u', DLP_OPT_STR, &url, NULL, "URL", "the service to load (POSTs each image), e.g. http://127.0.0.1:8080/v1/classify", NULL, 0},
        {"sut", 0, DLP_OPT_CHOICE, &sut_i, "http", NULL, "system under test: http (--url) or local (in-process engine)", "http|local", 0},
        {"request-format", 0, DLP_OPT_CHOICE, &format_i, "jpeg", NULL, "HTTP bodies: the JPEG (dlperf serve's /v1/classify), or a KServe v2 / Triton inference request (POST /v2/models/NAME/infer) with the preprocessed FP32 (1,3,S,S) tensor as JSON or with the binary-data extension", "jpeg|kserve-json|kserve-binary", 0},
        {"input-name", 0, DLP_OPT_STR, &input_name, "input", "NAME", "kserve: the model's input tensor name", NULL, 0},
        {"input-size", 0, DLP_OPT_INT, &input_size, "224", "S", "kserve: the tensor's height and width (Resize + CenterCrop, ImageNet normalization)", NULL, 0},
        {"images", 'i', DLP_OPT_STR, &images, NULL, "PATH", "a JPEG file or a directory of them (searched recursively, sorted)", NULL, 0},
        {"labels", 0, DLP_OPT_STR, &labels_path, NULL, "FILE", "ImageNet val_map.txt ('path label' lines): the library is these images of the --images directory, in this order; AccuracyOnly reports top-1", NULL, 0},
        {"data", 0, DLP_OPT_STR, &data, "synthetic", "DIR|synthetic", "local: the dataset whose val images form the sample library (when no --images)", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_MODEL, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_WEIGHTS, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_CLASSES, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_SIZE, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_DEVICE, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_PRECISION, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_THREADS, &eo),
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_MAX_BATCH, &eo),
        {"sut-threads", 0, DLP_OPT_INT, &sut_threads, "1", "N", "local: SUT threads, one inference plan each", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_LOADGEN, DLP_CLI_ENGINE_DCT, &eo),
        {"samples", 0, DLP_OPT_INT, &samples, "1024", "N", "images loaded as the sample library (MLPerf's performance_sample_count)", NULL, 0},
        {"qps", 0, DLP_OPT_DOUBLE, &qps, "10", "X", "Server: Poisson arrival rate; Offline: expected samples/s (sizes the query)", NULL, 0},
        {"latency-bound", 0, DLP_OPT_DOUBLE, &bound_ms, "15", "MS", "Server: the latency bound at the target percentile (MLPerf ResNet-50: 15)", NULL, 0},
        {"percentile", 0, DLP_OPT_DOUBLE, &pct, "0", "P", "target percentile, e.g. 99 (0: 90 SingleStream, 99 otherwise)", NULL, 0},
        {"samples-per-query", 0, DLP_OPT_INT, &spq, "0", "N", "MultiStream query size (0: 8, MLPerf's)", NULL, 0},
        {"min-duration", 0, DLP_OPT_DOUBLE, &min_dur_s, "10", "S", "minimum run time in seconds (MLPerf: 600)", NULL, 0},
        {"max-duration", 0, DLP_OPT_DOUBLE, &max_dur_s, "0", "S", "stop issuing after this many seconds (0: no limit)", NULL, 0},
        {"min-queries", 0, DLP_OPT_I64, &min_q, "-1", "N", "minimum queries (Offline: samples); -1: 64/662/500/256 by scenario", NULL, 0},
        {"max-queries", 0, DLP_OPT_I64, &max_q, "0", "N", "stop issuing after this many queries (0: no limit)", NULL, 0},
        {"mlperf-rules", 0, DLP_OPT_FLAG, &rules, NULL, NULL, "MLPerf's official minimums (600 s, 24,576 Offline samples, 15 ms p99 Server, ...); a run below any is INVALID naming the rule", NULL, 0},
        {"user-conf", 0, DLP_OPT_STR, &user_conf, NULL, "FILE", "LoadGen settings file (user.conf: 'model.scenario.key = value'); options given on the command line win", NULL, 0},
        {"mlperf-conf", 0, DLP_OPT_STR, &mlperf_conf, NULL, "FILE", "a LoadGen mlperf.conf, read before --user-conf", NULL, 0},
        {"conf-model", 0, DLP_OPT_STR, &conf_model, "resnet50", "NAME", "the model name the config files' keys are looked up under", NULL, 0},
        {"early-stopping", 0, DLP_OPT_INT, &early, "1", "0|1", "apply MLPerf's early-stopping rule", NULL, 0},
        {"max-failed", 0, DLP_OPT_DOUBLE, &max_failed, "0", "F", "fraction of failed samples (503, timeouts, errors) still VALID", NULL, 0},
        {"offline-batch", 0, DLP_OPT_INT, &offline_batch, "0", "N", "Offline: issue the samples in queries of N (0: one query)", NULL, 0},
        {"idle-timeout", 0, DLP_OPT_DOUBLE, &idle_s, "60", "S", "give up when no response came for this long (the rest count as lost)", NULL, 0},
        {"connections", 0, DLP_OPT_INT, &connections, "16", "N", "HTTP: keep-alive connections (one thread each)", NULL, 0},
        {"connect-timeout", 0, DLP_OPT_DOUBLE, &connect_ms, "2000", "MS", "HTTP: connect timeout", NULL, 0},
        {"recv-timeout", 0, DLP_OPT_DOUBLE, &recv_ms, "30000", "MS", "HTTP: time for a whole response", NULL, 0},
        {"search", 0, DLP_OPT_FLAG, &search, NULL, NULL, "Server: search for the highest VALID QPS, starting at --qps", NULL, 0},
        {"search-budget", 0, DLP_OPT_DOUBLE, &budget_s, "300", "S", "search: total time for all trials", NULL, 0},
        {"search-tolerance", 0, DLP_OPT_DOUBLE, &tol, "0.05", "F", "search: stop when the bracket is this narrow (relative)", NULL, 0},
        {"search-max-qps", 0, DLP_OPT_DOUBLE, &max_qps, "0", "X", "search: never try above this (0: no cap)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", "N", "schedule and sample seed (0: MLPerf's seeds)", NULL, 0},
        {"progress", 0, DLP_OPT_DOUBLE, &progress_s, "2", "S", "a progress line on stderr this often (0: none)", NULL, 0},
        {"concurrency-range", 0, DLP_OPT_STR, &conc_range, NULL, "A:B:S", "perf_analyzer's sweep: closed loop at concurrency A, A+S, .. B (instead of a scenario)", NULL, 0},
        {"request-rate-range", 0, DLP_OPT_STR, &rate_range, NULL, "A:B:S", "perf_analyzer's sweep: constant request rates A, A+S, .. B per second", NULL, 0},
        {"measurement-interval", 0, DLP_OPT_DOUBLE, &interval_ms, "5000", "MS", "sweep: the measurement window", NULL, 0},
        {"stability-percentage", 0, DLP_OPT_DOUBLE, &stability_pct, "10", "P", "sweep: 3 windows in a row within +-P% on throughput and latency make a level stable", NULL, 0},
        {"max-trials", 0, DLP_OPT_INT, &max_trials, "10", "N", "sweep: windows per level before it is reported unstable", NULL, 0},
        {"csv", 'f', DLP_OPT_STR, &csv_path, NULL, "FILE", "sweep: perf_analyzer's CSV (-f) here (never overwritten)", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &out_dir, NULL, "DIR", "write mlperf_log_summary.txt, mlperf_log_detail.txt (and mlperf_log_accuracy.json) here; default mlperf_logs/<Scenario>-<Mode>-<UTC time>; never overwritten", NULL, 0},
        {"summary", 0, DLP_OPT_STR, &summary_path, NULL, "FILE", "also write the summary text here (never overwritten)", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the JSON result here (never overwritten)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf loadgen [options] --url URL --images PATH\n"
                                        "MLPerf LoadGen's scenarios and rules against a classification service.\n"
                                        "Exit status: 0 VALID, 3 INVALID, 1 error, 2 bad options.",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    dlp_lg_scenario sc = (dlp_lg_scenario)scenario_i;
    if (search && !dlp_lg_scenario_searchable(sc))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--search is for the Server scenario (--scenario Server)"));
    if (search && mode_i == 1)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--search times runs; it has no AccuracyOnly mode"));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (summary_path && (st = dlp_check_new_output(summary_path, "--summary"))) return dlp_cli_fail(st);
    if (samples < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--samples must be >= 1"));
    int sweeping = conc_range || rate_range, by_rate = rate_range != NULL;
    dlp_lg_sweep_cfg swc = {.by_rate = by_rate, .window_ns = (int64_t)(interval_ms * 1e6), .stability = stability_pct / 100,
                            .windows = 3, .max_windows = max_trials, .on_point = print_point, .on_point_ctx = &by_rate};
    if (conc_range && rate_range)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "give --concurrency-range or --request-rate-range, not both"));
    if (sweeping && (search || mode_i == 1 || out_dir))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "a sweep is its own run: no --search, AccuracyOnly or --out (use --csv, --json)"));
    if (sweeping && (st = parse_range(conc_range ? conc_range : rate_range,
                                      conc_range ? "--concurrency-range" : "--request-rate-range", &swc.start, &swc.end,
                                      &swc.step)))
        return dlp_cli_fail(st);
    if (csv_path && !sweeping) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--csv is for a sweep (--concurrency-range)"));
    if (csv_path && (st = dlp_check_new_output(csv_path, "--csv"))) return dlp_cli_fail(st);
    if (format_i > 0 && sut_i == 1)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--request-format is for --sut http"));
    if (labels_path && sut_i == 1)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--labels is for --sut http; --sut local takes the labels of --data"));

    // Settings: dlperf's defaults, MLPerf's minimums (--mlperf-rules), the config files, then the options given.
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, sc);
    if (rules) {
        s.mlperf_rules = 1;
        dlp_lg_settings_mlperf(&s);
    }
    unsigned conf_mask = 0;
    if (mlperf_conf && (st = apply_conf(mlperf_conf, conf_model, &s, &conf_mask))) return dlp_cli_fail(st);
    if (user_conf && (st = apply_conf(user_conf, conf_model, &s, &conf_mask))) return dlp_cli_fail(st);
    if (dlp_opt_given(opts, "mode") || !(conf_mask & DLP_LG_CONF_MODE)) s.mode = mode_i == 1 ? DLP_LG_ACCURACY : DLP_LG_PERFORMANCE;
    if (dlp_opt_given(opts, "qps") || !(conf_mask & DLP_LG_CONF_TARGET_QPS)) s.target_qps = qps;
    if (dlp_opt_given(opts, "latency-bound") || (!rules && !(conf_mask & DLP_LG_CONF_TARGET_LATENCY)))
        s.target_latency_ns = (int64_t)(bound_ms * 1e6);
    if (pct > 0) s.target_latency_percentile = pct / 100.0;
    if (spq > 0) s.samples_per_query = spq;
    if (dlp_opt_given(opts, "min-duration") || (!rules && !(conf_mask & DLP_LG_CONF_MIN_DURATION)))
        s.min_duration_ns = (int64_t)(min_dur_s * 1e9);
    if (dlp_opt_given(opts, "max-duration")) s.max_duration_ns = (int64_t)(max_dur_s * 1e9);
    if (min_q >= 0) s.min_query_count = min_q;
    if (dlp_opt_given(opts, "max-queries")) s.max_query_count = max_q;
    if (dlp_opt_given(opts, "early-stopping") || !rules) s.early_stopping = early != 0;
    if (dlp_opt_given(opts, "max-failed") || !rules) s.max_failed_fraction = max_failed;
    s.offline_batch = offline_batch;
    s.idle_timeout_ns = (int64_t)(idle_s * 1e9);
    s.progress_interval_ns = progress_s > 0 ? (int64_t)(progress_s * 1e9) : 0;
    if (seed != 0) {
        s.schedule_seed = (uint64_t)seed;
        s.sample_seed = (uint64_t)seed ^ 0x9e3779b97f4a7c15ULL;
    }
    if ((conf_mask & DLP_LG_CONF_SAMPLES) && !dlp_opt_given(opts, "samples"))
        samples = s.sample_count > INT32_MAX ? INT32_MAX : (int)s.sample_count;
    if ((st = dlp_lg_settings_check(&s))) return dlp_cli_fail(st);

    char out_buf[512];
    if (!out_dir && !sweeping) {
        time_t now = time(NULL);
        struct tm tm;
        char stamp[32] = "run";
        if (gmtime_r(&now, &tm)) strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(out_buf, sizeof out_buf, "mlperf_logs/%s-%s-%s-%d", dlp_lg_scenario_name(sc), dlp_lg_mode_name(s.mode),
                 stamp, (int)getpid());
        out_dir = out_buf;
    }
    if (!sweeping && (st = out_dir_prepare(out_dir))) return dlp_cli_fail(st);

    image_set imgs = {0};
    dlp_lg_sut sut = {0};
    char kheader[96] = "";  // the HTTP SUT keeps a pointer to it: lives as long as the SUT
    if (sut_i == 1) {
        if (url) st = DLP_ERR(DLP_ERR_INVALID, "--url is for --sut http; --sut local runs the engine in this process");
        if (st == DLP_OK) st = open_local_sut(&eo, data, images, samples, sut_threads, &sut, &local);
        if (st == DLP_OK) s.sample_count = local->lib.n;
    } else {
        if (!url) st = DLP_ERR(DLP_ERR_INVALID, "give the service's URL with --url (e.g. http://127.0.0.1:8080/v1/classify)");
        else if (!images)
            st = DLP_ERR(DLP_ERR_INVALID, "give the images to send with --images (a JPEG file or a directory, e.g. an "
                         "ImageNet val/ folder)");
        else st = images_load(images, labels_path, samples, &imgs);
        size_t header_len = 0;
        if (st == DLP_OK && format_i > 0) st = images_to_kserve(&imgs, input_size, input_name, format_i == 2, &header_len);
        if (format_i == 2) snprintf(kheader, sizeof kheader, "Inference-Header-Content-Length: %zu\r\n", header_len);
        if (st == DLP_OK) st = probe_url(url, connect_ms);
        if (st == DLP_OK) {
            s.sample_count = imgs.n;
            static const char *const ctypes[] = {"image/jpeg", "application/json", "application/octet-stream"};
            dlp_lg_http_cfg hc = {.url = url, .bodies = (const void *const *)imgs.bodies, .body_lens = imgs.lens,
                                  .nbodies = imgs.n, .content_type = ctypes[format_i], .connections = connections,
                                  .connect_timeout_ns = (int64_t)(connect_ms * 1e6),
                                  .recv_timeout_ns = (int64_t)(recv_ms * 1e6),
                                  .extra_headers = format_i == 2 ? kheader : NULL, .kserve = format_i > 0};
            st = dlp_lg_sut_http_create(&hc, &sut);
            double kb = 0;
            for (int i = 0; i < imgs.n; i++) kb += (double)imgs.lens[i] / 1024.0 / imgs.n;
            if (st == DLP_OK && sweeping)
                DLP_INFO("loadgen: %s sweep %s against %s, %d images (%.1f KB mean), %d connections",
                         by_rate ? "request-rate" : "concurrency", by_rate ? rate_range : conc_range, url, imgs.n, kb,
                         connections);
            else if (st == DLP_OK)
                DLP_INFO("loadgen: %s %s against %s, %d images (%.1f KB mean), %d connections; logs in %s/",
                         dlp_lg_scenario_name(sc), dlp_lg_mode_name(s.mode), url, imgs.n, kb, connections, out_dir);
        }
    }
    if (st) {
        images_free(&imgs);
        return dlp_cli_fail(st);
    }

    if (sweeping) {
        if (!local && swc.end > connections && !by_rate)
            fprintf(stderr, "loadgen: note: concurrency above --connections %d waits for a free connection "
                    "(raise --connections)\n", connections);
        swc.sample_count = s.sample_count;
        swc.max_outstanding = connections * 4 < 4096 ? connections * 4 : 4096;
        dlp_lg_sweep_point *pts = NULL;
        int npts = 0;
        st = dlp_lg_sweep(&swc, &sut, &pts, &npts);
        if (st == DLP_OK && npts > 0) {
            char *csv = dlp_lg_sweep_csv(pts, npts, by_rate);
            if (csv) fputs(csv, stdout);
            if (csv && csv_path) {
                dlp_status ws = dlp_write_atomic(csv_path, csv, strlen(csv), DLP_WRITE_NOCLOBBER);
                if (ws) dlp_err_print(stderr), dlp_err_clear();
                else fprintf(stderr, "loadgen: CSV written to %s\n", csv_path);
            }
            free(csv);
            if (json_path) {
                json_t *j = dlp_json_result_new("dlperf.loadgen/1", 0, NULL);
                json_object_set_new(j, "options", dlp_opts_to_json(opts));
                json_object_set_new(j, "sweep", sweep_json(pts, npts, by_rate));
                dlp_status ws = dlp_cli_write_result(j, json_path);
                if (ws) dlp_err_print(stderr), dlp_err_clear();
            }
        }
        int stable = 1;
        for (int i = 0; i < npts; i++) stable &= pts[i].stable && pts[i].failed == 0;
        free(pts);
        dlp_lg_sut_destroy(&sut);
        if (local) local_free(local);
        images_free(&imgs);
        if (st) return dlp_cli_fail(st);
        return stable ? 0 : 3;
    }

    dlp_lg_result res;
    dlp_lg_search_result sr;
    memset(&sr, 0, sizeof sr);
    const dlp_lg_result *shown = &res;
    if (search) {
        dlp_lg_search_cfg cfg = {.start_qps = qps, .max_qps = max_qps, .tolerance = tol,
                                 .budget_ns = (int64_t)(budget_s * 1e9), .on_trial = print_trial};
        st = dlp_lg_search(&s, &sut, &cfg, &sr);
        shown = &sr.best;
        if (st == DLP_OK)
            fprintf(stderr, "search: %s; best VALID %.2f QPS (%d trials)\n", sr.stop_reason, sr.found ? sr.best_qps : 0.0,
                    sr.ntrials);
    } else {
        st = dlp_lg_run(&s, &sut, &res);
    }
    if (st) {
        dlp_lg_sut_destroy(&sut);
        if (local) local_free(local);
        images_free(&imgs);
        return dlp_cli_fail(st);
    }
    // The service went away during the run: no sample answered, every one a connection error.
    if (!local && shown->samples_by_outcome[DLP_LG_OK] == 0 && shown->sut_stats) {
        json_t *ce = json_object_get(json_object_get(shown->sut_stats, "errors"), "connect");
        if (ce && json_integer_value(ce) > 0) {
            fprintf(stderr, "dlperf: error: no sample was answered: %lld connection errors to %s (the service stopped "
                    "or refused connections during the run)\n", (long long)json_integer_value(ce), url);
            if (search) dlp_lg_search_result_free(&sr);
            else dlp_lg_result_free(&res);
            dlp_lg_sut_destroy(&sut);
            images_free(&imgs);
            return 1;
        }
    }
    if (local && local->answered > 0)
        fprintf(stderr, "loadgen: in-process SUT top-1 against the dataset's labels: %.2f%% of %lld answered samples\n",
                100.0 * (double)local->correct / (double)local->answered, (long long)local->answered);
    // AccuracyOnly: top-1 of the accuracy log against the labels (accuracy-imagenet.py's arithmetic: each
    // qsl_idx once).
    json_t *acc_j = NULL;
    if (shown->settings.mode == DLP_LG_ACCURACY) {
        int64_t good = 0, total = 0;
        for (int64_t i = 0; i < shown->naccuracy; i++) {
            uint32_t q = shown->accuracy[i].qsl_idx;
            int32_t lab = imgs.labels && q < (uint32_t)imgs.n ? imgs.labels[q]
                          : local && q < (uint32_t)local->lib.n ? local->files.labels[local->lib.file[q]]
                                                                : -1;
            if (lab < 0) continue;
            total++;
            good += shown->accuracy[i].top1 == lab;
        }
        acc_j = json_object();
        json_object_set_new(acc_j, "logged", json_integer(shown->naccuracy));
        json_object_set_new(acc_j, "labelled", json_integer(total));
        json_object_set_new(acc_j, "good", json_integer(good));
        if (total > 0) {
            json_object_set_new(acc_j, "top1", json_real((double)good / (double)total));
            fprintf(stderr, "loadgen: accuracy=%.3f%%, good=%lld, total=%lld (top-1 of %lld logged samples)\n",
                    100.0 * (double)good / (double)total, (long long)good, (long long)total,
                    (long long)shown->naccuracy);
        } else {
            fprintf(stderr, "loadgen: %lld samples in the accuracy log; no labels to score them (give --labels "
                    "val_map.txt)\n", (long long)shown->naccuracy);
        }
    }
    char *txt = dlp_lg_summary_text(shown);
    if (txt) fputs(txt, stdout);
    fflush(stdout);
    if (txt) {
        json_t *extra = json_object();
        if (acc_j) json_object_set(extra, "dlperf_accuracy", acc_j);
        st = write_logs(out_dir, shown, extra, txt);
        json_decref(extra);
        if (st) dlp_err_print(stderr), dlp_err_clear();
        else fprintf(stderr, "loadgen: %s/mlperf_log_summary.txt, mlperf_log_detail.txt%s written\n", out_dir,
                     shown->settings.mode == DLP_LG_ACCURACY ? ", mlperf_log_accuracy.json" : "");
    }
    if (summary_path && txt) {
        st = dlp_write_atomic(summary_path, txt, strlen(txt), DLP_WRITE_NOCLOBBER);
        if (st) dlp_err_print(stderr), dlp_err_clear();
    }
    free(txt);
    int valid = search ? sr.found : shown->valid;
    if (json_path) {
        json_t *j = dlp_json_result_new("dlperf.loadgen/1", 0, NULL);
        json_object_set_new(j, "options", dlp_opts_to_json(opts));
        json_object_set_new(j, "result", dlp_lg_result_to_json(shown));
        json_object_set_new(j, "out_dir", json_string(out_dir));
        if (acc_j) json_object_set(j, "accuracy", acc_j);
        if (search) json_object_set_new(j, "search", dlp_lg_search_to_json(&sr));
        json_t *imj = json_object();
        json_object_set_new(imj, "count", json_integer(local ? local->lib.n : imgs.n));
        json_object_set_new(imj, "path", images ? json_string(images) : local ? json_string(data) : json_null());
        if (local) {
            json_t *lj = json_object();
            json_object_set_new(lj, "model", dlp_infer_model_to_json(&local->stack.model));
            const dlp_serve_ladder *l0 = &local->stack.ladders[0];
            json_object_set_new(lj, "plan", dlp_infer_engine_plan_json(&l0->plans[l0->n - 1]));
            json_object_set_new(lj, "plans", json_integer((json_int_t)l0->n * local->threads));
            json_object_set_new(lj, "preprocessed", json_true());
            if (local->answered > 0) {
                json_object_set_new(lj, "top1_answered", json_integer(local->answered));
                json_object_set_new(lj, "top1_accuracy", json_real((double)local->correct / (double)local->answered));
            }
            json_object_set_new(j, "local_sut", lj);
        }
        json_object_set_new(j, "images", imj);
        st = dlp_cli_write_result(j, json_path);
        if (st) dlp_err_print(stderr), dlp_err_clear();
        else fprintf(stderr, "loadgen: result written to %s\n", json_path);
    }
    json_decref(acc_j);
    if (search) dlp_lg_search_result_free(&sr);
    else dlp_lg_result_free(&res);
    dlp_lg_sut_destroy(&sut);
    if (local) local_free(local);
    images_free(&imgs);
    return valid ? 0 : 3;
}
