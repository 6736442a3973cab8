// hw/work: ResNet v1.5 FLOPs and parameter counts from the architecture.
#include "hw/work.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    double flops;
    int64_t params;
} acc;

// Output size of a convolution or pooling window (PyTorch's floor rule).
static int out_size(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

// conv k x k (no bias) + BN: adds FLOPs and parameters, returns the output size in *h, *w.
static void conv_bn(acc *a, int cin, int cout, int k, int stride, int *h, int *w) {
    int pad = k / 2;
    *h = out_size(*h, k, stride, pad);
    *w = out_size(*w, k, stride, pad);
    a->flops += 2.0 * cout * (double)*h * *w * cin * k * k;
    a->params += (int64_t)cout * cin * k * k + 2 * (int64_t)cout;
}

dlp_status dlp_work_resnet(const char *model, int height, int width, int classes, dlp_model_work *out) {
    static const struct {
        const char *name;
        int blocks[4];
        int bottleneck;
        int width;  // stem and stage-1 channels
    } k_arch[] = {
        {"resnet18", {2, 2, 2, 2}, 0, 64},  {"resnet34", {3, 4, 6, 3}, 0, 64},  {"resnet50", {3, 4, 6, 3}, 1, 64},
        {"resnet101", {3, 4, 23, 3}, 1, 64}, {"resnet152", {3, 8, 36, 3}, 1, 64},
        // nn/resnet's small members for tests
        {"resnet-mini", {1, 1, 1, 1}, 0, 8}, {"resnet-mini-bottleneck", {1, 1, 1, 1}, 1, 4},
    };
    int ai = -1;
    for (int i = 0; i < (int)(sizeof k_arch / sizeof k_arch[0]); i++)
        if (model && strcmp(model, k_arch[i].name) == 0) ai = i;
    if (ai < 0) return DLP_ERR(DLP_ERR_NOTFOUND, "unknown model '%s' (resnet18|resnet34|resnet50|resnet101|resnet152|"
                               "resnet-mini|resnet-mini-bottleneck)",
                               model ? model : "(null)");
    if (height < 32 || width < 32 || classes < 1)
        return DLP_ERR(DLP_ERR_INVALID, "model %s: input %dx%d with %d classes (need >= 32x32 and >= 1 class)", model,
                       height, width, classes);
    acc a = {0, 0};
    int h = height, w = width;
    const int w0 = k_arch[ai].width;
    conv_bn(&a, 3, w0, 7, 2, &h, &w);  // stem: 7x7 stride 2
    h = out_size(h, 3, 2, 1);          // maxpool 3x3 stride 2 pad 1
    w = out_size(w, 3, 2, 1);
    int cin = w0;
    const int exp = k_arch[ai].bottleneck ? 4 : 1;
    for (int s = 0; s < 4; s++) {
        int width_s = w0 << s;
        for (int b = 0; b < k_arch[ai].blocks[s]; b++) {
            int stride = (s > 0 && b == 0) ? 2 : 1;
            int bh = h, bw = w;
            if (k_arch[ai].bottleneck) {  // v1.5: the stride is on the 3x3
                conv_bn(&a, cin, width_s, 1, 1, &bh, &bw);
                conv_bn(&a, width_s, width_s, 3, stride, &bh, &bw);
                conv_bn(&a, width_s, width_s * exp, 1, 1, &bh, &bw);
            } else {
                conv_bn(&a, cin, width_s, 3, stride, &bh, &bw);
                conv_bn(&a, width_s, width_s, 3, 1, &bh, &bw);
            }
            if (stride != 1 || cin != width_s * exp) {
                int dh = h, dw = w;
                conv_bn(&a, cin, width_s * exp, 1, stride, &dh, &dw);
            }
            h = bh;
            w = bw;
            cin = width_s * exp;
        }
    }
    a.flops += 2.0 * classes * cin;  // fc after the global average pool
    a.params += (int64_t)classes * cin + classes;
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", model);
    out->height = height;
    out->width = width;
    out->classes = classes;
    out->fwd_flops = a.flops;
    out->params = a.params;
    return DLP_OK;
}

static dlp_model_work g_ref;
static pthread_once_t g_ref_once = PTHREAD_ONCE_INIT;
static void init_ref(void) { dlp_work_resnet("resnet50", 224, 224, 1000, &g_ref); }

const dlp_model_work *dlp_work_ref(void) {
    pthread_once(&g_ref_once, init_ref);
    return &g_ref;
}

double dlp_work_ratio(const dlp_model_work *w) { return w->fwd_flops / dlp_work_ref()->fwd_flops; }

const char *dlp_wl_kind_name(dlp_wl_kind k) {
    static const char *const names[] = {"conv", "batchnorm", "relu", "add", "pool", "fc", "loss"};
    return (unsigned)k < DLP_WL_KIND_COUNT ? names[k] : "?";
}

typedef struct {
    dlp_wlayer *l;
    int n, max;
} layer_list;

static void push(layer_list *L, dlp_wl_kind kind, double flops, double in, double out, double params) {
    if (L->n < L->max) L->l[L->n] = (dlp_wlayer){kind, flops, in, out, params};
    L->n++;
}

// conv + BN (+ ReLU): the layers of conv_bn above.
static void conv_bn_layers(layer_list *L, int cin, int cout, int k, int stride, int *h, int *w, int relu) {
    double in = (double)cin * *h * *w;
    int pad = k / 2;
    *h = out_size(*h, k, stride, pad);
    *w = out_size(*w, k, stride, pad);
    double out = (double)cout * *h * *w;
    push(L, DLP_WL_CONV, 2.0 * cout * (double)*h * *w * cin * k * k, in, out, (double)cout * cin * k * k);
    push(L, DLP_WL_BN, 0, out, out, 2.0 * cout);
    if (relu) push(L, DLP_WL_RELU, 0, out, out, 0);
}

dlp_status dlp_work_layers(const char *model, int height, int width, int classes, dlp_wlayer *out, int max, int *n) {
    *n = 0;
    dlp_model_work mw;
    DLP_CHECK(dlp_work_resnet(model, height, width, classes, &mw));  // checks the name and sizes
    int blocks[4] = {3, 4, 6, 3}, bottleneck = 1, w0 = 64;
    static const struct { const char *name; int blocks[4], bottleneck, width; } k_arch[] = {
        {"resnet18", {2, 2, 2, 2}, 0, 64},  {"resnet34", {3, 4, 6, 3}, 0, 64},  {"resnet50", {3, 4, 6, 3}, 1, 64},
        {"resnet101", {3, 4, 23, 3}, 1, 64}, {"resnet152", {3, 8, 36, 3}, 1, 64},
        {"resnet-mini", {1, 1, 1, 1}, 0, 8}, {"resnet-mini-bottleneck", {1, 1, 1, 1}, 1, 4},
    };
    for (size_t i = 0; i < sizeof k_arch / sizeof k_arch[0]; i++)
        if (strcmp(model, k_arch[i].name) == 0) {
            memcpy(blocks, k_arch[i].blocks, sizeof blocks);
            bottleneck = k_arch[i].bottleneck;
            w0 = k_arch[i].width;
        }
    layer_list L = {out, 0, max};
    int h = height, w = width;
    conv_bn_layers(&L, 3, w0, 7, 2, &h, &w, 1);
    double pin = (double)w0 * h * w;
    h = out_size(h, 3, 2, 1);
    w = out_size(w, 3, 2, 1);
    push(&L, DLP_WL_POOL, 0, pin, (double)w0 * h * w, 0);
    int cin = w0;
    const int exp = bottleneck ? 4 : 1;
    for (int s = 0; s < 4; s++) {
        int ws = w0 << s;
        for (int b = 0; b < blocks[s]; b++) {
            int stride = (s > 0 && b == 0) ? 2 : 1;
            int bh = h, bw = w;
            if (bottleneck) {
                conv_bn_layers(&L, cin, ws, 1, 1, &bh, &bw, 1);
                conv_bn_layers(&L, ws, ws, 3, stride, &bh, &bw, 1);
                conv_bn_layers(&L, ws, ws * exp, 1, 1, &bh, &bw, 0);
            } else {
                conv_bn_layers(&L, cin, ws, 3, stride, &bh, &bw, 1);
                conv_bn_layers(&L, ws, ws, 3, 1, &bh, &bw, 0);
            }
            if (stride != 1 || cin != ws * exp) {
                int dh = h, dw = w;
                conv_bn_layers(&L, cin, ws * exp, 1, stride, &dh, &dw, 0);
            }
            double o = (double)ws * exp * bh * bw;
            push(&L, DLP_WL_ADD, 0, 2 * o, o, 0);
            push(&L, DLP_WL_RELU, 0, o, o, 0);
            h = bh;
            w = bw;
            cin = ws * exp;
        }
    }
    push(&L, DLP_WL_POOL, 0, (double)cin * h * w, cin, 0);  // global average pool
    push(&L, DLP_WL_FC, 2.0 * classes * cin, cin, classes, (double)classes * cin + classes);
    push(&L, DLP_WL_LOSS, 0, classes, 1, 0);
    if (L.n > max) return DLP_ERR(DLP_ERR_INVALID, "model %s has %d layers (room for %d)", model, L.n, max);
    *n = L.n;
    return DLP_OK;
}
