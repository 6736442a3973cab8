// Unit tests for loadgen/: MLPerf's percentile, the Poisson schedule's statistics, the early-stopping
// arithmetic, each scenario's issuing rules, VALID/INVALID verdicts, latency counted from the scheduled time,
// lost and duplicate answers, and the Server search converging on a SUT of known capacity.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/clock.h"
#include "loadgen/http_client.h"
#include "loadgen/loadgen.h"
#include "loadgen/scenario.h"

#define MS 1000000LL

// ---------------------------------------------------------------------------------------------------------
// A pure-delay SUT: answers each sample `delay_ns` after it was issued, with unlimited parallelism (a timer
// thread and a FIFO). With service_ns > 0 it is instead one server of known capacity (1e9/service_ns
// samples/s): each sample is done at max(its issue, the previous one's end) + service_ns, computed at issue
// time, so late wake-ups of the timer thread add latency noise but never lower the capacity. It records how
// queries arrived; optional misbehaviour: drop or double-answer samples, stall inside issue_query once.
typedef struct delay_sut {
    int64_t delay_ns;
    int64_t service_ns;
    int64_t last_due_ns;
    int drop_every;       // never answer samples with id % drop_every == drop_every - 1 (until destroy)
    int answer_twice_id;  // answer this id twice (-1: none)
    int stall_call;       // issue_query call number that sleeps stall_ns before taking its samples (-1: none)
    int64_t stall_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct { dlp_lg_sample s; const dlp_lg_done *done; int64_t due; } *q;
    size_t cap, head, count;
    struct { dlp_lg_sample s; const dlp_lg_done *done; } dropped[4096];
    int ndropped;
    int stop;
    pthread_t th;
    int64_t calls, samples, outstanding, max_outstanding, max_call_samples, min_call_samples;
} delay_sut;

static void *delay_main(void *arg) {
    delay_sut *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->count == 0 && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        if (d->count == 0 && d->stop) break;
        int64_t due = d->q[d->head].due;
        pthread_mutex_unlock(&d->mu);
        dlp_sleep_until_ns(due);
        pthread_mutex_lock(&d->mu);
        dlp_lg_sample s = d->q[d->head].s;
        const dlp_lg_done *done = d->q[d->head].done;
        d->head = (d->head + 1) % d->cap;
        d->count--;
        int drop = d->drop_every > 0 && (int)(s.id % (uint64_t)d->drop_every) == d->drop_every - 1;
        if (drop && d->ndropped < 4096) {
            d->dropped[d->ndropped].s = s;
            d->dropped[d->ndropped].done = done;
            d->ndropped++;
            continue;
        }
        d->outstanding--;
        pthread_mutex_unlock(&d->mu);
        dlp_lg_response r = {.id = s.id, .outcome = DLP_LG_OK, .top1 = (int32_t)s.index};
        done->fn(done->ctx, &r, 1);
        if ((int64_t)s.id == d->answer_twice_id) done->fn(done->ctx, &r, 1);
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static dlp_status delay_issue(void *ctx, const dlp_lg_sample *s, size_t n, const dlp_lg_done *done) {
    delay_sut *d = ctx;
    int64_t call;
    pthread_mutex_lock(&d->mu);
    call = d->calls++;
    pthread_mutex_unlock(&d->mu);
    if (call == d->stall_call) dlp_sleep_ns(d->stall_ns);
    int64_t now = dlp_now_ns();
    pthread_mutex_lock(&d->mu);
    d->samples += (int64_t)n;
    if ((int64_t)n > d->max_call_samples) d->max_call_samples = (int64_t)n;
    if (d->min_call_samples == 0 || (int64_t)n < d->min_call_samples) d->min_call_samples = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        assert_true(d->count < d->cap);
        size_t at = (d->head + d->count) % d->cap;
        d->q[at].s = s[i];
        d->q[at].done = done;
        int64_t due = now + d->delay_ns;
        if (d->service_ns > 0) {
            due = (d->last_due_ns > now ? d->last_due_ns : now) + d->service_ns;
            d->last_due_ns = due;
        }
        d->q[at].due = due;
        d->count++;
    }
    d->outstanding += (int64_t)n;
    if (d->outstanding > d->max_outstanding) d->max_outstanding = d->outstanding;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return DLP_OK;
}

static void delay_destroy(void *ctx) {
    delay_sut *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    for (int i = 0; i < d->ndropped; i++) {  // late answers after the harness gave up: must be harmless
        dlp_lg_response r = {.id = d->dropped[i].s.id, .outcome = DLP_LG_ERROR, .top1 = -1};
        d->dropped[i].done->fn(d->dropped[i].done->ctx, &r, 1);
    }
    free(d->q);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

static dlp_lg_sut delay_sut_new(int64_t delay_ns, delay_sut **out) {
    delay_sut *d = calloc(1, sizeof *d);
    assert_non_null(d);
    d->delay_ns = delay_ns;
    d->answer_twice_id = -1;
    d->stall_call = -1;
    d->cap = 1 << 16;
    d->q = calloc(d->cap, sizeof *d->q);
    assert_non_null(d->q);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    assert_int_equal(pthread_create(&d->th, NULL, delay_main, d), 0);
    *out = d;
    return (dlp_lg_sut){.name = "delay", .ctx = d, .issue_query = delay_issue, .destroy = delay_destroy};
}

// A SUT of known capacity: the in-process SUT with one worker whose "inference" takes service_ns per sample,
// paced by absolute deadlines: a call that starts within 2 ms of the previous deadline is taken to start at
// it (the lag is sleep overshoot, not idleness), so the overshoot does not accumulate while work is queued.
typedef struct rate_engine {
    int64_t service_ns;
    int64_t next_free_ns;
    int64_t calls, samples;
    int fail_every;  // fail calls whose first index % fail_every == 0 (0: never)
} rate_engine;

static dlp_status rate_infer(void *ctx, int worker, const uint32_t *idx, int n, int32_t *top1) {
    rate_engine *e = ctx;
    (void)worker;
    int64_t now = dlp_now_ns();
    int64_t start = now - e->next_free_ns < 2000000 ? e->next_free_ns : now;
    if (start > now + 1000000000LL) start = now;
    e->next_free_ns = start + e->service_ns * n;
    dlp_sleep_until_ns(e->next_free_ns);
    e->calls++;
    e->samples += n;
    for (int i = 0; i < n; i++) top1[i] = (int32_t)(idx[i] % 1000);
    if (e->fail_every > 0 && idx[0] % (uint32_t)e->fail_every == 0) return DLP_ERR(DLP_ERR_NUMERIC, "fake failure");
    return DLP_OK;
}

static dlp_lg_sut rate_sut_new(rate_engine *e, int max_batch) {
    dlp_lg_inproc_cfg c = {.fn = rate_infer, .ctx = e, .max_batch = max_batch, .threads = 1, .name = "rate"};
    dlp_lg_sut s;
    assert_int_equal(dlp_lg_sut_inproc_create(&c, &s), DLP_OK);
    return s;
}

// ---------------------------------------------------------------------------------------------------------
static void test_percentile(void **state) {
    (void)state;
    int64_t v[100];
    for (int i = 0; i < 100; i++) v[i] = i + 1;
    static const struct { size_t n; double p; int64_t want; } rows[] = {
        {100, 0.50, 51}, {100, 0.90, 91}, {100, 0.99, 100}, {100, 0.999, 100}, {100, 0.0, 1},
        {10, 0.90, 10},  {10, 0.5, 6},    {1, 0.99, 1},     {2, 0.5, 2},       {64, 0.90, 58},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(dlp_stats_rank_i64(v, rows[i].n, rows[i].p), rows[i].want);
    assert_int_equal(dlp_stats_rank_i64(v, 0, 0.5), 0);
    int64_t lat[7] = {70, 10, 30, 20, 60, 50, 40};
    dlp_lg_latency l;
    dlp_lg_latency_summarize(lat, 7, &l);
    assert_int_equal(l.count, 7);
    assert_int_equal(l.min_ns, 10);
    assert_int_equal(l.max_ns, 70);
    assert_int_equal(l.mean_ns, 40);
    assert_int_equal(l.p50_ns, 40);  // floor(3.5) = 3 -> 40
    assert_int_equal(l.p90_ns, 70);  // floor(6.3) = 6
    assert_int_equal(lat[0], 10);    // sorted in place
    dlp_lg_latency_summarize(lat, 0, &l);
    assert_int_equal(l.count, 0);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_poisson_schedule(void **state) {
    (void)state;
    const double rate = 1000;
    const int64_t n = 200001;
    int64_t *t = malloc((size_t)n * sizeof *t);
    double *gap = malloc((size_t)(n - 1) * sizeof *gap);
    assert_non_null(t);
    assert_non_null(gap);
    dlp_lg_poisson_schedule(rate, 42, n, t);
    assert_int_equal(t[0], 0);
    double sum = 0, sum2 = 0;
    for (int64_t i = 1; i < n; i++) {
        assert_true(t[i] >= t[i - 1]);
        gap[i - 1] = (double)(t[i] - t[i - 1]) * 1e-9;
        sum += gap[i - 1];
        sum2 += gap[i - 1] * gap[i - 1];
    }
    double m = sum / (double)(n - 1), var = sum2 / (double)(n - 1) - m * m, cv = sqrt(var) / m;
    // Mean gap 1/rate: the standard error of the mean is 1/rate/sqrt(n) = 0.22%; allow 1%.
    assert_true(fabs(m * rate - 1) < 0.01);
    // Coefficient of variation of an exponential is 1; allow 2%.
    assert_true(fabs(cv - 1) < 0.02);
    // Kolmogorov-Smirnov against Exp(rate): D < 1.63/sqrt(n) is the 1% critical value.
    qsort(gap, (size_t)(n - 1), sizeof *gap, cmp_dbl);
    double D = 0;
    for (int64_t i = 0; i < n - 1; i++) {
        double F = 1 - exp(-rate * gap[i]);
        double d1 = fabs((double)(i + 1) / (double)(n - 1) - F), d2 = fabs(F - (double)i / (double)(n - 1));
        if (d1 > D) D = d1;
        if (d2 > D) D = d2;
    }
    assert_true(D < 1.63 / sqrt((double)(n - 1)));
    // Counts in 100 ms windows are Poisson(100): mean 100, variance/mean (index of dispersion) 1.
    int nwin = (int)(t[n - 1] / (100 * MS));
    int *cnt = calloc((size_t)nwin, sizeof *cnt);
    for (int64_t i = 0; i < n; i++) {
        int w = (int)(t[i] / (100 * MS));
        if (w < nwin) cnt[w]++;
    }
    double cm = 0, cv2 = 0;
    for (int w = 0; w < nwin; w++) cm += cnt[w];
    cm /= nwin;
    for (int w = 0; w < nwin; w++) cv2 += (cnt[w] - cm) * (cnt[w] - cm);
    cv2 /= (nwin - 1);
    assert_true(nwin >= 1900);
    assert_true(fabs(cm - 100) < 1.5);
    assert_true(fabs(cv2 / cm - 1) < 0.1);  // the dispersion's standard error is sqrt(2/nwin) = 3%
    // Deterministic from the seed; another seed gives another schedule; the rate scales it exactly.
    int64_t a[100], b[100], c[100];
    dlp_lg_poisson_schedule(rate, 42, 100, a);
    dlp_lg_poisson_schedule(rate, 43, 100, b);
    dlp_lg_poisson_schedule(2 * rate, 42, 100, c);
    assert_memory_equal(a, t, sizeof a);
    assert_memory_not_equal(a, b, sizeof a);
    for (int i = 0; i < 100; i++) assert_true(llabs(2 * c[i] - a[i]) <= 2);
    free(cnt);
    free(t);
    free(gap);
}

static void test_early_stopping_math(void **state) {
    (void)state;
    // The binomial cdf against a direct sum.
    double q = 0.1;
    int64_t nn = 30;
    double direct = 0, choose = 1;
    for (int x = 0; x <= 4; x++) {
        if (x > 0) choose = choose * (double)(nn - x + 1) / x;
        direct += choose * pow(q, x) * pow(1 - q, (double)(nn - x));
    }
    assert_true(fabs(dlp_lg_binomial_cdf(4, nn, q) - direct) < 1e-12);
    assert_true(dlp_lg_binomial_cdf(-1, 10, 0.5) == 0);
    assert_true(dlp_lg_binomial_cdf(10, 10, 0.5) == 1);
    // MLPerf's published minimums: 64 queries at p90 (SingleStream), 662 at p99 (MultiStream's
    // min_query_count), and 459 at p99 with no late query.
    assert_int_equal(dlp_lg_es_min_passing(1, 0.90, 0.99) + 1, 64);
    assert_int_equal(dlp_lg_es_min_passing(1, 0.99, 0.99) + 1, 662);
    assert_int_equal(dlp_lg_es_min_passing(0, 0.99, 0.99), 459);
    // It grows with the number of failures.
    for (int t = 1; t < 50; t++) assert_true(dlp_lg_es_min_passing(t, 0.99, 0.99) > dlp_lg_es_min_passing(t - 1, 0.99, 0.99));
    // The estimate: too few queries; then the t-th highest latency, at or above the plain percentile.
    int64_t *lat = malloc(2000 * sizeof *lat);
    for (int i = 0; i < 2000; i++) lat[i] = i + 1;
    int64_t est = 0, disc = 0, need = 0;
    assert_int_equal(dlp_lg_es_estimate(lat, 63, 0.90, 0.99, &est, &disc, &need), 0);
    assert_int_equal(need, 64);
    assert_int_equal(dlp_lg_es_estimate(lat, 64, 0.90, 0.99, &est, &disc, &need), 1);
    assert_int_equal(disc, 0);
    assert_int_equal(est, 64);  // with 64 queries only the maximum can be trusted
    assert_int_equal(dlp_lg_es_estimate(lat, 2000, 0.90, 0.99, &est, &disc, &need), 1);
    assert_true(est >= dlp_stats_rank_i64(lat, 2000, 0.90));
    assert_true(est < 2000);
    // The t found is the largest with h(t) + t <= n.
    int64_t t = disc + 1;
    assert_true(dlp_lg_es_min_passing(t, 0.90, 0.99) + t <= 2000);
    assert_true(dlp_lg_es_min_passing(t + 1, 0.90, 0.99) + t + 1 > 2000);
    free(lat);
}

static void test_settings(void **state) {
    (void)state;
    dlp_lg_settings s;
    dlp_lg_scenario sc;
    assert_int_equal(dlp_lg_scenario_parse("Server", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_SERVER);
    assert_int_equal(dlp_lg_scenario_parse("multistream", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_MULTI_STREAM);
    assert_int_equal(dlp_lg_scenario_parse("bogus", &sc), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "bogus"));
    dlp_lg_settings_default(&s, DLP_LG_MULTI_STREAM);
    assert_int_equal(s.samples_per_query, 8);
    assert_true(fabs(s.target_latency_percentile - 0.99) < 1e-12);
    assert_int_equal(s.target_latency_ns, 15 * MS);
    dlp_lg_settings_default(&s, DLP_LG_SINGLE_STREAM);
    assert_true(fabs(s.target_latency_percentile - 0.90) < 1e-12);
    assert_int_equal(dlp_lg_settings_check(&s), DLP_OK);
    s.target_latency_percentile = 1.0;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    s.target_qps = 0;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_err_clear();
}

// The registry: every scenario's table is complete and reachable by its name, the built-in four keep their
// indices, names, defaults and their place in the CLI's choice string. (Written so that adding a scenario
// needs no edit here.)
static void test_scenario_registry(void **state) {
    (void)state;
    int n = dlp_lg_scenario_count();
    assert_true(n >= 4);
    const char *choices = dlp_lg_scenario_choices();
    assert_int_equal(strncmp(choices, "SingleStream|MultiStream|Server|Offline", 39), 0);
    assert_true(choices[39] == '\0' || choices[39] == '|');
    static const struct { dlp_lg_scenario sc; const char *name; int spq; int64_t minq; double p; int search; } want[] = {
        {DLP_LG_SINGLE_STREAM, "SingleStream", 1, 64, 0.90, 0},
        {DLP_LG_MULTI_STREAM, "MultiStream", 8, 662, 0.99, 0},
        {DLP_LG_SERVER, "Server", 1, 500, 0.99, 1},
        {DLP_LG_OFFLINE, "Offline", 1, 256, 0.99, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(dlp_lg_scenario_name(want[i].sc), want[i].name);
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, want[i].sc);
        assert_int_equal(s.samples_per_query, want[i].spq);
        assert_int_equal(s.min_query_count, want[i].minq);
        assert_true(fabs(s.target_latency_percentile - want[i].p) < 1e-12);
        assert_int_equal(dlp_lg_scenario_searchable(want[i].sc), want[i].search);
    }
    for (int i = 0; i < n; i++) {
        const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of((dlp_lg_scenario)i);
        assert_non_null(ops);
        assert_non_null(ops->name);
        assert_non_null(ops->aliases);
        assert_non_null(ops->aliases[0]);
        assert_non_null(ops->issue);
        assert_non_null(ops->measure);
        assert_non_null(ops->metric_sep);
        dlp_lg_scenario sc = (dlp_lg_scenario)-1;
        assert_int_equal(dlp_lg_scenario_parse(ops->name, &sc), DLP_OK);
        assert_int_equal(sc, i);
        for (const char *const *a = ops->aliases; *a; a++) {
            assert_int_equal(dlp_lg_scenario_parse(*a, &sc), DLP_OK);
            assert_int_equal(sc, i);
        }
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, (dlp_lg_scenario)i);
        assert_int_equal(dlp_lg_settings_check(&s), DLP_OK);
    }
    dlp_lg_scenario sc;
    assert_int_equal(dlp_lg_scenario_parse("ss", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_SINGLE_STREAM);
    assert_int_equal(dlp_lg_scenario_parse("OFFLINE", &sc), DLP_OK);
    assert_int_equal(sc, DLP_LG_OFFLINE);
    assert_int_equal(dlp_lg_scenario_parse("stream", &sc), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "use SingleStream, MultiStream, Server"));
    dlp_err_clear();
    assert_null(dlp_lg_scenario_ops_of((dlp_lg_scenario)n));
    assert_string_equal(dlp_lg_scenario_name((dlp_lg_scenario)n), "?");
    assert_int_equal(dlp_lg_scenario_searchable((dlp_lg_scenario)n), 0);
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    s.scenario = (dlp_lg_scenario)n;
    assert_int_equal(dlp_lg_settings_check(&s), DLP_ERR_INVALID);
    dlp_err_clear();
}

static void fast_settings(dlp_lg_settings *s, dlp_lg_scenario sc) {
    dlp_lg_settings_default(s, sc);
    s->min_duration_ns = 200 * MS;
    s->idle_timeout_ns = 2000 * MS;
}

static void test_single_stream(void **state) {
    (void)state;
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(2 * MS, &d);
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_query_count = 80;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    // One query of one sample at a time, the next only after the previous answer.
    assert_int_equal(d->max_outstanding, 1);
    assert_int_equal(d->max_call_samples, 1);
    assert_true(r.queries_issued >= 80);
    assert_true(r.last_issued_ns >= 200 * MS);
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], r.samples_issued);
    assert_true(r.valid);
    assert_true(r.early_stopping_met);
    // Every latency is at least the SUT's 2 ms; the metric is the 90th percentile.
    assert_true(r.sample_latency.min_ns >= 2 * MS);
    assert_true(r.metric_value >= 2e6 && r.metric_value < 200e6);
    assert_true(r.metric_value == (double)r.sample_latency.p90_ns);
    assert_true(r.qps_without_overhead > 10 && r.qps_without_overhead <= 500);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Scenario : SingleStream"));
    assert_non_null(strstr(txt, "90.0th percentile latency (ns) : "));
    assert_non_null(strstr(txt, "Result is : VALID"));
    free(txt);
    dlp_lg_result_free(&r);
    // Too few queries for early stopping at p90: INVALID with the reason.
    s.min_query_count = 20;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_false(r.valid);
    assert_false(r.early_stopping_met);
    assert_non_null(strstr(r.reasons[0], "at least 64 queries"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_multi_stream(void **state) {
    (void)state;
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(1 * MS, &d);
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_MULTI_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 662;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(d->max_outstanding, 8);
    assert_int_equal(d->max_call_samples, 8);
    assert_int_equal(d->min_call_samples, 8);
    assert_int_equal(r.queries_issued, 662);
    assert_int_equal(r.samples_issued, 662 * 8);
    assert_true(r.valid);
    // The metric is the 99th percentile of query latency (the last of its 8 answers).
    assert_int_equal(r.query_latency.count, 662);
    assert_true(r.metric_value == (double)r.query_latency.p99_ns);
    assert_true(r.query_latency.p99_ns >= r.sample_latency.p50_ns);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "99.0th percentile latency (ns) : "));
    assert_non_null(strstr(txt, "Per-query latency:"));
    free(txt);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_offline(void **state) {
    (void)state;
    rate_engine e = {.service_ns = 250000};  // 4000 samples/s, in batches of up to 16
    dlp_lg_sut sut = rate_sut_new(&e, 16);
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_OFFLINE);
    s.target_qps = 4000;
    s.min_duration_ns = 250 * MS;
    s.min_query_count = 512;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    // One query with every sample: max(512, 4000 * 0.25 s * 1.1) = 1100.
    assert_int_equal(r.queries_issued, 1);
    assert_int_equal(r.samples_issued, 1100);
    assert_int_equal(e.samples, 1100);
    assert_true(e.calls >= 1100 / 16);  // the worker took at most 16 at a time
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], 1100);
    // Samples/s is the SUT's capacity (within 40% below: this machine is shared and threads stall).
    assert_true(r.metric_value > 2400 && r.metric_value <= 4100);
    assert_true(r.valid);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Samples per second: "));
    free(txt);
    dlp_lg_result_free(&r);
    // Offline in batches of 100: 11 queries, all scheduled at the start.
    s.offline_batch = 100;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.queries_issued, 11);
    assert_true(r.issue_lag.max_ns < 100 * MS);
    dlp_lg_result_free(&r);
    // A SUT faster than expected: the run ends before the min duration -> INVALID, with MLPerf's advice.
    s.offline_batch = 0;
    s.target_qps = 100;
    s.min_query_count = 16;
    s.min_duration_ns = 500 * MS;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.samples_issued, 55);
    assert_false(r.min_duration_met);
    assert_false(r.valid);
    assert_non_null(strstr(r.reasons[0], "min duration"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_server_valid_invalid(void **state) {
    (void)state;
    // A pure 5 ms delay under a 200 ms bound (loose: threads on this shared machine stall for tens of ms):
    // VALID whatever the rate.
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(5 * MS, &d);
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SERVER);
    s.target_latency_ns = 200 * MS;
    s.target_qps = 1000;
    s.min_query_count = 600;
    s.min_duration_ns = 300 * MS;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.valid);
    assert_true(r.perf_constraints_met);
    assert_int_equal(d->max_call_samples, 1);
    // The schedule: until both minimums are met; the scheduled rate is the target within Poisson noise.
    assert_true(r.queries_issued >= 600);
    assert_true(r.last_scheduled_ns >= 300 * MS);
    assert_true(fabs(r.scheduled_samples_per_s / 1000 - 1) < 0.15);
    assert_true(d->max_outstanding > 1);  // arrivals overlap: not closed-loop
    assert_true(r.sample_latency.min_ns >= 5 * MS);
    char *txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Scheduled samples per second : "));
    assert_non_null(strstr(txt, "Performance constraints satisfied : Yes"));
    assert_non_null(strstr(txt, "Early Stopping Result:\n * Run successful."));
    free(txt);
    json_t *j = dlp_lg_result_to_json(&r);
    assert_true(json_is_true(json_object_get(j, "valid")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "samples"), "ok")), r.samples_issued);
    json_decref(j);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);

    // A pure 250 ms delay: every sample is over the bound -> INVALID, "reduce the target QPS".
    sut = delay_sut_new(250 * MS, &d);
    s.target_qps = 500;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_false(r.valid);
    assert_false(r.perf_constraints_met);
    assert_false(r.early_stopping_met);
    assert_int_equal(r.overlatency_count, r.samples_issued);
    assert_non_null(strstr(r.reasons[0], "exceeds the bound 200.000 ms"));
    txt = dlp_lg_summary_text(&r);
    assert_non_null(strstr(txt, "Result is : INVALID"));
    assert_non_null(strstr(txt, "Recommendations:"));
    free(txt);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_latency_from_schedule(void **state) {
    (void)state;
    // The SUT answers at once but stalls the issuing thread for 60 ms once: the queries scheduled during the
    // stall are issued late and that lateness is their latency (MLPerf counts from the scheduled time).
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(0, &d);
    d->stall_call = 50;
    d->stall_ns = 60 * MS;
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SERVER);
    s.target_qps = 1000;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.issue_lag.max_ns >= 50 * MS);
    assert_true(r.sample_latency.max_ns >= 50 * MS);
    assert_true(r.sample_latency.p50_ns < 10 * MS);
    // About 60 queries were scheduled inside the stall; those over 15 ms late make it INVALID at p99.
    assert_true(r.overlatency_count >= 20);
    assert_false(r.valid);
    assert_true(r.nwarnings >= 1);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_lost_and_duplicates(void **state) {
    (void)state;
    // Samples the SUT never answers: the run gives up after the idle timeout and counts them lost.
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(1 * MS, &d);
    d->drop_every = 50;
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SERVER);
    s.target_qps = 2000;
    s.min_query_count = 500;
    s.min_duration_ns = 0;
    s.idle_timeout_ns = 300 * MS;
    dlp_lg_result r;
    int64_t t0 = dlp_now_ns();
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(dlp_now_ns() - t0 < 3000 * MS);
    assert_int_equal(r.samples_lost, r.samples_issued / 50);
    assert_int_equal(r.samples_lost + r.samples_by_outcome[DLP_LG_OK], r.samples_issued);
    assert_false(r.none_lost);
    assert_false(r.valid);
    int found = 0;
    for (int i = 0; i < r.nreasons; i++) found |= strstr(r.reasons[i], "never answered") != NULL;
    assert_true(found);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);  // answers the dropped ones now: the harness must ignore them safely

    // A sample answered twice is a SUT bug, reported.
    sut = delay_sut_new(0, &d);
    d->answer_twice_id = 7;
    fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_query_count = 64;
    s.min_duration_ns = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.duplicate_responses, 1);
    assert_false(r.valid);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void test_failures_and_max_queries(void **state) {
    (void)state;
    // An engine failing one call in 10: those samples are ERROR; INVALID unless the allowed fraction covers it.
    rate_engine e = {.service_ns = 100000, .fail_every = 10};
    dlp_lg_sut sut = rate_sut_new(&e, 1);
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SINGLE_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 200;
    s.sample_count = 100;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.samples_by_outcome[DLP_LG_ERROR] > 0);
    assert_int_equal(r.samples_by_outcome[DLP_LG_ERROR] + r.samples_by_outcome[DLP_LG_OK], 200);
    assert_false(r.valid);
    assert_non_null(strstr(r.reasons[r.nreasons - 1], "samples failed"));
    int64_t errors = r.samples_by_outcome[DLP_LG_ERROR];
    dlp_lg_result_free(&r);
    s.max_failed_fraction = 0.5;
    s.early_stopping = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.samples_by_outcome[DLP_LG_ERROR], errors);  // same sample seed, same samples
    assert_true(r.valid);
    dlp_lg_result_free(&r);
    // max_query_count stops issuing before the minimums: INVALID, saying why.
    s.max_failed_fraction = 0;
    e.fail_every = 0;
    s.min_duration_ns = 5000 * MS;
    s.max_query_count = 30;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.queries_issued, 30);
    assert_false(r.valid);
    assert_false(r.min_duration_met);
    assert_false(r.min_queries_met);
    assert_non_null(strstr(r.stop_reason, "max query count"));
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

static void on_trial(void *ctx, const dlp_lg_trial *t, int i) {
    (void)ctx;
    fprintf(stderr, "  trial %d: %.1f QPS -> %s (p99 %.2f ms, %.1f samples/s) %s\n", i, t->target_qps,
            t->valid ? "VALID" : "INVALID", t->p99_ns == INT64_MAX ? -1.0 : dlp_ns_to_ms(t->p99_ns),
            t->completed_samples_per_s, t->reason);
}

static void test_server_search(void **state) {
    (void)state;
    // One server of capacity 1000 samples/s (1 ms each, one at a time) and a loose 150 ms bound (threads on
    // this shared machine stall for tens of ms, so a tight bound would measure the machine, not the SUT).
    // Below capacity the 99th percentile stays far under 150 ms; past it the backlog grows by (rate - 1000)
    // samples per second of schedule, i.e. by 1 ms of latency per sample: at 1.25x capacity over a >= 1 s
    // trial the late samples pass 250 ms. So the highest VALID rate must lie within [0.75, 1.25] x capacity.
    // Trials share one schedule seed, so validity falls monotonically with the rate.
    const double cap = 1000;
    delay_sut *d;
    dlp_lg_sut sut = delay_sut_new(0, &d);
    d->service_ns = 1000000;
    dlp_lg_settings s;
    fast_settings(&s, DLP_LG_SERVER);
    s.target_latency_ns = 150 * MS;
    s.min_query_count = 500;
    s.min_duration_ns = 1000 * MS;
    dlp_lg_search_cfg c = {.start_qps = 500, .tolerance = 0.05, .budget_ns = 20000 * MS, .max_trials = 20,
                           .on_trial = on_trial};
    dlp_lg_search_result sr;
    int64_t t0 = dlp_now_ns();
    assert_int_equal(dlp_lg_search(&s, &sut, &c, &sr), DLP_OK);
    double took = dlp_ns_to_s(dlp_now_ns() - t0);
    fprintf(stderr, "  search: best %.1f QPS, lowest INVALID %.1f, %d trials, %.1f s: %s\n", sr.best_qps, sr.hi_qps,
            sr.ntrials, took, sr.stop_reason);
    assert_true(sr.found);
    assert_true(sr.converged);
    assert_true(sr.best_qps >= 0.75 * cap && sr.best_qps <= 1.25 * cap);
    assert_true(sr.hi_qps > sr.best_qps && sr.hi_qps / sr.best_qps - 1 <= 0.05 + 1e-9);
    assert_true(sr.best.valid);
    assert_true(fabs(sr.best.settings.target_qps - sr.best_qps) < 1e-9);
    for (int i = 0; i < sr.ntrials; i++) {
        if (sr.trials[i].target_qps >= 1.5 * cap) assert_false(sr.trials[i].valid);
        assert_int_equal(sr.trials[i].valid, sr.trials[i].target_qps <= sr.best_qps);  // monotone
        if (sr.trials[i].valid) assert_true(sr.trials[i].p99_ns <= 150 * MS);
        // Overloaded trials complete at the SUT's capacity: the known 1000 samples/s.
        if (sr.trials[i].target_qps >= 1.25 * cap)
            assert_true(sr.trials[i].completed_samples_per_s > 0.9 * cap &&
                        sr.trials[i].completed_samples_per_s < 1.02 * cap);
    }
    assert_true(took < 20.5);
    json_t *j = dlp_lg_search_to_json(&sr);
    assert_int_equal((int)json_array_size(json_object_get(j, "trials")), sr.ntrials);
    json_decref(j);
    dlp_lg_search_result_free(&sr);
    // A budget too small for a second trial stops after the first, saying so.
    c.budget_ns = 100 * MS;
    assert_int_equal(dlp_lg_search(&s, &sut, &c, &sr), DLP_OK);
    assert_int_equal(sr.ntrials, 1);
    assert_non_null(strstr(sr.stop_reason, "budget"));
    dlp_lg_search_result_free(&sr);
    dlp_lg_sut_destroy(&sut);
}

static void test_url_parse(void **state) {
    (void)state;
    static const struct { const char *url; int ok; const char *host, *port, *path; } rows[] = {
        {"http://127.0.0.1:8080/v1/classify", 1, "127.0.0.1", "8080", "/v1/classify"},
        {"http://localhost/x", 1, "localhost", "80", "/x"},
        {"http://[::1]:9000", 1, "::1", "9000", "/"},
        {"HTTP://host:1/", 1, "host", "1", "/"},
        {"https://host/", 0, NULL, NULL, NULL},
        {"ftp://host/", 0, NULL, NULL, NULL},
        {"http://host:0/", 0, NULL, NULL, NULL},
        {"http://host:99999/", 0, NULL, NULL, NULL},
        {"http://:80/", 0, NULL, NULL, NULL},
        {"http://[::1/", 0, NULL, NULL, NULL},
        {"http://", 0, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_http_url u;
        dlp_status st = dlp_http_url_parse(rows[i].url, &u);
        assert_int_equal(st == DLP_OK, rows[i].ok);
        if (rows[i].ok) {
            assert_string_equal(u.host, rows[i].host);
            assert_string_equal(u.port, rows[i].port);
            assert_string_equal(u.path, rows[i].path);
        }
    }
    dlp_err_clear();
}

// LoadGen's config files: precedence (model.scenario > *.scenario > model.* > *.*, later lines win), units
// (ms, percent), the keys of other scenarios left alone, and errors naming the line.
static void test_user_conf(void **state) {
    (void)state;
    static const char conf[] =
        "# comment line\n"
        "*.*.min_duration = 100       # ms\n"
        "resnet50.*.min_duration = 200\n"
        "*.Server.min_duration = 300\n"
        "resnet50.Server.min_duration = 400\n"
        "resnet50.Server.min_duration = 450\n"   // the later line wins
        "*.Server.target_qps = 123.5\n"
        "resnet50.Server.target_latency = 7\n"   // ms
        "*.Server.target_latency_percentile = 97\n"
        "*.Offline.target_qps = 9999\n"           // another scenario: not read
        "bert.Server.min_query_count = 5\n"       // another model: not read
        "*.*.schedule_rng_seed = 0x10\n"
        "resnet50.Server.coalesce_queries = 1\n"; // a LoadGen key dlperf does not use
    static const struct {
        const char *model;
        dlp_lg_scenario sc;
        int64_t min_dur_ms;
        double qps;
    } rows[] = {
        {"resnet50", DLP_LG_SERVER, 450, 123.5},
        {"other", DLP_LG_SERVER, 300, 123.5},
        {"resnet50", DLP_LG_OFFLINE, 200, 9999},
        {"other", DLP_LG_SINGLE_STREAM, 100, 10},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, rows[i].sc);
        unsigned mask = 0;
        char ignored[256];
        assert_int_equal(dlp_lg_conf_apply(conf, rows[i].model, &s, &mask, ignored, sizeof ignored), DLP_OK);
        assert_int_equal(s.min_duration_ns, rows[i].min_dur_ms * MS);
        assert_true(fabs(s.target_qps - rows[i].qps) < 1e-9);
        assert_int_equal(s.schedule_seed, 16);
        assert_true(mask & DLP_LG_CONF_MIN_DURATION);
        assert_non_null(strstr(ignored, "resnet50.Server.coalesce_queries"));
        if (rows[i].sc == DLP_LG_SERVER) {
            assert_true(fabs(s.target_latency_percentile - 0.97) < 1e-12);
            if (strcmp(rows[i].model, "resnet50") == 0) assert_int_equal(s.target_latency_ns, 7 * MS);
            assert_int_not_equal(s.min_query_count, 5);
        }
    }
    static const char *const bad[] = {"a.b.c = x\n", "a.b.c 5\n", "nodots = 5\n", "*.Server.mode = 3\n"};
    for (size_t i = 0; i < 4; i++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, DLP_LG_SERVER);
        unsigned mask;
        assert_int_not_equal(dlp_lg_conf_apply(bad[i], "resnet50", &s, &mask, NULL, 0), DLP_OK);
        dlp_err_clear();
    }
}

// MLPerf's minimums: our defaults break them (and say which), dlp_lg_settings_mlperf meets them.
static void test_mlperf_rules(void **state) {
    (void)state;
    for (int sc = 0; sc < 4; sc++) {
        dlp_lg_settings s;
        dlp_lg_settings_default(&s, (dlp_lg_scenario)sc);
        char lines[8][160];
        int n = dlp_lg_settings_mlperf_breaks(&s, lines, 8);
        assert_true(n >= 1);
        assert_non_null(strstr(lines[0], "min_duration 10000 ms < 600000 ms"));
        dlp_lg_settings_mlperf(&s);
        assert_int_equal(dlp_lg_settings_mlperf_breaks(&s, lines, 8), 0);
        if (sc == DLP_LG_OFFLINE) assert_int_equal(s.min_query_count, 24576);
        if (sc == DLP_LG_SERVER) assert_int_equal(s.target_latency_ns, 15 * MS);
        s.target_latency_ns = 20 * MS;
        if (sc == DLP_LG_SERVER) {
            assert_int_equal(dlp_lg_settings_mlperf_breaks(&s, lines, 8), 1);
            assert_non_null(strstr(lines[0], "target_latency 20.000 ms > 15 ms"));
        }
    }
}

// Helper mode for bench/loadgen_vs_mlperf.sh: `test_loadgen --summarize P < latencies_ns` prints, as JSON, what
// dlperf's arithmetic makes of those sample latencies (the summary's block and early stopping at percentile P),
// to compare with real LoadGen's summary of the same samples.
static int summarize_main(double p) {
    size_t n = 0, cap = 1024;
    int64_t *lat = malloc(cap * sizeof *lat);
    long long v;
    while (lat && scanf("%lld", &v) == 1) {
        if (n == cap) {
            int64_t *nl = realloc(lat, (cap *= 2) * sizeof *lat);
            if (!nl) break;
            lat = nl;
        }
        lat[n++] = v;
    }
    if (!lat) return 1;
    dlp_lg_latency l;
    dlp_lg_latency_summarize(lat, n, &l);  // sorts
    int64_t est = 0, disc = 0, need = 0;
    int ok = dlp_lg_es_estimate(lat, (int64_t)n, p, 0.99, &est, &disc, &need);
    printf("{\"count\": %lld, \"min\": %lld, \"max\": %lld, \"mean\": %lld, \"p50\": %lld, \"p90\": %lld, \"p95\": %lld, "
           "\"p97\": %lld, \"p99\": %lld, \"p99.9\": %lld, \"es_ok\": %d, \"es_estimate\": %lld, \"es_discard\": %lld, "
           "\"es_need\": %lld}\n", (long long)l.count, (long long)l.min_ns, (long long)l.max_ns, (long long)l.mean_ns,
           (long long)l.p50_ns, (long long)l.p90_ns, (long long)l.p95_ns, (long long)l.p97_ns, (long long)l.p99_ns,
           (long long)l.p999_ns, ok, (long long)est, (long long)disc, (long long)need);
    free(lat);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--summarize") == 0) return summarize_main(atof(argv[2]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_poisson_schedule),
        cmocka_unit_test(test_early_stopping_math),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_scenario_registry),
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test(test_single_stream),
        cmocka_unit_test(test_multi_stream),
        cmocka_unit_test(test_offline),
        cmocka_unit_test(test_server_valid_invalid),
        cmocka_unit_test(test_latency_from_schedule),
        cmocka_unit_test(test_lost_and_duplicates),
        cmocka_unit_test(test_failures_and_max_queries),
        cmocka_unit_test(test_server_search),
        cmocka_unit_test(test_user_conf),
        cmocka_unit_test(test_mlperf_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
