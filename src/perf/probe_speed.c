// perf/probe_speed: every timed row of the probe measured against the machine's speed at that moment. On a shared
// virtual machine the cores a process gets move with the host's other tenants and the machine's other processes
// (steal time, a busy SMT sibling, time-sharing with other work): a row measured once is a snapshot of a moving
// machine. So the canary (hw/canary) is read before, between and after each row's parts, on as many threads as the
// row uses (one, or every CPU); a row whose readings moved more than the band is measured again; and each timed
// value is kept with the speed it was measured at and rescaled, once the probe is over, to the reference speed —
// the median of every reading of the probe. docs/model.md ("The probe on a noisy machine") says what this
// normalises and what it cannot.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/json.h"
#include "core/log.h"
#include "data/bench.h"
#include "core/stats.h"
#include "hw/canary.h"
#include "hw/host.h"
#include "perf/probe_impl.h"

typedef struct dlp_probe_norm {
    double *value;    // in the profile
    double raw;       // as measured
    int is_rate;      // a rate (rescaled by reference / speed) or a time (by speed / reference)
    double speed;     // GFLOP/s of the canary around it
    double share;     // CPU share the row's threads got (hw/cpushare; 0: unknown)
    int one;          // measured on one thread (the one-thread reference) or on all CPUs
    int slow;         // share is the slowest compute thread's (a multi-thread fork-join row): its own reference
    double share_exp; // the value goes as (share ratio)^share_exp (measured by the row; 0: linear)
    double spread;    // the readings' (max - min) / median
    int tries;
    double rep_spread; // the row's repeated measurements after normalisation: (max - min) / median
    int reps;          // how many (0: the row was measured once; its readings' spread alone decides)
    double *speed_rel;
    int work_kind;     // dlp_probe_work_kind of the row (-1: none)
    double work;       // the work speed around it (GFLOP per CPU-second; 0: unknown)
    double *work_ref;  // gets the reference work speed it is normalised to (may be NULL)
    double work_spread; // the work readings around it: (max - min) / median (0: fewer than two)
    char what[96];
} dlp_probe_norm;

double dlp_probe_speed(dlp_probe_ctx *c, int threads) {
    const int one = threads == 1;
    double g = dlp_host_canary_gflops_on(DLP_PROBE_CANARY_S, one ? 1 : 0);
    if (g > 0) {
        if (one && c->ncanary_one < DLP_PROBE_MAX_READINGS) c->canary_one[c->ncanary_one++] = g;
        if (!one && c->ncanary_all < DLP_PROBE_MAX_READINGS) c->canary_all[c->ncanary_all++] = g;
    }
    return g;
}

int dlp_probe_work_kind(dlp_dtype dt) {
    return dt == DLP_DTYPE_F32 ? 0 : dt == DLP_DTYPE_BF16 ? 1 : dt == DLP_DTYPE_I8 ? 2 : -1;
}

static const char *const k_work_names[DLP_PROBE_WORK_KINDS] = {"fp32", "bf16", "int8", "decode"};

// A reading is kept only while its threads had the cores (another process's slices in between leave the caches cold:
// a 0.1 s reading of a 1 MB convolution feels that far more than a step does). 0: not read, or time-shared. (Reading
// again on one thread when the row's threads were time-shared was tried and taken out: around validate's two-thread
// runs those readings came out at 0.71-0.90 of the profile's speed while the runs went at 0.98-1.03.)
static double quiet_reading(const dlp_backend *ops, dlp_dtype dt, int threads) {
    if (threads <= 0) threads = dlp_host_cpus_allowed();
    double w = 0, share = 0;
    const dlp_status st = ops ? dlp_backend_measure_speed(ops, dt, threads, DLP_PROBE_WORK_S, &w, &share)
                              : dlp_data_decode_speed(threads, DLP_PROBE_WORK_S, &w, &share);
    if (st != DLP_OK) {
        dlp_err_clear();
        return 0;
    }
    return share >= DLP_PROBE_QUIET_SHARE ? w : 0;
}

// The median of DLP_PROBE_WORK_READS quiet readings: the cores of this VM drop to about half speed per CPU-second
// for well under a second now and then, and one reading caught in such a moment (0.80 of the profile's speed where
// the run around it went at 1.03) moved a validate prediction by 23% when a run had only a reading before and after.
static double work_reading(const dlp_backend *ops, dlp_dtype dt, int threads) {
    double v[DLP_PROBE_WORK_READS];
    int n = 0;
    for (int i = 0; i < DLP_PROBE_WORK_READS; i++) {
        const double w = quiet_reading(ops, dt, threads);
        if (w > 0) v[n++] = w;
    }
    return n ? dlp_stats_median_f64(v, (size_t)n) : 0;
}

double dlp_work_read(const dlp_backend *ops, dlp_dtype dt, int threads) {
    return dlp_probe_work_kind(dt) < 0 || !ops ? 0 : work_reading(ops, dt, threads);
}

double dlp_decode_read(int threads) { return work_reading(NULL, DLP_DTYPE_F32, threads); }

double dlp_probe_work(dlp_probe_ctx *c, const dlp_backend *ops, dlp_dtype dt, int threads) {
    const int k = dlp_probe_work_kind(dt);
    const double w = dlp_work_read(ops, dt, threads);
    if (w > 0 && c->nwork[k] < DLP_PROBE_MAX_WORK) c->work[k][c->nwork[k]++] = w;
    return w;
}

double dlp_probe_decode_work(dlp_probe_ctx *c, int threads) {
    const double w = dlp_decode_read(threads);
    if (w > 0 && c->nwork[DLP_PROBE_WORK_DECODE] < DLP_PROBE_MAX_WORK)
        c->work[DLP_PROBE_WORK_DECODE][c->nwork[DLP_PROBE_WORK_DECODE]++] = w;
    return w;
}

// The readings of r[0..n) that were taken (> 0; at most 64) into v; how many.
static int work_taken(const double *r, int n, double v[64]) {
    int k = 0;
    for (int i = 0; i < n && k < 64; i++)
        if (r[i] > 0) v[k++] = r[i];
    return k;
}

double dlp_probe_work_median(const double *r, int n) {
    double v[64];
    const int k = work_taken(r, n, v);
    return k ? dlp_stats_median_f64(v, (size_t)k) : 0;
}

double dlp_probe_work_spread(const double *r, int n) {
    double v[64];
    const int k = work_taken(r, n, v);
    return k >= 2 ? dlp_probe_speed_spread(v, k) : 0;
}

void dlp_probe_norm_work(dlp_probe_ctx *c, int kind, double w, double *ref) {
    if (!c->norms || c->nnorms < 1 || kind < 0 || kind >= DLP_PROBE_WORK_KINDS || !(w > 0)) return;
    dlp_probe_norm *n = &c->norms[c->nnorms - 1];
    n->work_kind = kind;
    n->work = w;
    n->work_ref = ref;
}

void dlp_probe_norm_work_spread(dlp_probe_ctx *c, double spread) {
    if (!c->norms || c->nnorms < 1 || !(spread >= 0)) return;
    c->norms[c->nnorms - 1].work_spread = spread;
}

double dlp_probe_speed_spread(const double *r, int n) {
    if (n < 2) return 0;
    double lo = r[0], hi = r[0];
    for (int i = 1; i < n; i++) {
        if (r[i] < lo) lo = r[i];
        if (r[i] > hi) hi = r[i];
    }
    double m = dlp_stats_median_f64(r, n);
    return m > 0 ? (hi - lo) / m : INFINITY;
}

double dlp_probe_speed_mean(const double *r, int n) {
    if (n < 1) return 0;
    if (n == 1) return r[0];
    // each part lies between two readings: the mean of the pairs' means
    double s = 0;
    for (int i = 0; i + 1 < n; i++) s += 0.5 * (r[i] + r[i + 1]);
    return s / (n - 1);
}

void dlp_probe_norm_add(dlp_probe_ctx *c, double *value, int is_rate, double speed, double share, int threads,
                        double spread, int tries, double *speed_rel, const char *fmt, ...) {
    if (!c->norms) c->norms = calloc(DLP_PROBE_MAX_NORMS, sizeof *c->norms);
    if (!c->norms || c->nnorms >= DLP_PROBE_MAX_NORMS || !(speed > 0)) return;  // left as measured
    dlp_probe_norm *n = &c->norms[c->nnorms++];
    memset(n, 0, sizeof *n);
    n->value = value;
    n->raw = value ? *value : 1;
    n->is_rate = is_rate;
    n->speed = speed;
    n->share = share > 0 && share <= 1 ? share : 0;
    n->one = threads == 1;
    n->spread = spread;
    n->tries = tries;
    n->speed_rel = speed_rel;
    n->work_kind = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->what, sizeof n->what, fmt, ap);
    va_end(ap);
}

double dlp_probe_repeat_spread(const double *v, int n) {
    if (n < 2) return 0;
    if (n < 5) return dlp_probe_speed_spread(v, n);
    double s[64];
    if (n > 64) n = 64;
    memcpy(s, v, sizeof(double) * (size_t)n);
    dlp_stats_sort_f64(s, (size_t)n);
    return dlp_probe_speed_spread(s + 1, n - 2);  // the lowest and the highest left out
}

void dlp_probe_norm_repeats(dlp_probe_ctx *c, double spread, int reps) {
    if (!c->norms || c->nnorms < 1 || reps < 2) return;
    c->norms[c->nnorms - 1].rep_spread = isfinite(spread) ? spread : INFINITY;
    c->norms[c->nnorms - 1].reps = reps;
}

void dlp_probe_norm_slowest(dlp_probe_ctx *c) {
    if (!c->norms || c->nnorms < 1 || !(c->norms[c->nnorms - 1].share > 0)) return;
    c->norms[c->nnorms - 1].slow = 1;
}

double dlp_probe_share_exp_fit(double t_a, double s_a, double t_b, double s_b, const char **why) {
    *why = "a point unknown";
    if (!(t_a > 0 && t_b > 0 && s_a > 0 && s_a <= 1 && s_b > 0)) return 0;
    *why = "the spinner's share less than 15% below the row's";
    if (!(s_b < 0.85 * s_a)) return 0;
    const double e = log(t_b / t_a) / log(s_a / s_b);
    *why = "outside 0.25..6 (the machine moved between the points)";
    if (!(e >= 0.25 && e <= 6)) return 0;
    *why = "measured";
    return e;
}

void dlp_probe_norm_share_exp(dlp_probe_ctx *c, double e) {
    if (!c->norms || c->nnorms < 1 || !(e > 0)) return;
    c->norms[c->nnorms - 1].share_exp = e;
}

int dlp_probe_row_stable(double readings_spread, double rep_spread, int reps) {
    if (reps >= 2) return rep_spread <= DLP_PROBE_SPEED_BAND;  // the direct test: its normalised repeats agree
    return readings_spread <= 2 * DLP_PROBE_SPEED_BAND;
}

static double quantile(const double *v, int n, double q) {
    if (n < 1) return 0;
    double *s = malloc(sizeof(double) * (size_t)n);
    if (!s) return 0;
    memcpy(s, v, sizeof(double) * (size_t)n);
    double r = dlp_stats_quantile_f64(s, (size_t)n, q);
    free(s);
    return r;
}

// Median of the CPU shares of the rows of one class (one thread, all, or the slowest thread of multi-thread compute
// rows: slow), each row counted once per value.
static double share_ref(const dlp_probe_ctx *c, int one, int slow) {
    double v[DLP_PROBE_MAX_NORMS];
    int n = 0;
    for (int i = 0; i < c->nnorms; i++)
        if (c->norms[i].share > 0 && c->norms[i].slow == slow && (slow || c->norms[i].one == one))
            v[n++] = c->norms[i].share;
    return n ? dlp_stats_median_f64(v, (size_t)n) : 0;
}

json_t *dlp_probe_normalise(dlp_probe_ctx *c) {
    dlp_host_profile *h = &c->p->host;
    const double ref_all = dlp_stats_median_f64(c->canary_all, c->ncanary_all);
    const double ref_one = dlp_stats_median_f64(c->canary_one, c->ncanary_one);
    const double sref_all = c->norms ? share_ref(c, 0, 0) : 0, sref_one = c->norms ? share_ref(c, 1, 0) : 0;
    const double sref_slow = c->norms ? share_ref(c, 0, 1) : 0;
    h->canary_gflops = ref_all;
    h->canary_p10_gflops = quantile(c->canary_all, c->ncanary_all, 0.1);
    h->canary_p90_gflops = quantile(c->canary_all, c->ncanary_all, 0.9);
    h->canary_samples = c->ncanary_all;
    h->canary1_gflops = ref_one;
    h->cpu_share = sref_all;
    h->cpu_share1 = sref_one;
    h->cpu_share_slowest = sref_slow;
    json_t *o = json_object();
    json_object_set_new(o, "band", json_real(DLP_PROBE_SPEED_BAND));
    json_object_set_new(o, "reference_gflops", json_real(ref_all));
    json_object_set_new(o, "reference_one_thread_gflops", json_real(ref_one));
    json_object_set_new(o, "reference_cpu_share", json_real(sref_all));
    json_object_set_new(o, "reference_one_thread_cpu_share", json_real(sref_one));
    json_object_set_new(o, "reference_slowest_thread_share", json_real(sref_slow));
    json_t *ra = json_array(), *r1 = json_array();
    for (int i = 0; i < c->ncanary_all; i++) json_array_append_new(ra, json_real(c->canary_all[i]));
    for (int i = 0; i < c->ncanary_one; i++) json_array_append_new(r1, json_real(c->canary_one[i]));
    double wref[DLP_PROBE_WORK_KINDS];
    json_t *wo = json_object();
    for (int k = 0; k < DLP_PROBE_WORK_KINDS; k++) {
        wref[k] = c->nwork[k] ? dlp_stats_median_f64(c->work[k], (size_t)c->nwork[k]) : 0;
        if (!c->nwork[k]) continue;
        json_t *a = json_array();
        for (int i = 0; i < c->nwork[k]; i++) json_array_append_new(a, json_real(c->work[k][i]));
        json_object_set_new(wo, k_work_names[k], json_pack("{s:f, s:f, s:f, s:o}", k == DLP_PROBE_WORK_DECODE
                                                           ? "reference_img_per_cpu_s" : "reference_gflops_per_cpu_s", wref[k],
                                                           "p10", quantile(c->work[k], c->nwork[k], 0.1), "p90",
                                                           quantile(c->work[k], c->nwork[k], 0.9), "readings", a));
    }
    // the pipeline's CPU costs (measured at c->pipe_work) to the loader's reference work speed
    if (c->pipe_work > 0 && wref[DLP_PROBE_WORK_DECODE] > 0) {
        dlp_pipeline_profile *pp = &c->p->pipeline;
        dlp_profile_at_decode(c->p, c->pipe_work);  // the costs as measured hold at c->pipe_work ...
        pp->work_img_per_s = c->pipe_work;
        dlp_profile_at_decode(c->p, wref[DLP_PROBE_WORK_DECODE]);  // ... and at the reference take pipe_work / ref x
        json_object_set_new(wo, "pipeline_costs_at_img_per_cpu_s", json_real(c->pipe_work));
    }
    json_object_set_new(o, "work_speed", wo);
    json_object_set_new(o, "readings_gflops", ra);
    json_object_set_new(o, "readings_one_thread_gflops", r1);
    json_t *rows = json_array();
    char unstable[2048] = "";
    int nun = 0, nshare = 0;
    for (int i = 0; i < c->nnorms; i++) {
        dlp_probe_norm *n = &c->norms[i];
        const double ref = n->one ? ref_one : ref_all, sref = n->slow ? sref_slow : n->one ? sref_one : sref_all;
        const double rel = ref > 0 ? n->speed / ref : 0;
        // the share ratio to the power the row measured (a spinning fork-join team: faster than linear)
        const double srel = n->share > 0 && sref > 0 ? pow(n->share / sref, n->share_exp > 0 ? n->share_exp : 1) : 0;
        if (!(rel > 0) && !(srel > 0)) continue;
        // The CPU share where the row's threads measured it: it covers the whole row, and a time-shared machine moves
        // it; the canary (0.12 s before and after) where they could not.
        // and where the row's work speed was read around it (by its share only: the GEMM canary of a row without one
        // already carries the cores' speed), by that over the probe's median of its precision
        const double wrel = srel > 0 && n->work > 0 && n->work_kind >= 0 && wref[n->work_kind] > 0
                                ? n->work / wref[n->work_kind] : 0;
        const double use = srel > 0 ? srel * (wrel > 0 ? wrel : 1) : rel;
        if (n->work_ref) *n->work_ref = wrel > 0 ? wref[n->work_kind] : 0;
        const double by_canary = rel > 0 ? (n->is_rate ? n->raw / rel : n->raw * rel) : NAN;
        const double by_share = srel > 0 ? (n->is_rate ? n->raw / srel : n->raw * srel) : NAN;
        const double normed = n->is_rate ? n->raw / use : n->raw * use;
        if (n->value) *n->value = normed;
        if (n->speed_rel) *n->speed_rel = use;
        nshare += srel > 0;
        // spread: of the shares of the row's parts where the caller measured them per part, else of the canary; and
        // where the row was measured more than once, its repeats after normalisation must agree within the band
        // and where its work readings moved more than twice the band within the row, not stable either: the median
        // they are normalised by does not hold for the whole row
        const int stable = dlp_probe_row_stable(n->spread, n->rep_spread, n->reps) &&
                           !(n->work_spread > 2 * DLP_PROBE_SPEED_BAND);
        json_t *row = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:b}", "row", n->what, "kind",
                                n->is_rate ? "rate" : "time", "threads", n->one ? 1 : 0, "raw", n->raw, "speed_gflops",
                                n->speed, "speed_rel", rel, "normalised", normed, "spread", n->spread, "tries",
                                n->tries, "stable", stable);
        if (n->reps >= 2) {
            json_object_set_new(row, "repeats", json_integer(n->reps));
            json_object_set_new(row, "repeat_spread", dlp_json_real_or_null(n->rep_spread));
        }
        json_object_set_new(row, "basis", json_string(srel > 0 ? (n->slow ? "slowest_thread_share" : "cpu_share") : "canary"));
        json_object_set_new(row, "cpu_share", json_real(n->share));
        json_object_set_new(row, "cpu_share_rel", json_real(srel));
        if (n->share_exp > 0) json_object_set_new(row, "share_exp", json_real(n->share_exp));
        if (wrel > 0) {
            json_object_set_new(row, "work_gflops_per_cpu_s", json_real(n->work));
            json_object_set_new(row, "work_rel", json_real(wrel));
            json_object_set_new(row, "work_spread", json_real(n->work_spread));
        }
        json_object_set_new(row, "by_canary", dlp_json_real_or_null(by_canary));
        json_object_set_new(row, "by_cpu_share", dlp_json_real_or_null(by_share));
        json_array_append_new(rows, row);
        if (!stable) {
            nun++;
            size_t l = strlen(unstable);
            if (l + strlen(n->what) + 4 < sizeof unstable)
                snprintf(unstable + l, sizeof unstable - l, "%s%s", l ? ", " : "", n->what);
        }
    }
    json_object_set_new(o, "rows", rows);
    json_object_set_new(o, "unstable", json_integer(nun));
    json_object_set_new(o, "by_cpu_share", json_integer(nshare));
    dlp_probe_say(c, "speed: %d readings on all CPUs, median %.1f GFLOP/s (p10 %.1f, p90 %.1f: spread %.0f%%), one "
                  "thread %.1f; CPU share of the rows' threads: median %.2f (one thread %.2f, the multi-thread compute "
                  "rows' slowest thread %.2f); %d timed values "
                  "normalised (%d by their CPU share, the rest by the canary), %d of them on a speed that moved more "
                  "than %.0f%% around them", c->ncanary_all, ref_all, h->canary_p10_gflops, h->canary_p90_gflops,
                  ref_all > 0 ? 100 * (h->canary_p90_gflops - h->canary_p10_gflops) / ref_all : 0, ref_one, sref_all,
                  sref_one, sref_slow, c->nnorms, nshare, nun, 100 * DLP_PROBE_SPEED_BAND);
    for (int k = 0; k < DLP_PROBE_WORK_KINDS; k++)
        if (c->nwork[k])
            dlp_probe_say(c, "work speed %s: %d readings, median %.1f %s per CPU-second (p10 %.1f, p90 %.1f): %s",
                          k_work_names[k], c->nwork[k], wref[k], k == DLP_PROBE_WORK_DECODE ? "images" : "GFLOP",
                          quantile(c->work[k], c->nwork[k], 0.1), quantile(c->work[k], c->nwork[k], 0.9),
                          k == DLP_PROBE_WORK_DECODE ? "the pipeline's CPU costs and loader rows brought to it"
                                                     : "the rows of this precision measured by their share brought to it");
    if (nun) {
        dlp_probe_say(c, "warning: could not stabilise (the cores' speed moved more than +-%.0f%% during every try, or "
                      "its repeats disagreed by more than %.0f%% after normalisation, or the work speed read around it "
                      "moved more than %.0f%%): %s", 100 * DLP_PROBE_SPEED_BAND, 100 * DLP_PROBE_SPEED_BAND,
                      200 * DLP_PROBE_SPEED_BAND, unstable);
        size_t nn = strlen(c->p->notes);
        snprintf(c->p->notes + nn, sizeof c->p->notes - nn, "%snot stabilised (speed moved): %.200s%s",
                 nn ? "; " : "", unstable, strlen(unstable) > 200 ? "..." : "");
    }
    free(c->norms);
    c->norms = NULL;
    c->nnorms = 0;
    return o;
}

// --- several probes into one profile (probe --repeat) --------------------------------------------------------------

// The readings of one probe's details ("normalisation": key) appended to v (up to max).
static int pool_readings(const json_t *details, const char *key, double *v, int n, int max) {
    const json_t *a = json_object_get(json_object_get(details, "normalisation"), key);
    size_t i;
    const json_t *x;
    json_array_foreach(a, i, x) if (n < max && json_is_number(x)) v[n++] = json_number_value(x);
    return n;
}

// Median over the probes of a value normalised to each probe's reference ref[i], first brought to the pooled
// reference R: a time at ref[i] takes ref[i] / R as long at R; a rate goes R / ref[i] as fast.
static double merged(const double *v, const double *ref, double R, int is_rate, int n) {
    double x[DLP_PROBE_MAX_REPEAT];
    int k = 0;
    for (int i = 0; i < n && k < DLP_PROBE_MAX_REPEAT; i++) {
        if (!(ref[i] > 0) || !(R > 0)) x[k++] = v[i];
        else x[k++] = is_rate ? v[i] * R / ref[i] : v[i] * ref[i] / R;
    }
    return dlp_stats_median_f64(x, (size_t)k);
}

dlp_status dlp_probe_merge(const dlp_profile *ps, json_t *const *details, int n, dlp_profile *out, json_t **summary) {
    if (n < 1 || n > DLP_PROBE_MAX_REPEAT) return DLP_ERR(DLP_ERR_INVALID, "probe --repeat: 1..%d probes", DLP_PROBE_MAX_REPEAT);
    *out = ps[0];
    double *all = malloc(sizeof(double) * DLP_PROBE_MAX_READINGS * DLP_PROBE_MAX_REPEAT);
    double *one = malloc(sizeof(double) * DLP_PROBE_MAX_READINGS * DLP_PROBE_MAX_REPEAT);
    if (!all || !one) {
        free(all);
        free(one);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    int na = 0, n1 = 0;
    const int cap = DLP_PROBE_MAX_READINGS * DLP_PROBE_MAX_REPEAT;
    double ra[DLP_PROBE_MAX_REPEAT], r1[DLP_PROBE_MAX_REPEAT], steal = 0;
    for (int i = 0; i < n; i++) {
        na = pool_readings(details[i], "readings_gflops", all, na, cap);
        n1 = pool_readings(details[i], "readings_one_thread_gflops", one, n1, cap);
        ra[i] = ps[i].host.canary_gflops;
        r1[i] = ps[i].host.canary1_gflops > 0 ? ps[i].host.canary1_gflops : ps[i].host.canary_gflops;
        steal += ps[i].host.steal_fraction / n;
    }
    dlp_host_profile *h = &out->host;
    const double R = na ? dlp_stats_median_f64(all, (size_t)na) : merged(ra, ra, 0, 0, n);
    const double R1 = n1 ? dlp_stats_median_f64(one, (size_t)n1) : R;
    h->canary_gflops = R;
    h->canary1_gflops = R1;
    h->steal_fraction = steal;
    h->canary_samples = na;
    if (na) {
        double *tmp = malloc(sizeof(double) * (size_t)na);
        if (tmp) {
            memcpy(tmp, all, sizeof(double) * (size_t)na);
            h->canary_p10_gflops = dlp_stats_quantile_f64(tmp, (size_t)na, 0.1);
            h->canary_p90_gflops = dlp_stats_quantile_f64(tmp, (size_t)na, 0.9);
            free(tmp);
        }
    }
    free(all);
    free(one);
    // Rows normalised by their CPU share (every probe measured it): brought to the probes' median share instead
    double sa[DLP_PROBE_MAX_REPEAT], s1[DLP_PROBE_MAX_REPEAT];
    int by_share = 1;
    for (int i = 0; i < n; i++) {
        sa[i] = ps[i].host.cpu_share;
        s1[i] = ps[i].host.cpu_share1 > 0 ? ps[i].host.cpu_share1 : ps[i].host.cpu_share;
        by_share &= sa[i] > 0;
    }
    const double S = by_share ? dlp_stats_median_f64(sa, (size_t)n) : 0;
    const double S1 = by_share ? dlp_stats_median_f64(s1, (size_t)n) : 0;
    h->cpu_share = S;
    h->cpu_share1 = S1;
    // the multi-thread compute rows by their slowest thread's share, where every probe measured it
    double ss[DLP_PROBE_MAX_REPEAT];
    int by_slow = by_share;
    for (int i = 0; i < n; i++) by_slow &= (ss[i] = ps[i].host.cpu_share_slowest) > 0;
    const double SS = by_slow ? dlp_stats_median_f64(ss, (size_t)n) : 0;
    h->cpu_share_slowest = SS;
    const double *rowref = by_share ? sa : ra, *rowref1 = by_share ? s1 : r1;
    const double RR = by_share ? S : R, RR1 = by_share ? S1 : R1;
    double v[DLP_PROBE_MAX_REPEAT];
    int unmatched = 0;
    // the loop's overhead (a time on every CPU)
    for (int i = 0; i < n; i++) v[i] = ps[i].host.loop_overhead_s;
    h->loop_overhead_s = merged(v, ra, R, 0, n);
    // the pipeline: CPU-time costs (not normalised) as medians; the scaling efficiencies (rates) at the pooled speed
    dlp_pipeline_profile *pp = &out->pipeline;
    double *costs[] = {&pp->read_per_file_s, &pp->read_per_byte_s, &pp->decode_per_image_s, &pp->decode_per_pixel_s,
                       &pp->decode_per_byte_s, &pp->augment_per_image_s, &pp->augment_per_in_pixel_s,
                       &pp->augment_per_out_pixel_s, &pp->loader_cost_scale, &pp->oversub_efficiency};
    for (size_t k = 0; k < sizeof costs / sizeof costs[0]; k++) {
        const size_t off = (size_t)((const char *)costs[k] - (const char *)pp);
        for (int i = 0; i < n; i++) v[i] = *(const double *)((const char *)&ps[i].pipeline + off);
        *costs[k] = dlp_stats_median_f64(v, (size_t)n);
    }
    for (int s = 0; s < pp->nscaling; s++) {
        int m = 0;
        double rr[DLP_PROBE_MAX_REPEAT];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < ps[i].pipeline.nscaling; j++)
                if (ps[i].pipeline.scaling[j].threads == pp->scaling[s].threads) {
                    v[m] = ps[i].pipeline.scaling[j].efficiency;
                    rr[m++] = pp->scaling[s].threads == 1 ? rowref1[i] : rowref[i];
                    break;
                }
        if (m < n) unmatched++;
        double e = merged(v, rr, pp->scaling[s].threads == 1 ? RR1 : RR, 1, m);
        pp->scaling[s].efficiency = e > 1.5 ? 1.5 : e < 0.01 ? 0.01 : e;
        pp->scaling[s].speed_rel = 1;
    }
    // each device's rows: the same row (task, precision, threads, model, size) of every probe
    for (int d = 0; d < out->ndevices; d++) {
        dlp_device_profile *dev = &out->devices[d];
        for (int k = 0; k < dev->nrates; k++) {
            dlp_rate *row = &dev->rates[k];
            double t0[DLP_PROBE_MAX_REPEAT], pi[DLP_PROBE_MAX_REPEAT], up[DLP_PROBE_MAX_REPEAT], rr[DLP_PROBE_MAX_REPEAT];
            double wk[DLP_PROBE_MAX_REPEAT];
            int m = 0;
            for (int i = 0; i < n; i++) {
                const dlp_device_profile *di = dlp_profile_find_device(&ps[i], dev->name);
                for (int j = 0; di && j < di->nrates; j++) {
                    const dlp_rate *q = &di->rates[j];
                    if (q->task == row->task && q->prec == row->prec && q->threads == row->threads &&
                        q->size == row->size && strcmp(q->model, row->model) == 0) {
                        t0[m] = q->t0_s, pi[m] = q->per_image_s, up[m] = q->update_s, wk[m] = q->work_gflops;
                        rr[m++] = row->threads == 1 ? rowref1[i] : by_slow && dlp_rate_by_slowest(row) ? ss[i] : rowref[i];
                        break;
                    }
                }
            }
            if (m < n) unmatched++;
            // held at each probe's work speed: first brought to the probes' median work speed (a time at work speed
            // w_i takes w_i / W as long at W)
            int all_work = m > 0;
            for (int i = 0; i < m; i++) all_work &= wk[i] > 0;
            if (all_work) {
                const double W = dlp_stats_median_f64(wk, (size_t)m);
                for (int i = 0; i < m; i++) t0[i] *= wk[i] / W, pi[i] *= wk[i] / W, up[i] *= wk[i] / W;
                row->work_gflops = W;
            } else row->work_gflops = 0;
            if (row->speed_rel > 0) {  // measured against the speed: brought to the pooled reference
                const double Rr = row->threads == 1 ? RR1 : by_slow && dlp_rate_by_slowest(row) ? SS : RR;
                row->t0_s = merged(t0, rr, Rr, 0, m);
                row->per_image_s = merged(pi, rr, Rr, 0, m);
                row->update_s = merged(up, rr, Rr, 0, m);
                row->speed_rel = 1;
            }
        }
        for (int k = 0; k < dev->ncontention; k++) {
            dlp_contention_point *pt = &dev->contention[k];
            double cs[DLP_PROBE_MAX_REPEAT], ls[DLP_PROBE_MAX_REPEAT];
            int m = 0;
            for (int i = 0; i < n; i++) {
                const dlp_device_profile *di = dlp_profile_find_device(&ps[i], dev->name);
                const dlp_contention_point *q = di ? dlp_device_find_contention(di, pt->threads, pt->workers) : NULL;
                if (q && q->threads == pt->threads && q->workers == pt->workers) {
                    cs[m] = q->compute_share;
                    ls[m++] = q->loader_share;
                }
            }
            if (m) {
                pt->compute_share = dlp_stats_median_f64(cs, (size_t)m);
                pt->loader_share = dlp_stats_median_f64(ls, (size_t)m);
            }
        }
    }
    size_t nn = strlen(out->notes);
    snprintf(out->notes + nn, sizeof out->notes - nn, "%smedian of %d probes at their pooled median speed", nn ? "; " : "",
             n);
    if (summary) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, json_real(ra[i]));
        *summary = json_pack("{s:i, s:f, s:f, s:o, s:i}", "probes", n, "reference_gflops", R,
                             "reference_one_thread_gflops", R1, "references_gflops", a, "rows_missing_in_some", unmatched);
    }
    return dlp_profile_validate(out, "merged profile");
}
