// loadgen/scenario_offline: MLPerf's Offline — every sample issued at once (or in queries of offline_batch),
// enough for min_duration at the expected target_qps; the metric is samples per second, no latency rule.
#include <math.h>
#include <stdio.h>

#include "core/clock.h"
#include "loadgen/scenario.h"

// How many samples an Offline run issues: enough for min_duration at the expected rate (x1.1, as MLPerf),
// at least min_query_count.
static int64_t offline_samples(const dlp_lg_settings *s) {
    double want = ceil(s->target_qps * dlp_ns_to_s(s->min_duration_ns) * 1.1 - 1e-6);  // 1e-6: float noise
    int64_t n = want > 1e12 ? (int64_t)1e12 : (int64_t)want;
    if (n < s->min_query_count) n = s->min_query_count;
    if (s->max_query_count > 0 && n > s->max_query_count) n = s->max_query_count;
    if (n < 1) n = 1;
    if (n > DLP_LG_MAX_RECORDS / 2) n = DLP_LG_MAX_RECORDS / 2;
    return n;
}

static dlp_status offline_issue(dlp_lg_issuer *is, const dlp_lg_settings *s, dlp_lg_result *o) {
    int64_t total = offline_samples(s);
    int64_t per = s->offline_batch > 0 ? s->offline_batch : total;
    int64_t t0 = dlp_lg_issuer_start(is);
    dlp_sleep_until_ns(t0);
    dlp_status st = DLP_OK;
    for (int64_t k = 0; k < total && st == DLP_OK; k += per)
        st = dlp_lg_issue(is, t0, (int32_t)(total - k < per ? total - k : per));
    // Offline issues one (coalesced) query sized up front: if it is answered before min_duration, LoadGen's
    // advice applies (raise the expected QPS).
    snprintf(o->stop_reason, sizeof o->stop_reason, "%lld samples issued at once, sized by --qps %g; a higher --qps "
             "fills min duration", (long long)total, s->target_qps);
    return st;
}

static void offline_measure(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    o->metric_name = "Samples per second";
    o->metric_value = t->duration_s > 0 ? (double)o->samples_by_outcome[DLP_LG_OK] / t->duration_s : 0;
}

static void offline_summary_settings(dlp_lg_text *b, const dlp_lg_settings *s) {
    dlp_lg_text_printf(b, "offline_batch : %d\n", s->offline_batch);
}

static void offline_detail_keys(dlp_lg_detail_log *d, const dlp_lg_result *r) {
    dlp_lg_detail_key(d, "result_samples_per_second", json_real(r->metric_value));
}

static const char *const offline_aliases[] = {"offline", NULL};

const dlp_lg_scenario_ops dlp_lg_scenario_offline = {
    .name = "Offline",
    .aliases = offline_aliases,
    .default_percentile = 0.99,
    .default_samples_per_query = 1,
    .default_min_query_count = 256,  // samples
    .uses_target_qps = 1,
    .issue = offline_issue,
    .min_duration_span = DLP_LG_SPAN_RUN,
    .counts_samples = 1,
    .mlperf = {.min_query_count = 24576, .percentile = 0.99},  // samples; no latency rule
    .measure = offline_measure,
    .metric_integer = 0,
    .metric_sep = ": ",  // MLPerf's summary has no space before this one's colon
    .summary_settings = offline_summary_settings,
    .detail_keys = offline_detail_keys,
};
