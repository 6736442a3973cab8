// loadgen/run: the harness — runs the scenario's issue loop (loadgen/scenario_*.c) on the calling thread,
// records each response (from the SUT's threads) against its query's scheduled time, then applies MLPerf's
// rules: the generic ones here, the scenario's own through its table.
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
#include "loadgen/scenario.h"

#define LG_BLOCK_SHIFT 12
#define LG_BLOCK ((int64_t)1 << LG_BLOCK_SHIFT)
#define LG_MAX_BLOCKS ((int64_t)1 << 15)  // 2^27 queries / samples per run at most
_Static_assert(LG_MAX_BLOCKS * LG_BLOCK == DLP_LG_MAX_RECORDS, "DLP_LG_MAX_RECORDS is the records' capacity");

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
    uint32_t index;        // which sample of the library it carried
    int32_t top1;          // the SUT's answer (-1: none)
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
    int64_t failed;     // recorded answers that were not OK (for the progress line)
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
        s->top1 = resp[k].top1;
        r->recorded++;
        if (s->outcome != DLP_LG_OK) r->failed++;
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

struct dlp_lg_issuer {
    lg_run *r;
    const dlp_lg_sut *sut;
    const dlp_lg_settings *s;
    dlp_rng rng;
    int64_t sample_count;
    dlp_lg_sample *buf;
    size_t buf_cap;
    int64_t t0;    // the run's start (absolute)
    int started;
    int gave_up;   // dlp_lg_wait_answered timed out
};

int64_t dlp_lg_issuer_start(dlp_lg_issuer *is) {
    is->t0 = dlp_now_ns() + 1000000;  // start 1 ms ahead so the first arrival is on time
    is->r->last_progress_ns = is->t0;
    is->started = 1;
    return is->t0;
}

// Creates query records for one query of n samples scheduled at sched_ns and hands it to the SUT.
dlp_status dlp_lg_issue(dlp_lg_issuer *is, int64_t sched_ns, int32_t n) {
    lg_run *r = is->r;
    if (!is->started) dlp_lg_issuer_start(is);  // a scenario that did not fix t0 starts now
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
        lg_sample *sm = srec(r, s0 + j);
        sm->query = qi;
        sm->top1 = -1;
        is->buf[j].id = (uint64_t)(s0 + j);
        // AccuracyOnly walks the library in order (each sample once); PerformanceOnly draws at random.
        is->buf[j].index = is->s->mode == DLP_LG_ACCURACY
                               ? (uint32_t)((s0 + j) % is->sample_count)
                               : (uint32_t)dlp_rng_below(&is->rng, (uint64_t)is->sample_count);
        sm->index = is->buf[j].index;
    }
    r->nq = qi + 1;
    r->ns = s0 + n;
    q->issue_ns = dlp_now_ns();
    pthread_mutex_unlock(&r->mu);

    dlp_status ist = is->sut->issue_query(is->sut->ctx, is->buf, (size_t)n, &r->done);
    if (ist != DLP_OK) {  // none taken: answer them ourselves, as failed
        dlp_lg_response *resp = malloc((size_t)n * sizeof *resp);
        if (!resp) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        for (int32_t j = 0; j < n; j++) resp[j] = (dlp_lg_response){.id = is->buf[j].id, .outcome = DLP_LG_ERROR, .top1 = -1};
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
        dlp_cond_wait_until(&r->cv, &r->mu, deadline);
    }
    return 1;
}

int64_t dlp_lg_issued_queries(const dlp_lg_issuer *is) { return is->r->nq; }

int64_t dlp_lg_last_issue_ns(const dlp_lg_issuer *is) {
    return is->r->nq > 0 ? qrec(is->r, is->r->nq - 1)->issue_ns : 0;
}

int dlp_lg_wait_answered(dlp_lg_issuer *is) {
    lg_run *r = is->r;
    pthread_mutex_lock(&r->mu);
    int ok = wait_progress(r, r->nq, 0, is->s->idle_timeout_ns);
    pthread_mutex_unlock(&r->mu);
    if (!ok) is->gave_up = 1;
    return ok;
}

dlp_status dlp_lg_issue_back_to_back(dlp_lg_issuer *is, const dlp_lg_settings *s, dlp_lg_result *o) {
    int64_t t0 = dlp_lg_issuer_start(is);
    dlp_sleep_until_ns(t0);
    for (;;) {
        int64_t nq = dlp_lg_issued_queries(is), now = dlp_now_ns();
        int64_t last_issue = nq > 0 ? dlp_lg_last_issue_ns(is) - t0 : 0;
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
        dlp_status st = dlp_lg_issue(is, now, s->samples_per_query);
        if (st != DLP_OK) return st;
        if (!dlp_lg_wait_answered(is)) {
            snprintf(o->stop_reason, sizeof o->stop_reason, "no response for %.1f s",
                     dlp_ns_to_s(s->idle_timeout_ns));
            break;
        }
    }
    return DLP_OK;
}

void dlp_lg_add_reason(dlp_lg_result *o, const char *fmt, ...) {
    if (o->nreasons >= DLP_LG_MAX_REASONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->reasons[o->nreasons++], sizeof o->reasons[0], fmt, ap);
    va_end(ap);
}

void dlp_lg_add_warning(dlp_lg_result *o, const char *fmt, ...) {
    if (o->nwarnings >= 4) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->warnings[o->nwarnings++], sizeof o->warnings[0], fmt, ap);
    va_end(ap);
}

void dlp_lg_es_percentile_rule(const dlp_lg_tally *t, const dlp_lg_settings *s, dlp_lg_result *o) {
    const double conf = 0.99;
    double p = s->target_latency_percentile;
    int64_t n = t->nall;
    int64_t est = 0, disc = 0, need = 0;
    if (dlp_lg_es_estimate(t->all_lat, n, p, conf, &est, &disc, &need)) {
        o->es_estimate_ns = est;
        snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
                 " * Processed at least %lld queries (%lld).\n * Would discard %lld highest latency queries.\n"
                 " * Early stopping %.1fth percentile estimate: %lld", (long long)need, (long long)n,
                 (long long)disc, p * 100, (long long)(est == INT64_MAX ? -1 : est));
    } else {
        o->early_stopping_met = 0;
        snprintf(o->early_stopping_text, sizeof o->early_stopping_text,
                 " * Only processed %lld queries.\n * Need to process at least %lld queries for early stopping.",
                 (long long)n, (long long)need);
        dlp_lg_add_reason(o, "early stopping needs at least %lld queries at the %.0fth percentile, only %lld ran; "
                          "raise --min-queries or --min-duration", (long long)need, p * 100, (long long)n);
    }
}

void dlp_lg_latency_metric(const dlp_lg_tally *t, const dlp_lg_settings *s, double default_p,
                           const char *default_name, dlp_lg_result *o) {
    double p = s->target_latency_percentile;
    o->metric_name = fabs(p - default_p) > 1e-9 ? "target percentile latency (ns)" : default_name;
    o->metric_value = (double)dlp_stats_rank_i64(t->ok_lat, (size_t)t->nok, p);
}

// Builds the statistics and the verdict from the records (no answer is recorded any more).
static dlp_status analyze(lg_run *r, const dlp_lg_settings *s, const dlp_lg_scenario_ops *ops, int64_t t0,
                          dlp_lg_result *o) {
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
    // The scenario's unit: samples, or whole queries (MultiStream). Its latencies, failures at the top, sorted.
    int64_t *unit_all = ops->per_query ? q_all : all_lat, nunit = ops->per_query ? nqall : nall;
    dlp_lg_latency_summarize(unit_all, (size_t)nunit, &tmp);  // sorts unit_all
    o->target_percentile_ns = dlp_stats_rank_i64(unit_all, (size_t)nunit, p);
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
    const dlp_lg_tally t = {.nq = nq, .ns = ns, .failed = failed, .over = over,
                            .ok_lat = ops->per_query ? q_lat : ok_lat, .nok = ops->per_query ? nqok : nok,
                            .all_lat = unit_all, .nall = nunit, .duration_s = dur_s};

    // --- the verdict, rule by rule (MLPerf's PerformanceSummary) ---
    static const char *const span_what[] = {"issuing", "the schedule", "the run"};
    int64_t span = ops->min_duration_span == DLP_LG_SPAN_SCHEDULE ? o->last_scheduled_ns
                   : ops->min_duration_span == DLP_LG_SPAN_RUN    ? o->duration_ns
                                                                  : o->last_issued_ns;
    const int acc = s->mode == DLP_LG_ACCURACY;  // no timing rule: every sample answered is what counts
    o->min_duration_met = acc || span >= s->min_duration_ns;
    int64_t counted = ops->counts_samples ? ns : nq;
    o->min_queries_met = acc || counted >= s->min_query_count;
    o->perf_constraints_met = 1;
    if (!acc && ops->perf_constraints) ops->perf_constraints(&t, s, o);
    o->early_stopping_met = 1;
    o->es_estimate_ns = 0;
    if (!acc && s->early_stopping && ops->early_stopping) ops->early_stopping(&t, s, o);
    if (!o->min_duration_met)
        dlp_lg_add_reason(o, "min duration not met: %s lasted %.3f s of %.3f s (%s)",
                          span_what[ops->min_duration_span], dlp_ns_to_s(span), dlp_ns_to_s(s->min_duration_ns),
                          o->stop_reason[0] ? o->stop_reason : "stopped early");
    if (!o->min_queries_met)
        dlp_lg_add_reason(o, "min queries not met: %lld of %lld %s (%s)", (long long)counted,
                          (long long)s->min_query_count, ops->counts_samples ? "samples" : "queries",
                          o->stop_reason[0] ? o->stop_reason : "stopped early");
    o->none_lost = o->samples_lost == 0;
    if (o->samples_lost > 0)
        dlp_lg_add_reason(o, "%lld samples were never answered (no response for %.1f s): the SUT lost them",
                          (long long)o->samples_lost, dlp_ns_to_s(s->idle_timeout_ns));
    if (failed > (int64_t)floor(s->max_failed_fraction * (double)ns))
        dlp_lg_add_reason(o, "%lld of %lld samples failed (rejected %lld, timeout %lld, error %lld); allowed %.4g%%",
                          (long long)failed, (long long)ns, (long long)o->samples_by_outcome[DLP_LG_REJECTED],
                          (long long)o->samples_by_outcome[DLP_LG_TIMEOUT],
                          (long long)o->samples_by_outcome[DLP_LG_ERROR], s->max_failed_fraction * 100);
    if (o->duplicate_responses > 0)
        dlp_lg_add_reason(o, "the SUT answered %lld samples twice or with unknown ids (a SUT bug)",
                          (long long)o->duplicate_responses);
    if (ns == 0) dlp_lg_add_reason(o, "no query was issued");
    for (int i = 0; s->mlperf_rules && i < o->nbreaks; i++)
        dlp_lg_add_reason(o, "MLPerf rule broken: %s", o->breaks[i]);
    if (acc && o->samples_by_outcome[DLP_LG_OK] > 0) {
        o->accuracy = malloc((size_t)ns * sizeof *o->accuracy);
        if (!o->accuracy) {
            free(ok_lat), free(all_lat), free(q_lat), free(q_all), free(lag);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the accuracy log");
        }
        for (int64_t i = 0; i < ns; i++) {
            lg_sample *sm = srec(r, i);
            if (!sm->recorded || sm->outcome != DLP_LG_OK) continue;  // LoadGen logs completed samples only
            o->accuracy[o->naccuracy++] = (dlp_lg_accuracy_entry){i, sm->index, sm->top1};
        }
    }
    o->valid = o->nreasons == 0;

    ops->measure(&t, s, o);
    free(ok_lat), free(all_lat), free(q_lat), free(q_all), free(lag);
    return DLP_OK;
}

// The progress line on stderr every progress_interval_ns while the run goes on (humans read stderr).
typedef struct lg_progress {
    lg_run *r;
    const dlp_lg_settings *s;
    int64_t t0;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
} lg_progress;

static void *progress_main(void *arg) {
    lg_progress *p = arg;
    int64_t last_ans = 0, last_t = dlp_now_ns();
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        dlp_cond_wait_until(&p->cv, &p->mu, dlp_now_ns() + p->s->progress_interval_ns);
        if (p->stop) break;
        pthread_mutex_lock(&p->r->mu);
        int64_t nq = p->r->nq, ns = p->r->ns, ans = p->r->answered, failed = p->r->failed;
        pthread_mutex_unlock(&p->r->mu);
        int64_t now = dlp_now_ns();
        double rate = now > last_t ? (double)(ans - last_ans) / dlp_ns_to_s(now - last_t) : 0;
        fprintf(stderr, "loadgen: %6.1f s  queries issued %lld, samples answered %lld of %lld (%lld failed), "
                "%.1f samples/s in the last %.0f s\n", dlp_ns_to_s(now - p->t0), (long long)nq, (long long)ans,
                (long long)ns, (long long)failed, rate, dlp_ns_to_s(now - last_t));
        last_ans = ans;
        last_t = now;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dlp_status dlp_lg_run(const dlp_lg_settings *s_in, const dlp_lg_sut *sut, dlp_lg_result *o) {
    memset(o, 0, sizeof *o);
    DLP_CHECK(dlp_lg_settings_check(s_in));
    dlp_lg_settings acc_settings = *s_in;
    const dlp_lg_settings *s = s_in;
    if (s_in->mode == DLP_LG_ACCURACY) {
        // Every sample of the library once, in the scenario's pattern, with no timing rule.
        dlp_lg_settings *a = &acc_settings;
        int64_t per = dlp_lg_scenario_ops_of(a->scenario)->sized_queries ? a->samples_per_query : 1;
        int64_t queries = (a->sample_count + per - 1) / per;
        a->min_duration_ns = 0;
        a->max_duration_ns = 0;
        a->min_query_count = a->max_query_count = queries;
        a->early_stopping = 0;
        s = a;
    }
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    if (!sut || !sut->issue_query) return DLP_ERR(DLP_ERR_INVALID, "the SUT has no issue_query");
    o->settings = *s;
    o->nbreaks = dlp_lg_settings_mlperf_breaks(s, o->breaks, 8);
    if (o->nbreaks > 8) o->nbreaks = 8;
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
    dlp_cond_init_monotonic(&r->cv);
    r->done.fn = on_done;
    r->done.ctx = r;

    dlp_lg_issuer is = {.r = r, .sut = sut, .s = s, .sample_count = s->sample_count};
    dlp_rng_init(&is.rng, s->sample_seed, 0x5a3b1e);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    o->t0_unix_ns = (int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec;
    lg_progress prog = {.r = r, .s = s, .t0 = dlp_now_ns()};
    pthread_t prog_thread;
    int prog_on = 0;
    if (s->progress_interval_ns > 0) {
        pthread_mutex_init(&prog.mu, NULL);
        dlp_cond_init_monotonic(&prog.cv);
        prog_on = pthread_create(&prog_thread, NULL, progress_main, &prog) == 0;
    }
    dlp_status st = ops->issue(&is, s, o);
    if (!is.started) dlp_lg_issuer_start(&is);  // the scenario failed before issuing anything
    int64_t t0 = is.t0;
    if (st == DLP_OK && o->stop_reason[0] == '\0') snprintf(o->stop_reason, sizeof o->stop_reason,
                                                            "min duration and min queries met");
    if (sut->flush) sut->flush(sut->ctx);

    // Wait for the answers still out, giving up after idle_timeout without progress.
    pthread_mutex_lock(&r->mu);
    if (!is.gave_up && !wait_progress(r, 0, r->ns, s->idle_timeout_ns) && !o->stop_reason[0])
        snprintf(o->stop_reason, sizeof o->stop_reason, "no response for %.1f s", dlp_ns_to_s(s->idle_timeout_ns));
    r->abandoned = 1;  // answers from now on are counted but not recorded
    pthread_mutex_unlock(&r->mu);
    if (prog_on) {
        pthread_mutex_lock(&prog.mu);
        prog.stop = 1;
        pthread_cond_signal(&prog.cv);
        pthread_mutex_unlock(&prog.mu);
        pthread_join(prog_thread, NULL);
    }
    if (s->progress_interval_ns > 0) {
        pthread_mutex_destroy(&prog.mu);
        pthread_cond_destroy(&prog.cv);
    }

    if (st == DLP_OK) st = analyze(r, s, ops, t0, o);
    if (sut->stats_json) o->sut_stats = sut->stats_json(sut->ctx);
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
    free(r->accuracy);
    r->accuracy = NULL;
    r->naccuracy = 0;
}
