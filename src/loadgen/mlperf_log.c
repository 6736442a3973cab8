// loadgen/mlperf_log: LoadGen's machine-readable logs — mlperf_log_detail.txt (":::MLLOG {...}" lines with the
// keys of loadgen/results.cc PerformanceSummary::LogDetail and test_settings_internal.cc LogEffectiveSettings)
// and mlperf_log_accuracy.json (logging.cc AsyncLog::LogAccuracy), so tools that read LoadGen's read ours.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loadgen/scenario.h"

struct dlp_lg_detail_log {
    FILE *f;
    int64_t time_ns;  // the time_ms of the lines written next (since the run's start)
    int err;
};
typedef dlp_lg_detail_log detail_log;

// One line: {"key", "value" (any JSON, stolen), "time_ms", "namespace", "event_type", "metadata"} as LoadGen's
// AsyncLog::LogDetail writes it.
static void mllog_at(detail_log *d, const char *key, json_t *value, int is_warning, const char *file, int line) {
    char *v = value ? json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_t *k = json_string(key);
    char *ks = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
    if (!v || !ks) d->err = 1;
    else if (fprintf(d->f, ":::MLLOG {\"key\": %s, \"value\": %s, \"time_ms\": %lld.%06lld, \"namespace\": "
                     "\"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": false, "
                     "\"is_warning\": %s, \"file\": \"%s\", \"line_no\": %d, \"pid\": %d, "
                     "\"tid\": %d}}\n", ks, v, (long long)(d->time_ns / 1000000), (long long)(d->time_ns % 1000000),
                     is_warning ? "true" : "false", file, line, (int)getpid(), (int)getpid()) < 0)
        d->err = 1;
    free(v);
    free(ks);
    json_decref(value);
    json_decref(k);
}
#define MLLOG(d, key, value) mllog_at((d), (key), (value), 0, __FILE__, __LINE__)

void dlp_lg_detail_key_at(dlp_lg_detail_log *d, const char *key, json_t *value, const char *file, int line) {
    mllog_at(d, key, value, 0, file, line);
}

static json_t *u64_json(uint64_t v) { return json_integer((json_int_t)v); }  // LoadGen prints them unsigned

// LoadGen's DoubleToString(p * 100): two decimals ("99.90").
static void pct_key(char *out, size_t cap, const char *pre, double p, const char *post) {
    snprintf(out, cap, "%s%.2f%s", pre, p, post);
}

void dlp_lg_detail_latency(detail_log *d, const dlp_lg_latency *l, const char *kind) {
    static const double pcts[] = {50, 90, 95, 97, 99, 99.9};
    const int64_t vals[] = {l->p50_ns, l->p90_ns, l->p95_ns, l->p97_ns, l->p99_ns, l->p999_ns};
    char key[96];
    snprintf(key, sizeof key, "result_min_%slatency_ns", kind);
    MLLOG(d, key, json_integer(l->min_ns));
    snprintf(key, sizeof key, "result_max_%slatency_ns", kind);
    MLLOG(d, key, json_integer(l->max_ns));
    snprintf(key, sizeof key, "result_mean_%slatency_ns", kind);
    MLLOG(d, key, json_integer(l->mean_ns));
    for (int i = 0; i < 6; i++) {
        pct_key(key, sizeof key, "result_", pcts[i], kind[0] ? "_percentile_per_query_latency_ns" : "_percentile_latency_ns");
        MLLOG(d, key, json_integer(vals[i]));
    }
}

dlp_status dlp_lg_detail_write(FILE *f, const dlp_lg_result *r, json_t *extra) {
    const dlp_lg_settings *s = &r->settings;
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (!ops) return DLP_ERR(DLP_ERR_INVALID, "unknown scenario");
    detail_log d = {.f = f};
    char when[64] = "";
    time_t t0 = (time_t)(r->t0_unix_ns / 1000000000LL);
    struct tm tm;
    if (gmtime_r(&t0, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    MLLOG(&d, "loadgen_version", json_string("dlperf loadgen (LoadGen's formats; not mlcommons/inference's code)"));
    MLLOG(&d, "test_datetime", json_string(when));
    MLLOG(&d, "sut_name", json_string(r->sut_name));
    MLLOG(&d, "qsl_name", json_string("dlperf sample library"));
    MLLOG(&d, "qsl_reported_total_count", json_integer(s->sample_count));
    MLLOG(&d, "qsl_reported_performance_count", json_integer(s->sample_count));
    // LogRequestedTestSettings: dlperf does not adjust what was asked, so requested and effective agree
    MLLOG(&d, "requested_scenario", json_string(dlp_lg_scenario_name(s->scenario)));
    MLLOG(&d, "requested_test_mode", json_string(dlp_lg_mode_name(s->mode)));
    MLLOG(&d, "requested_min_duration_ms", json_integer(s->min_duration_ns / 1000000));
    MLLOG(&d, "requested_max_duration_ms", json_integer(s->max_duration_ns / 1000000));
    MLLOG(&d, "requested_min_query_count", json_integer(s->min_query_count));
    MLLOG(&d, "requested_max_query_count", json_integer(s->max_query_count));
    MLLOG(&d, "requested_sample_index_rng_seed", u64_json(s->sample_seed));
    MLLOG(&d, "requested_schedule_rng_seed", u64_json(s->schedule_seed));
    MLLOG(&d, "requested_performance_sample_count_override", json_integer(s->sample_count));
    // LogEffectiveSettings
    MLLOG(&d, "effective_scenario", json_string(dlp_lg_scenario_name(s->scenario)));
    MLLOG(&d, "effective_test_mode", json_string(dlp_lg_mode_name(s->mode)));
    MLLOG(&d, "effective_samples_per_query", json_integer(s->samples_per_query));
    MLLOG(&d, "effective_target_qps", json_real(s->target_qps));
    MLLOG(&d, "effective_target_latency_ns", json_integer(s->target_latency_ns));
    MLLOG(&d, "effective_target_latency_percentile", json_real(s->target_latency_percentile));
    MLLOG(&d, "effective_max_async_queries", json_integer(0));
    MLLOG(&d, "effective_target_duration_ms", json_integer(0));
    MLLOG(&d, "effective_min_duration_ms", json_integer(s->min_duration_ns / 1000000));
    MLLOG(&d, "effective_max_duration_ms", json_integer(s->max_duration_ns / 1000000));
    MLLOG(&d, "effective_min_query_count", json_integer(s->min_query_count));
    MLLOG(&d, "effective_max_query_count", json_integer(s->max_query_count));
    MLLOG(&d, "effective_min_sample_count",
          json_integer(ops->counts_samples ? s->min_query_count : s->min_query_count * s->samples_per_query));
    MLLOG(&d, "effective_qsl_rng_seed", json_integer(0));
    MLLOG(&d, "effective_sample_index_rng_seed", u64_json(s->sample_seed));
    MLLOG(&d, "effective_schedule_rng_seed", u64_json(s->schedule_seed));
    MLLOG(&d, "effective_accuracy_log_rng_seed", json_integer(0));
    MLLOG(&d, "effective_accuracy_log_probability", json_real(0));
    MLLOG(&d, "effective_accuracy_log_sampling_target", json_integer(0));
    MLLOG(&d, "effective_print_timestamps", json_false());
    MLLOG(&d, "effective_performance_issue_unique", json_false());
    MLLOG(&d, "effective_performance_issue_same", json_false());
    MLLOG(&d, "effective_performance_issue_same_index", json_integer(0));
    MLLOG(&d, "effective_performance_sample_count", json_integer(s->sample_count));
    MLLOG(&d, "effective_accuracy_sample_count", json_integer(s->sample_count));
    MLLOG(&d, "effective_sample_concatenate_permutation", json_false());
    MLLOG(&d, "generic_message", json_string(s->mode == DLP_LG_ACCURACY ? "Starting accuracy mode"
                                                                           : "Starting performance mode"));
    MLLOG(&d, "generated_query_count", json_integer(r->queries_issued));
    MLLOG(&d, "generated_samples_per_query", json_integer(ops->counts_samples ? r->samples_issued : s->samples_per_query));
    d.time_ns = r->duration_ns > 0 ? r->duration_ns : 0;
    for (int i = 0; i < r->nwarnings; i++) mllog_at(&d, "warning_generic_message", json_string(r->warnings[i]), 1, __FILE__, __LINE__);

    // PerformanceSummary::LogDetail
    MLLOG(&d, "result_validity", json_string(r->valid ? "VALID" : "INVALID"));
    if (ops->perf_constraints) MLLOG(&d, "result_perf_constraints_met", json_boolean(r->perf_constraints_met));
    MLLOG(&d, "result_min_duration_met", json_boolean(r->min_duration_met));
    MLLOG(&d, "result_min_queries_met", json_boolean(r->min_queries_met));
    MLLOG(&d, "early_stopping_met", json_boolean(r->early_stopping_met));
    if (!r->valid) {
        char why[DLP_LG_MAX_REASONS * 202] = "";
        size_t n = 0;
        for (int i = 0; i < r->nreasons && n < sizeof why; i++)
            n += (size_t)snprintf(why + n, sizeof why - n, "%s%s", i ? " " : "", r->reasons[i]);
        MLLOG(&d, "result_invalid_reason", json_string(why));
    }
    char es[sizeof r->early_stopping_text];
    snprintf(es, sizeof es, "%s", r->early_stopping_text);
    for (char *c = es; *c; c++)
        if (*c == '\n') *c = ' ';  // LoadGen replaces the newlines
    MLLOG(&d, "early_stopping_result", json_string(es));
    MLLOG(&d, "result_query_count", json_integer(r->queries_issued));
    if (ops->perf_constraints) MLLOG(&d, "result_overlatency_query_count", json_integer(r->overlatency_count));
    if (ops->detail_keys) ops->detail_keys(&d, r);
    else MLLOG(&d, "dlperf_metric", json_pack("{s:s, s:f}", "name", r->metric_name ? r->metric_name : "",
                                              "value", r->metric_value));
    dlp_lg_detail_latency(&d, &r->sample_latency, "");
    MLLOG(&d, "num_errors", json_integer(0));
    // dlperf's own keys after LoadGen's.
    char line[1400];
    dlp_lg_result_line(r, line, sizeof line);
    MLLOG(&d, "dlperf_result_line", json_string(line));
    json_t *br = json_array();
    for (int i = 0; i < r->nbreaks; i++) json_array_append_new(br, json_string(r->breaks[i]));
    MLLOG(&d, "dlperf_mlperf_rules_broken", br);
    MLLOG(&d, "dlperf_samples", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "issued", (json_int_t)r->samples_issued,
                                          "ok", (json_int_t)r->samples_by_outcome[DLP_LG_OK],
                                          "rejected", (json_int_t)r->samples_by_outcome[DLP_LG_REJECTED],
                                          "timeout", (json_int_t)r->samples_by_outcome[DLP_LG_TIMEOUT],
                                          "error", (json_int_t)r->samples_by_outcome[DLP_LG_ERROR],
                                          "lost", (json_int_t)r->samples_lost));
    const char *k;
    json_t *v;
    if (extra) json_object_foreach(extra, k, v) MLLOG(&d, k, json_incref(v));
    if (d.err || ferror(f)) return DLP_ERR(DLP_ERR_IO, "cannot write the detail log");
    return DLP_OK;
}

dlp_status dlp_lg_accuracy_write(FILE *f, const dlp_lg_result *r) {
    static const char hex[] = "0123456789ABCDEF";
    fputs("[", f);
    for (int64_t i = 0; i < r->naccuracy; i++) {
        const dlp_lg_accuracy_entry *e = &r->accuracy[i];
        float cls = (float)e->top1;
        unsigned char b[4];
        memcpy(b, &cls, 4);  // little-endian on every machine dlperf builds for
        char data[9];
        for (int j = 0; j < 4; j++) data[2 * j] = hex[b[j] >> 4], data[2 * j + 1] = hex[b[j] & 15];
        data[8] = '\0';
        fprintf(f, "%s{ \"seq_id\" : %lld, \"qsl_idx\" : %u, \"data\" : \"%s\" }", i ? ",\n" : "\n",
                (long long)e->seq_id, e->qsl_idx, data);
    }
    fputs("\n]\n", f);
    if (ferror(f)) return DLP_ERR(DLP_ERR_IO, "cannot write the accuracy log");
    return DLP_OK;
}
