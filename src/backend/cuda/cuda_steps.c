// backend/cuda/cuda_steps: a step's phases on the plan's stream — forward, loss, backward segments (buckets
// announced as they finish), update — each captured into a CUDA graph after warm-up and replayed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_impl.h"
// ---- graphs ----------------------------------------------------------------------------------------------------

dlp_status cu_run_phase(cu_plan *p, cu_graph *g, enq_fn fn, int arg, const char *what) {
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
    // The call that broke the capture is logged (a warning for the first few, debug for every one) and counted
    // (graph_captures_failed, the first reason in graph_capture_failure: dlp_cuda_plan_describe).
    char why[512] = "";
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(p->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        snprintf(why, sizeof why, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
    } else {
        dlp_status st = fn(p, arg);
        if (st != DLP_OK) snprintf(why, sizeof why, "%s", dlp_err_msg());  // names the call (DLP_CU/DLP_CUDNN)
        e = cudaStreamEndCapture(p->stream, &graph);
        if (e != cudaSuccess && !why[0]) snprintf(why, sizeof why, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
        if (st == DLP_OK && e == cudaSuccess) {
            e = cudaGraphInstantiate(&g->exec, graph, 0);
            if (e != cudaSuccess) snprintf(why, sizeof why, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
        }
        if (st != DLP_OK && e == cudaSuccess) e = cudaErrorStreamCaptureInvalidated;
    }
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        dlp_err_clear();
        g->exec = NULL;
        dlp_cugraph_done(&g->slot, a, 0);
        if (p->graph_captures_failed++ == 0)
            snprintf(p->graph_fail_why, sizeof p->graph_fail_why, "%s phase: %s", what, why);
        DLP_DEBUG("cuda: capture %d of the %s phase into a CUDA graph failed: %s", p->graph_captures_failed, what, why);
        dlp_log_warn_limited("cuda-graph", 4, "cuda: could not capture the %s phase into a CUDA graph (%s); it runs "
                             "eagerly", what, why);
        return fn(p, arg);
    }
    dlp_cugraph_done(&g->slot, a, 1);
    DLP_DEBUG("cuda: captured the %s phase (arg %d) into a CUDA graph", what, arg);
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

dlp_status cu_enq_forward(cu_plan *p, int pass) {
    for (int j = 0; j < p->ol.nops; j++) {
        cu_op *op = &p->ops[j];
        if (op->o.kind == DLP_CUOP_BN && pass == DLP_PASS_TRAIN && op->bn_cudnn) DLP_CHECK(bn_forward_cudnn(p, op));
        else DLP_CHECK(op_forward(p, op, (dlp_pass)pass));
    }
    return DLP_OK;
}

// ---- loss ----------------------------------------------------------------------------------------------------
dlp_status cu_enq_loss(cu_plan *p, int arg) {
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
dlp_status cu_conv_bwd_data(cu_plan *p, const cu_op *op, const void *w, int acc) {
    const cu_tensor *x = &p->t[op->o.in], *y = &p->t[op->o.out];
    DLP_CUDNN(cudnnConvolutionBackwardData(p->dnn, &k_one, op->wd, w, op->yd, y->grad,
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
        if (op->algo[DLP_CUCONV_BWD_FILTER] == CU_ALGO_OWN_WGRAD) {  // cuDNN has no algorithm for this shape
            const int K = y->c, C = x->c, R = L->k;
            DLP_CU(dlp_cuk_conv_wgrad(x->data, y->grad, p->dt, p->N, x->h, x->w, C, K, R, R, L->stride, L->pad, y->h,
                                      y->w, p->wgrad_acc, s));
            DLP_CU(dlp_cuk_cast(p->wgrad_acc, DLP_DTYPE_F32, (char *)p->gc + op->w_coff * p->esz, p->dt,
                                (int64_t)K * R * R * C, 1.f, NULL, s));
        } else {
            DLP_CUDNN(cudnnConvolutionBackwardFilter(p->dnn, &k_one, op->xd, x->data, op->yd, y->grad,
                                                     op->cd[DLP_CUCONV_BWD_FILTER], op->algo[DLP_CUCONV_BWD_FILTER],
                                                     p->ws, p->ws_bytes, &k_zero, op->wd,
                                                     (char *)p->gc + op->w_coff * p->esz));
        }
        if (dx) DLP_CHECK(cu_conv_bwd_data(p, op, (char *)p->wc + op->w_coff * p->esz, op->o.acc_in));
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

dlp_status cu_run_backward(cu_plan *p, int eager) {
    for (int si = 0; si < p->nbsegs; si++) {
        if (eager) DLP_CHECK(enq_bwd_segment(p, si));
        else DLP_CHECK(cu_run_phase(p, &p->g_bwd[2 * si + p->slot], enq_bwd_segment, si, "backward"));
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
dlp_status cu_enq_update(cu_plan *p, int arg) {
    (void)arg;
    if (!p->all) return DLP_OK;
    DLP_CU(cudaMemcpyAsync(p->sargs_d, p->sargs_h, sizeof *p->sargs_h, cudaMemcpyHostToDevice, p->stream));
    DLP_CU(dlp_cuk_sgd(p->all_segs_d, p->all[0].nsegs, p->w32, p->wc, p->dt, p->v32, p->g32, p->nodecay, p->sargs_d,
                       p->loss_scaling ? p->found_inf_d : NULL, p->stream));
    if (p->loss_scaling) DLP_CU(dlp_cuk_scaler_update(p->scale_d, p->good_d, p->found_inf_d, 2000, p->stream));
    return DLP_OK;
}

