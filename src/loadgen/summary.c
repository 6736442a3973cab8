// loadgen/summary: a run's result as text in the style of MLPerf's mlperf_log_summary.txt, and as JSON.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "loadgen/scenario.h"


void dlp_lg_text_printf(dlp_lg_text *b, const char *fmt, ...) {
    if (!b->p && b->cap == (size_t)-1) return;  // an earlier allocation failed
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (b->len + (size_t)n + 1 > nc) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            free(b->p);
            b->p = NULL;
            b->cap = (size_t)-1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static const char *yn(int v) { return v ? "Yes" : "NO"; }

void dlp_lg_text_latency(dlp_lg_text *b, const dlp_lg_latency *l) {
    dlp_lg_text_printf(b, "Min latency (ns)                : %lld\n", (long long)l->min_ns);
    dlp_lg_text_printf(b, "Max latency (ns)                : %lld\n", (long long)l->max_ns);
    dlp_lg_text_printf(b, "Mean latency (ns)               : %lld\n", (long long)l->mean_ns);
    dlp_lg_text_printf(b, "50.00 percentile latency (ns)   : %lld\n", (long long)l->p50_ns);
    dlp_lg_text_printf(b, "90.00 percentile latency (ns)   : %lld\n", (long long)l->p90_ns);
    dlp_lg_text_printf(b, "95.00 percentile latency (ns)   : %lld\n", (long long)l->p95_ns);
    dlp_lg_text_printf(b, "97.00 percentile latency (ns)   : %lld\n", (long long)l->p97_ns);
    dlp_lg_text_printf(b, "99.00 percentile latency (ns)   : %lld\n", (long long)l->p99_ns);
    dlp_lg_text_printf(b, "99.90 percentile latency (ns)   : %lld\n", (long long)l->p999_ns);
}

// The "Result is" word and, for a run VALID only under shortened settings, which MLPerf rules it breaks
// (a bare VALID means what it means in MLPerf: every official minimum was met too).
void dlp_lg_result_line(const dlp_lg_result *r, char *out, size_t cap) {
    if (!r->valid || r->nbreaks == 0) {
        snprintf(out, cap, "%s", r->valid ? "VALID" : "INVALID");
        return;
    }
    size_t n = (size_t)snprintf(out, cap, "VALID for these settings only, not under MLPerf's rules (");
    for (int i = 0; i < r->nbreaks && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "; " : "", r->breaks[i]);
    if (n < cap) snprintf(out + n, cap - n, "); --mlperf-rules runs the official minimums");
}

// mlperf_log_summary.txt as LoadGen writes it (loadgen/results.cc PerformanceSummary::LogSummary and
// test_settings_internal.cc TestSettingsInternal::LogSummary), then dlperf's own section at the end.
char *dlp_lg_summary_text(const dlp_lg_result *r) {
    const dlp_lg_settings *s = &r->settings;
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (!ops) return NULL;
    dlp_lg_text b = {0};
    const char *rule = "================================================\n";
    dlp_lg_text_printf(&b, "%sMLPerf Results Summary\n%s", rule, rule);
    dlp_lg_text_printf(&b, "SUT name : %s\n", r->sut_name);
    dlp_lg_text_printf(&b, "Scenario : %s\n", dlp_lg_scenario_name(s->scenario));
    dlp_lg_text_printf(&b, "Mode     : %s\n", dlp_lg_mode_name(s->mode));
    if (ops->metric_integer)  // LoadGen prints the percentile it used: "90.0th percentile latency (ns) : "
        dlp_lg_text_printf(&b, "%.1fth percentile latency (ns) : %lld\n", s->target_latency_percentile * 100,
                           (long long)r->metric_value);
    else
        dlp_lg_text_printf(&b, "%s%s%.2f\n", r->metric_name, ops->metric_sep, r->metric_value);
    char line[1400];
    dlp_lg_result_line(r, line, sizeof line);
    dlp_lg_text_printf(&b, "Result is : %s\n", line);
    if (ops->perf_constraints)
        dlp_lg_text_printf(&b, "  Performance constraints satisfied : %s\n", yn(r->perf_constraints_met));
    dlp_lg_text_printf(&b, "  Min duration satisfied : %s\n", yn(r->min_duration_met));
    dlp_lg_text_printf(&b, "  Min queries satisfied : %s\n", yn(r->min_queries_met));
    dlp_lg_text_printf(&b, "  Early stopping satisfied: %s\n", yn(r->early_stopping_met));
    if (!r->valid) {
        dlp_lg_text_printf(&b, "Recommendations:\n");
        for (int i = 0; i < r->nreasons; i++) dlp_lg_text_printf(&b, " * %s\n", r->reasons[i]);
    }
    if (ops->early_stopping && s->mode == DLP_LG_PERFORMANCE)
        dlp_lg_text_printf(&b, "Early Stopping Result:\n%s\n",
                           s->early_stopping && r->early_stopping_text[0] ? r->early_stopping_text
                                                                           : " * Early stopping was off.");

    dlp_lg_text_printf(&b, "\n%sAdditional Stats\n%s", rule, rule);
    if (ops->summary_stats) ops->summary_stats(&b, r);
    if (ops->per_query) {  // MultiStream: LoadGen shows the per-query block only
        dlp_lg_text_printf(&b, "Per-query latency:  \n");
        dlp_lg_text_latency(&b, &r->query_latency);
    } else {
        dlp_lg_text_latency(&b, &r->sample_latency);
    }

    dlp_lg_text_printf(&b, "\n%sTest Parameters Used\n%s", rule, rule);
    dlp_lg_text_printf(&b, "samples_per_query : %d\n", s->samples_per_query);
    dlp_lg_text_printf(&b, "target_qps : %g\n", s->target_qps);
    dlp_lg_text_printf(&b, "target_latency (ns): %lld\n", (long long)s->target_latency_ns);
    dlp_lg_text_printf(&b, "max_async_queries : 0\n");
    dlp_lg_text_printf(&b, "min_duration (ms): %lld\n", (long long)(s->min_duration_ns / 1000000));
    dlp_lg_text_printf(&b, "max_duration (ms): %lld\n", (long long)(s->max_duration_ns / 1000000));
    dlp_lg_text_printf(&b, "min_query_count : %lld\n", (long long)s->min_query_count);
    dlp_lg_text_printf(&b, "max_query_count : %lld\n", (long long)s->max_query_count);
    dlp_lg_text_printf(&b, "qsl_rng_seed : 0\n");
    dlp_lg_text_printf(&b, "sample_index_rng_seed : %llu\n", (unsigned long long)s->sample_seed);
    dlp_lg_text_printf(&b, "schedule_rng_seed : %llu\n", (unsigned long long)s->schedule_seed);
    dlp_lg_text_printf(&b, "accuracy_log_rng_seed : 0\n");
    dlp_lg_text_printf(&b, "accuracy_log_probability : 0\n");
    dlp_lg_text_printf(&b, "accuracy_log_sampling_target : 0\n");
    dlp_lg_text_printf(&b, "print_timestamps : 0\n");
    dlp_lg_text_printf(&b, "performance_issue_unique : 0\n");
    dlp_lg_text_printf(&b, "performance_issue_same : 0\n");
    dlp_lg_text_printf(&b, "performance_issue_same_index : 0\n");
    dlp_lg_text_printf(&b, "performance_sample_count : %lld\n", (long long)s->sample_count);
    dlp_lg_text_printf(&b, "accuracy_sample_count : %lld\n", (long long)s->sample_count);
    dlp_lg_text_printf(&b, "\n");
    if (r->nwarnings == 0) dlp_lg_text_printf(&b, "No warnings encountered during test.\n");
    else dlp_lg_text_printf(&b, "%d warning%s encountered. See detailed log.\n", r->nwarnings, r->nwarnings > 1 ? "s" : "");
    dlp_lg_text_printf(&b, "\nNo errors encountered during test.\n");

    // dlperf's own figures, after everything LoadGen writes (tools that parse the summary stop before).
    dlp_lg_text_printf(&b, "\n%sdlperf Additional Stats\n%s", rule, rule);
    if (ops->per_query) {
        dlp_lg_text_printf(&b, "Per-sample latency:  \n");
        dlp_lg_text_latency(&b, &r->sample_latency);
    }
    dlp_lg_text_printf(&b, "Every sample answered           : %s\n", yn(r->none_lost));
    dlp_lg_text_printf(&b, "Queries issued                  : %lld\n", (long long)r->queries_issued);
    dlp_lg_text_printf(&b, "Samples issued                  : %lld\n", (long long)r->samples_issued);
    dlp_lg_text_printf(&b, "Samples answered ok             : %lld\n", (long long)r->samples_by_outcome[DLP_LG_OK]);
    dlp_lg_text_printf(&b, "Samples rejected (503)          : %lld\n",
                       (long long)r->samples_by_outcome[DLP_LG_REJECTED]);
    dlp_lg_text_printf(&b, "Samples timed out               : %lld\n",
                       (long long)r->samples_by_outcome[DLP_LG_TIMEOUT]);
    dlp_lg_text_printf(&b, "Samples failed (errors)         : %lld\n", (long long)r->samples_by_outcome[DLP_LG_ERROR]);
    dlp_lg_text_printf(&b, "Samples lost (never answered)   : %lld\n", (long long)r->samples_lost);
    if (ops->perf_constraints)
        dlp_lg_text_printf(&b, "Samples over the latency bound  : %lld\n", (long long)r->overlatency_count);
    dlp_lg_text_printf(&b, "Duration (ns)                   : %lld\n", (long long)r->duration_ns);
    dlp_lg_text_printf(&b, "Issue lag p99 / max (ns)        : %lld / %lld\n", (long long)r->issue_lag.p99_ns,
                       (long long)r->issue_lag.max_ns);
    dlp_lg_text_printf(&b, "Stopped issuing because         : %s\n", r->stop_reason);
    dlp_lg_text_printf(&b, "target_latency_percentile : %g\n", s->target_latency_percentile * 100);
    dlp_lg_text_printf(&b, "early_stopping : %d\n", s->early_stopping);
    dlp_lg_text_printf(&b, "max_failed_fraction : %g\n", s->max_failed_fraction);
    if (ops->summary_settings) ops->summary_settings(&b, s);
    dlp_lg_text_printf(&b, "idle_timeout (ms): %lld\n", (long long)(s->idle_timeout_ns / 1000000));
    for (int i = 0; i < r->nwarnings; i++) dlp_lg_text_printf(&b, "Warning: %s\n", r->warnings[i]);
    return b.p;
}

static json_t *latency_json(const dlp_lg_latency *l) {
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer(l->count));
    json_object_set_new(o, "min", json_real(dlp_ns_to_ms(l->min_ns)));
    json_object_set_new(o, "mean", json_real(dlp_ns_to_ms(l->mean_ns)));
    json_object_set_new(o, "p50", json_real(dlp_ns_to_ms(l->p50_ns)));
    json_object_set_new(o, "p90", json_real(dlp_ns_to_ms(l->p90_ns)));
    json_object_set_new(o, "p95", json_real(dlp_ns_to_ms(l->p95_ns)));
    json_object_set_new(o, "p97", json_real(dlp_ns_to_ms(l->p97_ns)));
    json_object_set_new(o, "p99", json_real(dlp_ns_to_ms(l->p99_ns)));
    json_object_set_new(o, "p99.9", json_real(dlp_ns_to_ms(l->p999_ns)));
    json_object_set_new(o, "max", json_real(dlp_ns_to_ms(l->max_ns)));
    return o;
}

json_t *dlp_lg_settings_to_json(const dlp_lg_settings *s) {
    json_t *o = json_object();
    json_object_set_new(o, "scenario", json_string(dlp_lg_scenario_name(s->scenario)));
    json_object_set_new(o, "target_qps", json_real(s->target_qps));
    json_object_set_new(o, "target_latency_ms", json_real(dlp_ns_to_ms(s->target_latency_ns)));
    json_object_set_new(o, "target_latency_percentile", json_real(s->target_latency_percentile));
    json_object_set_new(o, "samples_per_query", json_integer(s->samples_per_query));
    json_object_set_new(o, "min_duration_s", json_real(dlp_ns_to_s(s->min_duration_ns)));
    json_object_set_new(o, "max_duration_s", json_real(dlp_ns_to_s(s->max_duration_ns)));
    json_object_set_new(o, "min_query_count", json_integer(s->min_query_count));
    json_object_set_new(o, "max_query_count", json_integer(s->max_query_count));
    json_object_set_new(o, "performance_sample_count", json_integer(s->sample_count));
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->schedule_seed);
    json_object_set_new(o, "schedule_seed", json_string(seed));  // strings: JSON integers are signed 64-bit
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->sample_seed);
    json_object_set_new(o, "sample_seed", json_string(seed));
    json_object_set_new(o, "early_stopping", json_boolean(s->early_stopping));
    json_object_set_new(o, "max_failed_fraction", json_real(s->max_failed_fraction));
    json_object_set_new(o, "offline_batch", json_integer(s->offline_batch));
    json_object_set_new(o, "idle_timeout_s", json_real(dlp_ns_to_s(s->idle_timeout_ns)));
    return o;
}

json_t *dlp_lg_result_to_json(const dlp_lg_result *r) {
    const dlp_lg_settings *s = &r->settings;
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    json_t *o = json_object();
    json_object_set_new(o, "scenario", json_string(dlp_lg_scenario_name(s->scenario)));
    json_object_set_new(o, "mode", json_string(dlp_lg_mode_name(s->mode)));
    json_object_set_new(o, "sut", json_string(r->sut_name));
    json_object_set_new(o, "valid", json_boolean(r->valid));
    json_t *reasons = json_array();
    for (int i = 0; i < r->nreasons; i++) json_array_append_new(reasons, json_string(r->reasons[i]));
    json_object_set_new(o, "reasons", reasons);
    json_t *warn = json_array();
    for (int i = 0; i < r->nwarnings; i++) json_array_append_new(warn, json_string(r->warnings[i]));
    json_object_set_new(o, "warnings", warn);
    json_t *br = json_array();
    for (int i = 0; i < r->nbreaks; i++) json_array_append_new(br, json_string(r->breaks[i]));
    json_object_set_new(o, "mlperf_rules_broken", br);
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(r->metric_name ? r->metric_name : ""));
    json_object_set_new(m, "value", json_real(r->metric_value));
    json_object_set_new(o, "metric", m);
    json_t *c = json_object();
    json_object_set_new(c, "performance_constraints", json_boolean(r->perf_constraints_met));
    json_object_set_new(c, "min_duration", json_boolean(r->min_duration_met));
    json_object_set_new(c, "min_queries", json_boolean(r->min_queries_met));
    json_object_set_new(c, "early_stopping", s->early_stopping ? json_boolean(r->early_stopping_met) : json_null());
    json_object_set_new(c, "none_lost", json_boolean(r->none_lost));
    json_object_set_new(o, "constraints_met", c);
    json_object_set_new(o, "early_stopping_result", json_string(r->early_stopping_text));
    if (r->es_estimate_ns > 0 && r->es_estimate_ns != INT64_MAX)
        json_object_set_new(o, "early_stopping_estimate_ms", json_real(dlp_ns_to_ms(r->es_estimate_ns)));
    json_object_set_new(o, "target_percentile_latency_ms",
                        r->target_percentile_ns == INT64_MAX ? json_null()
                                                             : json_real(dlp_ns_to_ms(r->target_percentile_ns)));
    json_object_set_new(o, "queries_issued", json_integer(r->queries_issued));
    json_t *smp = json_object();
    json_object_set_new(smp, "issued", json_integer(r->samples_issued));
    for (int k = 0; k < DLP_LG_OUTCOME_COUNT; k++)
        json_object_set_new(smp, dlp_lg_outcome_name((dlp_lg_outcome)k), json_integer(r->samples_by_outcome[k]));
    json_object_set_new(smp, "lost", json_integer(r->samples_lost));
    json_object_set_new(smp, "duplicate_responses", json_integer(r->duplicate_responses));
    json_object_set_new(smp, "over_latency_bound", json_integer(r->overlatency_count));
    json_object_set_new(o, "samples", smp);
    json_object_set_new(o, "duration_s", json_real(dlp_ns_to_s(r->duration_ns)));
    json_object_set_new(o, "scheduled_samples_per_s", json_real(r->scheduled_samples_per_s));
    json_object_set_new(o, "completed_samples_per_s", json_real(r->completed_samples_per_s));
    if (ops && ops->result_json) ops->result_json(o, r);
    json_object_set_new(o, "latency_ms", latency_json(&r->sample_latency));
    if (ops && ops->per_query) json_object_set_new(o, "query_latency_ms", latency_json(&r->query_latency));
    json_object_set_new(o, "issue_lag_ms", latency_json(&r->issue_lag));
    json_object_set_new(o, "stop_reason", json_string(r->stop_reason));
    json_object_set_new(o, "settings", dlp_lg_settings_to_json(s));
    if (r->sut_stats) json_object_set(o, "sut_stats", r->sut_stats);
    return o;
}

json_t *dlp_lg_search_to_json(const dlp_lg_search_result *r) {
    json_t *o = json_object();
    json_object_set_new(o, "found", json_boolean(r->found));
    json_object_set_new(o, "converged", json_boolean(r->converged));
    json_object_set_new(o, "best_qps", r->found ? json_real(r->best_qps) : json_null());
    json_object_set_new(o, "lowest_invalid_qps", r->hi_qps > 0 ? json_real(r->hi_qps) : json_null());
    json_object_set_new(o, "stop_reason", json_string(r->stop_reason));
    json_t *tr = json_array();
    for (int i = 0; i < r->ntrials; i++) {
        const dlp_lg_trial *t = &r->trials[i];
        json_t *j = json_object();
        json_object_set_new(j, "target_qps", json_real(t->target_qps));
        json_object_set_new(j, "valid", json_boolean(t->valid));
        json_object_set_new(j, "p99_ms", t->p99_ns == INT64_MAX ? json_null() : json_real(dlp_ns_to_ms(t->p99_ns)));
        json_object_set_new(j, "completed_samples_per_s", json_real(t->completed_samples_per_s));
        json_object_set_new(j, "failed", json_integer(t->failed));
        json_object_set_new(j, "duration_s", json_real(dlp_ns_to_s(t->duration_ns)));
        if (!t->valid) json_object_set_new(j, "reason", json_string(t->reason));
        json_array_append_new(tr, j);
    }
    json_object_set_new(o, "trials", tr);
    return o;
}
