// tests/unit/testutil: helpers shared by the unit tests.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/tensor.h"

void dlp_test_tmpdir(char *buf, size_t len) {
    const char *base = getenv("DLPERF_TEST_TMP");
    if (!base || !base[0]) base = "/tmp";
    snprintf(buf, len, "%s/dlpXXXXXX", base);
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
}

void dlp_test_rmtree(const char *dir) {
    char cmd[1200];
    if (!dir || strlen(dir) < 6) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

double dlp_test_max_rel_err(const float *a, const float *b, size_t n, float floor, size_t *where) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double m = fabs((double)b[i]);
        if (m < floor) m = floor;
        double r = d / m;
        if (!(r <= worst)) {  // NaN counts as worst
            worst = isnan(r) ? INFINITY : r;
            wi = i;
        }
    }
    if (where) *where = wi;
    return worst;
}

dlp_status dlp_test_set_input(dlp_plan *p, const dlp_net *net, const float *x, int n) {
    dlp_layout lay;
    dlp_dtype dt;
    dlp_plan_input_format(p, &lay, &dt);
    const int C = net->layers[0].c;
    const int64_t hw = (int64_t)net->layers[0].h * net->layers[0].w, per = C * hw;
    if (lay == DLP_LAYOUT_NCHW && dt == DLP_DTYPE_F32) return dlp_plan_set_input(p, x, n);
    if (dt != DLP_DTYPE_F32 && dt != DLP_DTYPE_BF16 && dt != DLP_DTYPE_F16) {
        fprintf(stderr, "dlp_test_set_input: input type %s\n", dlp_dtype_name(dt));
        return DLP_ERR_UNSUPPORTED;
    }
    unsigned char *buf = malloc((size_t)(n * per) * dlp_dtype_size(dt) + 4);
    if (!buf) return DLP_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int64_t j = 0; j < hw; j++) {
                const float v = x[i * per + c * hw + j];
                const int64_t k = lay == DLP_LAYOUT_NHWC ? i * per + j * C + c : i * per + c * hw + j;
                if (dt == DLP_DTYPE_F32) ((float *)buf)[k] = v;
                else if (dt == DLP_DTYPE_BF16) ((uint16_t *)buf)[k] = dlp_f32_to_bf16(v);
                else ((uint16_t *)buf)[k] = dlp_f32_to_f16(v);
            }
    dlp_status st = dlp_plan_set_input(p, buf, n);
    free(buf);
    return st;
}

void dlp_test_init_params(const dlp_net *net, uint64_t seed, float *params, float *bufs) {
    dlp_rng r;
    for (int i = 0; i < net->nparams; i++) {
        const dlp_param *p = &net->params[i];
        const dlp_layer *l = &net->layers[p->layer];
        dlp_rng_init(&r, seed, 100 + (uint64_t)i);
        const int is_w = p == &net->params[l->param0];
        for (int64_t j = 0; j < p->numel; j++) {
            float v;
            if (l->kind == DLP_LAYER_BN) v = is_w ? (float)dlp_rng_range(&r, 0.5, 1.5) : (float)(0.2 * dlp_rng_normal(&r));
            else if (is_w) v = (float)(dlp_rng_normal(&r) / sqrt((double)p->numel / (double)p->shape[0]));
            else v = (float)(0.1 * dlp_rng_normal(&r));
            params[p->offset + j] = v;
        }
    }
    for (int i = 0; i < net->nbufs; i++) {
        const dlp_param *p = &net->bufs[i];
        dlp_rng_init(&r, seed, 1000 + (uint64_t)i);
        const int var = strstr(p->name, "running_var") != NULL;
        for (int64_t j = 0; j < p->numel; j++)
            bufs[p->offset + j] = var ? (float)dlp_rng_range(&r, 0.5, 1.5) : (float)(0.2 * dlp_rng_normal(&r));
    }
}
