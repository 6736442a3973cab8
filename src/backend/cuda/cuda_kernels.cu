// backend/cuda/cuda_kernels: the cuda backend's own kernels — batch-norm statistics and the fused
// scale/shift + residual + ReLU pass (forward and backward), pooling, FC bias, softmax cross-entropy with top-k,
// gradient finalization with loss-scale unscaling and overflow check, the SGD update that refreshes the fp16/bf16
// weight copy in the same pass, and casts. Memory-bound passes move 16 bytes per thread where C % 8 == 0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "backend/cuda/cuda_kernels.h"

namespace {

enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };  // dlp_dtype values

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// V elements moved as one access: 16 bytes for 8 x 16-bit, 2 x 16 bytes for 8 x fp32.
template <typename T, int V> struct alignas(V * sizeof(T) >= 16 ? 16 : V * sizeof(T)) Vec {
    T e[V];
};
template <typename T, int V> __device__ __forceinline__ Vec<T, V> vload(const T *p) {
    return *reinterpret_cast<const Vec<T, V> *>(p);
}
template <typename T, int V> __device__ __forceinline__ void vstore(T *p, const Vec<T, V> &v) {
    *reinterpret_cast<Vec<T, V> *>(p) = v;
}

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t work, int64_t per_block = kThreads, int64_t cap = 8192) {
    int64_t b = (work + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

inline bool aligned16(const void *p) { return p == nullptr || ((uintptr_t)p & 15u) == 0; }

// Calls F.template operator()<T>() with T the element type of dt.
template <typename F> cudaError_t dispatch(int dt, F f) {
    switch (dt) {
    case DT_F32: return f((float *)nullptr);
    case DT_BF16: return f((__nv_bfloat16 *)nullptr);
    case DT_F16: return f((__half *)nullptr);
    default: return cudaErrorInvalidValue;
    }
}

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

template <typename T> __global__ void fill_uniform_k(T *x, int64_t n, uint64_t seed, float lo, float hi) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float u = (float)(mix64(seed ^ mix64((uint64_t)i)) >> 40) * (1.0f / 16777216.0f);
        x[i] = from_f<T>(lo + (hi - lo) * u);
    }
}

template <typename S, typename D>
__global__ void cast_k(const S *src, D *dst, int64_t n, float scale, const float *scale_dev) {
    float sc = scale * (scale_dev ? *scale_dev : 1.0f);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = from_f<D>(to_f(src[i]) * sc);
}

// ---- batch-norm statistics --------------------------------------------------------------------------------
// A block of 256 threads covers `tpr` channel groups (V channels each) and 256/tpr row lanes; blockIdx.x picks a
// range of rows, blockIdx.y a range of channel groups. Sums are taken relative to a per-channel shift (forward:
// the first row's value; backward: the saved mean) to keep fp32 sums well conditioned; blocks are combined in
// double by the finalize kernels.
struct BnGeom {
    int V, G, tpr, gy, lanes, nblk;
    int64_t rows_per_blk;
};

inline BnGeom bn_geom(int64_t rows, int C, int sms) {
    BnGeom g;
    g.V = C % 8 == 0 ? 8 : 1;
    g.G = C / g.V;
    int m = g.G < 32 ? g.G : 32;
    g.tpr = 1;
    while (g.tpr * 2 <= m) g.tpr *= 2;
    g.gy = (g.G + g.tpr - 1) / g.tpr;
    g.lanes = kThreads / g.tpr;
    int64_t target = (int64_t)(sms > 0 ? sms : 132) * 4 / g.gy;
    if (target < 1) target = 1;
    int64_t need = (rows + g.lanes - 1) / g.lanes;
    int64_t nb = target < need ? target : need;
    if (nb > 1024) nb = 1024;
    if (nb < 1) nb = 1;
    g.nblk = (int)nb;
    g.rows_per_blk = (rows + nb - 1) / nb;
    return g;
}

// mode 0 (forward): q0 = sum(x - sh), q1 = sum((x - sh)^2), sh = x[row 0].
// mode 1 (backward): with g = relu ? (y > 0 ? dy : 0) : dy, q0 = sum(g), q1 = sum(g * (x - mean)).
template <typename T, int V, int MODE>
__global__ void __launch_bounds__(kThreads) bn_stats_k(const T *x, const T *dy, const T *y, int relu,
                                                        const float *mean, int64_t rows, int C, int tpr,
                                                        int64_t rows_per_blk, float *part) {
    __shared__ float sm[2][kThreads * V];
    const int G = C / V;
    const int tx = threadIdx.x % tpr, ty = threadIdx.x / tpr, lanes = blockDim.x / tpr;
    const int g = blockIdx.y * tpr + tx;
    float q0[V], q1[V], sh[V];
#pragma unroll
    for (int j = 0; j < V; j++) q0[j] = q1[j] = sh[j] = 0.f;
    if (g < G) {
        const int c0 = g * V;
        if (MODE == 0) {
#pragma unroll
            for (int j = 0; j < V; j++) sh[j] = to_f(x[c0 + j]);
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) sh[j] = mean[c0 + j];
        }
        int64_t r0 = blockIdx.x * rows_per_blk, r1 = r0 + rows_per_blk < rows ? r0 + rows_per_blk : rows;
        for (int64_t r = r0 + ty; r < r1; r += lanes) {
            const int64_t off = r * C + c0;
            Vec<T, V> xv = vload<T, V>(x + off);
            if (MODE == 0) {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float d = to_f(xv.e[j]) - sh[j];
                    q0[j] += d;
                    q1[j] += d * d;
                }
            } else {
                Vec<T, V> gv = vload<T, V>(dy + off);
                Vec<T, V> yv;
                if (relu) yv = vload<T, V>(y + off);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float gg = to_f(gv.e[j]);
                    if (relu && !(to_f(yv.e[j]) > 0.f)) gg = 0.f;
                    q0[j] += gg;
                    q1[j] += gg * (to_f(xv.e[j]) - sh[j]);
                }
            }
        }
    }
#pragma unroll
    for (int j = 0; j < V; j++) {
        sm[0][threadIdx.x * V + j] = q0[j];
        sm[1][threadIdx.x * V + j] = q1[j];
    }
    __syncthreads();
    if (ty == 0 && g < G) {
        for (int l = 1; l < lanes; l++) {
            const int t = l * tpr + tx;
#pragma unroll
            for (int j = 0; j < V; j++) {
                q0[j] += sm[0][t * V + j];
                q1[j] += sm[1][t * V + j];
            }
        }
        const int nblk = gridDim.x;
#pragma unroll
        for (int j = 0; j < V; j++) {
            part[(int64_t)blockIdx.x * C + g * V + j] = q0[j];
            part[((int64_t)nblk + blockIdx.x) * C + g * V + j] = q1[j];
        }
    }
}

// Channel c's two sums over the nblk per-block partials (the first nblk rows of part, then the next nblk).
__device__ __forceinline__ void bn_part_sums(const float *part, int nblk, int C, int c, double *s1, double *s2) {
    double a = 0, b = 0;
    for (int k = 0; k < nblk; k++) {
        a += part[(int64_t)k * C + c];
        b += part[((int64_t)nblk + k) * C + c];
    }
    *s1 = a;
    *s2 = b;
}

template <typename T>
__global__ void bn_finalize_k(const float *part, int nblk, const T *x, int64_t rows, int C, const float *gamma,
                              const float *beta, float eps, float momentum, float *run_mean, float *run_var,
                              float *save_mean, float *save_invstd, float *scale, float *shift) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s1, s2;
    bn_part_sums(part, nblk, C, c, &s1, &s2);
    double M = (double)rows, d = s1 / M;
    double mean = (double)to_f(x[c]) + d;
    double var = s2 / M - d * d;
    if (var < 0) var = 0;
    double invstd = 1.0 / sqrt(var + (double)eps);
    save_mean[c] = (float)mean;
    save_invstd[c] = (float)invstd;
    if (run_mean) {
        double unbiased = rows > 1 ? var * M / (M - 1) : var;
        run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mean);
        run_var[c] = (float)((1.0 - momentum) * run_var[c] + momentum * unbiased);
    }
    double sc = (double)gamma[c] * invstd;
    scale[c] = (float)sc;
    shift[c] = (float)((double)beta[c] - mean * sc);
}

__global__ void bn_eval_prepare_k(const float *gamma, const float *beta, const float *rm, const float *rv, float eps,
                                  int C, float *scale, float *shift) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sc = (double)gamma[c] / sqrt((double)rv[c] + (double)eps);
    scale[c] = (float)sc;
    shift[c] = (float)((double)beta[c] - (double)rm[c] * sc);
}

__global__ void bn_bwd_finalize_k(const float *part, int nblk, int64_t rows, int C, const float *gamma,
                                  const float *save_invstd, const float *save_mean, float *dgamma, float *dbeta,
                                  float *coef) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s1, s2;
    bn_part_sums(part, nblk, C, c, &s1, &s2);
    double M = (double)rows, is = save_invstd[c], mean = save_mean[c];
    dgamma[c] = (float)(s2 * is);
    dbeta[c] = (float)s1;
    // dx = a * (g - s1/M - (x - mean) * is^2 * s2/M), a = gamma * invstd
    double a = (double)gamma[c] * is, b = s1 / M, cc = is * is * s2 / M;
    coef[c] = (float)a;
    coef[C + c] = (float)(-a * cc);
    coef[2 * C + c] = (float)(a * (cc * mean - b));
}

// ---- elementwise passes ------------------------------------------------------------------------------------
template <typename T, int V>
__global__ void apply_k(const T *x, const T *z, T *y, int64_t nvec, int C, const float *scale, const float *shift,
                        int relu) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = i * V;
        const int c0 = (int)(base % C);
        Vec<T, V> xv = vload<T, V>(x + base), out;
        Vec<T, V> zv;
        if (z) zv = vload<T, V>(z + base);
#pragma unroll
        for (int j = 0; j < V; j++) {
            const int c = V == 1 ? c0 : c0 + j;
            float v = to_f(xv.e[j]);
            if (scale) v *= scale[c];
            if (shift) v += shift[c];
            if (z) v += to_f(zv.e[j]);
            if (relu) v = v > 0.f ? v : 0.f;
            out.e[j] = from_f<T>(v);
        }
        vstore<T, V>(y + base, out);
    }
}

template <typename T, int V>
__global__ void bwd_apply_k(const T *x, const T *dy, const T *y, int64_t nvec, int C, int relu, const float *coef,
                            T *dx, int acc_dx, T *dz, int acc_dz) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = i * V;
        const int c0 = (int)(base % C);
        Vec<T, V> gv = vload<T, V>(dy + base);
        float g[V];
        if (relu) {
            Vec<T, V> yv = vload<T, V>(y + base);
#pragma unroll
            for (int j = 0; j < V; j++) g[j] = to_f(yv.e[j]) > 0.f ? to_f(gv.e[j]) : 0.f;
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) g[j] = to_f(gv.e[j]);
        }
        if (dx) {
            Vec<T, V> o, old;
            if (acc_dx) old = vload<T, V>(dx + base);
            if (coef) {
                Vec<T, V> xv = vload<T, V>(x + base);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const int c = c0 + j;
                    float v = coef[c] * g[j] + coef[C + c] * to_f(xv.e[j]) + coef[2 * C + c];
                    if (acc_dx) v += to_f(old.e[j]);
                    o.e[j] = from_f<T>(v);
                }
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) o.e[j] = from_f<T>(acc_dx ? g[j] + to_f(old.e[j]) : g[j]);
            }
            vstore<T, V>(dx + base, o);
        }
        if (dz) {
            Vec<T, V> o, old;
            if (acc_dz) old = vload<T, V>(dz + base);  // after the dx store: dz may be dx (x + x)
#pragma unroll
            for (int j = 0; j < V; j++) o.e[j] = from_f<T>(acc_dz ? g[j] + to_f(old.e[j]) : g[j]);
            vstore<T, V>(dz + base, o);
        }
    }
}

// The NHWC coordinates of a flat index i = ((n * H + h) * W + w) * C + c.
__device__ __forceinline__ void nhwc_of(int64_t i, int H, int W, int C, int *n, int *h, int *w, int *c) {
    *c = (int)(i % C);
    int64_t t = i / C;
    *w = (int)(t % W);
    t /= W;
    *h = (int)(t % H);
    *n = (int)(t / H);
}

// ---- pooling ----------------------------------------------------------------------------------------------
template <typename T>
__global__ void maxpool_fwd_k(const T *x, int N, int H, int W, int C, int k, int stride, int pad, int OH, int OW,
                              T *y, uint8_t *idx) {
    const int64_t total = (int64_t)N * OH * OW * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int n, oh, ow, c;
        nhwc_of(i, OH, OW, C, &n, &oh, &ow, &c);
        const int h0 = oh * stride - pad, w0 = ow * stride - pad;
        float best = -INFINITY;
        int bi = 255;
        for (int a = 0; a < k; a++) {
            const int h = h0 + a;
            if (h < 0 || h >= H) continue;
            for (int b = 0; b < k; b++) {
                const int w = w0 + b;
                if (w < 0 || w >= W) continue;
                const float v = to_f(x[(((int64_t)n * H + h) * W + w) * C + c]);
                if (v > best || (v != v && best == best)) {  // first maximum wins; NaN propagates
                    best = v;
                    bi = a * k + b;
                }
            }
        }
        y[i] = from_f<T>(best);
        if (idx) idx[i] = (uint8_t)bi;
    }
}

template <typename T>
__global__ void maxpool_bwd_k(const T *dy, const uint8_t *idx, int N, int H, int W, int C, int k, int stride, int pad,
                              int OH, int OW, T *dx, int acc) {
    const int64_t total = (int64_t)N * H * W * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int n, h, w, c;
        nhwc_of(i, H, W, C, &n, &h, &w, &c);
        const int lh = h + pad - k + 1, lw = w + pad - k + 1;
        const int oh0 = lh <= 0 ? 0 : (lh + stride - 1) / stride, ow0 = lw <= 0 ? 0 : (lw + stride - 1) / stride;
        int oh1 = (h + pad) / stride, ow1 = (w + pad) / stride;
        if (oh1 > OH - 1) oh1 = OH - 1;
        if (ow1 > OW - 1) ow1 = OW - 1;
        float sum = 0.f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                const int64_t o = (((int64_t)n * OH + oh) * OW + ow) * C + c;
                const int pos = (h - (oh * stride - pad)) * k + (w - (ow * stride - pad));
                if (idx[o] == pos) sum += to_f(dy[o]);
            }
        if (acc) sum += to_f(dx[i]);
        dx[i] = from_f<T>(sum);
    }
}

template <typename T> __global__ void avgpool_fwd_k(const T *x, int N, int HW, int C, T *y) {
    const int64_t total = (int64_t)N * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = i / C, c = i % C;
        float s = 0.f;
        for (int p = 0; p < HW; p++) s += to_f(x[(n * HW + p) * C + c]);
        y[i] = from_f<T>(s / (float)HW);
    }
}

template <typename T> __global__ void avgpool_bwd_k(const T *dy, int N, int HW, int C, T *dx, int acc) {
    const int64_t total = (int64_t)N * HW * C;
    const float inv = 1.0f / (float)HW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C, n = i / ((int64_t)HW * C);
        float v = to_f(dy[n * C + c]) * inv;
        if (acc) v += to_f(dx[i]);
        dx[i] = from_f<T>(v);
    }
}

// ---- FC bias, loss ------------------------------------------------------------------------------------------
__global__ void bias_rows_k(float *y, const float *b, int N, int K) {
    const int64_t total = (int64_t)N * K;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += b[i % K];
}

__global__ void bias_grad_k(const float *dy, int N, int K, float *db) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    double s = 0;
    for (int n = 0; n < N; n++) s += dy[(int64_t)n * K + k];
    db[k] = (float)s;
}

template <typename R> __device__ R block_reduce(R v, R (*op)(R, R), R *sh) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, nw = (blockDim.x + 31) / 32;
    __syncthreads();  // sh may still be read from a previous reduction
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = sh[0];
    for (int i = 1; i < nw; i++) v = op(v, sh[i]);
    return v;
}
__device__ float op_max(float a, float b) { return a > b ? a : b; }
__device__ float op_addf(float a, float b) { return a + b; }
__device__ int op_addi(int a, int b) { return a + b; }
__device__ double op_addd(double a, double b) { return a + b; }

template <typename T>
__global__ void __launch_bounds__(kThreads) xent_k(const float *logits, const int32_t *labels, int N, int K,
                                                    const dlp_cuk_loss_args *args, const float *loss_scale,
                                                    float *sample_loss, int32_t *flags, float *dlogits, T *dlogits_c) {
    __shared__ float shf[32];
    __shared__ int shi[32];
    const int r = blockIdx.x;
    const int n = args->n;
    const float eps = args->smoothing;
    const float *z = logits + (int64_t)r * K;
    float *d = dlogits + (int64_t)r * K;
    if (r >= n) {
        for (int k = threadIdx.x; k < K; k += blockDim.x) {
            d[k] = 0.f;
            if (dlogits_c) dlogits_c[(int64_t)r * K + k] = from_f<T>(0.f);
        }
        if (threadIdx.x == 0) {
            sample_loss[r] = 0.f;
            flags[r] = 0;
        }
        return;
    }
    const int y = labels[r];
    float m = -INFINITY;
    for (int k = threadIdx.x; k < K; k += blockDim.x) m = z[k] > m ? z[k] : m;
    m = block_reduce<float>(m, op_max, shf);
    float se = 0.f, sz = 0.f;
    int gt = 0;
    const float zy = z[y];
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        se += __expf(z[k] - m);
        sz += z[k];
        gt += z[k] > zy || (z[k] == zy && k < y);  // ranks above the label: larger, or equal with a lower index
    }
    se = block_reduce<float>(se, op_addf, shf);
    sz = block_reduce<float>(sz, op_addf, shf);
    gt = block_reduce<int>(gt, op_addi, shi);
    const float lse = m + logf(se);
    const float S = loss_scale ? *loss_scale : 1.0f;
    const float coef = S / (float)n, off = eps / (float)K;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        const float p = __expf(z[k] - lse);
        const float q = off + (k == y ? 1.0f - eps : 0.f);
        const float g = (p - q) * coef;
        d[k] = g;
        if (dlogits_c) dlogits_c[(int64_t)r * K + k] = from_f<T>(g);
    }
    if (threadIdx.x == 0) {
        sample_loss[r] = lse - (1.0f - eps) * zy - eps * sz / (float)K;
        flags[r] = (gt == 0 ? 1 : 0) | (gt < 5 ? 2 : 0);
    }
}

__global__ void __launch_bounds__(kThreads) loss_reduce_k(const float *sample_loss, const int32_t *flags, int N,
                                                           const dlp_cuk_loss_args *args, dlp_cuk_loss_out *out) {
    __shared__ double shd[32];
    __shared__ int shi[32];
    const int n = args->n < N ? args->n : N;
    double s = 0;
    int t1 = 0, t5 = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        s += sample_loss[i];
        t1 += flags[i] & 1;
        t5 += (flags[i] >> 1) & 1;
    }
    s = block_reduce<double>(s, op_addd, shd);
    t1 = block_reduce<int>(t1, op_addi, shi);
    t5 = block_reduce<int>(t5, op_addi, shi);
    if (threadIdx.x == 0) {
        out->loss_sum = s;
        out->top1 = t1;
        out->top5 = t5;
    }
}

// ---- gradients, update ----------------------------------------------------------------------------------------
template <typename T>
__global__ void grad_finalize_k(const dlp_cuk_seg *segs, const T *gc, float *g32, const float *loss_scale,
                                int32_t *found_inf) {
    const dlp_cuk_seg sg = segs[blockIdx.y];
    const float inv = loss_scale ? 1.0f / *loss_scale : 1.0f;
    int bad = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < sg.count;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = sg.offset + i;
        float v = (sg.half ? to_f(gc[sg.coffset + i]) : g32[j]) * inv;
        g32[j] = v;
        bad |= !isfinite(v);
    }
    bad = __syncthreads_or(bad);
    if (bad && found_inf && threadIdx.x == 0) atomicExch(found_inf, 1);
}

template <typename T>
__global__ void sgd_k(const dlp_cuk_seg *segs, float *w, T *wc, float *v, const float *g, const uint8_t *nodecay,
                      const dlp_cuk_sgd_args *a, const int32_t *found_inf) {
    if (found_inf && *found_inf) return;
    const dlp_cuk_seg sg = segs[blockIdx.y];
    const float lr = a->lr, mom = a->momentum, wd = a->weight_decay;
    const int nest = a->nesterov, all = a->decay_all;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < sg.count;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = sg.offset + i;
        float gi = g[j], wi = w[j];
        if (wd != 0.f && (all || !nodecay || !nodecay[j])) gi += wd * wi;
        if (mom != 0.f) {
            const float vi = mom * v[j] + gi;
            v[j] = vi;
            gi = nest ? gi + mom * vi : vi;
        }
        wi -= lr * gi;
        w[j] = wi;
        if (sg.copy) wc[sg.coffset + i] = from_f<T>(wi);
    }
}

template <typename T> __global__ void refresh_k(const dlp_cuk_seg *segs, const float *w, T *wc) {
    const dlp_cuk_seg sg = segs[blockIdx.y];
    if (!sg.copy) return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < sg.count;
         i += (int64_t)gridDim.x * blockDim.x)
        wc[sg.coffset + i] = from_f<T>(w[sg.offset + i]);
}

__global__ void scaler_update_k(float *scale, int32_t *good, const int32_t *found_inf, int interval) {
    if (*found_inf) {
        *scale = *scale * 0.5f < 1.0f ? 1.0f : *scale * 0.5f;
        *good = 0;
    } else if (++*good >= interval) {
        if (*scale * 2.0f < 16777216.0f) *scale *= 2.0f;
        *good = 0;
    }
}

// The direct weight-gradient kernel (dlp_cuk_conv_wgrad below).
template <typename T>
__global__ void conv_wgrad_k(const T *x, const T *dy, int N, int H, int W, int C, int K, int R, int S, int stride,
                             int pad, int OH, int OW, int64_t per_blk, float *acc) {
    const int k = blockIdx.x;
    const int64_t P = (int64_t)N * OH * OW, lo = blockIdx.y * per_blk;
    const int64_t hi = lo + per_blk < P ? lo + per_blk : P;
    const int RSC = R * S * C;
    for (int o = threadIdx.x; o < RSC; o += blockDim.x) {
        const int c = o % C, s = (o / C) % S, r = o / (C * S);
        float a = 0.f;
        for (int64_t q = lo; q < hi; q++) {
            const int ow = (int)(q % OW), oh = (int)((q / OW) % OH), n = (int)(q / ((int64_t)OW * OH));
            const int ih = oh * stride - pad + r, iw = ow * stride - pad + s;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            a += to_f(dy[q * K + k]) * to_f(x[(((int64_t)n * H + ih) * W + iw) * C + c]);
        }
        atomicAdd(&acc[(int64_t)k * RSC + o], a);
    }
}

}  // namespace

// ================================= launchers ===================================================================
extern "C" {

cudaError_t dlp_cuk_fill_uniform(void *x, int dt, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        fill_uniform_k<T><<<grid_for(n), kThreads, 0, s>>>((T *)x, n, seed, lo, hi);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_cast(const void *src, int sdt, void *dst, int ddt, int64_t n, float scale, const float *scale_dev,
                         cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    return dispatch(sdt, [&](auto *sp) {
        using S = std::remove_pointer_t<decltype(sp)>;
        return dispatch(ddt, [&](auto *dp) {
            using D = std::remove_pointer_t<decltype(dp)>;
            cast_k<S, D><<<grid_for(n), kThreads, 0, s>>>((const S *)src, (D *)dst, n, scale, scale_dev);
            return cudaGetLastError();
        });
    });
}

// ---- direct convolution weight gradient (the fallback where cuDNN offers no backward-filter algorithm) -------
// acc (K, R, S, C) fp32 += sum over (n, oh, ow) of dy(n, oh, ow, k) * x(n, oh*stride - pad + r, ow*stride - pad + s, c),
// NHWC. blockIdx.x picks k, blockIdx.y a range of output positions; a thread owns output elements o = (r, s, c)
// (o += blockDim.x) and walks the range: every thread of a block reads the same dy value (a broadcast) and
// neighbouring (s, c) of x. Slow next to cuDNN, but it has no shape or layout it refuses.

cudaError_t dlp_cuk_conv_wgrad(const void *x, const void *dy, int dt, int N, int H, int W, int C, int K, int R, int S,
                               int stride, int pad, int OH, int OW, float *acc, cudaStream_t s) {
    const int64_t P = (int64_t)N * OH * OW;
    if (P <= 0 || K <= 0 || R * S * C <= 0) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(acc, 0, (size_t)K * R * S * C * sizeof(float), s);
    if (e != cudaSuccess) return e;
    int64_t chunks = 4096 / K > 1 ? 4096 / K : 1;  // ~4096 blocks in all
    if (chunks > 65535) chunks = 65535;
    if (chunks > P) chunks = P;
    const int64_t per_blk = (P + chunks - 1) / chunks;
    chunks = (P + per_blk - 1) / per_blk;
    const int threads = R * S * C < kThreads ? ((R * S * C + 31) / 32) * 32 : kThreads;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        conv_wgrad_k<T><<<dim3((unsigned)K, (unsigned)chunks), threads, 0, s>>>(
            (const T *)x, (const T *)dy, N, H, W, C, K, R, S, stride, pad, OH, OW, per_blk, acc);
        return cudaGetLastError();
    });
}

int dlp_cuk_bn_blocks(int64_t rows, int C, int sms) { return bn_geom(rows, C, sms).nblk; }

static cudaError_t bn_stats_launch(int mode, const void *x, const void *dy, const void *y, int relu, const float *mean,
                                   int dt, int64_t rows, int C, int sms, float *part, cudaStream_t s) {
    if (rows <= 0 || C <= 0) return cudaSuccess;
    BnGeom g = bn_geom(rows, C, sms);
    // The finalize kernels recompute the same geometry, so the vector width may not change here: every buffer
    // comes from cudaMalloc (256-byte aligned), and a misaligned one is a bug.
    if (g.V == 8 && !(aligned16(x) && aligned16(dy) && aligned16(y))) return cudaErrorMisalignedAddress;
    dim3 grid(g.nblk, g.gy);
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        if (g.V == 8) {
            if (mode == 0)
                bn_stats_k<T, 8, 0><<<grid, kThreads, 0, s>>>((const T *)x, nullptr, nullptr, 0, nullptr, rows, C,
                                                             g.tpr, g.rows_per_blk, part);
            else
                bn_stats_k<T, 8, 1><<<grid, kThreads, 0, s>>>((const T *)x, (const T *)dy, (const T *)y, relu, mean,
                                                             rows, C, g.tpr, g.rows_per_blk, part);
        } else {
            if (mode == 0)
                bn_stats_k<T, 1, 0><<<grid, kThreads, 0, s>>>((const T *)x, nullptr, nullptr, 0, nullptr, rows, C,
                                                             g.tpr, g.rows_per_blk, part);
            else
                bn_stats_k<T, 1, 1><<<grid, kThreads, 0, s>>>((const T *)x, (const T *)dy, (const T *)y, relu, mean,
                                                             rows, C, g.tpr, g.rows_per_blk, part);
        }
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_bn_stats(const void *x, int dt, int64_t rows, int C, int sms, float *part, cudaStream_t s) {
    return bn_stats_launch(0, x, nullptr, nullptr, 0, nullptr, dt, rows, C, sms, part, s);
}

cudaError_t dlp_cuk_bn_finalize(const float *part, const void *x, int dt, int64_t rows, int C, int sms,
                                const float *gamma, const float *beta, float eps, float momentum, float *run_mean,
                                float *run_var, float *save_mean, float *save_invstd, float *scale, float *shift,
                                cudaStream_t s) {
    if (C <= 0) return cudaSuccess;
    const int nblk = bn_geom(rows, C, sms).nblk;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        bn_finalize_k<T><<<(C + 127) / 128, 128, 0, s>>>(part, nblk, (const T *)x, rows, C, gamma, beta, eps, momentum,
                                                        run_mean, run_var, save_mean, save_invstd, scale, shift);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_bn_eval_prepare(const float *gamma, const float *beta, const float *run_mean, const float *run_var,
                                    float eps, int C, float *scale, float *shift, cudaStream_t s) {
    if (C <= 0) return cudaSuccess;
    bn_eval_prepare_k<<<(C + 127) / 128, 128, 0, s>>>(gamma, beta, run_mean, run_var, eps, C, scale, shift);
    return cudaGetLastError();
}

cudaError_t dlp_cuk_apply(const void *x, const void *z, void *y, int dt, int64_t rows, int C, const float *scale,
                          const float *shift, int relu, cudaStream_t s) {
    const int64_t n = rows * C;
    if (n <= 0) return cudaSuccess;
    const int V = (C % 8 == 0 && aligned16(x) && aligned16(z) && aligned16(y)) ? 8 : 1;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        if (V == 8)
            apply_k<T, 8><<<grid_for(n / 8), kThreads, 0, s>>>((const T *)x, (const T *)z, (T *)y, n / 8, C, scale,
                                                               shift, relu);
        else
            apply_k<T, 1><<<grid_for(n), kThreads, 0, s>>>((const T *)x, (const T *)z, (T *)y, n, C, scale, shift,
                                                           relu);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_bn_bwd_stats(const void *x, const void *dy, const void *y, int dt, int64_t rows, int C, int sms,
                                 int relu, const float *save_mean, float *part, cudaStream_t s) {
    return bn_stats_launch(1, x, dy, relu ? y : nullptr, relu, save_mean, dt, rows, C, sms, part, s);
}

cudaError_t dlp_cuk_bn_bwd_finalize(const float *part, int64_t rows, int C, int sms, const float *gamma,
                                    const float *save_mean, const float *save_invstd, float *dgamma, float *dbeta,
                                    float *coef, cudaStream_t s) {
    if (C <= 0) return cudaSuccess;
    const int nblk = bn_geom(rows, C, sms).nblk;
    bn_bwd_finalize_k<<<(C + 127) / 128, 128, 0, s>>>(part, nblk, rows, C, gamma, save_invstd, save_mean, dgamma,
                                                       dbeta, coef);
    return cudaGetLastError();
}

cudaError_t dlp_cuk_bwd_apply(const void *x, const void *dy, const void *y, int dt, int64_t rows, int C, int relu,
                              const float *coef, void *dx, int acc_dx, void *dz, int acc_dz, cudaStream_t s) {
    const int64_t n = rows * C;
    if (n <= 0 || (!dx && !dz)) return cudaSuccess;
    const int V =
        (C % 8 == 0 && aligned16(x) && aligned16(dy) && aligned16(y) && aligned16(dx) && aligned16(dz)) ? 8 : 1;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        if (V == 8)
            bwd_apply_k<T, 8><<<grid_for(n / 8), kThreads, 0, s>>>((const T *)x, (const T *)dy, (const T *)y, n / 8, C,
                                                                   relu, coef, (T *)dx, acc_dx, (T *)dz, acc_dz);
        else
            bwd_apply_k<T, 1><<<grid_for(n), kThreads, 0, s>>>((const T *)x, (const T *)dy, (const T *)y, n, C, relu,
                                                               coef, (T *)dx, acc_dx, (T *)dz, acc_dz);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_maxpool_fwd(const void *x, int dt, int N, int H, int W, int C, int k, int stride, int pad, int OH,
                                int OW, void *y, uint8_t *idx, cudaStream_t s) {
    const int64_t n = (int64_t)N * OH * OW * C;
    if (n <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        maxpool_fwd_k<T><<<grid_for(n), kThreads, 0, s>>>((const T *)x, N, H, W, C, k, stride, pad, OH, OW, (T *)y, idx);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_maxpool_bwd(const void *dy, const uint8_t *idx, int dt, int N, int H, int W, int C, int k,
                                int stride, int pad, int OH, int OW, void *dx, int acc, cudaStream_t s) {
    const int64_t n = (int64_t)N * H * W * C;
    if (n <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        maxpool_bwd_k<T><<<grid_for(n), kThreads, 0, s>>>((const T *)dy, idx, N, H, W, C, k, stride, pad, OH, OW,
                                                          (T *)dx, acc);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_avgpool_fwd(const void *x, int dt, int N, int HW, int C, void *y, cudaStream_t s) {
    const int64_t n = (int64_t)N * C;
    if (n <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        avgpool_fwd_k<T><<<grid_for(n), kThreads, 0, s>>>((const T *)x, N, HW, C, (T *)y);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_avgpool_bwd(const void *dy, int dt, int N, int HW, int C, void *dx, int acc, cudaStream_t s) {
    const int64_t n = (int64_t)N * HW * C;
    if (n <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        avgpool_bwd_k<T><<<grid_for(n), kThreads, 0, s>>>((const T *)dy, N, HW, C, (T *)dx, acc);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_bias_rows(float *y, const float *bias, int N, int K, cudaStream_t s) {
    const int64_t n = (int64_t)N * K;
    if (n <= 0) return cudaSuccess;
    bias_rows_k<<<grid_for(n), kThreads, 0, s>>>(y, bias, N, K);
    return cudaGetLastError();
}

cudaError_t dlp_cuk_bias_grad(const float *dy, int N, int K, float *db, cudaStream_t s) {
    if (K <= 0) return cudaSuccess;
    bias_grad_k<<<(K + 127) / 128, 128, 0, s>>>(dy, N, K, db);
    return cudaGetLastError();
}

cudaError_t dlp_cuk_softmax_xent(const float *logits, const int32_t *labels, int N, int K,
                                 const dlp_cuk_loss_args *args, const float *loss_scale, float *sample_loss,
                                 int32_t *sample_flags, float *dlogits, void *dlogits_c, int dt, cudaStream_t s) {
    if (N <= 0 || K <= 0) return cudaSuccess;
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        xent_k<T><<<N, kThreads, 0, s>>>(logits, labels, N, K, args, loss_scale, sample_loss, sample_flags, dlogits,
                                         (T *)dlogits_c);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_loss_reduce(const float *sample_loss, const int32_t *sample_flags, int N,
                                const dlp_cuk_loss_args *args, dlp_cuk_loss_out *out, cudaStream_t s) {
    loss_reduce_k<<<1, kThreads, 0, s>>>(sample_loss, sample_flags, N, args, out);
    return cudaGetLastError();
}

cudaError_t dlp_cuk_grad_finalize(const dlp_cuk_seg *segs, int nsegs, const void *gc, int dt, float *g32,
                                  const float *loss_scale, int32_t *found_inf, cudaStream_t s) {
    if (nsegs <= 0) return cudaSuccess;
    dim3 grid(32, nsegs);
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        grad_finalize_k<T><<<grid, kThreads, 0, s>>>(segs, (const T *)gc, g32, loss_scale, found_inf);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_sgd(const dlp_cuk_seg *segs, int nsegs, float *w, void *wc, int dt, float *v, const float *g,
                        const uint8_t *nodecay, const dlp_cuk_sgd_args *args, const int32_t *found_inf,
                        cudaStream_t s) {
    if (nsegs <= 0) return cudaSuccess;
    dim3 grid(32, nsegs);
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        sgd_k<T><<<grid, kThreads, 0, s>>>(segs, w, (T *)wc, v, g, nodecay, args, found_inf);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_refresh_copies(const dlp_cuk_seg *segs, int nsegs, const float *w, void *wc, int dt,
                                   cudaStream_t s) {
    if (nsegs <= 0) return cudaSuccess;
    dim3 grid(32, nsegs);
    return dispatch(dt, [&](auto *tp) {
        using T = std::remove_pointer_t<decltype(tp)>;
        refresh_k<T><<<grid, kThreads, 0, s>>>(segs, w, (T *)wc);
        return cudaGetLastError();
    });
}

cudaError_t dlp_cuk_scaler_update(float *scale, int32_t *good_steps, const int32_t *found_inf, int interval,
                                  cudaStream_t s) {
    scaler_update_k<<<1, 1, 0, s>>>(scale, good_steps, found_inf, interval);
    return cudaGetLastError();
}

}  // extern "C"
