// cli/predict: `dlperf predict` — a machine (catalog system or measured profile) and a workload in, each stage's
// capacity, the throughput, the bottleneck, the data stall, epoch time, cost and what would fix it out.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "hw/host.h"
#include "core/opts.h"
#include "hw/canary.h"
#include "hw/catalog.h"
#include "hw/gpumodel.h"
#include "perf/cost.h"
#include "perf/model.h"
#include "perf/model_net.h"
#include "perf/predict_detail.h"

typedef struct {
    const char *system, *profile, *device, *model, *data, *dataset, *pipeline, *catalog, *json, *stack;
    int classes, batch, size, workers, threads, devices, nodes, epochs, precision, mode, storage, seed;
    int64_t images, read_limit;
    double price, power, usd_h;
    double net_gbit, net_latency_us;  // nodes > 1: the link between nodes (perf/model_net)
    const char *net_bench;
    const char *speed;   // --speed: GFLOP/s of the cores during a run (hw/canary) or "now" (measured here)
    double measured;     // --measured: the run's img/s, compared with the prediction at both speeds
    double cpu_share;    // --cpu-share: the CPU share a run's threads got (dlperf train's run.cpu_share; 0: none)
    double cpu_share_slowest;  // --cpu-share-slowest: its slowest thread's (run.cpu_share_slowest; 0: by cpu_share)
    int omp_wait;        // --omp-wait: 0 active (the probe's, validate's), 1 passive (dlperf train's on the cpu device)
} opts_t;

static const char *grp(double v, char *buf, size_t len) { return dlp_cli_grp(v, buf, len); }
static const char *dur(double s, char *buf, size_t len) { return dlp_cli_dur(s, 0, buf, len); }

static void print_header(const dlp_profile *p, const dlp_device_profile *d, const dlp_workload *w,
                         const dlp_prediction *o) {
    char b1[32];
    printf("%s: %s\n", p->id[0] ? p->id : "profile", p->name[0] ? p->name : "");
    printf("  machine  %d x %s (%s), %s: %d cores, %d threads, %.0f GB RAM; storage: %s\n", o->devices, d->name,
           d->source, p->host.cpu_model, p->host.cores, p->host.threads, p->host.mem_bytes / 1e9,
           p->storage.desc[0] ? p->storage.desc : "-");
    printf("  workload %s %s %s, batch %d per device, %dx%d, %d device%s x %d node%s, %d loader threads (%d per "
           "device), pipeline %s, storage %s\n", w->model, dlp_task_name(w->task), dlp_prec_name(w->prec), o->batch,
           w->tf.size, w->tf.size, o->devices, o->devices > 1 ? "s" : "", o->nodes, o->nodes > 1 ? "s" : "",
           o->workers_total, o->workers_total / o->devices, p->pipeline.name, o->storage_cold ? "cold" : "warm");
    printf("  dataset  %s: %s images, %.0f KB mean; per image %.0f KB read, %.0f KB entropy-decoded, %s px decoded "
           "(mean DCT scale %.2f)\n", w->stats.name, grp((double)w->stats.images, b1, sizeof b1), w->stats.mean_bytes / 1e3,
           o->work.bytes / 1e3, o->work.entropy_bytes / 1e3, grp(o->work.decoded_pixels, (char[32]){0}, 32),
           o->work.mean_dct_scale);
}

// The GPU model behind a catalog GPU's compute: the stack, the step by layer kind with each kind's verdict, and what
// the GPU would need for the next 10%: the factor on its memory side (HBM bandwidth, or the SMs x clock where those
// limit memory-bound kernels) or on its tensor peak that alone would make the step 10% shorter.
static void print_gpu_model(const dlp_gpu_spec *g, const dlp_gm_stack *stk, const dlp_workload *w, int batch, json_t *out) {
    dlp_gm_explain x;
    if (w->task != DLP_TASK_TRAIN || dlp_gm_explain_compute(g, w->prec, stk, batch, &x) != DLP_OK) {
        dlp_err_clear();
        return;
    }
    const dlp_gm_step *st = &x.st;
    const double t = x.step_s;
    double ce, me, ks;
    dlp_gm_effective(stk, w->prec, &ce, &me, &ks);  // at this precision
    printf("\n  GPU model  %s %s from its datasheet under stack %s (fitted on %d records of %d GPUs%s): compute efficiency "
           "%.2f, memory efficiency %.2f, %.1f us per kernel, %.2f%% per added GPU\n", g->id, dlp_prec_name(w->prec),
           stk->name, stk->nrecords, stk->ngpus, stk->scaled ? ", as a scaled prior" : "", ce, me, ks * 1e6, 100 * stk->loss);
    printf("    step at batch %d: %.1f ms = forward %.1f + backward %.1f + update %.2f + %d kernels x %.1f us -> %.0f img/s "
           "per GPU\n", batch, t * 1e3, batch * st->fwd_s * 1e3, batch * st->bwd_s * 1e3, st->update_s * 1e3, st->kernels,
           ks * 1e6, batch / t);
    printf("    by layer kind (share of the step, bound):");  // each with the share of its time that is memory-bound
    int shown = 0;
    for (int i = 0; i < DLP_WL_KIND_COUNT; i++) {
        int k = x.order[i];
        if (!dlp_gm_explain_kind_shown(&x, k, batch)) continue;
        double memf = st->kind_mem_s[k] / st->kind_s[k];
        printf("%s %s %.0f%% %s", shown++ ? "," : "", dlp_wl_kind_name((dlp_wl_kind)k), 100 * st->kind_s[k] * batch / t,
               memf > 0.9 ? "memory" : memf < 0.1 ? "compute" : "mixed");
    }
    double per_img = st->fwd_s + st->bwd_s;
    printf("\n    memory-bound passes %.0f%% of the layer time, compute-bound %.0f%%\n", 100 * st->memory_bound_s / per_img,
           100 * st->compute_bound_s / per_img);
    printf("    next 10%%: ");
    if (x.mem_x > 0)
        printf("%s x%.2f", x.sm_limited ? "the SMs' memory throughput (SMs x clock; HBM is not the limit)" :
               "HBM bandwidth", x.mem_x);
    else
        printf("no memory speed-up alone");
    if (x.peak_x > 0) printf(", or tensor peak x%.2f\n", x.peak_x);
    else printf("; no tensor-peak increase alone would do it\n");
    if (out) json_object_set_new(out, "gpu_model", dlp_gm_explain_to_json(&x, stk, batch, ce, me, ks));
}

static void print_prediction(const dlp_catalog *cat, const dlp_profile *p, const dlp_device_profile *d,
                             const dlp_workload *w, const dlp_prediction *o, const dlp_cost *cost, int plain,
                             const char *stack, json_t *pub_out, json_t *entry) {
    char b1[32], b2[32], b3[32];
    print_header(p, d, w, o);
    printf("\n  %-16s %14s %12s  %s\n", "stage", "capacity img/s", "per device", "detail");
    for (int i = 0; i < DLP_STAGE_COUNT; i++) {
        const dlp_stage_cap *s = &o->stages[i];
        if (!s->present) continue;
        printf("  %-16s %14s %12s  %s%s\n", dlp_stage_name((dlp_stage)i), grp(s->img_per_s, b1, sizeof b1),
               grp(s->img_per_s / o->devices, b2, sizeof b2), s->detail, i == (int)o->bottleneck ? "  <- bottleneck" : "");
    }
    printf("  %-16s %14s %12s  bottleneck: %s; data stall %.1f%%\n", "pipeline", grp(o->img_per_s, b1, sizeof b1),
           grp(o->per_device_img_per_s, b2, sizeof b2), dlp_stage_name(o->bottleneck), 100 * o->data_stall_fraction);
    if (o->nodes > 1) printf("  %-16s %14s  (%d nodes)\n", "cluster", grp(o->cluster_img_per_s, b1, sizeof b1), o->nodes);
    printf("\n  step %s, epoch %s", dur(o->step_s, b1, sizeof b1), dur(o->epoch_s, b2, sizeof b2));
    if (o->first_epoch_s > o->epoch_s * 1.001) printf(" (first epoch %s, cold)", dur(o->first_epoch_s, b3, sizeof b3));
    printf(", %d epochs %s\n", w->epochs, dur(o->total_s, b1, sizeof b1));
    // Published figures for this GPU, task and precision: single-GPU ones per device, whole-run ones as a whole.
    // Only for the GPU as published: ResNet-50 at 224x224, 1000 classes, no sim options.
    const dlp_gpu_spec *g = NULL;
    int comparable = plain && fabs(o->work_ratio - 1) < 1e-9 && w->classes == 1000;
    for (int i = 0; comparable && cat && i < cat->ngpus; i++)
        if (strcmp(cat->gpus[i].id, d->name) == 0) g = &cat->gpus[i];
    const int modelled = g && strcmp(d->source, "catalog") == 0 && stack;
    dlp_gm_stack stk;
    int have_stk = modelled && dlp_gm_stack_get(cat, stack, &stk) == DLP_OK;
    if (modelled && !have_stk) dlp_err_clear();
    // The published figures stand beside the prediction (never in its place); * marks the prediction's stack.
    for (int i = 0; g && i < cat->npublished; i++) {
        dlp_published_cmp c;
        if (!dlp_published_compare(&cat->published[i], g, w, o, have_stk ? &stk : NULL, stack, &c)) continue;
        const dlp_published *pb = c.pb;
        printf("  published%s%s: %s img/s on %d GPU%s (batch %d, %s, stack %s) -> predicted %s%s (%+.1f%%)\n",
               c.same_stack ? "*" : " ", pb->estimate ? " (estimate)" : "", grp(pb->img_per_s, b1, sizeof b1), pb->gpus,
               pb->gpus > 1 ? "s" : "", pb->batch, pb->framework, pb->stack, grp(c.predicted, b2, sizeof b2), c.how,
               100 * c.error);
        if (pub_out) json_array_append_new(pub_out, dlp_published_cmp_to_json(&c));
    }
    if (have_stk) print_gpu_model(g, &stk, w, o->batch, entry);
    printf("\n");
    const char *label = o->bottleneck == DLP_STAGE_COMPUTE ? "verdict:" : "fix:";
    for (int i = 0; i < o->nfix; i++) printf("  %-8s %s\n", i == 0 ? label : "", o->fix[i]);
    if (g && modelled)
        printf("  (the prediction comes from the datasheet and stack %s, at batch %d; * marks that stack's published figures, "
               "which its fit includes: dlperf validate --published holds each GPU out)\n", stack, o->batch);
    if (cost->known)
        printf("  cost: $%.2f/h (%s) -> $%.3f per million images, $%.*f per epoch, $%.2f for %d epochs\n",
               cost->usd_per_hour, cost->basis, cost->usd_per_million_images, cost->usd_per_epoch < 1 ? 4 : 2,
               cost->usd_per_epoch, cost->usd_total, w->epochs);
    else
        printf("  cost: %s\n", cost->basis);
    if (cost->known && cost->kwh_per_epoch > 0) printf("        energy %.2f kWh per epoch\n", cost->kwh_per_epoch);
    for (int i = 0; i < o->nnotes; i++) printf("  note: %s\n", o->notes[i]);
    printf("  basis: %s\n", o->step.rate ? o->step.rate->basis : "-");
}

// --data's statistics, read once for all the systems of a comparison.
typedef struct data_cache {
    int have;
    dlp_dataset_stats stats;
} data_cache;

static dlp_status build_workload(const opts_t *op, const dlp_opt *table, const dlp_catalog *cat, const dlp_profile *p,
                                 const dlp_device_profile *d, data_cache *dc, dlp_workload *w) {
    dlp_workload_init(w);
    snprintf(w->model, sizeof w->model, "%s", op->model);
    w->classes = op->classes;
    w->task = op->mode == 1 ? DLP_TASK_INFER : DLP_TASK_TRAIN;
    if (op->precision != DLP_PRECISION_AUTO) w->prec = (dlp_prec)op->precision;  // auto: dlp_cli_auto_precision's rule
    else w->prec = d->kind == DLP_DEVICE_CPU ? DLP_PREC_FP32 : DLP_PREC_FP16;
    if (op->batch > 0) {
        w->batch = op->batch;
    } else {
        const dlp_rate *r = dlp_device_find_rate(d, w->task, w->prec, op->threads);
        w->batch = r && r->batch_ref > 0 ? r->batch_ref : d->kind == DLP_DEVICE_CPU ? 32 : 256;
    }
    w->devices = op->devices;
    w->nodes = op->nodes;
    w->workers = op->workers;
    w->threads = op->threads;
    dlp_img_transform_init(&w->tf, w->task == DLP_TASK_TRAIN, op->size);
    w->storage = (dlp_storage_state)op->storage;
    w->read_limit_bytes_per_s = (double)op->read_limit;
    w->epochs = op->epochs;
    w->seed = (uint64_t)op->seed;
    if (op->data && dc->have) {
        w->stats = dc->stats;
    } else {
        int skipped = 0;
        char where[4096];
        DLP_CHECK(dlp_predict_stats(cat, p, op->data, op->dataset, w, &skipped, where, sizeof where));
        if (skipped) fprintf(stderr, "predict: %d files in %s could not be read as JPEG and were left out of the statistics\n",
                             skipped, where);
        dc->stats = w->stats;
        dc->have = op->data != NULL;
    }
    if (op->images > 0) w->stats.images = op->images;
    return DLP_OK;
}

// A comparison's header (several --system ids: one line per system).
static void print_compare_header(void) {
    printf("%-14s %-10s %7s %10s %9s %-15s %6s %12s %9s %9s %9s %11s\n", "system", "device", "devices", "img/s",
           "per dev", "bottleneck", "stall", "epoch", "$/h", "$/1M img", "$/epoch", "$/run");
}

// A comparison's line for one system.
static void print_compare_row(const dlp_profile *p, const dlp_device_profile *d, const dlp_prediction *o,
                              const dlp_cost *cost) {
    char b1[32], b2[32], b3[32], b4[32];
    printf("%-14s %-10s %7d %10s %9s %-15s %5.1f%% %12s", p->id, d->name, o->devices,
           grp(o->cluster_img_per_s, b1, sizeof b1), grp(o->per_device_img_per_s, b2, sizeof b2),
           dlp_stage_name(o->bottleneck), 100 * o->data_stall_fraction, dur(o->epoch_s, b3, sizeof b3));
    if (cost->known)
        printf(" %9.2f %9.3f %9.*f %11s\n", cost->usd_per_hour, cost->usd_per_million_images,
               cost->usd_per_epoch < 1 ? 4 : 2, cost->usd_per_epoch,
               cost->usd_total < 10 ? (snprintf(b4, sizeof b4, "%.2f", cost->usd_total), b4)
                                    : grp(cost->usd_total, b4, sizeof b4));
    else
        printf(" %9s %9s %9s %11s\n", "-", "-", "-", "-");
}

// A comparison's end: each system's first fix, and the basis of the costs.
static void print_compare_footer(json_t *preds, const dlp_cost_params *cp) {
    printf("\n");
    for (size_t i = 0; i < json_array_size(preds); i++) {
        json_t *e = json_array_get(preds, i);
        json_t *fx = json_object_get(json_object_get(e, "prediction"), "fix");
        printf("%-14s %s\n", json_string_value(json_object_get(json_object_get(e, "machine"), "id")),
               json_string_value(json_array_get(fx, 0)));
    }
    printf("\ncost basis: owned machines amortized over %.1f years at %.0f%% use plus power at $%.3f/kWh; cloud at "
           "%s rates\n", cp->lifetime_years, 100 * cp->utilization, cp->usd_per_kwh, cp->alt_rate ? "capacity-block" : "on-demand");
}

// A measured profile's speed (host.canary_*, a normalised probe): the prediction at another speed of the cores
// (rel = that speed / the profile's reference), its CPU-side timings scaled (hw/profile dlp_profile_at_speed).
// (share: rel is a run's CPU share, each row brought from its class's reference share: dlp_profile_at_share)
// (slowest: the run's slowest thread's share for the multi-thread cpu compute rows; 0: by the share)
static double predict_at_how(const dlp_profile *p, const dlp_device_profile *d, const dlp_workload *w, double rel,
                             int share, double slowest) {
    dlp_profile *p2 = malloc(sizeof *p2);
    dlp_device_profile *d2 = malloc(sizeof *d2);
    dlp_prediction *o2 = malloc(sizeof *o2);
    double r = NAN;
    if (p2 && d2 && o2) {
        *p2 = *p;
        *d2 = *d;
        if (share) {
            dlp_profile_at_shares(p2, rel, slowest);
            const dlp_device_profile *pd = dlp_profile_find_device(p2, d2->name);
            if (pd && d2->kind == DLP_DEVICE_CPU) *d2 = *pd;  // the profile's cpu device, at that share
        } else {
            dlp_profile_at_speed(p2, rel);
            dlp_device_at_speed(d2, rel);
        }
        if (dlp_predict(p2, d2, w, o2) == DLP_OK) r = o2->cluster_img_per_s;
        dlp_err_clear();
    }
    free(p2);
    free(d2);
    free(o2);
    return r;
}

static double predict_at(const dlp_profile *p, const dlp_device_profile *d, const dlp_workload *w, double rel) {
    return predict_at_how(p, d, w, rel, 0, 0);
}

// --cpu-share: the prediction at the CPU share a run's threads got, against the probe's rows' median share (issue 35).
static dlp_status print_at_share(const opts_t *op, const dlp_profile *p, const dlp_device_profile *d,
                                 const dlp_workload *w, const dlp_prediction *o, json_t *e) {
    if (!(op->cpu_share > 0)) return DLP_OK;
    const double ref = p->host.cpu_share > 0 ? p->host.cpu_share : p->host.cpu_share1;  // one-thread rows alone
    if (op->cpu_share > 1 || !(ref > 0))
        return DLP_ERR(DLP_ERR_INVALID, op->cpu_share > 1 ? "predict --cpu-share %g: a share of the cores, 0..1 (dlperf "
                       "train's run.cpu_share)" : "predict --cpu-share %g: the profile states no CPU share (probe it again "
                       "with this dlperf: host.cpu_share)", op->cpu_share);
    if (op->cpu_share_slowest > 1 || op->cpu_share_slowest < 0)
        return DLP_ERR(DLP_ERR_INVALID, "predict --cpu-share-slowest %g: a share of a core, 0..1 (dlperf train's "
                       "run.cpu_share_slowest)", op->cpu_share_slowest);
    // a run with passive OpenMP waits (dlperf train's threads.omp_wait_policy) goes linearly in its share: the rows'
    // share exponents (measured by the probe with spinning waits) left out
    dlp_profile *pl = op->omp_wait == 1 ? malloc(sizeof *pl) : NULL;
    if (pl) {
        *pl = *p;
        for (int i = 0; i < pl->ndevices; i++)
            for (int k = 0; k < pl->devices[i].nrates; k++) pl->devices[i].rates[k].share_exp = 0;
    }
    const double at = predict_at_how(pl ? pl : p, d, w, op->cpu_share, 1, op->cpu_share_slowest);
    free(pl);
    if (op->cpu_share_slowest > 0 && p->host.cpu_share_slowest > 0)
        printf("at a CPU share of %.2f, the slowest thread's %.2f (the probe's rows got %.2f, their slowest %.2f): %.1f "
               "img/s\n", op->cpu_share, op->cpu_share_slowest, ref, p->host.cpu_share_slowest, at);
    else
        printf("at a CPU share of %.2f (the probe's rows got %.2f): %.1f img/s\n", op->cpu_share, ref, at);
    json_object_set_new(e, "at_cpu_share", json_pack("{s:f, s:f, s:f, s:f, s:f}", "cpu_share", op->cpu_share,
                                                     "reference_cpu_share", ref, "cpu_share_slowest",
                                                     op->cpu_share_slowest, "reference_cpu_share_slowest",
                                                     p->host.cpu_share_slowest, "img_per_s", at));
    if (op->measured > 0)
        printf("measured %.1f img/s: %+.1f%% against the prediction at the probed share, %+.1f%% at the run's share\n",
               op->measured, 100 * (o->cluster_img_per_s / op->measured - 1), 100 * (at / op->measured - 1));
    return DLP_OK;
}

// The band the machine's speed while probed puts around the prediction (p10..p90 of the probe's canary readings),
// and with --speed / --measured the prediction at a run's speed against what the run measured (both figures).
static dlp_status print_speed_band(const opts_t *op, const dlp_profile *p, const dlp_device_profile *d,
                                   const dlp_workload *w, const dlp_prediction *o, json_t *e) {
    const dlp_host_profile *h = &p->host;
    const double ref = h->canary_gflops;
    if (op->speed && !(ref > 0))
        return DLP_ERR(DLP_ERR_INVALID, "predict --speed: the profile states no speed (probe it again with this "
                       "dlperf: host.canary_gflops)");
    if (!(ref > 0) || !(h->canary_p10_gflops > 0)) {
        if (op->measured > 0)
            printf("measured %.1f img/s: %+.1f%% against the prediction\n", op->measured,
                   100 * (o->cluster_img_per_s / op->measured - 1));
        return DLP_OK;
    }
    const double lo = predict_at(p, d, w, h->canary_p10_gflops / ref), hi = predict_at(p, d, w, h->canary_p90_gflops / ref);
    printf("on this machine, between %.1f and %.1f img/s (the cores' speed while probed: p10 %.1f, median %.1f, p90 "
           "%.1f GFLOP/s over %d readings)\n", lo, hi, h->canary_p10_gflops, ref, h->canary_p90_gflops, h->canary_samples);
    json_object_set_new(e, "band", json_pack("{s:f, s:f, s:f, s:f}", "img_per_s_lo", lo, "img_per_s_hi", hi,
                                             "speed_lo_gflops", h->canary_p10_gflops, "speed_hi_gflops",
                                             h->canary_p90_gflops));
    double sp = NAN;
    if (op->speed) {
        char *end = NULL;
        sp = strcmp(op->speed, "now") == 0 ? dlp_host_canary_gflops(0.3) : strtod(op->speed, &end);
        if (end && (*end || end == op->speed)) sp = NAN;
        if (!(sp > 0))
            return DLP_ERR(DLP_ERR_INVALID, "predict --speed '%s': a speed in GFLOP/s (the canary's: validate's "
                           "speed x the profile's host.canary_gflops) or 'now'", op->speed);
        const double at = predict_at(p, d, w, sp / ref);
        printf("at %.1f GFLOP/s (%.2f x the probed speed): %.1f img/s\n", sp, sp / ref, at);
        json_object_set_new(e, "at_speed", json_pack("{s:f, s:f}", "speed_gflops", sp, "img_per_s", at));
        if (op->measured > 0)
            printf("measured %.1f img/s: %+.1f%% against the prediction at the probed speed, %+.1f%% at the run's "
                   "speed\n", op->measured, 100 * (o->cluster_img_per_s / op->measured - 1), 100 * (at / op->measured - 1));
    } else if (op->measured > 0 && !(op->cpu_share > 0)) {
        printf("measured %.1f img/s: %+.1f%% against the prediction (give --speed to compare at the run's speed)\n",
               op->measured, 100 * (o->cluster_img_per_s / op->measured - 1));
    }
    return print_at_share(op, p, d, w, o, e);
}

int dlp_cli_predict(int argc, char **argv) {
    opts_t op;
    memset(&op, 0, sizeof op);
    dlp_cost_params cp;
    dlp_cost_params_init(&cp);
    dlp_opt table[] = {
        {"system", 0, DLP_OPT_STR, &op.system, NULL, "ID[,ID...]", "catalog system(s) (dlperf catalog systems); several: a comparison", NULL, 0},
        {"profile", 0, DLP_OPT_STR, &op.profile, NULL, "FILE", "a machine profile (schema dlperf.profile/1) instead of a catalog system", NULL, 0},
        {"device", 0, DLP_OPT_STR, &op.device, NULL, "DEV", "cpu | cuda | sim:<gpu>[,scale=X,...] | <gpu> (default: the machine's)", NULL, 0},
        {"model", 0, DLP_OPT_STR, &op.model, "resnet50", "M", "resnet18|resnet34|resnet50|resnet101|resnet152", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &op.classes, "1000", NULL, "output classes", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &op.batch, "0", NULL, "batch per device (0: the published figure's batch; 256 GPU, 32 cpu)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &op.size, "224", NULL, "image size after crop (square)", NULL, 0},
        {"precision", 0, DLP_OPT_ENUM, &op.precision, "auto", NULL, DLP_CLI_PRECISION_HELP, dlp_prec_choices, 0},
        {"mode", 0, DLP_OPT_CHOICE, &op.mode, "train", NULL, "training or inference", "train|infer", 0},
        {"workers", 'w', DLP_OPT_INT, &op.workers, "0", NULL, "loader threads per device (0: the free hardware threads / devices)", NULL, 0},
        {"threads", 't', DLP_OPT_INT, &op.threads, "0", NULL, "compute threads of the cpu device (0: all cores)", NULL, 0},
        {"devices", 0, DLP_OPT_INT, &op.devices, "0", NULL, "devices per node (0: all the machine has)", NULL, 0},
        {"nodes", 0, DLP_OPT_INT, &op.nodes, "1", NULL, "nodes", NULL, 0},
        {"net-gbit", 0, DLP_OPT_DOUBLE, &op.net_gbit, "0", "GBIT", "link rate between nodes, Gbit/s (sets or replaces the profile's; docs/scale-out.md)", NULL, 0},
        {"net-latency-us", 0, DLP_OPT_DOUBLE, &op.net_latency_us, "0", "US", "fixed cost of one ring step between nodes", NULL, 0},
        {"net-bench", 0, DLP_OPT_STR, &op.net_bench, NULL, "FILE", "the link as `dlperf dist bench --json` measured it across hosts", NULL, 0},
        {"data", 0, DLP_OPT_STR, &op.data, NULL, "DIR", "measure the dataset's JPEG statistics from DIR (default: catalog ImageNet)", NULL, 0},
        {"dataset", 0, DLP_OPT_STR, &op.dataset, NULL, "ID", "catalog dataset (imagenet-train, imagenet-val)", NULL, 0},
        {"images", 0, DLP_OPT_I64, &op.images, "0", NULL, "images per epoch (0: the dataset's)", NULL, 0},
        {"pipeline", 0, DLP_OPT_STR, &op.pipeline, "dlperf", "ID", "input pipeline of a catalog system: dlperf|torchvision", NULL, 0},
        {"storage", 0, DLP_OPT_CHOICE, &op.storage, "auto", NULL, "page cache state (auto: warm if the dataset fits)", "auto|warm|cold", 0},
        {"read-limit", 0, DLP_OPT_SIZE, &op.read_limit, "0", NULL, "read-rate limit in bytes/s (e.g. 200M)", NULL, 0},
        {"epochs", 0, DLP_OPT_INT, &op.epochs, "90", NULL, "epochs for the total time and cost", NULL, 0},
        DLP_CLI_COST_ROWS(cp),
        {"price-usd", 0, DLP_OPT_DOUBLE, &op.price, "0", NULL, "machine price (sets or replaces the profile's)", NULL, 0},
        {"power-w", 0, DLP_OPT_DOUBLE, &op.power, "0", NULL, "machine power under load (sets or replaces)", NULL, 0},
        {"usd-per-hour", 0, DLP_OPT_DOUBLE, &op.usd_h, "0", NULL, "rent per node-hour (sets or replaces)", NULL, 0},
        {"seed", 0, DLP_OPT_INT, &op.seed, "1", NULL, "seed of the crop sampler in the expectations", NULL, 0},
        {"catalog", 0, DLP_OPT_STR, &op.catalog, NULL, "DIR", "catalog directory (default: found next to dlperf, or $DLPERF_CATALOG)", NULL, 0},
        {"stack", 0, DLP_OPT_STR, &op.stack, NULL, "NAME", "software stack the GPU is modelled with (dle-pytorch, dle-mxnet, lambda-pytorch, mlperf; default: the system's, else " DLP_GM_DEFAULT_STACK ")", NULL, 0},
        {"json", 0, DLP_OPT_STR, &op.json, NULL, "FILE", "write the result (schema dlperf.predict/1)", NULL, 0},
        {"speed", 0, DLP_OPT_STR, &op.speed, NULL, "GFLOPS|now", "also predict at this speed of the cores in GFLOP/s (the canary around a run: validate's speed x the profile's host.canary_gflops; now: measured here)", NULL, 0},
        {"measured", 0, DLP_OPT_DOUBLE, &op.measured, "0", NULL, "a run's img/s: its error against the prediction at the probed speed and at --speed", NULL, 0},
        {"cpu-share", 0, DLP_OPT_DOUBLE, &op.cpu_share, "0", "S", "also predict at this CPU share of a run's threads (0..1: dlperf train's run.cpu_share, validate's share column) against the probe's (host.cpu_share)", NULL, 0},
        {"omp-wait", 0, DLP_OPT_CHOICE, &op.omp_wait, "active", NULL, "with --cpu-share: the run's OpenMP wait policy (dlperf train's threads.omp_wait_policy; passive: linear in the share, the probe's share exponents left out)", "active|passive", 0},
        {"cpu-share-slowest", 0, DLP_OPT_DOUBLE, &op.cpu_share_slowest, "0", "S", "with --cpu-share: the share of the run's slowest busy thread (dlperf train's run.cpu_share_slowest): a multi-thread cpu compute step goes at it, against the probe's host.cpu_share_slowest", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(table, "usage: dlperf predict (--system ID[,ID...] | --profile FILE) [options]\n\n"
                                  "Predicts each stage's capacity, the throughput, the bottleneck, the data stall, epoch "
                                  "time and cost,\nand what would keep the device busy (docs/model.md).", argc, argv);
    if (st) return dlp_cli_fail(st);
    if (!op.system == !op.profile)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "predict: give --system ID (see dlperf catalog systems) or --profile FILE"));
    if (op.size < 32 || op.epochs < 1 || op.nodes < 1 || op.devices < 0 || op.workers < 0 || op.threads < 0 || op.batch < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "predict: --size >= 32, --epochs >= 1, --nodes >= 1 and non-negative "
                                    "--devices, --workers, --threads, --batch"));
    if (op.json && (st = dlp_check_new_output(op.json, "--json"))) return dlp_cli_fail(st);
    dlp_catalog *cat = NULL;
    st = dlp_catalog_load(op.catalog, &cat);
    if (st) return dlp_cli_fail(st);

    json_t *res = dlp_json_result_new("dlperf.predict/1", 0, NULL);
    json_object_set_new(res, "options", dlp_opts_to_json(table));
    json_object_set_new(res, "versions", dlp_versions_to_json());
    json_t *preds = json_array();
    json_object_set_new(res, "predictions", preds);

    char ids[1024];
    snprintf(ids, sizeof ids, "%s", op.system ? op.system : "");
    int nsys = 0;
    char *save = NULL;
    char *id = op.system ? strtok_r(ids, ",", &save) : NULL;
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *o = malloc(sizeof *o);
    dlp_device_profile *d = malloc(sizeof *d);
    if (!p || !o || !d) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    data_cache dcache = {0};
    int compare = op.system && strchr(op.system, ',') != NULL;
    dlp_net_link bench_link;  // --net-bench: read once for every system
    int bench_ranks;
    if (op.net_bench && st == DLP_OK) st = dlp_net_link_from_bench(op.net_bench, &bench_link, &bench_ranks);
    if (compare && st == DLP_OK) print_compare_header();
    while (st == DLP_OK && (op.profile || id)) {
        const char *stack;
        dlp_predict_machine_req mr = {op.profile, id, op.pipeline, op.stack, op.price, op.power, op.usd_h};
        st = dlp_predict_machine(cat, &mr, p, &stack);
        if (st) break;
        int plain = 1;
        char dev_stack[48] = "";
        st = dlp_predict_device(cat, p, op.device, op.device ? op.stack : NULL, d, &plain, dev_stack, sizeof dev_stack);
        if (dev_stack[0]) stack = dev_stack;
        if (st) break;
        dlp_workload w;
        st = build_workload(&op, table, cat, p, d, &dcache, &w);
        if (st) break;
        if (strcmp(d->source, "catalog") == 0 && w.task == DLP_TASK_TRAIN) {  // the stack's loss per added GPU
            dlp_gm_stack stk;
            st = dlp_gm_stack_get(cat, stack, &stk);
            if (st) break;
            w.step_loss_per_device = stk.loss;
        }
        if (op.net_bench) {  // the measured link (each bucket at its size's time), or what --net-gbit/-latency-us say
            p->net.nic_bytes_per_s = bench_link.bytes_per_s;
            w.net_latency_s = bench_link.latency_s;
            if (!(op.net_gbit > 0) && !(op.net_latency_us > 0)) w.net_link = &bench_link;
        }
        if (op.net_gbit > 0) p->net.nic_bytes_per_s = op.net_gbit * 1e9 / 8;
        if (op.net_latency_us > 0) w.net_latency_s = op.net_latency_us * 1e-6;
        st = dlp_predict(p, d, &w, o);
        if (st) break;
        dlp_cost cost;
        st = dlp_cost_compute(&p->cost, &cp, o->nodes, o->cluster_img_per_s, o->epoch_s, o->total_s, &cost);
        if (st) break;
        json_t *e = dlp_predict_entry_json(op.profile ? op.profile : "catalog", p, d, &w);
        json_t *pub = json_array();
        if (compare) {
            print_compare_row(p, d, o, &cost);
        } else {
            print_prediction(cat, p, d, &w, o, &cost, plain, stack, pub, e);
            if (op.profile) st = print_speed_band(&op, p, d, &w, o, e);
        }
        json_object_set_new(e, "prediction", dlp_prediction_to_json(o));
        json_object_set_new(e, "cost", dlp_cost_to_json(&cost));
        json_object_set_new(e, "published", pub);
        json_array_append_new(preds, e);
        nsys++;
        if (op.profile) break;
        id = strtok_r(NULL, ",", &save);
    }
    if (compare && st == DLP_OK) print_compare_footer(preds, &cp);
    if (st == DLP_OK && op.json) st = dlp_json_write(res, op.json, DLP_WRITE_NOCLOBBER);
    json_decref(res);
    free(p);
    free(o);
    free(d);
    dlp_catalog_free(cat);
    (void)nsys;
    return dlp_cli_fail(st);
}
