// serve/ladder: a model's plan ladder as one serving engine (see ladder.h), and the engine over any plans
// (dlp_serve_engine_from_plans, serve.h) it is made of. Each call runs through run/infer's dlp_infer_plan_run.
#include "serve/ladder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "run/infer.h"

// ---- the engine over a ladder's plans (dlp_serve_engine_from_plans) ---------------------------------------
// backend inference plans (cfg.train = 0) as the service's engine —
// infer = set_input(n) + forward(DLP_PASS_EVAL) + get_output on the smallest plan whose batch holds n. A plan
// computes its whole batch whatever n is (a batch-8 plan takes as long for one image as for eight), so a service
// that answers single requests at low load needs a small plan beside the large one: the caller hands a ladder
// (e.g. batches 1, 2, 4, 8). The plans are the caller's; the engine only calls them.
typedef struct plan_engine {
    int n;
    dlp_plan *plans[DLP_SERVE_MAX_PLANS];
    int batches[DLP_SERVE_MAX_PLANS];  // ascending
    int64_t calls[DLP_SERVE_MAX_PLANS];
} plan_engine;

static dlp_status plan_infer(void *ctx, const void *batch, int n, float *logits) {
    plan_engine *pe = ctx;
    int i = 0;
    while (i < pe->n - 1 && pe->batches[i] < n) i++;
    dlp_plan *plan = pe->plans[i];
    pe->calls[i]++;
    return dlp_infer_plan_run(plan, batch, n, logits);
}

int dlp_serve_plan_ladder(int max_batch, int *batches) {
    int n = 0;
    for (int b = 1; b < max_batch && n < DLP_SERVE_MAX_PLANS - 1; b *= 2) batches[n++] = b;
    batches[n++] = max_batch;
    return n;
}

dlp_status dlp_serve_engine_from_plans(dlp_plan *const *plans, const int *batches, int nplans, const dlp_net *net,
                                       dlp_serve_engine *out) {
    memset(out, 0, sizeof *out);
    if (!plans || !batches || nplans < 1 || nplans > DLP_SERVE_MAX_PLANS || !net)
        return DLP_ERR(DLP_ERR_INVALID, "engine from plans: 1 to %d plans, their batches and the net", DLP_SERVE_MAX_PLANS);
    dlp_layout layout = DLP_LAYOUT_NCHW;
    dlp_dtype dtype = DLP_DTYPE_F32;
    for (int i = 0; i < nplans; i++) {
        if (!plans[i] || batches[i] < 1 || (i > 0 && batches[i] <= batches[i - 1]))
            return DLP_ERR(DLP_ERR_INVALID, "engine from plans: plan %d is missing or its batch %d is not above the "
                                            "previous one's", i, batches[i]);
        dlp_layout l;
        dlp_dtype t;
        dlp_plan_input_format(plans[i], &l, &t);
        if (i == 0) {
            layout = l;
            dtype = t;
        } else if (l != layout || t != dtype) {
            return DLP_ERR(DLP_ERR_INVALID, "engine from plans: the batch-%d plan takes %s %s, the batch-%d plan %s %s",
                           batches[i], dlp_layout_name(l), dlp_dtype_name(t), batches[0], dlp_layout_name(layout),
                           dlp_dtype_name(dtype));
        }
    }
    const dlp_layer *out_layer = &net->layers[dlp_net_output(net)];
    int classes = out_layer->c * out_layer->h * out_layer->w;
    if (classes < 1) return DLP_ERR(DLP_ERR_INVALID, "net %s has no output", net->arch);
    plan_engine *pe = calloc(1, sizeof *pe);
    DLP_TRY_ALLOC(pe);
    pe->n = nplans;
    for (int i = 0; i < nplans; i++) {
        pe->plans[i] = plans[i];
        pe->batches[i] = batches[i];
    }
    out->name = dlp_backend_name(dlp_plan_backend(plans[0]));
    out->ctx = pe;
    out->max_batch = batches[nplans - 1];
    out->sample_bytes = (size_t)dlp_net_layer_numel(net, 0) * dlp_dtype_size(dtype);
    out->num_classes = classes;
    out->infer = plan_infer;
    return DLP_OK;
}

dlp_status dlp_serve_engine_from_plan(dlp_plan *plan, const dlp_net *net, int batch, dlp_serve_engine *out) {
    memset(out, 0, sizeof *out);
    if (!plan || !net || batch < 1) return DLP_ERR(DLP_ERR_INVALID, "engine from plan: no plan, net or batch");
    return dlp_serve_engine_from_plans(&plan, &batch, 1, net, out);
}

int64_t dlp_serve_engine_plan_calls(const dlp_serve_engine *e, int i, int *batch) {
    const plan_engine *pe = e && e->infer == plan_infer ? e->ctx : NULL;
    if (!pe || i < 0 || i >= pe->n) return -1;
    if (batch) *batch = pe->batches[i];
    return pe->calls[i];
}

void dlp_serve_engine_from_plan_free(dlp_serve_engine *e) {
    if (!e) return;
    free(e->ctx);
    memset(e, 0, sizeof *e);
}

// ---- the ladder ----------------------------------------------------------------------------------------------
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
