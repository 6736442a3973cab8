// perf/hwplan_needs: what each part of a machine must deliver to keep its GPUs busy at their rate — GPUs, CPU cores
// per GPU, storage, page cache, memory bandwidth, PCIe, allreduce — against what it has, each marked SHORT, ok,
// with its headroom, or "a cheaper part would do" when the plan's search found one (`dlperf plan`).
// Defines: dlp_hwplan_need, DLP_HWPLAN_MAX_NEEDS, dlp_hwplan_needs, dlp_hwplan_balance_info, dlp_hwplan_balance,
//          dlp_hwplan_money.
#ifndef DLP_PERF_HWPLAN_NEEDS_H
#define DLP_PERF_HWPLAN_NEEDS_H
#include "perf/hwplan.h"

typedef struct dlp_hwplan_need {
    const char *part;  // "GPUs", "cores per GPU", "storage", "memory", "memory bw", "PCIe", "allreduce"
    char need[120], has[160], mark[240];
} dlp_hwplan_need;

#define DLP_HWPLAN_MAX_NEEDS 8

// The lines for machine p predicted as o (c, n, chosen: the configurations searched and the chosen one, whose
// one-part neighbours say where a cheaper part would do; c NULL: a given machine). pipe names the input pipeline.
// Returns the number of lines written to out (at most DLP_HWPLAN_MAX_NEEDS).
int dlp_hwplan_needs(const dlp_profile *p, const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen,
                     double tol, int hourly, const char *pipe, dlp_hwplan_need *out);
// Balance: the CPU input pipeline's capacity over the GPUs' rate per node, balanced within 10%, and why not: spare
// CPU (a cheaper part would do, or it comes with the system) or GPUs waiting (what to buy, or nothing the platform
// takes would feed them). c NULL: a given machine (its changes are dlp_hwplan_inverse's).
typedef struct dlp_hwplan_balance_info {
    double host_img_per_s, device_img_per_s, ratio;
    int balanced;
    char why[400];
} dlp_hwplan_balance_info;
void dlp_hwplan_balance(const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen, double tol, int hourly,
                        dlp_hwplan_balance_info *b);
// "$12,345" or "$12.34/h"
const char *dlp_hwplan_money(double v, int hourly, char *buf, size_t len);

#endif
