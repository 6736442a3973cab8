// run/train: setup (datasets, model, plan, loaders, resume), the step loop with its phase timing, validation,
// checkpoints. The figures and the JSON result are built in train_result.c.
#include "run/train.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/source.h"
#include "nn/ckdir.h"
#include "nn/resnet.h"
#include "run/step.h"
#include "run/train_impl.h"

// The loop's phases: the data wait, run/step's phases, the bookkeeping.
_Static_assert(DLP_TRAIN_PH_INPUT + DLP_STEP_NPHASES == DLP_TRAIN_PH_OTHER &&
                   DLP_TRAIN_PH_INPUT + DLP_STEP_ALLREDUCE == DLP_TRAIN_PH_ALLREDUCE,
               "the training phases are run/step's between the data wait and the bookkeeping");
const char *dlp_train_phase_name(dlp_train_phase p) {
    if (p == DLP_TRAIN_PH_DATA_WAIT) return "data_wait";
    if (p == DLP_TRAIN_PH_OTHER) return "other";
    return (unsigned)p < DLP_TRAIN_PH_COUNT ? dlp_step_phase_name((dlp_step_phase)(p - DLP_TRAIN_PH_INPUT)) : "?";
}

const dlp_opt_choice dlp_train_peak_choices[] = {
    {"measure", DLP_TRAIN_PEAK_MEASURE}, {"cached", DLP_TRAIN_PEAK_CACHED}, {"off", DLP_TRAIN_PEAK_OFF}, {NULL, 0},
};

void dlp_train_cfg_defaults(dlp_train_cfg *c) {
    memset(c, 0, sizeof *c);
    c->model = "resnet50";
    c->size = 224;
    c->crop_scale_lo = 0.08;
    c->crop_scale_hi = 1.0;
    c->batch = 32;
    c->precision = DLP_DTYPE_F32;
    dlp_lr_schedule_default(&c->sched);
    c->momentum = 0.9;
    c->weight_decay = 1e-4;
    c->eval = 1;
    c->keep_checkpoints = 2;
    c->measure_warmup_steps = -1;
    c->peak = DLP_TRAIN_PEAK_MEASURE;
    c->monitor = 1;
    c->log_interval_s = 5.0;
}

// ---- small helpers ------------------------------------------------------------------------------------------------

static int is_synthetic(const char *spec) { return !spec || !spec[0] || strncmp(spec, "synthetic", 9) == 0; }

static void set_phase(dlp_trainer *t, const char *name) { dlp_monitor_phase(t->mon, name); }

static void epoch_phase(dlp_trainer *t, int64_t epoch) {
    if (t->steps_run < t->c.measure_warmup_steps) {
        set_phase(t, "warm-up");
        return;
    }
    char name[48];
    snprintf(name, sizeof name, "epoch %lld", (long long)epoch + 1);
    set_phase(t, name);
}

static int fire(dlp_trainer *t, dlp_train_event *ev) {
    if (!t->c.callback) return 0;
    ev->step = t->pos.step;
    ev->total_steps = t->total_steps;
    ev->steps_per_epoch = t->spe;
    ev->elapsed_s = dlp_ns_to_s(dlp_now_ns() - t->t_run0);
    ev->rank = t->rank;
    return t->c.callback(t->c.callback_ctx, ev);
}


// ---- checkpoints --------------------------------------------------------------------------------------------------

// Newest complete checkpoint (model + state sidecar) "step-<N>.safetensors" in dir; *step = -1 if none.
static void newest_checkpoint(const char *dir, char *path, size_t len, int64_t *step) {
    int64_t *steps;
    const int n = dlp_ckdir_list(dir, &steps);
    *step = n > 0 ? steps[n - 1] : -1;
    if (n > 0) dlp_ckdir_path(dir, *step, path, len);
    free(steps);
}

static json_t *ck_config_json(const dlp_trainer *t) {
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(t->net.arch));
    json_object_set_new(o, "classes", json_integer(t->net.num_classes));
    json_object_set_new(o, "size", json_integer(t->c.size));
    json_object_set_new(o, "batch", json_integer(t->c.batch));
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)t->c.seed);
    json_object_set_new(o, "seed", json_string(seed));
    json_object_set_new(o, "precision", json_string(dlp_dtype_name(t->c.precision)));
    json_object_set_new(o, "device", json_string(t->c.device));
    json_object_set_new(o, "train_images", json_integer(dlp_loader_samples_per_epoch(t->tl)));
    json_object_set_new(o, "steps_per_epoch", json_integer(t->spe));
    json_object_set_new(o, "total_steps", json_integer(t->total_steps));
    json_object_set_new(o, "data", json_string(t->train_where));
    json_object_set_new(o, "label_smoothing", json_real(t->c.label_smoothing));
    json_object_set_new(o, "momentum", json_real(t->c.momentum));
    json_object_set_new(o, "weight_decay", json_real(t->c.weight_decay));
    json_object_set_new(o, "nesterov", json_boolean(t->c.nesterov));
    json_object_set_new(o, "no_bn_decay", json_boolean(t->c.no_bn_decay));
    return o;
}

static dlp_status save_checkpoint(dlp_trainer *t) {
    if (t->rank != 0) {  // the weights are the same on every rank: rank 0 writes them
        t->last_ck_step = t->pos.step;
        return DLP_OK;
    }
    int64_t t0 = dlp_now_ns();
    DLP_CHECK(dlp_mkdirs(t->c.checkpoint_dir));
    char path[1024];
    snprintf(path, sizeof path, "%s/step-%08lld.safetensors", t->c.checkpoint_dir, (long long)t->pos.step);
    DLP_CHECK(dlp_plan_get_params(t->plan, t->params, t->bufs));
    DLP_CHECK(dlp_plan_get_momentum(t->plan, t->mom));
    dlp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.pos = t->pos;
    ck.pos.best_top1 = t->best_top1 > 0 ? t->best_top1 : 0;
    ck.sched = t->sched;
    ck.config = ck_config_json(t);
    dlp_status st = dlp_checkpoint_save(path, &t->net, t->params, t->bufs, t->mom, &ck);
    json_decref(ck.config);
    if (st) return dlp_err_trace(st, __FILE__, __LINE__, "checkpoint");
    json_array_append_new(t->ck_written, json_string(path));
    snprintf(t->last_ck, sizeof t->last_ck, "%s", path);
    t->last_ck_step = t->pos.step;
    // Keep the newest keep_checkpoints of the directory, whoever wrote them (earlier processes of this run, killed
    // and resumed), and remove what dead writers left (nn/ckdir.h).
    DLP_CHECK(dlp_ckdir_retain(t->c.checkpoint_dir, t->c.keep_checkpoints, NULL));
    DLP_CHECK(dlp_ckdir_clean(t->c.checkpoint_dir, NULL));
    dlp_train_event ev = {.kind = DLP_TRAIN_EV_CHECKPOINT, .epoch = t->pos.epoch, .path = path, .loss = t->last_loss,
                          .lr = t->last_lr};
    if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
    t->ck_ns += dlp_now_ns() - t0;
    return DLP_OK;
}

static dlp_status check_same(const json_t *cfg, const char *key, const json_t *now, const char *path, const char *opt) {
    const json_t *a = json_object_get(cfg, key), *b = json_object_get(now, key);
    if (!a || !b || json_equal(a, b)) return DLP_OK;
    char *sa = json_dumps(a, JSON_ENCODE_ANY), *sb = json_dumps(b, JSON_ENCODE_ANY);
    dlp_status st = DLP_ERR(DLP_ERR_INVALID,
                            "--resume %s: the checkpoint was written by a run with %s %s, this run has %s; continuing it "
                            "needs the same %s", path, opt, sa ? sa : "?", sb ? sb : "?", opt);
    free(sa);
    free(sb);
    return st;
}

// Resuming on another rank count (hosts lost, or added): --batch stays per rank, so the global batch becomes
// batch x ranks and the learning rate follows it (the linear scaling rule, unless --no-lr-scaling); the position
// carries over as the epoch and the share of it done (images seen in it), in this run's steps. Shards are per rank,
// so the rest of that epoch comes from the new shards (some images twice, some not); later epochs cover the set once.
static void rescale_position(dlp_trainer *t, dlp_train_pos *pos, int ck_world) {
    const int64_t b = t->c.batch, seen = pos->step_in_epoch * b * ck_world;
    int64_t sie = seen / (b * t->world);
    if (sie > t->spe) sie = t->spe;
    if (t->rank == 0)
        DLP_WARN("--resume: the checkpoint was written by %d ranks, this run has %d: global batch %lld -> %lld (the "
                 "learning rate follows it%s); epoch %lld goes on at step %lld of %lld (%lld images of it seen)",
                 ck_world, t->world, (long long)(b * ck_world), (long long)(b * t->world),
                 t->sched.scale_by_batch ? "" : ": no, --no-lr-scaling", (long long)pos->epoch, (long long)sie,
                 (long long)t->spe, (long long)seen);
    pos->step_in_epoch = sie;
    pos->step = pos->epoch * t->spe + sie;
}

// Loads the checkpoint into params/bufs/mom and the position; checks it belongs to a run like this one.
static dlp_status load_resume(dlp_trainer *t) {
    const char *r = t->c.resume;
    if (dlp_is_dir(r)) {
        int64_t step;
        newest_checkpoint(r, t->resume_path, sizeof t->resume_path, &step);
        if (step < 0)
            return DLP_ERR(DLP_ERR_NOTFOUND, "--resume %s: no complete checkpoint (step-N.safetensors with its "
                           ".state.safetensors) in this directory", r);
    } else {
        if (!dlp_path_exists(r)) return DLP_ERR(DLP_ERR_NOTFOUND, "--resume %s: no such file or directory", r);
        snprintf(t->resume_path, sizeof t->resume_path, "%s", r);
    }
    dlp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    dlp_status st = dlp_checkpoint_load(t->resume_path, &t->net, t->params, t->bufs, t->mom, 0, &ck);
    if (st) {
        dlp_err_context("--resume %s", t->resume_path);
        return st;
    }
    if (!json_is_object(ck.config)) {  // without the run's settings nothing below could be checked
        dlp_checkpoint_free(&ck);
        return DLP_ERR(DLP_ERR_FORMAT, "--resume %s: the checkpoint has no run configuration (not written by "
                       "dlperf train?)", t->resume_path);
    }
    json_t *now = ck_config_json(t);
    static const char *const keys[][2] = {{"model", "--model"},          {"classes", "--classes"},
                                          {"size", "--size"},            {"batch", "--batch"},
                                          {"seed", "--seed"},            {"train_images", "training images"},
                                          {"steps_per_epoch", "steps per epoch"}};
    const int ck_world = ck.sched.world > 0 ? ck.sched.world : 1;
    for (size_t i = 0; st == DLP_OK && i < sizeof keys / sizeof keys[0]; i++)
        if (ck_world == t->world || i < 5)  // a rank's shard and its steps follow the rank count
            st = check_same(ck.config, keys[i][0], now, t->resume_path, keys[i][1]);
    if (st == DLP_OK && ck_world != t->world) rescale_position(t, &ck.pos, ck_world);
    // Anything else that changes the curve is allowed but said.
    static const char *const soft[] = {"precision", "total_steps", "label_smoothing", "momentum", "weight_decay",
                                       "nesterov", "no_bn_decay", "device", "data"};
    for (size_t i = 0; st == DLP_OK && i < sizeof soft / sizeof soft[0]; i++) {
        const json_t *a = json_object_get(ck.config, soft[i]), *b = json_object_get(now, soft[i]);
        if (a && b && !json_equal(a, b))
            DLP_WARN("--resume: %s differs from the checkpoint's run; the loss curve will not match an uninterrupted "
                     "run", soft[i]);
    }
    json_t *sa = dlp_lr_schedule_to_json(&ck.sched), *sb = dlp_lr_schedule_to_json(&t->sched);
    if (st == DLP_OK && !json_equal(sa, sb))
        DLP_WARN("--resume: the learning-rate schedule differs from the checkpoint's (its lr, warm-up, decay or "
                 "length); continuing with this run's");
    json_decref(sa);
    json_decref(sb);
    json_decref(now);
    if (st == DLP_OK && ck.pos.step >= t->total_steps)
        st = DLP_ERR(DLP_ERR_INVALID, "--resume %s: the checkpoint is at step %lld, and this run has %lld steps: "
                     "nothing left to train (give more --steps or --epochs)", t->resume_path,
                     (long long)ck.pos.step, (long long)t->total_steps);
    if (st == DLP_OK && (ck.pos.step_in_epoch > t->spe || ck.pos.epoch < 0 || ck.pos.step_in_epoch < 0 ||
                         ck.pos.step != ck.pos.epoch * t->spe + ck.pos.step_in_epoch))
        st = DLP_ERR(DLP_ERR_FORMAT, "--resume %s: position epoch %lld step %lld does not fit %lld steps per epoch",
                     t->resume_path, (long long)ck.pos.epoch, (long long)ck.pos.step_in_epoch, (long long)t->spe);
    if (st == DLP_OK) {
        t->pos = ck.pos;
        if (t->pos.step_in_epoch == t->spe) {
            t->pos.epoch++;
            t->pos.step_in_epoch = 0;
        }
        t->resume_pos = t->pos;
        t->resumed = 1;
        t->best_top1 = ck.pos.best_top1 > 0 ? ck.pos.best_top1 : -1;
        t->last_ck_step = t->pos.step;  // the checkpoint we came from stands for this step
    }
    dlp_checkpoint_free(&ck);
    return st;
}

// ---- evaluation ---------------------------------------------------------------------------------------------------

static dlp_status run_eval(dlp_trainer *t, int64_t epoch_done) {
    if (!t->vl) return DLP_OK;
    int64_t t0 = dlp_now_ns();
    set_phase(t, "eval");
    DLP_CHECK(dlp_loader_start_epoch(t->vl, t->eval_passes++));
    int64_t n = 0, c1 = 0, c5 = 0;
    double loss_sum = 0;
    dlp_status st = DLP_OK;
    for (;;) {
        dlp_batch *b;
        DLP_CHECK(dlp_loader_next(t->vl, &b));
        if (!b) break;
        const dlp_step_cfg ec = {.plan = t->plan, .train = 0};  // input, forward (BN running stats), loss
        const dlp_step_batch eb = {.input = b->data, .n = b->n, .labels = b->labels};
        dlp_step_result er;
        st = dlp_step_run(&ec, &eb, -1, &er);
        const dlp_loss_out lo = er.loss;
        if (st == DLP_OK) {
            n += b->n;
            c1 += lo.correct_top1;
            c5 += lo.correct_top5;
            loss_sum += lo.loss * b->n;
        }
        dlp_loader_release(t->vl, b);
        if (st) return dlp_err_trace(st, __FILE__, __LINE__, "validation step");
        dlp_monitor_count(t->mon, DLP_MONITOR_IMAGES, b->n);
    }
    if (t->world > 1) {  // each rank evaluated its shard: the totals over the ranks (exact: counts below 2^24)
        float tot[4] = {(float)n, (float)c1, (float)c5, (float)loss_sum};
        DLP_CHECK(dlp_comm_allreduce(t->comm, tot, 4, NULL));
        n = llroundf(tot[0] * t->world);
        c1 = llroundf(tot[1] * t->world);
        c5 = llroundf(tot[2] * t->world);
        loss_sum = (double)tot[3] * t->world;
    }
    double ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    double top1 = n ? (double)c1 / n : 0, top5 = n ? (double)c5 / n : 0, loss = n ? loss_sum / n : 0;
    t->last_top1 = top1;
    t->last_top5 = top5;
    if (top1 > t->best_top1) t->best_top1 = top1;
    t->last_eval_step = t->pos.step;
    json_t *e = json_object();
    json_object_set_new(e, "step", json_integer(t->pos.step));
    json_object_set_new(e, "epoch", epoch_done >= 0 ? json_integer(epoch_done + 1) : json_null());
    json_object_set_new(e, "epochs_done", json_real(t->spe ? (double)t->pos.step / (double)t->spe : 0));
    json_object_set_new(e, "top1", json_real(top1));
    json_object_set_new(e, "top5", json_real(top5));
    json_object_set_new(e, "loss", json_real(loss));
    json_object_set_new(e, "images", json_integer(n));
    json_object_set_new(e, "ms", json_real(ms));
    json_object_set_new(e, "elapsed_s", json_real(dlp_ns_to_s(dlp_now_ns() - t->t_run0)));  // since the run started
    // the time the evaluated weights had been training (since the first step, earlier evaluations included)
    json_object_set_new(e, "train_elapsed_s", json_real(dlp_ns_to_s(t0 - t->t_loop0)));
    json_array_append_new(t->evals, e);
    if (epoch_done >= 0) {
        int64_t k = epoch_done - t->resume_pos.epoch;  // epochs[] covers this run's epochs
        if (k >= 0 && k < t->nepochs) {
            dlp_train_epoch_stats *es = &t->epochs[k];
            es->has_val = 1;
            es->val_top1 = top1;
            es->val_top5 = top5;
            es->val_loss = loss;
        }
    }
    dlp_train_event ev = {.kind = DLP_TRAIN_EV_EVAL, .epoch = epoch_done >= 0 ? epoch_done : t->pos.epoch,
                          .loss = loss, .lr = t->last_lr, .top1 = top1, .top5 = top5, .val_images = n};
    if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
    // the quality target (every rank has the same totals here, so all stop at the same step)
    if (t->c.target_top1 > 0 && top1 * 100 >= t->c.target_top1 && !t->stopped_by[0])
        snprintf(t->stopped_by, sizeof t->stopped_by, "target-top1");
    t->eval_ns += dlp_now_ns() - t0;
    return DLP_OK;
}

// ---- the step loop ------------------------------------------------------------------------------------------------

static void log_event(dlp_trainer *t, int64_t now) {
    int64_t steps = t->pos.step - t->log_step0;
    int64_t loop_ns = t->log_loop_ns;
    dlp_train_event ev = {.kind = DLP_TRAIN_EV_LOG, .epoch = t->pos.epoch, .loss = t->last_loss, .lr = t->last_lr};
    ev.step_in_epoch = t->pos.step_in_epoch;
    if (steps > 0 && loop_ns > 0) {
        ev.img_per_s = (double)steps * t->c.batch / dlp_ns_to_s(loop_ns);
        ev.data_wait_frac = (double)t->log_wait_ns / (double)loop_ns;
        ev.ms_per_step = dlp_ns_to_ms(loop_ns) / (double)steps;
        t->recent_step_ns = (double)loop_ns / (double)steps;
    }
    double left = t->recent_step_ns * 1e-9 * (double)(t->stop_at - t->pos.step);
    if (t->c.time_limit_s > 0) {
        double rem = t->c.time_limit_s - dlp_ns_to_s(now - t->t_loop0);
        if (rem < left) left = rem > 0 ? rem : 0;
    }
    ev.eta_s = left;
    if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
    t->log_step0 = t->pos.step;
    t->log_loop_ns = 0;
    t->log_wait_ns = 0;
}

// Whether to stop now. Data-parallel runs stop together: a stop any rank saw (a signal, the time limit, a callback)
// stops every rank at the same point, so none is left waiting in a collective; every rank asks at the same points
// (the loop conditions), so the tiny allreduce lines up.
static int stop_now(dlp_trainer *t) {
    if (t->world > 1) {
        float any = t->stopped_by[0] ? 1.0f : 0.0f;
        if (dlp_comm_allreduce(t->comm, &any, 1, NULL) != DLP_OK) {
            // a peer is gone or silent (the communicator's deadline passed): every further collective would wait
            // out the deadline again (the end's gather), so end the job now, naming what failed
            fprintf(stderr, "rank %d of %d: ", t->rank, t->world);
            dlp_err_print(stderr);
            dlp_comm_abort(t->comm, 1);
            snprintf(t->stopped_by, sizeof t->stopped_by, "error");
            return 1;
        }
        if (any > 0 && !t->stopped_by[0]) snprintf(t->stopped_by, sizeof t->stopped_by, "another-rank");
    }
    return t->stopped_by[0] != 0;
}

// Mid-epoch evaluation and checkpoints, when due (the end of an epoch has its own: end_epoch).
static dlp_status mid_epoch_work(dlp_trainer *t, int64_t epoch, int64_t *tprev) {
    const dlp_train_cfg *c = &t->c;
    int did = 0;
    if (c->eval_every > 0 && t->pos.step % c->eval_every == 0 && t->vl) {
        DLP_CHECK(dlp_plan_sync(t->plan));
        DLP_CHECK(run_eval(t, -1));
        did = 1;
    }
    if (c->checkpoint_dir && c->checkpoint_every > 0 && t->pos.step % c->checkpoint_every == 0) {
        DLP_CHECK(save_checkpoint(t));
        did = 1;
    }
    if (did) {
        epoch_phase(t, epoch);
        *tprev = dlp_now_ns();
    }
    return DLP_OK;
}

// An epoch's end: the EPOCH event, the next epoch's loading started (so the loader works while we evaluate and
// save), the evaluation and the checkpoint.
static dlp_status end_epoch(dlp_trainer *t, int64_t epoch, const dlp_train_epoch_stats *es, int *epoch_started,
                            int64_t *tprev) {
    const dlp_train_cfg *c = &t->c;
    t->pos.epoch = epoch + 1;
    t->pos.step_in_epoch = 0;
    dlp_train_event ev = {.kind = DLP_TRAIN_EV_EPOCH, .epoch = epoch, .step_in_epoch = t->spe,
                          .loss = es->steps ? es->loss_sum / (double)es->steps : 0, .lr = t->last_lr};
    if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
    const int more = t->pos.step < t->stop_at && !stop_now(t);
    if (more) {
        DLP_CHECK(dlp_loader_start_epoch(t->tl, epoch + 1));
        *epoch_started = 1;
    }
    int did = 0;
    if (c->eval && t->vl) {
        DLP_CHECK(dlp_plan_sync(t->plan));
        DLP_CHECK(run_eval(t, epoch));
        did = 1;
    }
    if (c->checkpoint_dir && (c->checkpoint_every == 0 || t->pos.step % c->checkpoint_every == 0)) {
        DLP_CHECK(save_checkpoint(t));
        did = 1;
    }
    if (did) *tprev = dlp_now_ns();
    return DLP_OK;
}

static dlp_status train_loop(dlp_trainer *t) {
    const dlp_train_cfg *c = &t->c;
    // The step's phases (input .. update, the allreduce through the run's communicator) come from run/step; this loop
    // keeps the data wait before them, the bookkeeping after, and the evaluation and checkpoint schedule.
    const dlp_step_cfg step = {.plan = t->plan, .comm = t->comm, .overlap = t->overlap, .train = 1,
                               .sync_phases = c->sync_phases,
                               .label_smoothing = (float)c->label_smoothing};
    dlp_sgd sgd = {.momentum = (float)c->momentum, .weight_decay = (float)c->weight_decay, .nesterov = c->nesterov,
                   .decay_no_decay_params = !c->no_bn_decay};
    int64_t epoch = t->pos.epoch, skip = t->pos.step_in_epoch;
    int epoch_started = 0;  // the loader already runs epoch `epoch` (started ahead of an evaluation)
    int64_t last_log = dlp_now_ns();
    int64_t tprev = dlp_now_ns();
    t->t_loop0 = tprev;
    t->log_step0 = t->pos.step;
    if (c->callback) {  // setup is done: what the run will be (an MLPerf log's init_stop and run_start)
        dlp_train_event ev = {.kind = DLP_TRAIN_EV_START, .epoch = epoch, .step_in_epoch = skip, .world = t->world,
                              .train_images = dlp_loader_samples_per_epoch(t->tl),
                              .val_images = t->vl ? dlp_loader_samples_per_epoch(t->vl) : 0};
        if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
        tprev = dlp_now_ns();
    }
    dlp_status st = DLP_OK;
    while (t->pos.step < t->stop_at && !stop_now(t)) {
        if (!epoch_started) DLP_CHECK(dlp_loader_start_epoch_at(t->tl, epoch, skip));
        skip = 0;
        epoch_started = 0;
        epoch_phase(t, epoch);
        dlp_train_epoch_stats *es = &t->epochs[epoch - t->resume_pos.epoch];
        int epoch_done = 0;
        while (t->pos.step < t->stop_at && !stop_now(t)) {
            const int64_t ts0 = tprev;
            dlp_batch *b;
            DLP_CHECK(dlp_loader_next(t->tl, &b));
            const int64_t ts1 = dlp_now_ns();
            if (!b) {  // only when a resumed position was at the very end of an epoch
                t->ph_ns[DLP_TRAIN_PH_DATA_WAIT] += ts1 - ts0;
                tprev = ts1;
                epoch_done = 1;
                break;
            }
            const float lr = (float)dlp_lr_at(&t->sched, t->pos.step);
            dlp_step_batch sb = {.input = b->data, .n = b->n, .labels = b->labels, .sgd = sgd};
            sb.sgd.lr = lr;
            dlp_step_result sr;
            st = dlp_step_run(&step, &sb, -1, &sr);
            const dlp_loss_out lo = sr.loss;
            const int n = b->n;
            const int64_t in_bytes = b->bytes_read;
            dlp_loader_release(t->tl, b);
            if (st) {
                dlp_err_context("training step %lld (epoch %lld)", (long long)t->pos.step + 1, (long long)epoch + 1);
                return st;
            }
            if (!isfinite(lo.loss))
                return DLP_ERR(DLP_ERR_NUMERIC, "the training loss is %g at step %lld (lr %g): the run diverged; "
                               "hint: lower --lr or add --warmup", lo.loss, (long long)t->pos.step + 1, (double)lr);
            // bookkeeping
            if (t->steps_run == 0) t->first_loss = lo.loss;
            t->last_loss = lo.loss;
            t->last_lr = lr;
            t->pos.step++;
            t->pos.step_in_epoch++;
            t->pos.samples_seen += n;
            t->pos.last_loss = lo.loss;
            const int steady = t->steps_run >= c->measure_warmup_steps;
            t->steps_run++;
            t->images += n;
            es->steps++;
            es->images += n;
            es->correct_top1 += lo.correct_top1;
            es->loss_sum += lo.loss;
            dlp_monitor_count(t->mon, DLP_MONITOR_IMAGES, n);
            const int64_t wait_ns = sr.t0_ns - ts0;  // chained: the step starts where the wait ends
            dlp_monitor_count(t->mon, DLP_MONITOR_DATA_WAIT_NS, wait_ns);
            dlp_monitor_count(t->mon, DLP_MONITOR_INPUT_BYTES, in_bytes);
            if (t->steps_run == c->measure_warmup_steps) epoch_phase(t, epoch);
            epoch_done = t->pos.step_in_epoch >= t->spe;
            const int64_t ts_end = dlp_now_ns();
            int64_t ph[DLP_TRAIN_PH_COUNT];
            ph[DLP_TRAIN_PH_DATA_WAIT] = wait_ns;
            for (int p = 0; p < DLP_STEP_NPHASES; p++) ph[DLP_TRAIN_PH_INPUT + p] = sr.phase_ns[p];
            ph[DLP_TRAIN_PH_OTHER] = ts_end - sr.t1_ns;  // the bookkeeping above
            double step_ms[DLP_TRAIN_PH_COUNT];
            for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) {
                int64_t d = ph[p];
                t->ph_ns[p] += d;
                if (steady) t->steady_ph_ns[p] += d;
                step_ms[p] = dlp_ns_to_ms(d);
            }
            if (steady) {
                t->steady_steps++;
                t->steady_images += n;
            }
            es->loop_ns += ts_end - ts0;
            es->data_wait_ns += wait_ns;
            t->log_loop_ns += ts_end - ts0;  // the LOG interval's loop time
            t->log_wait_ns += wait_ns;
            if (c->callback) {
                dlp_train_event ev = {.kind = DLP_TRAIN_EV_STEP, .epoch = epoch, .step_in_epoch = t->pos.step_in_epoch,
                                      .loss = lo.loss, .lr = lr, .phase_ms = step_ms};
                if (fire(t, &ev)) snprintf(t->stopped_by, sizeof t->stopped_by, "callback");
                int64_t now = dlp_now_ns();
                int due = c->log_every > 0 ? t->pos.step % c->log_every == 0
                                           : t->steps_run == 1 || dlp_ns_to_s(now - last_log) >= c->log_interval_s;
                if (due || t->pos.step == t->stop_at) {
                    log_event(t, now);
                    last_log = now;
                }
            }
            tprev = dlp_now_ns();
            t->ph_ns[DLP_TRAIN_PH_OTHER] += tprev - ts_end;  // the callbacks
            if (steady) t->steady_ph_ns[DLP_TRAIN_PH_OTHER] += tprev - ts_end;
            es->loop_ns += tprev - ts_end;
            t->log_loop_ns += tprev - ts_end;
            if (c->time_limit_s > 0 && dlp_ns_to_s(tprev - t->t_loop0) >= c->time_limit_s && !t->stopped_by[0])
                snprintf(t->stopped_by, sizeof t->stopped_by, "time-limit");
            if (epoch_done) break;
            DLP_CHECK(mid_epoch_work(t, epoch, &tprev));
        }
        if (!epoch_done) break;  // stopped mid-epoch
        DLP_CHECK(end_epoch(t, epoch, es, &epoch_started, &tprev));
        epoch++;
    }
    // Queued device work belongs to the loop's time.
    int64_t t0 = dlp_now_ns();
    DLP_CHECK(dlp_plan_sync(t->plan));
    int64_t d = dlp_now_ns() - t0;
    t->ph_ns[DLP_TRAIN_PH_OTHER] += d;
    if (t->steady_steps) t->steady_ph_ns[DLP_TRAIN_PH_OTHER] += d;
    if (!t->stopped_by[0]) snprintf(t->stopped_by, sizeof t->stopped_by, "%s",
                                    t->pos.step >= t->total_steps ? (c->steps > 0 ? "steps" : "epochs") : "stop-at-step");
    return DLP_OK;
}

// Every rank's figures into rank 0's t->rank_figs (world x DLP_TRAIN_RANK_FIGS).
static dlp_status gather_ranks(dlp_trainer *t) {
    double mine[DLP_TRAIN_RANK_FIGS] = {0};
    mine[DLP_TRAIN_RANK_STEPS] = (double)t->steps_run;
    mine[DLP_TRAIN_RANK_IMAGES] = (double)t->images;
    mine[DLP_TRAIN_RANK_DATA_WAIT_MS] = dlp_ns_to_ms(t->ph_ns[DLP_TRAIN_PH_DATA_WAIT]);
    for (int p = DLP_TRAIN_PH_INPUT; p <= DLP_TRAIN_PH_UPDATE; p++)
        if (p != DLP_TRAIN_PH_ALLREDUCE) mine[DLP_TRAIN_RANK_COMPUTE_MS] += dlp_ns_to_ms(t->ph_ns[p]);
    mine[DLP_TRAIN_RANK_ALLREDUCE_MS] = dlp_ns_to_ms(t->ph_ns[DLP_TRAIN_PH_ALLREDUCE]);
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) mine[DLP_TRAIN_RANK_LOOP_MS] += dlp_ns_to_ms(t->ph_ns[p]);
    dlp_cpushare_sample sh = {0};  // this rank's CPU share so far: ranks on shared cores differ (issue 30)
    dlp_cpushare_read(t->share_meter, &sh);
    mine[DLP_TRAIN_RANK_CPU_SHARE] = sh.share;
    if (t->rank == 0) {
        t->rank_figs = calloc((size_t)t->world * DLP_TRAIN_RANK_FIGS, sizeof *t->rank_figs);
        DLP_TRY_ALLOC(t->rank_figs);
    }
    return dlp_comm_gather(t->comm, mine, sizeof mine, t->rank_figs, 0);
}

// ---- setup --------------------------------------------------------------------------------------------------------

static dlp_status check_cfg(const dlp_train_cfg *c) {
    if (c->batch < 1) return DLP_ERR(DLP_ERR_INVALID, "--batch %d must be at least 1", c->batch);
    if (c->size < 32 || c->size > 4096) return DLP_ERR(DLP_ERR_INVALID, "--size %d must be in 32..4096", c->size);
    if (c->epochs < 0 || c->steps < 0 || c->stop_at_step < 0)
        return DLP_ERR(DLP_ERR_INVALID, "--epochs, --steps and --stop-at-step must not be negative");
    if (c->threads < 0 || c->workers < 0 || c->prefetch < 0)
        return DLP_ERR(DLP_ERR_INVALID, "--threads, --workers and --prefetch must not be negative");
    if (!(c->time_limit_s >= 0) || !isfinite(c->time_limit_s))
        return DLP_ERR(DLP_ERR_INVALID, "--time-limit must be a finite number of seconds, not negative");
    if (!(c->target_top1 >= 0 && c->target_top1 <= 100))
        return DLP_ERR(DLP_ERR_INVALID, "--target-top1 %g is not a percentage in [0, 100]", c->target_top1);
    const dlp_lr_schedule *sc = &c->sched;
    if (!(sc->base_lr > 0) || !isfinite(sc->base_lr))
        return DLP_ERR(DLP_ERR_INVALID, "--lr %g must be positive", sc->base_lr);
    if (!(c->momentum >= 0 && c->momentum < 1)) return DLP_ERR(DLP_ERR_INVALID, "--momentum %g is not in [0, 1)", c->momentum);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return DLP_ERR(DLP_ERR_INVALID, "--wd %g must be finite and not negative", c->weight_decay);
    if (!(c->label_smoothing >= 0 && c->label_smoothing < 1))
        return DLP_ERR(DLP_ERR_INVALID, "--label-smoothing %g is not in [0, 1)", c->label_smoothing);
    if (!(c->crop_scale_lo > 0 && c->crop_scale_lo <= c->crop_scale_hi && c->crop_scale_hi <= 1))
        return DLP_ERR(DLP_ERR_INVALID, "--crop-scale %g-%g must satisfy 0 < lo <= hi <= 1", c->crop_scale_lo,
                       c->crop_scale_hi);
    if (c->precision == DLP_DTYPE_I8)
        return DLP_ERR(DLP_ERR_INVALID, "--precision int8 is for inference (dlperf infer, serve, loadgen --sut local): "
                       "train in fp32 or bf16, then quantize the weights at inference");
    if (c->precision != DLP_DTYPE_F32 && c->precision != DLP_DTYPE_BF16 && c->precision != DLP_DTYPE_F16)
        return DLP_ERR(DLP_ERR_INVALID, "--precision must be fp32, bf16 or fp16");
    if (c->eval_every < 0 || c->checkpoint_every < 0 || c->log_every < 0 || c->keep_checkpoints < 0)
        return DLP_ERR(DLP_ERR_INVALID, "--eval-every, --checkpoint-every, --log-every and --keep-checkpoints must "
                       "not be negative");
    if (c->read_limit_bytes_per_s < 0) return DLP_ERR(DLP_ERR_INVALID, "--read-limit must not be negative");
    if (!(sc->warmup_epochs >= 0) || !isfinite(sc->warmup_epochs) || sc->warmup_steps < 0)
        return DLP_ERR(DLP_ERR_INVALID, "--warmup and --warmup-steps must be finite and not negative");
    if (!(sc->final_lr >= 0) || !isfinite(sc->final_lr) || !(sc->step_gamma > 0) || !isfinite(sc->step_gamma))
        return DLP_ERR(DLP_ERR_INVALID, "--final-lr must be finite and not negative, --step-gamma finite and positive");
    if (c->checkpoint_every > 0 && !c->checkpoint_dir)
        return DLP_ERR(DLP_ERR_INVALID, "--checkpoint-every needs --checkpoint DIR");
    return DLP_OK;
}

static dlp_status open_data(dlp_trainer *t) {
    const dlp_train_cfg *c = &t->c;
    if (c->train_ds) {
        t->train_ds = c->train_ds;
        snprintf(t->train_where, sizeof t->train_where, "%s", c->train_ds->root);
    } else {
        DLP_CHECK(dlp_data_open(c->data, "train", NULL, &t->train_ds, t->train_where, sizeof t->train_where));
        t->own_train_ds = 1;
    }
    if (c->val_ds) {
        t->val_ds = c->val_ds;
        snprintf(t->val_where, sizeof t->val_where, "%s", c->val_ds->root);
    } else if (!c->eval || (c->val_data && strcmp(c->val_data, "none") == 0) || c->train_ds) {
        t->val_ds = NULL;
    } else {
        const char *spec = c->val_data ? c->val_data : c->data;
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/val", spec ? spec : "");
        if (c->val_data || is_synthetic(spec) || (dlp_is_dir(spec) && dlp_is_dir(sub))) {
            DLP_CHECK(dlp_data_open(spec, "val", NULL, &t->val_ds, t->val_where, sizeof t->val_where));
            t->own_val_ds = 1;
        } else {
            DLP_WARN("no validation set: %s is not a root with train/ and val/ (give --val-data DIR); training "
                     "without validation", spec);
        }
    }
    return DLP_OK;
}

// The loader settings training and validation share.
static void loader_cfg(const dlp_trainer *t, dlp_dataset *ds, dlp_xform_kind kind, int64_t limit, dlp_loader_cfg *lc) {
    const dlp_train_cfg *c = &t->c;
    dlp_loader_cfg_defaults(lc, ds, kind);
    lc->batch = c->batch;
    lc->rank = t->rank;  // this rank's shard of every epoch
    lc->world = t->world;
    lc->workers = c->workers;
    lc->prefetch = c->prefetch;
    lc->transform.out_w = lc->transform.out_h = c->size;
    lc->transform.layout = t->in_layout;
    lc->transform.dtype = t->in_dtype;
    lc->seed = c->seed;
    const dlp_backend_caps *caps = dlp_backend_get_caps(t->ops);
    lc->alloc = caps->host_allocator ? caps->host_allocator() : NULL;  // pinned batches for a GPU's DMA
    lc->read_limit_bytes_per_s = c->read_limit_bytes_per_s;
    lc->drop_cache = c->drop_cache;
    lc->limit_samples = limit;
}

static dlp_status make_loaders(dlp_trainer *t) {
    const dlp_train_cfg *c = &t->c;
    dlp_loader_cfg lc;
    loader_cfg(t, t->train_ds, DLP_XFORM_TRAIN, c->limit_samples, &lc);
    lc.transform.scale_lo = c->crop_scale_lo;
    lc.transform.scale_hi = c->crop_scale_hi;
    DLP_CHECK(dlp_loader_create(&lc, &t->tl));
    if (!t->val_ds) return DLP_OK;
    loader_cfg(t, t->val_ds, DLP_XFORM_VAL, c->val_limit_samples, &lc);
    lc.transform.resize_short = c->val_resize;
    dlp_status st = dlp_loader_create(&lc, &t->vl);
    if (st) dlp_err_context("validation set %s", t->val_where);
    return st;
}

// Whether --resume names the checkpoint directory itself or a checkpoint in it (the run that continues there).
static int resumes_from(const char *resume, const char *dir) {
    if (!resume || !dir) return 0;
    char a[PATH_MAX], b[PATH_MAX], r[4096];
    snprintf(r, sizeof r, "%s", resume);
    if (!dlp_is_dir(r)) {
        char *slash = strrchr(r, '/');
        if (slash) *slash = '\0';
        else snprintf(r, sizeof r, ".");
    }
    return realpath(r, a) && realpath(dir, b) && strcmp(a, b) == 0;
}

// Where the run starts: from the beginning, or a checkpoint's position, weights, BN statistics and momentum (with
// several ranks, rank 0's broadcast to all).
static dlp_status start_position(dlp_trainer *t) {
    const dlp_train_cfg *c = &t->c;
    t->pos.seed = c->seed;
    t->best_top1 = -1;
    t->last_top1 = t->last_top5 = -1;
    t->last_eval_step = t->last_ck_step = -1;
    // --resume DIR naming the run's own --checkpoint DIR with no complete checkpoint in it yet: a preempted run's
    // first start (or a restart killed before its first checkpoint) — one command serves every (re)start
    int fresh = 0;
    if (c->resume && c->checkpoint_dir && dlp_is_dir(c->resume) && resumes_from(c->resume, c->checkpoint_dir)) {
        char p[1024];
        int64_t have;
        newest_checkpoint(c->resume, p, sizeof p, &have);
        if (have < 0) {
            DLP_INFO("--resume %s: no complete checkpoint there yet; the run starts from the beginning", c->resume);
            fresh = 1;
        }
    }
    if (c->resume && !fresh) {
        DLP_CHECK(load_resume(t));
        DLP_CHECK(dlp_plan_set_params(t->plan, t->params, t->bufs));
        DLP_CHECK(dlp_plan_set_momentum(t->plan, t->mom));
    } else {
        DLP_CHECK(dlp_plan_set_params(t->plan, t->params, t->bufs));
    }
    if (t->world > 1) {  // every rank starts from rank 0's weights, BN statistics and momentum
        DLP_CHECK(dlp_comm_broadcast(t->comm, t->params, (size_t)t->net.param_count * sizeof(float), 0));
        DLP_CHECK(dlp_comm_broadcast(t->comm, t->bufs, (size_t)t->net.buf_count * sizeof(float), 0));
        DLP_CHECK(dlp_comm_broadcast(t->comm, t->mom, (size_t)t->net.param_count * sizeof(float), 0));
        DLP_CHECK(dlp_plan_set_params(t->plan, t->params, t->bufs));
        DLP_CHECK(dlp_plan_set_momentum(t->plan, t->mom));
    }
    return DLP_OK;
}

static dlp_status setup(dlp_trainer *t) {
    dlp_train_cfg *c = &t->c;
    DLP_CHECK(check_cfg(c));
    DLP_CHECK(dlp_comm_open(c->dist, &t->comm));
    t->rank = dlp_comm_rank(t->comm);
    t->world = dlp_comm_size(t->comm);
    if (t->rank != 0) {  // rank 0 reports and measures for the run
        c->monitor = 0;
        c->peak = DLP_TRAIN_PEAK_OFF;
    }
    if (!c->device || !c->device[0]) c->device = dlp_backend_find("cpu", NULL) ? "cpu" : "ref";
    dlp_err_clear();
    t->ops = dlp_backend_find(c->device, &t->dev_arg);
    if (!t->ops) return dlp_err_status();
    char why[256] = "";
    if (dlp_backend_available(t->ops, why, sizeof why) != DLP_OK)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "device %s is not available here: %s", c->device, why);
    t->async = dlp_backend_has(t->ops, DLP_BACKEND_ASYNC);  // steps queued on a device (cuda; sim emulates one)
    const int on_gpu = dlp_backend_get_caps(t->ops)->kind == DLP_BACKEND_KIND_GPU;
    if (on_gpu && t->world > 1 && !t->dev_arg) {  // one process per GPU: the node-local rank picks it
        snprintf(t->dev_arg_buf, sizeof t->dev_arg_buf, "%d", dlp_comm_local_rank(t->comm));
        t->dev_arg = t->dev_arg_buf;
    }
    int dthreads, dworkers;
    dlp_train_default_threads(c->device, &dthreads, &dworkers);
    if (c->threads == 0) c->threads = dthreads;
    if (c->workers == 0) c->workers = dworkers;
    if (c->prefetch == 0) c->prefetch = 2 * c->workers < 2 ? 2 : 2 * c->workers;
    if (c->steps == 0 && c->epochs == 0) c->epochs = 1;
    if (c->checkpoint_dir && t->rank == 0) {
        // one writer at a time; the lock goes with the process, so a killed run never blocks its resumption
        DLP_CHECK(dlp_ckdir_lock(c->checkpoint_dir, &t->ck_lock_fd));
        if (!resumes_from(c->resume, c->checkpoint_dir)) {  // never write over another run's
            char p[1024];
            int64_t s;
            newest_checkpoint(c->checkpoint_dir, p, sizeof p, &s);
            if (s >= 0)
                return DLP_ERR(DLP_ERR_EXISTS, "--checkpoint %s already holds checkpoints of another run (%s); resume "
                               "it with --resume %s, or give another directory", c->checkpoint_dir, p,
                               c->checkpoint_dir);
        }
        int removed = 0;
        DLP_CHECK(dlp_ckdir_clean(c->checkpoint_dir, &removed));
        if (removed)
            DLP_INFO("checkpoints: removed %d file(s) that killed writers left in %s (temporaries, unpublished state)",
                     removed, c->checkpoint_dir);
    }

    // Rank 0 opens (and on first use generates) the data first; the others then find it ready.
    if (t->world > 1 && t->rank != 0) DLP_CHECK(dlp_comm_barrier(t->comm));
    DLP_CHECK(open_data(t));
    if (t->world > 1 && t->rank == 0) DLP_CHECK(dlp_comm_barrier(t->comm));
    int classes = c->classes > 0 ? c->classes : t->train_ds->nclasses;
    if (t->train_ds->nclasses > classes)
        return DLP_ERR(DLP_ERR_INVALID, "--classes %d, but the training set %s has %d classes", classes,
                       t->train_where, t->train_ds->nclasses);
    if (t->val_ds && t->val_ds->nclasses > classes)
        return DLP_ERR(DLP_ERR_INVALID, "the validation set %s has %d classes, the model %d", t->val_where,
                       t->val_ds->nclasses, classes);
    if (t->val_ds && t->val_ds->class_names && t->train_ds->class_names) {
        int n = t->val_ds->nclasses < t->train_ds->nclasses ? t->val_ds->nclasses : t->train_ds->nclasses;
        for (int i = 0; i < n; i++)
            if (strcmp(t->val_ds->class_names[i], t->train_ds->class_names[i]) != 0) {
                DLP_WARN("validation class %d is '%s' but training class %d is '%s': the label sets differ", i,
                         t->val_ds->class_names[i], i, t->train_ds->class_names[i]);
                break;
            }
    }

    DLP_CHECK(dlp_model_build(c->model, classes, c->size, &t->net));
    t->have_net = 1;
    t->params = malloc((size_t)t->net.param_count * sizeof(float));
    t->bufs = malloc((size_t)(t->net.buf_count ? t->net.buf_count : 1) * sizeof(float));
    t->mom = calloc((size_t)t->net.param_count, sizeof(float));
    if (!t->params || !t->bufs || !t->mom)
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %lld parameters", (long long)t->net.param_count);
    dlp_resnet_init_params(&t->net, c->seed, c->zero_init_residual, t->params, t->bufs);

    dlp_plan_cfg pc = {.batch = c->batch, .train = 1, .precision = c->precision, .threads = c->threads,
                       .arg = t->dev_arg, .bucket_elems = c->bucket_elems};
    if (t->world > 1) {  // buckets reduced as backward finishes them (25 MiB each unless --bucket-elems, as DDP)
        if (dlp_backend_get_caps(t->ops)->kind == DLP_BACKEND_KIND_GPU && strcmp(dlp_comm_name(t->comm), "mpi") == 0)
            return DLP_ERR(DLP_ERR_UNSUPPORTED, "--device %s with the mpi communicator: it reduces host buffers and "
                           "the gradients live on the GPU; use --dist nccl", c->device);
        DLP_CHECK(dlp_step_overlap_new(t->comm, &t->overlap));
        if (pc.bucket_elems == 0) pc.bucket_elems = (25 << 20) / (int64_t)sizeof(float);
        pc.on_bucket = dlp_step_on_bucket;
        pc.bucket_ctx = t->overlap;
    }
    int64_t t0 = dlp_now_ns();
    DLP_CHECK(dlp_plan_create(t->ops, &t->net, &pc, &t->plan));
    if (t->overlap) dlp_step_overlap_bind(t->overlap, t->plan);
    t->plan_ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    dlp_plan_input_format(t->plan, &t->in_layout, &t->in_dtype);

    if (c->peak != DLP_TRAIN_PEAK_OFF && dlp_backend_has(t->ops, DLP_BACKEND_PEAK)) {
        dlp_status pst = dlp_train_peak(c->device, c->precision, c->threads, c->peak, &t->peak_gflops, &t->peak_source);
        if (pst) {
            snprintf(t->peak_note, sizeof t->peak_note, "%s", dlp_err_msg());
            DLP_WARN("the backend's peak could not be measured: %s", dlp_err_msg());
            t->peak_gflops = 0;
        }
    }

    DLP_CHECK(make_loaders(t));
    t->spe = dlp_loader_batches_per_epoch(t->tl);
    t->total_steps = c->steps > 0 ? c->steps : c->epochs * t->spe;
    dlp_lr_schedule *s = &t->sched;
    *s = c->sched;
    s->batch = c->batch;
    s->world = t->world;  // the learning rate follows the global batch
    s->steps_per_epoch = t->spe;
    s->total_steps = t->total_steps;
    DLP_CHECK(dlp_lr_schedule_check(s));

    DLP_CHECK(start_position(t));
    t->stop_at = t->total_steps;
    if (c->stop_at_step > 0 && c->stop_at_step < t->stop_at) t->stop_at = c->stop_at_step;
    if (t->stop_at < t->pos.step) t->stop_at = t->pos.step;
    int64_t left = t->stop_at - t->pos.step;
    if (c->measure_warmup_steps < 0) c->measure_warmup_steps = (int)(left / 10 < 10 ? left / 10 : 10);
    t->nepochs = (t->stop_at + t->spe - 1) / t->spe - t->pos.epoch + 1;
    if (t->nepochs < 1) t->nepochs = 1;
    t->epochs = calloc((size_t)t->nepochs, sizeof *t->epochs);
    t->evals = json_array();
    t->ck_written = json_array();
    if (!t->epochs || !t->evals || !t->ck_written) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");

    if (c->monitor) {
        dlp_monitor_cfg mc = {.interval_ms = c->monitor_interval_ms, .csv_path = c->monitor_csv,
                              .jsonl_path = c->monitor_jsonl, .initial_phase = "setup"};
        DLP_CHECK(dlp_monitor_create(&mc, &t->mon));
        DLP_CHECK(dlp_monitor_start(t->mon));
    }
    return DLP_OK;
}

static void teardown(dlp_trainer *t) {
    if (t->mon) {
        dlp_monitor_destroy(t->mon);
        t->mon = NULL;
    }
    dlp_loader_free(t->tl);
    dlp_loader_free(t->vl);
    dlp_step_overlap_free(t->overlap);
    if (t->plan) dlp_plan_free(t->plan);
    dlp_comm_free(t->comm);
    dlp_ckdir_unlock(t->ck_lock_fd);
    t->ck_lock_fd = -1;
    if (t->have_net) dlp_net_free(&t->net);
    if (t->own_train_ds) dlp_dataset_free(t->train_ds);
    if (t->own_val_ds) dlp_dataset_free(t->val_ds);
    free(t->params);
    free(t->bufs);
    free(t->mom);
    free(t->epochs);
    free(t->rank_figs);
    json_decref(t->evals);
    json_decref(t->ck_written);
}

dlp_status dlp_train_run(const dlp_train_cfg *cfg, dlp_train_result *r) {
    memset(r, 0, sizeof *r);
    dlp_trainer *t = calloc(1, sizeof *t);
    DLP_TRY_ALLOC(t);
    t->ck_lock_fd = -1;
    t->c = *cfg;
    t->t_run0 = dlp_now_ns();
    t->share_meter = dlp_cpushare_start(100);  // the run's CPU time and share, in its result (issue 35)
    dlp_status st = setup(t);
    t->t_setup_end = dlp_now_ns();
    // the loop's own meter: its slowest busy thread (a multi-thread step's pace) among the threads that train
    t->loop_meter = st == DLP_OK ? dlp_cpushare_start(100) : NULL;
    if (st == DLP_OK) st = train_loop(t);
    dlp_cpushare_stop(t->loop_meter, &t->loop_share);
    t->loop_meter = NULL;
    // After the loop (also after a failure in it): a final evaluation and checkpoint when the run ended well.
    // Stopped by its caller (dlperf train: SIGTERM from a scheduler, Ctrl-C), the checkpoint comes first: a grace
    // period (Slurm --signal, Kubernetes terminationGracePeriodSeconds) may end before an evaluation would.
    const int ck_due = t->c.checkpoint_dir && t->steps_run > 0;  // and last_ck_step != pos.step, checked each time
    if (st == DLP_OK && (strcmp(t->stopped_by, "callback") == 0 || strcmp(t->stopped_by, "another-rank") == 0) && ck_due && t->last_ck_step != t->pos.step)
        st = save_checkpoint(t);
    if (st == DLP_OK && t->c.eval && t->vl && t->last_eval_step != t->pos.step && t->steps_run > 0) st = run_eval(t, -1);
    if (st == DLP_OK && ck_due && t->last_ck_step != t->pos.step)
        st = save_checkpoint(t);
    if (t->plan && dlp_backend_has(t->ops, DLP_BACKEND_INPUT_STATS)) {
        double cm = 0, sm = 0;
        int64_t n = 0;
        if (dlp_plan_input_stats(t->plan, &cm, &sm, &n) == DLP_OK) {
            t->in_copy_ms = cm;
            t->in_stall_ms = sm;
            t->in_copies = n;
            t->have_input_stats = 1;
        }
    }
    if (t->mon) {
        set_phase(t, "end");
        dlp_status ms = dlp_monitor_stop(t->mon);
        if (ms && st == DLP_OK) st = ms;
    }
    if (st == DLP_OK && t->world > 1) st = gather_ranks(t);
    if (st && t->world > 1) {  // alone, this rank would leave the others waiting in a collective: end them all
        fprintf(stderr, "rank %d of %d: ", t->rank, t->world);
        dlp_err_print(stderr);
        dlp_comm_abort(t->comm, 1);
    }
    // The result is built even after a failure (what was measured until then), with the error recorded.
    char err[1024] = "";
    if (st) snprintf(err, sizeof err, "%s", dlp_err_msg());
    dlp_cpushare_stop(t->share_meter, &t->share);
    t->share_meter = NULL;
    dlp_train_finish_result(t, r);
    if (st && r->json) json_object_set_new(r->json, "error", json_string(err));
    teardown(t);
    free(t);
    if (st && strcmp(dlp_err_msg(), err) != 0) dlp_err_set(st, __FILE__, __LINE__, "%s", err);  // clobbered meanwhile
    return st;
}

void dlp_train_result_free(dlp_train_result *r) {
    if (!r) return;
    json_decref(r->json);
    r->json = NULL;
}
