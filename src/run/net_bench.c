// run/net_bench: a model's plan timed phase by phase on random tensors.
#include "run/net_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/rng.h"
#include "hw/host.h"
#include "nn/resnet.h"

// The plan, its parameters and a random batch with random labels.
static dlp_status prepare(const dlp_net_bench_cfg *c, const dlp_backend *ops, const char *arg, dlp_net *net,
                          dlp_plan **plan, void **input, int32_t **labels, double *plan_ms) {
    float *params = malloc((size_t)net->param_count * sizeof(float)), *bufs = malloc((size_t)net->buf_count * sizeof(float));
    *labels = malloc((size_t)c->batch * sizeof(int32_t));
    dlp_status st = params && bufs && *labels ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (!st) {
        dlp_resnet_init_params(net, c->seed, 0, params, bufs);
        dlp_plan_cfg cfg = {.batch = c->batch, .train = !c->infer, .precision = c->precision, .threads = c->threads,
                            .arg = arg};
        int64_t t0 = dlp_now_ns();
        st = dlp_plan_create(ops, net, &cfg, plan);
        *plan_ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    }
    if (!st) st = dlp_plan_set_params(*plan, params, bufs);
    free(params);
    free(bufs);
    if (st) return st;
    dlp_layout layout;
    dlp_dtype in_type;
    dlp_plan_input_format(*plan, &layout, &in_type);
    const int64_t in_elems = (int64_t)c->batch * dlp_net_layer_numel(net, 0);
    *input = malloc((size_t)in_elems * dlp_dtype_size(in_type));
    if (!*input) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the input batch");
    dlp_rng rng;
    dlp_rng_init(&rng, c->seed, 99);
    dlp_step_fill_random(*input, in_elems, in_type, &rng);
    for (int i = 0; i < c->batch; i++) (*labels)[i] = (int32_t)dlp_rng_below(&rng, (uint64_t)c->classes);
    return DLP_OK;
}

dlp_status dlp_net_bench(const dlp_net_bench_cfg *c, dlp_net_bench_result *r) {
    memset(r, 0, sizeof *r);
    const char *arg;
    const dlp_backend *ops = dlp_backend_find(c->device, &arg);
    if (!ops) return dlp_err_status();
    char why[256] = "";
    if (dlp_backend_available(ops, why, sizeof why) != DLP_OK)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "device %s is not available here: %s", c->device, why);
    dlp_net net;
    DLP_CHECK(dlp_model_build(c->model, c->classes, c->size, &net));
    snprintf(r->arch, sizeof r->arch, "%s", net.arch);
    r->backend = dlp_backend_name(ops);
    dlp_plan *plan = NULL;
    void *input = NULL;
    int32_t *labels = NULL;
    dlp_status st = prepare(c, ops, arg, &net, &plan, &input, &labels, &r->plan_ms);
    if (!st && c->on_ready) c->on_ready(c->ctx, r->arch, r->backend);
    // run/step's harness: every phase timed on its own (the device waited for after each)
    const dlp_step_cfg sc = {.plan = plan, .train = !c->infer, .sync_phases = 1};
    const dlp_step_batch sb = {.input = input, .n = c->batch, .labels = c->infer ? NULL : labels,
                               .sgd = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f}};
    const dlp_step_bench_cfg bc = {.warmup = c->warmup, .min_steps = c->steps, .max_steps = c->steps};
    if (!st) st = dlp_step_bench(&sc, &sb, &bc, &r->phases);
    if (!st) {
        r->step_ms = r->phases.step.mean_ms;
        const double total_s = r->step_ms * c->steps * 1e-3;
        r->img_per_s = (double)c->batch * c->steps / total_s;
        const double flop_img = dlp_net_forward_flops(&net) * (c->infer ? 1 : 3);
        r->gflop_per_image = flop_img * 1e-9;
        r->gflop_per_s = flop_img * c->batch * c->steps / total_s * 1e-9;
        if (c->peak) st = dlp_backend_measure_peak(ops, c->precision, c->threads, &r->peak_gflop_per_s);
    }
    if (!st) r->plan_info = dlp_plan_info_json(plan);
    dlp_plan_free(plan);
    free(input);
    free(labels);
    dlp_net_free(&net);
    return st;
}

void dlp_net_bench_free(dlp_net_bench_result *r) {
    dlp_step_bench_free(&r->phases);
    json_decref(r->plan_info);
    r->plan_info = NULL;
}

void dlp_net_bench_json(const dlp_net_bench_cfg *c, const dlp_net_bench_result *r, json_t *res) {
    const dlp_step_bench_result *br = &r->phases;
    const int infer = c->infer;
    json_object_set_new(res, "backend", json_string(r->backend));
    json_object_set_new(res, "compute_threads", json_integer(c->threads > 0 ? c->threads : dlp_host_cpus_allowed()));
    json_object_set_new(res, "mode", json_string(infer ? "inference" : "training"));
    json_object_set_new(res, "plan_ms", json_real(r->plan_ms));
    if (r->plan_info) json_object_set_new(res, "backend_plan", json_incref(r->plan_info));  // ISA, kernels, fusions
    json_t *x = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "img_per_s", r->img_per_s, "step_ms", r->step_ms,
                          "step_ms_p10", br->step.p10_ms, "step_ms_p50", br->step.p50_ms, "step_ms_p90", br->step.p90_ms,
                          "gflop_per_image", r->gflop_per_image, "achieved_gflop_per_s", r->gflop_per_s);
    json_object_update(res, x);
    json_decref(x);
    if (r->peak_gflop_per_s > 0) {
        json_object_set_new(res, "peak_gflop_per_s", json_real(r->peak_gflop_per_s));
        json_object_set_new(res, "fraction_of_peak", json_real(r->gflop_per_s / r->peak_gflop_per_s));
    }
    json_t *ph = json_object(), *pq = json_object();
    for (int p = 0; p < DLP_STEP_NPHASES; p++)
        if (!infer || p <= DLP_STEP_FORWARD) {
            const char *name = dlp_step_phase_name((dlp_step_phase)p);
            json_object_set_new(ph, name, json_real(br->phase[p].mean_ms));
            json_object_set_new(pq, name, json_pack("{s:f,s:f,s:f}", "p10", br->phase[p].p10_ms, "p50",
                                                    br->phase[p].p50_ms, "p90", br->phase[p].p90_ms));
        }
    json_object_set_new(res, "phase_ms_per_step", ph);
    json_object_set_new(res, "phase_ms_quantiles", pq);
    if (!infer) {
        json_object_set_new(res, "loss_first", json_real(br->loss_first));
        json_object_set_new(res, "loss_last", json_real(br->loss_last));
    }
}
