// nn/resnet: the ResNet v1.5 family (torchvision's resnet18/34/50/101/152) built into a dlp_net, with
// torchvision's state_dict names and order, and torchvision's initialization, deterministic from a seed.
// Also small members of the same family for tests ("resnet-mini": few channels, one block per stage).
// Defines: dlp_resnet_cfg, dlp_resnet_cfg_from_name, dlp_resnet_build, dlp_model_build, dlp_resnet_init_params,
//          dlp_model_names.
#ifndef DLP_NN_RESNET_H
#define DLP_NN_RESNET_H
#include <stdint.h>

#include "backend/net.h"
#include "core/status.h"

typedef struct dlp_resnet_cfg {
    char arch[32];     // the name recorded in net->arch
    int bottleneck;    // 0: BasicBlock (expansion 1), 1: Bottleneck (expansion 4, stride on the 3x3: v1.5)
    int blocks[4];     // blocks per stage (resnet50: 3, 4, 6, 3)
    int width;         // stem and stage-1 channels (64); stage s has width << s planes
    int num_classes;   // fc outputs (1000)
    int in_channels;   // 3
    int height, width_px;  // input size (224 x 224); at least 32 x 32
} dlp_resnet_cfg;

// "resnet18" | "resnet34" | "resnet50" | "resnet101" | "resnet152" | "resnet-mini" (BasicBlock, width 8,
// 1 block per stage) | "resnet-mini-bottleneck" (Bottleneck, width 4, 1 block per stage), with the given
// classes and square input size. DLP_ERR_NOTFOUND (listing the names) for others.
dlp_status dlp_resnet_cfg_from_name(const char *name, int num_classes, int size, dlp_resnet_cfg *cfg);
// Builds the net: conv1 7x7/2, bn1, relu, maxpool 3x3/2 pad 1, layer1..layer4, global avgpool, fc.
// Within a block the layer order is conv1, bn1, relu, conv2, bn2, [relu, conv3, bn3], [downsample.0 (1x1 conv,
// stride), downsample.1 (BN)], add(main, shortcut), relu; so layers and parameters are in state_dict order.
dlp_status dlp_resnet_build(const dlp_resnet_cfg *cfg, dlp_net *net);
// dlp_resnet_cfg_from_name + dlp_resnet_build.
dlp_status dlp_model_build(const char *name, int num_classes, int size, dlp_net *net);
// "resnet18|resnet34|resnet50|resnet101|resnet152|resnet-mini|resnet-mini-bottleneck"
const char *dlp_model_names(void);

// torchvision's initialization into flat arrays (params: net->param_count, bufs: net->buf_count, either may be
// NULL): conv weights kaiming_normal_(mode=fan_out, relu): N(0, 2 / (K*R*S)); BN weight 1, bias 0, running mean
// 0, var 1; fc as nn.Linear: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)). zero_init_residual: the last
// BN of each residual block (bn2 / bn3) gets weight 0. Each tensor draws from its own stream of `seed`
// (stream = parameter index), so values do not depend on anything but (seed, net).
void dlp_resnet_init_params(const dlp_net *net, uint64_t seed, int zero_init_residual, float *params, float *bufs);

#endif
