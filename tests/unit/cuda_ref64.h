// tests/unit/cuda_ref64: a float64 reference executor of a dlp_net (NCHW, plain loops, OpenMP) for the cuda
// backend's checks — forward (training or eval BN), softmax cross-entropy, backward, SGD — independent of the
// backends under test, and itself checked against finite differences.
// Defines: r64, r64_init, r64_free, r64_forward, r64_loss, r64_backward, r64_sgd.
#ifndef DLP_TESTS_CUDA_REF64_H
#define DLP_TESTS_CUDA_REF64_H
#include <stdint.h>

#include "backend/net.h"

typedef struct r64 {
    const dlp_net *net;
    int N;
    double **y, **dy;      // per layer: N x numel, NCHW
    double *w, *gw;        // parameters and their gradients (flat, torchvision order)
    double *bufs;          // running statistics
    double **mean, **istd; // BN: batch statistics of the last training forward
    int **arg;             // MAXPOOL: flat input index of each output's maximum
} r64;

int r64_init(r64 *r, const dlp_net *net, int N, const float *params, const float *bufs);
void r64_free(r64 *r);
void r64_forward(r64 *r, const double *x, int train);
// Mean loss over the batch; writes d(loss)/d(logits) into dy of the last layer. top1: correct count (or NULL).
double r64_loss(r64 *r, const int32_t *labels, double smoothing, int *top1);
// Backward from dy of the last layer (set by r64_loss, or by the caller); fills gw and every dy.
void r64_backward(r64 *r);
void r64_sgd(r64 *r, double *v, double lr, double momentum, double wd, int nesterov, int decay_all);

#endif
