// perf/hwplan_change: `dlperf plan`'s inverse: a given machine (a catalog system, or a measured profile with
// optionally a catalog GPU put in), its prediction, and every change of its CPU (a catalog system's) or storage
// the catalog prices, predicted: the cheapest that removes a host-side bottleneck and the cheapest that keeps the
// throughput for less money.
// Defines: dlp_hwplan_machine_req, dlp_hwplan_change, dlp_hwplan_inverse, dlp_hwplan_inverse_run,
//          dlp_hwplan_inverse_free, dlp_hwplan_cheaper_part, dlp_hwplan_better_spent.
#ifndef DLP_PERF_HWPLAN_CHANGE_H
#define DLP_PERF_HWPLAN_CHANGE_H
#include "perf/hwplan.h"

// The machine: a catalog system id, or a profile file (device: a catalog GPU put into its host, devices per node).
typedef struct dlp_hwplan_machine_req {
    const char *system, *profile, *device;
    int devices;  // 0: the profile's
} dlp_hwplan_machine_req;

typedef struct dlp_hwplan_change {
    const dlp_cpu_spec *cpu;      // NULL: the CPU stays
    const dlp_storage_opt *stor;  // NULL: the storage stays
    double delta_usd, img_per_s;
    dlp_stage bottleneck;
} dlp_hwplan_change;

typedef struct dlp_hwplan_inverse {
    const dlp_system_spec *sys;  // the catalog system (NULL: a profile)
    dlp_profile *profile;        // the machine
    dlp_prediction *pred;        // its prediction
    dlp_workload w;
    int host_bound;              // the CPU input pipeline or storage holds the GPUs back (beyond the tolerance)
    int from_platform;           // the CPUs tried are those a platform of parts.json built on the system takes
    dlp_hwplan_change *changes;  // every change predicted, in the order tried
    int nchanges;
    int best;   // the cheapest change that removes the bottleneck (-1: none; only when host_bound)
    int cheap;  // the cheapest that keeps the throughput (within the tolerance) for less money (-1: none)
} dlp_hwplan_inverse;

// Predicts the machine, then each change (parts may be NULL: no storage options). Free with
// dlp_hwplan_inverse_free, also after an error.
dlp_status dlp_hwplan_inverse_run(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req,
                                  const dlp_hwplan_machine_req *m, dlp_hwplan_inverse *inv);
void dlp_hwplan_inverse_free(dlp_hwplan_inverse *inv);

// Among the configurations one part away from c[chosen]: the cheapest that swaps `part` ("cpu", "storage", ...)
// and is about as fast (within tol): a cheaper part would do (-1: none).
int dlp_hwplan_cheaper_part(const dlp_hwplan_cand *c, int n, int chosen, const char *part, double tol);
// The one with the most images/s per extra dollar among the faster ones: where more money is best spent (-1: none;
// *part names the part it swaps).
int dlp_hwplan_better_spent(const dlp_hwplan_cand *c, int n, int chosen, double tol, const char **part);

#endif
