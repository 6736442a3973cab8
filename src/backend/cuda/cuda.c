// backend/cuda/cuda: the `cuda` backend — cuDNN 9 through its legacy C API (convolutions with algorithms found
// once per layer shape and cached, BN-Ex for fused BN + add + ReLU in NHWC fp16, conv + bias + add + ReLU for
// inference with BN folded into the weights), cuBLAS for the FC layer, and our kernels (cuda_kernels.cu) for the
// rest. Activations NHWC in fp16/bf16/fp32; master weights, BN statistics, gradients and the loss in fp32.
// Every phase of a step (forward per pass and input buffer, loss, backward segments, update) is captured into a
// CUDA graph after warm-up and replayed. Input batches are copied on their own stream into one of two device
// buffers, overlapping the previous step's compute; copy time and compute stall are measured with events.
// Why the legacy API: it is C (the graph API's frontend is C++), still complete in cuDNN 9, and it offers every
// op and fusion ResNet needs; the backend-descriptor C API is verbose and could not be debugged on a machine
// without a GPU. See docs/gpu.md.
// This file: the interface entries and the ops table; plans are built in cuda_build.c, steps enqueued in
// cuda_steps.c, shared types in cuda_impl.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_impl.h"
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
            cudaError_t e = cu_xfer(p, op->wfold, wh, (size_t)(K * inner) * p->esz, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) e = cu_xfer(p, op->bfold, bf, (size_t)K * 4, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) e = cu_xfer(p, op->bfold_c, bh, (size_t)K * p->esz, cudaMemcpyHostToDevice);
            if (e != cudaSuccess) st = dlp_cuda_fail(e, __FILE__, __LINE__, "cu_xfer(folded conv)");
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
        DLP_CU_GOTO(st, cu_xfer(p, p->w32, dev, (size_t)p->P * 4, cudaMemcpyHostToDevice), out);
        if (p->all)
            DLP_CU_GOTO(st, dlp_cuk_refresh_copies(p->all_segs_d, p->all[0].nsegs, p->w32, p->wc, p->dt, p->stream), out);
    }
    if (bufs && net->buf_count > 0)
        DLP_CU_GOTO(st, cu_xfer(p, p->bufs32, bufs, (size_t)net->buf_count * 4, cudaMemcpyHostToDevice), out);
    if (!p->train && (params || bufs)) {  // refold with whatever is now on the device
        if (!params && p->P > 0) DLP_CU_GOTO(st, cu_xfer(p, dev, p->w32, (size_t)p->P * 4, cudaMemcpyDeviceToHost), out);
        if (net->buf_count > 0) {
            if (bufs) memcpy(hb, bufs, (size_t)net->buf_count * 4);
            else DLP_CU_GOTO(st, cu_xfer(p, hb, p->bufs32, (size_t)net->buf_count * 4, cudaMemcpyDeviceToHost), out);
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
        DLP_CU(cu_xfer(p, out, src_dev, (size_t)n * 4, cudaMemcpyDeviceToHost));
        return DLP_OK;
    }
    float *tmp = malloc((size_t)n * 4);
    DLP_TRY_ALLOC(tmp);
    cudaError_t e = cu_xfer(p, tmp, src_dev, (size_t)n * 4, cudaMemcpyDeviceToHost);
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
    cudaError_t e = cu_xfer(p, p->v32, tmp, (size_t)p->P * 4, cudaMemcpyHostToDevice);
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
    p->have_fwd = 0;  // the output is of the next forward
    p->copy_pending = 1;
    p->in_count++;
    return DLP_OK;
}

static dlp_status forward_run(cu_plan *p, dlp_pass pass);

static dlp_status cu_forward(dlp_plan *pl, dlp_pass pass) {
    cu_plan *p = as_cu(pl);
    if (p->in_count == 0) return DLP_ERR(DLP_ERR_INVALID, "cuda: forward before set_input");
    return forward_run(p, pass);
}

// The forward pass on whatever the current input buffer holds (cu_measure_peak times it on the plan's random
// contents without a set_input).
static dlp_status forward_run(cu_plan *p, dlp_pass pass) {
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
    DLP_CHECK(cu_run_phase(p, &p->g_fwd[pass][slot], cu_enq_forward, pass, "forward"));
    DLP_CU(cudaEventRecord(p->ev_free[slot], p->stream));
    p->have_train_fwd = pass == DLP_PASS_TRAIN;
    p->have_fwd = 1;
    p->have_loss = 0;
    return DLP_OK;
}

static dlp_status cu_get_output(dlp_plan *pl, float *out) {
    cu_plan *p = as_cu(pl);
    if (!p->have_fwd) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_output before forward");
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CU(cudaStreamSynchronize(p->stream));
    int l = dlp_net_output(&p->net);
    const cu_tensor *t = &p->t[l];
    int n = p->n_in ? p->n_in : p->N;
    int64_t per = layer_numel(p, l);
    if (t->f32) {
        DLP_CU(cu_xfer(p, out, t->data, (size_t)(n * per) * 4, cudaMemcpyDeviceToHost));
        return DLP_OK;
    }
    size_t bytes = (size_t)(n * per) * p->esz;
    DLP_CHECK(ensure_stage(p, bytes));
    DLP_CU(cu_xfer(p, p->stage, t->data, bytes, cudaMemcpyDeviceToHost));
    dlp_cuda_nhwc_to_nchw(p->stage, n, t->c, (int64_t)t->h * t->w, p->dt, out);
    return DLP_OK;
}

static dlp_status cu_loss(dlp_plan *pl, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    cu_plan *p = as_cu(pl);
    if (!p->have_fwd) return DLP_ERR(DLP_ERR_INVALID, "cuda: loss before forward");
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
    DLP_CHECK(cu_run_phase(p, &p->g_loss[p->slot], cu_enq_loss, 0, "loss"));
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
        DLP_CHECK(cu_run_backward(p, 0));
    } else {
        int l = dlp_net_output(&p->net);
        cu_tensor *t = &p->t[l];
        int64_t n = p->N * layer_numel(p, l);
        DLP_CU(cudaStreamSynchronize(p->stream));
        if (t->f32) {
            DLP_CU(cu_xfer(p, t->grad, dy, (size_t)n * 4, cudaMemcpyHostToDevice));
            if (p->loss_scaling) DLP_CU(dlp_cuk_cast(t->grad, DLP_DTYPE_F32, t->grad, DLP_DTYPE_F32, n, 1.f, p->scale_d, p->stream));
            if (t->grad_c != t->grad) DLP_CU(dlp_cuk_cast(t->grad, DLP_DTYPE_F32, t->grad_c, p->dt, n, 1.f, NULL, p->stream));
        } else {
            DLP_CHECK(ensure_stage(p, (size_t)n * p->esz));
            dlp_cuda_nchw_to_nhwc(dy, p->N, t->c, (int64_t)t->h * t->w, p->dt, p->stage);
            DLP_CU(cu_xfer(p, t->grad, p->stage, (size_t)n * p->esz, cudaMemcpyHostToDevice));
            if (p->loss_scaling) DLP_CU(dlp_cuk_cast(t->grad, p->dt, t->grad, p->dt, n, 1.f, p->scale_d, p->stream));
        }
        DLP_CHECK(cu_run_backward(p, 1));
    }
    DLP_CU(cudaEventRecord(p->ev_free[p->slot], p->stream));
    p->have_bwd = 1;
    p->in_grad_ready = 0;  // a new input gradient to compute (get_input_grad), from the live weights
    p->in_snap_valid = 0;
    return DLP_OK;
}

// The deferred data gradients (convolutions reading the input: backward skips them, nothing but get_input_grad
// needs them) with the weights and loss scale of the last backward: the live ones, or update's snapshot of them.
static dlp_status compute_input_grad(cu_plan *p) {
    const int snap = p->in_snap_valid;
    for (int j = p->ol.nops - 1; j >= 0; j--) {  // backward's order: the first write overwrites, later ones add
        const cu_op *op = &p->ops[j];
        if (op->o.kind != DLP_CUOP_CONV || op->o.in != 0) continue;
        if (op->algo[DLP_CUCONV_BWD_DATA] < 0)
            return DLP_ERR(DLP_ERR_UNSUPPORTED, "cuda: cuDNN offers no data-gradient algorithm for %s's input",
                           p->net.layers[op->o.layer].name);
        const void *w = snap ? (const char *)p->in_snap_w + p->in_snap_off[j] * (int64_t)p->esz
                             : (const char *)p->wc + op->w_coff * (int64_t)p->esz;
        DLP_CHECK(cu_conv_bwd_data(p, op, w, op->o.acc_in_deferred));
    }
    float S = 1.f;
    if (p->loss_scaling)
        DLP_CU(cudaMemcpyAsync(&S, snap ? p->in_snap_scale : p->scale_d, sizeof S, cudaMemcpyDeviceToHost, p->stream));
    DLP_CU(cudaStreamSynchronize(p->stream));
    p->in_grad_scale = S;
    p->in_grad_ready = 1;
    return DLP_OK;
}

// fp32 NCHW dL/d(input) of the last backward: the same however often it is read, before or after update.
static dlp_status cu_get_input_grad(dlp_plan *pl, float *dx) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_input_grad on an inference plan");
    if (!p->have_bwd) return DLP_ERR(DLP_ERR_INVALID, "cuda: get_input_grad needs a backward first");
    DLP_CU(cudaSetDevice(p->dev));
    if (!p->in_grad_ready) DLP_CHECK(compute_input_grad(p));
    const cu_tensor *t = &p->t[0];
    int n = p->N;
    int64_t per = layer_numel(p, 0);
    size_t bytes = (size_t)(n * per) * p->esz;
    DLP_CHECK(ensure_stage(p, bytes));
    DLP_CU(cu_xfer(p, p->stage, t->grad, bytes, cudaMemcpyDeviceToHost));
    dlp_cuda_nhwc_to_nchw(p->stage, n, t->c, (int64_t)t->h * t->w, p->dt, dx);
    const float S = p->in_grad_scale;
    if (S != 1.f)
        for (int64_t i = 0; i < n * per; i++) dx[i] /= S;
    return DLP_OK;
}

// Before update changes them: a copy of what the deferred data gradients read (the input convolutions' compute-type
// weights, the loss scale), unless get_input_grad already used them or a copy of this backward's is there. Two small
// device copies per step.
static dlp_status snapshot_for_input_grad(cu_plan *p) {
    if (!p->have_bwd || p->in_grad_ready || p->in_snap_valid || !p->in_snap_off) return DLP_OK;
    for (int j = 0; j < p->ol.nops; j++) {
        const cu_op *op = &p->ops[j];
        if (p->in_snap_off[j] < 0) continue;
        const dlp_layer *L = &p->net.layers[op->o.layer];
        const size_t bytes = (size_t)L->c * p->net.layers[L->in0].c * L->k * L->k * p->esz;
        DLP_CU(cudaMemcpyAsync((char *)p->in_snap_w + p->in_snap_off[j] * (int64_t)p->esz,
                               (const char *)p->wc + op->w_coff * (int64_t)p->esz, bytes, cudaMemcpyDeviceToDevice,
                               p->stream));
    }
    DLP_CU(cudaMemcpyAsync(p->in_snap_scale, p->scale_d, sizeof(float), cudaMemcpyDeviceToDevice, p->stream));
    p->in_snap_valid = 1;
    return DLP_OK;
}

static dlp_status cu_update(dlp_plan *pl, const dlp_sgd *hp) {
    cu_plan *p = as_cu(pl);
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cuda: update on an inference plan");
    DLP_CU(cudaSetDevice(p->dev));
    DLP_CHECK(snapshot_for_input_grad(p));
    if (p->upd_pending) DLP_CU(cudaEventSynchronize(p->upd_evt));  // the previous update has read its arguments
    p->sargs_h->lr = hp->lr;
    p->sargs_h->momentum = hp->momentum;
    p->sargs_h->weight_decay = hp->weight_decay;
    p->sargs_h->nesterov = hp->nesterov;
    p->sargs_h->decay_all = hp->decay_no_decay_params;
    DLP_CHECK(cu_run_phase(p, &p->g_upd, cu_enq_update, 0, "update"));
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
    dlp_status st = cu_plan_create(&net, &cfg, &pl);
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
    for (int i = 0; i < 5; i++) DLP_CHECK_GOTO(st, forward_run(p, DLP_PASS_EVAL), out);
    DLP_CU_GOTO(st, cudaEventRecord(a, p->stream), out);
    for (int i = 0; i < iters; i++) DLP_CHECK_GOTO(st, forward_run(p, DLP_PASS_EVAL), out);
    DLP_CU_GOTO(st, cudaEventRecord(b, p->stream), out);
    DLP_CU_GOTO(st, cudaEventSynchronize(b), out);
    DLP_CU_GOTO(st, cudaEventElapsedTime(&ms, a, b), out);
    *gflops = flops * iters / (ms * 1e-3) / 1e9;
out:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    cu_plan_free(pl);
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
    json_object_set_new(o, "graph_captures_failed", json_integer(p->graph_captures_failed));
    if (p->graph_fail_why[0]) json_object_set_new(o, "graph_capture_failure", json_string(p->graph_fail_why));
    int own_wgrad = 0;
    for (int j = 0; j < p->ol.nops; j++)
        own_wgrad += p->ops[j].o.kind == DLP_CUOP_CONV && p->ops[j].algo[DLP_CUCONV_BWD_FILTER] == CU_ALGO_OWN_WGRAD;
    json_object_set_new(o, "conv_wgrad_own_kernel", json_integer(own_wgrad));
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
    .caps = {.kind = DLP_BACKEND_KIND_GPU, .default_precision = DLP_DTYPE_F16,
             .host_allocator = dlp_cuda_host_allocator},
    .available = cu_available,
    .plan_create = cu_plan_create,
    .plan_free = cu_plan_free,
    .input_format = cu_input_format,
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
    .stream = dlp_cuda_plan_stream,
    .measure_peak = cu_measure_peak,
    .input_stats = cu_input_stats,
};
