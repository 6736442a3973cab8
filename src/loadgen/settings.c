// loadgen/settings: scenario names, default settings per scenario, and their checks.
#include <math.h>
#include <string.h>
#include <strings.h>

#include "loadgen/loadgen.h"

static const char *const k_scenario_names[DLP_LG_SCENARIO_COUNT] = {"SingleStream", "MultiStream", "Server",
                                                                      "Offline"};

const char *dlp_lg_scenario_name(dlp_lg_scenario s) {
    return (unsigned)s < DLP_LG_SCENARIO_COUNT ? k_scenario_names[s] : "?";
}

dlp_status dlp_lg_scenario_parse(const char *s, dlp_lg_scenario *out) {
    static const struct { const char *name; dlp_lg_scenario sc; } rows[] = {
        {"singlestream", DLP_LG_SINGLE_STREAM}, {"single", DLP_LG_SINGLE_STREAM}, {"ss", DLP_LG_SINGLE_STREAM},
        {"multistream", DLP_LG_MULTI_STREAM},   {"multi", DLP_LG_MULTI_STREAM},   {"ms", DLP_LG_MULTI_STREAM},
        {"server", DLP_LG_SERVER},              {"offline", DLP_LG_OFFLINE},
    };
    for (size_t i = 0; s && i < sizeof rows / sizeof rows[0]; i++)
        if (strcasecmp(s, rows[i].name) == 0) {
            *out = rows[i].sc;
            return DLP_OK;
        }
    return DLP_ERR(DLP_ERR_INVALID, "unknown scenario '%s' (use SingleStream, MultiStream, Server or Offline)",
                   s ? s : "");
}

const char *dlp_lg_outcome_name(dlp_lg_outcome o) {
    static const char *const n[DLP_LG_OUTCOME_COUNT] = {"ok", "rejected", "timeout", "error"};
    return (unsigned)o < DLP_LG_OUTCOME_COUNT ? n[o] : "?";
}

void dlp_lg_settings_default(dlp_lg_settings *s, dlp_lg_scenario scenario) {
    memset(s, 0, sizeof *s);
    s->scenario = scenario;
    s->target_qps = 10;
    s->target_latency_ns = 15 * 1000000LL;  // MLPerf's ResNet-50 Server bound
    s->target_latency_percentile = scenario == DLP_LG_SINGLE_STREAM ? 0.90 : 0.99;
    s->samples_per_query = scenario == DLP_LG_MULTI_STREAM ? 8 : 1;
    s->min_duration_ns = 10 * 1000000000LL;
    switch (scenario) {
    case DLP_LG_SINGLE_STREAM: s->min_query_count = 64; break;   // early stopping's least at p90
    case DLP_LG_MULTI_STREAM: s->min_query_count = 662; break;   // early stopping's least at p99 (= MLPerf's)
    case DLP_LG_SERVER: s->min_query_count = 500; break;         // > 459, the least at p99 with none late
    case DLP_LG_OFFLINE: s->min_query_count = 256; break;        // samples
    default: break;
    }
    s->sample_count = 1024;  // MLPerf's performance_sample_count for ResNet-50
    s->schedule_seed = 18209322760996052031ULL;  // MLPerf's schedule_rng_seed
    s->sample_seed = 14771362308971278857ULL;    // MLPerf's sample_index_rng_seed
    s->early_stopping = 1;
    s->max_failed_fraction = 0;
    s->offline_batch = 0;
    s->idle_timeout_ns = 60 * 1000000000LL;
}

dlp_status dlp_lg_settings_check(const dlp_lg_settings *s) {
    if ((unsigned)s->scenario >= DLP_LG_SCENARIO_COUNT) return DLP_ERR(DLP_ERR_INVALID, "unknown scenario");
    if ((s->scenario == DLP_LG_SERVER || s->scenario == DLP_LG_OFFLINE) &&
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
