// perf/hwplan: the configurations a catalog can build, each predicted and costed, and the choice among them.
#include "perf/hwplan.h"

#include "core/fields.h"
#include "core/json.h"
#include "hw/derive.h"
#include "hw/gpumodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dlp_hwplan_req_init(dlp_hwplan_req *r) {
    memset(r, 0, sizeof *r);
    r->tolerance = 0.02;
    r->max_nodes = 4;
    dlp_workload_init(&r->w);
    r->w.batch = 0;
    dlp_cost_params_init(&r->cp);
}

double dlp_hwplan_host_cap(const dlp_prediction *o) {
    static const dlp_stage k_host[] = {DLP_STAGE_READ, DLP_STAGE_PREP, DLP_STAGE_IOWAIT, DLP_STAGE_HOSTMEM};
    double x = INFINITY;
    for (size_t i = 0; i < sizeof k_host / sizeof k_host[0]; i++)
        if (o->stages[k_host[i]].present && o->stages[k_host[i]].img_per_s < x) x = o->stages[k_host[i]].img_per_s;
    return x;
}

void dlp_hwplan_spec(const dlp_hwplan_cand *c, dlp_system_spec *s) {
    if (c->sys) {
        *s = *c->sys;
        return;
    }
    *s = *c->plat->base;
    s->id = c->id;
    s->name = c->plat->name;
    s->notes = c->plat->notes;
    s->json = NULL;
    s->gpu = c->gpu;
    s->gpus = c->gpus;
    s->cpu = c->cpu;
    s->sockets = c->sockets;
    if (c->stor) {
        s->storage_desc = c->stor->desc;
        s->storage_tb = c->stor->tb;
        s->storage_read_gb_s = c->stor->read_gb_s;
        s->storage_stream_gb_s = c->stor->stream_gb_s;
        s->storage_latency_us = c->stor->latency_us;
    }
    s->price_usd = c->node_price_usd;
    s->power_w = c->power_w;
    s->usd_per_hour = s->usd_per_hour_alt = 0;
}

dlp_status dlp_hwplan_predict_spec(const dlp_catalog *cat, const dlp_system_spec *spec, int nodes, const dlp_hwplan_req *req,
                                 dlp_profile *p, dlp_workload *w, dlp_prediction *o, dlp_cost *cost) {
    DLP_CHECK(dlp_derive_system(cat, spec, req->pipeline, p));
    const dlp_device_profile *d = &p->devices[0];
    *w = req->w;
    w->devices = spec->gpus;
    w->nodes = nodes;
    if (!req->prec_given) w->prec = DLP_PREC_FP16;
    if (w->batch <= 0) {
        const dlp_rate *r = dlp_device_find_rate(d, w->task, w->prec, 0);
        w->batch = r && r->batch_ref > 0 ? r->batch_ref : 256;
    }
    dlp_gm_stack stk;  // a modelled GPU's stack loses this much per added GPU (hw/gpumodel), as predict counts it
    if (strcmp(d->source, "catalog") == 0 && w->task == DLP_TASK_TRAIN) {
        DLP_CHECK(dlp_gm_stack_get(cat, dlp_gm_stack_default(spec), &stk));
        w->step_loss_per_device = stk.loss;
    }
    DLP_CHECK(dlp_predict(p, d, w, o));
    DLP_CHECK(dlp_cost_compute(&p->cost, &req->cp, o->nodes, o->cluster_img_per_s, o->epoch_s, o->total_s, cost));
    return DLP_OK;
}

void dlp_hwplan_fill(dlp_hwplan_cand *c, const dlp_prediction *o, const dlp_cost *cost, dlp_hwplan_mode mode) {
    c->ok = 1;
    c->img_per_s = o->cluster_img_per_s;
    c->host_img_per_s = dlp_hwplan_host_cap(o);
    c->device_img_per_s = o->device_img_per_s;
    c->ratio = c->host_img_per_s / c->device_img_per_s;
    c->epoch_s = o->epoch_s;
    c->total_s = o->total_s;
    c->bottleneck = o->bottleneck;
    c->usd_per_hour = cost->known ? cost->usd_per_hour : 0;
    c->usd_per_million = cost->known ? cost->usd_per_million_images : 0;
    c->usd_total = cost->known ? cost->usd_total : 0;
    c->budget_cost = mode == DLP_HWPLAN_HOURLY ? c->usd_per_hour : c->price_usd;
}

typedef struct {
    dlp_hwplan_cand *v;
    int n, cap;
} cand_vec;

static dlp_hwplan_cand *push(cand_vec *cv) {
    if (cv->n == cv->cap) {
        int cap = cv->cap ? 2 * cv->cap : 256;
        dlp_hwplan_cand *nv = realloc(cv->v, (size_t)cap * sizeof *nv);
        if (!nv) return NULL;
        cv->v = nv;
        cv->cap = cap;
    }
    dlp_hwplan_cand *c = &cv->v[cv->n++];
    memset(c, 0, sizeof *c);
    return c;
}

dlp_status dlp_hwplan_enumerate(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req,
                              dlp_hwplan_cand **out, int *n) {
    *out = NULL;
    *n = 0;
    cand_vec cv = {0};
    int node_counts[8], nnc = 0;
    for (int k = 1; k <= req->max_nodes && nnc < 8; k *= 2) node_counts[nnc++] = k;
    // Built from parts (purchase only: clouds rent whole instances).
    for (int ip = 0; req->mode == DLP_HWPLAN_PURCHASE && parts && ip < parts->nplatforms; ip++) {
        const dlp_platform *pl = &parts->platforms[ip];
        for (int ig = 0; ig < pl->ngpus; ig++)
            for (int ic = 0; ic < pl->ncounts; ic++)
                for (int iu = 0; iu < pl->ncpus; iu++)
                    for (int is = -1; is < parts->nstorage; is++)
                        for (int in = 0; in < nnc && node_counts[in] <= pl->max_nodes; in++) {
                            dlp_hwplan_cand *c = push(&cv);
                            if (!c) goto nomem;
                            c->plat = pl;
                            c->gpu = pl->gpus[ig];
                            c->gpus = pl->gpu_counts[ic];
                            c->cpu = pl->cpus[iu];
                            c->sockets = pl->sockets;
                            c->stor = is < 0 ? NULL : &parts->storage[is];
                            c->nodes = node_counts[in];
                            snprintf(c->id, sizeof c->id, "%s/%dx%s/%dx%s/%s/%dn", pl->id, c->gpus, c->gpu->id,
                                     c->sockets, c->cpu->id, c->stor ? c->stor->id : "base", c->nodes);
                            c->node_price_usd = pl->price_usd + c->gpus * c->gpu->price_usd +
                                                c->sockets * c->cpu->price_usd + (c->stor ? c->stor->price_usd : 0);
                            c->price_usd = c->nodes * c->node_price_usd;
                            c->power_w = pl->power_w + c->gpus * c->gpu->board_power_w + c->sockets * c->cpu->tdp_w +
                                         (c->stor ? c->stor->power_w : 0);
                        }
    }
    // Whole catalog systems: owned ones with a price (purchase), cloud ones with a rent (hourly).
    for (int i = 0; i < cat->nsystems; i++) {
        const dlp_system_spec *s = &cat->systems[i];
        int want = req->mode == DLP_HWPLAN_PURCHASE ? s->kind == DLP_SYSTEM_OWNED && s->price_usd > 0
                                                  : s->kind == DLP_SYSTEM_CLOUD && s->usd_per_hour > 0;
        for (int in = 0; want && in < nnc; in++) {
            if (node_counts[in] > 1 && !(s->nic_gb_s > 0)) break;
            dlp_hwplan_cand *c = push(&cv);
            if (!c) goto nomem;
            c->sys = s;
            c->gpu = s->gpu;
            c->gpus = s->gpus;
            c->cpu = s->cpu;
            c->sockets = s->sockets;
            c->nodes = node_counts[in];
            snprintf(c->id, sizeof c->id, "%s/%dn", s->id, c->nodes);
            c->node_price_usd = s->price_usd;
            c->price_usd = c->nodes * s->price_usd;
            c->power_w = s->power_w;
        }
    }
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *o = malloc(sizeof *o);
    if (!p || !o) {
        free(p);
        free(o);
        goto nomem;
    }
    for (int i = 0; i < cv.n; i++) {
        dlp_hwplan_cand *c = &cv.v[i];
        dlp_system_spec spec;
        dlp_hwplan_spec(c, &spec);
        dlp_workload w;
        dlp_cost cost;
        dlp_status st = dlp_hwplan_predict_spec(cat, &spec, c->nodes, req, p, &w, o, &cost);
        if (st) {
            snprintf(c->err, sizeof c->err, "%s", dlp_err_msg());
            dlp_err_clear();
            continue;
        }
        dlp_hwplan_fill(c, o, &cost, req->mode);
    }
    free(p);
    free(o);
    *out = cv.v;
    *n = cv.n;
    return DLP_OK;
nomem:
    free(cv.v);
    return DLP_ERR(DLP_ERR_NOMEM, "out of memory enumerating configurations");
}

int dlp_hwplan_choose(dlp_hwplan_cand *c, int n, const dlp_hwplan_req *req) {
    double best = 0;
    for (int i = 0; i < n; i++) {
        c[i].feasible = c[i].ok && c[i].budget_cost > 0 && (req->budget <= 0 || c[i].budget_cost <= req->budget) &&
                        (req->deadline_s <= 0 || c[i].total_s <= req->deadline_s);
        if (c[i].feasible && c[i].img_per_s > best) best = c[i].img_per_s;
    }
    int pick = -1;
    // Under a deadline every feasible configuration qualifies and the cheapest that meets it wins — for a purchase
    // the price, for rent what the whole run costs (a faster rent may cost less in all); else those within the
    // tolerance of the fastest qualify, and the cheapest of them wins.
    int run_cost = req->deadline_s > 0 && req->mode == DLP_HWPLAN_HOURLY;
    for (int i = 0; i < n; i++) {
        if (!c[i].feasible) continue;
        if (req->deadline_s <= 0 && c[i].img_per_s < (1 - req->tolerance) * best) continue;
        double ki = run_cost ? c[i].usd_total : c[i].budget_cost, kp = pick < 0 ? 0 : run_cost ? c[pick].usd_total : c[pick].budget_cost;
        if (pick < 0 || ki < kp || (ki == kp && c[i].img_per_s > c[pick].img_per_s)) pick = i;
    }
    return pick;
}

static const dlp_hwplan_cand *g_sort;
static int by_speed(const void *a, const void *b) {
    const dlp_hwplan_cand *x = &g_sort[*(const int *)a], *y = &g_sort[*(const int *)b];
    if (x->img_per_s != y->img_per_s) return x->img_per_s < y->img_per_s ? 1 : -1;
    if (x->budget_cost != y->budget_cost) return x->budget_cost < y->budget_cost ? -1 : 1;
    return strcmp(x->id, y->id);
}

int dlp_hwplan_frontier(const dlp_hwplan_cand *c, int n, int chosen, int *idx, int max) {
    int *all = malloc((size_t)(n ? n : 1) * sizeof *all), m = 0;
    if (!all) return 0;
    for (int i = 0; i < n; i++) {
        if (!c[i].feasible || i == chosen) continue;
        int beaten = 0;
        for (int j = 0; j < n && !beaten; j++)
            beaten = j != i && c[j].feasible &&
                     ((c[j].budget_cost <= c[i].budget_cost && c[j].img_per_s > c[i].img_per_s) ||
                      (c[j].budget_cost < c[i].budget_cost && c[j].img_per_s >= c[i].img_per_s));
        // One of each (price, speed): a whole catalog system and the same parts built up are the same offer.
        for (int j = 0; j < i && !beaten; j++)
            beaten = c[j].feasible && j != chosen && c[j].budget_cost == c[i].budget_cost && c[j].img_per_s == c[i].img_per_s;
        if (chosen >= 0 && !beaten)
            beaten = c[chosen].budget_cost == c[i].budget_cost && c[chosen].img_per_s == c[i].img_per_s;
        if (!beaten) all[m++] = i;
    }
    g_sort = c;
    qsort(all, (size_t)m, sizeof *all, by_speed);
    int k = 0;
    if (chosen >= 0 && k < max) idx[k++] = chosen;
    for (int i = 0; i < m && k < max; i++) idx[k++] = all[i];
    free(all);
    return k;
}

int dlp_hwplan_neighbor(const dlp_hwplan_cand *a, const dlp_hwplan_cand *b, const char **what) {
    if (a == b || a->sys || b->sys || a->plat != b->plat) return 0;
    int d = 0;
    const char *w = "";
    if (a->cpu != b->cpu) d++, w = "cpu";
    if (a->stor != b->stor) d++, w = "storage";
    if (a->gpus != b->gpus) d++, w = "gpus";
    if (a->gpu != b->gpu) d++, w = "gpu";
    if (a->nodes != b->nodes) d++, w = "nodes";
    if (what) *what = w;
    return d == 1;
}

static json_t *system_write(const void *rec) {
    const dlp_hwplan_cand *c = rec;
    return c->sys ? json_string(c->sys->id) : json_null();
}
static json_t *platform_write(const void *rec) {
    const dlp_hwplan_cand *c = rec;
    return c->plat ? json_string(c->plat->id) : json_null();
}
static json_t *gpu_write(const void *rec) { return json_string(((const dlp_hwplan_cand *)rec)->gpu->id); }
static json_t *cpu_write(const void *rec) { return json_string(((const dlp_hwplan_cand *)rec)->cpu->id); }
static json_t *storage_write(const void *rec) {  // null for a whole system; "base": the platform's own
    const dlp_hwplan_cand *c = rec;
    return c->sys ? json_null() : json_string(c->stor ? c->stor->id : "base");
}
static json_t *error_write(const void *rec) {  // only when not predicted
    const dlp_hwplan_cand *c = rec;
    return c->ok ? NULL : json_string(c->err);
}
static json_t *bottleneck_write(const void *rec) {
    return json_string(dlp_stage_name(((const dlp_hwplan_cand *)rec)->bottleneck));
}

#define CAND_F(key, m, t, fl) {DLP_FIELD_AS(dlp_hwplan_cand, key, m, t, fl)}
static const dlp_field_def k_cand_fields[] = {
    CAND_F("id", id, DLP_FT_STR, 0),
    {DLP_FIELD_CB("system", NULL, system_write)},
    {DLP_FIELD_CB("platform", NULL, platform_write)},
    {DLP_FIELD_CB("gpu", NULL, gpu_write)},
    CAND_F("gpus_per_node", gpus, DLP_FT_INT, 0),
    {DLP_FIELD_CB("cpu", NULL, cpu_write)},
    CAND_F("sockets", sockets, DLP_FT_INT, 0),
    {DLP_FIELD_CB("storage", NULL, storage_write)},
    CAND_F("nodes", nodes, DLP_FT_INT, 0),
    CAND_F("ok", ok, DLP_FT_BOOL, 0),
    {DLP_FIELD_CB("error", NULL, error_write)},
    CAND_F("feasible", feasible, DLP_FT_BOOL, 0),
    CAND_F("price_usd", price_usd, DLP_FT_NUM, 0),
    CAND_F("usd_per_hour", usd_per_hour, DLP_FT_NUM, 0),
    CAND_F("budget_cost", budget_cost, DLP_FT_NUM, 0),
    {0}};
// What was predicted (a candidate that is ok).
static const dlp_field_def k_cand_prediction_fields[] = {
    CAND_F("img_per_s", img_per_s, DLP_FT_NUM, 0),
    CAND_F("host_img_per_s_per_node", host_img_per_s, DLP_FT_NUM, DLP_FF_NULLNF),
    CAND_F("device_img_per_s_per_node", device_img_per_s, DLP_FT_NUM, 0),
    CAND_F("host_over_device", ratio, DLP_FT_NUM, DLP_FF_NULLNF),
    {DLP_FIELD_CB("bottleneck", NULL, bottleneck_write)},
    CAND_F("total_s", total_s, DLP_FT_NUM, 0),
    CAND_F("usd_per_million_images", usd_per_million, DLP_FT_NUM, 0),
    CAND_F("usd_total", usd_total, DLP_FT_NUM, 0),
    {0}};

json_t *dlp_hwplan_cand_to_json(const dlp_hwplan_cand *c) {
    json_t *e = dlp_fields_to_json(k_cand_fields, c);
    if (c->ok) dlp_fields_write(e, k_cand_prediction_fields, c);
    return e;
}
