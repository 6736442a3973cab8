// backend/cuda/cuda_kernels: the cuda backend's own kernels (cuda_kernels.cu), callable from C. Tensors are NHWC
// (rows = N*H*W, C channels innermost) in the compute type `dt` (a dlp_dtype: F32, BF16, F16); statistics, master
// weights, gradients and the loss are fp32. Each launcher enqueues on `s` and returns cudaGetLastError().
// Defines: dlp_cuk_* launchers, dlp_cuk_seg, dlp_cuk_sgd_args, dlp_cuk_loss_args, dlp_cuk_loss_out,
//          dlp_cuk_bn_blocks.
#ifndef DLP_BACKEND_CUDA_KERNELS_H
#define DLP_BACKEND_CUDA_KERNELS_H
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlp_cuk_seg {  // a stretch of the flat fp32 arrays (see dlp_cuda_seg in cuda_host.h)
    int64_t offset, count;
    int64_t coffset;         // in the compute-type arrays; -1: none
    int32_t half, copy;
} dlp_cuk_seg;

typedef struct dlp_cuk_sgd_args {  // read by the update kernel from device memory (so graphs can replay it)
    float lr, momentum, weight_decay;
    int32_t nesterov;
    int32_t decay_all;  // 1: decay every parameter; 0: skip those marked in the no-decay mask
    int32_t pad[3];
} dlp_cuk_sgd_args;

typedef struct dlp_cuk_loss_args {  // likewise for the loss
    int32_t n;          // valid samples (<= N); the rest are padding
    float smoothing;
    int32_t pad[2];
} dlp_cuk_loss_args;

typedef struct dlp_cuk_loss_out {
    double loss_sum;    // sum over the n valid samples
    int32_t top1, top5;
} dlp_cuk_loss_out;

// x = uniform[lo, hi) from a hash of (seed, index): plan-time contents for the algorithm search.
cudaError_t dlp_cuk_fill_uniform(void *x, int dt, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
// dst[i] = src[i] * scale * (scale_dev ? *scale_dev : 1) (types may differ; fp32 arithmetic, round to nearest).
cudaError_t dlp_cuk_cast(const void *src, int sdt, void *dst, int ddt, int64_t n, float scale, const float *scale_dev,
                         cudaStream_t s);

// acc (K, R, S, C) fp32 = the weight gradient of an NHWC convolution (no dilation, no groups) from x (N, H, W, C)
// and dy (N, OH, OW, K) in dt: a direct kernel for shapes cuDNN has no backward-filter algorithm for (it zeroes
// acc first; K*R*S*C floats).
cudaError_t dlp_cuk_conv_wgrad(const void *x, const void *dy, int dt, int N, int H, int W, int C, int K, int R, int S,
                               int stride, int pad, int OH, int OW, float *acc, cudaStream_t s);

// ---- batch norm (training statistics; NHWC) -----------------------------------------------------------------
// Partial sums per channel over blocks of rows; part holds 2 * blocks * C floats.
int dlp_cuk_bn_blocks(int64_t rows, int C, int sms);
cudaError_t dlp_cuk_bn_stats(const void *x, int dt, int64_t rows, int C, int sms, float *part, cudaStream_t s);
// Batch mean/variance from the partial sums; running stats updated (PyTorch: unbiased variance, momentum m);
// saves mean and 1/sqrt(var+eps) for backward; scale = gamma*invstd, shift = beta - mean*scale.
cudaError_t dlp_cuk_bn_finalize(const float *part, const void *x, int dt, int64_t rows, int C, int sms,
                                const float *gamma, const float *beta, float eps, float momentum, float *run_mean,
                                float *run_var, float *save_mean, float *save_invstd, float *scale, float *shift,
                                cudaStream_t s);
// Inference statistics: scale = gamma/sqrt(run_var+eps), shift = beta - run_mean*scale.
cudaError_t dlp_cuk_bn_eval_prepare(const float *gamma, const float *beta, const float *run_mean, const float *run_var,
                                    float eps, int C, float *scale, float *shift, cudaStream_t s);
// y = act(x*scale[c] + shift[c] + z) elementwise over rows*C; scale NULL = 1, shift NULL = 0, z NULL = none.
// Serves BN, a convolution's bias, ADD and ReLU.
cudaError_t dlp_cuk_apply(const void *x, const void *z, void *y, int dt, int64_t rows, int C, const float *scale,
                          const float *shift, int relu, cudaStream_t s);
// Backward statistics: per channel sum(g) and sum(g*(x-mean)), g = dy masked by y > 0 when relu.
cudaError_t dlp_cuk_bn_bwd_stats(const void *x, const void *dy, const void *y, int dt, int64_t rows, int C, int sms,
                                 int relu, const float *save_mean, float *part, cudaStream_t s);
// dgamma = sum(g*xhat), dbeta = sum(g) (written, not added); coef (3*C): dx = k1*g + k2*x + k3.
cudaError_t dlp_cuk_bn_bwd_finalize(const float *part, int64_t rows, int C, int sms, const float *gamma,
                                    const float *save_mean, const float *save_invstd, float *dgamma, float *dbeta,
                                    float *coef, cudaStream_t s);
// g = dy (masked by y > 0 when relu); dx = coef ? k1*g + k2*x + k3 : g; dz = g. dx/dz NULL: not wanted;
// acc_*: add to what is there. dx and dz may be the same buffer (x + x): dx is written first.
cudaError_t dlp_cuk_bwd_apply(const void *x, const void *dy, const void *y, int dt, int64_t rows, int C, int relu,
                              const float *coef, void *dx, int acc_dx, void *dz, int acc_dz, cudaStream_t s);

// ---- pooling ---------------------------------------------------------------------------------------------------
// Max over k x k windows (padding never wins, as PyTorch's -inf); idx (uint8 per output, may be NULL) keeps the
// first maximum's position in its window for backward.
cudaError_t dlp_cuk_maxpool_fwd(const void *x, int dt, int N, int H, int W, int C, int k, int stride, int pad, int OH,
                                int OW, void *y, uint8_t *idx, cudaStream_t s);
cudaError_t dlp_cuk_maxpool_bwd(const void *dy, const uint8_t *idx, int dt, int N, int H, int W, int C, int k,
                                int stride, int pad, int OH, int OW, void *dx, int acc, cudaStream_t s);
cudaError_t dlp_cuk_avgpool_fwd(const void *x, int dt, int N, int HW, int C, void *y, cudaStream_t s);
cudaError_t dlp_cuk_avgpool_bwd(const void *dy, int dt, int N, int HW, int C, void *dx, int acc, cudaStream_t s);

// ---- FC and loss --------------------------------------------------------------------------------------------
cudaError_t dlp_cuk_bias_rows(float *y, const float *bias, int N, int K, cudaStream_t s);  // y[n][k] += b[k]
cudaError_t dlp_cuk_bias_grad(const float *dy, int N, int K, float *db, cudaStream_t s);   // db[k] = sum_n dy[n][k]
// Softmax cross-entropy per sample (logits N x K fp32) with label smoothing; dlogits = (p - q) * S / n with S the
// loss scale; rows >= n are padding (zero gradient). dlogits_c (optional) gets a copy in the compute type.
cudaError_t dlp_cuk_softmax_xent(const float *logits, const int32_t *labels, int N, int K,
                                 const dlp_cuk_loss_args *args, const float *loss_scale, float *sample_loss,
                                 int32_t *sample_flags, float *dlogits, void *dlogits_c, int dt, cudaStream_t s);
cudaError_t dlp_cuk_loss_reduce(const float *sample_loss, const int32_t *sample_flags, int N,
                                const dlp_cuk_loss_args *args, dlp_cuk_loss_out *out, cudaStream_t s);

// ---- gradients and the update -------------------------------------------------------------------------------
// Over each segment: g32[i] = (half ? gc[coffset + i - offset] : g32[i]) / S; sets *found_inf (if given) on a
// non-finite value.
cudaError_t dlp_cuk_grad_finalize(const dlp_cuk_seg *segs, int nsegs, const void *gc, int dt, float *g32,
                                  const float *loss_scale, int32_t *found_inf, cudaStream_t s);
// SGD with momentum (PyTorch's form) on fp32 master weights over each segment, refreshing the compute-type copy
// (wc at coffset, for segments with copy) in the same pass; does nothing when found_inf is given and set (an
// fp16 step whose gradients overflowed is skipped).
cudaError_t dlp_cuk_sgd(const dlp_cuk_seg *segs, int nsegs, float *w, void *wc, int dt, float *v, const float *g,
                        const uint8_t *nodecay, const dlp_cuk_sgd_args *args, const int32_t *found_inf,
                        cudaStream_t s);
// w (fp32) -> its compute-type copies, over each segment with copy.
cudaError_t dlp_cuk_refresh_copies(const dlp_cuk_seg *segs, int nsegs, const float *w, void *wc, int dt,
                                   cudaStream_t s);
// Dynamic loss scaling (PyTorch's GradScaler): halve on overflow, double after `interval` good steps.
cudaError_t dlp_cuk_scaler_update(float *scale, int32_t *good_steps, const int32_t *found_inf, int interval,
                                  cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
