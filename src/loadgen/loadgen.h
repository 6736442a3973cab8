// loadgen: an MLPerf-style load generator — the four LoadGen scenarios (SingleStream, MultiStream, Server,
// Offline) with MLPerf's validity rules, driving any System Under Test through one small interface, with a
// summary in the style of mlperf_log_summary.txt and a versioned JSON result. The harness knows only core/ (and
// HTTP); two SUT-side files reach further: loadgen/sut_local.c runs dlperf's engine (serve/stack) and
// loadgen/images.c reads and preprocesses the HTTP SUT's images (data/).
// Defines: dlp_lg_scenario (with dlp_lg_scenario_name/parse/choices/searchable), dlp_lg_settings,
//          dlp_lg_latency (dlp_lg_latency_summarize), dlp_lg_result, dlp_lg_run, dlp_lg_search, dlp_lg_sweep,
//          dlp_lg_summary_text, dlp_lg_detail_write, dlp_lg_result_to_json, dlp_lg_conf_apply. The System Under Test
//          interface (and its http and in-process implementations) is loadgen/sut.h, included here; the
//          statistics behind the rules (early stopping, the Poisson schedule) and the KServe codec are private
//          to loadgen/ (loadgen/stats.h, loadgen/kserve.h).
#ifndef DLP_LOADGEN_H
#define DLP_LOADGEN_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

// A scenario is an index into loadgen's registry (loadgen/scenarios.c; each scenario is one file,
// loadgen/scenario_<x>.c). These name the built-in four; a scenario added to the registry has the next index
// and needs no name here (the CLI and dlp_lg_scenario_parse find it by its name).
typedef enum {
    DLP_LG_SINGLE_STREAM = 0,  // one query of 1 sample at a time; metric: 90th-percentile latency
    DLP_LG_MULTI_STREAM,       // queries of 8 samples back to back; metric: 99th-percentile query latency
    DLP_LG_SERVER,             // Poisson arrivals at target_qps; VALID when p99 latency <= target_latency
    DLP_LG_OFFLINE,            // every sample issued at once; metric: samples/s
} dlp_lg_scenario;

const char *dlp_lg_scenario_name(dlp_lg_scenario s);  // "SingleStream", ... ("?" when unknown)
// Accepts MLPerf's names and lower-case short forms ("server", "single", "multistream", "offline").
dlp_status dlp_lg_scenario_parse(const char *s, dlp_lg_scenario *out);
// Every scenario's name in index order, '|'-separated ("SingleStream|MultiStream|Server|Offline"): a
// DLP_OPT_CHOICE's choices, whose index is the dlp_lg_scenario.
const char *dlp_lg_scenario_choices(void);
// Whether dlp_lg_search can search the scenario's target_qps (Server).
int dlp_lg_scenario_searchable(dlp_lg_scenario s);

// MLPerf's test modes: PerformanceOnly times the scenario; AccuracyOnly sends every sample of the library
// once (in the scenario's pattern, no timing rules) and keeps each answer for mlperf_log_accuracy.json.
typedef enum { DLP_LG_PERFORMANCE = 0, DLP_LG_ACCURACY } dlp_lg_mode;
const char *dlp_lg_mode_name(dlp_lg_mode m);  // "PerformanceOnly", "AccuracyOnly"

typedef struct dlp_lg_settings {
    dlp_lg_scenario scenario;
    dlp_lg_mode mode;
    double target_qps;                 // Server: Poisson arrival rate; Offline: expected samples/s (sizes the query)
    int64_t target_latency_ns;         // Server: the latency bound (MLPerf ResNet-50: 15 ms)
    double target_latency_percentile;  // 0.90 SingleStream, 0.99 MultiStream and Server
    int samples_per_query;             // 8 for MultiStream, 1 otherwise
    int64_t min_duration_ns;           // the run goes on until both minimums are met (MLPerf: 600 s)
    int64_t min_query_count;           // Offline: the minimum number of samples (MLPerf ResNet-50: 24576)
    int64_t max_duration_ns;           // 0: none. Stops issuing early (the result then says why)
    int64_t max_query_count;           // 0: none
    int64_t sample_count;              // the query sample library: indices 0..sample_count-1 (MLPerf: 1024)
    uint64_t schedule_seed;            // Poisson arrivals
    uint64_t sample_seed;              // which sample each query carries
    int early_stopping;                // apply MLPerf's early-stopping rule (confidence 99%)
    double max_failed_fraction;        // failed samples (503, timeouts, errors) allowed; MLPerf: 0
    int offline_batch;                 // Offline: issue the samples as queries of this many (0: one query)
    int64_t idle_timeout_ns;           // give up when no response arrived for this long (samples then "lost")
    int64_t progress_interval_ns;      // > 0: a progress line on stderr this often while the run goes on
    int mlperf_rules;                  // a run that breaks an MLPerf minimum is INVALID (the reason names it)
} dlp_lg_settings;

// Our defaults for a small machine (see docs/serving.md for MLPerf's): min duration 10 s; min queries 64
// (SingleStream), 662 (MultiStream), 500 (Server), 256 samples (Offline) — each the least that MLPerf's
// early-stopping rule can accept at its percentile.
void dlp_lg_settings_default(dlp_lg_settings *s, dlp_lg_scenario scenario);
dlp_status dlp_lg_settings_check(const dlp_lg_settings *s);

// MLPerf's official minimums for ResNet-50 (mlperf.conf and LoadGen's defaults): min_duration 600 s,
// performance_sample_count 1024, early stopping, no failed sample; SingleStream p90 and 100 queries;
// MultiStream p99, 8 samples a query, 662 queries; Server p99 within 15 ms; Offline 24,576 samples.
// Sets them on s (target_qps and the rest stay as they are).
void dlp_lg_settings_mlperf(dlp_lg_settings *s);
// The MLPerf rules these settings break, one line each naming the rule, the value used and the one required
// ("min_duration 10000 ms < 600000 ms"). Returns how many (at most max lines written).
int dlp_lg_settings_mlperf_breaks(const dlp_lg_settings *s, char (*lines)[160], int max);

// Settings from LoadGen's config files (mlperf.conf, user.conf): lines `model.scenario.key = value`, '#'
// comments, '*' wildcards for model or scenario; the most specific match wins (model.scenario, *.scenario,
// model.*, *.*), later lines override earlier ones. Keys understood, with LoadGen's units (times in ms,
// percentiles in %): target_qps, target_latency, target_latency_percentile, samples_per_query, min_duration,
// max_duration, min_query_count, max_query_count, performance_sample_count_override, schedule_rng_seed,
// sample_index_rng_seed, mode (1 AccuracyOnly, 2 PerformanceOnly). Other LoadGen keys are accepted and
// listed in *ignored (a '\n'-separated list, may be NULL). An unparsable line is an error naming its number.
// *set_mask gets a bit per key applied (DLP_LG_CONF_*), so the CLI can tell what the file set.
enum {
    DLP_LG_CONF_TARGET_QPS = 1 << 0, DLP_LG_CONF_TARGET_LATENCY = 1 << 1, DLP_LG_CONF_PERCENTILE = 1 << 2,
    DLP_LG_CONF_SPQ = 1 << 3, DLP_LG_CONF_MIN_DURATION = 1 << 4, DLP_LG_CONF_MAX_DURATION = 1 << 5,
    DLP_LG_CONF_MIN_QUERIES = 1 << 6, DLP_LG_CONF_MAX_QUERIES = 1 << 7, DLP_LG_CONF_SAMPLES = 1 << 8,
    DLP_LG_CONF_SEEDS = 1 << 9, DLP_LG_CONF_MODE = 1 << 10,
};
dlp_status dlp_lg_conf_apply(const char *text, const char *model, dlp_lg_settings *s, unsigned *set_mask,
                             char *ignored, size_t ignored_cap);

#include "loadgen/sut.h"

// --- statistics (percentiles by MLPerf's rule: core/stats' dlp_stats_rank_i64) ---------------------------------
typedef struct dlp_lg_latency {
    int64_t count;
    int64_t min_ns, max_ns, mean_ns;
    int64_t p50_ns, p90_ns, p95_ns, p97_ns, p99_ns, p999_ns;
} dlp_lg_latency;
// Sorts lat in place and fills out (count 0 and zeros when n == 0).
void dlp_lg_latency_summarize(int64_t *lat, size_t n, dlp_lg_latency *out);

// --- running ---------------------------------------------------------------------------------------
#define DLP_LG_MAX_REASONS 8

// AccuracyOnly: one answered sample (LoadGen's accuracy log entry; top1 -1 when the SUT gave none).
typedef struct dlp_lg_accuracy_entry {
    int64_t seq_id;
    uint32_t qsl_idx;
    int32_t top1;
} dlp_lg_accuracy_entry;

typedef struct dlp_lg_result {
    dlp_lg_settings settings;
    int nbreaks;                     // MLPerf rules the settings break (dlp_lg_settings_mlperf_breaks)
    char breaks[8][160];
    dlp_lg_accuracy_entry *accuracy; // AccuracyOnly: the answered samples in issue order (owned)
    int64_t naccuracy;
    int64_t t0_unix_ns;              // wall-clock time of the run's start (for the detail log's times)
    char sut_name[64];
    int valid;
    int min_duration_met, min_queries_met, perf_constraints_met, early_stopping_met, none_lost;
    int nreasons;
    char reasons[DLP_LG_MAX_REASONS][200];  // why INVALID, each with what to do (MLPerf's "Recommendations")
    char early_stopping_text[400];          // MLPerf's "Early Stopping Result" lines
    char stop_reason[120];                  // why issuing stopped ("min duration and min queries met", ...)
    int nwarnings;
    char warnings[4][200];                  // e.g. the loadgen itself issued late (an overloaded machine)

    int64_t queries_issued, samples_issued, samples_completed, samples_lost, duplicate_responses;
    int64_t samples_by_outcome[DLP_LG_OUTCOME_COUNT];
    int64_t overlatency_count;     // Server: samples over the bound, failed ones included
    int64_t duration_ns;           // first scheduled issue -> last response
    int64_t last_scheduled_ns;     // Server: offset of the last query's scheduled time
    int64_t last_issued_ns;        // SingleStream/MultiStream: offset of the last query's issue
    double scheduled_samples_per_s, completed_samples_per_s;
    double qps_with_overhead, qps_without_overhead;  // SingleStream, as MLPerf reports them
    dlp_lg_latency sample_latency;  // from the query's scheduled time to the sample's response (OK ones)
    dlp_lg_latency query_latency;   // to the query's last response (MultiStream's metric)
    int64_t target_percentile_ns;   // the constraint percentile, failed samples counted as infinitely late
    int64_t es_estimate_ns;         // early-stopping estimate (SingleStream/MultiStream), 0 if none
    dlp_lg_latency issue_lag;       // actual issue time - scheduled time (loadgen's own lateness)

    const char *metric_name;        // "90th percentile latency (ns)", "Samples per second", ...
    double metric_value;
    json_t *sut_stats;              // owned: the SUT's stats_json at the end (NULL if none)
} dlp_lg_result;

// Runs one scenario against sut. Returns an error only when the run could not be done at all (bad
// settings, out of memory); an INVALID run is DLP_OK with out->valid == 0 and the reasons.
dlp_status dlp_lg_run(const dlp_lg_settings *s, const dlp_lg_sut *sut, dlp_lg_result *out);
void dlp_lg_result_free(dlp_lg_result *r);

// Server search: the highest VALID target_qps, by a ramp (x2 up from start_qps while VALID, /2 down while
// INVALID) then bisection, until hi/lo - 1 <= tolerance or the time budget would be exceeded by the next
// trial. Every trial uses the same schedule seed (common random numbers), so the comparison is fair.
typedef struct dlp_lg_trial {
    double target_qps;
    int valid;
    int64_t p99_ns;                 // the constraint percentile (failed samples counted as late)
    double completed_samples_per_s;
    int64_t failed, duration_ns;
    char reason[200];               // the first reason when INVALID
} dlp_lg_trial;

typedef struct dlp_lg_search_cfg {
    double start_qps;     // first trial
    double min_qps;       // give up below this (no VALID rate)
    double max_qps;       // never try above this (0: no cap)
    double tolerance;     // relative width of the final bracket, e.g. 0.05
    int64_t budget_ns;    // total time for all trials
    int max_trials;
    // Optional progress report after each trial (cli prints it).
    void (*on_trial)(void *ctx, const dlp_lg_trial *t, int index);
    void *on_trial_ctx;
} dlp_lg_search_cfg;

typedef struct dlp_lg_search_result {
    int found;                // a VALID rate was found
    int converged;            // the bracket is within tolerance (else the budget or trial cap ran out)
    double best_qps, lo_qps, hi_qps;  // hi_qps: lowest INVALID rate tried (0 if none)
    int ntrials;
    dlp_lg_trial trials[64];
    dlp_lg_result best;       // the full result of the best VALID trial (or the last trial when none)
    char stop_reason[120];
} dlp_lg_search_result;

dlp_status dlp_lg_search(const dlp_lg_settings *base, const dlp_lg_sut *sut, const dlp_lg_search_cfg *cfg,
                         dlp_lg_search_result *out);
void dlp_lg_search_result_free(dlp_lg_search_result *r);

// --- perf_analyzer-style sweep ---------------------------------------------------------------------
// Closed loop at each concurrency (that many requests always outstanding) or open loop at each request rate
// (constant inter-arrival times, perf_analyzer's default distribution), measured in windows of window_ns until
// `windows` consecutive ones agree within ±stability on throughput and on mean latency (perf_analyzer's
// --measurement-interval, --stability-percentage and 3 windows), or max_windows passed (then unstable).
typedef struct dlp_lg_sweep_point {
    double level;                 // concurrency or requests/s
    int stable, windows;          // windows measured
    int64_t count, failed;        // requests in the stable windows (answered OK / not)
    double infer_per_s;
    double avg_ns, p50_ns, p90_ns, p95_ns, p99_ns;
    int64_t server_count;         // responses that reported server times
    double server_queue_ns, server_infer_ns;  // their means
} dlp_lg_sweep_point;

typedef struct dlp_lg_sweep_cfg {
    int by_rate;                  // 0: concurrency levels, 1: request rates
    double start, end, step;      // the levels: start, start + step, ... <= end
    int64_t window_ns;            // perf_analyzer's default: 5 s
    double stability;             // 0.10
    int windows;                  // 3
    int max_windows;              // 10
    int64_t sample_count;         // the library the samples are drawn from (in turn)
    int64_t max_outstanding;      // request-rate mode: beyond this many unanswered, arrivals are skipped (counted)
    void (*on_point)(void *ctx, const dlp_lg_sweep_point *p);  // optional progress
    void *on_point_ctx;
} dlp_lg_sweep_cfg;

// Runs every level in turn against sut; out gets one point per level (*n_out of them, malloc'd).
dlp_status dlp_lg_sweep(const dlp_lg_sweep_cfg *cfg, const dlp_lg_sut *sut, dlp_lg_sweep_point **out, int *n_out);
// perf_analyzer's -f CSV: header "Concurrency" or "Request Rate", then Inferences/Second, Client Send,
// Network+Server Send/Recv, Server Queue, Server Compute Input, Server Compute Infer, Server Compute Output,
// Client Recv, p50/p90/p95/p99 latency (µs), rows sorted by throughput as perf_analyzer sorts them.
char *dlp_lg_sweep_csv(const dlp_lg_sweep_point *p, int n, int by_rate);

// --- output ----------------------------------------------------------------------------------------
// mlperf_log_summary.txt in LoadGen's format, then a "dlperf Additional Stats" section (malloc'd; caller frees).
char *dlp_lg_summary_text(const dlp_lg_result *r);
// What follows "Result is : ": VALID, INVALID, or "VALID for these settings only, not under MLPerf's rules
// (<the rules broken>); ..." when the run met its own settings but those are below MLPerf's minimums.
void dlp_lg_result_line(const dlp_lg_result *r, char *out, size_t cap);
// mlperf_log_detail.txt: LoadGen's ":::MLLOG {...}" JSON lines with its keys (effective_* settings, result_*
// figures, result_validity, ...), times relative to the run's start. extra: NULL or an object of dlperf's
// own keys logged after LoadGen's (each as its own line). Returns DLP_ERR_IO on a write error.
dlp_status dlp_lg_detail_write(FILE *f, const dlp_lg_result *r, json_t *extra);
// mlperf_log_accuracy.json: LoadGen's list of {"seq_id", "qsl_idx", "data"}, data the hex bytes of the
// predicted class as one little-endian float32 (what MLPerf's ResNet reference and accuracy-imagenet.py use).
dlp_status dlp_lg_accuracy_write(FILE *f, const dlp_lg_result *r);
// {"scenario", "mode", "valid", "reasons", "metric", "latency_ms", counts, "settings", "sut"} for the result.
json_t *dlp_lg_result_to_json(const dlp_lg_result *r);
json_t *dlp_lg_search_to_json(const dlp_lg_search_result *r);
json_t *dlp_lg_settings_to_json(const dlp_lg_settings *s);

#endif
