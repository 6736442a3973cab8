// backend/cuda/cuda_build: plans — device query, algorithm choice, tensors and parameters, BN and conv setup,
// the inference fusions, plan creation and freeing, the input format.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_impl.h"
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
cudaError_t cu_xfer(cu_plan *p, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
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
dlp_status cu_available(char *why, size_t why_len) {
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

// The first usable entry (status SUCCESS, workspace within limit) of a cuDNN perf list; -1 if none.
#define PICK_FIRST(perf, n, limit, timed, out_algo, out_mem, out_ms, out_math) \
    do { \
        for (int i_ = 0; i_ < (n) && (out_algo) < 0; i_++) \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].memory <= (limit)) \
                (out_algo) = (int)(perf)[i_].algo, (out_mem) = (perf)[i_].memory, \
                (out_ms) = (timed) ? (perf)[i_].time : 0, (out_math) = (perf)[i_].mathType; \
    } while (0)

// What one direction's search found.
typedef struct algo_pick {
    int algo;
    size_t mem;
    float ms;
    cudnnMathType_t math;
    int timed;  // 1: Find timed it; 0: the heuristic ranked it
} algo_pick;

// The buffers a search runs on: the plan's own (random contents), so Find times what the step will do.
typedef struct algo_bufs {
    void *x, *y, *dx, *dy, *w, *dw, *ws;
    size_t ws_bytes, limit;
} algo_bufs;

// Find (timed on the plan's buffers) unless DLPERF_CUDA_FIND=0, then cuDNN's heuristic where Find failed or none of
// what it found fits: a Find that cuDNN refuses, or whose algorithms all fail or need too much workspace, is not
// the last word.
static dlp_status search_fwd(cu_plan *p, cu_op *op, const algo_bufs *b, int find, algo_pick *k) {
    enum { MAXA = 16 };
    cudnnConvolutionFwdAlgoPerf_t perf[MAXA];
    cudnnConvolutionDescriptor_t cd = op->cd[DLP_CUCONV_FWD];
    int n = 0;
    if (find) {
        cudnnStatus_t fs = cudnnFindConvolutionForwardAlgorithmEx(p->dnn, op->xd, b->x, op->wd, b->w, cd, op->yd, b->y,
                                                                  MAXA, &n, perf, b->ws, b->ws_bytes);
        if (fs == CUDNN_STATUS_SUCCESS) PICK_FIRST(perf, n, b->limit, 1, k->algo, k->mem, k->ms, k->math);
        else DLP_DEBUG("cuda: cudnnFindConvolutionForwardAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
        if (k->algo >= 0) k->timed = 1;
        else if (fs == CUDNN_STATUS_SUCCESS) DLP_DEBUG("cuda: Find gave %d forward algorithms, none usable; using the heuristic", n);
    }
    if (k->algo < 0) {
        DLP_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(p->dnn, op->xd, op->wd, cd, op->yd, MAXA, &n, perf));
        PICK_FIRST(perf, n, b->limit, 0, k->algo, k->mem, k->ms, k->math);
    }
    return DLP_OK;
}

static dlp_status search_bwd_data(cu_plan *p, cu_op *op, const algo_bufs *b, int find, algo_pick *k) {
    enum { MAXA = 16 };
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAXA];
    cudnnConvolutionDescriptor_t cd = op->cd[DLP_CUCONV_BWD_DATA];
    int n = 0;
    if (find) {
        cudnnStatus_t fs = cudnnFindConvolutionBackwardDataAlgorithmEx(p->dnn, op->wd, b->w, op->yd, b->dy, cd, op->xd,
                                                                       b->dx, MAXA, &n, perf, b->ws, b->ws_bytes);
        if (fs == CUDNN_STATUS_SUCCESS) PICK_FIRST(perf, n, b->limit, 1, k->algo, k->mem, k->ms, k->math);
        else DLP_DEBUG("cuda: cudnnFindConvolutionBackwardDataAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
        if (k->algo >= 0) k->timed = 1;
        else if (fs == CUDNN_STATUS_SUCCESS) DLP_DEBUG("cuda: Find gave %d data-gradient algorithms, none usable; using the heuristic", n);
    }
    if (k->algo < 0) {
        DLP_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(p->dnn, op->wd, op->yd, cd, op->xd, MAXA, &n, perf));
        PICK_FIRST(perf, n, b->limit, 0, k->algo, k->mem, k->ms, k->math);
    }
    return DLP_OK;
}

static dlp_status search_bwd_filter(cu_plan *p, cu_op *op, const algo_bufs *b, int find, algo_pick *k) {
    enum { MAXA = 16 };
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAXA];
    cudnnConvolutionDescriptor_t cd = op->cd[DLP_CUCONV_BWD_FILTER];
    int n = 0;
    if (find) {
        cudnnStatus_t fs = cudnnFindConvolutionBackwardFilterAlgorithmEx(p->dnn, op->xd, b->x, op->yd, b->dy, cd, op->wd,
                                                                         b->dw, MAXA, &n, perf, b->ws, b->ws_bytes);
        if (fs == CUDNN_STATUS_SUCCESS) PICK_FIRST(perf, n, b->limit, 1, k->algo, k->mem, k->ms, k->math);
        else DLP_DEBUG("cuda: cudnnFindConvolutionBackwardFilterAlgorithmEx: %s; using the heuristic", cudnnGetErrorString(fs));
        if (k->algo >= 0) k->timed = 1;
        else if (fs == CUDNN_STATUS_SUCCESS) DLP_DEBUG("cuda: Find gave %d weight-gradient algorithms, none usable; using the heuristic", n);
    }
    if (k->algo < 0) {
        cudnnStatus_t hs = cudnnGetConvolutionBackwardFilterAlgorithm_v7(p->dnn, op->xd, op->yd, cd, op->wd, MAXA, &n, perf);
        if (hs == CUDNN_STATUS_SUCCESS) PICK_FIRST(perf, n, b->limit, 0, k->algo, k->mem, k->ms, k->math);
        else DLP_DEBUG("cuda: cudnnGetConvolutionBackwardFilterAlgorithm_v7: %s", cudnnGetErrorString(hs));
    }
    return DLP_OK;  // none: the caller falls back to dlp_cuk_conv_wgrad
}

// Picks the algorithm for one direction of one convolution: cached by shape, else searched (search_*). Stays within
// the workspace limit. A weight gradient cuDNN has no algorithm for is computed by our direct kernel (a warning
// says so: it is much slower); a missing forward or data-gradient algorithm is an error.
static dlp_status choose_algo(cu_plan *p, cu_op *op, int dir, void *find_ws, size_t find_ws_bytes) {
    dlp_cuda_conv_key key;
    conv_key(p, op, dir, &key);
    char ks[160];
    dlp_cuda_conv_key_str(&key, ks, sizeof ks);
    const dlp_cuda_algo_row *row;
    if (dlp_cuda_algo_cache_find(&p->cache, &key, &row)) {
        op->algo[dir] = row->algo;
        op->ws[dir] = (size_t)row->workspace_bytes;
        if (p->dt != DLP_DTYPE_F32 || p->cfg.tf32)
            DLP_CUDNN(cudnnSetConvolutionMathType(op->cd[dir], (cudnnMathType_t)row->math_type));
        DLP_DEBUG("cuda: %s: algo %d (from the cache), %.1f MiB workspace", ks, row->algo, row->workspace_bytes / 1048576.0);
        return DLP_OK;
    }
    const cu_tensor *tx = &p->t[op->o.in], *ty = &p->t[op->o.out];  // out: the conv's own output, or (inference)
                                                                       // the fused op's, of the same shape
    algo_bufs b = {.x = tx->data, .y = ty->data, .dx = tx->grad ? tx->grad : tx->data,
                   .dy = ty->grad ? ty->grad : ty->data, .w = (char *)p->wc + op->w_coff * p->esz,
                   .ws = find_ws, .ws_bytes = find_ws_bytes, .limit = find_ws_bytes};
    b.dw = p->gc ? (char *)p->gc + op->w_coff * p->esz : b.w;
    const int find = env_int("DLPERF_CUDA_FIND", 1);
    algo_pick k = {.algo = -1, .math = plan_math(p)};
    if (dir == DLP_CUCONV_FWD) DLP_CHECK(search_fwd(p, op, &b, find, &k));
    else if (dir == DLP_CUCONV_BWD_DATA) DLP_CHECK(search_bwd_data(p, op, &b, find, &k));
    else DLP_CHECK(search_bwd_filter(p, op, &b, find, &k));
    if (k.algo < 0 && dir == DLP_CUCONV_BWD_FILTER) {
        DLP_WARN("cuda: cuDNN offers no weight-gradient algorithm for %s (layer %s) within %.0f MiB of workspace; "
                 "dlperf's direct kernel computes it (correct, but slower)",
                 ks, p->net.layers[op->o.layer].name, b.limit / 1048576.0);
        op->algo[dir] = CU_ALGO_OWN_WGRAD;
        op->ws[dir] = 0;
        return DLP_OK;  // not cached: the next plan asks cuDNN again
    }
    if (k.algo < 0)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuDNN offers no algorithm for %s (layer %s) within %.0f MiB of workspace",
                       ks, p->net.layers[op->o.layer].name, b.limit / 1048576.0);
    // Keep the math mode the algorithm was measured with (fp32 without TF32 stays FMA-only).
    if (p->dt != DLP_DTYPE_F32 || p->cfg.tf32) DLP_CUDNN(cudnnSetConvolutionMathType(op->cd[dir], k.math));
    op->algo[dir] = k.algo;
    op->ws[dir] = k.mem;
    DLP_DEBUG("cuda: %s: algo %d (%s), math %d, %.1f MiB workspace, %.3f ms", ks, k.algo,
              k.timed ? "found" : "heuristic", (int)k.math, k.mem / 1048576.0, k.ms);
    return dlp_cuda_algo_cache_put(&p->cache, &key, k.algo, (int)k.math, (int64_t)k.mem, k.ms);
}

// ---- plan construction ----------------------------------------------------------------------------------------

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

// Training plans: the fp32 accumulator of the direct weight-gradient kernel (convs cuDNN has no backward-filter
// algorithm for), and get_input_grad's snapshot of the deferred convs' weights and loss scale (cuda.c).
static dlp_status setup_train_extras(cu_plan *p) {
    if (!p->train) return DLP_OK;
    int64_t acc = 0, snap = 0;
    p->in_snap_off = malloc((size_t)(p->ol.nops ? p->ol.nops : 1) * sizeof *p->in_snap_off);
    DLP_TRY_ALLOC(p->in_snap_off);
    for (int j = 0; j < p->ol.nops; j++) {
        const cu_op *op = &p->ops[j];
        p->in_snap_off[j] = -1;
        if (op->o.kind != DLP_CUOP_CONV) continue;
        const dlp_layer *L = &p->net.layers[op->o.layer];
        const int64_t welems = (int64_t)L->c * p->net.layers[L->in0].c * L->k * L->k;
        if (op->algo[DLP_CUCONV_BWD_FILTER] == CU_ALGO_OWN_WGRAD && welems > acc) acc = welems;
        if (op->o.in == 0) {
            p->in_snap_off[j] = snap;
            snap += welems;
        }
    }
    if (acc > 0) DLP_CHECK(dalloc(p, (size_t)acc * sizeof(float), (void **)&p->wgrad_acc));
    if (snap > 0) DLP_CHECK(dalloc(p, (size_t)snap * p->esz, &p->in_snap_w));
    DLP_CHECK(dalloc(p, sizeof(float), (void **)&p->in_snap_scale));
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
        cudaError_t e = cu_xfer(p, p->nodecay, nd, (size_t)p->P, cudaMemcpyHostToDevice);
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
        cudaError_t e = cu_xfer(p, p->all_segs_d, hs, (size_t)p->all[0].nsegs * sizeof *hs, cudaMemcpyHostToDevice);
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
        cudaError_t e = cu_xfer(p, p->bucket_segs_d[b], hs, (size_t)bk->nsegs * sizeof *hs, cudaMemcpyHostToDevice);
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
        DLP_DEBUG("cuda: BN %s: cuDNN BN-Ex (ops %d, NaN mode %d)", p->net.layers[op->o.layer].name, (int)op->bnops,
                  op->act);
    } else {
        p->n_own_bn++;
        DLP_DEBUG("cuda: BN %s: our kernels", p->net.layers[op->o.layer].name);
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

// As ref (and PyTorch): training batch statistics of a single value are refused.
static dlp_status check_bn_values(const cu_plan *p) {
    if (!p->train) return DLP_OK;
    for (int l = 0; l < p->net.nlayers; l++) {
        const dlp_layer *L = &p->net.layers[l];
        if (L->kind == DLP_LAYER_BN && (int64_t)p->N * L->h * L->w < 2)
            return DLP_ERR(DLP_ERR_INVALID, "cuda: %s: training batch norm needs more than one value per channel "
                           "(batch %d, %dx%d); use a larger batch or input", L->name, p->N, L->h, L->w);
    }
    return DLP_OK;
}

// The device, streams, cuDNN handle, activation descriptors and events of a plan.
static dlp_status setup_handles(cu_plan *p) {
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaDeviceGetAttribute(&p->sms, cudaDevAttrMultiProcessorCount, p->dev));
    DLP_CU(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    DLP_CU(cudaStreamCreateWithFlags(&p->copy_stream, cudaStreamNonBlocking));
    DLP_CUDNN(cudnnCreate(&p->dnn));
    DLP_CUDNN(cudnnSetStream(p->dnn, p->stream));
    for (int i = 0; i < 2; i++) {
        cudnnNanPropagation_t nan = i ? CUDNN_PROPAGATE_NAN : CUDNN_NOT_PROPAGATE_NAN;
        DLP_CUDNN(cudnnCreateActivationDescriptor(&p->relu_act[i]));
        DLP_CUDNN(cudnnSetActivationDescriptor(p->relu_act[i], CUDNN_ACTIVATION_RELU, nan, 0.0));
        DLP_CUDNN(cudnnCreateActivationDescriptor(&p->ident_act[i]));
        DLP_CUDNN(cudnnSetActivationDescriptor(p->ident_act[i], CUDNN_ACTIVATION_IDENTITY, nan, 0.0));
    }
    for (int i = 0; i < 2; i++) {
        DLP_CU(cudaEventCreate(&p->ev_cstart[i]));
        DLP_CU(cudaEventCreate(&p->ev_cdone[i]));
        DLP_CU(cudaEventCreate(&p->ev_ready[i]));
        DLP_CU(cudaEventCreateWithFlags(&p->ev_free[i], cudaEventDisableTiming));
    }
    DLP_CU(cudaEventCreateWithFlags(&p->upd_evt, cudaEventDisableTiming));
    return DLP_OK;
}

// Scratch: BN partial sums and per-channel vectors, the residual-gradient buffer, loss and update state.
static dlp_status setup_scratch(cu_plan *p) {
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
    DLP_CHECK(dalloc(p, (size_t)maxpart * 4, (void **)&p->bn_part));
    DLP_CHECK(dalloc(p, (size_t)maxc * 4, (void **)&p->bn_scale));
    DLP_CHECK(dalloc(p, (size_t)maxc * 4, (void **)&p->bn_shift));
    DLP_CHECK(dalloc(p, (size_t)maxc * 3 * 4, (void **)&p->bn_coef));
    // dz_tmp: residual gradients cuDNN cannot add in place (training); the loss's dlogits (inference plans).
    {
        int lo = dlp_net_output(&p->net);
        size_t need = p->train ? (size_t)maxt : (size_t)(p->N * layer_numel(p, lo)) * 4;
        DLP_CHECK(dalloc(p, need, &p->dz_tmp));
    }
    DLP_CHECK(dalloc(p, sizeof(float), (void **)&p->scale_d));
    DLP_CHECK(dalloc(p, sizeof(int32_t), (void **)&p->good_d));
    DLP_CHECK(dalloc(p, sizeof(int32_t), (void **)&p->found_inf_d));
    {
        float s0 = p->loss_scaling ? (float)env_int("DLPERF_CUDA_LOSS_SCALE", 1024) : 1.0f;
        DLP_CU(cu_xfer(p, p->scale_d, &s0, sizeof s0, cudaMemcpyHostToDevice));
    }
    DLP_CHECK(dalloc(p, (size_t)p->N * 4, (void **)&p->labels_d));
    DLP_CHECK(dalloc(p, (size_t)p->N * 4, (void **)&p->sample_loss));
    DLP_CHECK(dalloc(p, (size_t)p->N * 4, (void **)&p->flags_d));
    DLP_CHECK(dalloc(p, sizeof(dlp_cuk_loss_args), (void **)&p->largs_d));
    DLP_CHECK(dalloc(p, sizeof(dlp_cuk_loss_out), (void **)&p->lout_d));
    DLP_CHECK(dalloc(p, sizeof(dlp_cuk_sgd_args), (void **)&p->sargs_d));
    DLP_CU(cudaHostAlloc((void **)&p->labels_h, (size_t)p->N * 4, 0));
    DLP_CU(cudaHostAlloc((void **)&p->largs_h, sizeof *p->largs_h, 0));
    DLP_CU(cudaHostAlloc((void **)&p->lout_h, sizeof *p->lout_h, 0));
    DLP_CU(cudaHostAlloc((void **)&p->sargs_h, sizeof *p->sargs_h, 0));
    return DLP_OK;
}

// Ops: convolution descriptors, FC and maxpool state, cuBLAS where there is an FC layer.
static dlp_status setup_ops(cu_plan *p) {
    p->ops = calloc((size_t)(p->ol.nops ? p->ol.nops : 1), sizeof *p->ops);
    if (!p->ops) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    int has_fc = 0;
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        op->o = p->ol.ops[j];
        if (op->o.kind == DLP_CUOP_CONV) DLP_CHECK(setup_conv(p, op));
        if (op->o.kind == DLP_CUOP_FC) {
            has_fc = 1;
            const dlp_param *wp = param_of(p, op->o.layer, 0), *bp = param_of(p, op->o.layer, 1);
            op->w_coff = p->coff[wp - p->net.params];
            op->w_off = wp->offset;
            op->b_off = bp->offset;
        }
        if (op->o.kind == DLP_CUOP_MAXPOOL && p->train) {
            const dlp_layer *L = &p->net.layers[op->o.layer];
            if (L->k > 15) return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: maxpool kernel %d > 15 in a training plan", L->k);
            DLP_CHECK(dalloc(p, (size_t)(p->t[op->o.out].rows * p->t[op->o.out].c), (void **)&op->idx));
        }
    }
    if (has_fc) {
        DLP_CHECK(dlp_cublas_load(&p->bl));
        cublasStatus_t bs = p->bl->create(&p->blas);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            p->blas = NULL;
            return dlp_cublas_fail(bs, __FILE__, __LINE__, "cublasCreate");
        }
        const size_t blas_ws = 32u << 20;  // our own workspace: cuBLAS must not allocate during graph capture
        DLP_CHECK(dalloc(p, blas_ws, &p->blas_ws));
        bs = p->bl->set_stream(p->blas, p->stream);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = p->bl->set_workspace(p->blas, p->blas_ws, blas_ws);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = p->bl->set_math_mode(p->blas, CUBLAS_DEFAULT_MATH);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            return dlp_cublas_fail(bs, __FILE__, __LINE__, "cublasSetStream/Workspace/MathMode");
        }
    }
    return DLP_OK;
}

// Random contents for every tensor and weight copy: cudnnFind times the algorithms on these buffers (never on
// zeros, which some kernels take short cuts on).
static dlp_status fill_for_search(cu_plan *p) {
    for (int l = 0; l < p->net.nlayers; l++) {
        cu_tensor *t = &p->t[l];
        if (!p->ol.kept[l]) continue;
        int64_t n = p->N * layer_numel(p, l);
        int dt = t->f32 ? DLP_DTYPE_F32 : p->dt;
        DLP_CU(dlp_cuk_fill_uniform(t->data, dt, n, 0x5eed + (uint64_t)l, -1.f, 1.f, p->stream));
        if (l == 0) DLP_CU(dlp_cuk_fill_uniform(p->in_d[1], dt, n, 0x5eed, -1.f, 1.f, p->stream));
        if (t->grad) DLP_CU(dlp_cuk_fill_uniform(t->grad, dt, n, 0x9a4d + (uint64_t)l, -1.f, 1.f, p->stream));
    }
    DLP_CU(dlp_cuk_fill_uniform(p->wc, p->dt, p->ncopy, 0x3e1, -0.05f, 0.05f, p->stream));
    return DLP_OK;
}

// Every convolution's algorithms (choose_algo), searched with a scratch workspace of up to DLPERF_CUDA_WS_MB or a
// quarter of the free memory; with DLPERF_CUDA_ALGO_CACHE, rows loaded from and new ones saved to that file.
static dlp_status choose_algorithms_ws(cu_plan *p, void *find_ws, size_t find_ws_bytes) {
    const char *cache_path = getenv("DLPERF_CUDA_ALGO_CACHE");
    char cache_hdr[384] = "";
    int cache_rows = 0;
    if (cache_path && *cache_path) {
        struct cudaDeviceProp pr;
        DLP_CU(cudaGetDeviceProperties(&pr, p->dev));
        snprintf(cache_hdr, sizeof cache_hdr, "dlperf-cuda-algos/1 cudnn %zu gpu %s cc %d.%d", cudnnGetVersion(),
                 pr.name, pr.major, pr.minor);
        DLP_CHECK(dlp_cuda_algo_cache_load(&p->cache, cache_path, cache_hdr, &cache_rows));
        DLP_DEBUG("cuda: %d algorithm rows from %s", cache_rows, cache_path);
    }
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind != DLP_CUOP_CONV) continue;
        DLP_CHECK(choose_algo(p, op, DLP_CUCONV_FWD, find_ws, find_ws_bytes));
        if (p->train) {
            if (op->o.in == 0) {  // only for get_input_grad: a refusal makes that unavailable, not the plan
                op->algo[DLP_CUCONV_BWD_DATA] = -1;
                if (choose_algo(p, op, DLP_CUCONV_BWD_DATA, find_ws, find_ws_bytes) != DLP_OK) {
                    DLP_DEBUG("cuda: no data-gradient algorithm for %s: %s", p->net.layers[op->o.layer].name, dlp_err_msg());
                    op->algo[DLP_CUCONV_BWD_DATA] = -1;
                    dlp_err_clear();
                }
            } else {
                DLP_CHECK(choose_algo(p, op, DLP_CUCONV_BWD_DATA, find_ws, find_ws_bytes));
            }
            DLP_CHECK(choose_algo(p, op, DLP_CUCONV_BWD_FILTER, find_ws, find_ws_bytes));
        }
    }
    if (cache_hdr[0] && p->cache.n > cache_rows) {
        dlp_status cs = dlp_cuda_algo_cache_save(&p->cache, cache_path, cache_hdr);
        if (cs != DLP_OK) {  // a cache that cannot be written costs time, not correctness
            DLP_WARN("cuda: cannot save the algorithm cache: %s", dlp_err_msg());
            dlp_err_clear();
        }
    }
    return DLP_OK;
}

static dlp_status choose_algorithms(cu_plan *p) {
    size_t fr = 0, tot = 0;
    DLP_CU(cudaMemGetInfo(&fr, &tot));
    size_t find_ws_bytes = ws_limit_bytes();
    if (find_ws_bytes > fr / 4) find_ws_bytes = fr / 4;
    void *find_ws = NULL;
    DLP_CU(cudaMalloc(&find_ws, find_ws_bytes));
    dlp_status st = choose_algorithms_ws(p, find_ws, find_ws_bytes);
    cudaFree(find_ws);
    return st;
}

// BN ops (BN-Ex trials), the inference plan's fused convolutions, then the one workspace every op shares (the
// largest any of them needs).
static dlp_status setup_fusions_and_workspace(cu_plan *p) {
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind == DLP_CUOP_BN) DLP_CHECK(setup_bn(p, op));
        if (op->o.kind == DLP_CUOP_CONV && !p->train) DLP_CHECK(setup_conv_infer(p, op));
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
    return dalloc(p, ws, &p->ws);
}

dlp_status cu_plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
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
    DLP_CHECK_GOTO(st, dlp_net_copy(&p->net, net), fail);
    DLP_CHECK_GOTO(st, check_bn_values(p), fail);
    DLP_CHECK_GOTO(st, dlp_cuda_ops_plan(&p->net, p->train, env_int("DLPERF_CUDA_FUSE", 1), &p->ol), fail);
    DLP_CHECK_GOTO(st, setup_handles(p), fail);
    DLP_CHECK_GOTO(st, setup_tensors(p), fail);
    DLP_CHECK_GOTO(st, setup_params(p), fail);
    DLP_CHECK_GOTO(st, setup_scratch(p), fail);
    // Ops: descriptors, then random contents, then algorithms and fusion trials on those buffers.
    DLP_CHECK_GOTO(st, setup_ops(p), fail);
    DLP_CHECK_GOTO(st, fill_for_search(p), fail);
    DLP_CHECK_GOTO(st, choose_algorithms(p), fail);
    DLP_CHECK_GOTO(st, setup_train_extras(p), fail);
    DLP_CHECK_GOTO(st, setup_fusions_and_workspace(p), fail);
    DLP_CU_GOTO(st, cudaStreamSynchronize(p->stream), fail);
    p->plan_ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    DLP_INFO("cuda: plan %s batch %d %s%s: %d ops (%d BN on cuDNN BN-Ex, %d on our kernels; %d fused convs), "
             "%d conv shapes searched, %.0f MiB workspace, %.0f MiB on the device, %.0f ms",
             p->net.arch, p->N, dlp_dtype_name(p->dt), p->train ? " training" : " inference", p->ol.nops,
             p->n_cudnn_bn, p->n_own_bn, p->n_fused_conv, p->cache.n, p->ws_bytes / 1048576.0, p->dev_bytes / 1048576.0,
             p->plan_ms);
    *out = &p->base;
    return DLP_OK;
fail:
    (void)cudaGetLastError();
    cu_plan_free(&p->base);
    return st;
}

void cu_plan_free(dlp_plan *pl) {
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
    free(p->in_snap_off);
    free(p->t);
    dlp_cuda_ops_free(&p->ol);
    dlp_cuda_algo_cache_free(&p->cache);
    dlp_net_free(&p->net);
    free(p);
}

void cu_input_format(const dlp_plan *pl, dlp_layout *layout, dlp_dtype *dtype) {
    const cu_plan *p = (const cu_plan *)pl;
    *layout = DLP_LAYOUT_NHWC;
    *dtype = p->dt;
}

