// nn/info: a model's shape in figures — layers by kind, FLOPs per layer and per image, parameters, activation
// memory — for `dlperf nn info` (which prints them) and its dlperf.nn-info/1 result; a model built with its
// initialized weights in one call (nn init, gpu bench/probe), and its work relative to ResNet-50 at 224 px.
// Defines: dlp_net_info, dlp_net_info_of, dlp_net_layer_flops, dlp_net_layer_params, dlp_net_layer_label,
//          dlp_net_info_json, dlp_model_init, dlp_model_work_ratio.
#ifndef DLP_NN_INFO_H
#define DLP_NN_INFO_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"
#include "core/status.h"

typedef struct dlp_net_info {
    int conv_layers, bn_layers;
    double forward_gflop;            // per image: conv + fc, a multiply-add counted as 2
    int64_t activation_bytes;        // per image: every layer's output in fp32
} dlp_net_info;
void dlp_net_info_of(const dlp_net *net, dlp_net_info *out);
double dlp_net_layer_flops(const dlp_net *net, int layer);     // per sample (conv and fc; 0 for the others)
int64_t dlp_net_layer_params(const dlp_net *net, int layer);
// "conv1", "add(#3, #7)", "relu(#5)", "input"
void dlp_net_layer_label(const dlp_net *net, int layer, char *buf, size_t len);
// The figures into the object o (arch, num_classes, input, layer counts, parameters, FLOPs, activations).
void dlp_net_info_json(const dlp_net *net, const dlp_net_info *in, json_t *o);

// The model built (dlp_model_build) with torchvision's initialization from seed in *params and *bufs (malloc'd;
// freed with the net on failure).
dlp_status dlp_model_init(const char *model, int classes, int size, uint64_t seed, int zero_init_residual, dlp_net *net,
                          float **params, float **bufs);
// A model's forward FLOPs and parameter count at size px over ResNet-50's at 224 px (1 and 1 when one cannot be built).
void dlp_model_work_ratio(const char *model, int size, double *work, double *params_ratio);

#endif
