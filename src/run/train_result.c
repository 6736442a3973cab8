// run/train_result: the figures of a training run (throughput, GFLOP/s against the peak, the stall verdict) and
// its "dlperf.train/1" JSON result.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fields.h"
#include "core/json.h"
#include "core/log.h"
#include "hw/host.h"
#include "run/step.h"
#include "run/train_impl.h"

// A step that waits for data this share of its time or more is the pipeline's fault.
#define STALL_THRESHOLD 0.05

static const char *const k_verdicts[] = {"compute-bound", "pipeline-bound", "input-bound"};

const char *dlp_train_verdict_name(dlp_train_verdict v) {
    return (unsigned)v < sizeof k_verdicts / sizeof k_verdicts[0] ? k_verdicts[v] : "?";
}

static double safe_div(double a, double b) { return b > 0 ? a / b : 0; }

static json_t *phases_json(const int64_t *ns, int64_t steps) {
    int64_t total = 0;
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) total += ns[p];
    json_t *o = json_object();
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) {
        json_t *e = json_object();
        json_object_set_new(e, "ms", json_real(dlp_ns_to_ms(ns[p])));
        json_object_set_new(e, "pct", json_real(100.0 * safe_div((double)ns[p], (double)total)));
        json_object_set_new(e, "ms_per_step", json_real(safe_div(dlp_ns_to_ms(ns[p]), (double)steps)));
        json_object_set_new(o, dlp_train_phase_name((dlp_train_phase)p), e);
    }
    json_object_set_new(o, "total_ms", json_real(dlp_ns_to_ms(total)));
    return o;
}

// config.resolved: the configuration as the run used it (defaults filled in), a row per key. Rows read the trainer:
// TR_* its configuration t->c, the CUSTOM rows what the run resolved (the model's classes, the backend, ...).
static json_t *str_or_null(const char *v) { return v ? json_string(v) : json_null(); }
static json_t *model_write(const void *rec) { return json_string(((const dlp_trainer *)rec)->c.model); }
static json_t *classes_write(const void *rec) {
    const dlp_trainer *t = rec;
    return json_integer(t->have_net ? t->net.num_classes : t->c.classes);
}
static json_t *val_resize_write(const void *rec) {
    const dlp_train_cfg *c = &((const dlp_trainer *)rec)->c;
    return json_integer(c->val_resize ? c->val_resize : (int)lround(c->size * 256.0 / 224));
}
static json_t *crop_scale_write(const void *rec) {
    const dlp_train_cfg *c = &((const dlp_trainer *)rec)->c;
    return json_pack("[ff]", c->crop_scale_lo, c->crop_scale_hi);
}
static json_t *device_write(const void *rec) {
    const dlp_train_cfg *c = &((const dlp_trainer *)rec)->c;
    return json_string(c->device ? c->device : "");
}
static json_t *backend_write(const void *rec) {
    const dlp_trainer *t = rec;
    return json_string(t->ops ? dlp_backend_name(t->ops) : "");
}
static json_t *precision_write(const void *rec) {
    return json_string(dlp_dtype_name(((const dlp_trainer *)rec)->c.precision));
}
static json_t *seed_write(const void *rec) {  // a string: JSON readers lose integers above 2^53
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)((const dlp_trainer *)rec)->c.seed);
    return json_string(seed);
}
static json_t *lr_write(const void *rec) {
    const dlp_trainer *t = rec;
    json_t *lr = t->total_steps ? dlp_lr_schedule_to_json(&t->sched) : json_object();
    json_object_set_new(lr, "peak", json_real(t->total_steps ? dlp_lr_peak(&t->sched) : 0));
    json_object_set_new(lr, "warmup_steps_total", json_integer(t->total_steps ? dlp_lr_warmup_steps(&t->sched) : 0));
    return lr;
}
static json_t *eval_write(const void *rec) {
    const dlp_trainer *t = rec;
    return json_boolean(t->c.eval && t->vl);
}
static json_t *checkpoint_dir_write(const void *rec) {
    return str_or_null(((const dlp_trainer *)rec)->c.checkpoint_dir);
}
static json_t *resume_write(const void *rec) { return str_or_null(((const dlp_trainer *)rec)->c.resume); }
static json_t *phase_timing_write(const void *rec) {
    const dlp_trainer *t = rec;
    return json_string(t->async && !t->c.sync_phases ? "host-observed (asynchronous device)" : "synchronous");
}

#define TR_I(key, m) {DLP_FIELD_AS(dlp_trainer, key, m, DLP_FT_INT, 0)}
#define TR_N(key, m) {DLP_FIELD_AS(dlp_trainer, key, m, DLP_FT_NUM, 0)}
#define TR_B(key, m) {DLP_FIELD_AS(dlp_trainer, key, m, DLP_FT_BOOL, 0)}
#define TR_CB(key, fn) {DLP_FIELD_CB(key, NULL, fn)}
static const dlp_field_def k_resolved_fields[] = {
    // model and data
    TR_CB("model", model_write), TR_CB("classes", classes_write), TR_I("size", c.size),
    TR_CB("val_resize", val_resize_write), TR_CB("crop_scale", crop_scale_write),
    // length
    TR_I("batch", c.batch), TR_I("epochs", c.epochs), TR_I("steps", c.steps), TR_I("total_steps", total_steps),
    TR_I("steps_per_epoch", spe), TR_I("stop_at_step", c.stop_at_step), TR_N("time_limit_s", c.time_limit_s),
    TR_N("target_top1", c.target_top1),
    // compute
    TR_CB("device", device_write), TR_CB("backend", backend_write), TR_CB("precision", precision_write),
    TR_I("threads", c.threads), TR_I("workers", c.workers), TR_I("prefetch", c.prefetch),
    TR_I("bucket_elems", c.bucket_elems), TR_CB("seed", seed_write),
    // optimizer and schedule
    TR_CB("lr", lr_write), TR_N("momentum", c.momentum), TR_B("nesterov", c.nesterov),
    TR_N("weight_decay", c.weight_decay), TR_B("no_bn_decay", c.no_bn_decay),
    TR_N("label_smoothing", c.label_smoothing), TR_B("zero_init_residual", c.zero_init_residual),
    // evaluation and checkpoints
    TR_CB("eval", eval_write), TR_I("eval_every", c.eval_every), TR_CB("checkpoint_dir", checkpoint_dir_write),
    TR_I("checkpoint_every", c.checkpoint_every), TR_I("keep_checkpoints", c.keep_checkpoints),
    TR_CB("resume", resume_write),
    // input pipeline, measurement
    TR_I("read_limit_bytes_per_s", c.read_limit_bytes_per_s), TR_B("drop_cache", c.drop_cache),
    TR_I("limit_samples", c.limit_samples), TR_I("measure_warmup_steps", c.measure_warmup_steps),
    TR_B("sync_phases", c.sync_phases), TR_CB("phase_timing", phase_timing_write),
    {0}};

static json_t *resolved_json(const dlp_trainer *t) { return dlp_fields_to_json(k_resolved_fields, t); }

static void verdict(dlp_trainer *t, dlp_train_result *r) {
    const double stall_frac = r->train_s > 0 && t->have_input_stats ? t->in_stall_ms / (r->train_s * 1e3) : 0;
    if (t->have_input_stats && stall_frac >= STALL_THRESHOLD) {
        r->verdict = DLP_TRAIN_INPUT_BOUND;
        snprintf(r->verdict_text, sizeof r->verdict_text,
                 "input-bound: the device waited %.0f%% of the time for host-to-device copies (%.2f ms per copy)",
                 100 * stall_frac, safe_div(t->in_copy_ms, (double)t->in_copies));
    } else if (r->data_wait_frac >= STALL_THRESHOLD) {
        r->verdict = DLP_TRAIN_PIPELINE_BOUND;
        snprintf(r->verdict_text, sizeof r->verdict_text,
                 "pipeline-bound: the loader delivered %.1f img/s while compute could take %.1f img/s "
                 "(data wait %.0f%% of the step)",
                 r->steady_img_per_s, r->compute_img_per_s, 100 * r->data_wait_frac);
    } else {
        r->verdict = DLP_TRAIN_COMPUTE_BOUND;
        snprintf(r->verdict_text, sizeof r->verdict_text,
                 "compute-bound: compute took %.1f img/s and the loader kept up (data wait %.1f%% of the step; its "
                 "%d thread%s could deliver about %.0f img/s)",
                 r->compute_img_per_s, 100 * r->data_wait_frac, t->c.workers, t->c.workers == 1 ? "" : "s",
                 r->loader_img_per_s);
    }
}

// The data-parallel part of the result: the communicator, the global batch, the gradient allreduce (bytes, time per
// step, bus bandwidth as nccl-tests defines it: bytes / time x 2(n-1)/n) and every rank's figures.
static json_t *dist_json(const dlp_trainer *t) {
    const int world = t->world > 0 ? t->world : 1;
    json_t *d = json_object();
    json_object_set_new(d, "communicator", json_string(t->comm ? dlp_comm_name(t->comm) : "local"));
    json_object_set_new(d, "ranks", json_integer(world));
    json_object_set_new(d, "global_batch", json_integer((json_int_t)t->c.batch * world));
    const double bytes = world > 1 ? (double)t->net.param_count * sizeof(float) : 0;
    const double ar_ms = safe_div(dlp_ns_to_ms(t->ph_ns[DLP_TRAIN_PH_ALLREDUCE]), (double)t->steps_run);
    json_object_set_new(d, "allreduce_bytes_per_step", json_real(bytes));
    json_object_set_new(d, "allreduce_ms_per_step", json_real(ar_ms));
    // exposed: the allreduce phase (waiting after backward); hidden: from each step's first bucket to the end of its
    // backward, while the reductions ran behind compute
    int64_t buckets = 0, hidden_ns = 0;
    dlp_step_overlap_stats(t->overlap, &buckets, &hidden_ns);
    json_object_set_new(d, "buckets_per_step", json_real(safe_div((double)buckets, (double)t->steps_run)));
    json_object_set_new(d, "allreduce_exposed_ms_per_step", json_real(ar_ms));
    const double hid_ms = safe_div(dlp_ns_to_ms(hidden_ns), (double)t->steps_run);
    json_object_set_new(d, "allreduce_hidden_ms_per_step", json_real(hid_ms));
    // nccl-tests' bus bandwidth over the longest the reduction can have taken (first bucket to the end of the wait):
    // a lower bound when buckets overlap the backward
    const double span_ms = ar_ms + hid_ms;
    json_object_set_new(d, "allreduce_busbw_gb_s", span_ms > 0 && world > 1
                        ? json_real(bytes / (span_ms * 1e-3) * 2.0 * (world - 1) / world * 1e-9) : json_null());

    json_t *per = json_array();
    for (int i = 0; t->rank_figs && i < world; i++) {
        const double *f = t->rank_figs + (size_t)i * DLP_TRAIN_RANK_FIGS, steps = f[DLP_TRAIN_RANK_STEPS];
        json_t *e = json_object();
        json_object_set_new(e, "rank", json_integer(i));
        json_object_set_new(e, "steps", json_integer((json_int_t)steps));
        json_object_set_new(e, "images", json_integer((json_int_t)f[DLP_TRAIN_RANK_IMAGES]));
        json_object_set_new(e, "data_wait_ms_per_step", json_real(safe_div(f[DLP_TRAIN_RANK_DATA_WAIT_MS], steps)));
        json_object_set_new(e, "compute_ms_per_step", json_real(safe_div(f[DLP_TRAIN_RANK_COMPUTE_MS], steps)));
        json_object_set_new(e, "allreduce_ms_per_step", json_real(safe_div(f[DLP_TRAIN_RANK_ALLREDUCE_MS], steps)));
        json_object_set_new(e, "img_per_s", json_real(safe_div(f[DLP_TRAIN_RANK_IMAGES], f[DLP_TRAIN_RANK_LOOP_MS] * 1e-3)));
        json_object_set_new(e, "cpu_share", json_real(f[DLP_TRAIN_RANK_CPU_SHARE]));  // 0: unknown
        json_array_append_new(per, e);
    }
    json_object_set_new(d, "per_rank", per);
    return d;
}

// The result's figures: counts, times, rates, the loader's capacity, GFLOP/s against the peak, the verdict; ls gets
// the training loader's statistics.
static void figures(dlp_trainer *t, dlp_train_result *r, dlp_loader_stats *ls_out) {
    const dlp_train_cfg *c = &t->c;
    r->rank = t->rank;
    r->world = t->world > 0 ? t->world : 1;
    const int64_t now = dlp_now_ns();
    r->steps = t->steps_run;
    r->first_step = t->resumed ? t->resume_pos.step : 0;
    r->images = t->images;
    r->steps_per_epoch = t->spe;
    r->epochs_done = safe_div((double)t->pos.step, (double)t->spe);
    r->wall_s = dlp_ns_to_s(now - t->t_run0);
    r->setup_s = dlp_ns_to_s((t->t_setup_end ? t->t_setup_end : now) - t->t_run0);
    // A run stopped (time limit, Ctrl-C, --measure-warmup too large) before any step counted as steady: its
    // figures come from all the steps it ran, warm-up included, rather than reading 0 img/s.
    if (t->steady_steps == 0 && t->steps_run > 0) {
        memcpy(t->steady_ph_ns, t->ph_ns, sizeof t->steady_ph_ns);
        t->steady_steps = t->steps_run;
        t->steady_images = t->images;
        DLP_WARN("train: the run ended within its %lld warm-up step%s: the steady-state figures are over all %lld "
                 "steps (first-step costs included)", (long long)t->c.measure_warmup_steps,
                 t->c.measure_warmup_steps == 1 ? "" : "s", (long long)t->steps_run);
        t->c.measure_warmup_steps = 0;
    }
    int64_t loop_ns = 0, steady_ns = 0;
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) {
        r->phase_ms[p] = dlp_ns_to_ms(t->ph_ns[p]);
        loop_ns += t->ph_ns[p];
        steady_ns += t->steady_ph_ns[p];
    }
    // Compute (what the device needs per step): the phases between the data and the bookkeeping.
    int64_t compute_ns = 0;
    for (int p = DLP_TRAIN_PH_INPUT; p <= DLP_TRAIN_PH_UPDATE; p++) compute_ns += t->steady_ph_ns[p];
    r->train_s = dlp_ns_to_s(loop_ns);
    r->eval_s = dlp_ns_to_s(t->eval_ns);
    r->checkpoint_s = dlp_ns_to_s(t->ck_ns);
    r->img_per_s = safe_div((double)t->images, r->train_s);
    r->steady_img_per_s = safe_div((double)t->steady_images, dlp_ns_to_s(steady_ns));
    r->compute_img_per_s = safe_div((double)t->steady_images, dlp_ns_to_s(compute_ns));
    r->data_wait_frac = safe_div((double)t->steady_ph_ns[DLP_TRAIN_PH_DATA_WAIT], (double)steady_ns);
    dlp_loader_stats *ls = ls_out;
    memset(ls, 0, sizeof *ls);
    if (t->tl) dlp_loader_get_stats(t->tl, ls);
    double worker_ns_per_img = safe_div((double)(ls->read_ns + ls->decode_ns + ls->augment_ns), (double)ls->images);
    r->loader_img_per_s = safe_div(1e9 * c->workers, worker_ns_per_img);
    r->gflop_per_image = t->have_net ? 3 * dlp_net_forward_flops(&t->net) * 1e-9 : 0;
    r->gflop_per_s = r->gflop_per_image * r->steady_img_per_s;
    r->compute_gflop_per_s = r->gflop_per_image * r->compute_img_per_s;
    r->peak_gflop_per_s = t->peak_gflops;
    r->fraction_of_peak = safe_div(r->gflop_per_s, t->peak_gflops);
    if (t->peak_gflops > 0 && r->compute_gflop_per_s > 1.05 * t->peak_gflops && !t->peak_note[0])
        snprintf(t->peak_note, sizeof t->peak_note,
                 "the run computed faster than the %s peak: the peak was taken while other work shared the CPU "
                 "(measure it again with --peak measure on a quiet machine)", t->peak_source);
    r->first_loss = t->first_loss;
    r->last_loss = t->last_loss;
    r->best_top1 = t->best_top1;
    r->last_top1 = t->last_top1;
    r->last_top5 = t->last_top5;
    r->nevals = t->evals ? (int)json_array_size(t->evals) : 0;
    snprintf(r->stopped_by, sizeof r->stopped_by, "%s", t->stopped_by[0] ? t->stopped_by : "error");
    snprintf(r->last_checkpoint, sizeof r->last_checkpoint, "%s", t->last_ck);
    r->threads = c->threads;
    r->workers = c->workers;
    verdict(t, r);
}

// Each epoch's figures (those with steps or a validation).
static json_t *epochs_json(const dlp_trainer *t) {
    json_t *eps = json_array();
    for (int64_t k = 0; t->epochs && k < t->nepochs; k++) {
        const dlp_train_epoch_stats *es = &t->epochs[k];
        if (!es->steps && !es->has_val) continue;
        json_t *e = json_object();
        json_object_set_new(e, "epoch", json_integer(t->resume_pos.epoch + k + 1));
        json_object_set_new(e, "steps", json_integer(es->steps));
        json_object_set_new(e, "images", json_integer(es->images));
        json_object_set_new(e, "loss_mean", json_real(safe_div(es->loss_sum, (double)es->steps)));
        json_object_set_new(e, "train_top1", json_real(safe_div((double)es->correct_top1, (double)es->images)));
        json_object_set_new(e, "img_per_s", json_real(safe_div((double)es->images, dlp_ns_to_s(es->loop_ns))));
        json_object_set_new(e, "data_wait_frac", json_real(safe_div((double)es->data_wait_ns, (double)es->loop_ns)));
        json_object_set_new(e, "train_s", json_real(dlp_ns_to_s(es->loop_ns)));
        const int64_t before = k == 0 ? t->resume_pos.step_in_epoch : 0;  // steps of a resumed epoch done earlier
        json_object_set_new(e, "complete", json_boolean(es->steps + before == t->spe));
        if (es->has_val) {
            json_t *v = json_object();
            json_object_set_new(v, "top1", json_real(es->val_top1));
            json_object_set_new(v, "top5", json_real(es->val_top5));
            json_object_set_new(v, "loss", json_real(es->val_loss));
            json_object_set_new(e, "val", v);
        } else {
            json_object_set_new(e, "val", json_null());
        }
        json_array_append_new(eps, e);
    }
    return eps;
}

static json_t *data_json(const dlp_trainer *t) {
    json_t *data = json_object();
    json_object_set_new(data, "train", json_string(t->train_where));
    json_object_set_new(data, "train_files", json_integer(t->train_ds ? t->train_ds->n : 0));
    json_object_set_new(data, "train_images_per_epoch", json_integer(t->tl ? dlp_loader_samples_per_epoch(t->tl) : 0));
    json_object_set_new(data, "classes", json_integer(t->train_ds ? t->train_ds->nclasses : 0));
    json_object_set_new(data, "val", t->val_ds ? json_string(t->val_where) : json_null());
    json_object_set_new(data, "val_images", json_integer(t->vl ? dlp_loader_samples_per_epoch(t->vl) : 0));
    json_object_set_new(data, "input_layout", json_string(t->in_layout == DLP_LAYOUT_NHWC ? "NHWC" : "NCHW"));
    json_object_set_new(data, "input_dtype", json_string(dlp_dtype_name(t->in_dtype)));
    return data;
}

void dlp_train_finish_result(dlp_trainer *t, dlp_train_result *r) {
    const dlp_train_cfg *c = &t->c;
    dlp_loader_stats ls;
    figures(t, r, &ls);

    json_t *o = dlp_json_result_new("dlperf.train/1", 0, NULL);
    json_t *cfg = json_object();
    json_object_set_new(cfg, "options", c->options ? json_incref(c->options) : json_null());
    json_object_set_new(cfg, "resolved", resolved_json(t));
    json_object_set_new(o, "config", cfg);

    json_object_set_new(o, "data", data_json(t));

    json_t *model = json_object();
    json_object_set_new(model, "arch", json_string(t->have_net ? t->net.arch : c->model));
    json_object_set_new(model, "parameters", json_integer(t->have_net ? t->net.param_count : 0));
    json_object_set_new(model, "forward_gflop_per_image", json_real(r->gflop_per_image / 3));
    json_object_set_new(model, "train_gflop_per_image", json_real(r->gflop_per_image));
    json_object_set_new(o, "model", model);

    json_t *be = json_object();
    json_object_set_new(be, "name", json_string(t->ops ? dlp_backend_name(t->ops) : ""));
    json_object_set_new(be, "device", json_string(c->device ? c->device : ""));
    json_object_set_new(be, "plan_ms", json_real(t->plan_ms));
    json_t *info = t->plan ? dlp_plan_info_json(t->plan) : NULL;  // ISA, kernels, fusions, memory
    if (info) json_object_set_new(be, "plan", info);
    json_object_set_new(o, "backend", be);

    dlp_host_info h;
    dlp_host_probe(&h);
    json_t *th = json_object();
    json_object_set_new(th, "compute", json_integer(c->threads));
    json_object_set_new(th, "loader", json_integer(c->workers));
    json_object_set_new(th, "cpus_allowed", json_integer(h.cpus_allowed));
    const char *wp = getenv("OMP_WAIT_POLICY");
    json_object_set_new(th, "omp_wait_policy", wp ? json_string(wp) : json_null());
    const char *how = getenv("DLPERF_OMP_WAIT_POLICY_SET");
    json_object_set_new(th, "omp_wait_policy_set_by", json_string(how && how[0] ? how : wp ? "environment" : "unset"));
    json_object_set_new(o, "threads", th);
    json_object_set_new(o, "host", dlp_host_to_json(&h));
    json_object_set_new(o, "versions", dlp_versions_to_json());
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    json_object_set_new(o, "seed", json_string(seed));

    // cpu_s, cpu_wait_s, cpu_share: the process's CPU time over the run, and the share of the cores its threads got
    // while they wanted them (their CPU time over that plus their run-queue wait; 0: unknown): on a shared machine,
    // what predict --cpu-share takes. Over the training loop: its slowest busy thread's share (0: unknown) — a
    // multi-thread cpu compute step goes at it (predict --cpu-share-slowest) — and the loop's mean share.
    json_object_set_new(o, "run", json_pack("{s:I, s:I, s:I, s:I, s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                                            "s:f, s:f}", "steps", (json_int_t)r->steps, "first_step",
                                            (json_int_t)r->first_step, "last_step", (json_int_t)t->pos.step, "images",
                                            (json_int_t)r->images, "epochs_done", r->epochs_done, "stopped_by",
                                            r->stopped_by, "wall_s", r->wall_s, "setup_s", r->setup_s, "train_s",
                                            r->train_s, "eval_s", r->eval_s, "checkpoint_s", r->checkpoint_s, "cpu_s",
                                            t->share.proc_cpu_s, "cpu_wait_s", t->share.wait_s, "cpu_share",
                                            t->share.share, "cpu_share_slowest", t->loop_share.slowest_share,
                                            "loop_cpu_share", t->loop_share.share));

    json_object_set_new(o, "phases", phases_json(t->ph_ns, t->steps_run));
    json_t *steady = json_object();
    json_object_set_new(steady, "warmup_steps", json_integer(c->measure_warmup_steps));
    json_object_set_new(steady, "steps", json_integer(t->steady_steps));
    json_object_set_new(steady, "images", json_integer(t->steady_images));
    json_object_set_new(steady, "phases", phases_json(t->steady_ph_ns, t->steady_steps));
    json_object_set_new(o, "steady_state", steady);

    json_t *tp = json_object();
    json_object_set_new(tp, "img_per_s", json_real(r->img_per_s));
    json_object_set_new(tp, "steady_img_per_s", json_real(r->steady_img_per_s));
    json_object_set_new(tp, "compute_img_per_s", json_real(r->compute_img_per_s));
    json_object_set_new(tp, "loader_img_per_s", json_real(r->loader_img_per_s));
    json_object_set_new(tp, "ms_per_step", json_real(safe_div(r->train_s * 1e3, (double)r->steps)));
    json_object_set_new(o, "throughput", tp);

    json_t *gf = json_object();
    json_object_set_new(gf, "per_image", json_real(r->gflop_per_image));
    json_object_set_new(gf, "achieved_per_s", json_real(r->gflop_per_s));
    json_object_set_new(gf, "compute_per_s", json_real(r->compute_gflop_per_s));
    json_object_set_new(gf, "peak_per_s", t->peak_gflops > 0 ? json_real(t->peak_gflops) : json_null());
    json_object_set_new(gf, "peak_source", json_string(t->peak_gflops > 0 ? t->peak_source : "none"));
    if (t->peak_note[0]) json_object_set_new(gf, "peak_note", json_string(t->peak_note));
    json_object_set_new(gf, "fraction_of_peak", t->peak_gflops > 0 ? json_real(r->fraction_of_peak) : json_null());
    json_object_set_new(gf, "compute_fraction_of_peak",
                        t->peak_gflops > 0 ? json_real(safe_div(r->compute_gflop_per_s, t->peak_gflops)) : json_null());
    json_object_set_new(o, "gflop", gf);

    json_t *stall = json_object();
    json_object_set_new(stall, "data_wait_frac", json_real(r->data_wait_frac));
    json_object_set_new(stall, "threshold", json_real(STALL_THRESHOLD));
    json_object_set_new(stall, "verdict", json_string(dlp_train_verdict_name(r->verdict)));
    json_object_set_new(stall, "text", json_string(r->verdict_text));
    if (t->have_input_stats) {
        json_t *di = json_object();
        json_object_set_new(di, "copy_ms", json_real(t->in_copy_ms));
        json_object_set_new(di, "stall_ms", json_real(t->in_stall_ms));
        json_object_set_new(di, "copies", json_integer(t->in_copies));
        json_object_set_new(stall, "device_input", di);
    }
    json_object_set_new(o, "stall", stall);

    json_t *loss = json_object();
    json_object_set_new(loss, "first", json_real(r->first_loss));
    json_object_set_new(loss, "last", json_real(r->last_loss));
    json_object_set_new(o, "loss", loss);

    json_object_set_new(o, "epochs", epochs_json(t));
    json_object_set_new(o, "evals", t->evals ? json_incref(t->evals) : json_array());
    json_t *acc = json_object();
    json_object_set_new(acc, "best_top1", t->best_top1 >= 0 ? json_real(t->best_top1) : json_null());
    json_object_set_new(acc, "last_top1", t->last_top1 >= 0 ? json_real(t->last_top1) : json_null());
    json_object_set_new(acc, "last_top5", t->last_top5 >= 0 ? json_real(t->last_top5) : json_null());
    json_object_set_new(o, "accuracy", acc);

    json_t *ld = json_object();
    json_object_set_new(ld, "train", t->tl ? dlp_loader_stats_to_json(&ls) : json_null());
    if (t->vl) {
        dlp_loader_stats vs;
        dlp_loader_get_stats(t->vl, &vs);
        json_object_set_new(ld, "val", dlp_loader_stats_to_json(&vs));
    } else {
        json_object_set_new(ld, "val", json_null());
    }
    json_object_set_new(o, "loader", ld);

    json_object_set_new(o, "monitor", t->mon ? dlp_monitor_summary_json(t->mon) : json_null());
    json_t *ck = json_object();
    json_object_set_new(ck, "written", t->ck_written ? json_incref(t->ck_written) : json_array());
    json_object_set_new(ck, "last", t->last_ck[0] ? json_string(t->last_ck) : json_null());
    json_object_set_new(o, "checkpoints", ck);
    json_object_set_new(o, "dist", dist_json(t));
    if (t->resumed) {
        json_t *rs = json_object();
        json_object_set_new(rs, "path", json_string(t->resume_path));
        json_object_set_new(rs, "step", json_integer(t->resume_pos.step));
        json_object_set_new(rs, "epoch", json_integer(t->resume_pos.epoch));
        json_object_set_new(rs, "step_in_epoch", json_integer(t->resume_pos.step_in_epoch));
        json_object_set_new(o, "resumed_from", rs);
    } else {
        json_object_set_new(o, "resumed_from", json_null());
    }
    json_object_set_new(o, "warnings", json_integer(dlp_log_warn_count()));
    r->json = o;
}
