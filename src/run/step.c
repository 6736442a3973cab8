// run/step: the phase table, the step runner and the bench harness (run/step.h).
#include "run/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/stats.h"

typedef struct step_ctx {
    const dlp_step_cfg *cfg;
    const dlp_step_batch *b;
    dlp_step_result *r;
} step_ctx;

static dlp_status ph_input(step_ctx *s) {
    return s->b->input ? dlp_plan_set_input(s->cfg->plan, s->b->input, s->b->n) : DLP_OK;
}
static dlp_status ph_forward(step_ctx *s) {
    return dlp_plan_forward(s->cfg->plan, s->cfg->train ? DLP_PASS_TRAIN : DLP_PASS_EVAL);
}
static dlp_status ph_loss(step_ctx *s) {
    return dlp_plan_loss(s->cfg->plan, s->b->labels, s->cfg->label_smoothing, &s->r->loss);
}
static dlp_status ph_backward(step_ctx *s) { return dlp_plan_backward(s->cfg->plan, NULL); }
#define MAX_BUCKETS 1024

struct dlp_step_overlap {
    dlp_comm *comm;
    float *grads;
    void *stream;         // the plan's device stream (the reductions are ordered after its backward)
    dlp_comm_req *reqs[MAX_BUCKETS];
    int n;                // in flight this step
    dlp_status st;        // the first failure of a bucket's start (the callback cannot return it)
    int64_t t_first;      // this step's first bucket (0: none yet)
    int64_t buckets, hidden_ns;
};

dlp_status dlp_step_overlap_new(dlp_comm *comm, dlp_step_overlap **out) {
    *out = calloc(1, sizeof **out);
    DLP_TRY_ALLOC(*out);
    (*out)->comm = comm;
    return DLP_OK;
}

void dlp_step_overlap_bind(dlp_step_overlap *o, dlp_plan *plan) {
    o->grads = dlp_plan_grad_buffer(plan);
    o->stream = dlp_plan_stream(plan);
}

void dlp_step_on_bucket(void *ctx, int64_t offset, int64_t count) {
    dlp_step_overlap *o = ctx;
    if (!o || !o->comm || dlp_comm_size(o->comm) == 1 || o->st) return;
    if (!o->grads || o->n >= MAX_BUCKETS) {
        o->st = DLP_ERR(DLP_ERR_INTERNAL, "gradient bucket at %lld: %s", (long long)offset,
                        o->grads ? "more than 1024 buckets in one step" : "no plan bound to the overlap");
        return;
    }
    if (!o->t_first) o->t_first = dlp_now_ns();
    dlp_comm_req *r = NULL;
    o->st = dlp_comm_allreduce_start(o->comm, o->grads + offset, count, o->stream, &r);
    if (!o->st && r) o->reqs[o->n++] = r;
    o->buckets++;
}

void dlp_step_overlap_stats(const dlp_step_overlap *o, int64_t *buckets, int64_t *hidden_ns) {
    *buckets = o ? o->buckets : 0;
    *hidden_ns = o ? o->hidden_ns : 0;
}

void dlp_step_overlap_free(dlp_step_overlap *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) (void)dlp_comm_wait(o->comm, o->reqs[i]);  // a failed step's strays
    free(o);
}

static dlp_status ph_allreduce(step_ctx *s) {
    dlp_comm *c = s->cfg->comm;
    if (!c || dlp_comm_size(c) == 1) return DLP_OK;
    dlp_step_overlap *o = s->cfg->overlap;
    if (!o || !o->t_first) {  // nothing announced during backward: the whole gradient array now
        if (o && o->st) return o->st;
        return dlp_comm_allreduce(c, dlp_plan_grad_buffer(s->cfg->plan), dlp_plan_param_count(s->cfg->plan),
                                  dlp_plan_stream(s->cfg->plan));
    }
    o->hidden_ns += dlp_now_ns() - o->t_first;  // the buckets' reductions ran behind the rest of backward
    dlp_status st = o->st;
    for (int i = 0; i < o->n; i++) {
        dlp_status w = dlp_comm_wait(c, o->reqs[i]);
        if (!st) st = w;
    }
    o->n = 0;
    o->t_first = 0;
    o->st = DLP_OK;
    return st;
}
static dlp_status ph_update(step_ctx *s) { return dlp_plan_update(s->cfg->plan, &s->b->sgd); }

enum { IN_ANY, IN_TRAIN, IN_LABELS };  // when a phase runs: every step, training steps, steps given labels

static const struct {
    const char *name;
    int when;
    dlp_status (*run)(step_ctx *s);
} k_phases[DLP_STEP_NPHASES] = {
    [DLP_STEP_INPUT] = {"input", IN_ANY, ph_input},
    [DLP_STEP_FORWARD] = {"forward", IN_ANY, ph_forward},
    [DLP_STEP_LOSS] = {"loss", IN_LABELS, ph_loss},
    [DLP_STEP_BACKWARD] = {"backward", IN_TRAIN, ph_backward},
    [DLP_STEP_ALLREDUCE] = {"allreduce", IN_TRAIN, ph_allreduce},
    [DLP_STEP_UPDATE] = {"update", IN_TRAIN, ph_update},
};

static int phase_runs(const dlp_step_cfg *cfg, const dlp_step_batch *b, int p) {
    return k_phases[p].when == IN_ANY || cfg->train || (k_phases[p].when == IN_LABELS && b->labels);
}

const char *dlp_step_phase_name(dlp_step_phase p) { return (unsigned)p < DLP_STEP_NPHASES ? k_phases[p].name : "?"; }

dlp_status dlp_step_run(const dlp_step_cfg *cfg, const dlp_step_batch *b, int timed, dlp_step_result *r) {
    memset(r, 0, sizeof *r);
    step_ctx s = {cfg, b, r};
    const dlp_step_timer *tm = timed >= 0 ? cfg->timer : NULL;
    int64_t t = dlp_now_ns();
    r->t0_ns = t;
    for (int p = 0; p < DLP_STEP_NPHASES; p++) {
        if (tm) DLP_CHECK(tm->mark(tm->ctx, timed, p));
        if (!phase_runs(cfg, b, p)) continue;
        dlp_status st = k_phases[p].run(&s);
        if (!st && cfg->sync_phases) st = dlp_plan_sync(cfg->plan);
        if (!st && cfg->after_phase) st = cfg->after_phase(cfg->hook_ctx, (dlp_step_phase)p);
        if (st) return dlp_err_trace(st, __FILE__, __LINE__, k_phases[p].name);
        int64_t now = dlp_now_ns();
        r->phase_ns[p] = now - t;
        t = now;
    }
    if (tm) DLP_CHECK(tm->mark(tm->ctx, timed, DLP_STEP_NPHASES));
    r->t1_ns = t;
    return DLP_OK;
}

static void summarize(double *v, int n, int stride, dlp_step_stats *s) {
    double *tmp = malloc((size_t)n * sizeof *tmp), sum = 0;
    if (!tmp) return;
    for (int i = 0; i < n; i++) sum += tmp[i] = v[(size_t)i * stride];
    s->mean_ms = n ? sum / n : 0;
    s->p10_ms = dlp_stats_quantile_f64(tmp, (size_t)n, 0.1);
    s->p50_ms = dlp_stats_quantile_f64(tmp, (size_t)n, 0.5);
    s->p90_ms = dlp_stats_quantile_f64(tmp, (size_t)n, 0.9);
    free(tmp);
}

dlp_status dlp_step_bench(const dlp_step_cfg *cfg, const dlp_step_batch *b, const dlp_step_bench_cfg *bc,
                          dlp_step_bench_result *out) {
    memset(out, 0, sizeof *out);
    const int max = bc->max_steps > bc->min_steps ? bc->max_steps : bc->min_steps;
    if (bc->warmup < 0 || bc->min_steps < 1)
        return DLP_ERR(DLP_ERR_INVALID, "bench: %d warm-up and %d timed steps", bc->warmup, bc->min_steps);
    const int W = DLP_STEP_NPHASES + 1;
    out->ms = calloc((size_t)max * W, sizeof *out->ms);
    DLP_TRY_ALLOC(out->ms);
    dlp_step_result r;
    dlp_status st = DLP_OK;
    for (int i = 0; i < bc->warmup && !st; i++) {
        st = dlp_step_run(cfg, b, -1, &r);
        if (!st && i == 0) out->loss_first = r.loss.loss;
    }
    if (!st) st = dlp_plan_sync(cfg->plan);  // warm-up work does not spill into the timed steps
    int64_t w0 = dlp_now_ns(), c0 = dlp_cpu_ns();
    int n = 0;
    while (!st && n < max && (n < bc->min_steps || dlp_ns_to_s(dlp_now_ns() - w0) < bc->min_s)) {
        st = dlp_step_run(cfg, b, n, &r);
        if (st) break;
        if (cfg->train && !isfinite(r.loss.loss)) {
            st = DLP_ERR(DLP_ERR_NUMERIC, "loss is %g at step %d", r.loss.loss, bc->warmup + n);
            break;
        }
        if (cfg->train && bc->warmup == 0 && n == 0) out->loss_first = r.loss.loss;
        out->loss_last = r.loss.loss;
        double *row = out->ms + (size_t)n * W;
        for (int p = 0; p < DLP_STEP_NPHASES; p++) row[p] = dlp_ns_to_ms(r.phase_ns[p]);
        row[DLP_STEP_NPHASES] = dlp_ns_to_ms(r.t1_ns - r.t0_ns);
        n++;
    }
    if (!st) st = dlp_plan_sync(cfg->plan);
    out->wall_s = dlp_ns_to_s(dlp_now_ns() - w0);
    out->cpu_s = dlp_ns_to_s(dlp_cpu_ns() - c0);
    out->steps = n;
    for (int i = 0; !st && cfg->timer && i < n; i++) {
        double *row = out->ms + (size_t)i * W;
        st = cfg->timer->read(cfg->timer->ctx, i, row, &row[DLP_STEP_NPHASES]);
    }
    if (st) {
        dlp_step_bench_free(out);
        return st;
    }
    for (int p = 0; p < W; p++) summarize(out->ms + p, n, W, p < DLP_STEP_NPHASES ? &out->phase[p] : &out->step);
    return DLP_OK;
}

void dlp_step_bench_free(dlp_step_bench_result *r) {
    free(r->ms);
    r->ms = NULL;
}

void dlp_step_fill_random(void *dst, int64_t n, dlp_dtype t, dlp_rng *r) {
    for (int64_t i = 0; i < n; i++) {
        float v = (float)dlp_rng_normal(r);
        switch (t) {
        case DLP_DTYPE_F32: ((float *)dst)[i] = v; break;
        case DLP_DTYPE_BF16: ((uint16_t *)dst)[i] = dlp_f32_to_bf16(v); break;
        case DLP_DTYPE_F16: ((uint16_t *)dst)[i] = dlp_f32_to_f16(v); break;
        default: ((uint8_t *)dst)[i] = (uint8_t)dlp_rng_below(r, 256); break;
        }
    }
}
