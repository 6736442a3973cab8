// backend/cpu/cpu_kernels: the oneDNN backend's own loops — BN running statistics, softmax cross-entropy
// with label smoothing on fp32 logits, the fused SGD update, gradient-bucket announcements.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu.h"

// running = (1 - m) running + m batch, with the unbiased variance var * M / (M - 1) (PyTorch's convention).
void cpu_bn_running_update(cpu_plan *p, const cpu_step *s) {
    (void)p;
    const float *mean = s->a, *var = s->b;
    float *rm = s->c, *rv = s->d;
    const float m = s->f;
    const double unbias = s->m > 1 ? (double)s->m / (double)(s->m - 1) : 1.0;
    for (int64_t c = 0; c < s->n; c++) {
        rm[c] = (1.0f - m) * rm[c] + m * mean[c];
        rv[c] = (float)((1.0 - m) * rv[c] + m * var[c] * unbias);
    }
}

// torch.optim.SGD with dampening 0 on n elements:
//   d = g + wd w;  v = momentum v + d;  d = nesterov ? d + momentum v : v;  w -= lr d
// One pass over w, v, g; the compiler vectorizes the loop (AVX-512 with -march=native); memory-bound, so on the
// plan's small-op threads (cpu.c).
void cpu_kernel_sgd(float *restrict w, float *restrict v, const float *restrict g, int64_t n, float lr,
                    float momentum, float wd, int nesterov, int threads) {
    if (momentum == 0.0f) {
#pragma omp parallel for simd schedule(static) if (n > 65536) num_threads(threads)
        for (int64_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
        return;
    }
    if (nesterov) {
#pragma omp parallel for simd schedule(static) if (n > 65536) num_threads(threads)
        for (int64_t i = 0; i < n; i++) {
            float d = g[i] + wd * w[i];
            float vi = momentum * v[i] + d;
            v[i] = vi;
            w[i] -= lr * (d + momentum * vi);
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n > 65536) num_threads(threads)
        for (int64_t i = 0; i < n; i++) {
            float vi = momentum * v[i] + (g[i] + wd * w[i]);
            v[i] = vi;
            w[i] -= lr * vi;
        }
    }
}

// PyTorch's cross_entropy(label_smoothing=e): per sample
//   loss = logsumexp(z) - (1-e) z_y - (e/K) sum_j z_j,   d loss / d z_j = softmax(z)_j - (1-e)[j=y] - e/K,
// averaged over n (sums in double). Top-k: the label's rank counts classes with a larger logit, or an equal one
// at a lower index (docs/nn.md).
dlp_status cpu_kernel_xent(const float *z, int n, int batch, int64_t K, const int32_t *labels, float smoothing,
                           float *dz, dlp_loss_out *out) {
    if (!(smoothing >= 0.0f && smoothing <= 1.0f))
        return DLP_ERR(DLP_ERR_INVALID, "label smoothing must be in [0, 1] (got %g)", (double)smoothing);
    DLP_CHECK(dlp_loss_check_labels(labels, n, K));
    const double e = smoothing;
    double total = 0;
    int top1 = 0, top5 = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, top1, top5) if (n * K > 16384)
    for (int i = 0; i < n; i++) {
        int64_t rank;
        total += dlp_loss_xent_sample(z + (int64_t)i * K, K, labels[i], e, dz ? dz + (int64_t)i * K : NULL, n, &rank);
        top1 += rank < 1;
        top5 += rank < 5;
    }
    if (dz && batch > n) memset(dz + (int64_t)n * K, 0, (size_t)((int64_t)(batch - n) * K) * sizeof(float));
    out->loss = total / (double)n;
    out->correct_top1 = top1;
    out->correct_top5 = top5;
    return DLP_OK;
}

void cpu_bucket_fire(cpu_plan *p, const cpu_step *s) {
    if (!p->cfg.on_bucket) return;
    for (int64_t b = s->n; b < s->m; b++) p->cfg.on_bucket(p->cfg.bucket_ctx, p->buckets[b].offset, p->buckets[b].count);
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN (branch-free: vectorizes)
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

void cpu_kernel_add_relu_bwd(cpu_plan *p, const cpu_step *s) {
    (void)p;
    const cpu_tensor *td = s->a, *ta = s->b, *tb = s->c, *ty = s->d;
    const int64_t n = s->n;
    if (s->m) {
        uint16_t *d = td->data;
        const uint16_t *a = ta->data, *b = tb->data, *y = ty->data;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            const uint16_t sum = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
            d[i] = bf16_to_f32(y[i]) > 0.0f ? sum : 0;
        }
    } else {
        float *d = td->data;
        const float *a = ta->data, *b = tb->data, *y = ty->data;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) d[i] = y[i] > 0.0f ? a[i] + b[i] : 0.0f;
    }
}
