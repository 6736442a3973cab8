// perf/hwplan: `dlperf plan`'s search. Every configuration the catalog can build — a platform (hw/parts) x GPU type x
// GPUs per node x CPU x storage option x nodes, and the catalog's whole systems x nodes — becomes a catalog system
// record, a machine profile (hw/derive) and a prediction (perf/model) with its cost (perf/cost). The choice under a
// budget: the cheapest configuration within a tolerance of the fastest affordable one (so no cheaper one is faster,
// and a larger budget never gives a slower plan); under a deadline: the cheapest that meets it (rent: the cheapest
// run). docs/model.md, "Plan".
// Defines: dlp_hwplan_mode, dlp_hwplan_req, dlp_hwplan_req_init, dlp_hwplan_cand, dlp_hwplan_host_cap,
//          dlp_hwplan_spec, dlp_hwplan_predict_spec, dlp_hwplan_fill, dlp_hwplan_enumerate, dlp_hwplan_choose,
//          dlp_hwplan_frontier, dlp_hwplan_neighbor, dlp_hwplan_cand_to_json.
#ifndef DLP_PERF_HWPLAN_H
#define DLP_PERF_HWPLAN_H
#include "core/status.h"
#include "hw/catalog.h"
#include "hw/parts.h"
#include "perf/cost.h"
#include "perf/model.h"

typedef enum { DLP_HWPLAN_PURCHASE = 0, DLP_HWPLAN_HOURLY } dlp_hwplan_mode;

typedef struct dlp_hwplan_req {
    dlp_hwplan_mode mode;
    double budget;          // $ (purchase) or $ per hour (hourly); 0: none (then a deadline)
    double deadline_s;      // 0: none
    double tolerance;       // 0.02: throughputs this close to the fastest count as as fast
    int max_nodes;          // 4
    const char *pipeline;   // catalog pipeline (NULL: dlperf)
    int prec_given;         // w.prec as given (else fp16 on GPUs)
    dlp_workload w;         // the workload; devices and nodes are set per configuration, batch 0: the GPU's reference
    dlp_cost_params cp;
} dlp_hwplan_req;

void dlp_hwplan_req_init(dlp_hwplan_req *r);

typedef struct dlp_hwplan_cand {
    char id[128];                   // "am5-desktop/1xrtx-4090/1xryzen-7950x/base/1n" or "aws-p5/2n"
    const dlp_system_spec *sys;     // a whole catalog system (NULL: built from parts)
    const dlp_platform *plat;
    const dlp_gpu_spec *gpu;
    const dlp_cpu_spec *cpu;
    const dlp_storage_opt *stor;    // NULL: the platform's own storage
    int gpus, sockets, nodes;
    double node_price_usd, price_usd;  // purchase price per node, all nodes (0: cloud)
    double power_w;                 // per node
    double usd_per_hour;            // all nodes: rent, or amortized price + energy
    double budget_cost;             // what the budget is compared with: price_usd or usd_per_hour
    int ok;                         // predicted (else err says why, e.g. no network for several nodes)
    char err[160];
    double img_per_s;               // all nodes
    double host_img_per_s, device_img_per_s;  // per node: the CPU input pipeline's capacity and the GPUs'
    double ratio;                   // host / device
    double epoch_s, total_s, usd_per_million, usd_total;
    dlp_stage bottleneck;
    int feasible;                   // within the budget and the deadline (set by dlp_hwplan_choose)
} dlp_hwplan_cand;

// The input pipeline's capacity of a prediction: its slowest loader-side stage (read, decode+augment, I/O wait,
// host memory); infinite when none is present.
double dlp_hwplan_host_cap(const dlp_prediction *o);

// The system record of a configuration (spec's strings point into c).
void dlp_hwplan_spec(const dlp_hwplan_cand *c, dlp_system_spec *spec);
// Predicts one system record: profile, device, workload (as req's), prediction and cost.
dlp_status dlp_hwplan_predict_spec(const dlp_catalog *cat, const dlp_system_spec *spec, int nodes, const dlp_hwplan_req *req,
                                 dlp_profile *p, dlp_workload *w, dlp_prediction *o, dlp_cost *cost);
// Fills c's results from a prediction and cost.
void dlp_hwplan_fill(dlp_hwplan_cand *c, const dlp_prediction *o, const dlp_cost *cost, dlp_hwplan_mode mode);

// Every configuration of the catalog for the request's mode, predicted (*out: malloc'ed, *n entries).
dlp_status dlp_hwplan_enumerate(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req,
                              dlp_hwplan_cand **out, int *n);
// Marks the feasible configurations and returns the chosen one's index (-1: none is feasible).
int dlp_hwplan_choose(dlp_hwplan_cand *c, int n, const dlp_hwplan_req *req);
// The feasible configurations no other feasible one beats (cheaper or as cheap and faster), fastest first; the
// chosen one first of all. Writes up to max indices into idx, returns how many.
int dlp_hwplan_frontier(const dlp_hwplan_cand *c, int n, int chosen, int *idx, int max);
// A configuration as dlperf.plan/1 lists it: its parts, cost, and (when predicted) rate, balance and bottleneck.
json_t *dlp_hwplan_cand_to_json(const dlp_hwplan_cand *c);
// Whether a and b differ in exactly one part; *what names it ("cpu", "storage", "gpus", "gpu", "nodes").
int dlp_hwplan_neighbor(const dlp_hwplan_cand *a, const dlp_hwplan_cand *b, const char **what);

#endif
