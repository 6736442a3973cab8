// backend/net: what a backend executes — a network as a list of layers in topological order, with its
// parameters (trainable, fp32, one flat array in torchvision state_dict order) and buffers (BN running stats).
// nn/ builds nets (the ResNet family); backends turn a net into a plan. Tests build one-layer nets.
// Defines: dlp_layer_kind, dlp_layer, dlp_param, dlp_net, dlp_bucket, dlp_net_* helpers.
#ifndef DLP_BACKEND_NET_H
#define DLP_BACKEND_NET_H
#include <stdint.h>

#include "core/status.h"

typedef enum {
    DLP_LAYER_INPUT = 0,  // the batch: (N, C, H, W); always layer 0
    DLP_LAYER_CONV,       // weight (K, C, R, S), no bias; padding `pad`, stride `stride`, kernel k x k
    DLP_LAYER_BN,         // weight gamma (C), bias beta (C); buffers running_mean (C), running_var (C)
    DLP_LAYER_RELU,
    DLP_LAYER_ADD,        // in0 + in1 (same shape)
    DLP_LAYER_MAXPOOL,    // kernel k, stride, pad (padding is -inf, as PyTorch)
    DLP_LAYER_AVGPOOL,    // global average over H x W -> (N, C, 1, 1)
    DLP_LAYER_FC,         // weight (K, C*H*W), bias (K); input flattened per sample
    DLP_LAYER_KIND_COUNT
} dlp_layer_kind;

typedef struct dlp_layer {
    dlp_layer_kind kind;
    char name[48];     // torchvision module name: "layer1.0.bn1" (its parameters are "<name>.weight", ...)
    int in0, in1;      // producing layers (-1: none); in1 only for ADD
    int c, h, w;       // output shape per sample
    int k, stride, pad;  // CONV and MAXPOOL
    int param0, nparams; // its trainable parameters: net->params[param0 .. param0+nparams)
    int buf0, nbufs;     // its buffers: net->bufs[buf0 .. buf0+nbufs)
    float bn_eps;        // BN: 1e-5
    float bn_momentum;   // BN: 0.1 (PyTorch's convention: running = (1-m) running + m batch, var unbiased)
} dlp_layer;

typedef struct dlp_param {
    char name[64];     // torchvision state_dict key, e.g. "layer1.0.conv1.weight"
    int ndim;
    int64_t shape[4];
    int64_t numel;
    int64_t offset;    // in elements, into the flat parameter (or buffer) array
    int layer;         // owning layer
    int no_decay;      // BN scale/shift and biases (for "no weight decay on BN and bias")
} dlp_param;

typedef struct dlp_net {
    char arch[32];          // "resnet50", or a test's own name
    int nlayers, cap_layers;
    dlp_layer *layers;
    int nparams, cap_params;
    dlp_param *params;      // trainable, in state_dict order
    int64_t param_count;    // total trainable elements (length of the flat array)
    int nbufs, cap_bufs;
    dlp_param *bufs;        // running_mean / running_var, in state_dict order
    int64_t buf_count;
    int num_classes;        // output features of the last FC (0 if none)
} dlp_net;

// Building (used by nn/ and tests). Each add returns the new layer's index, or -1 with the error recorded.
dlp_status dlp_net_init(dlp_net *net, const char *arch, int c, int h, int w);  // adds the INPUT layer
void dlp_net_free(dlp_net *net);
int dlp_net_conv(dlp_net *net, const char *name, int in, int out_c, int k, int stride, int pad);
int dlp_net_bn(dlp_net *net, const char *name, int in);
int dlp_net_relu(dlp_net *net, int in);
int dlp_net_add(dlp_net *net, int a, int b);
int dlp_net_maxpool(dlp_net *net, int in, int k, int stride, int pad);
int dlp_net_avgpool(dlp_net *net, int in);
int dlp_net_fc(dlp_net *net, const char *name, int in, int out_features);

const dlp_param *dlp_net_find_param(const dlp_net *net, const char *name);  // trainable or buffer; NULL
int dlp_net_output(const dlp_net *net);  // index of the last layer
int64_t dlp_net_layer_numel(const dlp_net *net, int layer);  // c*h*w of one sample
// Multiply-accumulates x2 of one sample's forward pass (conv + fc); a training step is ~3x this.
double dlp_net_forward_flops(const dlp_net *net);
const char *dlp_layer_kind_name(dlp_layer_kind k);

// A deep copy of src into dst (dst is overwritten, not freed first). Plans keep their own copy.
dlp_status dlp_net_copy(dlp_net *dst, const dlp_net *src);
// Number of layers that take layer i as an input (ADD counts once per input it takes).
int dlp_net_consumers(const dlp_net *net, int layer);

// Gradient buckets: the flat parameter (= gradient) array cut at parameter boundaries into runs of at least
// bucket_elems elements (the last one cut may be smaller), taken from the end: bucket 0 holds the last
// parameters (the fc), since backward finishes them first. A bucket's gradients are final once backward has
// processed layer ready_layer (layers are processed in decreasing index order, and parameters are in layer order).
typedef struct dlp_bucket {
    int64_t offset, count;  // elements of the flat gradient array
    int param_lo, param_hi; // parameters [param_lo, param_hi) of net->params
    int ready_layer;        // the lowest layer index owning a parameter of this bucket
} dlp_bucket;
// bucket_elems <= 0: one bucket with everything. *out is malloc'ed (free()), *n gets the count (0 if the net has
// no parameters).
dlp_status dlp_net_buckets(const dlp_net *net, int64_t bucket_elems, dlp_bucket **out, int *n);

#endif
