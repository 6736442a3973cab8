// backend/net: building layer lists and their parameter tables.
#include "backend/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_kind_names[DLP_LAYER_KIND_COUNT] = {
    "input", "conv", "bn", "relu", "add", "maxpool", "avgpool", "fc",
};

const char *dlp_layer_kind_name(dlp_layer_kind k) {
    return (unsigned)k < DLP_LAYER_KIND_COUNT ? k_kind_names[k] : "?";
}

static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return 0;
}

static int add_layer(dlp_net *net, dlp_layer_kind kind, const char *name, int in0, int in1) {
    if (in0 >= net->nlayers || in1 >= net->nlayers || (kind != DLP_LAYER_INPUT && in0 < 0)) {
        DLP_ERR(DLP_ERR_INVALID, "net %s: layer %s takes an input that does not exist", net->arch, name ? name : "?");
        return -1;
    }
    if (grow((void **)&net->layers, &net->cap_layers, net->nlayers, sizeof(dlp_layer))) {
        DLP_ERR(DLP_ERR_NOMEM, "out of memory building net %s", net->arch);
        return -1;
    }
    dlp_layer *l = &net->layers[net->nlayers];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s", name ? name : "");
    l->in0 = in0;
    l->in1 = in1;
    l->param0 = net->nparams;
    l->buf0 = net->nbufs;
    if (in0 >= 0) {
        l->c = net->layers[in0].c;
        l->h = net->layers[in0].h;
        l->w = net->layers[in0].w;
    }
    return net->nlayers++;
}

static int add_param(dlp_net *net, int layer, const char *suffix, int is_buf, int no_decay, int ndim, const int64_t *shape) {
    dlp_param **arr = is_buf ? &net->bufs : &net->params;
    int *n = is_buf ? &net->nbufs : &net->nparams;
    int *cap = is_buf ? &net->cap_bufs : &net->cap_params;
    int64_t *count = is_buf ? &net->buf_count : &net->param_count;
    if (grow((void **)arr, cap, *n, sizeof(dlp_param))) {
        DLP_ERR(DLP_ERR_NOMEM, "out of memory building net %s", net->arch);
        return -1;
    }
    dlp_param *p = &(*arr)[*n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", net->layers[layer].name, suffix);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= shape[i];
    }
    p->offset = *count;
    p->layer = layer;
    p->no_decay = no_decay;
    *count += p->numel;
    if (is_buf) net->layers[layer].nbufs++;
    else net->layers[layer].nparams++;
    return (*n)++;
}

dlp_status dlp_net_init(dlp_net *net, const char *arch, int c, int h, int w) {
    memset(net, 0, sizeof *net);
    snprintf(net->arch, sizeof net->arch, "%s", arch);
    if (c <= 0 || h <= 0 || w <= 0) return DLP_ERR(DLP_ERR_INVALID, "net %s: bad input shape %dx%dx%d", arch, c, h, w);
    int i = add_layer(net, DLP_LAYER_INPUT, "input", -1, -1);
    if (i < 0) return dlp_err_status();
    net->layers[i].c = c;
    net->layers[i].h = h;
    net->layers[i].w = w;
    return DLP_OK;
}

void dlp_net_free(dlp_net *net) {
    free(net->layers);
    free(net->params);
    free(net->bufs);
    memset(net, 0, sizeof *net);
}

int dlp_net_conv(dlp_net *net, const char *name, int in, int out_c, int k, int stride, int pad) {
    int i = add_layer(net, DLP_LAYER_CONV, name, in, -1);
    if (i < 0) return -1;
    dlp_layer *l = &net->layers[i];
    int c = l->c;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->c = out_c;
    l->h = (l->h + 2 * pad - k) / stride + 1;
    l->w = (l->w + 2 * pad - k) / stride + 1;
    if (l->h <= 0 || l->w <= 0 || k <= 0 || stride <= 0) {
        DLP_ERR(DLP_ERR_INVALID, "net %s: conv %s gives an empty output (input too small?)", net->arch, name);
        return -1;
    }
    int64_t shape[4] = {out_c, c, k, k};
    if (add_param(net, i, "weight", 0, 0, 4, shape) < 0) return -1;
    return i;
}

int dlp_net_bn(dlp_net *net, const char *name, int in) {
    int i = add_layer(net, DLP_LAYER_BN, name, in, -1);
    if (i < 0) return -1;
    net->layers[i].bn_eps = 1e-5f;
    net->layers[i].bn_momentum = 0.1f;
    int64_t shape[1] = {net->layers[i].c};
    if (add_param(net, i, "weight", 0, 1, 1, shape) < 0 || add_param(net, i, "bias", 0, 1, 1, shape) < 0) return -1;
    if (add_param(net, i, "running_mean", 1, 0, 1, shape) < 0 || add_param(net, i, "running_var", 1, 0, 1, shape) < 0)
        return -1;
    return i;
}

int dlp_net_relu(dlp_net *net, int in) { return add_layer(net, DLP_LAYER_RELU, "relu", in, -1); }

int dlp_net_add(dlp_net *net, int a, int b) {
    int i = add_layer(net, DLP_LAYER_ADD, "add", a, b);
    if (i < 0) return -1;
    const dlp_layer *x = &net->layers[a], *y = &net->layers[b];
    if (x->c != y->c || x->h != y->h || x->w != y->w) {
        DLP_ERR(DLP_ERR_INVALID, "net %s: add of %dx%dx%d and %dx%dx%d", net->arch, x->c, x->h, x->w, y->c, y->h, y->w);
        return -1;
    }
    return i;
}

int dlp_net_maxpool(dlp_net *net, int in, int k, int stride, int pad) {
    int i = add_layer(net, DLP_LAYER_MAXPOOL, "maxpool", in, -1);
    if (i < 0) return -1;
    dlp_layer *l = &net->layers[i];
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->h = (l->h + 2 * pad - k) / stride + 1;
    l->w = (l->w + 2 * pad - k) / stride + 1;
    if (l->h <= 0 || l->w <= 0) {
        DLP_ERR(DLP_ERR_INVALID, "net %s: maxpool gives an empty output (input too small?)", net->arch);
        return -1;
    }
    return i;
}

int dlp_net_avgpool(dlp_net *net, int in) {
    int i = add_layer(net, DLP_LAYER_AVGPOOL, "avgpool", in, -1);
    if (i < 0) return -1;
    net->layers[i].h = net->layers[i].w = 1;
    return i;
}

int dlp_net_fc(dlp_net *net, const char *name, int in, int out_features) {
    int i = add_layer(net, DLP_LAYER_FC, name, in, -1);
    if (i < 0) return -1;
    dlp_layer *l = &net->layers[i];
    int64_t in_features = (int64_t)l->c * l->h * l->w;
    l->c = out_features;
    l->h = l->w = 1;
    int64_t wshape[2] = {out_features, in_features}, bshape[1] = {out_features};
    if (add_param(net, i, "weight", 0, 0, 2, wshape) < 0 || add_param(net, i, "bias", 0, 1, 1, bshape) < 0) return -1;
    net->num_classes = out_features;
    return i;
}

const dlp_param *dlp_net_find_param(const dlp_net *net, const char *name) {
    for (int i = 0; i < net->nparams; i++)
        if (strcmp(net->params[i].name, name) == 0) return &net->params[i];
    for (int i = 0; i < net->nbufs; i++)
        if (strcmp(net->bufs[i].name, name) == 0) return &net->bufs[i];
    return NULL;
}

int dlp_net_output(const dlp_net *net) { return net->nlayers - 1; }

int64_t dlp_net_layer_numel(const dlp_net *net, int layer) {
    const dlp_layer *l = &net->layers[layer];
    return (int64_t)l->c * l->h * l->w;
}

double dlp_net_forward_flops(const dlp_net *net) {
    double f = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->kind == DLP_LAYER_CONV) {
            const dlp_layer *x = &net->layers[l->in0];
            f += 2.0 * l->c * l->h * l->w * (double)x->c * l->k * l->k;
        } else if (l->kind == DLP_LAYER_FC) {
            f += 2.0 * l->c * (double)dlp_net_layer_numel(net, l->in0);
        }
    }
    return f;
}

dlp_status dlp_net_copy(dlp_net *dst, const dlp_net *src) {
    memset(dst, 0, sizeof *dst);
    memcpy(dst->arch, src->arch, sizeof dst->arch);
    dst->layers = malloc((size_t)(src->nlayers ? src->nlayers : 1) * sizeof(dlp_layer));
    dst->params = malloc((size_t)(src->nparams ? src->nparams : 1) * sizeof(dlp_param));
    dst->bufs = malloc((size_t)(src->nbufs ? src->nbufs : 1) * sizeof(dlp_param));
    if (!dst->layers || !dst->params || !dst->bufs) {
        dlp_net_free(dst);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory copying net %s", src->arch);
    }
    if (src->nlayers) memcpy(dst->layers, src->layers, (size_t)src->nlayers * sizeof(dlp_layer));
    if (src->nparams) memcpy(dst->params, src->params, (size_t)src->nparams * sizeof(dlp_param));
    if (src->nbufs) memcpy(dst->bufs, src->bufs, (size_t)src->nbufs * sizeof(dlp_param));
    dst->nlayers = dst->cap_layers = src->nlayers;
    dst->nparams = dst->cap_params = src->nparams;
    dst->nbufs = dst->cap_bufs = src->nbufs;
    dst->param_count = src->param_count;
    dst->buf_count = src->buf_count;
    dst->num_classes = src->num_classes;
    return DLP_OK;
}

int dlp_net_consumers(const dlp_net *net, int layer) {
    int n = 0;
    for (int i = 0; i < net->nlayers; i++) n += (net->layers[i].in0 == layer) + (net->layers[i].in1 == layer);
    return n;
}

dlp_status dlp_net_buckets(const dlp_net *net, int64_t bucket_elems, dlp_bucket **out, int *n) {
    *out = NULL;
    *n = 0;
    if (net->nparams == 0) return DLP_OK;
    dlp_bucket *b = calloc((size_t)net->nparams, sizeof *b);  // at most one bucket per parameter
    if (!b) return DLP_ERR(DLP_ERR_NOMEM, "out of memory cutting gradient buckets");
    int nb = 0, hi = net->nparams;
    int64_t acc = 0;
    for (int i = net->nparams - 1; i >= 0; i--) {
        acc += net->params[i].numel;
        if (i == 0 || (bucket_elems > 0 && acc >= bucket_elems)) {
            dlp_bucket *x = &b[nb++];
            x->param_lo = i;
            x->param_hi = hi;
            x->offset = net->params[i].offset;
            x->count = acc;
            x->ready_layer = net->params[i].layer;
            hi = i;
            acc = 0;
        }
    }
    *out = b;
    *n = nb;
    return DLP_OK;
}
