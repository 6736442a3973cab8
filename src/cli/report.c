// cli/report: `dlperf report RUN_DIR [RUN_DIR...]` — the evaluation report written again from saved results (no
// re-run): one self-contained HTML page with the charts and tables of each run, several runs side by side.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/opts.h"
#include "report/report.h"

int dlp_cli_report(int argc, char **argv) {
    const char *out = NULL;
    dlp_opt opts[] = {
        {"out", 'o', DLP_OPT_STR, &out, NULL, "FILE", "the page (default RUN_DIR/report.html for one run; report.html here for several)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(
        opts,
        "usage: dlperf report RUN_DIR [RUN_DIR...] [--out FILE]\n"
        "The evaluation report of saved `dlperf run` results, written again without re-running: one HTML file,\n"
        "opened offline, with charts (Chart.js from Debian's libjs-chart.js, inlined) and their tables. Several\n"
        "run directories give the runs side by side with a table of ratios to the first.",
        argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    int n = argc - rest;
    if (n < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "report: give a run directory (see --help)"));
    char path[4400];
    if (out) snprintf(path, sizeof path, "%s", out);
    else if (n == 1) {
        size_t len = strlen(argv[rest]);
        while (len > 1 && argv[rest][len - 1] == '/') len--;  // "run/" -> run/report.html
        snprintf(path, sizeof path, "%.*s/report.html", (int)len, argv[rest]);
    }
    else snprintf(path, sizeof path, "report.html");
    int64_t t0 = dlp_now_ns();
    dlp_report_info info;
    st = dlp_report_write((const char *const *)(argv + rest), n, path, &info);
    if (st) return dlp_cli_fail(st);
    printf("report: %s written (%.0f KB, %d run%s, %.2f s)", path, (double)info.bytes / 1024, info.runs,
           info.runs == 1 ? "" : "s", dlp_ns_to_s(dlp_now_ns() - t0));
    if (info.chartjs) printf("\n");
    else printf("; charts unavailable: %s not found (install libjs-chart.js), tables only\n", info.chartjs_path);
    return 0;
}
