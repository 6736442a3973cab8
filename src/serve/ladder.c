// serve/ladder: a model's plan ladder as one serving engine (see ladder.h).
#include "serve/ladder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dlp_status dlp_serve_ladder_open(const dlp_serve_ladder_cfg *cfg, dlp_serve_ladder *out) {
    memset(out, 0, sizeof *out);
    if (cfg->max_batch < 1) return DLP_ERR(DLP_ERR_INVALID, "the largest batch must be >= 1 (got %d)", cfg->max_batch);
    int nb = 1;
    if (cfg->single_plan) out->batches[0] = cfg->max_batch;
    else nb = dlp_serve_plan_ladder(cfg->max_batch, out->batches);
    dlp_plan *plans[DLP_SERVE_MAX_PLANS];
    dlp_status st = DLP_OK;
    for (int i = 0; i < nb && st == DLP_OK; i++) {
        dlp_infer_engine_cfg ec = {.device = cfg->device, .batch = out->batches[i], .precision = cfg->precision,
                                   .threads = cfg->threads};
        st = dlp_infer_engine_create(cfg->model, &ec, &out->plans[i]);
        if (st == DLP_OK) {
            plans[i] = out->plans[i].plan;
            out->create_ms += out->plans[i].create_ms;
            out->n++;
        } else {
            dlp_err_context("the batch-%d plan of the serving ladder", out->batches[i]);
        }
    }
    if (st == DLP_OK) st = dlp_serve_engine_from_plans(plans, out->batches, nb, &cfg->model->net, &out->engine);
    if (st) dlp_serve_ladder_close(out);
    return st;
}

dlp_status dlp_serve_ladder_warm(dlp_serve_ladder *l) {
    const dlp_serve_engine *e = &l->engine;
    void *zeros = calloc((size_t)e->max_batch, e->sample_bytes);
    float *logits = malloc((size_t)e->max_batch * (size_t)e->num_classes * sizeof *logits);
    dlp_status st = zeros && logits ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory for the warm-up batch");
    for (int i = 0; i < l->n && st == DLP_OK; i++) st = e->infer(e->ctx, zeros, l->batches[i], logits);
    free(zeros);
    free(logits);
    return st;
}

void dlp_serve_ladder_describe(const dlp_serve_ladder *l, char *buf, size_t len) {
    if (len) buf[0] = '\0';
    for (int i = 0; i < l->n; i++) {
        size_t u = strlen(buf);
        snprintf(buf + u, len - u, "%s%d", i ? "," : "", l->batches[i]);
    }
}

void dlp_serve_ladder_close(dlp_serve_ladder *l) {
    if (l->engine.ctx) dlp_serve_engine_from_plan_free(&l->engine);
    for (int i = 0; i < l->n; i++) dlp_infer_engine_free(&l->plans[i]);
    memset(l, 0, sizeof *l);
}
