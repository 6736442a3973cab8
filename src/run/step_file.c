// run/step_file: `dlperf nn step`: one training (or eval) step on a batch read from a file, everything written out.
#include "run/step_file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fs.h"
#include "nn/checkpoint.h"
#include "nn/convert.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/state.h"
#include "run/step.h"

typedef struct step_io {
    dlp_st_file in;
    float *x;
    int32_t *labels;
    int n, c, h, w;
} step_io;

static dlp_status read_batch(const char *path, step_io *io) {
    memset(io, 0, sizeof *io);
    DLP_CHECK(dlp_st_open(path, 0, &io->in));
    const dlp_st_tensor *x = dlp_st_find(&io->in, "input"), *y = dlp_st_find(&io->in, "labels");
    if (!x || !y)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: needs tensors 'input' (N, C, H, W) and 'labels' (N)", path);
    if (x->ndim != 4 || y->ndim != 1 || y->shape[0] != x->shape[0] || x->shape[0] < 1 || x->shape[0] > 1 << 20)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: 'input' must be (N, C, H, W) and 'labels' (N) with the same N", path);
    static const char *const dims[4] = {"N", "C", "H", "W"};
    static const int64_t maxd[4] = {1 << 20, 64, 1 << 14, 1 << 14};  // a batch, channels, pixels: sane bounds
    for (int d = 0; d < 4; d++)
        if (x->shape[d] < 1 || x->shape[d] > maxd[d])
            return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor 'input' has %s = %lld (must be 1..%lld)", path, dims[d],
                           (long long)x->shape[d], (long long)maxd[d]);
    io->n = (int)x->shape[0];
    io->c = (int)x->shape[1];
    io->h = (int)x->shape[2];
    io->w = (int)x->shape[3];
    io->x = malloc((size_t)x->numel * sizeof(float));
    int64_t *l = malloc((size_t)io->n * sizeof(int64_t));
    io->labels = malloc((size_t)io->n * sizeof(int32_t));
    if (!io->x || !l || !io->labels) {
        free(l);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    dlp_status st = dlp_st_read_f32(&io->in, x, io->x);
    if (!st) st = dlp_st_read_i64(&io->in, y, l);
    for (int i = 0; !st && i < io->n; i++) {
        if (l[i] < 0 || l[i] > INT32_MAX)  // checked before narrowing: 2^32 + 3 must not become class 3
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: tensor 'labels'[%d] = %lld is not a class index (0 .. 2^31 - 1)", path, i,
                         (long long)l[i]);
        else io->labels[i] = (int32_t)l[i];
    }
    free(l);
    return st;
}

static void step_io_free(step_io *io) {
    free(io->x);
    free(io->labels);
    dlp_st_close(&io->in);
}

// What nn step reads from the plan between phases.
typedef struct step_reads {
    dlp_plan *plan;
    float *logits, *grads;
} step_reads;

static dlp_status read_after(void *ctx, dlp_step_phase p) {
    step_reads *r = ctx;
    if (p == DLP_STEP_FORWARD) return dlp_plan_get_output(r->plan, r->logits);
    if (p == DLP_STEP_BACKWARD) return dlp_plan_get_grads(r->plan, r->grads);
    return DLP_OK;
}

// A training step's outputs: grad.<param> for every parameter, and updated.<name>: the state_dict after
// optimizer.step(), in its order (num_batches_tracked included). The names are kept in *names until written.
static dlp_status add_train_outputs(dlp_st_writer *w, const dlp_net *net, const float *grads, const float *newp,
                                    const float *newb, const int64_t *nbt_after, char ***names_out, int *nnames) {
    char **names = calloc((size_t)(2 * net->nparams + 2 * net->nbufs), sizeof *names);
    if (!names) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    *names_out = names;
    for (int i = 0; i < net->nparams; i++) {
        const dlp_param *p = &net->params[i];
        if (asprintf(&names[*nnames], "grad.%s", p->name) < 0) names[*nnames] = NULL;
        if (!names[*nnames]) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        DLP_CHECK(dlp_st_writer_add(w, names[(*nnames)++], DLP_ST_F32, p->ndim, p->shape, grads + p->offset));
    }
    for (int li = 0; li < net->nlayers; li++) {
        const dlp_layer *l = &net->layers[li];
        for (int k = 0; k < l->nparams + l->nbufs + (l->kind == DLP_LAYER_BN); k++) {
            const dlp_param *p = k < l->nparams ? &net->params[l->param0 + k]
                               : k < l->nparams + l->nbufs ? &net->bufs[l->buf0 + k - l->nparams] : NULL;
            char *nm;
            if (asprintf(&nm, "updated.%s%s", p ? p->name : l->name, p ? "" : ".num_batches_tracked") < 0)
                return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            names[(*nnames)++] = nm;
            if (p) DLP_CHECK(dlp_st_writer_add(w, nm, DLP_ST_F32, p->ndim, p->shape, (k < l->nparams ? newp : newb) + p->offset));
            else DLP_CHECK(dlp_st_writer_add(w, nm, DLP_ST_I64, 0, NULL, nbt_after));
        }
    }
    return DLP_OK;
}

// --checkpoint: the weights after the step (before it for --eval), the momentum and a constant schedule at lr.
static dlp_status save_step_checkpoint(const char *ck_path, const dlp_net *net, dlp_plan *plan, int eval,
                                       const float *params, const float *bufs, const float *newp, const float *newb,
                                       double lr, int n, uint64_t seed, double loss) {
    dlp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    dlp_lr_schedule_default(&ck.sched);
    ck.sched.base_lr = lr;
    ck.sched.scale_by_batch = 0;
    ck.sched.decay = DLP_LR_CONSTANT;
    ck.pos.step = eval ? 0 : 1;
    ck.pos.step_in_epoch = ck.pos.step;
    ck.pos.samples_seen = eval ? 0 : n;
    ck.pos.seed = seed;
    ck.pos.last_loss = loss;
    float *mom = NULL;
    if (!eval) {
        mom = malloc((size_t)net->param_count * sizeof(float));
        dlp_status st = mom ? dlp_plan_get_momentum(plan, mom) : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        if (st) {
            free(mom);
            return st;
        }
    }
    dlp_status st = dlp_checkpoint_save(ck_path, net, eval ? params : newp, eval ? bufs : newb, mom, &ck);
    free(mom);
    return st;
}

dlp_status dlp_step_file_run(const dlp_step_file_cfg *c, dlp_step_file_result *r) {
    memset(r, 0, sizeof *r);
    const char *arg;
    const dlp_backend *ops = dlp_backend_find(c->device, &arg);
    if (!ops) return dlp_err_status();
    dlp_status st = DLP_OK;
    step_io io;
    dlp_net net;
    memset(&net, 0, sizeof net);
    float *params = NULL, *bufs = NULL, *grads = NULL, *gx = NULL, *logits = NULL, *newp = NULL, *newb = NULL;
    dlp_plan *plan = NULL;
    void *in_conv = NULL;  // the batch in the plan's input format when that is not NCHW fp32
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    char **names = NULL;
    int nnames = 0;
    DLP_CHECK_GOTO(st, read_batch(c->input_path, &io), out);
    dlp_resnet_cfg rc;
    DLP_CHECK_GOTO(st, dlp_resnet_cfg_from_name(c->model, c->classes, io.h, &rc), out);
    rc.in_channels = io.c;
    rc.width_px = io.w;
    DLP_CHECK_GOTO(st, dlp_resnet_build(&rc, &net), out);
    const int n = io.n;
    const int plan_batch = c->plan_batch ? c->plan_batch : n;
    if (plan_batch < n || (!c->eval && plan_batch != n)) {
        st = DLP_ERR(DLP_ERR_INVALID, "--plan-batch %d: must be >= the batch's %d samples, and only with --eval", plan_batch, n);
        goto out;
    }
    params = malloc((size_t)net.param_count * sizeof(float));
    bufs = malloc((size_t)net.buf_count * sizeof(float));
    grads = malloc((size_t)net.param_count * sizeof(float));
    newp = malloc((size_t)net.param_count * sizeof(float));
    newb = malloc((size_t)net.buf_count * sizeof(float));
    gx = malloc((size_t)n * dlp_net_layer_numel(&net, 0) * sizeof(float));
    logits = malloc((size_t)n * net.num_classes * sizeof(float));
    if (!params || !bufs || !grads || !newp || !newb || !gx || !logits) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t nbt = 0;
    if (c->weights) DLP_CHECK_GOTO(st, dlp_state_load(&net, c->weights, DLP_STATE_STRICT, params, bufs, &nbt), out);
    else dlp_resnet_init_params(&net, c->seed, c->zero_init_residual, params, bufs);
    dlp_plan_cfg cfg = {.batch = plan_batch, .train = !c->eval, .precision = c->precision, .threads = c->threads, .arg = arg};
    DLP_CHECK_GOTO(st, dlp_plan_create(ops, &net, &cfg, &plan), out);
    DLP_CHECK_GOTO(st, dlp_plan_set_params(plan, params, bufs), out);
    dlp_layout layout;
    dlp_dtype in_type;
    dlp_plan_input_format(plan, &layout, &in_type);
    if ((layout != DLP_LAYOUT_NCHW || in_type != DLP_DTYPE_F32) &&  // the batch in what the plan wants
        dlp_batch_convert(io.x, n, io.c, io.h, io.w, layout, in_type, &in_conv)) {
        if (dlp_err_status() == DLP_ERR_UNSUPPORTED) {
            dlp_err_clear();
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "nn step: cannot feed device %s its input format", dlp_backend_name(ops));
        } else {
            st = dlp_err_status();
        }
        goto out;
    }
    // One step through run/step: the logits read after the forward, the gradients before the update.
    step_reads rd = {.plan = plan, .logits = logits, .grads = grads};
    const dlp_step_cfg sc = {.plan = plan, .train = !c->eval, .sync_phases = 1, .label_smoothing = (float)c->label_smoothing,
                             .after_phase = read_after, .hook_ctx = &rd};
    const dlp_step_batch sb = {.input = in_conv ? in_conv : (const void *)io.x, .n = n, .labels = io.labels,
                               .sgd = {.lr = (float)c->lr, .momentum = (float)c->momentum, .weight_decay = (float)c->weight_decay,
                                       .nesterov = c->nesterov, .decay_no_decay_params = !c->no_bn_decay}};
    dlp_step_result sr;
    DLP_CHECK_GOTO(st, dlp_step_run(&sc, &sb, -1, &sr), out);
    const dlp_loss_out lo = sr.loss;
    int64_t c1 = lo.correct_top1, c5 = lo.correct_top5;
    int64_t lshape[2] = {n, net.num_classes};
    DLP_CHECK_GOTO(st, dlp_st_writer_add(&w, "logits", DLP_ST_F32, 2, lshape, logits), out);
    DLP_CHECK_GOTO(st, dlp_st_writer_add(&w, "loss", DLP_ST_F64, 0, NULL, &lo.loss), out);
    DLP_CHECK_GOTO(st, dlp_st_writer_add(&w, "correct_top1", DLP_ST_I64, 0, NULL, &c1), out);
    DLP_CHECK_GOTO(st, dlp_st_writer_add(&w, "correct_top5", DLP_ST_I64, 0, NULL, &c5), out);
    int64_t nbt_after = nbt + 1;
    if (!c->eval) {
        DLP_CHECK_GOTO(st, dlp_plan_get_params(plan, newp, newb), out);
        int64_t xshape[4] = {n, io.c, io.h, io.w};
        if (dlp_backend_has(ops, DLP_BACKEND_INPUT_GRAD)) {
            DLP_CHECK_GOTO(st, dlp_plan_get_input_grad(plan, gx), out);
            DLP_CHECK_GOTO(st, dlp_st_writer_add(&w, "input_grad", DLP_ST_F32, 4, xshape, gx), out);
        }
        DLP_CHECK_GOTO(st, add_train_outputs(&w, &net, grads, newp, newb, &nbt_after, &names, &nnames), out);
    }
    DLP_CHECK_GOTO(st, dlp_st_writer_write(&w, c->out_path, DLP_WRITE_NOCLOBBER), out);
    if (c->checkpoint_path)
        DLP_CHECK_GOTO(st, save_step_checkpoint(c->checkpoint_path, &net, plan, c->eval, params, bufs, newp, newb, c->lr, n,
                                                c->seed, lo.loss), out);
    *r = (dlp_step_file_result){.backend = dlp_backend_name(ops), .n = n, .loss = lo.loss, .top1 = c1, .top5 = c5};
out:
    free(in_conv);
    if (plan) dlp_plan_free(plan);
    dlp_st_writer_free(&w);
    for (int i = 0; i < nnames; i++) free(names[i]);
    free(names);
    step_io_free(&io);
    free(params);
    free(bufs);
    free(grads);
    free(gx);
    free(logits);
    free(newp);
    free(newb);
    dlp_net_free(&net);
    return st;
}
