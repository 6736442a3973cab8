// monitor/store: statistics of the sampled fields per phase and for the whole run.
#include "monitor/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/stats.h"

static void stats_free(dlp_mon_stats *st) {
    DLP_FREE_ALL(st->tsum, st->wsum, st->wdt, st->max, st->res);
    memset(st, 0, sizeof *st);
}

static dlp_status stats_init(dlp_mon_stats *st, int nsum, int res_cap, const char *name, double start_s) {
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->start_s = st->end_s = start_s;
    st->res_cap = res_cap;
    st->stride = 1;
    size_t n = nsum > 0 ? (size_t)nsum : 1;
    st->tsum = calloc(n, sizeof *st->tsum);
    st->wsum = calloc(n, sizeof *st->wsum);
    st->wdt = calloc(n, sizeof *st->wdt);
    st->max = malloc(n * sizeof *st->max);
    if (!st->tsum || !st->wsum || !st->wdt || !st->max) {
        stats_free(st);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for monitor statistics");
    }
    for (int k = 0; k < nsum; k++) st->max[k] = NAN;
    return DLP_OK;
}

dlp_status dlp_mon_store_init(dlp_mon_store *s, const dlp_mon_field *fields, int nfields, double interval_s,
                              const char *first_phase) {
    memset(s, 0, sizeof *s);
    s->idx = malloc((size_t)(nfields > 0 ? nfields : 1) * sizeof *s->idx);
    DLP_TRY_ALLOC(s->idx);
    for (int i = 0; i < nfields; i++)
        if (fields[i].flags & DLP_MON_F_SUMMARY) s->idx[s->nsum++] = i;
    s->full_dt_s = 0.5 * interval_s;
    DLP_CHECK(stats_init(&s->total, s->nsum, DLP_MON_TOTAL_ROWS, "total", 0));
    s->phase_cap = 16;
    s->phases = calloc((size_t)s->phase_cap, sizeof *s->phases);
    DLP_TRY_ALLOC(s->phases);
    DLP_CHECK(stats_init(&s->phases[0], s->nsum, DLP_MON_PHASE_ROWS, first_phase, 0));
    s->nphases = 1;
    return DLP_OK;
}

void dlp_mon_store_free(dlp_mon_store *s) {
    for (int i = 0; i < s->nphases; i++) stats_free(&s->phases[i]);
    free(s->phases);
    stats_free(&s->total);
    free(s->idx);
    memset(s, 0, sizeof *s);
}

dlp_status dlp_mon_store_phase(dlp_mon_store *s, const char *name, double t_s) {
    dlp_mon_stats *cur = &s->phases[s->nphases - 1];
    if (cur->rows == 0 && cur->start_s == t_s) {  // nothing happened in it (a phase marked before the start)
        snprintf(cur->name, sizeof cur->name, "%s", name);
        return DLP_OK;
    }
    cur->end_s = t_s;
    if (s->nphases >= DLP_MON_MAX_PHASES) {
        dlp_log_warn_limited("monitor.phases", 1, "monitor: more than %d phases; '%s' and later ones are merged into '%s'",
                             DLP_MON_MAX_PHASES, name, cur->name);
        return DLP_OK;
    }
    if (s->nphases == s->phase_cap) {
        int cap = s->phase_cap * 2;
        dlp_mon_stats *p = realloc(s->phases, (size_t)cap * sizeof *p);
        DLP_TRY_ALLOC(p);
        s->phases = p;
        s->phase_cap = cap;
    }
    DLP_CHECK(stats_init(&s->phases[s->nphases], s->nsum, DLP_MON_PHASE_ROWS, name, t_s));
    s->nphases++;
    return DLP_OK;
}

static void stats_add(dlp_mon_stats *st, int nsum, const int *idx, double t_s, double dt_s, int full,
                      const double *vals) {
    st->rows++;
    st->dt_sum_s += dt_s;
    st->end_s = t_s;
    for (int k = 0; k < nsum; k++) {
        double v = vals[idx[k]];
        if (isfinite(v)) st->tsum[k] += v * dt_s;
    }
    // Mean, percentiles and maxima come from full-length intervals: a short one (cut by a phase boundary) reads
    // a few clock ticks and is noisy. Short ones count only while the phase has no full one.
    if (full && !st->res_full_rows) {
        st->res_full_rows = 1;
        st->res_n = 0;
        st->seen = 0;
        st->stride = 1;
        for (int k = 0; k < nsum; k++) {
            st->max[k] = NAN;
            st->wsum[k] = st->wdt[k] = 0;
        }
    } else if (!full && st->res_full_rows) {
        return;
    }
    for (int k = 0; k < nsum; k++) {
        double v = vals[idx[k]];
        if (!isfinite(v)) continue;
        st->wsum[k] += v * dt_s;
        st->wdt[k] += dt_s;
        if (isnan(st->max[k]) || v > st->max[k]) st->max[k] = v;
    }
    int64_t i = st->seen++;
    if (i % st->stride) return;
    if (!st->res) {
        st->res = malloc((size_t)st->res_cap * (size_t)(nsum > 0 ? nsum : 1) * sizeof *st->res);
        if (!st->res) {
            dlp_log_warn_limited("monitor.res", 1, "monitor: out of memory for percentiles; p50/p95 left out");
            st->res_cap = 0;
            return;
        }
    }
    if (st->res_cap == 0) return;
    if (st->res_n == st->res_cap) {  // thin 2:1, keeping rows evenly spaced in time
        for (int r = 0; r < st->res_cap / 2; r++)
            memmove(st->res + (size_t)r * nsum, st->res + (size_t)(2 * r) * nsum, (size_t)nsum * sizeof *st->res);
        st->res_n = st->res_cap / 2;
        st->stride *= 2;
        if (i % st->stride) return;
    }
    float *row = st->res + (size_t)st->res_n * nsum;
    for (int k = 0; k < nsum; k++) row[k] = (float)vals[idx[k]];
    st->res_n++;
}

void dlp_mon_store_add(dlp_mon_store *s, double t_s, double dt_s, const double *vals) {
    if (!(dt_s > 0)) return;
    int full = dt_s >= s->full_dt_s;
    stats_add(&s->phases[s->nphases - 1], s->nsum, s->idx, t_s, dt_s, full, vals);
    stats_add(&s->total, s->nsum, s->idx, t_s, dt_s, full, vals);
}

// Ten significant digits keep the JSON readable (no 40.000000000000007) and byte counts exact to 10 GB;
// percentiles come from the float subsample and get the seven digits a float has.
static json_t *num(double v, int digits) {
    if (!isfinite(v)) return json_null();
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    return json_real(strtod(buf, NULL));
}

static json_t *stats_json(const dlp_mon_stats *st, const dlp_mon_store *s, const dlp_mon_field *fields,
                          float *scratch) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(st->name));
    json_object_set_new(o, "start_s", num(st->start_s, 9));
    json_object_set_new(o, "end_s", num(st->end_s, 9));
    json_object_set_new(o, "samples", json_integer(st->rows));
    json_t *m = json_object();
    for (int k = 0; k < s->nsum; k++) {
        if (!(st->wdt[k] > 0)) continue;  // never had a value in this phase
        const dlp_mon_field *f = &fields[s->idx[k]];
        json_t *e = json_object();
        json_object_set_new(e, "mean", num(st->wsum[k] / st->wdt[k], 10));
        int n = 0;
        for (int r = 0; r < st->res_n; r++) {
            float v = st->res[(size_t)r * s->nsum + k];
            if (isfinite(v)) scratch[n++] = v;
        }
        json_object_set_new(e, "p50", num(dlp_stats_quantile_f32(scratch, (size_t)n, 0.50), 7));
        json_object_set_new(e, "p95", num(dlp_stats_quantile_f32(scratch, (size_t)n, 0.95), 7));
        json_object_set_new(e, "max", num(st->max[k], 10));
        double scale;
        const char *tk = dlp_mon_field_total_key(f, &scale);
        if (tk) json_object_set_new(e, tk, num(st->tsum[k] * scale, 12));
        json_object_set_new(m, f->name, e);
    }
    json_object_set_new(o, "metrics", m);
    return o;
}

json_t *dlp_mon_store_json(const dlp_mon_store *s, const dlp_mon_field *fields, double end_s) {
    int cap = DLP_MON_TOTAL_ROWS > DLP_MON_PHASE_ROWS ? DLP_MON_TOTAL_ROWS : DLP_MON_PHASE_ROWS;
    float *scratch = malloc((size_t)cap * sizeof *scratch);
    if (!scratch) return NULL;
    json_t *o = json_object();
    json_t *ph = json_array();
    for (int i = 0; i < s->nphases; i++) {
        dlp_mon_stats tmp = s->phases[i];
        if (i == s->nphases - 1 && end_s > tmp.end_s) tmp.end_s = end_s;
        json_array_append_new(ph, stats_json(&tmp, s, fields, scratch));
    }
    json_object_set_new(o, "phases", ph);
    dlp_mon_stats tot = s->total;
    if (end_s > tot.end_s) tot.end_s = end_s;
    json_object_set_new(o, "total", stats_json(&tot, s, fields, scratch));
    free(scratch);
    return o;
}
