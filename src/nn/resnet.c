// nn/resnet: building the ResNet family and initializing it as torchvision does.
#include "nn/resnet.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"

typedef struct model_row {
    const char *name;
    int bottleneck, b0, b1, b2, b3, width;
} model_row;

static const model_row k_models[] = {
    {"resnet18", 0, 2, 2, 2, 2, 64},
    {"resnet34", 0, 3, 4, 6, 3, 64},
    {"resnet50", 1, 3, 4, 6, 3, 64},
    {"resnet101", 1, 3, 4, 23, 3, 64},
    {"resnet152", 1, 3, 8, 36, 3, 64},
    {"resnet-mini", 0, 1, 1, 1, 1, 8},
    {"resnet-mini-bottleneck", 1, 1, 1, 1, 1, 4},
};

const char *dlp_model_names(void) {
    return "resnet18|resnet34|resnet50|resnet101|resnet152|resnet-mini|resnet-mini-bottleneck";
}

dlp_status dlp_resnet_cfg_from_name(const char *name, int num_classes, int size, dlp_resnet_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        const model_row *m = &k_models[i];
        if (!name || strcmp(name, m->name) != 0) continue;
        snprintf(cfg->arch, sizeof cfg->arch, "%s", m->name);
        cfg->bottleneck = m->bottleneck;
        cfg->blocks[0] = m->b0;
        cfg->blocks[1] = m->b1;
        cfg->blocks[2] = m->b2;
        cfg->blocks[3] = m->b3;
        cfg->width = m->width;
        cfg->num_classes = num_classes;
        cfg->in_channels = 3;
        cfg->height = cfg->width_px = size;
        return DLP_OK;
    }
    return DLP_ERR(DLP_ERR_NOTFOUND, "unknown model '%s' (known: %s)", name ? name : "(none)", dlp_model_names());
}

// One residual block; returns the index of its output (the final relu), or -1.
static int block(dlp_net *net, const dlp_resnet_cfg *cfg, int in, const char *prefix, int planes, int stride) {
    char nm[48];
    const int in_c = net->layers[in].c;
    const int out_c = cfg->bottleneck ? planes * 4 : planes;
    int x;
    if (cfg->bottleneck) {
        snprintf(nm, sizeof nm, "%s.conv1", prefix);
        if ((x = dlp_net_conv(net, nm, in, planes, 1, 1, 0)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.bn1", prefix);
        if ((x = dlp_net_bn(net, nm, x)) < 0 || (x = dlp_net_relu(net, x)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.conv2", prefix);
        if ((x = dlp_net_conv(net, nm, x, planes, 3, stride, 1)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.bn2", prefix);
        if ((x = dlp_net_bn(net, nm, x)) < 0 || (x = dlp_net_relu(net, x)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.conv3", prefix);
        if ((x = dlp_net_conv(net, nm, x, out_c, 1, 1, 0)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.bn3", prefix);
        if ((x = dlp_net_bn(net, nm, x)) < 0) return -1;
    } else {
        snprintf(nm, sizeof nm, "%s.conv1", prefix);
        if ((x = dlp_net_conv(net, nm, in, planes, 3, stride, 1)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.bn1", prefix);
        if ((x = dlp_net_bn(net, nm, x)) < 0 || (x = dlp_net_relu(net, x)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.conv2", prefix);
        if ((x = dlp_net_conv(net, nm, x, planes, 3, 1, 1)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.bn2", prefix);
        if ((x = dlp_net_bn(net, nm, x)) < 0) return -1;
    }
    int shortcut = in;
    if (stride != 1 || in_c != out_c) {
        snprintf(nm, sizeof nm, "%s.downsample.0", prefix);
        if ((shortcut = dlp_net_conv(net, nm, in, out_c, 1, stride, 0)) < 0) return -1;
        snprintf(nm, sizeof nm, "%s.downsample.1", prefix);
        if ((shortcut = dlp_net_bn(net, nm, shortcut)) < 0) return -1;
    }
    if ((x = dlp_net_add(net, x, shortcut)) < 0) return -1;  // in0 = main branch: zero-init finds its BN there
    return dlp_net_relu(net, x);
}

dlp_status dlp_resnet_build(const dlp_resnet_cfg *cfg, dlp_net *net) {
    memset(net, 0, sizeof *net);
    if (cfg->num_classes < 1)
        return DLP_ERR(DLP_ERR_INVALID, "%s: the number of classes must be at least 1 (got %d)", cfg->arch,
                       cfg->num_classes);
    if (cfg->height < 32 || cfg->width_px < 32)
        return DLP_ERR(DLP_ERR_INVALID, "%s: input size %dx%d is too small (at least 32x32)", cfg->arch,
                       cfg->height, cfg->width_px);
    if (cfg->height > 4096 || cfg->width_px > 4096)
        return DLP_ERR(DLP_ERR_INVALID, "%s: input size %dx%d is too large (at most 4096)", cfg->arch, cfg->height,
                       cfg->width_px);
    if (cfg->width < 1 || cfg->in_channels < 1)
        return DLP_ERR(DLP_ERR_INVALID, "%s: width and input channels must be positive", cfg->arch);
    dlp_status st = dlp_net_init(net, cfg->arch, cfg->in_channels, cfg->height, cfg->width_px);
    if (st) return st;
    int x;
    if ((x = dlp_net_conv(net, "conv1", 0, cfg->width, 7, 2, 3)) < 0 || (x = dlp_net_bn(net, "bn1", x)) < 0 ||
        (x = dlp_net_relu(net, x)) < 0 || (x = dlp_net_maxpool(net, x, 3, 2, 1)) < 0)
        goto fail;
    for (int s = 0; s < 4; s++) {
        for (int b = 0; b < cfg->blocks[s]; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, b);
            if ((x = block(net, cfg, x, prefix, cfg->width << s, b == 0 && s > 0 ? 2 : 1)) < 0) goto fail;
        }
    }
    if ((x = dlp_net_avgpool(net, x)) < 0 || (x = dlp_net_fc(net, "fc", x, cfg->num_classes)) < 0) goto fail;
    return DLP_OK;
fail:
    st = dlp_err_status();
    dlp_net_free(net);
    return st ? st : DLP_ERR_INTERNAL;
}

dlp_status dlp_model_build(const char *name, int num_classes, int size, dlp_net *net) {
    dlp_resnet_cfg cfg;
    memset(net, 0, sizeof *net);
    DLP_CHECK(dlp_resnet_cfg_from_name(name, num_classes, size, &cfg));
    DLP_CHECK(dlp_resnet_build(&cfg, net));
    return DLP_OK;
}

// Is BN layer li the last BN of a residual block's main branch (the first input of an ADD)?
static int is_block_last_bn(const dlp_net *net, int li) {
    for (int i = li + 1; i < net->nlayers; i++)
        if (net->layers[i].kind == DLP_LAYER_ADD && net->layers[i].in0 == li) return 1;
    return 0;
}

void dlp_resnet_init_params(const dlp_net *net, uint64_t seed, int zero_init_residual, float *params, float *bufs) {
    for (int pi = 0; params && pi < net->nparams; pi++) {
        const dlp_param *p = &net->params[pi];
        const dlp_layer *l = &net->layers[p->layer];
        float *w = params + p->offset;
        dlp_rng r;
        dlp_rng_init(&r, seed, (uint64_t)pi);
        const size_t len = strlen(p->name);
        const int is_weight = len >= 7 && strcmp(p->name + len - 7, ".weight") == 0;
        if (l->kind == DLP_LAYER_CONV) {
            const double fan_out = (double)p->shape[0] * p->shape[2] * p->shape[3];
            const double std = sqrt(2.0 / fan_out);
            for (int64_t i = 0; i < p->numel; i++) w[i] = (float)(std * dlp_rng_normal(&r));
        } else if (l->kind == DLP_LAYER_BN) {
            const float v = is_weight ? (zero_init_residual && is_block_last_bn(net, p->layer) ? 0.0f : 1.0f) : 0.0f;
            for (int64_t i = 0; i < p->numel; i++) w[i] = v;
        } else if (l->kind == DLP_LAYER_FC) {
            const double fan_in = (double)dlp_net_layer_numel(net, l->in0);
            const double bound = 1.0 / sqrt(fan_in);  // kaiming_uniform(a=sqrt(5)) and the bias rule coincide
            for (int64_t i = 0; i < p->numel; i++) w[i] = (float)dlp_rng_range(&r, -bound, bound);
        } else {
            for (int64_t i = 0; i < p->numel; i++) w[i] = 0.0f;
        }
    }
    for (int bi = 0; bufs && bi < net->nbufs; bi++) {
        const dlp_param *b = &net->bufs[bi];
        const float v = strstr(b->name, "running_var") ? 1.0f : 0.0f;
        for (int64_t i = 0; i < b->numel; i++) bufs[b->offset + i] = v;
    }
}
