// backend/ref/ref: the reference backend — plain C loops over NCHW fp32 tensors, the yardstick every other backend
// is checked against. Sums (convolution, FC, BN statistics, pooling, loss) accumulate in double. OpenMP splits
// the outer loops over threads; each output element is written by one thread, so results do not depend on the
// thread count.
//
// Plan: one output buffer per layer (batch x c x h x w) and, for training plans, one gradient buffer per layer,
// the saved BN batch statistics, d(loss)/d(logits), the flat gradient and momentum arrays.
// Backward overwrites the gradients (no accumulation across steps) and also computes d(loss)/d(input).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_impl.h"
#include "core/alloc.h"
#include "core/clock.h"

extern const dlp_backend_ops dlp_backend_ref;

typedef struct ref_plan {
    dlp_plan base;
    dlp_net net;          // own copy
    int batch, train, nthreads;
    int n;                // samples in the current batch (set_input)
    int fwd_pass;         // -1: no forward since set_input; else the dlp_pass of the last forward
    int have_dlogits;     // loss() ran after the last forward
    float *params, *bufs; // (param_count), (buf_count)
    float *grads, *mom;   // (param_count): training plans only
    float **act;          // per layer: (batch, c, h, w)
    float **dact;         // per layer: (batch, c, h, w), training plans only
    double *bn_mean, *bn_invstd;  // saved batch statistics; per BN layer at bn_off[i]
    int64_t *bn_off;
    float *dlogits;       // (batch, classes)
    double *scratch;      // per thread: scratch_elems doubles (an input plane for col2im)
    int64_t scratch_elems;
    float *col;           // transposed im2col of one sample: max over convs of (OH*OW, C*R*R)
    double *dcol;         // its gradient (training plans)
    double *wacc;         // weight-gradient accumulator: max over convs of K*C*R*R (training plans)
    dlp_bucket *buckets;
    int nbuckets;
    void (*on_bucket)(void *ctx, int64_t offset, int64_t count);
    void *bucket_ctx;
} ref_plan;

// Threads for a loop of `work` element operations: small loops run on one thread (a parallel region costs
// microseconds, and much more when the CPUs are shared).
static inline int nthr(const ref_plan *p, double work) { return work >= 262144.0 ? p->nthreads : 1; }

static inline int64_t numel(const dlp_layer *l) { return (int64_t)l->c * l->h * l->w; }

// ---- convolution ------------------------------------------------------------------------------------------

typedef struct conv_shape {
    int n, c, h, w;    // input
    int k, oh, ow;     // output channels and size
    int r, stride, pad;
} conv_shape;

static conv_shape conv_shape_of(const ref_plan *p, const dlp_layer *l, int n) {
    const dlp_layer *x = &p->net.layers[l->in0];
    conv_shape s = {n, x->c, x->h, x->w, l->c, l->h, l->w, l->k, l->stride, l->pad};
    return s;
}

// The convolutions go through a transposed im2col: for one sample, colT (OH*OW, C*R*R) holds in row p the
// input pixels output position p sees through each kernel tap q = (c, r, t) (0 where a tap falls in the
// padding). Then, with double accumulators,
//   forward         y[k, p]  = sum_q w[k, q] colT[p, q]                 (dot products)
//   backward weight dw[k, q] = sum_n sum_p dy[n, k, p] colT_n[p, q]
//   backward data   dcolT[p, q] = sum_k dy[k, p] w[k, q],  dx = col2im(dcolT)
// Loops are tiled over blocks of positions so that a block of colT stays in cache while all of w streams by.
enum { CONV_PB = 16, CONV_KB = 8, CONV_QB = 512 };

static void im2col_t(ref_plan *p, const conv_shape *s, const float *x, float *colT) {
    const int64_t P = (int64_t)s->oh * s->ow;
    const int Q = s->c * s->r * s->r;
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)P * Q))
    for (int64_t pi = 0; pi < P; pi++) {
        const int oh = (int)(pi / s->ow), ow = (int)(pi % s->ow);
        float *row = colT + pi * Q;
        for (int c = 0; c < s->c; c++) {
            const float *xc = x + (int64_t)c * s->h * s->w;
            for (int r = 0; r < s->r; r++) {
                const int ih = oh * s->stride - s->pad + r;
                for (int t = 0; t < s->r; t++) {
                    const int iw = ow * s->stride - s->pad + t;
                    *row++ = (ih >= 0 && ih < s->h && iw >= 0 && iw < s->w) ? xc[(int64_t)ih * s->w + iw] : 0.0f;
                }
            }
        }
    }
}

// y (N, K, OH, OW) = conv(x (N, C, H, W), w (K, C, R, R))
static void conv_fwd(ref_plan *p, const conv_shape *s, const float *x, const float *w, float *y) {
    const int64_t P = (int64_t)s->oh * s->ow;
    const int Q = s->c * s->r * s->r;
    const int64_t nblk = (P + CONV_PB - 1) / CONV_PB;
    const int nkb = (s->k + CONV_KB - 1) / CONV_KB;
    for (int n = 0; n < s->n; n++) {
        im2col_t(p, s, x + (int64_t)n * s->c * s->h * s->w, p->col);
        const float *colT = p->col;
        float *yn = y + (int64_t)n * s->k * P;
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)P * Q * s->k))
        for (int64_t b = 0; b < nblk; b++) {
            for (int kb = 0; kb < nkb; kb++) {
                const int64_t p0 = b * CONV_PB, p1 = p0 + CONV_PB < P ? p0 + CONV_PB : P;
                const int k0 = kb * CONV_KB, k1 = k0 + CONV_KB < s->k ? k0 + CONV_KB : s->k;
                for (int k = k0; k < k1; k++) {
                    const float *wk = w + (int64_t)k * Q;
                    for (int64_t pi = p0; pi < p1; pi++) {
                        const float *cp = colT + pi * Q;
                        double sum = 0;
#pragma omp simd reduction(+ : sum)
                        for (int q = 0; q < Q; q++) sum += (double)wk[q] * cp[q];
                        yn[(int64_t)k * P + pi] = (float)sum;
                    }
                }
            }
        }
    }
}

// dw (K, C, R, R) = sum over n and output positions of dy (N, K, OH, OW) times colT_n
static void conv_bwd_weights(ref_plan *p, const conv_shape *s, const float *dy, const float *x, float *dw) {
    const int64_t P = (int64_t)s->oh * s->ow;
    const int Q = s->c * s->r * s->r;
    const int nkb = (s->k + CONV_KB - 1) / CONV_KB;
    double *acc = p->wacc;  // (K, Q)
    memset(acc, 0, (size_t)((int64_t)s->k * Q) * sizeof *acc);
    for (int n = 0; n < s->n; n++) {
        im2col_t(p, s, x + (int64_t)n * s->c * s->h * s->w, p->col);
        const float *colT = p->col;
        const float *dyn = dy + (int64_t)n * s->k * P;
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)P * Q * s->k))
        for (int kb = 0; kb < nkb; kb++) {
            const int k0 = kb * CONV_KB, k1 = k0 + CONV_KB < s->k ? k0 + CONV_KB : s->k;
            for (int64_t p0 = 0; p0 < P; p0 += CONV_PB) {
                const int64_t p1 = p0 + CONV_PB < P ? p0 + CONV_PB : P;
                for (int k = k0; k < k1; k++) {
                    double *ak = acc + (int64_t)k * Q;
                    for (int64_t pi = p0; pi < p1; pi++) {
                        const double d = dyn[(int64_t)k * P + pi];
                        if (d == 0.0) continue;
                        const float *cp = colT + pi * Q;
#pragma omp simd
                        for (int q = 0; q < Q; q++) ak[q] += d * cp[q];
                    }
                }
            }
        }
    }
    for (int64_t i = 0; i < (int64_t)s->k * Q; i++) dw[i] = (float)acc[i];
}

// dx (N, C, H, W) += col2im(dcolT), dcolT (OH*OW, C*R*R) = dy^T w, in double
static void conv_bwd_data(ref_plan *p, const conv_shape *s, const float *dy, const float *w, float *dx) {
    const int64_t P = (int64_t)s->oh * s->ow, HW = (int64_t)s->h * s->w;
    const int Q = s->c * s->r * s->r, RR = s->r * s->r;
    const int64_t nblk = (P + CONV_PB - 1) / CONV_PB;
    const int nqb = (Q + CONV_QB - 1) / CONV_QB;
    double *dcol = p->dcol;
    for (int n = 0; n < s->n; n++) {
        const float *dyn = dy + (int64_t)n * s->k * P;
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)P * Q * s->k))
        for (int64_t b = 0; b < nblk; b++) {
            for (int qb = 0; qb < nqb; qb++) {
                const int64_t p0 = b * CONV_PB, p1 = p0 + CONV_PB < P ? p0 + CONV_PB : P;
                const int q0 = qb * CONV_QB, q1 = q0 + CONV_QB < Q ? q0 + CONV_QB : Q;
                for (int64_t pi = p0; pi < p1; pi++) memset(dcol + pi * Q + q0, 0, (size_t)(q1 - q0) * sizeof *dcol);
                for (int k = 0; k < s->k; k++) {
                    const float *wk = w + (int64_t)k * Q;
                    for (int64_t pi = p0; pi < p1; pi++) {
                        const double d = dyn[(int64_t)k * P + pi];
                        if (d == 0.0) continue;
                        double *dp = dcol + pi * Q;
#pragma omp simd
                        for (int q = q0; q < q1; q++) dp[q] += d * wk[q];
                    }
                }
            }
        }
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)P * Q))
        for (int c = 0; c < s->c; c++) {
            double *plane = p->scratch + (int64_t)omp_get_thread_num() * p->scratch_elems;
            memset(plane, 0, (size_t)HW * sizeof *plane);
            for (int64_t pi = 0; pi < P; pi++) {
                const int oh = (int)(pi / s->ow), ow = (int)(pi % s->ow);
                const double *dp = dcol + pi * Q + (int64_t)c * RR;
                for (int r = 0; r < s->r; r++) {
                    const int ih = oh * s->stride - s->pad + r;
                    if (ih < 0 || ih >= s->h) continue;
                    for (int t = 0; t < s->r; t++) {
                        const int iw = ow * s->stride - s->pad + t;
                        if (iw >= 0 && iw < s->w) plane[(int64_t)ih * s->w + iw] += dp[r * s->r + t];
                    }
                }
            }
            float *dxc = dx + ((int64_t)n * s->c + c) * HW;
            for (int64_t i = 0; i < HW; i++) dxc[i] += (float)plane[i];
        }
    }
}

// ---- batch normalization ----------------------------------------------------------------------------------

// Training: normalize with the batch mean and biased variance; running stats get the unbiased variance.
static void bn_fwd_train(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li];
    const int C = l->c;
    const int64_t hw = (int64_t)l->h * l->w, m = (int64_t)n * hw;
    const float *x = p->act[l->in0];
    float *y = p->act[li];
    const float *gamma = p->params + p->net.params[l->param0].offset;
    const float *beta = p->params + p->net.params[l->param0 + 1].offset;
    float *rmean = p->bufs + p->net.bufs[l->buf0].offset;
    float *rvar = p->bufs + p->net.bufs[l->buf0 + 1].offset;
    double *smean = p->bn_mean + p->bn_off[li], *sinv = p->bn_invstd + p->bn_off[li];
    const double mom = l->bn_momentum, eps = l->bn_eps;
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)m * C))
    for (int c = 0; c < C; c++) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((int64_t)i * C + c) * hw;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < hw; j++) sum += xp[j];
        }
        const double mean = sum / (double)m;
        double ss = 0;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((int64_t)i * C + c) * hw;
#pragma omp simd reduction(+ : ss)
            for (int64_t j = 0; j < hw; j++) ss += (xp[j] - mean) * (xp[j] - mean);
        }
        const double var = ss / (double)m;  // biased: used to normalize
        const double inv = 1.0 / sqrt(var + eps);
        smean[c] = mean;
        sinv[c] = inv;
        const double g = gamma[c] * inv, b = beta[c] - mean * g;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((int64_t)i * C + c) * hw;
            float *yp = y + ((int64_t)i * C + c) * hw;
            for (int64_t j = 0; j < hw; j++) yp[j] = (float)(xp[j] * g + b);
        }
        const double unbiased = m > 1 ? ss / (double)(m - 1) : var;
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * unbiased);
    }
}

static void bn_fwd_eval(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li];
    const int C = l->c;
    const int64_t hw = (int64_t)l->h * l->w;
    const float *x = p->act[l->in0];
    float *y = p->act[li];
    const float *gamma = p->params + p->net.params[l->param0].offset;
    const float *beta = p->params + p->net.params[l->param0 + 1].offset;
    const float *rmean = p->bufs + p->net.bufs[l->buf0].offset;
    const float *rvar = p->bufs + p->net.bufs[l->buf0 + 1].offset;
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * C * hw))
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < C; c++) {
            const double g = gamma[c] / sqrt((double)rvar[c] + l->bn_eps), b = beta[c] - rmean[c] * g;
            const float *xp = x + ((int64_t)i * C + c) * hw;
            float *yp = y + ((int64_t)i * C + c) * hw;
            for (int64_t j = 0; j < hw; j++) yp[j] = (float)(xp[j] * g + b);
        }
    }
}

// With xhat = (x - mean) * inv and m = N*H*W:
//   dgamma = sum dy * xhat,  dbeta = sum dy,  dx = gamma * inv / m * (m * dy - dbeta - xhat * dgamma)
static void bn_bwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li];
    const int C = l->c;
    const int64_t hw = (int64_t)l->h * l->w, m = (int64_t)n * hw;
    const float *x = p->act[l->in0], *dy = p->dact[li];
    float *dx = p->dact[l->in0];
    const float *gamma = p->params + p->net.params[l->param0].offset;
    float *dgamma = p->grads + p->net.params[l->param0].offset;
    float *dbeta = p->grads + p->net.params[l->param0 + 1].offset;
    const double *smean = p->bn_mean + p->bn_off[li], *sinv = p->bn_invstd + p->bn_off[li];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)m * C))
    for (int c = 0; c < C; c++) {
        const double mean = smean[c], inv = sinv[c];
        double sdy = 0, sdyx = 0;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((int64_t)i * C + c) * hw, *dp = dy + ((int64_t)i * C + c) * hw;
#pragma omp simd reduction(+ : sdy, sdyx)
            for (int64_t j = 0; j < hw; j++) {
                sdy += dp[j];
                sdyx += dp[j] * ((xp[j] - mean) * inv);
            }
        }
        dgamma[c] = (float)sdyx;
        dbeta[c] = (float)sdy;
        const double k = gamma[c] * inv / (double)m;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((int64_t)i * C + c) * hw, *dp = dy + ((int64_t)i * C + c) * hw;
            float *dxp = dx + ((int64_t)i * C + c) * hw;
            for (int64_t j = 0; j < hw; j++)
                dxp[j] += (float)(k * ((double)m * dp[j] - sdy - (xp[j] - mean) * inv * sdyx));
        }
    }
}

// ---- pooling ----------------------------------------------------------------------------------------------

// Max pooling's window of output (oh, ow) over one channel plane xp: the largest input (NaN wins; padding is -inf,
// it never does). *at gets its index in the plane, the first maximum in row-major order (PyTorch's choice), or -1
// when the window is all padding.
static float window_max(const float *xp, const dlp_layer *l, const dlp_layer *xl, int oh, int ow, int64_t *at) {
    float best = -INFINITY;
    *at = -1;
    for (int r = 0; r < l->k; r++) {
        int ih = oh * l->stride - l->pad + r;
        if (ih < 0 || ih >= xl->h) continue;
        for (int t = 0; t < l->k; t++) {
            int iw = ow * l->stride - l->pad + t;
            if (iw < 0 || iw >= xl->w) continue;
            float v = xp[ih * xl->w + iw];
            if (*at < 0 || v > best || isnan(v)) {
                best = v;
                *at = (int64_t)ih * xl->w + iw;
            }
        }
    }
    return best;
}

static void maxpool_fwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const float *x = p->act[l->in0];
    float *y = p->act[li];
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * l->c * l->h * l->w * l->k * l->k))
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < l->c; c++) {
            const float *xp = x + ((int64_t)i * l->c + c) * xl->h * xl->w;
            float *yp = y + ((int64_t)i * l->c + c) * l->h * l->w;
            for (int oh = 0; oh < l->h; oh++) {
                for (int ow = 0; ow < l->w; ow++) {
                    int64_t at;
                    yp[oh * l->w + ow] = window_max(xp, l, xl, oh, ow, &at);
                }
            }
        }
    }
}

// The gradient goes to the first maximum of each window (window_max).
static void maxpool_bwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const float *x = p->act[l->in0], *dy = p->dact[li];
    float *dx = p->dact[l->in0];
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * l->c * l->h * l->w * l->k * l->k))
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < l->c; c++) {
            const float *xp = x + ((int64_t)i * l->c + c) * xl->h * xl->w;
            float *dxp = dx + ((int64_t)i * l->c + c) * xl->h * xl->w;
            const float *dyp = dy + ((int64_t)i * l->c + c) * l->h * l->w;
            for (int oh = 0; oh < l->h; oh++) {
                for (int ow = 0; ow < l->w; ow++) {
                    int64_t at;
                    window_max(xp, l, xl, oh, ow, &at);
                    if (at >= 0) dxp[at] += dyp[oh * l->w + ow];
                }
            }
        }
    }
}

static void avgpool_fwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const int64_t hw = (int64_t)xl->h * xl->w;
    const float *x = p->act[l->in0];
    float *y = p->act[li];
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * l->c * hw))
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < l->c; c++) {
            const float *xp = x + ((int64_t)i * l->c + c) * hw;
            double s = 0;
            for (int64_t j = 0; j < hw; j++) s += xp[j];
            y[(int64_t)i * l->c + c] = (float)(s / (double)hw);
        }
    }
}

static void avgpool_bwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const int64_t hw = (int64_t)xl->h * xl->w;
    const float *dy = p->dact[li];
    float *dx = p->dact[l->in0];
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * l->c * hw))
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < l->c; c++) {
            const float g = (float)(dy[(int64_t)i * l->c + c] / (double)hw);
            float *dxp = dx + ((int64_t)i * l->c + c) * hw;
            for (int64_t j = 0; j < hw; j++) dxp[j] += g;
        }
    }
}

// ---- fully connected --------------------------------------------------------------------------------------

// y (N, K) = x (N, J) w^T (K, J) + b (K)
static void fc_fwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li];
    const int64_t J = numel(&p->net.layers[l->in0]);
    const int K = l->c;
    const float *x = p->act[l->in0], *w = p->params + p->net.params[l->param0].offset;
    const float *b = p->params + p->net.params[l->param0 + 1].offset;
    float *y = p->act[li];
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * K * J))
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < K; k++) {
            const float *xp = x + i * J, *wp = w + k * J;
            double s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < J; j++) s += (double)xp[j] * wp[j];
            y[(int64_t)i * K + k] = (float)(s + b[k]);
        }
    }
}

static void fc_bwd(ref_plan *p, int li, int n) {
    const dlp_layer *l = &p->net.layers[li];
    const int64_t J = numel(&p->net.layers[l->in0]);
    const int K = l->c;
    const float *x = p->act[l->in0], *dy = p->dact[li];
    const float *w = p->params + p->net.params[l->param0].offset;
    float *dw = p->grads + p->net.params[l->param0].offset, *db = p->grads + p->net.params[l->param0 + 1].offset;
    float *dx = p->dact[l->in0];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)n * K * J))
    for (int k = 0; k < K; k++) {
        double sb = 0;
        for (int i = 0; i < n; i++) sb += dy[(int64_t)i * K + k];
        db[k] = (float)sb;
        for (int64_t j = 0; j < J; j++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += (double)dy[(int64_t)i * K + k] * x[i * J + j];
            dw[k * J + j] = (float)s;
        }
    }
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthr(p, (double)n * K * J))
    for (int i = 0; i < n; i++) {
        for (int64_t j = 0; j < J; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)dy[(int64_t)i * K + k] * w[k * J + j];
            dx[i * J + j] += (float)s;
        }
    }
}

// ---- the plan ---------------------------------------------------------------------------------------------

static void ref_plan_free(dlp_plan *base) {
    ref_plan *p = (ref_plan *)base;
    if (!p) return;
    for (int i = 0; p->act && i < p->net.nlayers; i++) dlp_free_aligned(p->act[i]);
    for (int i = 0; p->dact && i < p->net.nlayers; i++) dlp_free_aligned(p->dact[i]);
    free(p->act);
    free(p->dact);
    dlp_free_aligned(p->params);
    dlp_free_aligned(p->bufs);
    dlp_free_aligned(p->grads);
    dlp_free_aligned(p->mom);
    dlp_free_aligned(p->dlogits);
    dlp_free_aligned(p->scratch);
    dlp_free_aligned(p->col);
    dlp_free_aligned(p->wacc);
    dlp_free_aligned(p->dcol);
    free(p->bn_mean);
    free(p->bn_invstd);
    free(p->bn_off);
    free(p->buckets);
    dlp_net_free(&p->net);
    free(p);
}

static float *alloc_f32(int64_t n) { return dlp_alloc_aligned((size_t)(n > 0 ? n : 1) * sizeof(float)); }

static dlp_status check_net(const dlp_net *net, const dlp_plan_cfg *cfg) {
    if (net->nlayers < 2 || net->layers[0].kind != DLP_LAYER_INPUT)
        return DLP_ERR(DLP_ERR_INVALID, "ref: net %s has no layers after its input", net->arch);
    for (int i = 1; i < net->nlayers; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->in0 < 0 || l->in0 >= i || (l->kind == DLP_LAYER_ADD && (l->in1 < 0 || l->in1 >= i)))
            return DLP_ERR(DLP_ERR_INVALID, "ref: net %s: layer %d (%s) is not in topological order", net->arch, i,
                           l->name);
        if (l->kind <= DLP_LAYER_INPUT || l->kind >= DLP_LAYER_KIND_COUNT)
            return DLP_ERR(DLP_ERR_INVALID, "ref: net %s: layer %d has kind %d", net->arch, i, (int)l->kind);
        if (l->kind == DLP_LAYER_BN && cfg->train && (int64_t)cfg->batch * l->h * l->w < 2)
            return DLP_ERR(DLP_ERR_INVALID,
                           "ref: %s: training batch norm needs more than one value per channel (batch %d, %dx%d)",
                           l->name, cfg->batch, l->h, l->w);
    }
    return DLP_OK;
}

static dlp_status ref_plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
    *out = NULL;
    if (cfg->batch <= 0) return DLP_ERR(DLP_ERR_INVALID, "ref: batch must be positive (got %d)", cfg->batch);
    if (cfg->precision != DLP_DTYPE_F32)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "ref computes in fp32 only (asked for %s); hint: --device cpu for bf16",
                       dlp_dtype_name(cfg->precision));
    DLP_CHECK(check_net(net, cfg));
    ref_plan *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->base.ops = &dlp_backend_ref;
    dlp_status st = dlp_net_copy(&p->net, net);
    if (st) {
        free(p);
        return dlp_err_trace(st, __FILE__, __LINE__, "dlp_net_copy");
    }
    p->batch = cfg->batch;
    p->train = cfg->train;
    p->nthreads = cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
    p->fwd_pass = -1;
    const int L = p->net.nlayers;
    p->params = alloc_f32(p->net.param_count);
    p->bufs = alloc_f32(p->net.buf_count);
    p->act = calloc((size_t)L, sizeof *p->act);
    p->bn_off = calloc((size_t)L, sizeof *p->bn_off);
    if (!p->params || !p->bufs || !p->act || !p->bn_off) goto nomem;
    int64_t bn_total = 0, scratch = 1, col = 1, wacc = 1;
    for (int i = 0; i < L; i++) {
        const dlp_layer *l = &p->net.layers[i];
        p->act[i] = alloc_f32((int64_t)p->batch * numel(l));
        if (!p->act[i]) goto nomem;
        if (l->kind == DLP_LAYER_BN) {
            p->bn_off[i] = bn_total;
            bn_total += l->c;
        }
        if (l->kind == DLP_LAYER_CONV) {
            const dlp_layer *x = &p->net.layers[l->in0];
            int64_t a = (int64_t)l->h * l->w, b = (int64_t)x->h * x->w;
            if (a > scratch) scratch = a;
            if (b > scratch) scratch = b;
            int64_t q = (int64_t)x->c * l->k * l->k;
            if (q * a > col) col = q * a;
            if (q * l->c > wacc) wacc = q * l->c;
        }
    }
    // Running stats start at PyTorch's values (mean 0, var 1) until set_params gives others.
    for (int i = 0; i < p->net.nbufs; i++)
        if (strstr(p->net.bufs[i].name, "running_var"))
            for (int64_t j = 0; j < p->net.bufs[i].numel; j++) p->bufs[p->net.bufs[i].offset + j] = 1.0f;
    p->scratch_elems = (scratch + 7) & ~(int64_t)7;
    p->scratch = dlp_alloc_aligned((size_t)(p->scratch_elems * p->nthreads) * sizeof(double));
    p->col = alloc_f32(col);
    if (!p->col) goto nomem;
    if (p->train) {
        p->wacc = dlp_alloc_aligned((size_t)wacc * sizeof(double));
        p->dcol = dlp_alloc_aligned((size_t)col * sizeof(double));
        if (!p->wacc || !p->dcol) goto nomem;
    }
    p->bn_mean = calloc((size_t)(bn_total ? bn_total : 1), sizeof(double));
    p->bn_invstd = calloc((size_t)(bn_total ? bn_total : 1), sizeof(double));
    if (!p->scratch || !p->bn_mean || !p->bn_invstd) goto nomem;
    if (p->train) {
        p->grads = alloc_f32(p->net.param_count);
        p->mom = alloc_f32(p->net.param_count);
        p->dact = calloc((size_t)L, sizeof *p->dact);
        p->dlogits = alloc_f32((int64_t)p->batch * numel(&p->net.layers[L - 1]));
        if (!p->grads || !p->mom || !p->dact || !p->dlogits) goto nomem;
        for (int i = 0; i < L; i++) {
            p->dact[i] = alloc_f32((int64_t)p->batch * numel(&p->net.layers[i]));
            if (!p->dact[i]) goto nomem;
        }
        st = dlp_net_buckets(&p->net, cfg->bucket_elems, &p->buckets, &p->nbuckets);
        if (st) {
            ref_plan_free(&p->base);
            return dlp_err_trace(st, __FILE__, __LINE__, "dlp_net_buckets");
        }
        p->on_bucket = cfg->on_bucket;
        p->bucket_ctx = cfg->bucket_ctx;
    }
    *out = &p->base;
    return DLP_OK;
nomem:
    ref_plan_free(&p->base);
    return DLP_ERR(DLP_ERR_NOMEM, "ref: out of memory planning %s at batch %d", net->arch, cfg->batch);
}

static dlp_status ref_available(char *why, size_t why_len) {
    if (why && why_len) why[0] = '\0';
    return DLP_OK;
}

static void ref_input_format(const dlp_plan *p, dlp_layout *layout, dlp_dtype *dtype) {
    (void)p;
    *layout = DLP_LAYOUT_NCHW;
    *dtype = DLP_DTYPE_F32;
}

static dlp_status ref_set_params(dlp_plan *base, const float *params, const float *bufs) {
    ref_plan *p = (ref_plan *)base;
    if (params) memcpy(p->params, params, (size_t)p->net.param_count * sizeof(float));
    if (bufs) memcpy(p->bufs, bufs, (size_t)p->net.buf_count * sizeof(float));
    return DLP_OK;
}

static dlp_status ref_get_params(dlp_plan *base, float *params, float *bufs) {
    ref_plan *p = (ref_plan *)base;
    if (params) memcpy(params, p->params, (size_t)p->net.param_count * sizeof(float));
    if (bufs) memcpy(bufs, p->bufs, (size_t)p->net.buf_count * sizeof(float));
    return DLP_OK;
}

static dlp_status need_train(const ref_plan *p, const char *what) {
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "ref: %s needs a training plan (this one is inference-only)", what);
    return DLP_OK;
}

// Copies a training plan's per-parameter state (gradients, momentum) in or out; `what` names the call.
static dlp_status copy_train_state(const dlp_plan *base, const char *what, float *dst, const float *src) {
    const ref_plan *p = (const ref_plan *)base;
    DLP_CHECK(need_train(p, what));
    memcpy(dst, src, (size_t)p->net.param_count * sizeof(float));
    return DLP_OK;
}

static dlp_status ref_get_grads(dlp_plan *base, float *grads) {
    return copy_train_state(base, "get_grads", grads, ((ref_plan *)base)->grads);
}
static dlp_status ref_set_momentum(dlp_plan *base, const float *v) {
    return copy_train_state(base, "set_momentum", ((ref_plan *)base)->mom, v);
}
static dlp_status ref_get_momentum(dlp_plan *base, float *v) {
    return copy_train_state(base, "get_momentum", v, ((ref_plan *)base)->mom);
}

static float *ref_grad_buffer(dlp_plan *base) { return ((ref_plan *)base)->grads; }

static dlp_status ref_set_input(dlp_plan *base, const void *batch, int n) {
    ref_plan *p = (ref_plan *)base;
    if (n <= 0 || n > p->batch)
        return DLP_ERR(DLP_ERR_INVALID, "ref: set_input with %d samples (the plan's batch is %d)", n, p->batch);
    memcpy(p->act[0], batch, (size_t)((int64_t)n * numel(&p->net.layers[0])) * sizeof(float));
    p->n = n;
    p->fwd_pass = -1;
    p->have_dlogits = 0;
    return DLP_OK;
}

static dlp_status ref_forward(dlp_plan *base, dlp_pass pass) {
    ref_plan *p = (ref_plan *)base;
    if (p->n <= 0) return DLP_ERR(DLP_ERR_INVALID, "ref: forward before set_input");
    if (pass == DLP_PASS_TRAIN) {
        DLP_CHECK(need_train(p, "a training forward pass"));
        if (p->n != p->batch)
            return DLP_ERR(DLP_ERR_INVALID, "ref: a training step needs a full batch (%d of %d samples)", p->n,
                           p->batch);
    }
    const int n = p->n;
    for (int li = 1; li < p->net.nlayers; li++) {
        const dlp_layer *l = &p->net.layers[li];
        const int64_t cnt = (int64_t)n * numel(l);
        switch (l->kind) {
        case DLP_LAYER_CONV: {
            conv_shape s = conv_shape_of(p, l, n);
            conv_fwd(p, &s, p->act[l->in0], p->params + p->net.params[l->param0].offset, p->act[li]);
            break;
        }
        case DLP_LAYER_BN:
            if (pass == DLP_PASS_TRAIN) bn_fwd_train(p, li, n);
            else bn_fwd_eval(p, li, n);
            break;
        case DLP_LAYER_RELU: {
            const float *x = p->act[l->in0];
            float *y = p->act[li];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)cnt))
            for (int64_t i = 0; i < cnt; i++) y[i] = x[i] > 0.0f ? x[i] : (isnan(x[i]) ? x[i] : 0.0f);
            break;
        }
        case DLP_LAYER_ADD: {
            const float *a = p->act[l->in0], *b = p->act[l->in1];
            float *y = p->act[li];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)cnt))
            for (int64_t i = 0; i < cnt; i++) y[i] = a[i] + b[i];
            break;
        }
        case DLP_LAYER_MAXPOOL: maxpool_fwd(p, li, n); break;
        case DLP_LAYER_AVGPOOL: avgpool_fwd(p, li, n); break;
        case DLP_LAYER_FC: fc_fwd(p, li, n); break;
        default: return DLP_ERR(DLP_ERR_INTERNAL, "ref: layer kind %d in forward", (int)l->kind);
        }
    }
    p->fwd_pass = (int)pass;
    p->have_dlogits = 0;
    return DLP_OK;
}

static dlp_status ref_get_output(dlp_plan *base, float *out) {
    ref_plan *p = (ref_plan *)base;
    if (p->fwd_pass < 0) return DLP_ERR(DLP_ERR_INVALID, "ref: get_output before forward");
    const int o = dlp_net_output(&p->net);
    memcpy(out, p->act[o], (size_t)((int64_t)p->n * numel(&p->net.layers[o])) * sizeof(float));
    return DLP_OK;
}

// PyTorch's cross_entropy(label_smoothing=e) averaged over the n samples (backend/loss.c). Top-k from the label's
// rank; top-5 is every sample when there are 5 classes or fewer.
static dlp_status ref_loss(dlp_plan *base, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    ref_plan *p = (ref_plan *)base;
    if (p->fwd_pass < 0) return DLP_ERR(DLP_ERR_INVALID, "ref: loss before forward");
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return DLP_ERR(DLP_ERR_INVALID, "label smoothing must be in [0, 1] (got %g)", (double)label_smoothing);
    const int o = dlp_net_output(&p->net), n = p->n;
    const int64_t K = numel(&p->net.layers[o]);
    DLP_CHECK(dlp_loss_check_labels(labels, n, K));
    const float *z = p->act[o];
    double total = 0;
    int top1 = 0, top5 = 0;
    for (int i = 0; i < n; i++) {
        int64_t rank;
        total += dlp_loss_xent_sample(z + i * K, K, labels[i], label_smoothing, p->train ? p->dlogits + i * K : NULL, n,
                                      &rank);
        top1 += rank < 1;
        top5 += rank < 5;
    }
    out->loss = total / (double)n;
    out->correct_top1 = top1;
    out->correct_top5 = top5;
    p->have_dlogits = p->train;
    return DLP_OK;
}

static void fire_buckets(ref_plan *p, int done_layer, int *next_bucket) {
    while (*next_bucket < p->nbuckets && p->buckets[*next_bucket].ready_layer >= done_layer) {
        const dlp_bucket *b = &p->buckets[*next_bucket];
        if (p->on_bucket) p->on_bucket(p->bucket_ctx, b->offset, b->count);
        (*next_bucket)++;
    }
}

static dlp_status ref_backward(dlp_plan *base, const float *dy) {
    ref_plan *p = (ref_plan *)base;
    DLP_CHECK(need_train(p, "backward"));
    if (p->fwd_pass != DLP_PASS_TRAIN) return DLP_ERR(DLP_ERR_INVALID, "ref: backward needs a training forward pass first");
    if (!dy && !p->have_dlogits) return DLP_ERR(DLP_ERR_INVALID, "ref: backward from the loss, but loss() was not called");
    const int n = p->n, L = p->net.nlayers, o = L - 1;
    for (int i = 0; i < o; i++) memset(p->dact[i], 0, (size_t)((int64_t)n * numel(&p->net.layers[i])) * sizeof(float));
    memcpy(p->dact[o], dy ? dy : p->dlogits, (size_t)((int64_t)n * numel(&p->net.layers[o])) * sizeof(float));
    int next_bucket = 0;
    for (int li = o; li >= 1; li--) {
        const dlp_layer *l = &p->net.layers[li];
        const int64_t cnt = (int64_t)n * numel(l);
        switch (l->kind) {
        case DLP_LAYER_CONV: {
            conv_shape s = conv_shape_of(p, l, n);
            const float *w = p->params + p->net.params[l->param0].offset;
            conv_bwd_weights(p, &s, p->dact[li], p->act[l->in0], p->grads + p->net.params[l->param0].offset);
            conv_bwd_data(p, &s, p->dact[li], w, p->dact[l->in0]);
            break;
        }
        case DLP_LAYER_BN: bn_bwd(p, li, n); break;
        case DLP_LAYER_RELU: {
            const float *y = p->act[li], *d = p->dact[li];
            float *dx = p->dact[l->in0];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)cnt))
            for (int64_t i = 0; i < cnt; i++) dx[i] += y[i] > 0.0f ? d[i] : 0.0f;
            break;
        }
        case DLP_LAYER_ADD: {
            const float *d = p->dact[li];
            float *da = p->dact[l->in0], *db = p->dact[l->in1];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)cnt))
            for (int64_t i = 0; i < cnt; i++) da[i] += d[i];
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)cnt))
            for (int64_t i = 0; i < cnt; i++) db[i] += d[i];
            break;
        }
        case DLP_LAYER_MAXPOOL: maxpool_bwd(p, li, n); break;
        case DLP_LAYER_AVGPOOL: avgpool_bwd(p, li, n); break;
        case DLP_LAYER_FC: fc_bwd(p, li, n); break;
        default: return DLP_ERR(DLP_ERR_INTERNAL, "ref: layer kind %d in backward", (int)l->kind);
        }
        if (l->nparams) fire_buckets(p, li, &next_bucket);
    }
    fire_buckets(p, 0, &next_bucket);
    return DLP_OK;
}

static dlp_status ref_get_input_grad(dlp_plan *base, float *dx) {
    ref_plan *p = (ref_plan *)base;
    DLP_CHECK(need_train(p, "get_input_grad"));
    memcpy(dx, p->dact[0], (size_t)((int64_t)p->n * numel(&p->net.layers[0])) * sizeof(float));
    return DLP_OK;
}

// torch.optim.SGD (dampening 0): d = g + wd*w;  v = momentum*v + d;  d = nesterov ? d + momentum*v : v;
// w -= lr*d. With momentum 0 the buffer is not used. A zero buffer gives PyTorch's first step (v = d).
static dlp_status ref_update(dlp_plan *base, const dlp_sgd *hp) {
    ref_plan *p = (ref_plan *)base;
    DLP_CHECK(need_train(p, "update"));
    const float lr = hp->lr, m = hp->momentum;
    for (int pi = 0; pi < p->net.nparams; pi++) {
        const dlp_param *prm = &p->net.params[pi];
        const float wd = prm->no_decay && !hp->decay_no_decay_params ? 0.0f : hp->weight_decay;
        float *w = p->params + prm->offset, *v = p->mom + prm->offset;
        const float *g = p->grads + prm->offset;
#pragma omp parallel for schedule(static) num_threads(nthr(p, (double)prm->numel))
        for (int64_t i = 0; i < prm->numel; i++) {
            float d = g[i];
            if (wd != 0.0f) d = d + wd * w[i];
            if (m != 0.0f) {
                v[i] = m * v[i] + d;
                d = hp->nesterov ? d + m * v[i] : v[i];
            }
            w[i] = w[i] - lr * d;
        }
    }
    return DLP_OK;
}

// Sustained GFLOP/s of ref's convolution on a ResNet-like 3x3 layer (64 -> 64 channels, 28x28, batch 1).
static dlp_status ref_measure_peak(dlp_dtype precision, int threads, double *gflops) {
    if (precision != DLP_DTYPE_F32) return DLP_ERR(DLP_ERR_UNSUPPORTED, "ref computes in fp32 only");
    dlp_net net;
    DLP_CHECK(dlp_net_init(&net, "ref-peak", 64, 28, 28));
    if (dlp_net_conv(&net, "conv", 0, 64, 3, 1, 1) < 0) {
        dlp_net_free(&net);
        return dlp_err_status();
    }
    dlp_plan_cfg cfg = {.batch = 1, .train = 0, .precision = DLP_DTYPE_F32, .threads = threads};
    dlp_plan *pl;
    dlp_status st = ref_plan_create(&net, &cfg, &pl);
    if (st) {
        dlp_net_free(&net);
        return dlp_err_trace(st, __FILE__, __LINE__, "ref_plan_create");
    }
    ref_plan *p = (ref_plan *)pl;
    for (int64_t i = 0; i < net.param_count; i++) p->params[i] = 0.01f * (float)(i % 7);
    for (int64_t i = 0; i < 64 * 28 * 28; i++) p->act[0][i] = 0.1f * (float)(i % 5);
    p->n = 1;
    const double flops = dlp_net_forward_flops(&net);
    int64_t t0 = dlp_now_ns(), t;
    int reps = 0;
    do {
        ref_forward(pl, DLP_PASS_EVAL);
        reps++;
        t = dlp_now_ns();
    } while (t - t0 < 200000000LL || reps < 2);
    *gflops = flops * reps / (double)(t - t0);
    ref_plan_free(pl);
    dlp_net_free(&net);
    return DLP_OK;
}

const dlp_backend_ops dlp_backend_ref = {
    .name = "ref",
    .summary = "plain C loops, fp32 NCHW with double sums: the yardstick (slow)",
    .caps = {.kind = DLP_BACKEND_KIND_CPU, .default_precision = DLP_DTYPE_F32, .reference = 1},
    .available = ref_available,
    .plan_create = ref_plan_create,
    .plan_free = ref_plan_free,
    .input_format = ref_input_format,
    .set_params = ref_set_params,
    .get_params = ref_get_params,
    .get_grads = ref_get_grads,
    .set_momentum = ref_set_momentum,
    .get_momentum = ref_get_momentum,
    .grad_buffer = ref_grad_buffer,
    .set_input = ref_set_input,
    .forward = ref_forward,
    .get_output = ref_get_output,
    .loss = ref_loss,
    .backward = ref_backward,
    .get_input_grad = ref_get_input_grad,
    .update = ref_update,
    .sync = NULL,
    .measure_peak = ref_measure_peak,
};
