// backend/sim/sim: a device emulated from its profile; it sleeps for the time each op would take.
#include "backend/sim/sim.h"
#include "backend/backend_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "hw/catalog.h"
#include "hw/derive.h"
#include "hw/work.h"

typedef struct sim_plan {
    dlp_plan base;
    dlp_device_profile dev;
    dlp_step_request req;     // for a full batch
    dlp_step_times st;        // for a full batch
    int batch, train, classes;
    int64_t out_per_sample;   // elements of the last layer per sample
    int64_t param_count, buf_count;
    float *params, *bufs, *grads, *mom;  // host copies, allocated when first used
    int n_last;               // samples of the last set_input
    dlp_dtype in_dtype;
    // Timeline (CLOCK_MONOTONIC ns): the device is busy until busy_until; the previous step's compute began
    // at prev_compute_start; the last op returned to the caller at last_return.
    int64_t busy_until, prev_compute_start, last_return;
    int fwd_train_done;       // a DLP_PASS_TRAIN forward since the last backward
    // Gradient buckets (dlp_net_buckets) and when each is final: the share of backward's work done once
    // backward has processed its ready_layer (backward's work per layer taken as that layer's forward FLOPs).
    dlp_bucket *buckets;
    double *bucket_at;        // (nbuckets) fraction of backward
    int nbuckets;
    void (*on_bucket)(void *ctx, int64_t offset, int64_t count);
    void *bucket_ctx;
} sim_plan;

// A caller that comes back within this time after an op did not wait for data: its next batch was ready, so an
// overlapping device would have copied it during the previous step.
#define SIM_NO_WAIT_NS 1000000LL

static _Thread_local int t_slack_set;

// Sleeps until an absolute deadline without using the CPU (timer slack lowered once per thread so wake-ups are
// not rounded up by the default 50 us).
static void wait_until(int64_t deadline) {
    if (!t_slack_set) {
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        t_slack_set = 1;
    }
    dlp_sleep_until_ns(deadline);
}

static int64_t ns(double s) { return (int64_t)llround(s * 1e9); }

// An op issued within this time after the device became free follows the previous op directly, as queued work
// does on a GPU: the wake-up latency of the sleep does not accumulate into the device's timeline.
#define SIM_CHAIN_NS 300000LL

static int64_t op_start(const sim_plan *p, int64_t now) {
    if (now <= p->busy_until || (p->busy_until > 0 && now - p->busy_until < SIM_CHAIN_NS)) return p->busy_until;
    return now;
}

// Runs `dur` seconds of device work starting when both the caller and the device are ready; returns its start.
static int64_t run_op(sim_plan *p, double dur) {
    int64_t start = op_start(p, dlp_now_ns());
    p->busy_until = start + ns(dur);
    wait_until(p->busy_until);
    return start;
}

static void finish(sim_plan *p) { p->last_return = dlp_now_ns(); }

static dlp_status sim_available(char *why, size_t len) {
    if (why && len) why[0] = '\0';
    return DLP_OK;
}

static void sim_plan_free(dlp_plan *bp) {
    sim_plan *p = (sim_plan *)bp;
    if (!p) return;
    DLP_FREE_ALL(p->params, p->bufs, p->grads, p->mom, p->buckets, p->bucket_at, p);
}

// Forward FLOPs of one layer (conv and fc; as dlp_net_forward_flops counts them).
static double layer_flops(const dlp_net *net, int i) {
    const dlp_layer *l = &net->layers[i];
    if (l->kind == DLP_LAYER_CONV) return 2.0 * l->c * l->h * l->w * (double)net->layers[l->in0].c * l->k * l->k;
    if (l->kind == DLP_LAYER_FC) return 2.0 * l->c * (double)dlp_net_layer_numel(net, l->in0);
    return 0;
}

static dlp_status bucket_times(const dlp_net *net, int64_t bucket_elems, sim_plan *p) {
    DLP_CHECK(dlp_net_buckets(net, bucket_elems, &p->buckets, &p->nbuckets));
    p->bucket_at = calloc(p->nbuckets > 0 ? (size_t)p->nbuckets : 1, sizeof *p->bucket_at);
    DLP_TRY_ALLOC(p->bucket_at);
    double total = 0;
    for (int i = 0; i < net->nlayers; i++) total += layer_flops(net, i);
    for (int k = 0; k < p->nbuckets; k++) {
        double done = 0;  // backward has processed layers ready_layer .. nlayers-1
        for (int i = p->buckets[k].ready_layer; i < net->nlayers; i++) done += layer_flops(net, i);
        p->bucket_at[k] = total > 0 ? done / total : (double)(k + 1) / p->nbuckets;
    }
    return DLP_OK;
}

static dlp_status sim_plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
    *out = NULL;
    if (!net || net->nlayers < 2 || cfg->batch < 1)
        return DLP_ERR(DLP_ERR_INVALID, "sim: needs a net with layers and batch >= 1");
    dlp_sim_spec spec;
    DLP_CHECK(dlp_sim_spec_parse(cfg->arg, &spec));
    sim_plan *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->base.ops = &dlp_backend_sim;
    dlp_status st = DLP_OK;
    dlp_catalog *cat = NULL;
    if (strcmp(spec.gpu, "custom") != 0) st = dlp_catalog_load(NULL, &cat);
    if (st == DLP_OK) st = dlp_sim_device(&spec, cat, &p->dev);
    dlp_catalog_free(cat);
    if (st != DLP_OK) {
        free(p);
        return dlp_err_trace(st, __FILE__, __LINE__, "sim device");
    }
    const dlp_layer *in = &net->layers[0];
    const dlp_layer *last = &net->layers[dlp_net_output(net)];
    p->batch = cfg->batch;
    p->train = cfg->train;
    p->classes = net->num_classes > 0 ? net->num_classes : last->c;
    p->out_per_sample = dlp_net_layer_numel(net, dlp_net_output(net));
    p->param_count = net->param_count;
    p->buf_count = net->buf_count;
    p->in_dtype = cfg->precision == DLP_DTYPE_F32 ? DLP_DTYPE_F32 : cfg->precision;
    p->on_bucket = cfg->on_bucket;
    p->bucket_ctx = cfg->bucket_ctx;
    if (cfg->train && cfg->on_bucket) {
        st = bucket_times(net, cfg->bucket_elems, p);
        if (st != DLP_OK) {
            sim_plan_free(&p->base);
            return dlp_err_trace(st, __FILE__, __LINE__, "sim buckets");
        }
    }
    double flops = dlp_net_forward_flops(net);
    dlp_step_request *q = &p->req;
    q->task = cfg->train ? DLP_TASK_TRAIN : DLP_TASK_INFER;
    q->prec = dlp_prec_from_dtype(cfg->precision, cfg->tf32);
    if (q->prec == DLP_PREC_TF32 && !dlp_device_find_rate(&p->dev, q->task, DLP_PREC_TF32, 0)) q->prec = DLP_PREC_FP32;
    q->batch = cfg->batch;
    q->work_ratio = flops > 0 ? flops / dlp_work_ref()->fwd_flops : 1e-9;
    q->params_ratio = (double)net->param_count / (double)dlp_work_ref()->params;
    q->input_bytes = (double)in->c * in->h * in->w * dlp_dtype_size(p->in_dtype);
    st = dlp_step_times_compute(&p->dev, q, &p->st);
    if (st != DLP_OK) {
        sim_plan_free(&p->base);
        return dlp_err_trace(st, __FILE__, __LINE__, "sim step times");
    }
    *out = &p->base;
    return DLP_OK;
}

static void sim_input_format(const dlp_plan *bp, dlp_layout *layout, dlp_dtype *dtype) {
    const sim_plan *p = (const sim_plan *)bp;
    *layout = DLP_LAYOUT_NHWC;  // what a GPU backend takes
    *dtype = p->in_dtype;
}

static dlp_status ensure(float **buf, int64_t n) {
    if (!*buf) {
        *buf = calloc(n > 0 ? (size_t)n : 1, sizeof(float));
        DLP_TRY_ALLOC(*buf);
    }
    return DLP_OK;
}

static dlp_status sim_set_params(dlp_plan *bp, const float *params, const float *bufs) {
    sim_plan *p = (sim_plan *)bp;
    DLP_CHECK(ensure(&p->params, p->param_count));
    memcpy(p->params, params, (size_t)p->param_count * sizeof(float));
    if (bufs) {
        DLP_CHECK(ensure(&p->bufs, p->buf_count));
        memcpy(p->bufs, bufs, (size_t)p->buf_count * sizeof(float));
    }
    return DLP_OK;
}

static dlp_status sim_get_params(dlp_plan *bp, float *params, float *bufs) {
    sim_plan *p = (sim_plan *)bp;  // unchanged by updates: the sim computes nothing
    if (p->params) memcpy(params, p->params, (size_t)p->param_count * sizeof(float));
    else memset(params, 0, (size_t)p->param_count * sizeof(float));
    if (bufs) {
        if (p->bufs) memcpy(bufs, p->bufs, (size_t)p->buf_count * sizeof(float));
        else memset(bufs, 0, (size_t)p->buf_count * sizeof(float));
    }
    return DLP_OK;
}

static dlp_status sim_get_grads(dlp_plan *bp, float *grads) {
    sim_plan *p = (sim_plan *)bp;
    memset(grads, 0, (size_t)p->param_count * sizeof(float));
    return DLP_OK;
}

static dlp_status sim_set_momentum(dlp_plan *bp, const float *v) {
    sim_plan *p = (sim_plan *)bp;
    DLP_CHECK(ensure(&p->mom, p->param_count));
    memcpy(p->mom, v, (size_t)p->param_count * sizeof(float));
    return DLP_OK;
}

static dlp_status sim_get_momentum(dlp_plan *bp, float *v) {
    sim_plan *p = (sim_plan *)bp;
    if (p->mom) memcpy(v, p->mom, (size_t)p->param_count * sizeof(float));
    else memset(v, 0, (size_t)p->param_count * sizeof(float));
    return DLP_OK;
}

static float *sim_grad_buffer(dlp_plan *bp) {
    sim_plan *p = (sim_plan *)bp;
    if (ensure(&p->grads, p->param_count) != DLP_OK) return NULL;
    return p->grads;
}

// The host-to-device copy. With overlap, a batch that was ready when the previous step began would have been
// copied during that step: only the part of the copy longer than that step is waited for.
static dlp_status sim_set_input(dlp_plan *bp, const void *batch, int n) {
    sim_plan *p = (sim_plan *)bp;
    (void)batch;
    if (n < 1 || n > p->batch) return DLP_ERR(DLP_ERR_INVALID, "sim: set_input with %d samples (plan batch %d)", n, p->batch);
    p->n_last = n;
    double copy = p->st.h2d_s * n / p->batch;
    int64_t now = dlp_now_ns();
    if (copy > 0) {
        if (p->dev.h2d_overlap && p->prev_compute_start > 0 && now - p->last_return < SIM_NO_WAIT_NS) {
            double done = (double)(now - p->prev_compute_start) * 1e-9;  // time the previous step gave the copy
            copy = copy > done ? copy - done : 0;
        }
        if (copy > 0) run_op(p, copy);
    }
    finish(p);
    return DLP_OK;
}

static dlp_status sim_forward(dlp_plan *bp, dlp_pass pass) {
    sim_plan *p = (sim_plan *)bp;
    if (p->n_last == 0) return DLP_ERR(DLP_ERR_INVALID, "sim: forward before set_input");
    if (pass == DLP_PASS_TRAIN && !p->train) return DLP_ERR(DLP_ERR_INVALID, "sim: a training pass on an inference plan");
    if (pass == DLP_PASS_TRAIN && p->n_last != p->batch)
        return DLP_ERR(DLP_ERR_INVALID, "sim: a training pass needs a full batch of %d (set_input gave %d)", p->batch,
                       p->n_last);
    p->fwd_train_done = pass == DLP_PASS_TRAIN;
    p->prev_compute_start = run_op(p, p->st.fwd_s);
    finish(p);
    return DLP_OK;
}

static dlp_status sim_get_output(dlp_plan *bp, float *out) {
    sim_plan *p = (sim_plan *)bp;
    memset(out, 0, (size_t)p->n_last * (size_t)p->out_per_sample * sizeof(float));
    return DLP_OK;
}

static dlp_status sim_loss(dlp_plan *bp, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    sim_plan *p = (sim_plan *)bp;
    (void)label_smoothing;
    for (int i = 0; i < p->n_last; i++)
        if (labels[i] < 0 || labels[i] >= p->classes)
            return DLP_ERR(DLP_ERR_INVALID, "sim: label %d of sample %d is outside [0, %d)", labels[i], i, p->classes);
    // Softmax cross-entropy of all-zero logits: the uniform distribution, whatever the labels or smoothing.
    out->loss = log((double)p->classes);
    out->correct_top1 = 0;
    out->correct_top5 = 0;
    return DLP_OK;
}

static dlp_status sim_backward(dlp_plan *bp, const float *dy) {
    sim_plan *p = (sim_plan *)bp;
    (void)dy;
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "sim: backward on an inference plan");
    if (!p->fwd_train_done) return DLP_ERR(DLP_ERR_INVALID, "sim: backward needs a DLP_PASS_TRAIN forward first");
    p->fwd_train_done = 0;
    int64_t start = op_start(p, dlp_now_ns());
    int64_t dur = ns(p->st.bwd_s);
    p->busy_until = start + dur;
    for (int k = 0; p->on_bucket && k < p->nbuckets; k++) {  // dlp_net_buckets' order: from the end
        wait_until(start + (int64_t)((double)dur * p->bucket_at[k]));
        p->on_bucket(p->bucket_ctx, p->buckets[k].offset, p->buckets[k].count);
    }
    wait_until(p->busy_until);
    finish(p);
    return DLP_OK;
}

static dlp_status sim_update(dlp_plan *bp, const dlp_sgd *hp) {
    sim_plan *p = (sim_plan *)bp;
    (void)hp;
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "sim: update on an inference plan");
    run_op(p, p->st.update_s);
    finish(p);
    return DLP_OK;
}

static dlp_status sim_sync(dlp_plan *bp) {
    sim_plan *p = (sim_plan *)bp;
    wait_until(p->busy_until);
    finish(p);
    return DLP_OK;
}

dlp_status dlp_sim_plan_times(const dlp_plan *bp, dlp_step_times *out) {
    if (!bp || bp->ops != &dlp_backend_sim) return DLP_ERR(DLP_ERR_INVALID, "not a sim plan");
    *out = ((const sim_plan *)bp)->st;
    return DLP_OK;
}

const dlp_device_profile *dlp_sim_plan_device(const dlp_plan *bp) {
    if (!bp || bp->ops != &dlp_backend_sim) return NULL;
    return &((const sim_plan *)bp)->dev;
}

const dlp_backend_ops dlp_backend_sim = {
    .name = "sim",
    .summary = "an emulated GPU (sim:a100, sim:h100,scale=0.1, sim:custom,img_per_s=500): waits the time the step would take, computes nothing",
    .caps = {.kind = DLP_BACKEND_KIND_SIM, .default_precision = DLP_DTYPE_F16},
    .available = sim_available,
    .plan_create = sim_plan_create,
    .plan_free = sim_plan_free,
    .input_format = sim_input_format,
    .set_params = sim_set_params,
    .get_params = sim_get_params,
    .get_grads = sim_get_grads,
    .set_momentum = sim_set_momentum,
    .get_momentum = sim_get_momentum,
    .grad_buffer = sim_grad_buffer,
    .set_input = sim_set_input,
    .forward = sim_forward,
    .get_output = sim_get_output,
    .loss = sim_loss,
    .backward = sim_backward,
    .get_input_grad = NULL,
    .update = sim_update,
    .sync = sim_sync,
    .measure_peak = NULL,
};
