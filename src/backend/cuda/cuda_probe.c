// backend/cuda/cuda_probe: the measurements behind a GPU profile — host-to-device bandwidth from pinned and pageable
// memory, events on a plan's stream (the step probe, perf/probe_steps_cuda.c, times with them) — and the profile's JSON.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_host.h"
#include "backend/cuda/cuda_util.h"
#include "core/stats.h"
#include "core/json.h"
#include "core/log.h"
#include "core/clock.h"
#include "core/rng.h"
#include "hw/derive.h"

static double quantile(double *v, int n, double q) { return n > 0 ? dlp_stats_quantile_f64(v, (size_t)n, q) : 0; }

dlp_status dlp_cuda_probe_h2d(int device, const int64_t *bytes, int n, int repeats, dlp_cuda_h2d_point *out) {
    int ndev = 0;
    DLP_CHECK(dlp_cuda_no_device(&ndev));
    DLP_CU(cudaSetDevice(device));
    if (n <= 0) return DLP_OK;
    if (repeats < 1) repeats = 1;
    int64_t maxb = 0;
    for (int i = 0; i < n; i++)
        if (bytes[i] > maxb) maxb = bytes[i];
    void *pinned = NULL, *pageable = NULL, *dev = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t a = NULL, b = NULL;
    double *h2d = malloc((size_t)repeats * sizeof *h2d), *d2h = malloc((size_t)repeats * sizeof *d2h);
    dlp_status st = DLP_OK;
    if (!h2d || !d2h) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        goto out;
    }
    DLP_CU_GOTO(st, cudaHostAlloc(&pinned, (size_t)maxb, 0), out);
    pageable = malloc((size_t)maxb);
    if (!pageable) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory allocating %lld pageable bytes", (long long)maxb);
        goto out;
    }
    memset(pageable, 1, (size_t)maxb);  // touch every page
    memset(pinned, 1, (size_t)maxb);
    DLP_CU_GOTO(st, cudaMalloc(&dev, (size_t)maxb), out);
    DLP_CU_GOTO(st, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), out);
    DLP_CU_GOTO(st, cudaEventCreate(&a), out);
    DLP_CU_GOTO(st, cudaEventCreate(&b), out);
    for (int kind = 0; kind < 2; kind++) {  // 0 pinned, 1 pageable
        void *host = kind == 0 ? pinned : pageable;
        for (int i = 0; i < n; i++) {
            dlp_cuda_h2d_point *pt = &out[kind * n + i];
            memset(pt, 0, sizeof *pt);
            pt->bytes = bytes[i];
            pt->pinned = kind == 0;
            for (int r = -2; r < repeats; r++) {  // two warm-up copies each way
                float ms1 = 0, ms2 = 0;
                DLP_CU_GOTO(st, cudaEventRecord(a, s), out);
                DLP_CU_GOTO(st, cudaMemcpyAsync(dev, host, (size_t)bytes[i], cudaMemcpyHostToDevice, s), out);
                DLP_CU_GOTO(st, cudaEventRecord(b, s), out);
                DLP_CU_GOTO(st, cudaEventSynchronize(b), out);
                DLP_CU_GOTO(st, cudaEventElapsedTime(&ms1, a, b), out);
                DLP_CU_GOTO(st, cudaEventRecord(a, s), out);
                DLP_CU_GOTO(st, cudaMemcpyAsync(host, dev, (size_t)bytes[i], cudaMemcpyDeviceToHost, s), out);
                DLP_CU_GOTO(st, cudaEventRecord(b, s), out);
                DLP_CU_GOTO(st, cudaEventSynchronize(b), out);
                DLP_CU_GOTO(st, cudaEventElapsedTime(&ms2, a, b), out);
                if (r >= 0) {
                    h2d[r] = ms1;
                    d2h[r] = ms2;
                }
            }
            double mh = quantile(h2d, repeats, 0.5), md = quantile(d2h, repeats, 0.5);
            pt->h2d_latency_us = mh * 1e3;
            pt->h2d_gb_per_s = mh > 0 ? (double)bytes[i] / (mh * 1e-3) / 1e9 : 0;
            pt->d2h_gb_per_s = md > 0 ? (double)bytes[i] / (md * 1e-3) / 1e9 : 0;
        }
    }
out:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (s) cudaStreamDestroy(s);
    if (dev) cudaFree(dev);
    if (pinned) cudaFreeHost(pinned);
    free(pageable);
    free(h2d);
    free(d2h);
    (void)cudaGetLastError();
    return st;
}

// ---- events on a plan's stream (the step timer of run/step's harness uses them) --------------------------------------
struct dlp_cuda_events {
    int n;
    cudaEvent_t ev[];
};

dlp_status dlp_cuda_events_create(int n, dlp_cuda_events **out) {
    *out = NULL;
    if (n < 1) return DLP_ERR(DLP_ERR_INVALID, "%d events", n);
    dlp_cuda_events *e = calloc(1, sizeof *e + (size_t)n * sizeof e->ev[0]);
    DLP_TRY_ALLOC(e);
    e->n = n;
    for (int i = 0; i < n; i++) {
        cudaError_t ce = cudaEventCreate(&e->ev[i]);
        if (ce != cudaSuccess) {
            e->n = i;
            dlp_cuda_events_free(e);
            return DLP_ERR(DLP_ERR_IO, "cudaEventCreate: %s", cudaGetErrorString(ce));
        }
    }
    *out = e;
    return DLP_OK;
}

dlp_status dlp_cuda_events_record(dlp_cuda_events *e, int i, dlp_plan *p) {
    if (i < 0 || i >= e->n) return DLP_ERR(DLP_ERR_INVALID, "event %d of %d", i, e->n);
    DLP_CU(cudaEventRecord(e->ev[i], (cudaStream_t)dlp_cuda_plan_stream(p)));
    return DLP_OK;
}

dlp_status dlp_cuda_events_elapsed_ms(dlp_cuda_events *e, int i, int j, double *ms) {
    if (i < 0 || j < 0 || i >= e->n || j >= e->n) return DLP_ERR(DLP_ERR_INVALID, "events %d, %d of %d", i, j, e->n);
    float m = 0;
    DLP_CU(cudaEventElapsedTime(&m, e->ev[i], e->ev[j]));
    *ms = m;
    return DLP_OK;
}

void dlp_cuda_events_free(dlp_cuda_events *e) {
    if (!e) return;
    for (int i = 0; i < e->n; i++) cudaEventDestroy(e->ev[i]);
    free(e);
    (void)cudaGetLastError();
}

// Least squares y = a + b x; with one point (or a negative intercept) a line through the origin.
static void fit_line(const double *x, const double *y, int n, double *a, double *b) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
    double den = n * sxx - sx * sx;
    *b = n > 1 && den > 0 ? (n * sxy - sx * sy) / den : 0;
    *a = n > 1 && den > 0 ? (sy - *b * sx) / n : 0;
    if (n <= 1 || den <= 0 || *a < 0) {
        *a = 0;
        *b = sxx > 0 ? sxy / sxx : 0;
    }
}

dlp_status dlp_cuda_device_profile(const char *name, const dlp_cuda_device_info *dev, const dlp_cuda_h2d_point *h2d,
                                   int nh2d, const dlp_cuda_step_point *steps, int nsteps, double work_ratio,
                                   double param_ratio, dlp_device_profile *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->kind = DLP_DEVICE_GPU;
    snprintf(out->source, sizeof out->source, "measured");
    out->contention_efficiency = 1;
    out->h2d_overlap = 1;
    out->mem_bytes = dev ? (double)dev->mem_bytes : 0;
    int64_t best_pinned = 0, best_pageable = 0;
    for (int i = 0; i < nh2d; i++) {
        const dlp_cuda_h2d_point *h = &h2d[i];
        if (h->pinned && h->bytes >= best_pinned) best_pinned = h->bytes, out->h2d_bytes_per_s = h->h2d_gb_per_s * 1e9;
        if (!h->pinned && h->bytes >= best_pageable)
            best_pageable = h->bytes, out->h2d_pageable_bytes_per_s = h->h2d_gb_per_s * 1e9;
    }
    if (!(work_ratio > 0)) work_ratio = 1;
    if (!(param_ratio > 0)) param_ratio = 1;
    double fsum = 0, tsum = 0;
    for (int i = 0; i < nsteps; i++) {
        const dlp_cuda_step_point *a = &steps[i];
        if (a->train) fsum += a->fwd_ms, tsum += a->fwd_ms + a->bwd_ms;
        int seen = 0;  // one row per (task, precision), from every point that has it
        for (int j = 0; j < i; j++) seen |= steps[j].train == a->train && steps[j].precision == a->precision;
        if (seen) continue;
        if (out->nrates == DLP_DEVICE_MAX_RATES) return DLP_ERR(DLP_ERR_INVALID, "too many (task, precision) rows");
        double x[64], y[64], upd[64];
        int n = 0, bmax = 0;
        for (int j = i; j < nsteps && n < 64; j++) {
            const dlp_cuda_step_point *b = &steps[j];
            if (b->train != a->train || b->precision != a->precision) continue;
            x[n] = b->batch;
            y[n] = (b->train ? b->fwd_ms + b->bwd_ms : b->step_ms) * 1e-3;
            upd[n] = b->update_ms * 1e-3;
            if (b->batch > bmax) bmax = b->batch;
            n++;
        }
        dlp_rate *r = &out->rates[out->nrates++];
        r->task = a->train ? DLP_TASK_TRAIN : DLP_TASK_INFER;
        r->prec = dlp_prec_from_dtype(a->precision, 0);
        r->batch_ref = bmax;
        fit_line(x, y, n, &r->t0_s, &r->per_image_s);
        r->per_image_s /= work_ratio;
        if (a->train) {
            dlp_stats_sort_f64(upd, (size_t)n);
            r->update_s = upd[n / 2] / param_ratio;
        }
        snprintf(r->basis, sizeof r->basis, "measured: dlperf gpu probe, cuda backend, %s %s, %d batch sizes up to %d%s",
                 dlp_task_name(r->task), dlp_prec_name(r->prec), n, bmax, dev ? "" : "");
        if (!(r->per_image_s > 0))
            return DLP_ERR(DLP_ERR_NUMERIC, "%s %s: step time does not grow with the batch (%d points); probe more batch sizes",
                           dlp_task_name(r->task), dlp_prec_name(r->prec), n);
    }
    out->fwd_fraction = tsum > 0 ? fsum / tsum : 1.0 / 3;
    return dlp_device_validate(out, "dlp_cuda_device_profile");
}

const dlp_gpu_spec *dlp_cuda_catalog_gpu(const dlp_catalog *c, const char *device_name) {
    char low[256];
    size_t n = strlen(device_name);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)(device_name[i] >= 'A' && device_name[i] <= 'Z' ? device_name[i] + 32 : device_name[i]);
    low[n] = '\0';
    const dlp_gpu_spec *best = NULL;
    size_t best_len = 0;
    for (int i = 0; i < c->ngpus; i++) {
        const dlp_gpu_spec *g = &c->gpus[i];
        const json_t *al = json_object_get(g->json, "aliases");
        size_t na = json_is_array(al) ? json_array_size(al) : 0;
        for (size_t k = 0; k <= na; k++) {
            const char *a = k == na ? g->id : json_string_value(json_array_get(al, k));
            if (a && strlen(a) > best_len && strstr(low, a)) best = g, best_len = strlen(a);
        }
    }
    return best;
}

dlp_status dlp_cuda_machine_profile(const dlp_catalog *c, const dlp_gpu_spec *g, const dlp_cuda_device_info *d,
                                    const dlp_device_profile *dev, const char *model, dlp_profile *p) {
    const dlp_system_spec *sys = NULL;
    for (int i = 0; i < c->nsystems && !sys; i++)
        if (c->systems[i].gpu == g) sys = &c->systems[i];
    if (!sys) return DLP_ERR(DLP_ERR_NOTFOUND, "no catalog system has GPU %s to take the host part from", g->id);
    DLP_CHECK(dlp_derive_system(c, sys, NULL, p));
    p->devices[0] = *dev;
    snprintf(p->devices[0].name, sizeof p->devices[0].name, "%s", g->id);
    snprintf(p->devices[0].source, sizeof p->devices[0].source, "measured");
    p->devices[0].price_usd = g->price_usd;
    p->devices[0].power_w = g->board_power_w;
    snprintf(p->source, sizeof p->source, "probe");
    char when[32];
    snprintf(p->created, sizeof p->created, "%s", dlp_wall_iso8601(when, sizeof when));
    snprintf(p->notes, sizeof p->notes,
             "GPU %s measured by dlperf gpu probe (%s, cuDNN %d, CUDA driver %d) with %s; host, storage and pipeline "
             "from catalog system %s",
             d ? d->name : g->name, p->created, d ? d->cudnn_version : 0, d ? d->driver_version : 0,
             model ? model : "resnet50", sys->id);
    return dlp_profile_validate(p, g->id);
}

json_t *dlp_cuda_profile_json(const dlp_cuda_device_info *dev, const dlp_cuda_h2d_point *h2d, int nh2d,
                              const dlp_cuda_step_point *steps, int nsteps, const char *model) {
    json_t *o = dlp_json_result_new("dlperf.gpu_profile/1", 0, NULL);
    if (dev) json_object_set_new(o, "device", dlp_cuda_device_to_json(dev));
    json_object_set_new(o, "versions", dlp_cuda_versions_to_json());
    json_object_set_new(o, "model", json_string(model ? model : ""));
    json_t *ha = json_array();
    for (int i = 0; i < nh2d; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "bytes", json_integer(h2d[i].bytes));
        json_object_set_new(r, "pinned", json_boolean(h2d[i].pinned));
        json_object_set_new(r, "h2d_gb_per_s", json_real(h2d[i].h2d_gb_per_s));
        json_object_set_new(r, "d2h_gb_per_s", json_real(h2d[i].d2h_gb_per_s));
        json_object_set_new(r, "h2d_latency_us", json_real(h2d[i].h2d_latency_us));
        json_array_append_new(ha, r);
    }
    json_object_set_new(o, "h2d", ha);
    json_t *sa = json_array(), *fits = json_object();
    for (int i = 0; i < nsteps; i++) {
        const dlp_cuda_step_point *p = &steps[i];
        json_t *r = json_object();
        json_object_set_new(r, "mode", json_string(p->train ? "train" : "infer"));
        json_object_set_new(r, "precision", json_string(dlp_dtype_name(p->precision)));
        json_object_set_new(r, "batch", json_integer(p->batch));
        json_object_set_new(r, "step_ms", json_real(p->step_ms));
        json_object_set_new(r, "step_ms_p10", json_real(p->step_ms_p10));
        json_object_set_new(r, "step_ms_p90", json_real(p->step_ms_p90));
        json_object_set_new(r, "images_per_s", json_real(p->images_per_s));
        json_object_set_new(r, "plan_ms", json_real(p->plan_ms));
        json_object_set_new(r, "device_bytes", json_integer(p->device_bytes));
        json_object_set_new(r, "graphs_captured", json_integer(p->graphs_captured));
        if (p->train) {
            json_object_set_new(r, "forward_ms", json_real(p->fwd_ms));
            json_object_set_new(r, "loss_backward_ms", json_real(p->bwd_ms));
            json_object_set_new(r, "update_ms", json_real(p->update_ms));
        }
        if (p->copy_ms > 0) {
            json_object_set_new(r, "h2d_copy_ms", json_real(p->copy_ms));
            json_object_set_new(r, "h2d_stall_ms", json_real(p->stall_ms));
        }
        json_array_append_new(sa, r);
    }
    // Least-squares line step_ms = fixed_ms + ms_per_image * batch for each (mode, precision).
    for (int i = 0; i < nsteps; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_%s", steps[i].train ? "train" : "infer", dlp_dtype_name(steps[i].precision));
        if (json_object_get(fits, key)) continue;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        int n = 0;
        for (int j = 0; j < nsteps; j++) {
            if (steps[j].train != steps[i].train || steps[j].precision != steps[i].precision) continue;
            double x = steps[j].batch, y = steps[j].step_ms;
            sx += x, sy += y, sxx += x * x, sxy += x * y, n++;
        }
        json_t *f = json_object();
        double den = n * sxx - sx * sx;
        double slope = n > 1 && den != 0 ? (n * sxy - sx * sy) / den : (n ? sy / sx : 0);
        double icpt = n > 1 && den != 0 ? (sy - slope * sx) / n : 0;
        json_object_set_new(f, "fixed_ms", json_real(icpt));
        json_object_set_new(f, "ms_per_image", json_real(slope));
        json_object_set_new(f, "points", json_integer(n));
        json_object_set_new(fits, key, f);
    }
    json_object_set_new(o, "steps", sa);
    json_object_set_new(o, "fits", fits);
    return o;
}
