// backend/cuda_backend: the `cuda` backend — cuDNN 9 through its legacy C API (convolutions with algorithms found
// once per layer shape and cached, BN-Ex for fused BN + add + ReLU in NHWC fp16, conv + bias + add + ReLU for
// inference with BN folded into the weights), cuBLAS for the FC layer, and our kernels (cuda_kernels.cu) for the
// rest. Activations NHWC in fp16/bf16/fp32; master weights, BN statistics, gradients and the loss in fp32.
// Every phase of a step (forward per pass and input buffer, loss, backward segments, update) is captured into a
// CUDA graph after warm-up and replayed. Input batches are copied on their own stream into one of two device
// buffers, overlapping the previous step's compute; copy time and compute stall are measured with events.
// Why the legacy API: it is C (the graph API's frontend is C++), still complete in cuDNN 9, and it offers every
// op and fusion ResNet needs; the backend-descriptor C API is verbose and could not be debugged on a machine
// without a GPU. See docs/gpu.md.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_impl.h"
#include "backend/cuda.h"
#include "backend/cuda_host.h"
#include "backend/cuda_kernels.h"
#include "backend/cuda_util.h"
#include "core/clock.h"
#include "core/log.h"

#define NOPS_DIR 4  // DLP_CUCONV_FWD, _BWD_DATA, _BWD_FILTER, _FWD_FUSED

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
    int have_train_fwd, have_loss, have_bwd;
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

// ---- small helpers ------------------------------------------------------------------------------------------------
static dlp_status dalloc(cu_plan *p, size_t bytes, void **out) {
    *out = NULL;
    if (bytes == 0) return DLP_OK;
    if (p->nallocs == p->cap_allocs) {
        int nc = p->cap_allocs ? 2 * p->cap_allocs : 256;
        void **a = realloc(p->allocs, (size_t)nc * sizeof *a);
        if (!a) return DLP_ERR(DLP_ERR_NOMEM, "out of host memory");
        p->allocs = a;
        p->cap_allocs = nc;
    }
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        (void)cudaGetLastError();
        return DLP_ERR(e == cudaErrorMemoryAllocation ? DLP_ERR_NOMEM : DLP_ERR_INTERNAL,
                       "cudaMalloc of %.1f MiB failed: %s (plan holds %.1f MiB; %.1f of %.1f MiB free); hint: a "
                       "smaller --batch",
                       bytes / 1048576.0, cudaGetErrorString(e), p->dev_bytes / 1048576.0, fr / 1048576.0,
                       tot / 1048576.0);
    }
    p->allocs[p->nallocs++] = *out;
    p->dev_bytes += (int64_t)bytes;
    DLP_CU(cudaMemsetAsync(*out, 0, bytes, p->stream));
    return DLP_OK;
}

// Host <-> device copies outside the step go through the plan's stream and wait for it: the legacy default stream
// does not order with our non-blocking streams, and a pageable copy may return before its DMA is done.
static cudaError_t xfer(cu_plan *p, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, p->stream);
    return e == cudaSuccess ? cudaStreamSynchronize(p->stream) : e;
}

static int env_int(const char *name, int def) {
    const char *s = getenv(name);
    return s && *s ? atoi(s) : def;
}
static const char *env_str(const char *name, const char *def) {
    const char *s = getenv(name);
    return s && *s ? s : def;
}

static cu_plan *as_cu(dlp_plan *p) { return (cu_plan *)p; }

static int64_t layer_numel(const cu_plan *p, int l) {
    const dlp_layer *L = &p->net.layers[l];
    return (int64_t)L->c * L->h * L->w;
}

static const dlp_param *param_of(const cu_plan *p, int layer, int which) {  // which: 0 first, 1 second
    const dlp_layer *L = &p->net.layers[layer];
    if (which >= L->nparams) return NULL;
    return &p->net.params[L->param0 + which];
}

static dlp_status set_4d(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int n, int c, int h, int w) {
    if (!*d) DLP_CUDNN(cudnnCreateTensorDescriptor(d));
    DLP_CUDNN(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NHWC, t, n, c, h, w));
    return DLP_OK;
}

// ---- the device query behind available() --------------------------------------------------------------------
static dlp_status cuda_available(char *why, size_t why_len) {
    int n = 0;
    dlp_status st = dlp_cuda_no_device(&n);
    if (st != DLP_OK) {
        if (why && why_len) snprintf(why, why_len, "%s", dlp_err_msg());
        return st;
    }
    if (why && why_len) {
        struct cudaDeviceProp pr;
        if (cudaGetDeviceProperties(&pr, 0) == cudaSuccess)
            snprintf(why, why_len, "%d CUDA device%s (%s, compute capability %d.%d)", n, n > 1 ? "s" : "", pr.name,
                     pr.major, pr.minor);
        else
            snprintf(why, why_len, "%d CUDA device%s", n, n > 1 ? "s" : "");
        (void)cudaGetLastError();
    }
    return DLP_OK;
}

// ---- algorithm choice ----------------------------------------------------------------------------------------
static size_t ws_limit_bytes(void) { return (size_t)env_int("DLPERF_CUDA_WS_MB", 1024) << 20; }

static void conv_key(const cu_plan *p, const cu_op *op, int dir, dlp_cuda_conv_key *k) {
    const dlp_layer *L = &p->net.layers[op->o.layer], *X = &p->net.layers[L->in0];
    memset(k, 0, sizeof *k);
    k->dir = dir;
    k->n = p->N;
    k->c = X->c;
    k->h = X->h;
    k->w = X->w;
    k->k = L->c;
    k->r = k->s = L->k;
    k->stride = L->stride;
    k->pad = L->pad;
    k->dtype = p->dt;
    k->math = p->dt != DLP_DTYPE_F32 || p->cfg.tf32;
}

static cudnnMathType_t plan_math(const cu_plan *p) {
    if (p->dt != DLP_DTYPE_F32) return CUDNN_TENSOR_OP_MATH;
    return p->cfg.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// Picks the algorithm for one direction of one convolution: cached by shape, else cudnnFind*Ex (timed on the
// plan's own buffers) or, with DLPERF_CUDA_FIND=0, cuDNN's heuristic. Stays within the workspace limit.
static dlp_status choose_algo(cu_plan *p, cu_op *op, int dir, void *find_ws, size_t find_ws_bytes) {
    dlp_cuda_conv_key key;
    conv_key(p, op, dir, &key);
    const dlp_cuda_algo_row *row;
    if (dlp_cuda_algo_cache_find(&p->cache, &key, &row)) {
        op->algo[dir] = row->algo;
        op->ws[dir] = (size_t)row->workspace_bytes;
        if (p->dt != DLP_DTYPE_F32 || p->cfg.tf32)
            DLP_CUDNN(cudnnSetConvolutionMathType(op->cd[dir], (cudnnMathType_t)row->math_type));
        return DLP_OK;
    }
    const cu_tensor *tx = &p->t[op->o.in], *ty = &p->t[op->o.out];  // out: the conv's own output, or (inference)
                                                                       // the fused op's, of the same shape
    void *x = tx->data, *y = ty->data, *dx = tx->grad ? tx->grad : tx->data, *dy = ty->grad ? ty->grad : ty->data;
    void *w = (char *)p->wc + op->w_coff * p->esz, *dw = p->gc ? (char *)p->gc + op->w_coff * p->esz : w;
    int find = env_int("DLPERF_CUDA_FIND", 1);
    size_t limit = find_ws_bytes;
    int algo = -1, n = 0;
    size_t mem = 0;
    float ms = 0;
    cudnnMathType_t math = plan_math(p);
    enum { MAXA = 16 };
    cudnnConvolutionDescriptor_t cd = op->cd[dir];
    // A Find that cuDNN refuses falls back to its heuristic (with a debug line), which must then succeed.
    if (dir == DLP_CUCONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAXA];
        cudnnStatus_t fs = find ? cudnnFindConvolutionForwardAlgorithmEx(p->dnn, op->xd, x, op->wd, w, cd, op->yd, y,
                                                                         MAXA, &n, perf, find_ws, find_ws_bytes)
                                : CUDNN_STATUS_NOT_SUPPORTED;
        if (fs != CUDNN_STATUS_SUCCESS) {
            if (find) DLP_DEBUG("cuda: cudnnFindConvolutionForwardAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
            find = 0;
            DLP_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(p->dnn, op->xd, op->wd, cd, op->yd, MAXA, &n, perf));
        }
        for (int i = 0; i < n && algo < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit)
                algo = perf[i].algo, mem = perf[i].memory, ms = find ? perf[i].time : 0, math = perf[i].mathType;
    } else if (dir == DLP_CUCONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAXA];
        cudnnStatus_t fs = find ? cudnnFindConvolutionBackwardDataAlgorithmEx(p->dnn, op->wd, w, op->yd, dy, cd, op->xd,
                                                                              dx, MAXA, &n, perf, find_ws, find_ws_bytes)
                                : CUDNN_STATUS_NOT_SUPPORTED;
        if (fs != CUDNN_STATUS_SUCCESS) {
            if (find) DLP_DEBUG("cuda: cudnnFindConvolutionBackwardDataAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
            find = 0;
            DLP_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(p->dnn, op->wd, op->yd, cd, op->xd, MAXA, &n, perf));
        }
        for (int i = 0; i < n && algo < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit)
                algo = perf[i].algo, mem = perf[i].memory, ms = find ? perf[i].time : 0, math = perf[i].mathType;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAXA];
        cudnnStatus_t fs = find ? cudnnFindConvolutionBackwardFilterAlgorithmEx(p->dnn, op->xd, x, op->yd, dy, cd, op->wd,
                                                                                dw, MAXA, &n, perf, find_ws, find_ws_bytes)
                                : CUDNN_STATUS_NOT_SUPPORTED;
        if (fs != CUDNN_STATUS_SUCCESS) {
            if (find) DLP_DEBUG("cuda: cudnnFindConvolutionBackwardFilterAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
            find = 0;
            DLP_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(p->dnn, op->xd, op->yd, cd, op->wd, MAXA, &n, perf));
        }
        for (int i = 0; i < n && algo < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit)
                algo = perf[i].algo, mem = perf[i].memory, ms = find ? perf[i].time : 0, math = perf[i].mathType;
    }
    if (algo < 0) {
        char ks[160];
        dlp_cuda_conv_key_str(&key, ks, sizeof ks);
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuDNN offers no algorithm for %s (layer %s) within %.0f MiB of workspace",
                       ks, p->net.layers[op->o.layer].name, limit / 1048576.0);
    }
    // Keep the math mode the algorithm was measured with (fp32 without TF32 stays FMA-only).
    if (p->dt != DLP_DTYPE_F32 || p->cfg.tf32) DLP_CUDNN(cudnnSetConvolutionMathType(cd, math));
    op->algo[dir] = algo;
    op->ws[dir] = mem;
    if (DLP_LOG_DEBUG <= dlp_log_get_level()) {
        char ks[160];
        dlp_cuda_conv_key_str(&key, ks, sizeof ks);
        DLP_DEBUG("cuda: %s: algo %d, %.1f MiB workspace, %.3f ms", ks, algo, mem / 1048576.0, ms);
    }
    return dlp_cuda_algo_cache_put(&p->cache, &key, algo, (int)math, (int64_t)mem, ms);
}

// ---- plan construction ----------------------------------------------------------------------------------------
static void plan_free(dlp_plan *pl);

static dlp_status setup_tensors(cu_plan *p) {
    int L = p->net.nlayers;
    p->t = calloc((size_t)L, sizeof *p->t);
    DLP_TRY_ALLOC(p->t);
    for (int l = 0; l < L; l++) {
        if (!p->ol.kept[l]) continue;
        const dlp_layer *ly = &p->net.layers[l];
        cu_tensor *t = &p->t[l];
        t->c = ly->c;
        t->h = ly->h;
        t->w = ly->w;
        t->rows = (int64_t)p->N * ly->h * ly->w;
        t->f32 = ly->kind == DLP_LAYER_FC;
        size_t bytes = (size_t)(p->N * layer_numel(p, l)) * (t->f32 ? 4 : p->esz);
        if (l == 0) {
            DLP_CHECK(dalloc(p, bytes, &p->in_d[0]));
            DLP_CHECK(dalloc(p, bytes, &p->in_d[1]));
            t->data = p->in_d[0];
        } else {
            DLP_CHECK(dalloc(p, bytes, &t->data));
        }
        if (p->train) {
            DLP_CHECK(dalloc(p, bytes, &t->grad));
            if (t->f32 && p->dt != DLP_DTYPE_F32)
                DLP_CHECK(dalloc(p, (size_t)(p->N * layer_numel(p, l)) * p->esz, &t->grad_c));
            else
                t->grad_c = t->grad;
        }
    }
    return DLP_OK;
}

static dlp_status setup_params(cu_plan *p) {
    const dlp_net *net = &p->net;
    p->P = net->param_count;
    p->coff = malloc((size_t)(net->nparams ? net->nparams : 1) * sizeof *p->coff);
    DLP_TRY_ALLOC(p->coff);
    p->ncopy = dlp_cuda_copy_offsets(net, p->coff);
    DLP_CHECK(dalloc(p, (size_t)p->P * 4, (void **)&p->w32));
    DLP_CHECK(dalloc(p, (size_t)net->buf_count * 4, (void **)&p->bufs32));
    DLP_CHECK(dalloc(p, (size_t)p->ncopy * p->esz, &p->wc));
    if (p->train) {
        DLP_CHECK(dalloc(p, (size_t)p->P * 4, (void **)&p->g32));
        DLP_CHECK(dalloc(p, (size_t)p->P * 4, (void **)&p->v32));
        DLP_CHECK(dalloc(p, (size_t)p->ncopy * p->esz, &p->gc));
        DLP_CHECK(dalloc(p, (size_t)p->P, (void **)&p->nodecay));
        uint8_t *nd = calloc((size_t)(p->P ? p->P : 1), 1);
        DLP_TRY_ALLOC(nd);
        for (int i = 0; i < net->nparams; i++)
            if (net->params[i].no_decay) memset(nd + net->params[i].offset, 1, (size_t)net->params[i].numel);
        cudaError_t e = xfer(p, p->nodecay, nd, (size_t)p->P, cudaMemcpyHostToDevice);
        free(nd);
        DLP_CU(e);
    }
    int nall = 0;
    DLP_CHECK(dlp_cuda_buckets_plan(net, NULL, p->coff, 0, &nall, &p->all));
    if (nall) {
        DLP_CHECK(dalloc(p, (size_t)p->all[0].nsegs * sizeof(dlp_cuk_seg), (void **)&p->all_segs_d));
        dlp_cuk_seg *hs = calloc((size_t)p->all[0].nsegs, sizeof *hs);
        DLP_TRY_ALLOC(hs);
        for (int i = 0; i < p->all[0].nsegs; i++) {
            const dlp_cuda_seg *s = &p->all[0].segs[i];
            hs[i] = (dlp_cuk_seg){s->offset, s->count, s->coffset, s->half, s->copy};
        }
        cudaError_t e = xfer(p, p->all_segs_d, hs, (size_t)p->all[0].nsegs * sizeof *hs, cudaMemcpyHostToDevice);
        free(hs);
        DLP_CU(e);
    }
    if (!p->train || p->P == 0) return DLP_OK;
    DLP_CHECK(dlp_cuda_buckets_plan(net, &p->ol, p->coff, p->cfg.bucket_elems, &p->nbuckets, &p->buckets));
    p->bucket_segs_d = calloc((size_t)p->nbuckets, sizeof *p->bucket_segs_d);
    DLP_TRY_ALLOC(p->bucket_segs_d);
    for (int b = 0; b < p->nbuckets; b++) {
        const dlp_cuda_bucket *bk = &p->buckets[b];
        DLP_CHECK(dalloc(p, (size_t)(bk->nsegs ? bk->nsegs : 1) * sizeof(dlp_cuk_seg), (void **)&p->bucket_segs_d[b]));
        dlp_cuk_seg *hs = calloc((size_t)(bk->nsegs ? bk->nsegs : 1), sizeof *hs);
        DLP_TRY_ALLOC(hs);
        for (int i = 0; i < bk->nsegs; i++) {
            const dlp_cuda_seg *s = &bk->segs[i];
            hs[i] = (dlp_cuk_seg){s->offset, s->count, s->coffset, s->half, s->copy};
        }
        cudaError_t e = xfer(p, p->bucket_segs_d[b], hs, (size_t)bk->nsegs * sizeof *hs, cudaMemcpyHostToDevice);
        free(hs);
        DLP_CU(e);
    }
    // Backward segments: with a bucket callback, cut the backward after each op that finalizes buckets, so the
    // callback runs (on the host) between graph launches; without one, a single segment.
    p->bsegs = calloc((size_t)p->nbuckets + 1, sizeof *p->bsegs);
    DLP_TRY_ALLOC(p->bsegs);
    int *order = malloc((size_t)p->nbuckets * sizeof *order);
    DLP_TRY_ALLOC(order);
    for (int b = 0; b < p->nbuckets; b++) order[b] = b;
    for (int i = 1; i < p->nbuckets; i++)  // stable insertion sort by after_op, descending
        for (int j = i; j > 0 && p->buckets[order[j]].after_op > p->buckets[order[j - 1]].after_op; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    int nops = p->ol.nops;
    if (!p->cfg.on_bucket) {
        cu_bseg *s = &p->bsegs[p->nbsegs++];
        s->hi = nops - 1;
        s->lo = 0;
        s->buckets = malloc((size_t)p->nbuckets * sizeof(int));
        if (!s->buckets) {
            free(order);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        }
        for (int b = 0; b < p->nbuckets; b++) s->buckets[s->nb++] = order[b];
    } else {
        int hi = nops - 1;
        for (int i = 0; i < p->nbuckets;) {
            int a = p->buckets[order[i]].after_op;
            cu_bseg *s = &p->bsegs[p->nbsegs++];
            s->hi = hi;
            s->lo = a;
            s->buckets = malloc((size_t)p->nbuckets * sizeof(int));
            if (!s->buckets) {
                free(order);
                return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            }
            while (i < p->nbuckets && p->buckets[order[i]].after_op == a) s->buckets[s->nb++] = order[i++];
            hi = a - 1;
        }
        if (hi >= 0) {
            cu_bseg *s = &p->bsegs[p->nbsegs++];
            s->hi = hi;
            s->lo = 0;
        }
    }
    free(order);
    p->g_bwd = calloc((size_t)p->nbsegs * 2, sizeof *p->g_bwd);
    DLP_TRY_ALLOC(p->g_bwd);
    return DLP_OK;
}

static dlp_status setup_conv(cu_plan *p, cu_op *op) {
    const dlp_layer *L = &p->net.layers[op->o.layer], *X = &p->net.layers[L->in0];
    cudnnDataType_t t = dlp_cudnn_dtype(p->dt);
    DLP_CHECK(set_4d(&op->xd, t, p->N, X->c, X->h, X->w));
    DLP_CHECK(set_4d(&op->yd, t, p->N, L->c, L->h, L->w));
    DLP_CUDNN(cudnnCreateFilterDescriptor(&op->wd));
    DLP_CUDNN(cudnnSetFilter4dDescriptor(op->wd, t, CUDNN_TENSOR_NHWC, L->c, X->c, L->k, L->k));
    for (int d = 0; d < NOPS_DIR; d++) {
        DLP_CUDNN(cudnnCreateConvolutionDescriptor(&op->cd[d]));
        DLP_CUDNN(cudnnSetConvolution2dDescriptor(op->cd[d], L->pad, L->pad, L->stride, L->stride, 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        DLP_CUDNN(cudnnSetConvolutionMathType(op->cd[d], plan_math(p)));
    }
    int n, c, h, w;  // our shape arithmetic must agree with cuDNN's
    DLP_CUDNN(cudnnGetConvolution2dForwardOutputDim(op->cd[0], op->xd, op->wd, &n, &c, &h, &w));
    if (n != p->N || c != L->c || h != L->h || w != L->w)
        return DLP_ERR(DLP_ERR_INTERNAL, "conv %s: cuDNN says the output is %dx%dx%dx%d, the net says %dx%dx%dx%d",
                       L->name, n, c, h, w, p->N, L->c, L->h, L->w);
    const dlp_param *wp = param_of(p, op->o.layer, 0);
    op->w_coff = p->coff[wp - p->net.params];
    op->w_off = wp->offset;
    return DLP_OK;
}

static dlp_status setup_bn_offsets(cu_plan *p, cu_op *op, int layer) {
    const dlp_layer *L = &p->net.layers[layer];
    if (L->nparams < 2 || L->nbufs < 2)
        return DLP_ERR(DLP_ERR_INVALID, "BN layer %s needs weight, bias, running_mean, running_var", L->name);
    op->gamma_off = p->net.params[L->param0].offset;
    op->beta_off = p->net.params[L->param0 + 1].offset;
    op->rm_off = p->net.bufs[L->buf0].offset;
    op->rv_off = p->net.bufs[L->buf0 + 1].offset;
    return DLP_OK;
}

// Tries cuDNN's BN-Ex for a training BN op (NHWC persistent kernels, fused add/ReLU) with one forward and one
// backward on the plan's buffers; any refusal leaves the op on our kernels.
static int try_bn_cudnn(cu_plan *p, cu_op *op) {
    const char *mode = env_str("DLPERF_CUDA_BN", "auto");
    if (strcmp(mode, "own") == 0) return 0;
    if (strcmp(mode, "cudnn") != 0 && p->dt != DLP_DTYPE_F16) return 0;  // auto: fp16 (its fast path)
    const cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    if (y->c % 4 != 0 || op->o.acc_in || op->bnd) return 0;
    if (op->o.res >= 0 && !op->o.relu) return 0;  // BN + add without ReLU: no such cuDNN op
    op->bnops = op->o.res >= 0 ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                : op->o.relu   ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                               : CUDNN_BATCHNORM_OPS_BN;
    const cudnnBatchNormMode_t m = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
    const float eps = p->net.layers[op->o.layer].bn_eps;
    cudnnTensorDescriptor_t xd = NULL;
    void *ws = NULL;
    int ok = 0;
    if (set_4d(&xd, dlp_cudnn_dtype(p->dt), p->N, y->c, y->h, y->w) != DLP_OK) goto out;
    if (cudnnCreateTensorDescriptor(&op->statd) != CUDNN_STATUS_SUCCESS) goto out;
    if (cudnnDeriveBNTensorDescriptor(op->statd, xd, m) != CUDNN_STATUS_SUCCESS) goto out;
    cudnnTensorDescriptor_t zd = op->o.res >= 0 ? xd : NULL;
    const void *z = op->o.res >= 0 ? p->t[op->o.res].data : NULL;
    void *dz = op->o.res >= 0 ? p->dz_tmp : NULL;
    for (int ai = 0; ai < (op->o.relu ? 2 : 1) && !ok; ai++) {  // NaN-propagation modes, in turn
        cudnnActivationDescriptor_t act = op->o.relu ? p->relu_act[ai] : NULL;
        size_t wf = 0, wb = 0, rs = 0;
        if (cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(p->dnn, m, op->bnops, xd, zd, xd, op->statd, act,
                                                                     &wf) != CUDNN_STATUS_SUCCESS ||
            cudnnGetBatchNormalizationBackwardExWorkspaceSize(p->dnn, m, op->bnops, xd, xd, xd, zd, xd, op->statd, act,
                                                              &wb) != CUDNN_STATUS_SUCCESS ||
            cudnnGetBatchNormalizationTrainingExReserveSpaceSize(p->dnn, m, op->bnops, act, xd, &rs) !=
                CUDNN_STATUS_SUCCESS)
            continue;
        if (rs > op->bn_reserve_bytes) {  // plan memory (kept); grows only if a later mode needs more
            if (dalloc(p, rs, &op->bn_reserve) != DLP_OK) {
                dlp_err_clear();
                goto out;
            }
            op->bn_reserve_bytes = rs;
        }
        size_t need = wf > wb ? wf : wb;
        if (ws) cudaFree(ws);
        ws = NULL;
        if (need > 0 && cudaMalloc(&ws, need) != cudaSuccess) {
            (void)cudaGetLastError();
            goto out;
        }
        // Trial on scratch statistics: running stats in bn_scale/bn_shift, parameter gradients in bn_coef.
        cudnnStatus_t s1 = cudnnBatchNormalizationForwardTrainingEx(
            p->dnn, m, op->bnops, &k_one, &k_zero, xd, x->data, zd, z, xd, y->data, op->statd, p->w32 + op->gamma_off,
            p->w32 + op->beta_off, 0.1, p->bn_scale, p->bn_shift, eps, op->save_mean, op->save_invstd, act, ws, wf,
            op->bn_reserve, op->bn_reserve_bytes);
        cudnnStatus_t s2 = s1 != CUDNN_STATUS_SUCCESS
                               ? s1
                               : cudnnBatchNormalizationBackwardEx(
                                     p->dnn, m, op->bnops, &k_one, &k_zero, &k_one, &k_zero, xd, x->data, xd, y->data,
                                     xd, y->grad, zd, dz, xd, x->grad, op->statd, p->w32 + op->gamma_off,
                                     p->w32 + op->beta_off, p->bn_coef, p->bn_coef + y->c, eps, op->save_mean,
                                     op->save_invstd, act, ws, wb, op->bn_reserve, op->bn_reserve_bytes);
        cudaError_t e = cudaStreamSynchronize(p->stream);
        (void)cudaGetLastError();
        if (s2 == CUDNN_STATUS_SUCCESS && e == cudaSuccess) {
            ok = 1;
            op->act = ai;
            op->bn_ws_fwd = wf;
            op->bn_ws_bwd = wb;
        } else {
            DLP_DEBUG("cuda: BN %s: cuDNN BN-Ex refused (%s, NaN mode %d)", p->net.layers[op->o.layer].name,
                      cudnnGetErrorString(s2), ai);
        }
    }
    if (ok) {
        op->bnd = xd;
        xd = NULL;
    }
out:
    if (ws) cudaFree(ws);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    return ok;
}

static dlp_status setup_bn(cu_plan *p, cu_op *op) {
    DLP_CHECK(setup_bn_offsets(p, op, op->o.layer));
    int C = p->net.layers[op->o.layer].c;
    DLP_CHECK(dalloc(p, (size_t)C * 4, (void **)&op->save_mean));
    DLP_CHECK(dalloc(p, (size_t)C * 4, (void **)&op->save_invstd));
    if (p->train && try_bn_cudnn(p, op)) {
        op->bn_cudnn = 1;
        p->n_cudnn_bn++;
    } else {
        p->n_own_bn++;
    }
    return DLP_OK;
}

// Inference: conv + folded BN (+ residual) (+ ReLU) in one cuDNN call if it accepts the configuration.
static dlp_status setup_conv_infer(cu_plan *p, cu_op *op) {
    const dlp_layer *L = &p->net.layers[op->o.layer];
    int K = L->c;
    int64_t wn = (int64_t)K * p->net.layers[L->in0].c * L->k * L->k;
    DLP_CHECK(dalloc(p, (size_t)wn * p->esz, &op->wfold));
    DLP_CHECK(dalloc(p, (size_t)K * 4, (void **)&op->bfold));
    DLP_CHECK(dalloc(p, (size_t)K * p->esz, &op->bfold_c));
    if (op->o.bn >= 0) DLP_CHECK(setup_bn_offsets(p, op, op->o.bn));
    op->algo[DLP_CUCONV_FWD_FUSED] = op->algo[DLP_CUCONV_FWD];
    op->ws[DLP_CUCONV_FWD_FUSED] = op->ws[DLP_CUCONV_FWD];
    cudnnMathType_t math;
    DLP_CUDNN(cudnnGetConvolutionMathType(op->cd[DLP_CUCONV_FWD], &math));
    DLP_CUDNN(cudnnSetConvolutionMathType(op->cd[DLP_CUCONV_FWD_FUSED], math));
    if (!env_int("DLPERF_CUDA_FUSE_CONV", 1)) return DLP_OK;
    void *z = op->o.res >= 0 ? p->t[op->o.res].data : p->t[op->o.out].data;
    float alpha2 = op->o.res >= 0 ? 1.0f : 0.0f;
    // Bias in the data type first (cuDNN's table for fp16/bf16 data), then fp32; the identity activation works
    // only with IMPLICIT_PRECOMP_GEMM.
    const cudnnDataType_t btypes[2] = {dlp_cudnn_dtype(p->dt), CUDNN_DATA_FLOAT};
    int algos[2] = {op->algo[DLP_CUCONV_FWD], CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM};
    for (int tr = 0; tr < 8 && !op->fused; tr++) {  // bias type x algorithm x NaN mode
        const int bt = tr >> 2, a = (tr >> 1) & 1, ai = tr & 1;
        cudnnActivationDescriptor_t act = op->o.relu ? p->relu_act[ai] : p->ident_act[ai];
        if (set_4d(&op->biasd, btypes[bt], 1, K, 1, 1) != DLP_OK) {
            dlp_err_clear();
            continue;
        }
        {
            if (!op->o.relu && algos[a] != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) continue;
            size_t wsz = 0;
            if (cudnnGetConvolutionForwardWorkspaceSize(p->dnn, op->xd, op->wd, op->cd[DLP_CUCONV_FWD_FUSED], op->yd,
                                                        algos[a], &wsz) != CUDNN_STATUS_SUCCESS)
                continue;
            void *ws = NULL;
            if (wsz > 0 && cudaMalloc(&ws, wsz) != cudaSuccess) {
                (void)cudaGetLastError();
                continue;
            }
            cudnnStatus_t s = cudnnConvolutionBiasActivationForward(
                p->dnn, &k_one, op->xd, p->t[op->o.in].data, op->wd, op->wfold, op->cd[DLP_CUCONV_FWD_FUSED],
                algos[a], ws, wsz, &alpha2, op->yd, z, op->biasd, bt == 0 ? op->bfold_c : (void *)op->bfold, act,
                op->yd, p->t[op->o.out].data);
            cudaError_t e = cudaStreamSynchronize(p->stream);
            if (ws) cudaFree(ws);
            (void)cudaGetLastError();
            if (s == CUDNN_STATUS_SUCCESS && e == cudaSuccess) {
                op->fused = bt == 0 ? 1 : 2;  // 1: bias in the data type, 2: fp32 bias
                op->act = ai;
                op->algo[DLP_CUCONV_FWD_FUSED] = algos[a];
                op->ws[DLP_CUCONV_FWD_FUSED] = wsz;
            } else {
                DLP_DEBUG("cuda: conv %s: fused conv+bias+act refused with algo %d, %s bias: %s", L->name, algos[a],
                          bt == 0 ? "data-type" : "fp32", cudnnGetErrorString(s));
            }
        }
    }
    if (op->fused) p->n_fused_conv++;
    return DLP_OK;
}

static dlp_status plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
    *out = NULL;
    if (cfg->batch < 1) return DLP_ERR(DLP_ERR_INVALID, "cuda: batch must be >= 1 (got %d)", cfg->batch);
    if (cfg->precision != DLP_DTYPE_F32 && cfg->precision != DLP_DTYPE_BF16 && cfg->precision != DLP_DTYPE_F16)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: precision %s is not supported (fp32, bf16, fp16)",
                       dlp_dtype_name(cfg->precision));
    int ndev = 0;
    DLP_CHECK(dlp_cuda_no_device(&ndev));
    int dev = cfg->arg && *cfg->arg ? atoi(cfg->arg) : 0;
    if (dev < 0 || dev >= ndev)
        return DLP_ERR(DLP_ERR_NOTFOUND, "cuda: device %d does not exist (this machine has %d)", dev, ndev);
    int64_t t0 = dlp_now_ns();
    cu_plan *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->base.ops = &dlp_backend_cuda;
    p->cfg = *cfg;
    p->dev = dev;
    p->dt = cfg->precision;
    p->esz = dlp_dtype_size(p->dt);
    p->N = cfg->batch;
    p->train = cfg->train;
    p->graphs = env_int("DLPERF_CUDA_GRAPHS", 1);
    p->warmup = env_int("DLPERF_CUDA_GRAPH_WARMUP", 2);
    p->loss_scaling = p->train && p->dt == DLP_DTYPE_F16;
    dlp_status st = DLP_OK;
    size_t find_ws_bytes = 0;
    void *find_ws = NULL;
    DLP_CHECK_GOTO(st, dlp_net_copy(&p->net, net), fail);
    if (p->train)  // as ref (and PyTorch): batch statistics of a single value are refused
        for (int l = 0; l < p->net.nlayers; l++) {
            const dlp_layer *L = &p->net.layers[l];
            if (L->kind == DLP_LAYER_BN && (int64_t)p->N * L->h * L->w < 2) {
                st = DLP_ERR(DLP_ERR_INVALID, "cuda: BN layer %s would normalize a single value per channel in "
                             "training (batch %d, %dx%d); use a larger batch or input", L->name, p->N, L->h, L->w);
                goto fail;
            }
        }
    DLP_CHECK_GOTO(st, dlp_cuda_ops_plan(&p->net, p->train, env_int("DLPERF_CUDA_FUSE", 1), &p->ol), fail);
    DLP_CU_GOTO(st, cudaSetDevice(dev), fail);
    DLP_CU_GOTO(st, cudaDeviceGetAttribute(&p->sms, cudaDevAttrMultiProcessorCount, dev), fail);
    DLP_CU_GOTO(st, cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), fail);
    DLP_CU_GOTO(st, cudaStreamCreateWithFlags(&p->copy_stream, cudaStreamNonBlocking), fail);
    DLP_CUDNN_GOTO(st, cudnnCreate(&p->dnn), fail);
    DLP_CUDNN_GOTO(st, cudnnSetStream(p->dnn, p->stream), fail);
    for (int i = 0; i < 2; i++) {
        cudnnNanPropagation_t nan = i ? CUDNN_PROPAGATE_NAN : CUDNN_NOT_PROPAGATE_NAN;
        DLP_CUDNN_GOTO(st, cudnnCreateActivationDescriptor(&p->relu_act[i]), fail);
        DLP_CUDNN_GOTO(st, cudnnSetActivationDescriptor(p->relu_act[i], CUDNN_ACTIVATION_RELU, nan, 0.0), fail);
        DLP_CUDNN_GOTO(st, cudnnCreateActivationDescriptor(&p->ident_act[i]), fail);
        DLP_CUDNN_GOTO(st, cudnnSetActivationDescriptor(p->ident_act[i], CUDNN_ACTIVATION_IDENTITY, nan, 0.0), fail);
    }
    for (int i = 0; i < 2; i++) {
        DLP_CU_GOTO(st, cudaEventCreate(&p->ev_cstart[i]), fail);
        DLP_CU_GOTO(st, cudaEventCreate(&p->ev_cdone[i]), fail);
        DLP_CU_GOTO(st, cudaEventCreate(&p->ev_ready[i]), fail);
        DLP_CU_GOTO(st, cudaEventCreateWithFlags(&p->ev_free[i], cudaEventDisableTiming), fail);
    }
    DLP_CU_GOTO(st, cudaEventCreateWithFlags(&p->upd_evt, cudaEventDisableTiming), fail);
    DLP_CHECK_GOTO(st, setup_tensors(p), fail);
    DLP_CHECK_GOTO(st, setup_params(p), fail);
    // Scratch: BN partial sums and per-channel vectors, the residual-gradient buffer, loss and update state.
    int maxc = 1;
    int64_t maxpart = 1, maxt = 1;
    for (int l = 0; l < p->net.nlayers; l++) {
        if (!p->ol.kept[l]) continue;
        int c = p->t[l].c;
        if (c > maxc) maxc = c;
        int64_t part = 2LL * dlp_cuk_bn_blocks(p->t[l].rows, c, p->sms) * c;
        if (part > maxpart) maxpart = part;
        int64_t tb = p->N * layer_numel(p, l) * (int64_t)(p->t[l].f32 ? 4 : p->esz);
        if (tb > maxt) maxt = tb;
    }
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)maxpart * 4, (void **)&p->bn_part), fail);
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)maxc * 4, (void **)&p->bn_scale), fail);
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)maxc * 4, (void **)&p->bn_shift), fail);
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)maxc * 3 * 4, (void **)&p->bn_coef), fail);
    // dz_tmp: residual gradients cuDNN cannot add in place (training); the loss's dlogits (inference plans).
    {
        int lo = dlp_net_output(&p->net);
        size_t need = p->train ? (size_t)maxt : (size_t)(p->N * layer_numel(p, lo)) * 4;
        DLP_CHECK_GOTO(st, dalloc(p, need, &p->dz_tmp), fail);
    }
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(float), (void **)&p->scale_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(int32_t), (void **)&p->good_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(int32_t), (void **)&p->found_inf_d), fail);
    {
        float s0 = p->loss_scaling ? (float)env_int("DLPERF_CUDA_LOSS_SCALE", 1024) : 1.0f;
        DLP_CU_GOTO(st, xfer(p, p->scale_d, &s0, sizeof s0, cudaMemcpyHostToDevice), fail);
    }
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)p->N * 4, (void **)&p->labels_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)p->N * 4, (void **)&p->sample_loss), fail);
    DLP_CHECK_GOTO(st, dalloc(p, (size_t)p->N * 4, (void **)&p->flags_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(dlp_cuk_loss_args), (void **)&p->largs_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(dlp_cuk_loss_out), (void **)&p->lout_d), fail);
    DLP_CHECK_GOTO(st, dalloc(p, sizeof(dlp_cuk_sgd_args), (void **)&p->sargs_d), fail);
    DLP_CU_GOTO(st, cudaHostAlloc((void **)&p->labels_h, (size_t)p->N * 4, 0), fail);
    DLP_CU_GOTO(st, cudaHostAlloc((void **)&p->largs_h, sizeof *p->largs_h, 0), fail);
    DLP_CU_GOTO(st, cudaHostAlloc((void **)&p->lout_h, sizeof *p->lout_h, 0), fail);
    DLP_CU_GOTO(st, cudaHostAlloc((void **)&p->sargs_h, sizeof *p->sargs_h, 0), fail);
    // Ops: descriptors, then random contents, then algorithms and fusion trials on those buffers.
    p->ops = calloc((size_t)(p->ol.nops ? p->ol.nops : 1), sizeof *p->ops);
    if (!p->ops) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int has_fc = 0;
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        op->o = p->ol.ops[j];
        if (op->o.kind == DLP_CUOP_CONV) DLP_CHECK_GOTO(st, setup_conv(p, op), fail);
        if (op->o.kind == DLP_CUOP_FC) {
            has_fc = 1;
            const dlp_param *wp = param_of(p, op->o.layer, 0), *bp = param_of(p, op->o.layer, 1);
            op->w_coff = p->coff[wp - p->net.params];
            op->w_off = wp->offset;
            op->b_off = bp->offset;
        }
        if (op->o.kind == DLP_CUOP_MAXPOOL && p->train) {
            const dlp_layer *L = &p->net.layers[op->o.layer];
            if (L->k > 15) {
                st = DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: maxpool kernel %d > 15 in a training plan", L->k);
                goto fail;
            }
            DLP_CHECK_GOTO(st, dalloc(p, (size_t)(p->t[op->o.out].rows * p->t[op->o.out].c), (void **)&op->idx), fail);
        }
    }
    if (has_fc) {
        DLP_CHECK_GOTO(st, dlp_cublas_load(&p->bl), fail);
        cublasStatus_t bs = p->bl->create(&p->blas);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            p->blas = NULL;
            st = dlp_cublas_fail(bs, __FILE__, __LINE__, "cublasCreate");
            goto fail;
        }
        const size_t blas_ws = 32u << 20;  // our own workspace: cuBLAS must not allocate during graph capture
        DLP_CHECK_GOTO(st, dalloc(p, blas_ws, &p->blas_ws), fail);
        bs = p->bl->set_stream(p->blas, p->stream);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = p->bl->set_workspace(p->blas, p->blas_ws, blas_ws);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = p->bl->set_math_mode(p->blas, CUBLAS_DEFAULT_MATH);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            st = dlp_cublas_fail(bs, __FILE__, __LINE__, "cublasSetStream/Workspace/MathMode");
            goto fail;
        }
    }
    for (int l = 0; l < p->net.nlayers; l++) {
        cu_tensor *t = &p->t[l];
        if (!p->ol.kept[l]) continue;
        int64_t n = p->N * layer_numel(p, l);
        int dt = t->f32 ? DLP_DTYPE_F32 : p->dt;
        DLP_CU_GOTO(st, dlp_cuk_fill_uniform(t->data, dt, n, 0x5eed + (uint64_t)l, -1.f, 1.f, p->stream), fail);
        if (l == 0) DLP_CU_GOTO(st, dlp_cuk_fill_uniform(p->in_d[1], dt, n, 0x5eed, -1.f, 1.f, p->stream), fail);
        if (t->grad) DLP_CU_GOTO(st, dlp_cuk_fill_uniform(t->grad, dt, n, 0x9a4d + (uint64_t)l, -1.f, 1.f, p->stream), fail);
    }
    DLP_CU_GOTO(st, dlp_cuk_fill_uniform(p->wc, p->dt, p->ncopy, 0x3e1, -0.05f, 0.05f, p->stream), fail);
    {
        size_t fr = 0, tot = 0;
        DLP_CU_GOTO(st, cudaMemGetInfo(&fr, &tot), fail);
        find_ws_bytes = ws_limit_bytes();
        if (find_ws_bytes > fr / 4) find_ws_bytes = fr / 4;
        DLP_CU_GOTO(st, cudaMalloc(&find_ws, find_ws_bytes), fail);
    }
    const char *cache_path = getenv("DLPERF_CUDA_ALGO_CACHE");
    char cache_hdr[384] = "";
    int cache_rows = 0;
    if (cache_path && *cache_path) {
        struct cudaDeviceProp pr;
        DLP_CU_GOTO(st, cudaGetDeviceProperties(&pr, dev), fail);
        snprintf(cache_hdr, sizeof cache_hdr, "dlperf-cuda-algos/1 cudnn %zu gpu %s cc %d.%d", cudnnGetVersion(),
                 pr.name, pr.major, pr.minor);
        DLP_CHECK_GOTO(st, dlp_cuda_algo_cache_load(&p->cache, cache_path, cache_hdr, &cache_rows), fail);
        DLP_DEBUG("cuda: %d algorithm rows from %s", cache_rows, cache_path);
    }
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind != DLP_CUOP_CONV) continue;
        DLP_CHECK_GOTO(st, choose_algo(p, op, DLP_CUCONV_FWD, find_ws, find_ws_bytes), fail);
        if (p->train) {
            if (op->o.in == 0) {  // only for get_input_grad: a refusal makes that unavailable, not the plan
                op->algo[DLP_CUCONV_BWD_DATA] = -1;
                if (choose_algo(p, op, DLP_CUCONV_BWD_DATA, find_ws, find_ws_bytes) != DLP_OK) {
                    DLP_DEBUG("cuda: no data-gradient algorithm for %s: %s", p->net.layers[op->o.layer].name, dlp_err_msg());
                    op->algo[DLP_CUCONV_BWD_DATA] = -1;
                    dlp_err_clear();
                }
            } else {
                DLP_CHECK_GOTO(st, choose_algo(p, op, DLP_CUCONV_BWD_DATA, find_ws, find_ws_bytes), fail);
            }
            DLP_CHECK_GOTO(st, choose_algo(p, op, DLP_CUCONV_BWD_FILTER, find_ws, find_ws_bytes), fail);
        }
    }
    cudaFree(find_ws);
    find_ws = NULL;
    if (cache_hdr[0] && p->cache.n > cache_rows) {
        dlp_status cs = dlp_cuda_algo_cache_save(&p->cache, cache_path, cache_hdr);
        if (cs != DLP_OK) {  // a cache that cannot be written costs time, not correctness
            DLP_WARN("cuda: cannot save the algorithm cache: %s", dlp_err_msg());
            dlp_err_clear();
        }
    }
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind == DLP_CUOP_BN) DLP_CHECK_GOTO(st, setup_bn(p, op), fail);
        if (op->o.kind == DLP_CUOP_CONV && !p->train) DLP_CHECK_GOTO(st, setup_conv_infer(p, op), fail);
    }
    size_t ws = 0;
    for (int j = 0; j < p->ol.nops; j++) {
        const cu_op *op = &p->ops[j];
        for (int d = 0; d < NOPS_DIR; d++)
            if (op->ws[d] > ws) ws = op->ws[d];
        if (op->bn_ws_fwd > ws) ws = op->bn_ws_fwd;
        if (op->bn_ws_bwd > ws) ws = op->bn_ws_bwd;
    }
    p->ws_bytes = ws;
    DLP_CHECK_GOTO(st, dalloc(p, ws, &p->ws), fail);
    DLP_CU_GOTO(st, cudaStreamSynchronize(p->stream), fail);
    p->plan_ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    DLP_INFO("cuda: plan %s batch %d %s%s: %d ops (%d BN on cuDNN BN-Ex, %d on our kernels; %d fused convs), "
             "%d conv shapes searched, %.0f MiB workspace, %.0f MiB on the device, %.0f ms",
             p->net.arch, p->N, dlp_dtype_name(p->dt), p->train ? " training" : " inference", p->ol.nops,
             p->n_cudnn_bn, p->n_own_bn, p->n_fused_conv, p->cache.n, ws / 1048576.0, p->dev_bytes / 1048576.0,
             p->plan_ms);
    *out = &p->base;
    return DLP_OK;
fail:
    if (find_ws) cudaFree(find_ws);
    (void)cudaGetLastError();
    plan_free(&p->base);
    return st;
}

static void plan_free(dlp_plan *pl) {
    cu_plan *p = as_cu(pl);
    if (!p) return;
    if (p->stream) cudaStreamSynchronize(p->stream);
    if (p->copy_stream) cudaStreamSynchronize(p->copy_stream);
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < 2; s++)
            if (p->g_fwd[a][s].exec) cudaGraphExecDestroy(p->g_fwd[a][s].exec);
    for (int s = 0; s < 2; s++)
        if (p->g_loss[s].exec) cudaGraphExecDestroy(p->g_loss[s].exec);
    if (p->g_upd.exec) cudaGraphExecDestroy(p->g_upd.exec);
    if (p->g_bwd)
        for (int i = 0; i < 2 * p->nbsegs; i++)
            if (p->g_bwd[i].exec) cudaGraphExecDestroy(p->g_bwd[i].exec);
    free(p->g_bwd);
    if (p->ops) {
        for (int j = 0; j < p->ol.nops; j++) {
            cu_op *op = &p->ops[j];
            if (op->xd) cudnnDestroyTensorDescriptor(op->xd);
            if (op->yd) cudnnDestroyTensorDescriptor(op->yd);
            if (op->wd) cudnnDestroyFilterDescriptor(op->wd);
            for (int d = 0; d < NOPS_DIR; d++)
                if (op->cd[d]) cudnnDestroyConvolutionDescriptor(op->cd[d]);
            if (op->biasd) cudnnDestroyTensorDescriptor(op->biasd);
            if (op->statd) cudnnDestroyTensorDescriptor(op->statd);
            if (op->bnd) cudnnDestroyTensorDescriptor(op->bnd);
        }
        free(p->ops);
    }
    for (int i = 0; i < 2; i++) {
        if (p->relu_act[i]) cudnnDestroyActivationDescriptor(p->relu_act[i]);
        if (p->ident_act[i]) cudnnDestroyActivationDescriptor(p->ident_act[i]);
    }
    if (p->blas && p->bl) p->bl->destroy(p->blas);
    if (p->dnn) cudnnDestroy(p->dnn);
    for (int i = 0; i < p->nallocs; i++) cudaFree(p->allocs[i]);
    free(p->allocs);
    if (p->labels_h) cudaFreeHost(p->labels_h);
    if (p->largs_h) cudaFreeHost(p->largs_h);
    if (p->lout_h) cudaFreeHost(p->lout_h);
    if (p->sargs_h) cudaFreeHost(p->sargs_h);
    if (p->stage) cudaFreeHost(p->stage);
    for (int i = 0; i < 2; i++) {
        if (p->ev_cstart[i]) cudaEventDestroy(p->ev_cstart[i]);
        if (p->ev_cdone[i]) cudaEventDestroy(p->ev_cdone[i]);
        if (p->ev_ready[i]) cudaEventDestroy(p->ev_ready[i]);
        if (p->ev_free[i]) cudaEventDestroy(p->ev_free[i]);
    }
    if (p->upd_evt) cudaEventDestroy(p->upd_evt);
    if (p->stream) cudaStreamDestroy(p->stream);
    if (p->copy_stream) cudaStreamDestroy(p->copy_stream);
    (void)cudaGetLastError();
    free(p->bucket_segs_d);
    dlp_cuda_buckets_free(p->buckets, p->nbuckets);
    dlp_cuda_buckets_free(p->all, p->all ? 1 : 0);
    if (p->bsegs)
        for (int i = 0; i < p->nbsegs; i++) free(p->bsegs[i].buckets);
    free(p->bsegs);
    free(p->coff);
    free(p->t);
    dlp_cuda_ops_free(&p->ol);
    dlp_cuda_algo_cache_free(&p->cache);
    dlp_net_free(&p->net);
    free(p);
}

static void input_format(const dlp_plan *pl, dlp_layout *layout, dlp_dtype *dtype) {
    const cu_plan *p = (const cu_plan *)pl;
    *layout = DLP_LAYOUT_NHWC;
    *dtype = p->dt;
}

// ---- graphs ----------------------------------------------------------------------------------------------------
typedef dlp_status (*enq_fn)(cu_plan *p, int arg);

static dlp_status run_phase(cu_plan *p, cu_graph *g, enq_fn fn, int arg, const char *what) {
    dlp_cugraph_action a = dlp_cugraph_next(&g->slot, p->graphs, p->warmup);
    if (a == DLP_CUGRAPH_REPLAY) {
        DLP_CU(cudaGraphLaunch(g->exec, p->stream));
        dlp_cugraph_done(&g->slot, a, 1);
        return DLP_OK;
    }
    if (a == DLP_CUGRAPH_EAGER) {
        dlp_status st = fn(p, arg);
        dlp_cugraph_done(&g->slot, a, st == DLP_OK);
        return st;
    }
    // Capture; on any failure leave this phase eager for good and run it eagerly now (nothing ran during capture).
    char why[512] = "";
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(p->stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
        dlp_status st = fn(p, arg);
        if (st != DLP_OK) snprintf(why, sizeof why, "%s", dlp_err_msg());
        e = cudaStreamEndCapture(p->stream, &graph);
        if (st == DLP_OK && e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, graph, 0);
        if (st != DLP_OK && e == cudaSuccess) e = cudaErrorStreamCaptureInvalidated;
    }
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        if (!why[0]) snprintf(why, sizeof why, "%s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        dlp_err_clear();
        g->exec = NULL;
        dlp_cugraph_done(&g->slot, a, 0);
        dlp_log_warn_limited("cuda-graph", 4, "cuda: could not capture the %s phase into a CUDA graph (%s); it runs "
                             "eagerly", what, why);
        return fn(p, arg);
    }
    dlp_cugraph_done(&g->slot, a, 1);
    DLP_CU(cudaGraphLaunch(g->exec, p->stream));
    return DLP_OK;
}

// ---- forward ----------------------------------------------------------------------------------------------------
static dlp_status fc_forward(cu_plan *p, const cu_op *op) {
    const cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    int K = y->c, CHW = (int)layer_numel(p, op->o.in);
    cudaDataType ct = dlp_cuda_dtype(p->dt);
    cublasComputeType_t comp =
        p->dt == DLP_DTYPE_F32 && p->cfg.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    // y (N x K, row-major) = x (N x CHW) . W^T, W (K x CHW row-major) = column-major CHW x K.
    DLP_CUBLAS(p->bl->gemm_ex(p->blas, CUBLAS_OP_T, CUBLAS_OP_N, K, p->N, CHW, &k_one, (char *)p->wc + op->w_coff * p->esz,
                              ct, CHW, x->data, ct, CHW, &k_zero, y->data, CUDA_R_32F, K, comp, CUBLAS_GEMM_DEFAULT));
    DLP_CU(dlp_cuk_bias_rows(y->data, p->w32 + op->b_off, p->N, K, p->stream));
    return DLP_OK;
}

static dlp_status op_forward(cu_plan *p, cu_op *op, dlp_pass pass) {
    cudaStream_t s = p->stream;
    const dlp_layer *L = &p->net.layers[op->o.layer];
    cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    const void *z = op->o.res >= 0 ? p->t[op->o.res].data : NULL;
    switch (op->o.kind) {
    case DLP_CUOP_CONV:
        if (!p->train && op->fused) {
            float alpha2 = z ? 1.0f : 0.0f;
            DLP_CUDNN(cudnnConvolutionBiasActivationForward(
                p->dnn, &k_one, op->xd, x->data, op->wd, op->wfold, op->cd[DLP_CUCONV_FWD_FUSED],
                op->algo[DLP_CUCONV_FWD_FUSED], p->ws, p->ws_bytes, &alpha2, op->yd, z ? z : y->data, op->biasd,
                op->fused == 1 ? op->bfold_c : (void *)op->bfold, op->o.relu ? p->relu_act[op->act] : p->ident_act[op->act], op->yd,
                y->data));
            return DLP_OK;
        }
        DLP_CUDNN(cudnnConvolutionForward(p->dnn, &k_one, op->xd, x->data, op->wd,
                                          p->train ? (char *)p->wc + op->w_coff * p->esz : op->wfold,
                                          op->cd[DLP_CUCONV_FWD], op->algo[DLP_CUCONV_FWD], p->ws, p->ws_bytes,
                                          &k_zero, op->yd, y->data));
        if (!p->train && (op->o.bn >= 0 || z || op->o.relu))
            DLP_CU(dlp_cuk_apply(y->data, z, y->data, p->dt, y->rows, y->c, NULL, op->o.bn >= 0 ? op->bfold : NULL,
                                 op->o.relu, s));
        return DLP_OK;
    case DLP_CUOP_BN: {
        const float *gamma = p->w32 + op->gamma_off, *beta = p->w32 + op->beta_off;
        float *rm = p->bufs32 + op->rm_off, *rv = p->bufs32 + op->rv_off;
        if (pass == DLP_PASS_TRAIN) {
            DLP_CU(dlp_cuk_bn_stats(x->data, p->dt, x->rows, x->c, p->sms, p->bn_part, s));
            DLP_CU(dlp_cuk_bn_finalize(p->bn_part, x->data, p->dt, x->rows, x->c, p->sms, gamma, beta, L->bn_eps,
                                       L->bn_momentum, rm, rv, op->save_mean, op->save_invstd, p->bn_scale,
                                       p->bn_shift, s));
        } else {
            DLP_CU(dlp_cuk_bn_eval_prepare(gamma, beta, rm, rv, L->bn_eps, x->c, p->bn_scale, p->bn_shift, s));
        }
        DLP_CU(dlp_cuk_apply(x->data, z, y->data, p->dt, x->rows, x->c, p->bn_scale, p->bn_shift, op->o.relu, s));
        return DLP_OK;
    }
    case DLP_CUOP_RELU:
        DLP_CU(dlp_cuk_apply(x->data, NULL, y->data, p->dt, x->rows, x->c, NULL, NULL, 1, s));
        return DLP_OK;
    case DLP_CUOP_ADD:
        DLP_CU(dlp_cuk_apply(x->data, z, y->data, p->dt, x->rows, x->c, NULL, NULL, op->o.relu, s));
        return DLP_OK;
    case DLP_CUOP_MAXPOOL:
        DLP_CU(dlp_cuk_maxpool_fwd(x->data, p->dt, p->N, x->h, x->w, x->c, L->k, L->stride, L->pad, y->h, y->w,
                                   y->data, pass == DLP_PASS_TRAIN ? op->idx : NULL, s));
        return DLP_OK;
    case DLP_CUOP_AVGPOOL:
        DLP_CU(dlp_cuk_avgpool_fwd(x->data, p->dt, p->N, x->h * x->w, x->c, y->data, s));
        return DLP_OK;
    case DLP_CUOP_FC: return fc_forward(p, op);
    default: return DLP_ERR(DLP_ERR_INTERNAL, "cuda: op kind %d", (int)op->o.kind);
    }
}

static dlp_status bn_forward_cudnn(cu_plan *p, cu_op *op) {
    const dlp_layer *L = &p->net.layers[op->o.layer];
    cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    const void *z = op->o.res >= 0 ? p->t[op->o.res].data : NULL;
    cudnnTensorDescriptor_t d = op->bnd;
    DLP_CUDNN(cudnnBatchNormalizationForwardTrainingEx(
        p->dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, op->bnops, &k_one, &k_zero, d, x->data, z ? d : NULL, z, d,
        y->data, op->statd, p->w32 + op->gamma_off, p->w32 + op->beta_off, L->bn_momentum, p->bufs32 + op->rm_off,
        p->bufs32 + op->rv_off, L->bn_eps, op->save_mean, op->save_invstd, op->o.relu ? p->relu_act[op->act] : NULL, p->ws,
        op->bn_ws_fwd, op->bn_reserve, op->bn_reserve_bytes));
    return DLP_OK;
}

static dlp_status enq_forward(cu_plan *p, int pass) {
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind == DLP_CUOP_BN && pass == DLP_PASS_TRAIN && op->bn_cudnn) DLP_CHECK(bn_forward_cudnn(p, op));
        else DLP_CHECK(op_forward(p, op, (dlp_pass)pass));
    }
    return DLP_OK;
}

// ---- loss ----------------------------------------------------------------------------------------------------
static dlp_status enq_loss(cu_plan *p, int arg) {
    (void)arg;
    int out = dlp_net_output(&p->net);
    cu_tensor *y = &p->t[out];
    DLP_CU(cudaMemcpyAsync(p->labels_d, p->labels_h, (size_t)p->N * 4, cudaMemcpyHostToDevice, p->stream));
    DLP_CU(cudaMemcpyAsync(p->largs_d, p->largs_h, sizeof *p->largs_h, cudaMemcpyHostToDevice, p->stream));
    DLP_CU(dlp_cuk_softmax_xent(y->data, p->labels_d, p->N, y->c, p->largs_d, p->loss_scaling ? p->scale_d : NULL,
                                p->sample_loss, p->flags_d, y->grad ? y->grad : p->dz_tmp,
                                y->grad_c != y->grad ? y->grad_c : NULL, p->dt, p->stream));
    DLP_CU(dlp_cuk_loss_reduce(p->sample_loss, p->flags_d, p->N, p->largs_d, p->lout_d, p->stream));
    DLP_CU(cudaMemcpyAsync(p->lout_h, p->lout_d, sizeof *p->lout_h, cudaMemcpyDeviceToHost, p->stream));
    return DLP_OK;
}

// ---- backward ---------------------------------------------------------------------------------------------------
static dlp_status conv_bwd_data(cu_plan *p, const cu_op *op, int acc) {
    const cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    DLP_CUDNN(cudnnConvolutionBackwardData(p->dnn, &k_one, op->wd, (char *)p->wc + op->w_coff * p->esz, op->yd, y->grad,
                                           op->cd[DLP_CUCONV_BWD_DATA], op->algo[DLP_CUCONV_BWD_DATA], p->ws,
                                           p->ws_bytes, acc ? &k_one : &k_zero, op->xd, x->grad));
    return DLP_OK;
}

static dlp_status op_backward(cu_plan *p, cu_op *op) {
    cudaStream_t s = p->stream;
    const dlp_layer *L = &p->net.layers[op->o.layer];
    cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    cu_tensor *r = op->o.res >= 0 ? &p->t[op->o.res] : NULL;
    void *dx = op->o.grad_in ? x->grad : NULL;
    void *dz = r && op->o.grad_res ? r->grad : NULL;
    switch (op->o.kind) {
    case DLP_CUOP_CONV:
        DLP_CUDNN(cudnnConvolutionBackwardFilter(p->dnn, &k_one, op->xd, x->data, op->yd, y->grad,
                                                 op->cd[DLP_CUCONV_BWD_FILTER], op->algo[DLP_CUCONV_BWD_FILTER], p->ws,
                                                 p->ws_bytes, &k_zero, op->wd, (char *)p->gc + op->w_coff * p->esz));
        if (dx) DLP_CHECK(conv_bwd_data(p, op, op->o.acc_in));
        return DLP_OK;
    case DLP_CUOP_BN: {
        const float *gamma = p->w32 + op->gamma_off, *beta = p->w32 + op->beta_off;
        float *dgamma = p->g32 + op->gamma_off, *dbeta = p->g32 + op->beta_off;
        if (op->bn_cudnn) {
            cudnnTensorDescriptor_t d = op->bnd;
            void *dzp = dz && op->o.acc_res ? p->dz_tmp : dz;
            if (r && !dzp) dzp = p->dz_tmp;  // cuDNN writes dz for BN+add+ReLU whether or not it is wanted
            cudnnStatus_t st = cudnnBatchNormalizationBackwardEx(
                p->dnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, op->bnops, &k_one, &k_zero, &k_one, &k_zero, d, x->data, d,
                y->data, d, y->grad, r ? d : NULL, r ? dzp : NULL, d, dx ? dx : p->dz_tmp, op->statd, gamma, beta,
                dgamma, dbeta, L->bn_eps, op->save_mean, op->save_invstd, op->o.relu ? p->relu_act[op->act] : NULL, p->ws,
                op->bn_ws_bwd, op->bn_reserve, op->bn_reserve_bytes);
            if (st != CUDNN_STATUS_SUCCESS)
                return dlp_cudnn_fail(st, __FILE__, __LINE__, "cudnnBatchNormalizationBackwardEx");
            if (dz && op->o.acc_res)  // dz += the residual gradient cuDNN wrote into scratch
                DLP_CU(dlp_cuk_apply(p->dz_tmp, dz, dz, p->dt, y->rows, y->c, NULL, NULL, 0, s));
            return DLP_OK;
        }
        DLP_CU(dlp_cuk_bn_bwd_stats(x->data, y->grad, y->data, p->dt, y->rows, y->c, p->sms, op->o.relu, op->save_mean,
                                    p->bn_part, s));
        DLP_CU(dlp_cuk_bn_bwd_finalize(p->bn_part, y->rows, y->c, p->sms, gamma, op->save_mean, op->save_invstd, dgamma,
                                       dbeta, p->bn_coef, s));
        DLP_CU(dlp_cuk_bwd_apply(x->data, y->grad, y->data, p->dt, y->rows, y->c, op->o.relu, p->bn_coef, dx,
                                 op->o.acc_in, dz, op->o.acc_res, s));
        return DLP_OK;
    }
    case DLP_CUOP_RELU:
        DLP_CU(dlp_cuk_bwd_apply(NULL, y->grad, y->data, p->dt, y->rows, y->c, 1, NULL, dx, op->o.acc_in, NULL, 0, s));
        return DLP_OK;
    case DLP_CUOP_ADD:
        DLP_CU(dlp_cuk_bwd_apply(NULL, y->grad, y->data, p->dt, y->rows, y->c, op->o.relu, NULL, dx, op->o.acc_in, dz,
                                 op->o.acc_res, s));
        return DLP_OK;
    case DLP_CUOP_MAXPOOL:
        if (dx)
            DLP_CU(dlp_cuk_maxpool_bwd(y->grad, op->idx, p->dt, p->N, x->h, x->w, x->c, L->k, L->stride, L->pad, y->h,
                                       y->w, dx, op->o.acc_in, s));
        return DLP_OK;
    case DLP_CUOP_AVGPOOL:
        if (dx) DLP_CU(dlp_cuk_avgpool_bwd(y->grad, p->dt, p->N, x->h * x->w, x->c, dx, op->o.acc_in, s));
        return DLP_OK;
    case DLP_CUOP_FC: {
        int K = y->c, CHW = (int)layer_numel(p, op->o.in);
        cudaDataType ct = dlp_cuda_dtype(p->dt);
        cublasComputeType_t comp =
            p->dt == DLP_DTYPE_F32 && p->cfg.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        void *w = (char *)p->wc + op->w_coff * p->esz;
        // dW (K x CHW row-major; column-major CHW x K) = x^T-ish: dW' = X' . dY'^T
        DLP_CUBLAS(p->bl->gemm_ex(p->blas, CUBLAS_OP_N, CUBLAS_OP_T, CHW, K, p->N, &k_one, x->data, ct, CHW, y->grad_c,
                                  ct, K, &k_zero, p->g32 + op->w_off, CUDA_R_32F, CHW, comp, CUBLAS_GEMM_DEFAULT));
        DLP_CU(dlp_cuk_bias_grad(y->grad, p->N, K, p->g32 + op->b_off, s));
        if (dx)  // dX (N x CHW) = dY (N x K) . W (K x CHW): column-major dX' = W' . dY'
            DLP_CUBLAS(p->bl->gemm_ex(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, CHW, p->N, K, &k_one, w, ct, CHW, y->grad_c, ct,
                                      K, op->o.acc_in ? &k_one : &k_zero, dx, ct, CHW, comp, CUBLAS_GEMM_DEFAULT));
        return DLP_OK;
    }
    default: return DLP_ERR(DLP_ERR_INTERNAL, "cuda: op kind %d", (int)op->o.kind);
    }
}

static dlp_status enq_bwd_segment(cu_plan *p, int si) {
    const cu_bseg *sg = &p->bsegs[si];
    if (si == 0 && p->loss_scaling) DLP_CU(cudaMemsetAsync(p->found_inf_d, 0, sizeof(int32_t), p->stream));
    for (int j = sg->hi; j >= sg->lo; j--) DLP_CHECK(op_backward(p, &p->ops[j]));
    for (int i = 0; i < sg->nb; i++) {
        int b = sg->buckets[i];
        DLP_CU(dlp_cuk_grad_finalize(p->bucket_segs_d[b], p->buckets[b].nsegs, p->gc, p->dt, p->g32,
                                     p->loss_scaling ? p->scale_d : NULL, p->loss_scaling ? p->found_inf_d : NULL,
                                     p->stream));
    }
    return DLP_OK;
}

static dlp_status run_backward(cu_plan *p, int eager) {
    for (int si = 0; si < p->nbsegs; si++) {
        if (eager) DLP_CHECK(enq_bwd_segment(p, si));
        else DLP_CHECK(run_phase(p, &p->g_bwd[2 * si + p->slot], enq_bwd_segment, si, "backward"));
        const cu_bseg *sg = &p->bsegs[si];
        if (p->cfg.on_bucket)
            for (int i = 0; i < sg->nb; i++) {
                const dlp_cuda_bucket *b = &p->buckets[sg->buckets[i]];
                p->cfg.on_bucket(p->cfg.bucket_ctx, b->offset, b->count);
            }
    }
    if (p->nbsegs == 0) {  // no parameters: still run the ops (input gradients)
        for (int j = p->ol.nops - 1; j >= 0; j--) DLP_CHECK(op_backward(p, &p->ops[j]));
    }
    return DLP_OK;
}

// ---- update ----------------------------------------------------------------------------------------------------
static dlp_status enq_update(cu_plan *p, int arg) {
    (void)arg;
    if (!p->all) return DLP_OK;
    DLP_CU(cudaMemcpyAsync(p->sargs_d, p->sargs_h, sizeof *p->sargs_h, cudaMemcpyHostToDevice, p->stream));
    DLP_CU(dlp_cuk_sgd(p->all_segs_d, p->all[0].nsegs, p->w32, p->wc, p->dt, p->v32, p->g32, p->nodecay, p->sargs_d,
                       p->loss_scaling ? p->found_inf_d : NULL, p->stream));
    if (p->loss_scaling) DLP_CU(dlp_cuk_scaler_update(p->scale_d, p->good_d, p->found_inf_d, 2000, p->stream));
    return DLP_OK;
}

// ---- interface entries -------------------------------------------------------------------------------------------
static dlp_status ensure_stage(cu_plan *p, size_t bytes) {
    if (p->stage_bytes >= bytes) return DLP_OK;
    if (p->stage) cudaFreeHost(p->stage);
    p->stage = NULL;
    p->stage_bytes = 0;
    DLP_CU(cudaHostAlloc(&p->stage, bytes, 0));
    p->stage_bytes = bytes;
    return DLP_OK;
}

// Inference plans: each conv's weights and bias with its BN folded in (host, double precision), from the device-
// layout parameters `dev` and the running statistics `bufs` (both host arrays).
static dlp_status fold_convs(cu_plan *p, const float *dev, const float *bufs) {
    const dlp_net *net = &p->net;
    dlp_status st = DLP_OK;
    for (int j = 0; j < p->ol.nops && st == DLP_OK; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind != DLP_CUOP_CONV) continue;
        const dlp_layer *L = &net->layers[op->o.layer];
        const int K = L->c;
        const int64_t inner = (int64_t)net->layers[L->in0].c * L->k * L->k;
        float *wf = malloc((size_t)(K * inner) * 4), *bf = calloc((size_t)K, 4);
        void *wh = malloc((size_t)(K * inner) * p->esz), *bh = malloc((size_t)K * p->esz);
        if (!wf || !bf || !wh || !bh) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory folding BN into conv %s", L->name);
        } else {
            const float *w = dev + op->w_off;  // (K, R, S, C): k outermost, so folding per k works
            if (op->o.bn >= 0)
                dlp_cuda_fold_bn(w, K, inner, dev + op->gamma_off, dev + op->beta_off, bufs + op->rm_off,
                                 bufs + op->rv_off, net->layers[op->o.bn].bn_eps, wf, bf);
            else
                memcpy(wf, w, (size_t)(K * inner) * 4);
            dlp_cuda_nchw_to_nhwc(wf, 1, K * inner, 1, p->dt, wh);  // hw = 1: a plain cast
            dlp_cuda_nchw_to_nhwc(bf, 1, K, 1, p->dt, bh);
            cudaError_t e = xfer(p, op->wfold, wh, (size_t)(K * inner) * p->esz, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) e = xfer(p, op->bfold, bf, (size_t)K * 4, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) e = xfer(p, op->bfold_c, bh, (size_t)K * p->esz, cudaMemcpyHostToDevice);
            if (e != cudaSuccess) st = dlp_cuda_fail(e, __FILE__, __LINE__, "xfer(folded conv)");
        }
        free(wf);
        free(bf);
        free(wh);
        free(bh);
    }
    return st;
}

static dlp_status cu_set_params(dlp_plan *pl, const float *params, const float *bufs) {
    cu_plan *p = as_cu(pl);
    const dlp_net *net = &p->net;
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->stream));
    float *dev = malloc((size_t)(p->P ? p->P : 1) * 4), *hb = malloc((size_t)(net->buf_count ? net->buf_count : 1) * 4);
    dlp_status st = DLP_OK;
    if (!dev || !hb) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory setting parameters");
        goto out;
    }
    if (params && p->P > 0) {
        dlp_cuda_params_to_device(net, params, dev);
        DLP_CU_GOTO(st, xfer(p, p->w32, dev, (size_t)p->P * 4, cudaMemcpyHostToDevice), out);
        if (p->all)
            DLP_CU_GOTO(st, dlp_cuk_refresh_copies(p->all_segs_d, p->all[0].nsegs, p->w32, p->wc, p->dt, p->stream), out);
    }
    if (bufs && net->buf_count > 0)
        DLP_CU_GOTO(st, xfer(p, p->bufs32, bufs, (size_t)net->buf_count * 4, cudaMemcpyHostToDevice), out);
    if (!p->train && (params || bufs)) {  // refold with whatever is now on the device
        if (!params && p->P > 0) DLP_CU_GOTO(st, xfer(p, dev, p->w32, (size_t)p->P * 4, cudaMemcpyDeviceToHost), out);
        if (net->buf_count > 0) {
            if (bufs) memcpy(hb, bufs, (size_t)net->buf_count * 4);
            else DLP_CU_GOTO(st, xfer(p, hb, p->bufs32, (size_t)net->buf_count * 4, cudaMemcpyDeviceToHost), out);
        }
        DLP_CHECK_GOTO(st, fold_convs(p, dev, hb), out);
    }
    DLP_CU_GOTO(st, cudaStreamSynchronize(p->stream), out);
out:
    free(dev);
    free(hb);
    return st;
}

static dlp_status download_flat(cu_plan *p, const float *src_dev, int64_t n, float *out, int permute) {
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->stream));
    if (n <= 0) return DLP_OK;
    if (!permute) {
        DLP_CU(xfer(p, out, src_dev, (size_t)n * 4, cudaMemcpyDeviceToHost));
        return DLP_OK;
    }
    float *tmp = malloc((size_t)n * 4);
    DLP_TRY_ALLOC(tmp);
    cudaError_t e = xfer(p, tmp, src_dev, (size_t)n * 4, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) dlp_cuda_params_from_device(&p->net, tmp, out);
    free(tmp);
    DLP_CU(e);
    return DLP_OK;
}

static dlp_status cu_get_params(dlp_plan *pl, float *params, float *bufs) {
    cu_plan *p = as_cu(pl);
    if (params) DLP_CHECK(download_flat(p, p->w32, p->P, params, 1));
    if (bufs) DLP_CHECK(download_flat(p, p->bufs32, p->net.buf_count, bufs, 0));
    return DLP_OK;
}

static dlp_status cu_get_grads(dlp_plan *pl, float *grads) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_grads on an inference plan");
    return download_flat(p, p->g32, p->P, grads, 1);
}

static dlp_status cu_set_momentum(dlp_plan *pl, const float *v) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: set_momentum on an inference plan");
    if (p->P <= 0) return DLP_OK;
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->stream));
    float *tmp = malloc((size_t)p->P * 4);
    DLP_TRY_ALLOC(tmp);
    dlp_cuda_params_to_device(&p->net, v, tmp);
    cudaError_t e = xfer(p, p->v32, tmp, (size_t)p->P * 4, cudaMemcpyHostToDevice);
    free(tmp);
    DLP_CU(e);
    return DLP_OK;
}

static dlp_status cu_get_momentum(dlp_plan *pl, float *v) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_momentum on an inference plan");
    return download_flat(p, p->v32, p->P, v, 1);
}

static float *cu_grad_buffer(dlp_plan *pl) { return as_cu(pl)->g32; }

// Harvests the copy/stall measurement of a slot's last copy (its events are long complete in steady state).
static void harvest_stats(cu_plan *p, int slot) {
    if (!p->stat_pending[slot]) return;
    if (cudaEventSynchronize(p->ev_ready[slot]) != cudaSuccess) {
        (void)cudaGetLastError();
        p->stat_pending[slot] = 0;
        return;
    }
    float copy = 0, stall = 0;
    if (cudaEventElapsedTime(&copy, p->ev_cstart[slot], p->ev_cdone[slot]) == cudaSuccess &&
        cudaEventElapsedTime(&stall, p->ev_ready[slot], p->ev_cdone[slot]) == cudaSuccess) {
        p->copy_ms_total += copy;
        p->stall_ms_total += stall > 0 ? stall : 0;  // > 0: compute was ready before the copy finished
        p->copies++;
    }
    (void)cudaGetLastError();
    p->stat_pending[slot] = 0;
}

static dlp_status cu_set_input(dlp_plan *pl, const void *batch, int n) {
    cu_plan *p = as_cu(pl);
    if (n < 1 || n > p->N) return DLP_ERR(DLP_ERR_INVALID, "cuda: set_input with %d samples (plan batch %d)", n, p->N);
    DLP_CU(cudaSetDevice(p->dev));
    int slot = (int)(p->in_count % 2);
    harvest_stats(p, slot);
    size_t bytes = (size_t)n * (size_t)layer_numel(p, 0) * p->esz;
    // The copy stream waits until compute no longer reads this buffer (the step before last), copies, and we
    // wait for the copy itself so the caller may reuse `batch` (pageable or pinned) as soon as we return; the
    // compute of the previous step keeps running meanwhile.
    DLP_CU(cudaStreamWaitEvent(p->copy_stream, p->ev_free[slot], 0));
    DLP_CU(cudaEventRecord(p->ev_cstart[slot], p->copy_stream));
    DLP_CU(cudaMemcpyAsync(p->in_d[slot], batch, bytes, cudaMemcpyHostToDevice, p->copy_stream));
    DLP_CU(cudaEventRecord(p->ev_cdone[slot], p->copy_stream));
    DLP_CU(cudaEventSynchronize(p->ev_cdone[slot]));
    p->slot = slot;
    p->n_in = n;
    p->copy_pending = 1;
    p->in_count++;
    return DLP_OK;
}

static dlp_status cu_forward(dlp_plan *pl, dlp_pass pass) {
    cu_plan *p = as_cu(pl);
    if (pass == DLP_PASS_TRAIN && !p->train)
        return DLP_ERR(DLP_ERR_INVALID, "cuda: a training pass on an inference plan (make the plan with train=1)");
    if (pass != DLP_PASS_TRAIN && pass != DLP_PASS_EVAL) return DLP_ERR(DLP_ERR_INVALID, "cuda: pass %d", (int)pass);
    if (pass == DLP_PASS_TRAIN && p->n_in && p->n_in != p->N)
        return DLP_ERR(DLP_ERR_INVALID, "cuda: a training pass needs a full batch (set_input gave %d of %d)", p->n_in, p->N);
    DLP_CU(cudaSetDevice(p->dev));
    int slot = p->slot;
    if (p->copy_pending) {
        DLP_CU(cudaEventRecord(p->ev_ready[slot], p->stream));
        DLP_CU(cudaStreamWaitEvent(p->stream, p->ev_cdone[slot], 0));
        p->copy_pending = 0;
        p->stat_pending[slot] = 1;
    }
    p->t[0].data = p->in_d[slot];
    DLP_CHECK(run_phase(p, &p->g_fwd[pass][slot], enq_forward, pass, "forward"));
    DLP_CU(cudaEventRecord(p->ev_free[slot], p->stream));
    p->have_train_fwd = pass == DLP_PASS_TRAIN;
    p->have_loss = 0;
    return DLP_OK;
}

static dlp_status cu_get_output(dlp_plan *pl, float *out) {
    cu_plan *p = as_cu(pl);
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->stream));
    int l = dlp_net_output(&p->net);
    const cu_tensor *t = &p->t[l];
    int n = p->n_in ? p->n_in : p->N;
    int64_t per = layer_numel(p, l);
    if (t->f32) {
        DLP_CU(xfer(p, out, t->data, (size_t)(n * per) * 4, cudaMemcpyDeviceToHost));
        return DLP_OK;
    }
    size_t bytes = (size_t)(n * per) * p->esz;
    DLP_CHECK(ensure_stage(p, bytes));
    DLP_CU(xfer(p, p->stage, t->data, bytes, cudaMemcpyDeviceToHost));
    dlp_cuda_nhwc_to_nchw(p->stage, n, t->c, (int64_t)t->h * t->w, p->dt, out);
    return DLP_OK;
}

static dlp_status cu_loss(dlp_plan *pl, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    cu_plan *p = as_cu(pl);
    int l = dlp_net_output(&p->net);
    if (p->net.layers[l].kind != DLP_LAYER_FC)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: the loss needs an FC last layer (logits); the last layer is %s",
                       dlp_layer_kind_name(p->net.layers[l].kind));
    if (!(label_smoothing >= 0.f && label_smoothing < 1.f))
        return DLP_ERR(DLP_ERR_INVALID, "label smoothing %g is not in [0, 1)", label_smoothing);
    int n = p->n_in ? p->n_in : p->N, K = p->net.layers[l].c;
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= K)
            return DLP_ERR(DLP_ERR_INVALID, "label %d of sample %d is outside [0, %d)", labels[i], i, K);
    DLP_CU(cudaSetDevice(p->dev));
    memcpy(p->labels_h, labels, (size_t)n * 4);
    for (int i = n; i < p->N; i++) p->labels_h[i] = 0;
    p->largs_h->n = n;
    p->largs_h->smoothing = label_smoothing;
    DLP_CHECK(run_phase(p, &p->g_loss[p->slot], enq_loss, 0, "loss"));
    DLP_CU(cudaStreamSynchronize(p->stream));  // the one host wait of a training step: the loss is returned
    out->loss = p->lout_h->loss_sum / n;
    out->correct_top1 = p->lout_h->top1;
    out->correct_top5 = p->lout_h->top5;
    p->have_loss = p->have_train_fwd;
    return DLP_OK;
}

static dlp_status cu_backward(dlp_plan *pl, const float *dy) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: backward on an inference plan");
    if (!p->have_train_fwd) return DLP_ERR(DLP_ERR_INVALID, "cuda: backward needs a forward(DLP_PASS_TRAIN) first");
    DLP_CU(cudaSetDevice(p->dev));
    if (!dy) {
        if (!p->have_loss) return DLP_ERR(DLP_ERR_INVALID, "cuda: backward(NULL) needs loss() after the forward");
        DLP_CHECK(run_backward(p, 0));
    } else {
        int l = dlp_net_output(&p->net);
        cu_tensor *t = &p->t[l];
        int64_t n = p->N * layer_numel(p, l);
        DLP_CU(cudaStreamSynchronize(p->stream));
        if (t->f32) {
            DLP_CU(xfer(p, t->grad, dy, (size_t)n * 4, cudaMemcpyHostToDevice));
            if (p->loss_scaling) DLP_CU(dlp_cuk_cast(t->grad, DLP_DTYPE_F32, t->grad, DLP_DTYPE_F32, n, 1.f, p->scale_d, p->stream));
            if (t->grad_c != t->grad) DLP_CU(dlp_cuk_cast(t->grad, DLP_DTYPE_F32, t->grad_c, p->dt, n, 1.f, NULL, p->stream));
        } else {
            DLP_CHECK(ensure_stage(p, (size_t)n * p->esz));
            dlp_cuda_nchw_to_nhwc(dy, p->N, t->c, (int64_t)t->h * t->w, p->dt, p->stage);
            DLP_CU(xfer(p, t->grad, p->stage, (size_t)n * p->esz, cudaMemcpyHostToDevice));
            if (p->loss_scaling) DLP_CU(dlp_cuk_cast(t->grad, p->dt, t->grad, p->dt, n, 1.f, p->scale_d, p->stream));
        }
        DLP_CHECK(run_backward(p, 1));
    }
    DLP_CU(cudaEventRecord(p->ev_free[p->slot], p->stream));
    p->have_bwd = 1;
    return DLP_OK;
}

static dlp_status cu_get_input_grad(dlp_plan *pl, float *dx) {
    cu_plan *p = as_cu(pl);
    if (!p->have_bwd) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_input_grad needs a backward first");
    DLP_CU(cudaSetDevice(p->dev));
    for (int j = p->ol.nops - 1; j >= 0; j--) {  // the data gradients backward skipped (convs reading the input)
        const cu_op *op = &p->ops[j];
        if (op->o.kind != DLP_CUOP_CONV || op->o.in != 0) continue;
        if (op->algo[DLP_CUCONV_BWD_DATA] < 0)
            return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: cuDNN offers no data-gradient algorithm for %s's input",
                           p->net.layers[op->o.layer].name);
        DLP_CHECK(conv_bwd_data(p, op, op->o.acc_in_deferred));
    }
    float S = 1.f;
    if (p->loss_scaling) DLP_CU(cudaMemcpyAsync(&S, p->scale_d, sizeof S, cudaMemcpyDeviceToHost, p->stream));
    DLP_CU(cudaStreamSynchronize(p->stream));
    const cu_tensor *t = &p->t[0];
    int n = p->N;
    int64_t per = layer_numel(p, 0);
    size_t bytes = (size_t)(n * per) * p->esz;
    DLP_CHECK(ensure_stage(p, bytes));
    DLP_CU(xfer(p, p->stage, t->grad, bytes, cudaMemcpyDeviceToHost));
    dlp_cuda_nhwc_to_nchw(p->stage, n, t->c, (int64_t)t->h * t->w, p->dt, dx);
    if (S != 1.f)
        for (int64_t i = 0; i < n * per; i++) dx[i] /= S;
    return DLP_OK;
}

static dlp_status cu_update(dlp_plan *pl, const dlp_sgd *hp) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: update on an inference plan");
    DLP_CU(cudaSetDevice(p->dev));
    if (p->upd_pending) DLP_CU(cudaEventSynchronize(p->upd_evt));  // the previous update has read its arguments
    p->sargs_h->lr = hp->lr;
    p->sargs_h->momentum = hp->momentum;
    p->sargs_h->weight_decay = hp->weight_decay;
    p->sargs_h->nesterov = hp->nesterov;
    p->sargs_h->decay_all = hp->decay_no_decay_params;
    DLP_CHECK(run_phase(p, &p->g_upd, enq_update, 0, "update"));
    DLP_CU(cudaEventRecord(p->upd_evt, p->stream));
    p->upd_pending = 1;
    return DLP_OK;
}

static dlp_status cu_sync(dlp_plan *pl) {
    cu_plan *p = as_cu(pl);
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->copy_stream));
    DLP_CU(cudaStreamSynchronize(p->stream));
    return DLP_OK;
}

static dlp_status cu_input_stats(dlp_plan *pl, double *copy_ms, double *stall_ms, int64_t *copies) {
    cu_plan *p = as_cu(pl);
    for (int s = 0; s < 2; s++)
        if (p->stat_pending[s] && cudaEventQuery(p->ev_ready[s]) == cudaSuccess) harvest_stats(p, s);
    (void)cudaGetLastError();
    if (copy_ms) *copy_ms = p->copy_ms_total;
    if (stall_ms) *stall_ms = p->stall_ms_total;
    if (copies) *copies = p->copies;
    return DLP_OK;
}

// Sustained GFLOP/s of a large 3x3 convolution (ResNet's commonest shape, batch 128, 256 -> 256 channels at 28x28)
// at this precision, forward only, timed with events after warm-up.
static dlp_status cu_measure_peak(dlp_dtype precision, int threads, double *gflops) {
    (void)threads;
    dlp_net net;
    DLP_CHECK(dlp_net_init(&net, "peak", 256, 28, 28));
    if (dlp_net_conv(&net, "conv", 0, 256, 3, 1, 1) < 0) {
        dlp_net_free(&net);
        return dlp_err_status();
    }
    dlp_plan_cfg cfg = {.batch = 128, .train = 0, .precision = precision, .tf32 = 1};
    dlp_plan *pl = NULL;
    dlp_status st = plan_create(&net, &cfg, &pl);
    double flops = dlp_net_forward_flops(&net) * cfg.batch;
    dlp_net_free(&net);
    if (st != DLP_OK) return st;
    cu_plan *p = as_cu(pl);
    cudaEvent_t a = NULL, b = NULL;
    float ms = 0;
    const int iters = 50;
    for (int j = 0; j < p->ol.nops; j++)  // never time on zeros
        if (p->ops[j].o.kind == DLP_CUOP_CONV)
            DLP_CU_GOTO(st, dlp_cuk_fill_uniform(p->ops[j].wfold, p->dt, 256 * 256 * 9, 7 + (uint64_t)j, -0.05f, 0.05f,
                                                 p->stream), out);
    DLP_CU_GOTO(st, cudaEventCreate(&a), out);
    DLP_CU_GOTO(st, cudaEventCreate(&b), out);
    for (int i = 0; i < 5; i++) DLP_CHECK_GOTO(st, cu_forward(pl, DLP_PASS_EVAL), out);
    DLP_CU_GOTO(st, cudaEventRecord(a, p->stream), out);
    for (int i = 0; i < iters; i++) DLP_CHECK_GOTO(st, cu_forward(pl, DLP_PASS_EVAL), out);
    DLP_CU_GOTO(st, cudaEventRecord(b, p->stream), out);
    DLP_CU_GOTO(st, cudaEventSynchronize(b), out);
    DLP_CU_GOTO(st, cudaEventElapsedTime(&ms, a, b), out);
    *gflops = flops * iters / (ms * 1e-3) / 1e9;
out:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    plan_free(pl);
    return st;
}

// ---- extras (cuda.h) ----------------------------------------------------------------------------------------------
void *dlp_cuda_plan_stream(dlp_plan *pl) {
    if (!pl || pl->ops != &dlp_backend_cuda) return NULL;
    return as_cu(pl)->stream;
}

json_t *dlp_cuda_plan_describe(dlp_plan *pl) {
    if (!pl || pl->ops != &dlp_backend_cuda) return NULL;
    cu_plan *p = as_cu(pl);
    json_t *o = json_object();
    json_object_set_new(o, "net", json_string(p->net.arch));
    json_object_set_new(o, "batch", json_integer(p->N));
    json_object_set_new(o, "precision", json_string(dlp_dtype_name(p->dt)));
    json_object_set_new(o, "tf32", json_boolean(p->cfg.tf32));
    json_object_set_new(o, "train", json_boolean(p->train));
    json_object_set_new(o, "ops", json_integer(p->ol.nops));
    json_object_set_new(o, "bn_cudnn_fused", json_integer(p->n_cudnn_bn));
    json_object_set_new(o, "bn_own_kernels", json_integer(p->n_own_bn));
    json_object_set_new(o, "conv_bias_act_fused", json_integer(p->n_fused_conv));
    json_object_set_new(o, "conv_shapes_searched", json_integer(p->cache.n));
    json_object_set_new(o, "algo_cache_hits", json_integer(p->cache.hits));
    json_object_set_new(o, "workspace_bytes", json_integer((json_int_t)p->ws_bytes));
    json_object_set_new(o, "device_bytes", json_integer(p->dev_bytes));
    json_object_set_new(o, "plan_ms", json_real(p->plan_ms));
    json_object_set_new(o, "loss_scaling", json_boolean(p->loss_scaling));
    json_object_set_new(o, "graphs_enabled", json_boolean(p->graphs));
    int ready = 0, failed = 0;
    cu_graph *all[16];
    int na = 0;
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < 2; s++) all[na++] = &p->g_fwd[a][s];
    all[na++] = &p->g_loss[0];
    all[na++] = &p->g_loss[1];
    all[na++] = &p->g_upd;
    for (int i = 0; i < na; i++) ready += all[i]->slot.state == DLP_CUGRAPH_READY, failed += all[i]->slot.state == DLP_CUGRAPH_FAILED;
    for (int i = 0; i < 2 * p->nbsegs; i++)
        ready += p->g_bwd[i].slot.state == DLP_CUGRAPH_READY, failed += p->g_bwd[i].slot.state == DLP_CUGRAPH_FAILED;
    json_object_set_new(o, "graphs_captured", json_integer(ready));
    json_object_set_new(o, "graphs_failed", json_integer(failed));
    json_t *algos = json_array();
    for (int i = 0; i < p->cache.n; i++) {
        char ks[160];
        dlp_cuda_conv_key_str(&p->cache.rows[i].key, ks, sizeof ks);
        json_t *r = json_object();
        json_object_set_new(r, "conv", json_string(ks));
        json_object_set_new(r, "algo", json_integer(p->cache.rows[i].algo));
        json_object_set_new(r, "workspace_bytes", json_integer(p->cache.rows[i].workspace_bytes));
        json_object_set_new(r, "find_ms", json_real(p->cache.rows[i].ms));
        json_array_append_new(algos, r);
    }
    json_object_set_new(o, "algorithms", algos);
    return o;
}

const dlp_backend_ops dlp_backend_cuda = {
    .name = "cuda",
    .summary = "NVIDIA GPU: cuDNN 9 + cuBLAS + own kernels, NHWC fp16/bf16/fp32, CUDA graphs",
    .available = cuda_available,
    .plan_create = plan_create,
    .plan_free = plan_free,
    .input_format = input_format,
    .set_params = cu_set_params,
    .get_params = cu_get_params,
    .get_grads = cu_get_grads,
    .set_momentum = cu_set_momentum,
    .get_momentum = cu_get_momentum,
    .grad_buffer = cu_grad_buffer,
    .set_input = cu_set_input,
    .forward = cu_forward,
    .get_output = cu_get_output,
    .loss = cu_loss,
    .backward = cu_backward,
    .get_input_grad = cu_get_input_grad,
    .update = cu_update,
    .sync = cu_sync,
    .measure_peak = cu_measure_peak,
    .input_stats = cu_input_stats,
};
