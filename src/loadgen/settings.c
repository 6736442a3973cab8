// loadgen/settings: default settings (the scenario's own from its table) and their checks.
#include <math.h>
#include <string.h>

#include "loadgen/scenario.h"

const char *dlp_lg_outcome_name(dlp_lg_outcome o) {
    static const char *const n[DLP_LG_OUTCOME_COUNT] = {"ok", "rejected", "timeout", "error"};
    return (unsigned)o < DLP_LG_OUTCOME_COUNT ? n[o] : "?";
}

void dlp_lg_settings_default(dlp_lg_settings *s, dlp_lg_scenario scenario) {
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(scenario);
    memset(s, 0, sizeof *s);
    s->scenario = scenario;
    s->target_qps = 10;
    s->target_latency_ns = 15 * 1000000LL;  // MLPerf's ResNet-50 Server bound
    s->target_latency_percentile = ops ? ops->default_percentile : 0.99;
    s->samples_per_query = ops ? ops->default_samples_per_query : 1;
    s->min_duration_ns = 10 * 1000000000LL;
    s->min_query_count = ops ? ops->default_min_query_count : 0;
    s->sample_count = 1024;  // MLPerf's performance_sample_count for ResNet-50
    s->schedule_seed = 18209322760996052031ULL;  // MLPerf's schedule_rng_seed
    s->sample_seed = 14771362308971278857ULL;    // MLPerf's sample_index_rng_seed
    s->early_stopping = 1;
    s->max_failed_fraction = 0;
    s->offline_batch = 0;
    s->idle_timeout_ns = 60 * 1000000000LL;
}

dlp_status dlp_lg_settings_check(const dlp_lg_settings *s) {
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (!ops) return DLP_ERR(DLP_ERR_INVALID, "unknown scenario");
    if (ops->uses_target_qps &&
        !(s->target_qps > 0 && isfinite(s->target_qps) && s->target_qps <= 1e7))
        return DLP_ERR(DLP_ERR_INVALID, "target QPS %g must be in (0, 1e7]", s->target_qps);
    if (s->target_latency_ns <= 0) return DLP_ERR(DLP_ERR_INVALID, "the latency bound must be > 0");
    if (!(s->target_latency_percentile > 0 && s->target_latency_percentile < 1))
        return DLP_ERR(DLP_ERR_INVALID, "latency percentile %g must be in (0, 1)", s->target_latency_percentile);
    if (s->samples_per_query < 1 || s->samples_per_query > 1 << 20)
        return DLP_ERR(DLP_ERR_INVALID, "samples per query %d must be in [1, 2^20]", s->samples_per_query);
    if (s->min_duration_ns < 0 || s->max_duration_ns < 0 || s->min_query_count < 0 || s->max_query_count < 0)
        return DLP_ERR(DLP_ERR_INVALID, "durations and query counts must be >= 0");
    if (s->min_query_count < 1 && s->min_duration_ns <= 0)
        return DLP_ERR(DLP_ERR_INVALID, "give a minimum duration or a minimum query count");
    if (s->sample_count < 1 || s->sample_count > ((int64_t)1 << 32) - 1)
        return DLP_ERR(DLP_ERR_INVALID, "the sample library size %lld must be in [1, 2^32)", (long long)s->sample_count);
    if (!(s->max_failed_fraction >= 0 && s->max_failed_fraction <= 1))
        return DLP_ERR(DLP_ERR_INVALID, "the allowed failed fraction must be in [0, 1]");
    if (s->offline_batch < 0) return DLP_ERR(DLP_ERR_INVALID, "the Offline batch must be >= 0");
    if (s->idle_timeout_ns <= 0) return DLP_ERR(DLP_ERR_INVALID, "the idle timeout must be > 0");
    return DLP_OK;
}
