// backend/loss: softmax cross-entropy with label smoothing and the label's rank, one sample at a time: the
// arithmetic the host backends share (ref calls it per sample; a backend may parallelize over samples).
// PyTorch's cross_entropy(label_smoothing=e): the target is (1-e) one-hot + e/K uniform, so per sample
//   loss = logsumexp(z) - (1-e) z_y - (e/K) sum_j z_j,   d loss / d z_j = softmax(z)_j - (1-e) [j=y] - e/K.
#include <math.h>

#include "backend/backend_impl.h"

dlp_status dlp_loss_check_labels(const int32_t *labels, int n, int64_t K) {
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= K)
            return DLP_ERR(DLP_ERR_INVALID, "label %d of sample %d is outside [0, %lld)", (int)labels[i], i,
                           (long long)K);
    return DLP_OK;
}

double dlp_loss_xent_sample(const float *z, int64_t K, int y, double e, float *d, int n, int64_t *rank) {
    double mx = -INFINITY, sum = 0, zsum = 0;
    for (int64_t j = 0; j < K; j++) mx = z[j] > mx ? z[j] : mx;
    for (int64_t j = 0; j < K; j++) {
        sum += exp(z[j] - mx);
        zsum += z[j];
    }
    const double lse = mx + log(sum);
    int64_t r = 0;
    for (int64_t j = 0; j < K; j++) r += z[j] > z[y] || (z[j] == z[y] && j < y);
    *rank = r;
    if (d)
        for (int64_t j = 0; j < K; j++)
            d[j] = (float)((exp(z[j] - lse) - (j == y ? 1.0 - e : 0.0) - e / (double)K) / (double)n);
    return lse - (1.0 - e) * z[y] - e / (double)K * zsum;
}
