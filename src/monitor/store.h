// monitor/store: per-phase and whole-run statistics of the sampled fields — time-weighted means, maxima and
// totals (exact), and p50/p95 from a bounded, evenly thinned subsample of the rows. Mean, p50, p95 and max
// describe the same intervals: the full-length ones (at least half the sampling interval); a short interval cut
// by a phase boundary or by the stop reads only a few clock ticks, so it counts only in a phase that has no
// full-length one. Totals (time integrals: bytes, joules, CPU seconds) count every interval.
// Defines: dlp_mon_stats, dlp_mon_store, dlp_mon_store_init/free/phase/add/json.
#ifndef DLP_MONITOR_STORE_H
#define DLP_MONITOR_STORE_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "monitor/source.h"

#define DLP_MON_PHASE_ROWS 256   // rows kept per phase for percentiles (thinned 2:1 when full)
#define DLP_MON_TOTAL_ROWS 4096  // rows kept for the whole run
#define DLP_MON_MAX_PHASES 1024  // later phases are merged into the last one, with a warning

typedef struct dlp_mon_stats {
    char name[64];
    double start_s, end_s;
    int64_t rows;      // all rows (intervals) in the phase
    double dt_sum_s;
    double *tsum;      // [nsum] sum of value * dt over all rows where the value is a number (totals)
    double *wsum;      // [nsum] the same over the eligible rows (mean)
    double *wdt;       // [nsum] sum of dt over the eligible rows where the value is a number
    double *max;       // [nsum] over the eligible rows
    float *res;        // [res_cap][nsum] evenly spaced subsample of eligible rows
    int res_n, res_cap;
    int64_t stride, seen;
    int res_full_rows; // eligible rows are full-length ones (short ones were dropped when the first came)
} dlp_mon_stats;

typedef struct dlp_mon_store {
    int nsum;
    int *idx;          // [nsum] field index of each summarized field
    double full_dt_s;  // rows at least this long are "full" (half the interval)
    dlp_mon_stats total;
    dlp_mon_stats *phases;
    int nphases, phase_cap;
} dlp_mon_store;

dlp_status dlp_mon_store_init(dlp_mon_store *s, const dlp_mon_field *fields, int nfields, double interval_s,
                              const char *first_phase);
void dlp_mon_store_free(dlp_mon_store *s);
// Ends the current phase at t_s and starts `name` (a current phase that is still empty at t_s is renamed).
dlp_status dlp_mon_store_phase(dlp_mon_store *s, const char *name, double t_s);
// One interval ending at t_s, of length dt_s (> 0), with a value per field.
void dlp_mon_store_add(dlp_mon_store *s, double t_s, double dt_s, const double *vals);
// {"phases": [...], "total": {...}} as described in monitor.h; end_s closes the last phase.
json_t *dlp_mon_store_json(const dlp_mon_store *s, const dlp_mon_field *fields, double end_s);
// q-quantile (0..1) of n values with linear interpolation between order statistics; sorts v. NaN if n == 0.

#endif
