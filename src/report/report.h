// report/report: the evaluation report — a run directory's saved results (run.json, the stages' JSON results, the
// monitor's CSV time series) as one self-contained HTML page: the numbers embedded as JSON, drawn by Chart.js from
// Debian inlined into the page (no network), with the table of numbers under each chart. Several run directories
// give one page with the runs side by side and a table of ratios.
// Defines: dlp_report_info, dlp_report_write, dlp_report_chartjs_path, dlp_report_verdict.
#ifndef DLP_REPORT_REPORT_H
#define DLP_REPORT_REPORT_H
#include <jansson.h>
#include <stddef.h>

#include "core/status.h"

// The chart library, read when the page is written: $DLPERF_CHARTJS, else Debian's libjs-chart.js.
#define DLP_REPORT_CHARTJS_DEFAULT "/usr/share/javascript/chart.js/chart.min.js"

typedef struct dlp_report_info {
    size_t bytes;        // the page's size
    int runs;            // run directories on it
    int chartjs;         // 1: the chart library was inlined; 0: tables only (the page says why)
    char chartjs_path[4096];
} dlp_report_info;

// The chart library's path: $DLPERF_CHARTJS when set, else DLP_REPORT_CHARTJS_DEFAULT.
const char *dlp_report_chartjs_path(void);
// Writes the page for the run directories dirs[0..n) to out_path (replacing it). Each directory needs its run.json
// (dlperf.run/1); a missing or unreadable stage result or monitor series becomes a stated gap on the page.
dlp_status dlp_report_write(const char *const *dirs, int n, const char *out_path, dlp_report_info *info);
// The verdict in words from a run.json: what holds this machine back and what would fix it (caller frees).
char *dlp_report_verdict(const json_t *run, const json_t *predict);

#endif
