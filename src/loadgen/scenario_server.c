// loadgen/scenario_server: MLPerf's Server — one-sample queries at Poisson arrivals of target_qps, each issued
// at its scheduled time whether or not earlier ones were answered; VALID when the target percentile (99th) of
// latency is within target_latency, with early stopping's count of samples over the bound. The metric is the
// scheduled samples per second; dlp_lg_search looks for the highest VALID target_qps.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/rng.h"
#include "loadgen/scenario.h"

// The Server schedule: arrivals until both minimums are met (capped by the maximums). *n_out queries.
static dlp_status server_schedule(const dlp_lg_settings *s, int64_t **t_out, int64_t *n_out) {
    int64_t cap = 1024, n = 0;
    int64_t *t = malloc((size_t)cap * sizeof *t);
    DLP_TRY_ALLOC(t);
    dlp_rng rng;
    dlp_rng_init(&rng, s->schedule_seed, 0x5c4ed01e);
    double acc = 0;
    for (;;) {
        int64_t ti = (int64_t)llround(acc * 1e9);
        int enough = n >= s->min_query_count && n > 0 && t[n - 1] >= s->min_duration_ns;
        if (enough) break;
        if (s->max_query_count > 0 && n >= s->max_query_count) break;
        if (s->max_duration_ns > 0 && ti > s->max_duration_ns) break;
        if (n >= DLP_LG_MAX_RECORDS) break;
        if (n == cap) {
            int64_t *nt = realloc(t, (size_t)cap * 2 * sizeof *t);
            if (!nt) {
                free(t);
                return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the Server schedule");
            }
            t = nt;
            cap *= 2;
        }
        t[n++] = ti;
        acc += -log1p(-dlp_rng_uniform(&rng)) / s->target_qps;
    }
    *t_out = t;
    *n_out = n;
    return DLP_OK;
}

static dlp_status server_issue(dlp_lg_issuer *is, const dlp_lg_settings *s, dlp_lg_result *o) {
    int64_t *sched = NULL, nsched = 0;
    DLP_CHECK(server_schedule(s, &sched, &nsched));
    int64_t t0 = dlp_lg_issuer_start(is);  // after building the schedule, so the first arrival is on time
    dlp_status st = DLP_OK;
    for (int64_t i = 0; i < nsched && st == DLP_OK; i++) {
        dlp_sleep_until_ns(t0 + sched[i]);
        st = dlp_lg_issue(is, t0 + sched[i], 1);
    }
    if (s->max_query_count > 0 && nsched >= s->max_query_count)
        snprintf(o->stop_reason, sizeof o->stop_reason, "max query count %lld reached", (long long)s->max_query_count);
    else if (s->max_duration_ns > 0 && nsched > 0 && sched[nsched - 1] < s->min_duration_ns)
        snprintf(o->stop_reason, sizeof o->stop_reason, "max duration %.3f s reached", dlp_ns_to_s(s->max_duration_ns));
    free(sched);
    return st;
}

// The latency bound at the target percentile (failed and lost samples counted as infinitely late), and a
// warning when the loadgen itself issued late.
static void server_perf_constraints(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    double p = s->target_latency_percentile;
    if (o->target_percentile_ns > s->target_latency_ns) {
        o->perf_constraints_met = 0;
        if (o->target_percentile_ns == INT64_MAX)
            dlp_lg_add_reason(o, "%.1fth percentile latency is unbounded: %lld of %lld samples failed or were lost; "
                              "reduce the target QPS", p * 100, (long long)(t->failed + o->samples_lost),
                              (long long)t->ns);
        else
            dlp_lg_add_reason(o, "%.1fth percentile latency %.3f ms exceeds the bound %.3f ms (%lld of %lld samples "
                              "late); reduce the target QPS to improve latency", p * 100,
                              dlp_ns_to_ms(o->target_percentile_ns), dlp_ns_to_ms(s->target_latency_ns),
                              (long long)t->over, (long long)t->ns);
    }
    if (o->issue_lag.p99_ns > s->target_latency_ns / 10)
        dlp_lg_add_warning(o, "the loadgen issued late (p99 %.3f ms, max %.3f ms behind schedule): the machine is "
                           "overloaded; the lateness is counted in the latencies", dlp_ns_to_ms(o->issue_lag.p99_ns),
                           dlp_ns_to_ms(o->issue_lag.max_ns));
}

// MLPerf's Server early stopping: enough samples that, with those over the bound, the target percentile is
// under it with 99% confidence.
static void server_early_stopping(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    double p = s->target_latency_percentile;
    int64_t ns = t->ns, over = t->over;
    int64_t h = dlp_lg_es_min_passing(over, p, 0.99);
    if (ns >= h + over) {
        snprintf(o->early_stopping_text, sizeof o->early_stopping_text, " * Run successful.");
        return;
    }
    o->early_stopping_met = 0;
    snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
             " * Run unsuccessful.\n * Processed %lld queries.\n * Would need to run at least %lld more "
             "queries,\n with the run being successful if every additional\n query were under latency.",
             (long long)ns, (long long)(h + over - ns));
    dlp_lg_add_reason(o, "early stopping: %lld queries with %lld over the bound cannot show the %.1fth "
                      "percentile is under it with 99%% confidence; run at least %lld more queries",
                      (long long)ns, (long long)over, p * 100, (long long)(h + over - ns));
}

static void server_measure(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    if (o->last_scheduled_ns > 0) o->scheduled_samples_per_s = (double)(t->ns - 1) / dlp_ns_to_s(o->last_scheduled_ns);
    o->metric_name = "Completed samples per second";  // LoadGen's Server metric (results.cc)
    o->metric_value = o->completed_samples_per_s;
}

static void server_summary_stats(dlp_lg_text *b, const dlp_lg_result *r) {
    dlp_lg_text_printf(b, "Scheduled samples per second : %.2f\n", r->scheduled_samples_per_s);
}

static void server_detail_keys(dlp_lg_detail_log *d, const dlp_lg_result *r) {
    dlp_lg_detail_key(d, "result_scheduled_samples_per_sec", json_real(r->scheduled_samples_per_s));
    dlp_lg_detail_key(d, "result_completed_samples_per_sec", json_real(r->completed_samples_per_s));
}

static const char *const server_aliases[] = {"server", NULL};

const dlp_lg_scenario_ops dlp_lg_scenario_server = {
    .name = "Server",
    .aliases = server_aliases,
    .default_percentile = 0.99,
    .default_samples_per_query = 1,
    .default_min_query_count = 500,  // > 459, the least at p99 with none late
    .uses_target_qps = 1,
    .searchable = 1,
    .issue = server_issue,
    .min_duration_span = DLP_LG_SPAN_SCHEDULE,
    .mlperf = {.min_query_count = 100, .percentile = 0.99, .percentile_checked = 1,
               .max_latency_ns = 15 * 1000000LL},  // ResNet-50's Server bound
    .perf_constraints = server_perf_constraints,
    .early_stopping = server_early_stopping,
    .measure = server_measure,
    .metric_integer = 0,
    .metric_sep = "    : ",
    .summary_stats = server_summary_stats,
    .detail_keys = server_detail_keys,
};
