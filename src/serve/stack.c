// serve/stack: a served model's weights, plan ladders and preprocessing as one open and one close (see stack.h).
#include "serve/stack.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "hw/host.h"

// dlp_serve_preprocess.run: the data module's val transform (shorter side 256, centre crop 224, normalize) of the
// request body, written straight into the request's input slot in the plan's layout and type.
static dlp_status preprocess_run(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    return dlp_infer_prep_run(ctx, worker, jpeg, len, dst, NULL);
}

void dlp_serve_stack_close(dlp_serve_stack *s) {
    dlp_infer_prep_free(s->prep);
    for (int i = 0; s->ladders && i < s->copies; i++) dlp_serve_ladder_close(&s->ladders[i]);
    free(s->ladders);
    if (s->have_model) dlp_infer_model_free(&s->model);
    memset(s, 0, sizeof *s);
}

dlp_status dlp_serve_stack_open(const dlp_serve_stack_cfg *cfg, dlp_serve_stack *out) {
    memset(out, 0, sizeof *out);
    dlp_status st = dlp_infer_model_load(&cfg->model, &out->model);
    if (st) return st;
    out->have_model = 1;
    if (cfg->precision == DLP_DTYPE_I8 && (st = dlp_infer_model_quantize(&out->model, &cfg->calib))) {
        dlp_serve_stack_close(out);
        return st;
    }
    if (out->model.random_init && cfg->random_init_warning)
        DLP_WARN(cfg->random_init_warning, out->model.net.arch, (long long)cfg->model.seed);
    int copies = cfg->copies > 0 ? cfg->copies : 1;
    out->ladders = calloc((size_t)copies, sizeof *out->ladders);
    if (!out->ladders) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d plan ladders", copies);
    else out->copies = copies;
    int threads = cfg->threads;
    if (cfg->share_threads) {
        int total = threads > 0 ? threads : dlp_host_cpus_allowed();
        threads = total / copies > 0 ? total / copies : 1;
    }
    for (int i = 0; i < out->copies && st == DLP_OK; i++) {
        dlp_serve_ladder_cfg lc = {.model = &out->model, .device = cfg->device, .precision = cfg->precision,
                                   .threads = threads, .max_batch = cfg->max_batch, .single_plan = cfg->single_plan};
        st = dlp_serve_ladder_open(&lc, &out->ladders[i]);
    }
    // The preprocessing writes the first plan's input format; every plan of the model takes the same sample.
    const dlp_serve_engine *eng = &out->ladders[0].engine;
    if (st == DLP_OK) {
        const dlp_infer_engine *e0 = &out->ladders[0].plans[0];
        dlp_infer_prep_cfg pc = {.size = out->model.size, .layout = e0->layout, .dtype = e0->in_dtype,
                                 .dct_scaling = cfg->dct_scaling, .workers = cfg->workers > 0 ? cfg->workers : 1};
        st = dlp_infer_prep_create(&pc, &out->prep);
    }
    if (st == DLP_OK && dlp_infer_prep_sample_bytes(out->prep) != eng->sample_bytes)
        st = DLP_ERR(DLP_ERR_INTERNAL, "preprocess writes %zu bytes per sample, the engine takes %zu",
                     dlp_infer_prep_sample_bytes(out->prep), eng->sample_bytes);
    for (int i = 0; cfg->warm && i < out->copies && st == DLP_OK; i++) st = dlp_serve_ladder_warm(&out->ladders[i]);
    if (st) {
        dlp_serve_stack_close(out);
        return st;
    }
    out->preprocess.name = "val transform (Resize 256, CenterCrop 224, Normalize)";
    out->preprocess.ctx = out->prep;
    out->preprocess.run = preprocess_run;
    // The sample's format, so the service can take tensors as well (KServe v2): the first plan's input.
    const dlp_infer_engine *e0 = &out->ladders[0].plans[0];
    const dlp_layer *in = &out->model.net.layers[0];
    out->preprocess.channels = in->c;
    out->preprocess.height = in->h;
    out->preprocess.width = in->w;
    out->preprocess.layout = (int)e0->layout;
    out->preprocess.dtype = (int)e0->in_dtype;
    return DLP_OK;
}
