// loadgen/scenario_single: MLPerf's SingleStream — one query of one sample at a time, the next issued when the
// previous one is answered; the metric is the 90th-percentile latency, with early stopping's estimate.

#include "core/clock.h"
#include "loadgen/scenario.h"

// MLPerf's two QPS figures: queries over the issuing span, and 1 / mean latency.
static void single_measure(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    if (o->last_issued_ns > 0) o->qps_with_overhead = (double)(t->nq - 1) / dlp_ns_to_s(o->last_issued_ns);
    if (o->sample_latency.mean_ns > 0) o->qps_without_overhead = 1e9 / (double)o->sample_latency.mean_ns;
    dlp_lg_latency_metric(t, s, 0.90, "90th percentile latency (ns)", o);
}

static void single_summary_stats(dlp_lg_text *b, const dlp_lg_result *r) {
    dlp_lg_text_printf(b, "QPS w/ loadgen overhead         : %.2f\n", r->qps_with_overhead);
    dlp_lg_text_printf(b, "QPS w/o loadgen overhead        : %.2f\n\n", r->qps_without_overhead);
}

static void single_result_json(json_t *o, const dlp_lg_result *r) {
    json_object_set_new(o, "qps_with_loadgen_overhead", json_real(r->qps_with_overhead));
    json_object_set_new(o, "qps_without_loadgen_overhead", json_real(r->qps_without_overhead));
}

// LoadGen's SingleStream result keys (the early-stopping estimate under both of its names; -1: none).
static void single_detail_keys(dlp_lg_detail_log *d, const dlp_lg_result *r) {
    int64_t es_ns = r->es_estimate_ns == INT64_MAX ? -1 : r->es_estimate_ns;
    dlp_lg_detail_key(d, "result_qps_with_loadgen_overhead", json_real(r->qps_with_overhead));
    dlp_lg_detail_key(d, "result_qps_without_loadgen_overhead", json_real(r->qps_without_overhead));
    dlp_lg_detail_key(d, "early_stopping_latency_ss", json_integer(es_ns));
    dlp_lg_detail_key(d, "early_stopping_latency_ms", json_integer(es_ns));
}

static const char *const single_aliases[] = {"singlestream", "single", "ss", NULL};

const dlp_lg_scenario_ops dlp_lg_scenario_single = {
    .name = "SingleStream",
    .aliases = single_aliases,
    .default_percentile = 0.90,
    .default_samples_per_query = 1,
    .default_min_query_count = 64,  // early stopping's least at p90
    .issue = dlp_lg_issue_back_to_back,
    .min_duration_span = DLP_LG_SPAN_ISSUING,
    .mlperf = {.min_query_count = 100, .percentile = 0.90, .percentile_checked = 1},
    .early_stopping = dlp_lg_es_percentile_rule,
    .measure = single_measure,
    .metric_integer = 1,
    .metric_sep = " : ",
    .summary_stats = single_summary_stats,
    .result_json = single_result_json,
    .detail_keys = single_detail_keys,
};
