// loadgen/scenario_multi: MLPerf's MultiStream — queries of samples_per_query (8) samples back to back, the next
// issued when the previous one is wholly answered; its latency, constraint and metric are the whole query's
// (the 99th percentile), with early stopping's estimate.
#include "loadgen/scenario.h"

static void multi_measure(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    dlp_lg_latency_metric(t, s, 0.99, "99th percentile latency (ns)", o);
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
    .min_duration_span = DLP_LG_SPAN_ISSUING,
    .early_stopping = dlp_lg_es_percentile_rule,
    .measure = multi_measure,
    .metric_integer = 1,
    .metric_sep = " : ",
};
