// loadgen/search: the Server scenario's search for the highest VALID arrival rate — a ramp (x2 up while
// VALID, /2 down while INVALID) to bracket it, then bisection, within a time budget.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "loadgen/loadgen.h"

// A trial's expected length: until both minimums are met at this rate, plus a little for the tail.
static int64_t trial_estimate_ns(const dlp_lg_settings *s, double qps) {
    double by_count = (double)s->min_query_count / qps;
    double sec = fmax(dlp_ns_to_s(s->min_duration_ns), by_count);
    if (s->max_duration_ns > 0) sec = fmin(sec, dlp_ns_to_s(s->max_duration_ns));
    return (int64_t)(sec * 1e9) + 2 * s->target_latency_ns + 100000000LL;
}

dlp_status dlp_lg_search(const dlp_lg_settings *base, const dlp_lg_sut *sut, const dlp_lg_search_cfg *cfg,
                         dlp_lg_search_result *out) {
    memset(out, 0, sizeof *out);
    if (!dlp_lg_scenario_searchable(base->scenario)) return DLP_ERR(DLP_ERR_INVALID, "the search is for the Server scenario");
    if (!(cfg->start_qps > 0) || !(cfg->tolerance > 0) || cfg->budget_ns <= 0)
        return DLP_ERR(DLP_ERR_INVALID, "search: start QPS, tolerance and budget must be > 0");
    int max_trials = cfg->max_trials > 0 && cfg->max_trials < 64 ? cfg->max_trials : 64;
    double min_qps = cfg->min_qps > 0 ? cfg->min_qps : cfg->start_qps / 1024;
    double qps = cfg->start_qps;
    if (cfg->max_qps > 0 && qps > cfg->max_qps) qps = cfg->max_qps;
    double lo = 0, hi = 0;
    int have_best = 0;
    int64_t t_start = dlp_now_ns();
    dlp_lg_result last;
    memset(&last, 0, sizeof last);
    int have_last = 0;

    for (;;) {
        if (out->ntrials >= max_trials) {
            snprintf(out->stop_reason, sizeof out->stop_reason, "trial cap %d reached", max_trials);
            break;
        }
        int64_t elapsed = dlp_now_ns() - t_start;
        if (out->ntrials > 0 && elapsed + trial_estimate_ns(base, qps) > cfg->budget_ns) {
            snprintf(out->stop_reason, sizeof out->stop_reason, "time budget %.0f s would be exceeded by the next "
                     "trial (%.0f QPS)", dlp_ns_to_s(cfg->budget_ns), qps);
            break;
        }
        dlp_lg_settings s = *base;
        s.target_qps = qps;
        dlp_lg_result r;
        dlp_status st = dlp_lg_run(&s, sut, &r);
        if (st != DLP_OK) {
            dlp_lg_result_free(&r);
            if (have_last) dlp_lg_result_free(&last);
            if (have_best) dlp_lg_result_free(&out->best);
            return st;
        }
        dlp_lg_trial *t = &out->trials[out->ntrials];
        t->target_qps = qps;
        t->valid = r.valid;
        t->p99_ns = r.target_percentile_ns;
        t->completed_samples_per_s = r.completed_samples_per_s;
        t->failed = r.samples_issued - r.samples_by_outcome[DLP_LG_OK];
        t->duration_ns = r.duration_ns;
        if (!r.valid && r.nreasons > 0) snprintf(t->reason, sizeof t->reason, "%s", r.reasons[0]);
        out->ntrials++;
        if (cfg->on_trial) cfg->on_trial(cfg->on_trial_ctx, t, out->ntrials - 1);
        if (r.valid) {
            if (qps > lo) {
                lo = qps;
                if (have_best) dlp_lg_result_free(&out->best);
                out->best = r;
                have_best = 1;
            } else {
                dlp_lg_result_free(&r);
            }
        } else {
            if (hi == 0 || qps < hi) hi = qps;
            if (have_last) dlp_lg_result_free(&last);
            last = r;
            have_last = 1;
        }
        // The next rate.
        if (hi == 0) {  // everything so far VALID: ramp up
            if (cfg->max_qps > 0 && qps >= cfg->max_qps) {
                snprintf(out->stop_reason, sizeof out->stop_reason, "VALID at the cap %.6g QPS", cfg->max_qps);
                out->converged = 1;
                break;
            }
            qps *= 2;
            if (cfg->max_qps > 0 && qps > cfg->max_qps) qps = cfg->max_qps;
        } else if (lo == 0) {  // everything so far INVALID: ramp down
            qps /= 2;
            if (qps < min_qps) {
                snprintf(out->stop_reason, sizeof out->stop_reason, "no VALID rate down to %.6g QPS", min_qps);
                break;
            }
        } else {
            if (hi / lo - 1 <= cfg->tolerance) {
                snprintf(out->stop_reason, sizeof out->stop_reason, "converged: VALID at %.6g, INVALID at %.6g QPS",
                         lo, hi);
                out->converged = 1;
                break;
            }
            qps = 0.5 * (lo + hi);
        }
    }
    out->found = have_best;
    out->best_qps = lo;
    out->lo_qps = lo;
    out->hi_qps = hi;
    if (have_best) {
        if (have_last) dlp_lg_result_free(&last);
    } else if (have_last) {
        out->best = last;
    }
    return DLP_OK;
}

void dlp_lg_search_result_free(dlp_lg_search_result *r) {
    if (r) dlp_lg_result_free(&r->best);
}
