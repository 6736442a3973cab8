// loadgen/session: what a loadgen run needs around dlp_lg_run — the log directory (new files only, LoadGen's
// names), the LoadGen config files, a check that something listens at the URL, a sweep's points and AccuracyOnly's
// top-1 as JSON. cli/loadgen parses the options, calls these and prints.
// Defines: dlp_lg_logs_default_dir, dlp_lg_logs_prepare, dlp_lg_logs_write, dlp_lg_conf_apply_file,
//          dlp_lg_url_check, dlp_lg_sweep_to_json, dlp_lg_accuracy_json.
#ifndef DLP_LOADGEN_SESSION_H
#define DLP_LOADGEN_SESSION_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "loadgen/loadgen.h"

// The default --out: mlperf_logs/<Scenario>-<Mode>-<UTC time>-<pid>.
void dlp_lg_logs_default_dir(const dlp_lg_settings *s, char *buf, size_t cap);
// DLP_ERR_EXISTS when a log file is already in dir (the directory itself is made when the logs are written, so a
// run that fails before leaves none).
dlp_status dlp_lg_logs_prepare(const char *dir);
// mlperf_log_summary.txt (summary), mlperf_log_detail.txt (with extra: see dlp_lg_detail_write) and, in
// AccuracyOnly, mlperf_log_accuracy.json into dir; never over an existing file.
dlp_status dlp_lg_logs_write(const char *dir, const dlp_lg_result *r, json_t *extra, const char *summary);
// A LoadGen config file (mlperf.conf, user.conf) applied onto s as dlp_lg_conf_apply; ignored gets the keys
// dlperf does not use, on one line ("" when none).
dlp_status dlp_lg_conf_apply_file(const char *path, const char *model, dlp_lg_settings *s, unsigned *mask,
                                  char *ignored, size_t ignored_len);
// "Nothing listens at the URL" as an error before any load, not a run of failed samples.
dlp_status dlp_lg_url_check(const char *url, double connect_ms);
// The points of a perf_analyzer-style sweep.
json_t *dlp_lg_sweep_to_json(const dlp_lg_sweep_point *p, int n, int by_rate);
// AccuracyOnly: top-1 of the accuracy log against label(ctx, qsl_idx) (-1: no label), each logged sample once
// (accuracy-imagenet.py's arithmetic): {"logged", "labelled", "good"[, "top1"]}; NULL in a timed run.
json_t *dlp_lg_accuracy_json(const dlp_lg_result *r, int32_t (*label)(void *ctx, uint32_t idx), void *ctx,
                             int64_t *good, int64_t *total);

#endif
