// loadgen/settings: default settings (the scenario's own from its table) and their checks.
#include <math.h>
#include <stdio.h>
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
    if (s->mode != DLP_LG_PERFORMANCE && s->mode != DLP_LG_ACCURACY) return DLP_ERR(DLP_ERR_INVALID, "unknown mode");
    return DLP_OK;
}

const char *dlp_lg_mode_name(dlp_lg_mode m) {
    return m == DLP_LG_ACCURACY ? "AccuracyOnly" : m == DLP_LG_PERFORMANCE ? "PerformanceOnly" : "?";
}

// MLPerf's numbers for ResNet-50 common to every scenario (loadgen/mlperf.conf); each scenario's own are in its
// table (dlp_lg_scenario_ops.mlperf).
#define MLPERF_MIN_DURATION_NS (600 * 1000000000LL)
#define MLPERF_SAMPLE_COUNT 1024

static int64_t mlperf_min_queries(const dlp_lg_mlperf_rules *m) {
    return m->min_query_count > 0 ? m->min_query_count : 100;  // test_settings.h's min_query_count default
}

static double mlperf_percentile(const dlp_lg_mlperf_rules *m) { return m->percentile > 0 ? m->percentile : 0.99; }

void dlp_lg_settings_mlperf(dlp_lg_settings *s) {
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (!ops) return;
    const dlp_lg_mlperf_rules *m = &ops->mlperf;
    if (s->min_duration_ns < MLPERF_MIN_DURATION_NS) s->min_duration_ns = MLPERF_MIN_DURATION_NS;
    if (s->min_query_count < mlperf_min_queries(m)) s->min_query_count = mlperf_min_queries(m);
    s->target_latency_percentile = mlperf_percentile(m);
    if (m->samples_per_query > 0) s->samples_per_query = m->samples_per_query;
    if (m->max_latency_ns > 0 && s->target_latency_ns > m->max_latency_ns) s->target_latency_ns = m->max_latency_ns;
    s->early_stopping = 1;
    s->max_failed_fraction = 0;
    s->max_duration_ns = 0;
    s->max_query_count = 0;
}

int dlp_lg_settings_mlperf_breaks(const dlp_lg_settings *s, char (*lines)[160], int max) {
    int n = 0;
#define BREAK(...)                                                  \
    do {                                                            \
        if (n < max) snprintf(lines[n], sizeof lines[0], __VA_ARGS__); \
        n++;                                                        \
    } while (0)
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (s->mode == DLP_LG_ACCURACY || !ops) return 0;  // no timing rules in an accuracy run
    const dlp_lg_mlperf_rules *m = &ops->mlperf;
    if (s->min_duration_ns < MLPERF_MIN_DURATION_NS)
        BREAK("min_duration %lld ms < %lld ms", (long long)(s->min_duration_ns / 1000000),
              (long long)(MLPERF_MIN_DURATION_NS / 1000000));
    int64_t mq = mlperf_min_queries(m);
    if (s->min_query_count < mq)
        BREAK("min_query_count %lld < %lld%s", (long long)s->min_query_count, (long long)mq,
              ops->counts_samples ? " samples" : "");
    if (s->sample_count < MLPERF_SAMPLE_COUNT)
        BREAK("performance_sample_count %lld < %d", (long long)s->sample_count, MLPERF_SAMPLE_COUNT);
    if (m->percentile_checked && fabs(s->target_latency_percentile - mlperf_percentile(m)) > 1e-9)
        BREAK("target_latency_percentile %g != %g", s->target_latency_percentile * 100, mlperf_percentile(m) * 100);
    if (m->samples_per_query > 0 && s->samples_per_query != m->samples_per_query)
        BREAK("samples_per_query %d != %d", s->samples_per_query, m->samples_per_query);
    if (m->max_latency_ns > 0 && s->target_latency_ns > m->max_latency_ns)
        BREAK("target_latency %.3f ms > %.0f ms (ResNet-50 %s)", s->target_latency_ns / 1e6, m->max_latency_ns / 1e6,
              ops->name);
    if (!s->early_stopping) BREAK("early stopping off");
    if (s->max_failed_fraction > 0) BREAK("max_failed_fraction %g > 0", s->max_failed_fraction);
    if (s->max_duration_ns > 0 && s->max_duration_ns < MLPERF_MIN_DURATION_NS)
        BREAK("max_duration %lld ms < min_duration %lld ms", (long long)(s->max_duration_ns / 1000000),
              (long long)(MLPERF_MIN_DURATION_NS / 1000000));
#undef BREAK
    return n;
}
