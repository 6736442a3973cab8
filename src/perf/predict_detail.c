// perf/predict_detail: the machine, device and dataset of a prediction, the GPU model's step explained, and the
// published figures beside the prediction (perf/predict_detail.h).
#include "perf/predict_detail.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#include "data/source.h"
#include "hw/derive.h"
#include "perf/datastats.h"

dlp_status dlp_predict_machine(const dlp_catalog *cat, const dlp_predict_machine_req *req, dlp_profile *p,
                               const char **stack) {
    dlp_status st;
    *stack = req->stack ? req->stack : DLP_GM_DEFAULT_STACK;
    if (req->profile) {
        st = dlp_profile_read(req->profile, p);
    } else {
        const dlp_system_spec *s = dlp_catalog_system(cat, req->system);
        st = s ? dlp_derive_system_stack(cat, s, req->pipeline, req->stack, p) : DLP_ERR_NOTFOUND;
        if (!s) dlp_err_trace(st, __FILE__, __LINE__, "--system");
        *stack = req->stack ? req->stack : dlp_gm_stack_default(s);
    }
    if (st) return st;
    if (req->price_usd > 0) {  // a purchase price given: an owned machine, unless a rent is given too
        p->cost.price_usd = req->price_usd;
        if (req->usd_per_hour <= 0) p->cost.usd_per_hour = p->cost.usd_per_hour_alt = 0;
    }
    if (req->power_w > 0) p->cost.power_w = req->power_w;
    if (req->usd_per_hour > 0) p->cost.usd_per_hour = req->usd_per_hour;
    return DLP_OK;
}

static int sim_spec_plain(const dlp_sim_spec *s) {
    return s->scale == 1 && s->t0_s < 0 && s->pcie_bytes_per_s == 0 && s->overlap < 0 && s->img_per_s == 0;
}

// An emulated device from a sim spec (the text after "sim:", or a GPU name alone).
static dlp_status sim_device(const dlp_catalog *cat, const char *arg, const char *stack, dlp_device_profile *d,
                             int *plain, char *stack_out, size_t stack_len) {
    dlp_sim_spec s;
    DLP_CHECK(dlp_sim_spec_parse(arg, &s));
    if (stack && !s.stack[0]) snprintf(s.stack, sizeof s.stack, "%s", stack);
    if (s.stack[0]) snprintf(stack_out, stack_len, "%s", s.stack);
    *plain = sim_spec_plain(&s);
    return dlp_sim_device(&s, cat, d);
}

dlp_status dlp_predict_device(const dlp_catalog *cat, const dlp_profile *p, const char *spec, const char *stack,
                              dlp_device_profile *d, int *plain, char *stack_out, size_t stack_len) {
    *plain = 1;
    if (!spec || !spec[0]) {
        if (p->ndevices == 0)
            return DLP_ERR(DLP_ERR_INVALID, "profile %s has no devices; give --device cpu or sim:<gpu>", p->id);
        *d = p->devices[0];
        return DLP_OK;
    }
    const dlp_backend_kind kind = dlp_backend_kind_of(spec);
    const char *colon = strchr(spec, ':');
    if (kind == DLP_BACKEND_KIND_SIM && colon) return sim_device(cat, colon + 1, stack, d, plain, stack_out, stack_len);
    if (kind == DLP_BACKEND_KIND_GPU && !colon) {
        for (int i = 0; i < p->ndevices; i++)
            if (p->devices[i].kind == DLP_DEVICE_GPU) {
                *d = p->devices[i];
                return DLP_OK;
            }
        return DLP_ERR(DLP_ERR_NOTFOUND, "profile %s has no GPU device (measure one with dlperf probe --device cuda, or "
                       "use --device sim:<gpu>)", p->id);
    }
    const dlp_device_profile *pd = dlp_profile_find_device(p, spec);
    if (pd) {
        *d = *pd;
        return DLP_OK;
    }
    if (kind == DLP_BACKEND_KIND_CPU)
        return DLP_ERR(DLP_ERR_NOTFOUND, "profile %s has no cpu device (a catalog system has only its GPUs; use a profile "
                       "measured by dlperf probe)", p->id);
    return sim_device(cat, spec, stack, d, plain, stack_out, stack_len);  // a GPU name: the catalog GPU, no options
}

dlp_status dlp_predict_stats(const dlp_catalog *cat, const dlp_profile *p, const char *data, const char *dataset,
                             dlp_workload *w, int *skipped, char *where, size_t where_len) {
    *skipped = 0;
    const char *split = w->task == DLP_TASK_TRAIN ? "train" : "val";
    if (data) {
        // --data as everywhere: a directory (ImageNet root, ImageFolder), a list file, or synthetic[:...]: the
        // statistics of the files a loader would read.
        dlp_dataset *ds = NULL;
        DLP_CHECK(dlp_data_open(data, split, NULL, &ds, where, where_len));
        dlp_status st = dlp_dataset_stats_of(ds, 0, 20000, &w->stats, skipped);
        dlp_dataset_free(ds);
        return st;
    }
    if (!dataset && p->has_stats) {
        w->stats = p->stats;
        return DLP_OK;
    }
    const char *id = dataset ? dataset : w->task == DLP_TASK_TRAIN ? "imagenet-train" : "imagenet-val";
    const dlp_catalog_dataset *cd = dlp_catalog_dataset_find(cat, id);
    if (!cd) return dlp_err_trace(DLP_ERR_NOTFOUND, __FILE__, __LINE__, dataset ? "--dataset" : "default dataset");
    w->stats = cd->stats;
    return DLP_OK;
}

// The step of g with its memory side (HBM bandwidth and SMs x clock) and its peaks scaled.
static double gm_step_with(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *stk, int batch, double mem_x,
                           double peak_x) {
    dlp_gpu_spec h = *g;
    h.mem_bw_gb_s *= mem_x;
    h.boost_mhz = (int)lround(h.boost_mhz * mem_x);
    h.fp32_tflops *= peak_x;
    h.tf32_tflops *= peak_x;
    h.fp16_tflops *= peak_x;
    h.bf16_tflops *= peak_x;
    h.int8_tops *= peak_x;
    dlp_gm_step st;
    if (dlp_gm_step_compute(&h, prec, stk, &st) != DLP_OK) return 0;
    return dlp_gm_step_time(&st, batch);
}

// The factor on the memory side (mem) or the peak that alone makes the step as short as target; 0: not by x16.
static double gm_needed(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *stk, int batch, double target, int mem) {
    double lo = 1, hi = 16;
    if (gm_step_with(g, prec, stk, batch, mem ? hi : 1, mem ? 1 : hi) > target) return 0;  // not by this alone
    for (int i = 0; i < 40; i++) {
        double mid = 0.5 * (lo + hi);
        if (gm_step_with(g, prec, stk, batch, mem ? mid : 1, mem ? 1 : mid) > target) lo = mid;
        else hi = mid;
    }
    return hi;
}

dlp_status dlp_gm_explain_compute(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *stk, int batch,
                                  dlp_gm_explain *x) {
    memset(x, 0, sizeof *x);
    DLP_CHECK(dlp_gm_step_compute(g, prec, stk, &x->st));
    x->step_s = dlp_gm_step_time(&x->st, batch);
    for (int k = 0; k < DLP_WL_KIND_COUNT; k++) x->order[k] = k;
    for (int i = 0; i < DLP_WL_KIND_COUNT; i++)
        for (int j = i + 1; j < DLP_WL_KIND_COUNT; j++)
            if (x->st.kind_s[x->order[j]] > x->st.kind_s[x->order[i]]) {
                int t = x->order[i];
                x->order[i] = x->order[j];
                x->order[j] = t;
            }
    const double target = x->step_s / 1.1;
    x->mem_x = gm_needed(g, prec, stk, batch, target, 1);
    x->peak_x = gm_needed(g, prec, stk, batch, target, 0);
    x->sm_limited = stk->sm_bytes_per_clk > 0 && g->sms > 0 &&
                    g->sms * g->boost_mhz * 1e6 * stk->sm_bytes_per_clk < g->mem_bw_gb_s * 1e9;
    return DLP_OK;
}

int dlp_gm_explain_kind_shown(const dlp_gm_explain *x, int k, int batch) {
    return x->st.kind_s[k] * batch >= 0.005 * x->step_s;
}

json_t *dlp_gm_explain_to_json(const dlp_gm_explain *x, const dlp_gm_stack *stk, int batch, double ce, double me,
                               double kernel_s) {
    json_t *kinds = json_array();
    for (int i = 0; i < DLP_WL_KIND_COUNT; i++) {
        int k = x->order[i];
        if (!dlp_gm_explain_kind_shown(x, k, batch)) continue;
        json_array_append_new(kinds, json_pack("{s:s, s:f, s:f}", "kind", dlp_wl_kind_name((dlp_wl_kind)k), "share",
                                               x->st.kind_s[k] * batch / x->step_s, "memory_bound_share",
                                               x->st.kind_mem_s[k] / x->st.kind_s[k]));
    }
    return json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:f, s:f, s:s}", "stack", stk->name, "records",
                     stk->nrecords, "gpus", stk->ngpus, "ce", ce, "me", me, "kernel_s", kernel_s,
                     "loss_per_gpu", stk->loss, "step_s", x->step_s, "img_per_s_per_gpu", batch / x->step_s,
                     "layer_kinds", kinds, "memory_x_for_10pct", x->mem_x, "peak_x_for_10pct", x->peak_x,
                     "memory_side", x->sm_limited ? "sm" : "hbm");
}

int dlp_published_compare(const dlp_published *pb, const dlp_gpu_spec *g, const dlp_workload *w,
                          const dlp_prediction *o, const dlp_gm_stack *stk, const char *stack, dlp_published_cmp *c) {
    const int N = o->devices * o->nodes;
    if (pb->gpu != g || pb->task != w->task || pb->prec != w->prec || (pb->gpus != 1 && pb->gpus != N)) return 0;
    c->pb = pb;
    c->predicted = pb->gpus == 1 ? o->per_device_img_per_s : o->cluster_img_per_s;
    c->how = pb->gpus == 1 ? " per device" : "";
    if (pb->gpus == 1 && N > 1 && stk) {  // a 1-GPU figure against the model's 1-GPU step, not this run's
        dlp_gm_step gs;
        if (dlp_gm_step_compute(g, w->prec, stk, &gs) == DLP_OK) {
            c->predicted = o->batch / dlp_gm_step_time(&gs, o->batch);
            c->how = " on 1 GPU (GPU model)";
        } else {
            dlp_err_clear();
        }
    }
    c->error = (c->predicted - pb->img_per_s) / pb->img_per_s;
    c->same_stack = stack && strcasecmp(pb->stack, stack) == 0;
    return 1;
}

json_t *dlp_published_cmp_to_json(const dlp_published_cmp *c) {
    const dlp_published *pb = c->pb;
    return json_pack("{s:f, s:i, s:i, s:s, s:s, s:b, s:s, s:b, s:b, s:f, s:f}", "img_per_s", pb->img_per_s, "gpus",
                     pb->gpus, "batch", pb->batch, "framework", pb->framework, "source", pb->src->id, "primary",
                     pb->primary, "stack", pb->stack, "same_stack", c->same_stack, "estimate", pb->estimate,
                     "predicted_img_per_s", c->predicted, "error", c->error);
}

json_t *dlp_predict_entry_json(const char *source, const dlp_profile *p, const dlp_device_profile *d,
                               const dlp_workload *w) {
    json_t *m = json_pack("{s:s, s:s, s:s, s:s}", "id", p->id, "name", p->name, "source", source, "pipeline",
                          p->pipeline.name);
    json_t *wj = json_pack("{s:s, s:i, s:s, s:f, s:i, s:o}", "model", w->model, "size", w->tf.size, "storage",
                           dlp_storage_state_name(w->storage), "read_limit_bytes_per_s", w->read_limit_bytes_per_s,
                           "epochs", w->epochs, "dataset", dlp_dataset_stats_to_json(&w->stats));
    return json_pack("{s:o, s:o, s:o}", "machine", m, "device", dlp_device_to_json(d), "workload", wj);
}
