// hw/gpumodel: a GPU's ResNet training step from its datasheet and a named software stack. Every layer of the
// model (hw/work) is timed as a roofline — convolutions and the fc as tensor-core FLOPs at the precision's dense
// peak, batch norm, ReLU, residual add, pooling and the loss as bytes moved through HBM, the optimizer update as
// bytes per parameter:
//     t_layer = max(FLOPs / (peak x ce), bytes / (min(HBM bandwidth, SMs x clock x k) x me)),
//               per image, forward and backward apart
//     step(b) = kernels x kernel_s + b x sum(t_layer) + update_bytes / (bandwidth x me)
// and n GPUs in data parallel run  step_n = step(b) x (1 + loss x (n - 1)) + (1 - overlap) x allreduce(n), with
// allreduce(n) = 2 (n - 1) / n x gradient bytes / bus bandwidth (ring). ce, me, kernel_s and loss are the stack's
// (dle-pytorch, dle-mxnet, lambda-pytorch, mlperf, ...), fitted by least squares from that stack's published
// records (catalog/throughput.json); a stack with too few records for all of them scales a prior fitted on every
// stack's records instead. No published figure of the GPU being predicted is needed or used.
// Defines: dlp_gm_stack, dlp_gm_step, dlp_gm_record, dlp_gm_step_compute, dlp_gm_step_time, dlp_gm_img_per_s,
//          dlp_gm_layer_time, dlp_gm_pclass, dlp_gm_effective, dlp_gm_busbw, dlp_gm_fit, dlp_gm_fit_catalog, dlp_gm_fit_catalog_held, dlp_gm_same_sheet, dlp_gm_records, dlp_gm_stack_get, dlp_gm_stack_default.
#ifndef DLP_HW_GPUMODEL_H
#define DLP_HW_GPUMODEL_H
#include "core/status.h"
#include "hw/catalog.h"
#include "hw/work.h"

#define DLP_GM_DEFAULT_STACK "dle-pytorch"   // the stack a GPU without a system (sim:<gpu>) is predicted with
#define DLP_GM_DEFAULT_BATCH 256             // a record that does not state its batch is taken at this one
#define DLP_GM_OVERLAP 0.8                   // share of the allreduce hidden under backward (not fitted, see docs)
#define DLP_GM_MAX_RECORDS 256
#define DLP_GM_PCLASSES 3                    // precision classes: 16-bit tensor (fp16, bf16), tf32 tensor, strict fp32

typedef struct dlp_gm_stack {
    char name[32];
    double ce;          // compute efficiency: share of the dense tensor peak a convolution reaches
    double me;          // memory efficiency: share of the HBM bandwidth a memory-bound kernel reaches
    double kernel_s;    // fixed time per kernel launch (per step)
    double loss;        // step-time loss per added GPU in data parallel (fraction of the 1-GPU step)
    double overlap;     // share of the allreduce hidden under backward
    double sm_bytes_per_clk;  // memory-bound kernels move at most this many bytes per SM per clock (0: no limit)
    int nrecords;       // training records the fit rests on
    int ngpus;          // distinct GPUs among them
    int scaled;         // 1: too few records for a full fit; the prior's times scaled by `scale`
    double scale;       // (scaled) the factor
    double fit_mape;    // the fit's mean absolute percentage error on its own records
    // A stack's time factor per precision class (dlp_gm_pclass): how much slower than the shape above this stack runs
    // at that precision (cuDNN's TF32 and strict-FP32 kernels reach a different share of their peak than the 16-bit
    // ones, and by how much differs by framework). Fitted from the stack's records of that class; a class without
    // records takes the geometric mean of the others. pn: the records each rests on.
    double pscale[DLP_GM_PCLASSES];
    int pn[DLP_GM_PCLASSES];
} dlp_gm_stack;

typedef struct dlp_gm_step {
    double fwd_s, bwd_s;       // per image
    double kernel_s;           // per step: kernels x the stack's overhead
    int kernels;
    double update_s;           // per step
    double kind_s[DLP_WL_KIND_COUNT];     // per image, forward + backward, by layer kind
    double kind_mem_s[DLP_WL_KIND_COUNT]; // ... of which in memory-bound passes
    double compute_bound_s, memory_bound_s;  // per image: time in compute- and in memory-bound passes
    double flops, bytes;       // per image, forward + backward
} dlp_gm_step;

// One training record as the fit sees it.
typedef struct dlp_gm_record {
    const dlp_gpu_spec *gpu;
    dlp_prec prec;
    int batch;               // per GPU (0: DLP_GM_DEFAULT_BATCH)
    int gpus;
    double img_per_s;        // whole run
    double busbw_bytes_per_s;  // allreduce bus bandwidth (gpus > 1)
    const dlp_published *pub;  // where it came from (may be NULL)
} dlp_gm_record;

// The step of resnet50 at 224x224 (1000 classes) on g at prec under stack s. DLP_ERR_UNSUPPORTED if g has no
// rate at prec.
dlp_status dlp_gm_step_compute(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *s, dlp_gm_step *out);
// The precision class of prec: 0 16-bit tensor (fp16, bf16, int8), 1 tf32 tensor, 2 strict fp32 (no tensor cores).
int dlp_gm_pclass(dlp_prec prec);
// The stack's efficiencies at prec with its precision factor applied (what a step at prec runs at): ce / f, me / f,
// kernel_s x f.
void dlp_gm_effective(const dlp_gm_stack *s, dlp_prec prec, double *ce, double *me, double *kernel_s);
// One layer's pass (backward 0: forward) per image: max(FLOPs / (peak x ce), bytes / (memory rate x me)) — the
// roofline — and which side bounds it.
double dlp_gm_layer_time(const dlp_wlayer *l, int backward, const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *s,
                         int *memory_bound);
// One GPU's step time at batch b.
double dlp_gm_step_time(const dlp_gm_step *st, int batch);
// Whole-run img/s of n GPUs at batch b per GPU (busbw: allreduce bus bandwidth, bytes/s; unused for n = 1).
double dlp_gm_img_per_s(const dlp_gm_step *st, const dlp_gm_stack *s, int batch, int n, double busbw);
// Allreduce bus bandwidth of n GPUs of this kind in one server from the datasheet: 80% of the per-direction
// NVLink rate, else of the PCIe link's.
double dlp_gm_busbw(const dlp_gpu_spec *g);
// Fits a stack to n records. prior: the model a stack with too few records scales (NULL: always a full fit).
dlp_status dlp_gm_fit(const char *name, const dlp_gm_record *r, int n, const dlp_gm_stack *prior, dlp_gm_stack *out);
// The catalog's training records of `stack` (NULL: every stack) except those of GPU `exclude` (NULL: none); *n.
int dlp_gm_records(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, dlp_gm_record *out, int max);
// A stack fitted from the catalog, leaving out every record of GPU `exclude` (NULL: none) — from the prior too.
// DLP_ERR_NOTFOUND naming the known stacks if `stack` has no training records left.
dlp_status dlp_gm_fit_catalog(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, dlp_gm_stack *out);
// As dlp_gm_fit_catalog; by_sheet: leave out too every GPU with exclude's datasheet (a V100 16GB and 32GB).
dlp_status dlp_gm_fit_catalog_held(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, int by_sheet,
                                   dlp_gm_stack *out);
// 1 if a and b have the same datasheet figures (SMs, clock, HBM bandwidth, peaks): one GPU to the model.
int dlp_gm_same_sheet(const dlp_gpu_spec *a, const dlp_gpu_spec *b);
// dlp_gm_fit_catalog(c, stack, NULL, out), fitted once per catalog and kept with it (thread-safe).
dlp_status dlp_gm_stack_get(const dlp_catalog *c, const char *stack, dlp_gm_stack *out);
// The stack to use for system s (NULL: a lone GPU): the system's, else DLP_GM_DEFAULT_STACK.
const char *dlp_gm_stack_default(const dlp_system_spec *s);

#endif
