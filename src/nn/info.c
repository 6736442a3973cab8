// nn/info: a model's shape in figures (nn/info.h).
#include "nn/info.h"

#include <stdio.h>
#include <stdlib.h>

#include "nn/resnet.h"

void dlp_net_info_of(const dlp_net *net, dlp_net_info *out) {
    int64_t act = 0;
    out->conv_layers = out->bn_layers = 0;
    for (int i = 0; i < net->nlayers; i++) {
        out->conv_layers += net->layers[i].kind == DLP_LAYER_CONV;
        out->bn_layers += net->layers[i].kind == DLP_LAYER_BN;
        act += dlp_net_layer_numel(net, i);
    }
    out->forward_gflop = dlp_net_forward_flops(net) * 1e-9;
    out->activation_bytes = act * 4;
}

double dlp_net_layer_flops(const dlp_net *net, int layer) {
    const dlp_layer *l = &net->layers[layer];
    if (l->kind == DLP_LAYER_CONV) return 2.0 * l->c * l->h * l->w * (double)net->layers[l->in0].c * l->k * l->k;
    if (l->kind == DLP_LAYER_FC) return 2.0 * l->c * (double)dlp_net_layer_numel(net, l->in0);
    return 0;
}

int64_t dlp_net_layer_params(const dlp_net *net, int layer) {
    const dlp_layer *l = &net->layers[layer];
    int64_t np = 0;
    for (int p = l->param0; p < l->param0 + l->nparams; p++) np += net->params[p].numel;
    return np;
}

void dlp_net_layer_label(const dlp_net *net, int layer, char *buf, size_t len) {
    const dlp_layer *l = &net->layers[layer];
    if (l->kind == DLP_LAYER_ADD) snprintf(buf, len, "add(#%d, #%d)", l->in0, l->in1);
    else if (l->kind == DLP_LAYER_INPUT) snprintf(buf, len, "input");
    else if (!l->nparams) snprintf(buf, len, "%s(#%d)", dlp_layer_kind_name(l->kind), l->in0);
    else snprintf(buf, len, "%s", l->name);
}

void dlp_net_info_json(const dlp_net *net, const dlp_net_info *in, json_t *o) {
    const dlp_layer *l0 = &net->layers[0];
    json_t *x = json_pack("{s:s, s:i, s:[iii], s:i, s:i, s:i, s:I, s:i, s:I, s:f, s:f, s:I}", "arch",
                          net->arch, "num_classes", net->num_classes, "input", l0->c, l0->h, l0->w, "layers",
                          net->nlayers - 1, "conv_layers", in->conv_layers, "bn_layers", in->bn_layers,
                          "parameters", (json_int_t)net->param_count, "parameter_tensors", net->nparams,
                          "bn_buffer_elems", (json_int_t)net->buf_count, "forward_gflop_per_image",
                          in->forward_gflop, "train_gflop_per_image", 3 * in->forward_gflop,
                          "activation_bytes_per_image", (json_int_t)in->activation_bytes);
    json_object_update(o, x);
    json_decref(x);
}

dlp_status dlp_model_init(const char *model, int classes, int size, uint64_t seed, int zero_init_residual, dlp_net *net,
                          float **params, float **bufs) {
    DLP_CHECK(dlp_model_build(model, classes, size, net));
    *params = malloc((size_t)(net->param_count ? net->param_count : 1) * sizeof(float));
    *bufs = malloc((size_t)(net->buf_count ? net->buf_count : 1) * sizeof(float));
    if (!*params || !*bufs) {
        free(*params), free(*bufs);
        dlp_net_free(net);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %s's parameters", model);
    }
    dlp_resnet_init_params(net, seed, zero_init_residual, *params, *bufs);
    return DLP_OK;
}

void dlp_model_work_ratio(const char *model, int size, double *work, double *params_ratio) {
    dlp_net r50, m;
    *work = *params_ratio = 1;
    if (dlp_model_build("resnet50", 1000, 224, &r50) != DLP_OK) return;
    if (dlp_model_build(model, 1000, size, &m) == DLP_OK) {
        *work = dlp_net_forward_flops(&m) / dlp_net_forward_flops(&r50);
        *params_ratio = (double)m.param_count / (double)r50.param_count;
        dlp_net_free(&m);
    }
    dlp_net_free(&r50);
}
