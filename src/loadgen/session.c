// loadgen/session: the log directory, config files, the service check and the JSON of sweeps and accuracy
// (loadgen/session.h).
#include "loadgen/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "loadgen/http_client.h"

static const char *const k_files[] = {"mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"};

void dlp_lg_logs_default_dir(const dlp_lg_settings *s, char *buf, size_t cap) {
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32] = "run";
    if (gmtime_r(&now, &tm)) strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(buf, cap, "mlperf_logs/%s-%s-%s-%d", dlp_lg_scenario_name(s->scenario), dlp_lg_mode_name(s->mode), stamp,
             (int)getpid());
}

dlp_status dlp_lg_logs_prepare(const char *dir) {
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, k_files[i]);
        if (dlp_path_exists(p))
            return DLP_ERR(DLP_ERR_EXISTS, "%s already exists: give --out a new directory (nothing is overwritten)", p);
    }
    return DLP_OK;
}

// One log file written by fn through a new FILE.
static dlp_status write_new(const char *dir, int which, dlp_status (*fn)(FILE *, const dlp_lg_result *, json_t *),
                            const dlp_lg_result *r, json_t *extra) {
    char p[4096];
    FILE *f;
    snprintf(p, sizeof p, "%s/%s", dir, k_files[which]);
    DLP_CHECK(dlp_fopen_new(p, &f));
    dlp_status st = fn(f, r, extra);
    if (fclose(f) != 0 && st == DLP_OK) st = DLP_ERR(DLP_ERR_IO, "cannot write %s", p);
    return st;
}

static dlp_status accuracy_write(FILE *f, const dlp_lg_result *r, json_t *extra) {
    (void)extra;
    return dlp_lg_accuracy_write(f, r);
}

dlp_status dlp_lg_logs_write(const char *dir, const dlp_lg_result *r, json_t *extra, const char *summary) {
    char p[4096];
    DLP_CHECK(dlp_mkdirs(dir));
    snprintf(p, sizeof p, "%s/%s", dir, k_files[0]);
    DLP_CHECK(dlp_write_atomic(p, summary, strlen(summary), DLP_WRITE_NOCLOBBER));
    DLP_CHECK(write_new(dir, 1, dlp_lg_detail_write, r, extra));
    if (r->settings.mode != DLP_LG_ACCURACY) return DLP_OK;
    return write_new(dir, 2, accuracy_write, r, NULL);
}

dlp_status dlp_lg_conf_apply_file(const char *path, const char *model, dlp_lg_settings *s, unsigned *mask,
                                  char *ignored, size_t ignored_len) {
    char *text;
    size_t len;
    DLP_CHECK(dlp_read_file(path, &text, &len, (size_t)1 << 20));
    unsigned m = 0;
    dlp_status st = dlp_lg_conf_apply(text, model, s, &m, ignored, ignored_len);
    free(text);
    if (st) {
        dlp_err_context("reading %s", path);
        return st;
    }
    *mask |= m;
    for (char *c = ignored; *c; c++)
        if (*c == '\n') *c = ' ';
    return DLP_OK;
}

dlp_status dlp_lg_url_check(const char *url, double connect_ms) {
    dlp_http_url u;
    DLP_CHECK(dlp_http_url_parse(url, &u));
    dlp_http_timeouts to = {.connect_ns = (int64_t)(connect_ms * 1e6), .send_ns = 1000000000, .recv_ns = 1000000000};
    dlp_http_conn *c;
    dlp_status st = dlp_http_conn_open(&u, &to, &c);
    if (st == DLP_OK) {
        st = dlp_http_conn_probe(c);
        dlp_http_conn_close(c);
    }
    if (st) dlp_err_context("connecting to %s (is the service running there? start it with `dlperf serve`)", url);
    return st;
}

json_t *dlp_lg_sweep_to_json(const dlp_lg_sweep_point *p, int n, int by_rate) {
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

json_t *dlp_lg_accuracy_json(const dlp_lg_result *r, int32_t (*label)(void *ctx, uint32_t idx), void *ctx,
                             int64_t *good, int64_t *total) {
    *good = *total = 0;
    if (r->settings.mode != DLP_LG_ACCURACY) return NULL;
    for (int64_t i = 0; i < r->naccuracy; i++) {
        int32_t lab = label(ctx, r->accuracy[i].qsl_idx);
        if (lab < 0) continue;
        ++*total;
        *good += r->accuracy[i].top1 == lab;
    }
    json_t *j = json_pack("{s:I, s:I, s:I}", "logged", (json_int_t)r->naccuracy, "labelled", (json_int_t)*total, "good",
                          (json_int_t)*good);
    if (*total > 0) json_object_set_new(j, "top1", json_real((double)*good / (double)*total));
    return j;
}
