// perf/probe_infer: the cpu device's inference rows — the online phase's step time in fp32, bf16 (where the CPU has
// it) and int8 (oneDNN's int8 convolutions, the plan `dlperf infer --precision int8` runs), on random tensors: per
// precision the median inference call (input + forward, BN folded) at a few batch sizes and the line
// t_fwd(b) = t0 + b x t_img, stored as task "infer" rows of the cpu device (per image of reference work, like the
// training rows of probe_compute.c). `predict --mode infer` reads them; int8 is an inference precision only.
// int8's activation ranges are calibrated on a few synthetic images (random normal tensors through the fp32 plan
// with nn/quant's observer): the speed of an int8 plan does not depend on its ranges' values, only its answers do.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "core/stats.h"
#include "hw/cpushare.h"
#include "hw/host.h"
#include "hw/work.h"
#include "nn/quant.h"
#include "perf/probe_fit.h"
#include "perf/probe_impl.h"
#include "run/infer.h"
#include "run/step.h"

#define CALIB_IMAGES 8

// int8 activation ranges for m from CALIB_IMAGES random tensors through an fp32 plan with the observer.
static dlp_status calibrate_synthetic(dlp_infer_model *m, int threads, uint64_t seed) {
    dlp_calib *cal = NULL;
    DLP_CHECK(dlp_calib_create(&m->net, DLP_CALIB_PERCENTILE, 99.99, &cal));
    dlp_infer_engine e;
    const dlp_infer_engine_cfg ec = {.device = "cpu", .batch = CALIB_IMAGES, .precision = DLP_DTYPE_F32,
                                     .threads = threads, .observe = dlp_calib_observe, .observe_ctx = cal};
    dlp_status st = dlp_infer_engine_create(m, &ec, &e);
    if (st) {
        dlp_calib_free(cal);
        return st;
    }
    void *in = malloc(e.sample_bytes * CALIB_IMAGES);
    float *logits = malloc(sizeof(float) * (size_t)CALIB_IMAGES * (size_t)e.num_classes);
    if (!in || !logits) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the calibration batch");
    if (!st) {
        dlp_rng r;
        dlp_rng_init(&r, seed, 91);
        dlp_step_fill_random(in, (int64_t)(e.sample_bytes / dlp_dtype_size(e.in_dtype)) * CALIB_IMAGES, e.in_dtype, &r);
        st = dlp_infer_engine_run(&e, in, CALIB_IMAGES, logits);
    }
    if (!st) st = dlp_calib_finish(cal, CALIB_IMAGES,
                                   dlp_quant_weights_hash(m->params, m->net.param_count, m->bufs, m->net.buf_count),
                                   &m->quant);
    if (!st) snprintf(m->quant_src, sizeof m->quant_src, "calibrated on %d synthetic images (random tensors)", CALIB_IMAGES);
    free(in);
    free(logits);
    dlp_infer_engine_free(&e);
    dlp_calib_free(cal);
    return st;
}

// One batch point: the median inference call (input + forward) of an inference plan at `batch`, through run/step's
// harness with each phase waited for; *cores_busy: process CPU / wall over the timed calls.
static dlp_status time_point(dlp_probe_ctx *c, const dlp_infer_model *m, dlp_dtype dt, int batch, int threads,
                             double *call_s, double *cores_busy, int *calls) {
    const int quick = c->cfg->quick;
    dlp_infer_engine e;
    DLP_CHECK(dlp_infer_engine_create(m, &(dlp_infer_engine_cfg){.device = "cpu", .batch = batch, .precision = dt,
                                                                 .threads = threads}, &e));
    dlp_status st = DLP_OK;
    void *in = malloc(e.sample_bytes * (size_t)batch);
    if (!in) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the input batch");
    if (!st) {
        dlp_rng r;
        dlp_rng_init(&r, c->cfg->seed, 78);
        dlp_step_fill_random(in, (int64_t)(e.sample_bytes / dlp_dtype_size(e.in_dtype)) * batch, e.in_dtype, &r);
        const dlp_step_cfg sc = {.plan = e.plan, .train = 0, .sync_phases = 1};
        const dlp_step_batch sb = {.input = in, .n = batch};
        const dlp_step_bench_cfg bc = {.warmup = 1, .min_steps = quick ? 2 : 3, .max_steps = 64, .min_s = quick ? 0.5 : 1.5};
        dlp_step_bench_result br;
        st = dlp_step_bench(&sc, &sb, &bc, &br);
        if (!st) {
            double t[64];
            const int W = DLP_STEP_NPHASES + 1;
            for (int i = 0; i < br.steps; i++)
                t[i] = (br.ms[(size_t)i * W + DLP_STEP_INPUT] + br.ms[(size_t)i * W + DLP_STEP_FORWARD]) * 1e-3;
            *call_s = dlp_stats_median_f64(t, br.steps);
            *cores_busy = br.wall_s > 0 ? br.cpu_s / br.wall_s : 0;
            *calls = br.steps;
            dlp_step_bench_free(&br);
        }
    }
    free(in);
    dlp_infer_engine_free(&e);
    return st;
}

static const char *const k_line_names[] = {"t0_s", "s_per_image"};

// The row of one precision: the canary before, between and after the batch points; each point at the row's speed
// (by the CPU share its threads got where measured, else the canary around it); the line; the row normalised with
// the training rows at the end of the probe.
static dlp_status infer_row(dlp_probe_ctx *c, dlp_device_profile *dev, const dlp_infer_model *m, const char *model,
                            int size, dlp_dtype dt, int threads, json_t *out_rows) {
    static const int batches[] = {8, 32};
    enum { NB = 2 };
    dlp_model_work mw;
    DLP_CHECK(dlp_work_resnet(model, size, size, 1000, &mw));
    const double r = dlp_work_ratio(&mw);
    double y[NB], busy[NB], spd[NB + 1], call_s[NB];
    int calls[NB];
    dlp_cpushare_sample sh[NB];
    const dlp_backend *cpu = dlp_backend_find("cpu", NULL);
    double wspd[NB + 1];
    spd[0] = dlp_probe_speed(c, threads);
    wspd[0] = dlp_probe_work(c, cpu, dt, threads);
    for (int i = 0; i < NB; i++) {
        dlp_cpushare *meter = dlp_cpushare_start(0);
        dlp_status st = time_point(c, m, dt, batches[i], threads, &call_s[i], &busy[i], &calls[i]);
        dlp_cpushare_stop(meter, &sh[i]);
        DLP_CHECK(st);
        spd[i + 1] = dlp_probe_speed(c, threads);
        wspd[i + 1] = dlp_probe_work(c, cpu, dt, threads);
    }
    const double row_work = dlp_probe_work_median(wspd, NB + 1), row_work_spread = dlp_probe_work_spread(wspd, NB + 1);
    const double row_speed = dlp_probe_speed_mean(spd, NB + 1), spread = dlp_probe_speed_spread(spd, NB + 1);
    double sh_cpu = 0, sh_wait = 0;
    int nsh = 0;
    for (int i = 0; i < NB; i++)
        if (sh[i].share > 0) sh_cpu += sh[i].cpu_s, sh_wait += sh[i].wait_s, nsh++;
    const double row_share = nsh == NB && sh_cpu > 0 ? sh_cpu / (sh_cpu + sh_wait) : 0;
    json_t *pts = json_array();
    for (int i = 0; i < NB; i++) {
        const double k = row_share > 0 ? sh[i].share / row_share
                         : row_speed > 0 && spd[i] > 0 ? 0.5 * (spd[i] + spd[i + 1]) / row_speed : 1;
        y[i] = call_s[i] * k;
        json_array_append_new(pts, json_pack("{s:i, s:f, s:f, s:i, s:f, s:f, s:f}", "batch", batches[i], "call_s",
                                             call_s[i], "cores_busy", busy[i], "calls", calls[i], "speed_gflops",
                                             0.5 * (spd[i] + spd[i + 1]), "cpu_share", sh[i].share, "at_row_speed_k", k));
        dlp_probe_say(c, "inference: cpu %s %dpx %s, %d thread(s), batch %d: %.1f ms per call (%.1f img/s), %.2f cores "
                      "busy", model, size, dlp_dtype_name(dt), threads, batches[i], call_s[i] * 1e3,
                      batches[i] / call_s[i], busy[i]);
    }
    dlp_lsq_fit f;
    double t0, per_image;
    DLP_CHECK(dlp_probe_fit_step(batches, y, NB, r, &t0, &per_image, &f));
    dlp_rate *row = dlp_probe_row_new(dev, DLP_TASK_INFER, dt == DLP_DTYPE_I8 ? DLP_PREC_INT8 : dlp_prec_from_dtype(dt, 0),
                                      threads, batches[NB - 1], model, size, t0, per_image,
                                      dlp_stats_median_f64(busy, NB));
    if (!row) {
        json_decref(pts);
        return DLP_ERR(DLP_ERR_INVALID, "probe: too many rows for %s", dev->name);
    }
    snprintf(row->basis, sizeof row->basis, "dlperf probe: cpu backend inference plan, %s %dpx %s, batches %d..%d, %d "
             "thread(s): %.2f ms + %.3f ms/img%s", model, size, dlp_dtype_name(dt), batches[0], batches[NB - 1], threads,
             t0 * 1e3, per_image * r * 1e3, dt == DLP_DTYPE_I8 ? " (calibrated on synthetic images)" : "");
    const char *pn = dlp_dtype_name(dt);
    dlp_probe_norm_add(c, &row->t0_s, 0, row_speed, row_share, threads, spread, 1, NULL, "infer cpu %s %dpx %s %dt t0",
                       model, size, pn, threads);
    dlp_probe_norm_work(c, dlp_probe_work_kind(dt), row_work, &row->work_gflops);
    dlp_probe_norm_work_spread(c, row_work_spread);
    dlp_probe_norm_add(c, &row->per_image_s, 0, row_speed, row_share, threads, spread, 1, &row->speed_rel,
                       "infer cpu %s %dpx %s %dt per_image", model, size, pn, threads);
    dlp_probe_norm_work(c, dlp_probe_work_kind(dt), row_work, &row->work_gflops);
    dlp_probe_norm_work_spread(c, row_work_spread);
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "size", json_integer(size));
    json_object_set_new(o, "precision", json_string(dlp_prec_name(row->prec)));
    json_object_set_new(o, "threads", json_integer(threads));
    json_object_set_new(o, "work_ratio", json_real(r));
    json_object_set_new(o, "points", pts);
    json_object_set_new(o, "speed_spread", json_real(spread));
    json_object_set_new(o, "cpu_share", json_real(row_share));
    json_object_set_new(o, "work_gflops_per_cpu_s", json_real(row_work));
    json_object_set_new(o, "fit", dlp_probe_fit_json(&f, k_line_names));
    json_array_append_new(out_rows, o);
    return DLP_OK;
}

// The first item of a "a,b,c" list (or def) into out.
static void first_item(const char *list, const char *def, char *out, size_t len) {
    const char *s = list && *list ? list : def;
    const size_t n = strcspn(s, ",");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), s);
}

dlp_status dlp_probe_infer_rows(dlp_probe_ctx *c) {
    // The online phase's workload people price (ResNet-50 at 224 px) in a full probe; else the first --models at
    // the first --sizes (--quick: ResNet-18 at 64 px), as the bf16 training row.
    const int dflt = !c->cfg->models && !c->cfg->sizes && !c->cfg->quick;
    char model[32], size_s[16];
    first_item(dflt ? "resnet50" : c->cfg->models, "resnet18", model, sizeof model);
    first_item(dflt ? "224" : c->cfg->sizes, "64", size_s, sizeof size_s);
    const int size = atoi(size_s);
    dlp_device_profile *dev = NULL;
    for (int i = 0; i < c->p->ndevices; i++)
        if (strcmp(c->p->devices[i].name, "cpu") == 0) dev = &c->p->devices[i];
    if (!dev) return DLP_OK;  // the cpu backend was not measured (not built, or not asked for)
    dlp_host_info h;
    dlp_host_probe(&h);
    dlp_infer_model m;
    DLP_CHECK(dlp_infer_model_load(&(dlp_infer_model_cfg){.model = model, .size = size, .seed = c->cfg->seed}, &m));
    json_t *rows = json_array();
    json_object_set_new(c->details, "inference", rows);
    dlp_dtype precs[3];
    int np = 0;
    precs[np++] = DLP_DTYPE_F32;
    if (h.avx512_bf16 || h.amx_bf16) precs[np++] = DLP_DTYPE_BF16;
    precs[np++] = DLP_DTYPE_I8;
    dlp_status st = DLP_OK;
    for (int i = 0; i < np && st == DLP_OK; i++) {
        if (precs[i] == DLP_DTYPE_I8 && (st = calibrate_synthetic(&m, c->threads, c->cfg->seed)) != DLP_OK) {
            // a build or CPU without oneDNN's int8 convolutions: the profile says so by having no int8 row
            dlp_probe_say(c, "inference: no int8 rows (%s)", dlp_err_msg());
            dlp_err_clear();
            st = DLP_OK;
            break;
        }
        st = infer_row(c, dev, &m, model, size, precs[i], c->threads, rows);
    }
    dlp_infer_model_free(&m);
    return st;
}
