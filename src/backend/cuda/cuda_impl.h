// backend/cuda/cuda_impl.h: what the cuda backend's files share (private to backend/cuda/): the plan, its ops and
// graphs, and the functions one file gives the others. cuda_build.c makes and frees plans (tensors, parameters,
// algorithm choice, fusions), cuda_steps.c enqueues a step's phases (forward, loss, backward segments, update) and
// replays them as CUDA graphs, cuda.c holds the interface entries and the ops table.
#ifndef DLP_CUDA_IMPL_H
#define DLP_CUDA_IMPL_H

#include "backend/backend_impl.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_host.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_util.h"
#include "core/clock.h"
#include "core/log.h"

#define NOPS_DIR 4  // DLP_CUCONV_FWD, _BWD_DATA, _BWD_FILTER, _FWD_FUSED
// op->algo[DLP_CUCONV_BWD_FILTER] when cuDNN offers no backward-filter algorithm for the shape (the 3-channel NHWC
// fp16/bf16 stem on some versions): dlp_cuk_conv_wgrad computes the weight gradient instead.
#define CU_ALGO_OWN_WGRAD (-2)

typedef struct cu_tensor {
    void *data;    // (N, h, w, c) in the compute type; FC outputs fp32 (N, c)
    void *grad;    // same shape and type (training plans)
    void *grad_c;  // FC output only: the gradient in the compute type for the GEMMs (== grad for fp32)
    int64_t rows;  // N * h * w
    int c, h, w;
    int f32;
} cu_tensor;

typedef struct cu_graph {
    dlp_cugraph_slot slot;
    cudaGraphExec_t exec;
} cu_graph;

typedef struct cu_op {
    dlp_cuop o;
    // CONV
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd[NOPS_DIR];
    int algo[NOPS_DIR];
    size_t ws[NOPS_DIR];
    int64_t w_coff;                // conv/FC weight in the compute-type arrays
    int fused;                     // inference: cudnnConvolutionBiasActivationForward accepted
    int act;                       // which activation descriptor cuDNN accepted (fused conv, BN-Ex)
    cudnnTensorDescriptor_t biasd;
    void *wfold;                   // inference: BN-folded weights (compute type, KRSC)
    float *bfold;                  // inference: folded bias (fp32)
    void *bfold_c;                 // and in the fused call's bias type
    // BN
    int64_t gamma_off, beta_off, rm_off, rv_off;  // flat offsets (params; bufs)
    int bn_cudnn;                  // cuDNN BN-Ex in use for this op
    cudnnBatchNormOps_t bnops;
    cudnnTensorDescriptor_t statd, bnd;  // BN-Ex: statistics and data (NHWC) descriptors
    size_t bn_ws_fwd, bn_ws_bwd, bn_reserve_bytes;
    void *bn_reserve;
    float *save_mean, *save_invstd;
    // FC
    int64_t w_off, b_off;
    // MAXPOOL
    uint8_t *idx;
} cu_op;

typedef struct cu_bseg {  // a backward segment: ops hi..lo (descending), then these buckets are final
    int hi, lo;
    int nb;
    int *buckets;
} cu_bseg;

typedef struct cu_plan {
    dlp_plan base;
    dlp_plan_cfg cfg;
    dlp_net net;  // private copy of the layer and parameter tables
    int dev, sms;
    dlp_dtype dt;
    size_t esz;
    int N;
    int train;
    dlp_cuda_oplist ol;
    cu_op *ops;
    cu_tensor *t;
    cudaStream_t stream, copy_stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    const dlp_cublas_api *bl;
    cudnnActivationDescriptor_t relu_act[2], ident_act[2];  // [0] CUDNN_NOT_PROPAGATE_NAN, [1] CUDNN_PROPAGATE_NAN
    void *ws;
    size_t ws_bytes;
    void *blas_ws;
    // parameters
    int64_t P, ncopy;
    int64_t *coff;
    float *w32, *g32, *v32, *bufs32;
    void *wc, *gc;
    uint8_t *nodecay;
    dlp_cuda_bucket *all;   // one bucket over everything: the update's segments
    dlp_cuk_seg *all_segs_d;
    dlp_cuda_bucket *buckets;
    int nbuckets;
    dlp_cuk_seg **bucket_segs_d;
    cu_bseg *bsegs;
    int nbsegs;
    // scratch
    float *bn_part, *bn_scale, *bn_shift, *bn_coef;
    void *dz_tmp;
    // loss and update
    int32_t *labels_d, *labels_h;
    float *sample_loss;
    int32_t *flags_d;
    dlp_cuk_loss_args *largs_d, *largs_h;
    dlp_cuk_loss_out *lout_d, *lout_h;
    dlp_cuk_sgd_args *sargs_d, *sargs_h;
    cudaEvent_t upd_evt;
    int upd_pending;
    float *scale_d;
    int32_t *good_d, *found_inf_d;
    float *wgrad_acc;  // fp32 (K, R, S, C) of the largest conv on CU_ALGO_OWN_WGRAD; NULL when none is
    int loss_scaling;  // fp16: dynamic loss scale
    // input pipeline
    void *in_d[2];
    int slot, n_in, copy_pending;
    int64_t in_count;
    cudaEvent_t ev_cstart[2], ev_cdone[2], ev_ready[2], ev_free[2];
    int stat_pending[2];
    double copy_ms_total, stall_ms_total;
    int64_t copies;
    // graphs
    int graphs, warmup;
    cu_graph g_fwd[2][2];  // [pass][input slot]
    cu_graph g_loss[2];    // [input slot] (the slot does not matter to the loss, but keeps pointers fixed)
    cu_graph *g_bwd;       // [nbsegs][2]
    cu_graph g_upd;
    // state
    int have_fwd, have_train_fwd, have_loss, have_bwd;  // have_fwd: a forward since the last set_input
    // get_input_grad: the first convolutions' data gradients are put off until it is called (nothing else needs
    // them). update changes the weights and the loss scale they need, so update first saves those (in_snap) when
    // the gradient has not been computed yet; in_grad_ready: t[0].grad holds the last backward's input gradient,
    // to be divided by in_grad_scale (computing it twice would add twice).
    int in_grad_ready, in_snap_valid;
    float in_grad_scale;
    void *in_snap_w;      // compute-type copies of the deferred convs' weights, at in_snap_off[j] (elements)
    int64_t *in_snap_off; // per op; -1 for ops not deferred
    float *in_snap_scale; // the loss scale at backward (device)
    int graph_captures_failed;  // phases whose CUDA graph capture failed (they run eagerly)
    char graph_fail_why[320];   // the first failure: the phase and the call that broke it
    // host staging (pinned) for outputs and given gradients
    void *stage;
    size_t stage_bytes;
    // bookkeeping
    void **allocs;
    int nallocs, cap_allocs;
    int64_t dev_bytes;
    dlp_cuda_algo_cache cache;
    double plan_ms;
    int n_fused_conv, n_cudnn_bn, n_own_bn;
} cu_plan;

static const float k_one = 1.0f, k_zero = 0.0f;

static inline cu_plan *as_cu(dlp_plan *p) { return (cu_plan *)p; }

static inline int64_t layer_numel(const cu_plan *p, int l) {
    const dlp_layer *L = &p->net.layers[l];
    return (int64_t)L->c * L->h * L->w;
}

typedef dlp_status (*enq_fn)(cu_plan *p, int arg);

dlp_status cu_available(char *why, size_t why_len);
dlp_status cu_plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out);
void cu_plan_free(dlp_plan *pl);
void cu_input_format(const dlp_plan *pl, dlp_layout *layout, dlp_dtype *dtype);
cudaError_t cu_xfer(cu_plan *p, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
dlp_status cu_run_phase(cu_plan *p, cu_graph *g, enq_fn fn, int arg, const char *what);
dlp_status cu_run_backward(cu_plan *p, int eager);
dlp_status cu_enq_forward(cu_plan *p, int pass);
dlp_status cu_enq_loss(cu_plan *p, int arg);
dlp_status cu_enq_update(cu_plan *p, int arg);
dlp_status cu_conv_bwd_data(cu_plan *p, const cu_op *op, const void *w, int acc);  // w: the weights (compute type)

#endif
