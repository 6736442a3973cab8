// run/train_log: the machine-readable logs of a training run, fed by its events: MLPerf Training's log (ResNet's
// keys, in the reference's order) and one JSON line per optimizer step.
#include "run/train_log.h"

#include <stdio.h>
#include <string.h>

#include "hw/host.h"

const dlp_opt_choice dlp_train_mllog_status_choices[] = {
    {"onprem", 0}, {"cloud", 1}, {"preview", 2}, {"research", 3}, {NULL, 0},
};

// MLPerf's order: cache_clear, init_start, the submission, (setup), the configuration, init_stop, run_start.
static dlp_status ml_open(dlp_train_mllog *x, const char *path) {
    DLP_CHECK(dlp_mllog_open(path, &x->ml));
    const dlp_train_cfg *c = x->c;
    dlp_mllog_event(x->ml, DLP_MLLOG_POINT_IN_TIME, "cache_clear", json_boolean(c->drop_cache), NULL, x->t_init_ms,
                    __FILE__, __LINE__);
    dlp_mllog_event(x->ml, DLP_MLLOG_INTERVAL_START, "init_start", NULL, NULL, x->t_init_ms, __FILE__, __LINE__);
    char platform[256];
    const char *pl = x->platform;
    if (!pl || !pl[0]) {
        dlp_host_info h;
        dlp_host_probe(&h);
        snprintf(platform, sizeof platform, "%s: %s", c->device, h.cpu_model);
        pl = platform;
    }
    DLP_MLLOG_POINT(x->ml, "submission_benchmark", json_string("resnet"), NULL);
    DLP_MLLOG_POINT(x->ml, "submission_org", json_string(x->org && x->org[0] ? x->org : "dlperf"), NULL);
    DLP_MLLOG_POINT(x->ml, "submission_division", json_string("open"), NULL);  // dlperf does not follow the closed rules
    DLP_MLLOG_POINT(x->ml, "submission_status", json_string(dlp_opt_choice_name(dlp_train_mllog_status_choices, x->status)), NULL);
    DLP_MLLOG_POINT(x->ml, "submission_platform", json_string(pl), NULL);
    DLP_MLLOG_POINT(x->ml, "model", json_string(c->model), NULL);
    return DLP_OK;
}

// MLPerf counts epochs from 1 in epoch_num and first_epoch_num.
static void ml_epoch_open(dlp_train_mllog *x, int64_t epoch, int64_t time_ms) {
    json_t *md = json_object();
    json_object_set_new(md, "first_epoch_num", json_integer(epoch + 1));
    json_object_set_new(md, "epoch_count", json_integer(1));  // evaluation follows every epoch
    dlp_mllog_event(x->ml, DLP_MLLOG_INTERVAL_START, "block_start", NULL, md, time_ms, __FILE__, __LINE__);
    dlp_mllog_event(x->ml, DLP_MLLOG_INTERVAL_START, "epoch_start", NULL, dlp_mllog_md("epoch_num", json_integer(epoch + 1)),
                    time_ms, __FILE__, __LINE__);
    x->epoch = epoch;
    x->in_block = x->in_epoch = 1;
}

static void ml_epoch_close(dlp_train_mllog *x) {
    if (x->in_epoch) DLP_MLLOG_END(x->ml, "epoch_stop", NULL, dlp_mllog_md("epoch_num", json_integer(x->epoch + 1)));
    if (x->in_block) {
        json_t *md = json_object();
        json_object_set_new(md, "first_epoch_num", json_integer(x->epoch + 1));
        json_object_set_new(md, "epoch_count", json_integer(1));
        DLP_MLLOG_END(x->ml, "block_stop", NULL, md);
    }
    x->in_block = x->in_epoch = 0;
}

// Setup done: the configuration, init_stop and run_start, the first block and epoch.
static void ml_start(dlp_train_mllog *x, const dlp_train_event *ev) {
    const dlp_train_cfg *c = x->c;
    x->world = ev->world > 0 ? ev->world : 1;
    x->has_val = ev->val_images > 0;
    const int gb = c->batch * x->world;
    DLP_MLLOG_POINT(x->ml, "global_batch_size", json_integer(gb), NULL);
    DLP_MLLOG_POINT(x->ml, "train_samples", json_integer(ev->train_images * x->world), NULL);
    DLP_MLLOG_POINT(x->ml, "eval_samples", json_integer(ev->val_images * x->world), NULL);
    DLP_MLLOG_POINT(x->ml, "gradient_accumulation_steps", json_integer(1), NULL);
    DLP_MLLOG_POINT(x->ml, "seed", json_integer((json_int_t)c->seed), NULL);
    DLP_MLLOG_POINT(x->ml, "opt_name", json_string("sgd"), NULL);
    DLP_MLLOG_POINT(x->ml, "opt_base_learning_rate",
                    json_real(c->sched.scale_by_batch ? c->sched.base_lr * gb / 256.0 : c->sched.base_lr), NULL);  // the peak
    DLP_MLLOG_POINT(x->ml, "opt_learning_rate_warmup_epochs",
                    json_real(c->sched.warmup_epochs + (ev->steps_per_epoch > 0 ? (double)c->sched.warmup_steps / (double)ev->steps_per_epoch : 0)),
                    NULL);
    DLP_MLLOG_POINT(x->ml, "opt_learning_rate_decay_schedule", json_string(dlp_lr_decay_name(c->sched.decay)), NULL);
    DLP_MLLOG_POINT(x->ml, "sgd_opt_momentum", json_real(c->momentum), NULL);
    DLP_MLLOG_POINT(x->ml, "opt_weight_decay", json_real(c->weight_decay), NULL);
    DLP_MLLOG_POINT(x->ml, "model_bn_span", json_integer(c->batch), NULL);  // BN statistics over one rank's batch
    DLP_MLLOG_POINT(x->ml, "train_steps", json_integer(ev->total_steps), NULL);
    DLP_MLLOG_END(x->ml, "init_stop", NULL, NULL);
    DLP_MLLOG_START(x->ml, "run_start", NULL, NULL);
    ml_epoch_open(x, ev->epoch, 0);
}

static json_t *eval_md(dlp_train_mllog *x, int64_t epoch, int64_t step) {
    json_t *md = json_object();
    json_object_set_new(md, "epoch_num", json_integer(epoch + 1));
    json_object_set_new(md, "samples_count", json_integer((json_int_t)step * x->c->batch * x->world));
    return md;
}

// An evaluation follows every epoch's end (eval_start there); one in mid-epoch or the final one of a run stopped in
// mid-epoch is reported when done, its eval_start then written with eval_stop.
static void ml_eval(dlp_train_mllog *x, const dlp_train_event *ev) {
    if (!x->in_eval) DLP_MLLOG_START(x->ml, "eval_start", NULL, eval_md(x, ev->epoch, ev->step));
    x->in_eval = 0;
    DLP_MLLOG_POINT(x->ml, "eval_accuracy", json_real(ev->top1), eval_md(x, ev->epoch, ev->step));
    DLP_MLLOG_END(x->ml, "eval_stop", NULL, eval_md(x, ev->epoch, ev->step));
}



dlp_status dlp_train_mllog_start(dlp_train_mllog *x, const char *path, const dlp_train_event *ev) {
    DLP_CHECK(ml_open(x, path));
    ml_start(x, ev);
    return DLP_OK;
}

void dlp_train_mllog_event(dlp_train_mllog *x, const dlp_train_event *ev) {
    if (!x->ml) return;
    switch (ev->kind) {
    case DLP_TRAIN_EV_STEP:
        if (!x->in_epoch) ml_epoch_open(x, ev->epoch, 0);  // the epoch after an evaluation
        break;
    case DLP_TRAIN_EV_EPOCH:
        ml_epoch_close(x);
        if (x->has_val && x->c->eval) {  // the trainer evaluates right after an epoch's end
            DLP_MLLOG_START(x->ml, "eval_start", NULL, eval_md(x, ev->epoch, ev->step));
            x->in_eval = 1;
        }
        break;
    case DLP_TRAIN_EV_EVAL:
        ml_epoch_close(x);  // an evaluation in mid-epoch closes the block (the next step opens another)
        ml_eval(x, ev);
        break;
    default:
        break;
    }
}

dlp_status dlp_train_mllog_stop(dlp_train_mllog *x, int success) {
    if (x->ml) {
        ml_epoch_close(x);
        DLP_MLLOG_END(x->ml, "run_stop", NULL, dlp_mllog_md("status", json_string(success ? "success" : "aborted")));
    }
    dlp_status st = dlp_mllog_close(x->ml);
    x->ml = NULL;
    return st;
}

void dlp_train_steps_line(FILE *f, const dlp_train_event *ev, int batch) {
    double total = 0;
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) total += ev->phase_ms[p];
    fprintf(f, "{\"step\": %lld, \"epoch\": %lld, \"step_in_epoch\": %lld, \"time_ms\": %lld, "
            "\"loss\": %.6g, \"lr\": %.6g, \"images\": %d, \"ms\": %.4f, \"img_per_s\": %.3f, \"phase_ms\": {",
            (long long)ev->step, (long long)ev->epoch, (long long)ev->step_in_epoch, (long long)dlp_mllog_now_ms(),
            ev->loss, ev->lr, batch, total, total > 0 ? batch * 1000.0 / total : 0.0);
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++)
        fprintf(f, "%s\"%s\": %.4f", p ? ", " : "", dlp_train_phase_name((dlp_train_phase)p), ev->phase_ms[p]);
    fprintf(f, "}}\n");
    fflush(f);
}
