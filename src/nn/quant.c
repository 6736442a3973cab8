// nn/quant: calibration of activation ranges for int8 inference and its safetensors file (nn/quant.h).
#include "nn/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "nn/safetensors.h"

const dlp_opt_choice dlp_calib_method_choices[] = {
    {"minmax", DLP_CALIB_MINMAX}, {"percentile", DLP_CALIB_PERCENTILE}, {NULL, 0}};

// |x|'s histogram: the top 13 bits of a non-negative float below its sign (8 exponent bits, 5 mantissa bits),
// so bin b holds [f(b << 18), f((b + 1) << 18)): 32 bins per octave, relative width <= 2^-5 * ln 2 ~ 2.2%.
#define HBITS 13
#define HBINS (1 << HBITS)
#define HSHIFT (31 - HBITS)

typedef struct layer_stats {
    double maxabs, min;
    int64_t count;
    int64_t *hist;  // HBINS, allocated at the first observation
} layer_stats;

struct dlp_calib {
    int nlayers;
    dlp_calib_method method;
    double percentile;
    char arch[64];
    layer_stats *l;
};

dlp_status dlp_calib_create(const dlp_net *net, dlp_calib_method method, double percentile, dlp_calib **out) {
    *out = NULL;
    if (method == DLP_CALIB_PERCENTILE && !(percentile > 50.0 && percentile <= 100.0))
        return DLP_ERR(DLP_ERR_INVALID, "calibration percentile %g is not in (50, 100]", percentile);
    dlp_calib *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    c->nlayers = net->nlayers;
    c->method = method;
    c->percentile = percentile;
    snprintf(c->arch, sizeof c->arch, "%s", net->arch);
    c->l = calloc((size_t)net->nlayers, sizeof *c->l);
    if (!c->l) {
        free(c);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < net->nlayers; i++) c->l[i].min = INFINITY;
    *out = c;
    return DLP_OK;
}

void dlp_calib_observe(void *ctx, int layer, const float *x, int64_t count) {
    dlp_calib *c = ctx;
    if (layer < 0 || layer >= c->nlayers || count <= 0) return;
    layer_stats *s = &c->l[layer];
    if (!s->hist && c->method == DLP_CALIB_PERCENTILE) {
        s->hist = calloc(HBINS, sizeof *s->hist);
        if (!s->hist) return;  // counted as not observed: finish reports it
    }
    float mx = (float)s->maxabs, mn = (float)s->min;
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++) {
        const float v = x[i];
        if (!isfinite(v)) continue;
        const float a = fabsf(v);
        if (a > mx) mx = a;
        if (v < mn) mn = v;
        if (s->hist) {
            uint32_t u;
            memcpy(&u, &a, 4);
            s->hist[u >> HSHIFT]++;
        }
        n++;
    }
    s->maxabs = mx;
    s->min = mn;
    s->count += n;
}

static float bin_top(int b) {
    uint32_t u = (uint32_t)(b + 1) << HSHIFT;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

dlp_status dlp_calib_finish(const dlp_calib *c, int images, uint64_t weights_hash, dlp_quant *q) {
    memset(q, 0, sizeof *q);
    int seen = 0;
    for (int i = 0; i < c->nlayers; i++) seen += c->l[i].count > 0;
    if (!seen) return DLP_ERR(DLP_ERR_INVALID, "calibration: no activation was observed");
    q->range = calloc((size_t)c->nlayers, sizeof(float));
    q->min = calloc((size_t)c->nlayers, sizeof(float));
    if (!q->range || !q->min) {
        dlp_quant_free(q);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    q->nlayers = c->nlayers;
    q->method = c->method;
    q->percentile = c->method == DLP_CALIB_PERCENTILE ? c->percentile : 100.0;
    q->images = images;
    q->weights_hash = weights_hash;
    snprintf(q->arch, sizeof q->arch, "%s", c->arch);
    for (int i = 0; i < c->nlayers; i++) {
        const layer_stats *s = &c->l[i];
        if (s->count <= 0) continue;
        double r = s->maxabs;
        if (c->method == DLP_CALIB_PERCENTILE && s->hist) {
            const double want = s->count * (c->percentile / 100.0);
            int64_t cum = 0;
            int b = 0;
            for (; b < HBINS - 1; b++) {
                cum += s->hist[b];
                if ((double)cum >= want) break;
            }
            const double top = bin_top(b);
            if (top < r) r = top;
        }
        // an all-zero layer still gets a (tiny) positive range, so the plan has a scale for it
        q->range[i] = r > 0 ? (float)r : 1e-6f;
        q->min[i] = (float)s->min;
    }
    return DLP_OK;
}

void dlp_calib_free(dlp_calib *c) {
    if (!c) return;
    for (int i = 0; i < c->nlayers; i++) free(c->l[i].hist);
    free(c->l);
    free(c);
}

uint64_t dlp_quant_weights_hash(const float *params, int64_t nparams, const float *bufs, int64_t nbufs) {
    uint64_t h = 1469598103934665603ull;
    const float *arr[2] = {params, bufs};
    const int64_t n[2] = {nparams, nbufs};
    for (int a = 0; a < 2; a++) {
        const unsigned char *b = (const unsigned char *)arr[a];
        for (int64_t i = 0; b && i < n[a] * 4; i++) h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

#define QUANT_FORMAT "dlperf.int8-calibration/1"

dlp_status dlp_quant_save(const dlp_quant *q, const char *path) {
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    const int64_t shape[1] = {q->nlayers};
    char buf[4][64];
    snprintf(buf[0], sizeof buf[0], "%d", q->nlayers);
    snprintf(buf[1], sizeof buf[1], "%d", q->images);
    snprintf(buf[2], sizeof buf[2], "%.6g", q->percentile);
    snprintf(buf[3], sizeof buf[3], "%016llx", (unsigned long long)q->weights_hash);
    dlp_status st = dlp_st_writer_add(&w, "range", DLP_ST_F32, 1, shape, q->range);
    if (!st) st = dlp_st_writer_add(&w, "min", DLP_ST_F32, 1, shape, q->min);
    if (!st) st = dlp_st_writer_meta(&w, "format", QUANT_FORMAT);
    if (!st) st = dlp_st_writer_meta(&w, "arch", q->arch);
    if (!st) st = dlp_st_writer_meta(&w, "layers", buf[0]);
    if (!st) st = dlp_st_writer_meta(&w, "method", dlp_opt_choice_name(dlp_calib_method_choices, (int)q->method));
    if (!st) st = dlp_st_writer_meta(&w, "images", buf[1]);
    if (!st) st = dlp_st_writer_meta(&w, "percentile", buf[2]);
    if (!st) st = dlp_st_writer_meta(&w, "weights_hash", buf[3]);
    if (!st) st = dlp_st_writer_write(&w, path, DLP_WRITE_REPLACE);
    dlp_st_writer_free(&w);
    if (st) dlp_err_context("writing the int8 calibration %s", path);
    return st;
}

dlp_status dlp_quant_load(const char *path, const dlp_net *net, uint64_t weights_hash, dlp_quant *q) {
    memset(q, 0, sizeof *q);
    dlp_st_file f;
    DLP_CHECK(dlp_st_open(path, 64u << 20, &f));
    dlp_status st = DLP_OK;
    const char *fmt = dlp_st_meta(&f, "format"), *arch = dlp_st_meta(&f, "arch"), *layers = dlp_st_meta(&f, "layers");
    const char *method = dlp_st_meta(&f, "method"), *images = dlp_st_meta(&f, "images");
    const char *pct = dlp_st_meta(&f, "percentile"), *hash = dlp_st_meta(&f, "weights_hash");
    const dlp_st_tensor *tr = dlp_st_find(&f, "range"), *tm = dlp_st_find(&f, "min");
    int m = 0;
    if (!fmt || strcmp(fmt, QUANT_FORMAT) || !arch || !layers || !method || !images || !pct || !hash || !tr || !tm)
        st = DLP_ERR(DLP_ERR_FORMAT, "%s is not a dlperf int8 calibration (%s metadata and \"range\", \"min\" tensors "
                     "expected)", path, QUANT_FORMAT);
    else if (dlp_opt_choice_parse(dlp_calib_method_choices, "method", method, &m))
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: unknown calibration method \"%s\"", path, method);
    else if (strcmp(arch, net->arch) || atoi(layers) != net->nlayers || tr->numel != net->nlayers ||
             tm->numel != net->nlayers)
        st = DLP_ERR(DLP_ERR_INVALID, "%s calibrates %s (%s layers), not this %s (%d layers); hint: delete it or give "
                     "another --calib file", path, arch, layers, net->arch, net->nlayers);
    else if (strtoull(hash, NULL, 16) != weights_hash)
        st = DLP_ERR(DLP_ERR_INVALID, "%s was calibrated with other weights (hash %s, these are %016llx); hint: delete "
                     "it to calibrate again", path, hash, (unsigned long long)weights_hash);
    if (!st) {
        q->range = malloc((size_t)net->nlayers * sizeof(float));
        q->min = malloc((size_t)net->nlayers * sizeof(float));
        if (!q->range || !q->min) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    if (!st) st = dlp_st_read_f32(&f, tr, q->range);
    if (!st) st = dlp_st_read_f32(&f, tm, q->min);
    for (int i = 0; !st && i < net->nlayers; i++)
        if (!isfinite(q->range[i]) || q->range[i] < 0 || isnan(q->min[i]))
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: layer %d (%s) has range %g: not a calibration", path, i,
                         net->layers[i].name, (double)q->range[i]);
    if (!st) {
        q->nlayers = net->nlayers;
        q->method = (dlp_calib_method)m;
        q->images = atoi(images);
        q->percentile = atof(pct);
        q->weights_hash = weights_hash;
        snprintf(q->arch, sizeof q->arch, "%s", arch);
    } else {
        dlp_quant_free(q);
    }
    dlp_st_close(&f);
    return st;
}

void dlp_quant_free(dlp_quant *q) {
    if (!q) return;
    free(q->range);
    free(q->min);
    q->range = q->min = NULL;
    q->nlayers = 0;
}

void dlp_quant_default_path(const char *weights, dlp_calib_method method, char *out, size_t len) {
    size_t n = strlen(weights);
    const char *ext = ".safetensors";
    const size_t el = strlen(ext);
    if (n > el && !strcmp(weights + n - el, ext)) n -= el;
    snprintf(out, len, "%.*s.int8-%s.safetensors", (int)n, weights,
             dlp_opt_choice_name(dlp_calib_method_choices, (int)method));
}
