// perf/probe_steps_cuda: the GPU step probe — per batch size a plan, random parameters and input, warm-up and timed
// steps through run/step's harness, its clock CUDA events recorded on the plan's stream at every phase boundary (so
// steps stay queued back to back, as in training, and each phase is device time). Built only with CUDA.
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend/cuda/cuda_host.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/stats.h"

#include "perf/probe_steps.h"
#include "run/step.h"

// run/step's timer over CUDA events: boundary b of timed step s is event s * (DLP_STEP_NPHASES + 1) + b.
typedef struct event_timer {
    dlp_cuda_events *ev;
    dlp_plan *plan;
} event_timer;

enum { BOUNDS = DLP_STEP_NPHASES + 1 };

static dlp_status ev_mark(void *ctx, int step, int boundary) {
    event_timer *t = ctx;
    return dlp_cuda_events_record(t->ev, step * BOUNDS + boundary, t->plan);
}

static dlp_status ev_read(void *ctx, int step, double *phase_ms, double *step_ms) {
    event_timer *t = ctx;
    const int e0 = step * BOUNDS;
    for (int p = 0; p < DLP_STEP_NPHASES; p++) DLP_CHECK(dlp_cuda_events_elapsed_ms(t->ev, e0 + p, e0 + p + 1, &phase_ms[p]));
    return dlp_cuda_events_elapsed_ms(t->ev, e0, e0 + DLP_STEP_NPHASES, step_ms);
}

static dlp_status probe_one(const dlp_net *net, const float *params, const float *bufs, int train, dlp_dtype prec,
                            int tf32, int batch, int warmup, int steps, int h2d, dlp_cuda_step_point *pt) {
    memset(pt, 0, sizeof *pt);
    pt->batch = batch;
    pt->train = train;
    pt->precision = prec;
    dlp_plan_cfg cfg = {.batch = batch, .train = train, .precision = prec, .tf32 = tf32};
    dlp_plan *pl = NULL;
    dlp_cuda_events *ev = NULL;
    dlp_step_bench_result br = {0};
    int64_t in_n = (int64_t)batch * dlp_net_layer_numel(net, 0);
    float *x32 = malloc((size_t)in_n * 4);
    const dlp_allocator *ha = dlp_cuda_host_allocator();  // pinned, as the loader's batches
    void *x = ha->alloc(ha->ctx, (size_t)in_n * 4);
    int32_t *labels = malloc((size_t)batch * 4);
    dlp_status st = DLP_OK;
    if (!x32 || !x || !labels) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        goto out;
    }
    dlp_rng r;
    dlp_rng_init(&r, 99, (uint64_t)batch);
    for (int64_t i = 0; i < in_n; i++) x32[i] = (float)dlp_rng_normal(&r);
    for (int i = 0; i < batch; i++) labels[i] = net->num_classes > 0 ? (int32_t)dlp_rng_below(&r, (uint64_t)net->num_classes) : 0;
    {
        const dlp_layer *in = &net->layers[0];
        dlp_cuda_nchw_to_nhwc(x32, batch, in->c, (int64_t)in->h * in->w, prec, x);
    }
    DLP_CHECK_GOTO(st, dlp_plan_create(&dlp_backend_cuda, net, &cfg, &pl), out);
    DLP_CHECK_GOTO(st, dlp_plan_set_params(pl, params, bufs), out);
    DLP_CHECK_GOTO(st, dlp_plan_set_input(pl, x, batch), out);
    DLP_CHECK_GOTO(st, dlp_cuda_events_create((steps > 0 ? steps : 1) * BOUNDS, &ev), out);
    event_timer et = {ev, pl};
    const dlp_step_timer timer = {&et, ev_mark, ev_read};
    const dlp_step_cfg sc = {.plan = pl, .train = train, .timer = &timer};
    const dlp_step_batch sb = {.input = h2d ? x : NULL, .n = batch, .labels = train ? labels : NULL,
                               .sgd = {.lr = 1e-4f, .momentum = 0.9f, .weight_decay = 5e-5f}};
    const dlp_step_bench_cfg bc = {.warmup = warmup, .min_steps = steps, .max_steps = steps};
    if (steps > 0) DLP_CHECK_GOTO(st, dlp_step_bench(&sc, &sb, &bc, &br), out);
    if (train && steps > 0) {  // phases: forward (with the input copy); loss + backward; update
        double *f = malloc((size_t)steps * 3 * sizeof *f);
        if (!f) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            goto out;
        }
        double *b = f + steps, *u = f + 2 * steps;
        for (int i = 0; i < steps; i++) {
            const double *row = br.ms + (size_t)i * BOUNDS;
            f[i] = row[DLP_STEP_INPUT] + row[DLP_STEP_FORWARD];
            b[i] = row[DLP_STEP_LOSS] + row[DLP_STEP_BACKWARD] + row[DLP_STEP_ALLREDUCE];
            u[i] = row[DLP_STEP_UPDATE];
        }
        pt->fwd_ms = dlp_stats_quantile_f64(f, (size_t)steps, 0.5);
        pt->bwd_ms = dlp_stats_quantile_f64(b, (size_t)steps, 0.5);
        pt->update_ms = dlp_stats_quantile_f64(u, (size_t)steps, 0.5);
        free(f);
    }
    pt->step_ms = br.step.p50_ms;
    pt->step_ms_p10 = br.step.p10_ms;
    pt->step_ms_p90 = br.step.p90_ms;
    pt->images_per_s = pt->step_ms > 0 ? batch / (pt->step_ms * 1e-3) : 0;
    json_t *d = dlp_cuda_plan_describe(pl);
    pt->device_bytes = json_integer_value(json_object_get(d, "device_bytes"));
    pt->plan_ms = json_number_value(json_object_get(d, "plan_ms"));
    pt->graphs_captured = (int)json_integer_value(json_object_get(d, "graphs_captured"));
    json_decref(d);
    if (h2d) {
        double c = 0, w = 0;
        int64_t k = 0;
        DLP_CHECK_GOTO(st, dlp_plan_input_stats(pl, &c, &w, &k), out);
        pt->copy_ms = k ? c / k : 0;
        pt->stall_ms = k ? w / k : 0;
    }
out:
    dlp_step_bench_free(&br);
    dlp_cuda_events_free(ev);
    dlp_plan_free(pl);
    free(x32);
    if (x) ha->free(ha->ctx, x);
    free(labels);
    return st;
}

dlp_status dlp_cuda_probe_steps(const dlp_net *net, const float *params, const float *bufs, int train,
                                dlp_dtype precision, int tf32, const int *batches, int nbatches, int warmup,
                                int steps, int h2d, dlp_cuda_step_point *out) {
    for (int i = 0; i < nbatches; i++) {
        dlp_status st = probe_one(net, params, bufs, train, precision, tf32, batches[i], warmup, steps, h2d, &out[i]);
        if (st != DLP_OK) {
            dlp_err_context("%s %s batch %d", train ? "training" : "inference", dlp_dtype_name(precision), batches[i]);
            return st;
        }
        DLP_INFO("cuda probe: %s %s batch %d: %.3f ms/step, %.0f img/s", train ? "train" : "infer",
                 dlp_dtype_name(precision), batches[i], out[i].step_ms, out[i].images_per_s);
    }
    return DLP_OK;
}
