// loadgen/scenario_multi: MLPerf's MultiStream — queries of samples_per_query (8) samples back to back, the next
// issued when the previous one is wholly answered; its latency, constraint and metric are the whole query's
// (the 99th percentile), with early stopping's estimate.
#include "loadgen/scenario.h"

static void multi_measure(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    dlp_lg_latency_metric(t, s, 0.99, "99th percentile latency (ns)", o);
}

// LoadGen's MultiStream result keys: the per-query latency block and the early-stopping estimate (-1: none).
static void multi_detail_keys(dlp_lg_detail_log *d, const dlp_lg_result *r) {
    dlp_lg_detail_latency(d, &r->query_latency, "query_");
    dlp_lg_detail_key(d, "early_stopping_latency_ms", json_integer(r->es_estimate_ns == INT64_MAX ? -1 : r->es_estimate_ns));
}

static const char *const multi_aliases[] = {"multistream", "multi", "ms", NULL};

const dlp_lg_scenario_ops dlp_lg_scenario_multi = {
    .name = "MultiStream",
    .aliases = multi_aliases,
    .default_percentile = 0.99,
    .default_samples_per_query = 8,
    .default_min_query_count = 662,  // early stopping's least at p99 (= MLPerf's)
    .issue = dlp_lg_issue_back_to_back,
    .per_query = 1,
    .sized_queries = 1,
    .min_duration_span = DLP_LG_SPAN_ISSUING,
    .mlperf = {.min_query_count = 662, .percentile = 0.99, .percentile_checked = 1, .samples_per_query = 8},
    .early_stopping = dlp_lg_es_percentile_rule,
    .measure = multi_measure,
    .metric_integer = 1,
    .metric_sep = " : ",
    .detail_keys = multi_detail_keys,
};
