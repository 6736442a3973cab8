// loadgen/run: the harness — issues queries on the scenario's schedule from the calling thread, records each
// response (from the SUT's threads) against its query's scheduled time, then applies MLPerf's rules.
//
// Threads: the caller is the issue thread; it only sleeps until the next scheduled time and hands samples to
// the SUT (issue_query must not block). Responses arrive on the SUT's own threads and take one short lock.
// Latency is measured from the *scheduled* time, so a late issue counts against the SUT, as in MLPerf.
// If a SUT stops answering, the run gives up after idle_timeout and counts the rest as lost; the records stay
// alive (and late answers are ignored) until the last issued sample has been answered or the SUT destroyed.
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/clock.h"
#include "core/rng.h"
#include "loadgen/loadgen.h"

#define LG_BLOCK_SHIFT 12
#define LG_BLOCK ((int64_t)1 << LG_BLOCK_SHIFT)
#define LG_MAX_BLOCKS ((int64_t)1 << 15)  // 2^27 queries / samples per run at most

typedef struct lg_query {
    int64_t sched_ns, issue_ns, done_ns;  // absolute CLOCK_MONOTONIC
    int64_t first_sample;
    int32_t nsamples, remaining, failed;
} lg_query;

typedef struct lg_sample {
    int64_t done_ns;
    int64_t query;
    atomic_char answered;  // set once by the first answer (a second one is a duplicate)
    char recorded;         // the answer was recorded (before the harness stopped listening)
    char outcome;
} lg_sample;

typedef struct lg_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lg_query **qb;      // blocks of LG_BLOCK records; pointers never move
    lg_sample **sb;
    int64_t nq, ns;     // issued (written by the issue thread under mu)
    int64_t answered;   // distinct samples answered (recorded or not)
    int64_t recorded;
    int64_t queries_done;
    int64_t duplicates, unknown;
    int64_t last_progress_ns;
    int abandoned;      // the harness stopped recording
    int harness_done;   // the harness no longer touches the records: the last answer frees
    dlp_lg_done done;
} lg_run;

static lg_query *qrec(lg_run *r, int64_t i) { return &r->qb[i >> LG_BLOCK_SHIFT][i & (LG_BLOCK - 1)]; }
static lg_sample *srec(lg_run *r, int64_t i) { return &r->sb[i >> LG_BLOCK_SHIFT][i & (LG_BLOCK - 1)]; }

static void run_free(lg_run *r) {
    for (int64_t b = 0; b < LG_MAX_BLOCKS && r->qb[b]; b++) free(r->qb[b]);
    for (int64_t b = 0; b < LG_MAX_BLOCKS && r->sb[b]; b++) free(r->sb[b]);
    free(r->qb);
    free(r->sb);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

// Makes room for record index i (issue thread, under mu).
static dlp_status ensure_block(void **blocks, int64_t i, size_t rec_size) {
    int64_t b = i >> LG_BLOCK_SHIFT;
    if (b >= LG_MAX_BLOCKS) return DLP_ERR(DLP_ERR_INVALID, "a run is limited to %lld queries and samples",
                                           (long long)(LG_MAX_BLOCKS * LG_BLOCK));
    if (!blocks[b]) {
        blocks[b] = calloc((size_t)LG_BLOCK, rec_size);
        if (!blocks[b]) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for loadgen records");
    }
    return DLP_OK;
}

static void on_done(void *ctx, const dlp_lg_response *resp, size_t n) {
    lg_run *r = ctx;
    int64_t now = dlp_now_ns();
    int free_now = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < n; k++) {
        uint64_t id = resp[k].id;
        if (id >= (uint64_t)r->ns) {
            r->unknown++;
            continue;
        }
        lg_sample *s = srec(r, (int64_t)id);
        if (atomic_exchange(&s->answered, 1)) {
            r->duplicates++;
            continue;
        }
        r->answered++;
        if (r->abandoned) continue;
        s->done_ns = now;
        s->outcome = (char)((unsigned)resp[k].outcome < DLP_LG_OUTCOME_COUNT ? resp[k].outcome : DLP_LG_ERROR);
        s->recorded = 1;
        r->recorded++;
        lg_query *q = qrec(r, s->query);
        if (s->outcome != DLP_LG_OK) q->failed++;
        if (now > q->done_ns) q->done_ns = now;
        if (--q->remaining == 0) r->queries_done++;
    }
    r->last_progress_ns = now;
    pthread_cond_broadcast(&r->cv);
    free_now = r->harness_done && r->answered == r->ns;
    pthread_mutex_unlock(&r->mu);
    if (free_now) run_free(r);
}

typedef struct lg_issuer {
    lg_run *r;
    const dlp_lg_sut *sut;
    dlp_rng rng;
    int64_t sample_count;
    dlp_lg_sample *buf;
    size_t buf_cap;
} lg_issuer;

// Creates query records for one query of n samples scheduled at sched_ns and hands it to the SUT.
static dlp_status issue_one(lg_issuer *is, int64_t sched_ns, int32_t n) {
    lg_run *r = is->r;
    if ((size_t)n > is->buf_cap) {
        dlp_lg_sample *nb = realloc(is->buf, (size_t)n * sizeof *nb);
        if (!nb) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a query of %d samples", n);
        is->buf = nb;
        is->buf_cap = (size_t)n;
    }
    pthread_mutex_lock(&r->mu);
    int64_t qi = r->nq, s0 = r->ns;
    dlp_status st = ensure_block((void **)r->qb, qi, sizeof(lg_query));
    for (int64_t j = 0; st == DLP_OK && j < n; j += LG_BLOCK) st = ensure_block((void **)r->sb, s0 + j, sizeof(lg_sample));
    if (st == DLP_OK) st = ensure_block((void **)r->sb, s0 + n - 1, sizeof(lg_sample));
    if (st != DLP_OK) {
        pthread_mutex_unlock(&r->mu);
        return st;
    }
    lg_query *q = qrec(r, qi);
    q->sched_ns = sched_ns;
    q->first_sample = s0;
    q->nsamples = n;
    q->remaining = n;
    for (int32_t j = 0; j < n; j++) {
        srec(r, s0 + j)->query = qi;
        is->buf[j].id = (uint64_t)(s0 + j);
        is->buf[j].index = (uint32_t)dlp_rng_below(&is->rng, (uint64_t)is->sample_count);
    }
    r->nq = qi + 1;
    r->ns = s0 + n;
    q->issue_ns = dlp_now_ns();
    pthread_mutex_unlock(&r->mu);

    dlp_status ist = is->sut->issue_query(is->sut->ctx, is->buf, (size_t)n, &r->done);
    if (ist != DLP_OK) {  // none taken: answer them ourselves, as failed
        dlp_lg_response *resp = malloc((size_t)n * sizeof *resp);
        if (!resp) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        for (int32_t j = 0; j < n; j++) resp[j] = (dlp_lg_response){is->buf[j].id, DLP_LG_ERROR, -1};
        on_done(r, resp, (size_t)n);
        free(resp);
        dlp_err_clear();
    }
    return DLP_OK;
}

// Waits until `until(r)` holds or nothing was answered for idle_ns. Returns 0 when it gave up. Under mu.
static int wait_progress(lg_run *r, int64_t target_done_queries, int64_t target_answered, int64_t idle_ns) {
    while (r->queries_done < target_done_queries || r->recorded < target_answered) {
        int64_t now = dlp_now_ns();
        int64_t deadline = r->last_progress_ns + idle_ns;
        if (now >= deadline) return 0;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t abs_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + (deadline - now);
        ts.tv_sec = abs_ns / 1000000000LL;
        ts.tv_nsec = abs_ns % 1000000000LL;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    return 1;
}

static void add_reason(dlp_lg_result *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(dlp_lg_result *o, const char *fmt, ...) {
    if (o->nreasons >= DLP_LG_MAX_REASONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->reasons[o->nreasons++], sizeof o->reasons[0], fmt, ap);
    va_end(ap);
}

static void add_warning(dlp_lg_result *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(dlp_lg_result *o, const char *fmt, ...) {
    if (o->nwarnings >= 4) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->warnings[o->nwarnings++], sizeof o->warnings[0], fmt, ap);
    va_end(ap);
}

// Builds the statistics and the verdict from the records (no answer is recorded any more).
static dlp_status analyze(lg_run *r, const dlp_lg_settings *s, int64_t t0, dlp_lg_result *o) {
    int64_t nq = r->nq, ns = r->ns;
    o->queries_issued = nq;
    o->samples_issued = ns;
    o->duplicate_responses = r->duplicates + r->unknown;
    int64_t *ok_lat = malloc((size_t)(ns ? ns : 1) * sizeof(int64_t));
    int64_t *all_lat = malloc((size_t)(ns ? ns : 1) * sizeof(int64_t));
    int64_t *q_lat = malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    int64_t *q_all = malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    int64_t *lag = malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    if (!ok_lat || !all_lat || !q_lat || !q_all || !lag) {
        free(ok_lat), free(all_lat), free(q_lat), free(q_all), free(lag);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for latency statistics");
    }
    int64_t nok = 0, nall = 0, nqok = 0, nqall = 0, last_done = t0, over = 0;
    for (int64_t qi = 0; qi < nq; qi++) {
        lg_query *q = qrec(r, qi);
        lag[qi] = q->issue_ns - q->sched_ns;
        int q_failed = 0;
        for (int32_t j = 0; j < q->nsamples; j++) {
            lg_sample *sm = srec(r, q->first_sample + j);
            int64_t lat;
            if (!sm->recorded) {
                o->samples_lost++;
                q_failed = 1;
                lat = INT64_MAX;
            } else {
                o->samples_completed++;
                o->samples_by_outcome[(int)sm->outcome]++;
                if (sm->done_ns > last_done) last_done = sm->done_ns;
                if (sm->outcome == DLP_LG_OK) {
                    lat = sm->done_ns - q->sched_ns;
                    ok_lat[nok++] = lat;
                } else {
                    q_failed = 1;
                    lat = INT64_MAX;
                }
            }
            all_lat[nall++] = lat;
            if (lat > s->target_latency_ns) over++;
        }
        int64_t ql = q_failed ? INT64_MAX : q->done_ns - q->sched_ns;
        if (!q_failed) q_lat[nqok++] = ql;
        q_all[nqall++] = ql;
    }
    o->overlatency_count = over;
    dlp_lg_latency_summarize(ok_lat, (size_t)nok, &o->sample_latency);
    dlp_lg_latency_summarize(q_lat, (size_t)nqok, &o->query_latency);
    dlp_lg_latency_summarize(lag, (size_t)nq, &o->issue_lag);
    dlp_lg_latency tmp;
    double p = s->target_latency_percentile;
    int ms = s->scenario == DLP_LG_MULTI_STREAM;
    if (ms) {
        dlp_lg_latency_summarize(q_all, (size_t)nqall, &tmp);
        o->target_percentile_ns = dlp_stats_rank_i64(q_all, (size_t)nqall, p);
    } else {
        dlp_lg_latency_summarize(all_lat, (size_t)nall, &tmp);  // sorts all_lat
        o->target_percentile_ns = dlp_stats_rank_i64(all_lat, (size_t)nall, p);
    }
    o->duration_ns = last_done - t0;
    if (nq > 0) {
        lg_query *lq = qrec(r, nq - 1);
        o->last_scheduled_ns = lq->sched_ns - t0;
        o->last_issued_ns = lq->issue_ns - t0;
    }
    int64_t failed = o->samples_by_outcome[DLP_LG_REJECTED] + o->samples_by_outcome[DLP_LG_TIMEOUT] +
                     o->samples_by_outcome[DLP_LG_ERROR];
    double dur_s = dlp_ns_to_s(o->duration_ns);
    o->completed_samples_per_s = (ns > 1 && dur_s > 0) ? (double)(ns - 1) / dur_s : 0;
    if (s->scenario == DLP_LG_SERVER && o->last_scheduled_ns > 0)
        o->scheduled_samples_per_s = (double)(ns - 1) / dlp_ns_to_s(o->last_scheduled_ns);
    if (s->scenario == DLP_LG_SINGLE_STREAM) {
        if (o->last_issued_ns > 0) o->qps_with_overhead = (double)(nq - 1) / dlp_ns_to_s(o->last_issued_ns);
        if (o->sample_latency.mean_ns > 0) o->qps_without_overhead = 1e9 / (double)o->sample_latency.mean_ns;
    }

    // --- the verdict, rule by rule (MLPerf's PerformanceSummary) ---
    switch (s->scenario) {
    case DLP_LG_SERVER: o->min_duration_met = o->last_scheduled_ns >= s->min_duration_ns; break;
    case DLP_LG_OFFLINE: o->min_duration_met = o->duration_ns >= s->min_duration_ns; break;
    default: o->min_duration_met = o->last_issued_ns >= s->min_duration_ns; break;
    }
    o->min_queries_met = (s->scenario == DLP_LG_OFFLINE ? ns : nq) >= s->min_query_count;
    o->perf_constraints_met = 1;
    if (s->scenario == DLP_LG_SERVER && o->target_percentile_ns > s->target_latency_ns) {
        o->perf_constraints_met = 0;
        if (o->target_percentile_ns == INT64_MAX)
            add_reason(o, "%.1fth percentile latency is unbounded: %lld of %lld samples failed or were lost; reduce "
                       "the target QPS", p * 100, (long long)(failed + o->samples_lost), (long long)ns);
        else
            add_reason(o, "%.1fth percentile latency %.3f ms exceeds the bound %.3f ms (%lld of %lld samples late); "
                       "reduce the target QPS to improve latency", p * 100, dlp_ns_to_ms(o->target_percentile_ns),
                       dlp_ns_to_ms(s->target_latency_ns), (long long)over, (long long)ns);
    }
    o->early_stopping_met = 1;
    o->es_estimate_ns = 0;
    if (s->early_stopping && s->scenario != DLP_LG_OFFLINE) {
        const double conf = 0.99;
        if (s->scenario == DLP_LG_SERVER) {
            int64_t h = dlp_lg_es_min_passing(over, p, conf);
            if (ns >= h + over) {
                snprintf(o->early_stopping_text, sizeof o->early_stopping_text, " * Run successful.");
            } else {
                o->early_stopping_met = 0;
                snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
                         " * Run unsuccessful.\n * Processed %lld queries.\n * Would need to run at least %lld more "
                         "queries,\n with the run being successful if every additional\n query were under latency.",
                         (long long)ns, (long long)(h + over - ns));
                add_reason(o, "early stopping: %lld queries with %lld over the bound cannot show the %.1fth "
                           "percentile is under it with 99%% confidence; run at least %lld more queries",
                           (long long)ns, (long long)over, p * 100, (long long)(h + over - ns));
            }
        } else {
            int64_t *sorted = ms ? q_all : all_lat;  // ascending, failures at the top
            int64_t n = ms ? nqall : nall;
            int64_t est = 0, disc = 0, need = 0;
            if (dlp_lg_es_estimate(sorted, n, p, conf, &est, &disc, &need)) {
                o->es_estimate_ns = est;
                snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
                         " * Processed at least %lld queries (%lld).\n * Would discard %lld highest latency queries.\n"
                         " * Early stopping %.0fth percentile estimate: %lld", (long long)need, (long long)n,
                         (long long)disc, p * 100, (long long)(est == INT64_MAX ? -1 : est));
            } else {
                o->early_stopping_met = 0;
                snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
                         " * Only processed %lld queries.\n * Need to process at least %lld queries for early stopping.",
                         (long long)n, (long long)need);
                add_reason(o, "early stopping needs at least %lld queries at the %.0fth percentile, only %lld ran; "
                           "raise --min-queries or --min-duration", (long long)need, p * 100, (long long)n);
            }
        }
    }
    if (!o->min_duration_met) {
        const char *what = s->scenario == DLP_LG_OFFLINE ? "the run" : s->scenario == DLP_LG_SERVER ? "the schedule"
                                                                                                    : "issuing";
        add_reason(o, "min duration not met: %s lasted %.3f s of %.3f s (%s)", what,
                   dlp_ns_to_s(s->scenario == DLP_LG_OFFLINE ? o->duration_ns
                               : s->scenario == DLP_LG_SERVER ? o->last_scheduled_ns : o->last_issued_ns),
                   dlp_ns_to_s(s->min_duration_ns), o->stop_reason[0] ? o->stop_reason : "stopped early");
    }
    if (!o->min_queries_met)
        add_reason(o, "min queries not met: %lld of %lld %s (%s)", (long long)(s->scenario == DLP_LG_OFFLINE ? ns : nq),
                   (long long)s->min_query_count, s->scenario == DLP_LG_OFFLINE ? "samples" : "queries",
                   o->stop_reason[0] ? o->stop_reason : "stopped early");
    o->none_lost = o->samples_lost == 0;
    if (o->samples_lost > 0)
        add_reason(o, "%lld samples were never answered (no response for %.1f s): the SUT lost them",
                   (long long)o->samples_lost, dlp_ns_to_s(s->idle_timeout_ns));
    if (failed > (int64_t)floor(s->max_failed_fraction * (double)ns))
        add_reason(o, "%lld of %lld samples failed (rejected %lld, timeout %lld, error %lld); allowed %.4g%%",
                   (long long)failed, (long long)ns, (long long)o->samples_by_outcome[DLP_LG_REJECTED],
                   (long long)o->samples_by_outcome[DLP_LG_TIMEOUT], (long long)o->samples_by_outcome[DLP_LG_ERROR],
                   s->max_failed_fraction * 100);
    if (o->duplicate_responses > 0)
        add_reason(o, "the SUT answered %lld samples twice or with unknown ids (a SUT bug)",
                   (long long)o->duplicate_responses);
    if (ns == 0) add_reason(o, "no query was issued");
    o->valid = o->nreasons == 0;

    if (s->scenario == DLP_LG_SERVER && o->issue_lag.p99_ns > s->target_latency_ns / 10)
        add_warning(o, "the loadgen issued late (p99 %.3f ms, max %.3f ms behind schedule): the machine is "
                    "overloaded; the lateness is counted in the latencies", dlp_ns_to_ms(o->issue_lag.p99_ns),
                    dlp_ns_to_ms(o->issue_lag.max_ns));

    switch (s->scenario) {
    case DLP_LG_SINGLE_STREAM:
        o->metric_name = "90th percentile latency (ns)";
        o->metric_value = (double)dlp_stats_rank_i64(ok_lat, (size_t)nok, p);
        break;
    case DLP_LG_MULTI_STREAM:
        o->metric_name = "99th percentile latency (ns)";
        o->metric_value = (double)dlp_stats_rank_i64(q_lat, (size_t)nqok, p);
        break;
    case DLP_LG_SERVER:
        o->metric_name = "Scheduled samples per second";
        o->metric_value = o->scheduled_samples_per_s;
        break;
    case DLP_LG_OFFLINE:
        o->metric_name = "Samples per second";
        o->metric_value = dur_s > 0 ? (double)o->samples_by_outcome[DLP_LG_OK] / dur_s : 0;
        break;
    default: break;
    }
    if (s->scenario == DLP_LG_SINGLE_STREAM && fabs(p - 0.90) > 1e-9) o->metric_name = "target percentile latency (ns)";
    if (s->scenario == DLP_LG_MULTI_STREAM && fabs(p - 0.99) > 1e-9) o->metric_name = "target percentile latency (ns)";
    free(ok_lat), free(all_lat), free(q_lat), free(q_all), free(lag);
    return DLP_OK;
}

// How many samples an Offline run issues: enough for min_duration at the expected rate (x1.1, as MLPerf),
// at least min_query_count.
static int64_t offline_samples(const dlp_lg_settings *s) {
    double want = ceil(s->target_qps * dlp_ns_to_s(s->min_duration_ns) * 1.1 - 1e-6);  // 1e-6: float noise
    int64_t n = want > 1e12 ? (int64_t)1e12 : (int64_t)want;
    if (n < s->min_query_count) n = s->min_query_count;
    if (s->max_query_count > 0 && n > s->max_query_count) n = s->max_query_count;
    if (n < 1) n = 1;
    if (n > LG_MAX_BLOCKS * LG_BLOCK / 2) n = LG_MAX_BLOCKS * LG_BLOCK / 2;
    return n;
}

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
        if (n >= LG_MAX_BLOCKS * LG_BLOCK) break;
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

dlp_status dlp_lg_run(const dlp_lg_settings *s, const dlp_lg_sut *sut, dlp_lg_result *o) {
    memset(o, 0, sizeof *o);
    DLP_CHECK(dlp_lg_settings_check(s));
    if (!sut || !sut->issue_query) return DLP_ERR(DLP_ERR_INVALID, "the SUT has no issue_query");
    o->settings = *s;
    snprintf(o->sut_name, sizeof o->sut_name, "%s", sut->name ? sut->name : "sut");

    lg_run *r = calloc(1, sizeof *r);
    DLP_TRY_ALLOC(r);
    r->qb = calloc((size_t)LG_MAX_BLOCKS, sizeof *r->qb);
    r->sb = calloc((size_t)LG_MAX_BLOCKS, sizeof *r->sb);
    if (!r->qb || !r->sb) {
        free(r->qb), free(r->sb), free(r);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for loadgen records");
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->done.fn = on_done;
    r->done.ctx = r;

    lg_issuer is = {.r = r, .sut = sut, .sample_count = s->sample_count};
    dlp_rng_init(&is.rng, s->sample_seed, 0x5a3b1e);
    dlp_status st = DLP_OK;
    int64_t *sched = NULL, nsched = 0;
    if (s->scenario == DLP_LG_SERVER) st = server_schedule(s, &sched, &nsched);

    int64_t t0 = dlp_now_ns() + 1000000;  // start 1 ms ahead so the first arrival is on time
    r->last_progress_ns = t0;
    int gave_up = 0;
    if (st == DLP_OK) switch (s->scenario) {
        case DLP_LG_SERVER:
            for (int64_t i = 0; i < nsched && st == DLP_OK; i++) {
                dlp_sleep_until_ns(t0 + sched[i]);
                st = issue_one(&is, t0 + sched[i], 1);
            }
            if (s->max_query_count > 0 && nsched >= s->max_query_count)
                snprintf(o->stop_reason, sizeof o->stop_reason, "max query count %lld reached",
                         (long long)s->max_query_count);
            else if (s->max_duration_ns > 0 && nsched > 0 && sched[nsched - 1] < s->min_duration_ns)
                snprintf(o->stop_reason, sizeof o->stop_reason, "max duration %.3f s reached",
                         dlp_ns_to_s(s->max_duration_ns));
            break;
        case DLP_LG_OFFLINE: {
            int64_t total = offline_samples(s);
            int64_t per = s->offline_batch > 0 ? s->offline_batch : total;
            dlp_sleep_until_ns(t0);
            for (int64_t k = 0; k < total && st == DLP_OK; k += per)
                st = issue_one(&is, t0, (int32_t)(total - k < per ? total - k : per));
            break;
        }
        default: {  // SingleStream, MultiStream: the next query goes out when the previous one is answered
            dlp_sleep_until_ns(t0);
            for (;;) {
                int64_t nq = r->nq, now = dlp_now_ns();
                int64_t last_issue = nq > 0 ? qrec(r, nq - 1)->issue_ns - t0 : 0;
                if (nq >= s->min_query_count && nq > 0 && last_issue >= s->min_duration_ns) {
                    snprintf(o->stop_reason, sizeof o->stop_reason, "min duration and min queries met");
                    break;
                }
                if (s->max_query_count > 0 && nq >= s->max_query_count) {
                    snprintf(o->stop_reason, sizeof o->stop_reason, "max query count %lld reached",
                             (long long)s->max_query_count);
                    break;
                }
                if (s->max_duration_ns > 0 && now - t0 >= s->max_duration_ns) {
                    snprintf(o->stop_reason, sizeof o->stop_reason, "max duration %.3f s reached",
                             dlp_ns_to_s(s->max_duration_ns));
                    break;
                }
                st = issue_one(&is, now, s->samples_per_query);
                if (st != DLP_OK) break;
                pthread_mutex_lock(&r->mu);
                int ok = wait_progress(r, r->nq, 0, s->idle_timeout_ns);
                pthread_mutex_unlock(&r->mu);
                if (!ok) {
                    gave_up = 1;
                    snprintf(o->stop_reason, sizeof o->stop_reason, "no response for %.1f s",
                             dlp_ns_to_s(s->idle_timeout_ns));
                    break;
                }
            }
            break;
        }
        }
    if (st == DLP_OK && o->stop_reason[0] == '\0') snprintf(o->stop_reason, sizeof o->stop_reason,
                                                            "min duration and min queries met");
    if (sut->flush) sut->flush(sut->ctx);

    // Wait for the answers still out, giving up after idle_timeout without progress.
    pthread_mutex_lock(&r->mu);
    if (!gave_up && !wait_progress(r, 0, r->ns, s->idle_timeout_ns) && !o->stop_reason[0])
        snprintf(o->stop_reason, sizeof o->stop_reason, "no response for %.1f s", dlp_ns_to_s(s->idle_timeout_ns));
    r->abandoned = 1;  // answers from now on are counted but not recorded
    pthread_mutex_unlock(&r->mu);

    if (st == DLP_OK) st = analyze(r, s, t0, o);
    if (sut->stats_json) o->sut_stats = sut->stats_json(sut->ctx);
    free(sched);
    free(is.buf);

    pthread_mutex_lock(&r->mu);
    r->harness_done = 1;
    int free_now = r->answered == r->ns;
    pthread_mutex_unlock(&r->mu);
    if (free_now) run_free(r);
    return st;
}

void dlp_lg_result_free(dlp_lg_result *r) {
    if (!r) return;
    json_decref(r->sut_stats);
    r->sut_stats = NULL;
}
