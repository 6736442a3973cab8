// serve/topk: softmax and the k most probable classes; the JPEG signature check.
#include <math.h>

#include "serve/serve.h"

void dlp_serve_topk(const float *logits, int n, int k, int *cls, float *prob) {
    if (k > n) k = n;
    // Softmax over the finite logits only: a NaN or infinite logit (bad weights, an fp16 overflow) would make every
    // probability NaN; such a class is never selected and its probability would be meaningless anyway.
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(logits[i]) && logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(logits[i])) sum += exp((double)logits[i] - mx);
    // Selection by insertion into a k-long sorted list: k is small (5).
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        if (!isfinite(v)) continue;
        if (m == k && !(v > logits[cls[m - 1]])) continue;  // ties keep the lower index
        int j = m < k ? m++ : k - 1;
        while (j > 0 && v > logits[cls[j - 1]]) {
            cls[j] = cls[j - 1];
            j--;
        }
        cls[j] = i;
    }
    for (int j = m; j < k; j++) cls[j] = -1;
    for (int j = 0; j < k; j++) prob[j] = cls[j] >= 0 ? (float)(exp((double)logits[cls[j]] - mx) / sum) : 0.0f;
}

int dlp_serve_is_jpeg(const uint8_t *b, size_t len) { return len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
