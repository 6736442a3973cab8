// cli/loadgen: `dlperf loadgen` — MLPerf's four LoadGen scenarios against an HTTP URL (or, once the engine is
// wired in, the in-process engine), with the mlperf_log_summary-style text on stdout and a JSON result.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "hw/host.h"
#include "loadgen/loadgen.h"

#define LG_MAX_IMAGES 100000

typedef struct image_set {
    char **paths;
    void **bodies;
    size_t *lens;
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
    memset(s, 0, sizeof *s);
}

static int has_jpeg_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Collects JPEG paths under dir (recursively, like an ImageNet val/<wnid>/ tree), up to max.
static dlp_status collect(const char *dir, char ***paths, int *n, int *cap, int max, int depth) {
    DIR *d = opendir(dir);
    if (!d) return DLP_ERR(DLP_ERR_IO, "cannot read the directory %s", dir);
    struct dirent *e;
    dlp_status st = DLP_OK;
    while (st == DLP_OK && *n < max && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (dlp_is_dir(p)) {
            if (depth < 4) st = collect(p, paths, n, cap, max, depth + 1);
            continue;
        }
        if (!has_jpeg_ext(e->d_name)) continue;
        if (*n == *cap) {
            int nc = *cap ? *cap * 2 : 256;
            char **np = realloc(*paths, (size_t)nc * sizeof *np);
            if (!np) {
                st = DLP_ERR(DLP_ERR_NOMEM, "out of memory listing %s", dir);
                break;
            }
            *paths = np;
            *cap = nc;
        }
        (*paths)[(*n)++] = strdup(p);
    }
    closedir(d);
    return st;
}

// --images PATH: one JPEG file, or a directory searched for *.jpg / *.jpeg (sorted); the first `max` are
// loaded into memory (the query sample library, as MLPerf loads its performance samples).
static dlp_status images_load(const char *path, int max, image_set *s) {
    memset(s, 0, sizeof *s);
    int cap = 0;
    if (dlp_is_dir(path)) {
        DLP_CHECK(collect(path, &s->paths, &s->n, &cap, LG_MAX_IMAGES, 0));
        if (s->n == 0) return DLP_ERR(DLP_ERR_NOTFOUND, "no *.jpg or *.jpeg files under %s", path);
        qsort(s->paths, (size_t)s->n, sizeof *s->paths, cmp_str);
        if (s->n > max) {
            for (int i = max; i < s->n; i++) free(s->paths[i]);
            s->n = max;
        }
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

// The in-process SUT runs the inference engine directly (MLPerf's usual set-up). It needs the engine and
// the preprocessed sample library, which come with the engine and data modules: until they are wired in
// here, say so.
static dlp_status open_local_sut(dlp_lg_sut *sut) {
    (void)sut;
    return DLP_ERR(DLP_ERR_UNSUPPORTED, "--sut local (the in-process engine) is not wired into this build yet; "
                   "start `dlperf serve` and give its URL with --url http://127.0.0.1:8080/v1/classify");
}

int dlp_cli_loadgen(int argc, char **argv) {
    int scenario_i = 2, sut_i = 0, connections = 16, spq = 0, early = 1, search = 0, offline_batch = 0, samples = 1024;
    const char *url = NULL, *images = NULL, *json_path = NULL, *summary_path = NULL;
    double qps = 10, bound_ms = 15, pct = 0, min_dur_s = 10, max_dur_s = 0, max_failed = 0, idle_s = 60;
    double connect_ms = 2000, recv_ms = 30000, budget_s = 300, tol = 0.05, max_qps = 0;
    int64_t min_q = -1, max_q = 0, seed = 0;
    dlp_opt opts[] = {
        {"scenario", 's', DLP_OPT_CHOICE, &scenario_i, "Server", NULL, "MLPerf scenario", "SingleStream|MultiStream|Server|Offline", 0},
        {"url", 'u', DLP_OPT_STR, &url, NULL, "URL", "the service to load (POSTs each image), e.g. http://127.0.0.1:8080/v1/classify", NULL, 0},
        {"sut", 0, DLP_OPT_CHOICE, &sut_i, "http", NULL, "system under test: http (--url) or local (in-process engine)", "http|local", 0},
        {"images", 'i', DLP_OPT_STR, &images, NULL, "PATH", "a JPEG file or a directory of them (searched recursively, sorted)", NULL, 0},
        {"samples", 0, DLP_OPT_INT, &samples, "1024", "N", "images loaded as the sample library (MLPerf's performance_sample_count)", NULL, 0},
        {"qps", 'q', DLP_OPT_DOUBLE, &qps, "10", "X", "Server: Poisson arrival rate; Offline: expected samples/s (sizes the query)", NULL, 0},
        {"latency-bound", 0, DLP_OPT_DOUBLE, &bound_ms, "15", "MS", "Server: the latency bound at the target percentile (MLPerf ResNet-50: 15)", NULL, 0},
        {"percentile", 0, DLP_OPT_DOUBLE, &pct, "0", "P", "target percentile, e.g. 99 (0: 90 SingleStream, 99 otherwise)", NULL, 0},
        {"samples-per-query", 0, DLP_OPT_INT, &spq, "0", "N", "MultiStream query size (0: 8, MLPerf's)", NULL, 0},
        {"min-duration", 0, DLP_OPT_DOUBLE, &min_dur_s, "10", "S", "minimum run time in seconds (MLPerf: 600)", NULL, 0},
        {"max-duration", 0, DLP_OPT_DOUBLE, &max_dur_s, "0", "S", "stop issuing after this many seconds (0: no limit)", NULL, 0},
        {"min-queries", 0, DLP_OPT_I64, &min_q, "-1", "N", "minimum queries (Offline: samples); -1: 64/662/500/256 by scenario", NULL, 0},
        {"max-queries", 0, DLP_OPT_I64, &max_q, "0", "N", "stop issuing after this many queries (0: no limit)", NULL, 0},
        {"early-stopping", 0, DLP_OPT_INT, &early, "1", "0|1", "apply MLPerf's early-stopping rule", NULL, 0},
        {"max-failed", 0, DLP_OPT_DOUBLE, &max_failed, "0", "F", "fraction of failed samples (503, timeouts, errors) still VALID", NULL, 0},
        {"offline-batch", 0, DLP_OPT_INT, &offline_batch, "0", "N", "Offline: issue the samples in queries of N (0: one query)", NULL, 0},
        {"idle-timeout", 0, DLP_OPT_DOUBLE, &idle_s, "60", "S", "give up when no response came for this long (the rest count as lost)", NULL, 0},
        {"connections", 'c', DLP_OPT_INT, &connections, "16", "N", "HTTP: keep-alive connections (one thread each)", NULL, 0},
        {"connect-timeout", 0, DLP_OPT_DOUBLE, &connect_ms, "2000", "MS", "HTTP: connect timeout", NULL, 0},
        {"recv-timeout", 0, DLP_OPT_DOUBLE, &recv_ms, "30000", "MS", "HTTP: time for a whole response", NULL, 0},
        {"search", 0, DLP_OPT_FLAG, &search, NULL, NULL, "Server: search for the highest VALID QPS, starting at --qps", NULL, 0},
        {"search-budget", 0, DLP_OPT_DOUBLE, &budget_s, "300", "S", "search: total time for all trials", NULL, 0},
        {"search-tolerance", 0, DLP_OPT_DOUBLE, &tol, "0.05", "F", "search: stop when the bracket is this narrow (relative)", NULL, 0},
        {"search-max-qps", 0, DLP_OPT_DOUBLE, &max_qps, "0", "X", "search: never try above this (0: no cap)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", "N", "schedule and sample seed (0: MLPerf's seeds)", NULL, 0},
        {"summary", 0, DLP_OPT_STR, &summary_path, NULL, "FILE", "also write the summary text here (never overwritten)", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the JSON result here (never overwritten)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(opts, "usage: dlperf loadgen [options] --url URL --images PATH\n"
                                         "MLPerf LoadGen's scenarios and rules against a classification service.\n"
                                         "Exit status: 0 VALID, 3 INVALID, 1 error, 2 bad options.",
                                   argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    if (rest < argc) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "unexpected argument '%s' (see --help)", argv[rest]));
    dlp_lg_scenario sc = (dlp_lg_scenario)scenario_i;
    if (search && sc != DLP_LG_SERVER)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--search is for the Server scenario (--scenario Server)"));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (summary_path && (st = dlp_check_new_output(summary_path, "--summary"))) return dlp_cli_fail(st);
    if (samples < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--samples must be >= 1"));

    dlp_lg_settings s;
    dlp_lg_settings_default(&s, sc);
    s.target_qps = qps;
    s.target_latency_ns = (int64_t)(bound_ms * 1e6);
    if (pct > 0) s.target_latency_percentile = pct / 100.0;
    if (spq > 0) s.samples_per_query = spq;
    s.min_duration_ns = (int64_t)(min_dur_s * 1e9);
    s.max_duration_ns = (int64_t)(max_dur_s * 1e9);
    if (min_q >= 0) s.min_query_count = min_q;
    s.max_query_count = max_q;
    s.early_stopping = early != 0;
    s.max_failed_fraction = max_failed;
    s.offline_batch = offline_batch;
    s.idle_timeout_ns = (int64_t)(idle_s * 1e9);
    if (seed != 0) {
        s.schedule_seed = (uint64_t)seed;
        s.sample_seed = (uint64_t)seed ^ 0x9e3779b97f4a7c15ULL;
    }
    if ((st = dlp_lg_settings_check(&s))) return dlp_cli_fail(st);

    image_set imgs = {0};
    dlp_lg_sut sut = {0};
    if (sut_i == 1) {
        st = open_local_sut(&sut);
    } else {
        if (!url) st = DLP_ERR(DLP_ERR_INVALID, "give the service's URL with --url (e.g. http://127.0.0.1:8080/v1/classify)");
        else if (!images)
            st = DLP_ERR(DLP_ERR_INVALID, "give the images to send with --images (a JPEG file or a directory, e.g. an "
                         "ImageNet val/ folder)");
        else st = images_load(images, samples, &imgs);
        if (st == DLP_OK) {
            s.sample_count = imgs.n;
            dlp_lg_http_cfg hc = {.url = url, .bodies = (const void *const *)imgs.bodies, .body_lens = imgs.lens,
                                  .nbodies = imgs.n, .content_type = "image/jpeg", .connections = connections,
                                  .connect_timeout_ns = (int64_t)(connect_ms * 1e6),
                                  .recv_timeout_ns = (int64_t)(recv_ms * 1e6)};
            st = dlp_lg_sut_http_create(&hc, &sut);
            double kb = 0;
            for (int i = 0; i < imgs.n; i++) kb += (double)imgs.lens[i] / 1024.0 / imgs.n;
            if (st == DLP_OK)
                DLP_INFO("loadgen: %s against %s, %d images (%.1f KB mean), %d connections", dlp_lg_scenario_name(sc),
                         url, imgs.n, kb, connections);
        }
    }
    if (st) {
        images_free(&imgs);
        return dlp_cli_fail(st);
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
        images_free(&imgs);
        return dlp_cli_fail(st);
    }
    char *txt = dlp_lg_summary_text(shown);
    if (txt) fputs(txt, stdout);
    fflush(stdout);
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
        if (search) json_object_set_new(j, "search", dlp_lg_search_to_json(&sr));
        json_t *imj = json_object();
        json_object_set_new(imj, "count", json_integer(imgs.n));
        json_object_set_new(imj, "path", images ? json_string(images) : json_null());
        json_object_set_new(j, "images", imj);
        dlp_host_info h;
        dlp_host_probe(&h);
        json_object_set_new(j, "host", dlp_host_to_json(&h));
        json_object_set_new(j, "versions", dlp_versions_to_json());
        st = dlp_json_write(j, json_path, DLP_WRITE_NOCLOBBER);
        json_decref(j);
        if (st) dlp_err_print(stderr), dlp_err_clear();
        else fprintf(stderr, "loadgen: result written to %s\n", json_path);
    }
    if (search) dlp_lg_search_result_free(&sr);
    else dlp_lg_result_free(&res);
    dlp_lg_sut_destroy(&sut);
    images_free(&imgs);
    return valid ? 0 : 3;
}
