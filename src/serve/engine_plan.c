// serve/engine_plan: a backend inference plan (cfg.train = 0) as the service's engine —
// infer = set_input(n) + forward(DLP_PASS_EVAL) + get_output. The plan is the caller's; the engine only calls it.
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "serve/serve.h"

typedef struct plan_engine {
    dlp_plan *plan;
} plan_engine;

static dlp_status plan_infer(void *ctx, const void *batch, int n, float *logits) {
    plan_engine *pe = ctx;
    const dlp_backend_ops *ops = pe->plan->ops;
    DLP_CHECK(ops->set_input(pe->plan, batch, n));
    DLP_CHECK(ops->forward(pe->plan, DLP_PASS_EVAL));
    DLP_CHECK(ops->get_output(pe->plan, logits));
    if (ops->sync) DLP_CHECK(ops->sync(pe->plan));
    return DLP_OK;
}

dlp_status dlp_serve_engine_from_plan(dlp_plan *plan, const dlp_net *net, int batch, dlp_serve_engine *out) {
    memset(out, 0, sizeof *out);
    if (!plan || !plan->ops || !net || batch < 1) return DLP_ERR(DLP_ERR_INVALID, "engine from plan: no plan, net or batch");
    const dlp_backend_ops *ops = plan->ops;
    if (!ops->set_input || !ops->forward || !ops->get_output || !ops->input_format)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "backend %s cannot run inference plans", ops->name);
    const dlp_layer *out_layer = &net->layers[dlp_net_output(net)];
    int classes = out_layer->c * out_layer->h * out_layer->w;
    if (classes < 1) return DLP_ERR(DLP_ERR_INVALID, "net %s has no output", net->arch);
    dlp_layout layout;
    dlp_dtype dtype;
    ops->input_format(plan, &layout, &dtype);
    plan_engine *pe = calloc(1, sizeof *pe);
    DLP_TRY_ALLOC(pe);
    pe->plan = plan;
    out->name = ops->name;
    out->ctx = pe;
    out->max_batch = batch;
    out->sample_bytes = (size_t)dlp_net_layer_numel(net, 0) * dlp_dtype_size(dtype);
    out->num_classes = classes;
    out->infer = plan_infer;
    return DLP_OK;
}

void dlp_serve_engine_from_plan_free(dlp_serve_engine *e) {
    if (!e) return;
    free(e->ctx);
    memset(e, 0, sizeof *e);
}
