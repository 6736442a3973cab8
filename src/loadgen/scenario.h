// loadgen/scenario: what makes a LoadGen scenario — the table each scenario file fills in, and the harness's
// helpers it may call (private to loadgen/).
// Defines: dlp_lg_scenario_ops, dlp_lg_span, dlp_lg_tally, dlp_lg_issuer (dlp_lg_issuer_start, dlp_lg_issue,
//          dlp_lg_wait_answered, dlp_lg_issue_back_to_back, ...), dlp_lg_add_reason/warning,
//          dlp_lg_es_percentile_rule, dlp_lg_latency_metric, dlp_lg_text (summary lines), dlp_lg_mlperf_rules,
//          dlp_lg_detail_key/dlp_lg_detail_latency (the detail log's lines), the registry's
//          dlp_lg_scenario_ops_of and dlp_lg_scenario_count, DLP_LG_MAX_RECORDS.
//
// To add a scenario: write src/loadgen/scenario_<x>.c defining `const dlp_lg_scenario_ops dlp_lg_scenario_<x>`
// (its name, defaults, issue loop, validity rules, MLPerf's minimums, metric, summary lines, detail-log keys; copy the nearest of scenario_single.c,
// scenario_multi.c, scenario_server.c, scenario_offline.c), and add `X(<x>)` at the end of DLP_LG_SCENARIOS in
// src/loadgen/scenarios.c. Nothing else: the Makefile builds every src/*/*.c; `--scenario <Name>`, the settings
// checks, run, summary and JSON all go through the table. The public enum dlp_lg_scenario is the index into
// that list and names only the built-in four; a new scenario's index is its place in the list.
//
// The harness (run.c) owns the records, the threads and the generic rules (min duration over the span the
// scenario names, min queries, lost, failed and duplicate samples); a scenario decides how queries go out,
// which latencies its constraint reads (samples or whole queries), its own constraints (a latency bound,
// early stopping), its metric and what it adds to the summary and the JSON.
#ifndef DLP_LOADGEN_SCENARIO_H
#define DLP_LOADGEN_SCENARIO_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "loadgen/loadgen.h"
#include "loadgen/stats.h"

#define DLP_LG_MAX_RECORDS ((int64_t)1 << 27)  // queries (and samples) one run can hold

// --- issuing (run.c) -------------------------------------------------------------------------------
typedef struct dlp_lg_issuer dlp_lg_issuer;
// Fixes the run's start t0 (1 ms ahead, so the first query is on time) and returns it (absolute ns). Call it
// once, after any preparation (e.g. building a schedule) and before the first dlp_lg_issue (which otherwise
// calls it).
int64_t dlp_lg_issuer_start(dlp_lg_issuer *is);
// One query of n samples scheduled at sched_ns (absolute), handed to the SUT; each sample's index is drawn
// from the sample library. Returns an error only when the run must stop (out of memory, too many records).
dlp_status dlp_lg_issue(dlp_lg_issuer *is, int64_t sched_ns, int32_t n);
int64_t dlp_lg_issued_queries(const dlp_lg_issuer *is);
int64_t dlp_lg_last_issue_ns(const dlp_lg_issuer *is);  // absolute issue time of the last query (0: none)
// Waits until every issued query is answered. Returns 0 when nothing was answered for the idle timeout
// (the harness then stops waiting for the rest).
int dlp_lg_wait_answered(dlp_lg_issuer *is);
// Back to back (SingleStream, MultiStream): a query of samples_per_query goes out when the previous one is
// answered, until both minimums are met or a maximum is reached.
dlp_status dlp_lg_issue_back_to_back(dlp_lg_issuer *is, const dlp_lg_settings *s, dlp_lg_result *o);

// --- the verdict and the metric (run.c) ------------------------------------------------------------
// What a scenario's rules read once the run is over. The "unit" is a sample, or a whole query for a
// scenario whose constraint is on query latency (per_query).
typedef struct dlp_lg_tally {
    int64_t nq, ns;              // queries and samples issued
    int64_t failed;              // samples answered rejected, timed out or with an error
    int64_t over;                // samples over the latency bound (failed and lost ones included)
    const int64_t *ok_lat;       // the units answered OK: latency from the scheduled time, ascending
    int64_t nok;
    const int64_t *all_lat;      // every unit, failed or lost ones as INT64_MAX, ascending
    int64_t nall;
    double duration_s;           // first scheduled issue -> last response
} dlp_lg_tally;

void dlp_lg_add_reason(dlp_lg_result *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlp_lg_add_warning(dlp_lg_result *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// SingleStream/MultiStream's early stopping: the estimate of the target percentile from t->all_lat.
void dlp_lg_es_percentile_rule(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o);
// The metric as the target percentile of t->ok_lat: named default_name at default_p, else "target
// percentile latency (ns)".
void dlp_lg_latency_metric(const dlp_lg_tally *t, const dlp_lg_settings *s, double default_p,
                           const char *default_name, dlp_lg_result *o);

// --- the summary text (summary.c) ------------------------------------------------------------------
typedef struct dlp_lg_text {  // a growing string: {0} to start, p NULL after a failed allocation
    char *p;
    size_t len, cap;
} dlp_lg_text;
void dlp_lg_text_printf(dlp_lg_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlp_lg_text_latency(dlp_lg_text *b, const dlp_lg_latency *l);  // the "Min latency (ns) ..." block

// --- MLPerf's rules (--mlperf-rules, dlp_lg_settings_mlperf and _breaks) ------------------------------------
// A scenario's own minimums under MLPerf's rules for ResNet-50 (mlperf.conf, test_settings.h); the rules common
// to every scenario (min duration 600 s, 1024 performance samples, early stopping, no failed sample) are the
// harness's (settings.c).
typedef struct dlp_lg_mlperf_rules {
    int64_t min_query_count;  // queries, or samples when counts_samples (0: LoadGen's default, 100)
    double percentile;        // the target percentile MLPerf sets (0: 0.99)
    int percentile_checked;   // a run at another percentile breaks the rules
    int samples_per_query;    // the query size MLPerf fixes (0: not fixed)
    int64_t max_latency_ns;   // the latency bound may not be above this (0: no bound)
} dlp_lg_mlperf_rules;

// --- the detail log (mlperf_log.c) -----------------------------------------------------------------
typedef struct dlp_lg_detail_log dlp_lg_detail_log;
// One ":::MLLOG" line (value stolen), naming the file and line that logged it.
void dlp_lg_detail_key_at(dlp_lg_detail_log *d, const char *key, json_t *value, const char *file, int line);
#define dlp_lg_detail_key(d, key, value) dlp_lg_detail_key_at((d), (key), (value), __FILE__, __LINE__)
// The latency block: result_{min,max,mean}_<kind>latency_ns and the percentiles (kind "" or "query_").
void dlp_lg_detail_latency(dlp_lg_detail_log *d, const dlp_lg_latency *l, const char *kind);

// Which span must last min_duration.
typedef enum {
    DLP_LG_SPAN_ISSUING,   // first query's schedule -> last query's issue ("issuing")
    DLP_LG_SPAN_SCHEDULE,  // first -> last scheduled time ("the schedule")
    DLP_LG_SPAN_RUN,       // first scheduled issue -> last response ("the run")
} dlp_lg_span;

typedef struct dlp_lg_scenario_ops {
    const char *name;             // MLPerf's name: the --scenario value, the summary's and the JSON's
    const char *const *aliases;   // NULL-terminated: what dlp_lg_scenario_parse also accepts (any case)

    // Defaults (dlp_lg_settings_default) and checks.
    double default_percentile;    // target_latency_percentile
    int default_samples_per_query;
    int64_t default_min_query_count;  // the least early stopping accepts at the default percentile
    int uses_target_qps;          // target_qps drives the run: must be in (0, 1e7]
    int searchable;               // dlp_lg_search may vary its target_qps

    // Issuing: sends the queries through dlp_lg_issue (after dlp_lg_issuer_start) and may set
    // o->stop_reason (else "min duration and min queries met").
    dlp_status (*issue)(dlp_lg_issuer *is, const dlp_lg_settings *s, dlp_lg_result *o);

    // Validity.
    int per_query;                // the constraint is on whole queries' latency (MultiStream): the tally's
                                  // units are queries, and the summary and JSON show per-query latency too
    dlp_lg_span min_duration_span;
    int counts_samples;           // min_query_count counts samples, not queries (Offline)
    int sized_queries;            // queries carry samples_per_query samples (MultiStream; also a config file's
                                  // samples_per_query key and AccuracyOnly's query count); else one sample each
    dlp_lg_mlperf_rules mlperf;   // MLPerf's minimums for this scenario
    // Optional: a performance constraint (clears o->perf_constraints_met, adds reasons and warnings). The
    // summary then prints "Performance constraints satisfied" and the samples over the latency bound.
    void (*perf_constraints)(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o);
    // Optional: MLPerf's early-stopping rule (run when s->early_stopping): sets o->early_stopping_met,
    // o->early_stopping_text (printed in the summary) and o->es_estimate_ns; adds a reason when unmet.
    void (*early_stopping)(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o);
    // The metric (o->metric_name, o->metric_value) and the scenario's own figures.
    void (*measure)(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o);

    // Output. The summary's metric line: "name : 123" (metric_integer) or "name<metric_sep>12.34".
    int metric_integer;
    const char *metric_sep;
    // Optional: the first lines of "Additional Stats" (before the latency block).
    void (*summary_stats)(dlp_lg_text *b, const dlp_lg_result *r);
    // Optional: the scenario's own "Test Parameters Used" lines (after max_failed_fraction).
    void (*summary_settings)(dlp_lg_text *b, const dlp_lg_settings *s);
    // Optional: the scenario's own keys in the result JSON (after "completed_samples_per_s").
    void (*result_json)(json_t *o, const dlp_lg_result *r);
    // Optional: the scenario's result keys in mlperf_log_detail.txt (LoadGen's PerformanceSummary::LogDetail,
    // between result_overlatency_query_count and the sample latency block); NULL: one "dlperf_metric" key.
    void (*detail_keys)(dlp_lg_detail_log *d, const dlp_lg_result *r);
} dlp_lg_scenario_ops;

// The registry (scenarios.c): the scenario at index i of DLP_LG_SCENARIOS, NULL when out of range.
const dlp_lg_scenario_ops *dlp_lg_scenario_ops_of(dlp_lg_scenario s);
int dlp_lg_scenario_count(void);

#endif
