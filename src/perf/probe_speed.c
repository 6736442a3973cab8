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

#include "core/stats.h"
#include "hw/canary.h"
#include "perf/probe_impl.h"

typedef struct dlp_probe_norm {
    double *value;    // in the profile
    double raw;       // as measured
    int is_rate;      // a rate (rescaled by reference / speed) or a time (by speed / reference)
    double speed;     // GFLOP/s of the canary around it
    int one;          // measured on one thread (the one-thread reference) or on all CPUs
    double spread;    // the readings' (max - min) / median
    int tries;
    double *speed_rel;
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

void dlp_probe_norm_add(dlp_probe_ctx *c, double *value, int is_rate, double speed, int threads, double spread,
                        int tries, double *speed_rel, const char *fmt, ...) {
    if (!c->norms) c->norms = calloc(DLP_PROBE_MAX_NORMS, sizeof *c->norms);
    if (!c->norms || c->nnorms >= DLP_PROBE_MAX_NORMS || !(speed > 0)) return;  // left as measured
    dlp_probe_norm *n = &c->norms[c->nnorms++];
    n->value = value;
    n->raw = *value;
    n->is_rate = is_rate;
    n->speed = speed;
    n->one = threads == 1;
    n->spread = spread;
    n->tries = tries;
    n->speed_rel = speed_rel;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->what, sizeof n->what, fmt, ap);
    va_end(ap);
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

json_t *dlp_probe_normalise(dlp_probe_ctx *c) {
    dlp_host_profile *h = &c->p->host;
    const double ref_all = dlp_stats_median_f64(c->canary_all, c->ncanary_all);
    const double ref_one = dlp_stats_median_f64(c->canary_one, c->ncanary_one);
    h->canary_gflops = ref_all;
    h->canary_p10_gflops = quantile(c->canary_all, c->ncanary_all, 0.1);
    h->canary_p90_gflops = quantile(c->canary_all, c->ncanary_all, 0.9);
    h->canary_samples = c->ncanary_all;
    h->canary1_gflops = ref_one;
    json_t *o = json_object();
    json_object_set_new(o, "band", json_real(DLP_PROBE_SPEED_BAND));
    json_object_set_new(o, "reference_gflops", json_real(ref_all));
    json_object_set_new(o, "reference_one_thread_gflops", json_real(ref_one));
    json_t *ra = json_array(), *r1 = json_array();
    for (int i = 0; i < c->ncanary_all; i++) json_array_append_new(ra, json_real(c->canary_all[i]));
    for (int i = 0; i < c->ncanary_one; i++) json_array_append_new(r1, json_real(c->canary_one[i]));
    json_object_set_new(o, "readings_gflops", ra);
    json_object_set_new(o, "readings_one_thread_gflops", r1);
    json_t *rows = json_array();
    char unstable[400] = "";
    int nun = 0;
    for (int i = 0; i < c->nnorms; i++) {
        dlp_probe_norm *n = &c->norms[i];
        const double ref = n->one ? ref_one : ref_all;
        if (!(ref > 0)) continue;
        const double rel = n->speed / ref;
        *n->value = n->is_rate ? n->raw / rel : n->raw * rel;
        if (n->speed_rel) *n->speed_rel = rel;
        const int stable = n->spread <= 2 * DLP_PROBE_SPEED_BAND;
        json_array_append_new(rows, json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:b}", "row", n->what,
                                              "kind", n->is_rate ? "rate" : "time", "threads", n->one ? 1 : 0,
                                              "raw", n->raw, "speed_gflops", n->speed, "speed_rel", rel, "normalised",
                                              *n->value, "spread", n->spread, "tries", n->tries, "stable", stable));
        if (!stable) {
            nun++;
            size_t l = strlen(unstable);
            if (l + strlen(n->what) + 4 < sizeof unstable)
                snprintf(unstable + l, sizeof unstable - l, "%s%s", l ? ", " : "", n->what);
        }
    }
    json_object_set_new(o, "rows", rows);
    json_object_set_new(o, "unstable", json_integer(nun));
    dlp_probe_say(c, "speed: %d readings on all CPUs, median %.1f GFLOP/s (p10 %.1f, p90 %.1f: spread %.0f%%), one "
                  "thread %.1f; %d timed values normalised to the median, %d of them on a speed that moved more than "
                  "%.0f%% around them", c->ncanary_all, ref_all, h->canary_p10_gflops, h->canary_p90_gflops,
                  ref_all > 0 ? 100 * (h->canary_p90_gflops - h->canary_p10_gflops) / ref_all : 0, ref_one, c->nnorms,
                  nun, 100 * DLP_PROBE_SPEED_BAND);
    if (nun) {
        dlp_probe_say(c, "warning: could not stabilise (the cores' speed moved more than +-%.0f%% during every try): %s",
                      100 * DLP_PROBE_SPEED_BAND, unstable);
        size_t nn = strlen(c->p->notes);
        snprintf(c->p->notes + nn, sizeof c->p->notes - nn, "%snot stabilised (speed moved): %.200s%s",
                 nn ? "; " : "", unstable, strlen(unstable) > 200 ? "..." : "");
    }
    free(c->norms);
    c->norms = NULL;
    c->nnorms = 0;
    return o;
}
