// nn/info: a model's shape in figures — layers by kind, FLOPs per layer and per image, parameters, activation
// memory — for `dlperf nn info` (which prints them) and its dlperf.nn-info/1 result.
// Defines: dlp_net_info, dlp_net_info_of, dlp_net_layer_flops, dlp_net_layer_params, dlp_net_layer_label,
//          dlp_net_info_json.
#ifndef DLP_NN_INFO_H
#define DLP_NN_INFO_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"

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

#endif
