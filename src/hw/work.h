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

// --- the layers, for the GPU step model (hw/gpumodel) ----------------------------------------------------------
typedef enum {
    DLP_WL_CONV = 0, DLP_WL_BN, DLP_WL_RELU, DLP_WL_ADD, DLP_WL_POOL, DLP_WL_FC, DLP_WL_LOSS,
    DLP_WL_KIND_COUNT
} dlp_wl_kind;
const char *dlp_wl_kind_name(dlp_wl_kind k);

typedef struct dlp_wlayer {
    dlp_wl_kind kind;
    double flops;        // forward FLOPs per image (conv, fc: 2 x multiply-adds; 0 for the others)
    double in_elems;     // input activation elements per image
    double out_elems;    // output activation elements per image
    double params;       // weights (conv, fc)
} dlp_wlayer;

#define DLP_WORK_MAX_LAYERS 512
// Every layer of the forward pass in order (conv, BN, ReLU, residual add, pooling, fc, loss); *n layers.
dlp_status dlp_work_layers(const char *model, int height, int width, int classes, dlp_wlayer *out, int max, int *n);

#endif
