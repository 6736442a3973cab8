// hw/work: how much work a model is — forward FLOPs and trainable parameters of the ResNet v1.5 family,
// computed from the architecture (no net is built). Device profiles give per-image times for a reference
// work (ResNet-50 at 224x224, 1000 classes); other models and sizes scale by the FLOP ratio.
// Defines: dlp_model_work, dlp_work_resnet, dlp_work_ref, dlp_work_ratio.
#ifndef DLP_HW_WORK_H
#define DLP_HW_WORK_H
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_model_work {
    char model[16];       // "resnet50"
    int height, width;    // input size
    int classes;
    double fwd_flops;     // per image: 2 x multiply-adds of conv + fc layers (as dlp_net_forward_flops counts)
    int64_t params;       // trainable elements (conv, BN scale/shift, fc weight/bias): the gradient size
} dlp_model_work;

// resnet18/34/50/101/152 at height x width (>= 32) with `classes` outputs. DLP_ERR_NOTFOUND for other names.
dlp_status dlp_work_resnet(const char *model, int height, int width, int classes, dlp_model_work *out);
// The reference work: resnet50, 224x224, 1000 classes (8.18 GFLOP forward, 25,557,032 parameters).
const dlp_model_work *dlp_work_ref(void);
// fwd_flops / reference fwd_flops.
double dlp_work_ratio(const dlp_model_work *w);

#endif
