// hw/derive: device and machine profiles from the catalog; sim specs.
#include "hw/derive.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fs.h"
#include "hw/gpumodel.h"
#include "hw/work.h"

// Per-image and fixed times from a published throughput: batch / img_per_s = t0 + update + batch x per_image.
static void calibrate(dlp_rate *r, double img_per_s, int batch, double t0, double update) {
    r->batch_ref = batch;
    if (batch <= 0) {  // batch not stated: a throughput only
        r->t0_s = 0;
        r->update_s = 0;
        r->per_image_s = 1.0 / img_per_s;
        return;
    }
    double step = batch / img_per_s;
    double fixed = t0 + update;
    if (fixed > 0.5 * step) {  // small published batches: keep at least half the step proportional to the batch
        t0 *= 0.5 * step / fixed;
        update *= 0.5 * step / fixed;
    }
    r->t0_s = t0;
    r->update_s = update;
    r->per_image_s = (step - t0 - update) / batch;
}

static const char *short_src(const dlp_published *p) { return p->src ? p->src->id : "?"; }

// A training row from the GPU's datasheet and the stack's fitted efficiencies (hw/gpumodel); no published figure of
// this GPU is used. 0 when the GPU has no rate at prec.
static int add_train_rate(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *stk, dlp_rate *r, double *fwd_frac) {
    dlp_gm_step st;
    if (dlp_gpu_peak(g, prec) <= 0 || dlp_gm_step_compute(g, prec, stk, &st) != DLP_OK) {
        dlp_err_clear();
        return 0;
    }
    memset(r, 0, sizeof *r);
    r->task = DLP_TASK_TRAIN;
    r->prec = prec;
    r->batch_ref = DLP_GM_DEFAULT_BATCH;
    r->t0_s = st.kernel_s;
    r->per_image_s = st.fwd_s + st.bwd_s;
    r->update_s = st.update_s;
    r->estimate = 1;
    if (fwd_frac && st.fwd_s + st.bwd_s > 0) *fwd_frac = st.fwd_s / (st.fwd_s + st.bwd_s);
    snprintf(r->basis, sizeof r->basis, "model: %s datasheet x stack %s (fitted on %d records of %d GPUs%s): %.0f img/s "
             "at batch %d", g->id, stk->name, stk->nrecords, stk->ngpus, stk->scaled ? ", scaled prior" : "",
             DLP_GM_DEFAULT_BATCH / dlp_gm_step_time(&st, DLP_GM_DEFAULT_BATCH), DLP_GM_DEFAULT_BATCH);
    return 1;
}

static int add_infer_rate(const dlp_catalog *c, const dlp_gpu_spec *g, dlp_prec prec, const dlp_device_profile *d,
                          dlp_rate *r) {
    if (dlp_gpu_peak(g, prec) <= 0) return 0;
    memset(r, 0, sizeof *r);
    r->task = DLP_TASK_INFER;
    r->prec = prec;
    const dlp_published *p = dlp_catalog_primary(c, g, DLP_TASK_INFER, prec);
    if (!p && prec == DLP_PREC_BF16) p = dlp_catalog_primary(c, g, DLP_TASK_INFER, DLP_PREC_FP16);
    if (p) {
        calibrate(r, p->img_per_s, p->batch, DLP_GPU_T0_INFER_S, 0);
        r->estimate = p->estimate || p->prec != prec;
        snprintf(r->basis, sizeof r->basis, "%s: %.0f img/s at batch %d, %s [%s]%s",
                 r->estimate ? "estimate" : "published", p->img_per_s, p->batch, p->framework, short_src(p),
                 p->prec != prec ? " (the fp16 figure)" : "");
        return 1;
    }
    if (prec == DLP_PREC_INT8) return 0;
    // Forward-only throughput from the training row at the same precision: 2.8x for tensor-core precisions,
    // 3.4x for strict fp32 (V100 PyTorch: 3382/1200 and 1261/367; A100 MXNet: 6120/2180).
    const dlp_rate *t = dlp_device_find_rate(d, DLP_TASK_TRAIN, prec, 0);
    if (!t) return 0;
    double k = prec == DLP_PREC_FP32 ? 3.4 : 2.8;
    int b = t->batch_ref > 0 ? t->batch_ref : 256;
    double train_rate = b / (t->t0_s + t->update_s + b * t->per_image_s);
    calibrate(r, train_rate * k, b, DLP_GPU_T0_INFER_S, 0);
    r->estimate = 1;
    snprintf(r->basis, sizeof r->basis, "estimate: %.1f x the %s training rate (%.0f img/s) = %.0f img/s "
             "[est-derive-precision]", k, dlp_prec_name(prec), train_rate, train_rate * k);
    return 1;
}

dlp_status dlp_derive_gpu_stack(const dlp_catalog *c, const dlp_gpu_spec *g, const char *stack, dlp_device_profile *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", g->id);
    d->kind = DLP_DEVICE_GPU;
    snprintf(d->source, sizeof d->source, "catalog");
    d->fwd_fraction = 1.0 / 3.0;
    double link = dlp_pcie_bytes_per_s(g->pcie_gen, g->pcie_lanes);
    d->h2d_bytes_per_s = DLP_H2D_EFFICIENCY * link;
    d->h2d_pageable_bytes_per_s = 0.5 * d->h2d_bytes_per_s;
    d->h2d_overlap = 1;
    d->contention_efficiency = 1;
    d->mem_bytes = g->memory_gb * 1e9;
    d->power_w = g->board_power_w;
    d->price_usd = g->price_usd;
    dlp_gm_stack stk;
    DLP_CHECK(dlp_gm_stack_get(c, stack && stack[0] ? stack : DLP_GM_DEFAULT_STACK, &stk));
    static const dlp_prec k_train[] = {DLP_PREC_FP32, DLP_PREC_TF32, DLP_PREC_BF16, DLP_PREC_FP16};
    for (size_t i = 0; i < sizeof k_train / sizeof k_train[0]; i++)
        if (add_train_rate(g, k_train[i], &stk, &d->rates[d->nrates], k_train[i] == DLP_PREC_FP16 ? &d->fwd_fraction : NULL))
            d->nrates++;
    static const dlp_prec k_infer[] = {DLP_PREC_FP32, DLP_PREC_TF32, DLP_PREC_BF16, DLP_PREC_FP16, DLP_PREC_INT8};
    for (size_t i = 0; i < sizeof k_infer / sizeof k_infer[0]; i++)
        if (add_infer_rate(c, g, k_infer[i], d, &d->rates[d->nrates])) d->nrates++;
    if (d->nrates == 0)
        return DLP_ERR(DLP_ERR_NOTFOUND, "GPU %s: no rate on its datasheet (%s/gpus.json) to model ResNet-50 with", g->id,
                       c->dir);
    return dlp_device_validate(d, g->id);
}

dlp_status dlp_derive_gpu(const dlp_catalog *c, const dlp_gpu_spec *g, dlp_device_profile *d) {
    return dlp_derive_gpu_stack(c, g, NULL, d);
}

dlp_status dlp_derive_gpu_measured(const dlp_catalog *c, const dlp_gpu_spec *g, const char *file,
                                   dlp_device_profile *out, int *found) {
    *found = 0;
    char path[1024] = "";
    if (file && file[0]) {
        snprintf(path, sizeof path, "%s", file);
    } else {
        const char *env = getenv("DLPERF_PROFILES");
        if (env && env[0]) {
            snprintf(path, sizeof path, "%s/%s.json", env, g->id);
            if (!dlp_path_exists(path)) path[0] = '\0';
        }
        if (!path[0] && c) {
            snprintf(path, sizeof path, "%s/profiles/%s.json", c->dir, g->id);
            if (!dlp_path_exists(path)) path[0] = '\0';
        }
        if (!path[0]) return DLP_OK;
    }
    dlp_profile *p = malloc(sizeof *p);
    DLP_TRY_ALLOC(p);
    dlp_status st = dlp_profile_read(path, p);
    if (st == DLP_OK) {
        const dlp_device_profile *d = dlp_profile_find_device(p, g->id);
        int ngpu = 0;
        for (int i = 0; i < p->ndevices && !d; i++) ngpu += p->devices[i].kind == DLP_DEVICE_GPU;
        if (!d && ngpu == 1)
            for (int i = 0; i < p->ndevices; i++)
                if (p->devices[i].kind == DLP_DEVICE_GPU) d = &p->devices[i];
        if (!d) {
            st = DLP_ERR(DLP_ERR_NOTFOUND, "%s: no GPU device named %s (and not exactly one GPU device)", path, g->id);
        } else {
            *out = *d;
            snprintf(out->source, sizeof out->source, "measured");
            *found = 1;
        }
    }
    free(p);
    return st;
}

dlp_status dlp_derive_system(const dlp_catalog *c, const dlp_system_spec *s, const char *pipeline, dlp_profile *p) {
    return dlp_derive_system_stack(c, s, pipeline, NULL, p);
}

dlp_status dlp_derive_system_stack(const dlp_catalog *c, const dlp_system_spec *s, const char *pipeline, const char *stack,
                                   dlp_profile *p) {
    dlp_profile_init(p);
    snprintf(p->source, sizeof p->source, "catalog");
    snprintf(p->id, sizeof p->id, "%s", s->id);
    snprintf(p->name, sizeof p->name, "%s", s->name);
    const dlp_cpu_spec *cpu = s->cpu;
    dlp_host_profile *h = &p->host;
    if (s->sockets > 1) snprintf(h->cpu_model, sizeof h->cpu_model, "%dx %s", s->sockets, cpu->name);
    else snprintf(h->cpu_model, sizeof h->cpu_model, "%s", cpu->name);
    h->cores = cpu->cores * s->sockets;
    h->threads = cpu->threads * s->sockets;
    h->smt_yield = cpu->smt_yield;
    h->core_speed_rel = cpu->core_speed_rel;
    h->mhz = cpu->allcore_ghz * 1000;
    h->mem_bytes = s->ram_gb * 1e9;
    h->mem_bw_bytes_per_s = 0.7 * cpu->mem_bw_gb_s * 1e9 * s->sockets;  // est-mem-bw
    snprintf(p->storage.desc, sizeof p->storage.desc, "%s", s->storage_desc);
    p->storage.cold_read_bytes_per_s = s->storage_read_gb_s * 1e9;
    p->storage.cold_stream_bytes_per_s = s->storage_stream_gb_s * 1e9;
    p->storage.cold_latency_s = s->storage_latency_us * 1e-6;
    p->storage.page_cache_bytes = 0.8 * s->ram_gb * 1e9;  // what the training processes leave to the page cache
    const dlp_catalog_pipeline *cp = dlp_catalog_pipeline_find(c, pipeline ? pipeline : "dlperf");
    if (!cp) return dlp_err_trace(DLP_ERR_NOTFOUND, __FILE__, __LINE__, "dlp_catalog_pipeline_find");
    p->pipeline = cp->prof;
    double k = 1.0 / cpu->core_speed_rel;  // the catalog's coefficients are for the development core
    dlp_pipeline_profile *pp = &p->pipeline;
    pp->read_per_file_s *= k;
    pp->read_per_byte_s *= k;
    pp->decode_per_image_s *= k;
    pp->decode_per_pixel_s *= k;
    pp->decode_per_byte_s *= k;
    pp->augment_per_image_s *= k;
    pp->augment_per_in_pixel_s *= k;
    pp->augment_per_out_pixel_s *= k;
    p->devices_per_node = s->gpus;
    int found = 0;
    DLP_CHECK(dlp_derive_gpu_measured(c, s->gpu, NULL, &p->devices[0], &found));
    if (!found) DLP_CHECK(dlp_derive_gpu_stack(c, s->gpu, stack && stack[0] ? stack : dlp_gm_stack_default(s), &p->devices[0]));
    p->ndevices = 1;
    p->net.pcie_uplink_bytes_per_s = DLP_H2D_EFFICIENCY * dlp_pcie_bytes_per_s(s->pcie_uplink_gen, 16);
    p->net.gpus_per_uplink = s->pcie_gpus_per_uplink;
    p->net.allreduce_busbw_bytes_per_s = s->allreduce_busbw_gb_s * 1e9;
    p->net.nic_bytes_per_s = s->nic_gb_s * 1e9;
    p->cost.price_usd = s->price_usd;
    p->cost.price_year = s->price_year;
    p->cost.power_w = s->power_w;
    p->cost.usd_per_hour = s->usd_per_hour;
    p->cost.usd_per_hour_alt = s->usd_per_hour_alt;
    snprintf(p->notes, sizeof p->notes, "derived from the catalog (%s); pipeline '%s' at %.2fx the development core's speed",
             c->dir, cp->id, cpu->core_speed_rel);
    return dlp_profile_validate(p, s->id);
}

// --- sim specs -----------------------------------------------------------------------------------------------------------

static dlp_status parse_pos(const char *key, const char *v, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x > 0) || !isfinite(x))
        return DLP_ERR(DLP_ERR_INVALID, "sim option %s=%s: needs a number > 0", key, v);
    *out = x;
    return DLP_OK;
}

dlp_status dlp_sim_spec_parse(const char *arg, dlp_sim_spec *s) {
    memset(s, 0, sizeof *s);
    s->scale = 1;
    s->t0_s = -1;
    s->overlap = -1;
    if (!arg || !arg[0])
        return DLP_ERR(DLP_ERR_INVALID, "sim device needs a GPU: sim:<gpu>[,options], e.g. sim:a100 or sim:custom,img_per_s=500");
    char buf[512];
    if (strlen(arg) >= sizeof buf) return DLP_ERR(DLP_ERR_INVALID, "sim device argument is too long");
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok || strchr(tok, '='))
        return DLP_ERR(DLP_ERR_INVALID, "sim:%s: the first item must be a GPU name (e.g. sim:a100,scale=0.1)", arg);
    if (strlen(tok) >= sizeof s->gpu) return DLP_ERR(DLP_ERR_INVALID, "sim:%s: GPU name too long", arg);
    snprintf(s->gpu, sizeof s->gpu, "%s", tok);
    while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq) return DLP_ERR(DLP_ERR_INVALID, "sim:%s: option '%s' is not key=value", arg, tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double x;
        if (strcmp(k, "scale") == 0) {
            DLP_CHECK(parse_pos(k, v, &s->scale));
        } else if (strcmp(k, "img_per_s") == 0) {
            DLP_CHECK(parse_pos(k, v, &s->img_per_s));
        } else if (strcmp(k, "t0_ms") == 0) {
            char *end;
            x = strtod(v, &end);
            if (end == v || *end || !(x >= 0) || !isfinite(x))
                return DLP_ERR(DLP_ERR_INVALID, "sim option t0_ms=%s: needs a number >= 0", v);
            s->t0_s = x * 1e-3;
        } else if (strcmp(k, "pcie_gbps") == 0) {
            DLP_CHECK(parse_pos(k, v, &x));
            s->pcie_bytes_per_s = x * 1e9;
        } else if (strcmp(k, "overlap") == 0) {
            if (strcmp(v, "0") && strcmp(v, "1")) return DLP_ERR(DLP_ERR_INVALID, "sim option overlap=%s: 0 or 1", v);
            s->overlap = v[0] - '0';
        } else if (strcmp(k, "stack") == 0) {
            if (!v[0] || strlen(v) >= sizeof s->stack) return DLP_ERR(DLP_ERR_INVALID, "sim option stack= needs a stack name");
            snprintf(s->stack, sizeof s->stack, "%s", v);
        } else if (strcmp(k, "profile") == 0) {
            if (!v[0] || strlen(v) >= sizeof s->profile) return DLP_ERR(DLP_ERR_INVALID, "sim option profile= needs a file name");
            snprintf(s->profile, sizeof s->profile, "%s", v);
        } else {
            return DLP_ERR(DLP_ERR_INVALID, "sim:%s: unknown option '%s' (scale, img_per_s, t0_ms, pcie_gbps, overlap, profile, stack)",
                           arg, k);
        }
    }
    int custom = strcasecmp(s->gpu, "custom") == 0;
    if (custom && s->img_per_s == 0)
        return DLP_ERR(DLP_ERR_INVALID, "sim:custom needs img_per_s=N (training images/s for ResNet-50 at 224x224)");
    if (!custom && s->img_per_s > 0)
        return DLP_ERR(DLP_ERR_INVALID, "sim:%s: img_per_s applies to sim:custom only (use scale=X to speed up or slow down %s)",
                       arg, s->gpu);
    if (custom && s->profile[0]) return DLP_ERR(DLP_ERR_INVALID, "sim:custom does not take profile=");
    return DLP_OK;
}

dlp_status dlp_sim_device(const dlp_sim_spec *s, const dlp_catalog *c, dlp_device_profile *d) {
    memset(d, 0, sizeof *d);
    if (strcasecmp(s->gpu, "custom") == 0) {
        snprintf(d->name, sizeof d->name, "custom");
        d->kind = DLP_DEVICE_GPU;
        snprintf(d->source, sizeof d->source, "custom");
        d->fwd_fraction = 1.0 / 3.0;
        d->h2d_overlap = 1;
        d->contention_efficiency = 1;
        for (int p = DLP_PREC_FP32; p <= DLP_PREC_FP16; p++)
            for (int t = 0; t < 2; t++) {
                dlp_rate *r = &d->rates[d->nrates++];
                r->task = t ? DLP_TASK_INFER : DLP_TASK_TRAIN;
                r->prec = (dlp_prec)p;
                r->per_image_s = (t ? d->fwd_fraction : 1.0) / s->img_per_s;
                snprintf(r->basis, sizeof r->basis, "sim:custom img_per_s=%g", s->img_per_s);
            }
    } else {
        if (!c) return DLP_ERR(DLP_ERR_INVALID, "sim:%s needs the catalog", s->gpu);
        const dlp_gpu_spec *g = dlp_catalog_gpu(c, s->gpu);
        if (!g) return dlp_err_trace(DLP_ERR_NOTFOUND, __FILE__, __LINE__, "dlp_catalog_gpu");
        int found = 0;
        DLP_CHECK(dlp_derive_gpu_measured(c, g, s->profile[0] ? s->profile : NULL, d, &found));
        if (!found) DLP_CHECK(dlp_derive_gpu_stack(c, g, s->stack, d));
    }
    for (int i = 0; i < d->nrates; i++) {
        dlp_rate *r = &d->rates[i];
        if (s->t0_s >= 0) r->t0_s = r->task == DLP_TASK_TRAIN ? s->t0_s : s->t0_s * d->fwd_fraction;
        if (s->scale != 1) {
            r->t0_s /= s->scale;
            r->per_image_s /= s->scale;
            r->update_s /= s->scale;
            size_t n = strlen(r->basis);
            if (n + 24 < sizeof r->basis) snprintf(r->basis + n, sizeof r->basis - n, "; sim scale=%g", s->scale);
        }
    }
    if (s->pcie_bytes_per_s > 0) {
        d->h2d_bytes_per_s = s->pcie_bytes_per_s;
        d->h2d_pageable_bytes_per_s = 0.5 * s->pcie_bytes_per_s;
    }
    if (s->overlap >= 0) d->h2d_overlap = s->overlap;
    return dlp_device_validate(d, s->gpu);
}
