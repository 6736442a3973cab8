// perf/predict_detail: what `dlperf predict` needs besides the model itself — the machine (a catalog system or a
// profile, with the cost figures given), the device to predict for, the dataset's statistics, the datasheet GPU
// model's step explained (by layer kind, and what the next 10% would need), and a published figure against the
// prediction. cli/predict parses the options and prints; the figures come from here.
// Defines: dlp_predict_machine_req, dlp_predict_machine, dlp_predict_device, dlp_predict_stats, dlp_gm_explain,
//          dlp_gm_explain_compute, dlp_gm_explain_kind_shown, dlp_gm_explain_to_json, dlp_published_cmp,
//          dlp_published_compare, dlp_published_cmp_to_json, dlp_predict_entry_json.
#ifndef DLP_PERF_PREDICT_DETAIL_H
#define DLP_PERF_PREDICT_DETAIL_H
#include <jansson.h>
#include <stddef.h>

#include "core/status.h"
#include "hw/catalog.h"
#include "hw/gpumodel.h"
#include "hw/profile.h"
#include "perf/model.h"

// The machine of one prediction: a profile file, or a catalog system with its pipeline and stack; price_usd,
// power_w, usd_per_hour > 0 replace the machine's own (a price alone: an owned machine, no rent).
typedef struct dlp_predict_machine_req {
    const char *profile, *system, *pipeline, *stack;
    double price_usd, power_w, usd_per_hour;
} dlp_predict_machine_req;
// *stack: the software stack its GPUs are modelled with (req->stack, else the system's, else the default).
dlp_status dlp_predict_machine(const dlp_catalog *cat, const dlp_predict_machine_req *req, dlp_profile *p,
                               const char **stack);

// The device to predict for: spec (sim:<gpu>[,opts], a GPU name, cpu, cuda; NULL or "": the profile's first).
// *plain: a GPU as the catalog or a measured profile has it (published figures apply); stack_out gets the stack a
// sim/GPU device string names (stack=NAME, else `stack` when given), and is left as it is otherwise.
dlp_status dlp_predict_device(const dlp_catalog *cat, const dlp_profile *p, const char *spec, const char *stack,
                              dlp_device_profile *d, int *plain, char *stack_out, size_t stack_len);

// w->stats from --data (a directory, list file or synthetic[:...]: its JPEG statistics; *skipped: files left out),
// else the catalog dataset id, else the profile's, else the catalog's ImageNet split of w->task.
dlp_status dlp_predict_stats(const dlp_catalog *cat, const dlp_profile *p, const char *data, const char *dataset,
                             dlp_workload *w, int *skipped, char *where, size_t where_len);

// The datasheet GPU model's training step at a batch, explained.
typedef struct dlp_gm_explain {
    dlp_gm_step st;
    double step_s;                 // the step at the batch
    int order[DLP_WL_KIND_COUNT];  // layer kinds by their share of the step, largest first
    double mem_x, peak_x;          // the factor on the memory side / tensor peak alone for a 10% shorter step (0: none)
    int sm_limited;                // the memory side is the SMs x clock, not HBM
} dlp_gm_explain;
dlp_status dlp_gm_explain_compute(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *stk, int batch,
                                  dlp_gm_explain *x);
// Whether layer kind k is worth a mention (at least 0.5% of the step).
int dlp_gm_explain_kind_shown(const dlp_gm_explain *x, int k, int batch);
// ce, me, kernel_s: the stack's efficiencies and time per kernel as the step used them.
json_t *dlp_gm_explain_to_json(const dlp_gm_explain *x, const dlp_gm_stack *stk, int batch, double ce, double me,
                               double kernel_s);

// A published figure of the predicted GPU beside the prediction: single-GPU figures per device (with more than one
// GPU and the stack known, against the GPU model's 1-GPU step), whole-run ones as a whole.
typedef struct dlp_published_cmp {
    const dlp_published *pb;
    double predicted, error;  // error: (predicted - published) / published
    const char *how;          // " per device", " on 1 GPU (GPU model)" or ""
    int same_stack;           // the figure's stack is the prediction's
} dlp_published_cmp;
// 0 when pb is not for g, the workload's task and precision, or this run's GPU count. stk: NULL when unknown.
int dlp_published_compare(const dlp_published *pb, const dlp_gpu_spec *g, const dlp_workload *w,
                          const dlp_prediction *o, const dlp_gm_stack *stk, const char *stack, dlp_published_cmp *c);
json_t *dlp_published_cmp_to_json(const dlp_published_cmp *c);

// A prediction's entry in dlperf.predict/1: the machine (source: the profile file or "catalog"), device, workload.
json_t *dlp_predict_entry_json(const char *source, const dlp_profile *p, const dlp_device_profile *d,
                               const dlp_workload *w);

#endif
