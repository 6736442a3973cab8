// hw/profile: machine profiles — types, JSON reader and writer with validation, lookups.
#include "hw/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "hw/fields.h"

static const char *const k_prec_names[DLP_PREC_COUNT] = {"fp32", "tf32", "bf16", "fp16", "int8"};

const char *dlp_prec_name(dlp_prec p) { return (unsigned)p < DLP_PREC_COUNT ? k_prec_names[p] : "?"; }

dlp_status dlp_prec_parse(const char *s, dlp_prec *out) {
    for (int i = 0; i < DLP_PREC_COUNT; i++)
        if (s && strcmp(s, k_prec_names[i]) == 0) {
            *out = (dlp_prec)i;
            return DLP_OK;
        }
    return DLP_ERR(DLP_ERR_INVALID, "unknown precision '%s' (fp32|tf32|bf16|fp16|int8)", s ? s : "(null)");
}

size_t dlp_prec_input_bytes(dlp_prec p) {
    switch (p) {
    case DLP_PREC_BF16: case DLP_PREC_FP16: return 2;
    case DLP_PREC_INT8: return 1;
    default: return 4;
    }
}

dlp_prec dlp_prec_from_dtype(dlp_dtype t, int tf32) {
    if (t == DLP_DTYPE_BF16) return DLP_PREC_BF16;
    if (t == DLP_DTYPE_F16) return DLP_PREC_FP16;
    return tf32 ? DLP_PREC_TF32 : DLP_PREC_FP32;
}

const char *dlp_task_name(dlp_task t) { return t == DLP_TASK_INFER ? "infer" : "train"; }

// --- dataset statistics ----------------------------------------------------------------------------------------

dlp_status dlp_dataset_stats_normalize(dlp_dataset_stats *s, const char *where) {
    if (s->images < 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: dataset has no images", where);
    if (!(s->mean_bytes > 0)) return DLP_ERR(DLP_ERR_FORMAT, "%s: mean JPEG size must be > 0 bytes", where);
    if (s->nsizes < 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: dataset has no image sizes", where);
    double sum = 0;
    for (int i = 0; i < s->nsizes; i++) {
        const dlp_image_size *z = &s->sizes[i];
        if (z->w < 1 || z->h < 1 || !(z->weight > 0) || z->mean_bytes < 0)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: sizes[%d] needs w, h >= 1 and weight > 0 (got %dx%d, weight %g)", where, i,
                           z->w, z->h, z->weight);
        sum += z->weight;
    }
    for (int i = 0; i < s->nsizes; i++) s->sizes[i].weight /= sum;
    return DLP_OK;
}

dlp_status dlp_dataset_stats_from_json(const json_t *o, const char *where, dlp_dataset_stats *s) {
    memset(s, 0, sizeof *s);
    char w[320];
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not an object", where);
    DLP_CHECK(dlp_field_opt_str(o, "name", s->name, sizeof s->name, where));
    if (!s->name[0]) DLP_CHECK(dlp_field_opt_str(o, "id", s->name, sizeof s->name, where));
    int64_t n;
    DLP_CHECK(dlp_field_int(o, "images", 1, INT64_MAX, &n, where));
    s->images = n;
    DLP_CHECK(dlp_field_pos(o, "mean_bytes", &s->mean_bytes, where));
    DLP_CHECK(dlp_field_opt_nonneg(o, "progressive_fraction", 0, &s->progressive_fraction, where));
    if (s->progressive_fraction > 1)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'progressive_fraction' must be between 0 and 1 (got %g)", where,
                       s->progressive_fraction);
    const json_t *sz = json_object_get(o, "sizes");
    if (!json_is_array(sz) || json_array_size(sz) == 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'sizes' is missing or not a non-empty array", where);
    if (json_array_size(sz) > DLP_DATASET_MAX_SIZES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'sizes' has %zu entries (at most %d)", where, json_array_size(sz),
                       DLP_DATASET_MAX_SIZES);
    for (size_t i = 0; i < json_array_size(sz); i++) {
        const json_t *e = json_array_get(sz, i);
        snprintf(w, sizeof w, "%s: sizes[%zu]", where, i);
        int64_t iw, ih;
        DLP_CHECK(dlp_field_int(e, "w", 1, 1 << 20, &iw, w));
        DLP_CHECK(dlp_field_int(e, "h", 1, 1 << 20, &ih, w));
        dlp_image_size *z = &s->sizes[s->nsizes++];
        z->w = (int)iw;
        z->h = (int)ih;
        DLP_CHECK(dlp_field_pos(e, "weight", &z->weight, w));
        DLP_CHECK(dlp_field_opt_nonneg(e, "mean_bytes", 0, &z->mean_bytes, w));
    }
    return dlp_dataset_stats_normalize(s, where);
}

json_t *dlp_dataset_stats_to_json(const dlp_dataset_stats *s) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "images", json_integer(s->images));
    json_object_set_new(o, "mean_bytes", json_real(s->mean_bytes));
    json_object_set_new(o, "progressive_fraction", json_real(s->progressive_fraction));
    json_t *a = json_array();
    for (int i = 0; i < s->nsizes; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "w", json_integer(s->sizes[i].w));
        json_object_set_new(e, "h", json_integer(s->sizes[i].h));
        json_object_set_new(e, "weight", json_real(s->sizes[i].weight));
        if (s->sizes[i].mean_bytes > 0) json_object_set_new(e, "mean_bytes", json_real(s->sizes[i].mean_bytes));
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "sizes", a);
    return o;
}

// --- pipeline ------------------------------------------------------------------------------------------------------

double dlp_pipeline_efficiency(const dlp_pipeline_profile *p, int threads) {
    if (p->nscaling == 0 || threads <= 1) return p->nscaling && threads == 1 ? p->scaling[0].efficiency : 1.0;
    const dlp_scaling_point *s = p->scaling;
    if (threads <= s[0].threads) return s[0].efficiency;
    for (int i = 1; i < p->nscaling; i++)
        if (threads <= s[i].threads) {
            double f = (double)(threads - s[i - 1].threads) / (s[i].threads - s[i - 1].threads);
            return s[i - 1].efficiency + f * (s[i].efficiency - s[i - 1].efficiency);
        }
    return s[p->nscaling - 1].efficiency;
}

dlp_status dlp_pipeline_coeffs_from_json(const json_t *o, const char *w, dlp_pipeline_profile *p) {
    int64_t v;
    DLP_CHECK(dlp_field_int(o, "dct_scaling", 0, 1, &v, w));
    p->dct_scaling = (int)v;
    DLP_CHECK(dlp_field_int(o, "crop_window", 0, 1, &v, w));
    p->crop_window = (int)v;
    v = 0;
    if (json_object_get(o, "dct_scale_mask")) DLP_CHECK(dlp_field_int(o, "dct_scale_mask", 0, 0x1FE, &v, w));
    if (v & 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'dct_scale_mask' has bit 0 set (scales are bits 1..8)", w);
    p->dct_scale_mask = (unsigned)v;
    struct { const char *k; double *d; } f[] = {
        {"read_per_file_s", &p->read_per_file_s},       {"read_per_byte_s", &p->read_per_byte_s},
        {"decode_per_image_s", &p->decode_per_image_s}, {"decode_per_pixel_s", &p->decode_per_pixel_s},
        {"decode_per_byte_s", &p->decode_per_byte_s},   {"augment_per_image_s", &p->augment_per_image_s},
        {"augment_per_in_pixel_s", &p->augment_per_in_pixel_s},
        {"augment_per_out_pixel_s", &p->augment_per_out_pixel_s},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) DLP_CHECK(dlp_field_nonneg(o, f[i].k, f[i].d, w));
    DLP_CHECK(dlp_field_opt_nonneg(o, "oversub_efficiency", 0, &p->oversub_efficiency, w));
    DLP_CHECK(dlp_field_opt_pos(o, "loader_cost_scale", 1, &p->loader_cost_scale, w));
    if (p->loader_cost_scale < 0.25 || p->loader_cost_scale > 4)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'loader_cost_scale' must be between 0.25 and 4 (got %g)", w,
                       p->loader_cost_scale);
    DLP_CHECK(dlp_field_opt_nonneg(o, "cost_cv", 0, &p->cost_cv, w));
    p->nscaling = 0;
    const json_t *sc = json_object_get(o, "scaling");
    if (sc && !json_is_null(sc)) {
        if (!json_is_array(sc)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'scaling' is not an array", w);
        if (json_array_size(sc) > DLP_PIPELINE_MAX_SCALING)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'scaling' has more than %d points", w, DLP_PIPELINE_MAX_SCALING);
        for (size_t i = 0; i < json_array_size(sc); i++) {
            char ws[360];
            snprintf(ws, sizeof ws, "%s: scaling[%zu]", w, i);
            const json_t *e = json_array_get(sc, i);
            DLP_CHECK(dlp_field_int(e, "threads", 1, 4096, &v, ws));
            dlp_scaling_point *pt = &p->scaling[p->nscaling++];
            pt->threads = (int)v;
            DLP_CHECK(dlp_field_pos(e, "efficiency", &pt->efficiency, ws));
        }
    }
    return DLP_OK;
}

static dlp_status pipeline_from_json(const json_t *o, const char *where, dlp_pipeline_profile *p) {
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'pipeline' is missing or not an object", where);
    char w[320];
    snprintf(w, sizeof w, "%s: pipeline", where);
    DLP_CHECK(dlp_field_str(o, "name", p->name, sizeof p->name, w));
    return dlp_pipeline_coeffs_from_json(o, w, p);
}

static json_t *pipeline_to_json(const dlp_pipeline_profile *p) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "dct_scaling", json_integer(p->dct_scaling));
    json_object_set_new(o, "crop_window", json_integer(p->crop_window));
    if (p->dct_scale_mask) json_object_set_new(o, "dct_scale_mask", json_integer(p->dct_scale_mask));
    json_object_set_new(o, "read_per_file_s", json_real(p->read_per_file_s));
    json_object_set_new(o, "read_per_byte_s", json_real(p->read_per_byte_s));
    json_object_set_new(o, "decode_per_image_s", json_real(p->decode_per_image_s));
    json_object_set_new(o, "decode_per_pixel_s", json_real(p->decode_per_pixel_s));
    json_object_set_new(o, "decode_per_byte_s", json_real(p->decode_per_byte_s));
    json_object_set_new(o, "augment_per_image_s", json_real(p->augment_per_image_s));
    json_object_set_new(o, "augment_per_in_pixel_s", json_real(p->augment_per_in_pixel_s));
    json_object_set_new(o, "augment_per_out_pixel_s", json_real(p->augment_per_out_pixel_s));
    json_object_set_new(o, "loader_cost_scale", json_real(p->loader_cost_scale > 0 ? p->loader_cost_scale : 1));
    json_object_set_new(o, "cost_cv", json_real(p->cost_cv));
    json_t *a = json_array();
    for (int i = 0; i < p->nscaling; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "threads", json_integer(p->scaling[i].threads));
        json_object_set_new(e, "efficiency", json_real(p->scaling[i].efficiency));
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "scaling", a);
    json_object_set_new(o, "oversub_efficiency", json_real(p->oversub_efficiency));
    return o;
}

// --- devices ---------------------------------------------------------------------------------------------------------

const dlp_rate *dlp_device_find_rate(const dlp_device_profile *d, dlp_task task, dlp_prec prec, int threads) {
    return dlp_device_find_rate_for(d, task, prec, threads, NULL, 0);
}

static double size_distance(int a, int b) {
    double x = a > 0 ? a : 224, y = b > 0 ? b : 224;
    return fabs(log(x / y));
}

const dlp_rate *dlp_device_find_rate_for(const dlp_device_profile *d, dlp_task task, dlp_prec prec, int threads,
                                         const char *model, int size) {
    const dlp_rate *below = NULL, *above = NULL;
    for (int i = 0; i < d->nrates; i++) {
        const dlp_rate *r = &d->rates[i];
        if (r->task != task || r->prec != prec) continue;
        if (threads <= 0 || r->threads <= threads) {
            if (!below || r->threads > below->threads) below = r;
        } else if (!above || r->threads < above->threads) {
            above = r;
        }
    }
    const dlp_rate *pick = below ? below : above;
    if (!pick || (!(model && model[0]) && size <= 0)) return pick;
    const dlp_rate *best = pick;
    double best_score = 1e300;
    for (int i = 0; i < d->nrates; i++) {
        const dlp_rate *r = &d->rates[i];
        if (r->task != task || r->prec != prec || r->threads != pick->threads) continue;
        double score = (model && model[0] && r->model[0] && strcmp(model, r->model) != 0) ? 100 : 0;
        if (size > 0) score += size_distance(size, r->size);
        if (score < best_score) {
            best_score = score;
            best = r;
        }
    }
    return best;
}

const dlp_contention_point *dlp_device_find_contention(const dlp_device_profile *d, int threads, int workers) {
    const dlp_contention_point *best = NULL;
    double best_score = 1e300;
    for (int i = 0; i < d->ncontention; i++) {
        const dlp_contention_point *c = &d->contention[i];
        double score = 1000.0 * abs(c->threads - threads) + abs(c->workers - workers);
        if (score < best_score) {
            best_score = score;
            best = c;
        }
    }
    return best;
}

static dlp_status rate_from_json(const json_t *o, const char *where, dlp_rate *r) {
    memset(r, 0, sizeof *r);
    char s[32];
    DLP_CHECK(dlp_field_str(o, "task", s, sizeof s, where));
    if (strcmp(s, "train") == 0) r->task = DLP_TASK_TRAIN;
    else if (strcmp(s, "infer") == 0) r->task = DLP_TASK_INFER;
    else return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'task' is '%s' (train|infer)", where, s);
    DLP_CHECK(dlp_field_str(o, "precision", s, sizeof s, where));
    if (dlp_prec_parse(s, &r->prec) != DLP_OK)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'precision' is '%s' (fp32|tf32|bf16|fp16|int8)", where, s);
    int64_t v = 0;
    if (json_object_get(o, "threads")) DLP_CHECK(dlp_field_int(o, "threads", 0, 4096, &v, where));
    r->threads = (int)v;
    v = 0;
    if (json_object_get(o, "batch_ref")) DLP_CHECK(dlp_field_int(o, "batch_ref", 0, 1 << 20, &v, where));
    r->batch_ref = (int)v;
    DLP_CHECK(dlp_field_opt_str(o, "model", r->model, sizeof r->model, where));
    v = 0;
    if (json_object_get(o, "size")) DLP_CHECK(dlp_field_int(o, "size", 0, 1 << 16, &v, where));
    r->size = (int)v;
    DLP_CHECK(dlp_field_nonneg(o, "t0_s", &r->t0_s, where));
    DLP_CHECK(dlp_field_pos(o, "per_image_s", &r->per_image_s, where));
    DLP_CHECK(dlp_field_opt_nonneg(o, "update_s", 0, &r->update_s, where));
    DLP_CHECK(dlp_field_opt_nonneg(o, "cores_busy", 0, &r->cores_busy, where));
    const json_t *e = json_object_get(o, "estimate");
    if (e && !json_is_boolean(e)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'estimate' is not true/false", where);
    r->estimate = e && json_is_true(e);
    DLP_CHECK(dlp_field_opt_str(o, "basis", r->basis, sizeof r->basis, where));
    return DLP_OK;
}

dlp_status dlp_device_from_json(const json_t *o, const char *where, dlp_device_profile *d) {
    memset(d, 0, sizeof *d);
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not an object", where);
    DLP_CHECK(dlp_field_str(o, "name", d->name, sizeof d->name, where));
    char w[320];
    snprintf(w, sizeof w, "%s (%s)", where, d->name);
    char kind[16];
    DLP_CHECK(dlp_field_str(o, "kind", kind, sizeof kind, w));
    if (strcmp(kind, "cpu") == 0) d->kind = DLP_DEVICE_CPU;
    else if (strcmp(kind, "gpu") == 0) d->kind = DLP_DEVICE_GPU;
    else return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'kind' is '%s' (cpu|gpu)", w, kind);
    DLP_CHECK(dlp_field_opt_str(o, "source", d->source, sizeof d->source, w));
    DLP_CHECK(dlp_field_opt_pos(o, "fwd_fraction", 1.0 / 3.0, &d->fwd_fraction, w));
    if (d->fwd_fraction >= 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'fwd_fraction' must be < 1 (got %g)", w, d->fwd_fraction);
    DLP_CHECK(dlp_field_opt_nonneg(o, "h2d_bytes_per_s", 0, &d->h2d_bytes_per_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(o, "h2d_pageable_bytes_per_s", 0, &d->h2d_pageable_bytes_per_s, w));
    const json_t *ov = json_object_get(o, "h2d_overlap");
    if (ov && !json_is_boolean(ov)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'h2d_overlap' is not true/false", w);
    d->h2d_overlap = ov ? json_is_true(ov) : 0;
    DLP_CHECK(dlp_field_opt_pos(o, "contention_efficiency", 1.0, &d->contention_efficiency, w));
    DLP_CHECK(dlp_field_opt_nonneg(o, "mem_bytes", 0, &d->mem_bytes, w));
    DLP_CHECK(dlp_field_opt_nonneg(o, "power_w", 0, &d->power_w, w));
    DLP_CHECK(dlp_field_opt_nonneg(o, "price_usd", 0, &d->price_usd, w));
    const json_t *rates = json_object_get(o, "rates");
    if (!json_is_array(rates) || json_array_size(rates) == 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'rates' is missing or not a non-empty array", w);
    if (json_array_size(rates) > DLP_DEVICE_MAX_RATES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'rates' has more than %d rows", w, DLP_DEVICE_MAX_RATES);
    for (size_t i = 0; i < json_array_size(rates); i++) {
        char wr[360];
        snprintf(wr, sizeof wr, "%s: rates[%zu]", w, i);
        DLP_CHECK(rate_from_json(json_array_get(rates, i), wr, &d->rates[d->nrates++]));
    }
    const json_t *cn = json_object_get(o, "contention");
    if (cn && !json_is_null(cn)) {
        if (!json_is_array(cn)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'contention' is not an array", w);
        if (json_array_size(cn) > DLP_DEVICE_MAX_CONTENTION)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'contention' has more than %d points", w, DLP_DEVICE_MAX_CONTENTION);
        for (size_t i = 0; i < json_array_size(cn); i++) {
            char wc[360];
            snprintf(wc, sizeof wc, "%s: contention[%zu]", w, i);
            const json_t *e = json_array_get(cn, i);
            dlp_contention_point *pt = &d->contention[d->ncontention++];
            int64_t iv;
            DLP_CHECK(dlp_field_int(e, "threads", 1, 4096, &iv, wc));
            pt->threads = (int)iv;
            DLP_CHECK(dlp_field_int(e, "workers", 1, 4096, &iv, wc));
            pt->workers = (int)iv;
            DLP_CHECK(dlp_field_pos(e, "compute_share", &pt->compute_share, wc));
            DLP_CHECK(dlp_field_pos(e, "loader_share", &pt->loader_share, wc));
        }
    }
    return dlp_device_validate(d, where);
}

json_t *dlp_device_to_json(const dlp_device_profile *d) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "kind", json_string(d->kind == DLP_DEVICE_CPU ? "cpu" : "gpu"));
    json_object_set_new(o, "source", json_string(d->source));
    json_object_set_new(o, "fwd_fraction", json_real(d->fwd_fraction));
    json_object_set_new(o, "h2d_bytes_per_s", json_real(d->h2d_bytes_per_s));
    json_object_set_new(o, "h2d_pageable_bytes_per_s", json_real(d->h2d_pageable_bytes_per_s));
    json_object_set_new(o, "h2d_overlap", json_boolean(d->h2d_overlap));
    json_object_set_new(o, "contention_efficiency", json_real(d->contention_efficiency));
    json_object_set_new(o, "mem_bytes", json_real(d->mem_bytes));
    json_object_set_new(o, "power_w", json_real(d->power_w));
    json_object_set_new(o, "price_usd", json_real(d->price_usd));
    json_t *a = json_array();
    for (int i = 0; i < d->nrates; i++) {
        const dlp_rate *r = &d->rates[i];
        json_t *e = json_object();
        json_object_set_new(e, "task", json_string(dlp_task_name(r->task)));
        json_object_set_new(e, "precision", json_string(dlp_prec_name(r->prec)));
        json_object_set_new(e, "threads", json_integer(r->threads));
        json_object_set_new(e, "batch_ref", json_integer(r->batch_ref));
        if (r->model[0]) json_object_set_new(e, "model", json_string(r->model));
        if (r->size) json_object_set_new(e, "size", json_integer(r->size));
        json_object_set_new(e, "t0_s", json_real(r->t0_s));
        json_object_set_new(e, "per_image_s", json_real(r->per_image_s));
        json_object_set_new(e, "update_s", json_real(r->update_s));
        json_object_set_new(e, "cores_busy", json_real(r->cores_busy));
        json_object_set_new(e, "estimate", json_boolean(r->estimate));
        json_object_set_new(e, "basis", json_string(r->basis));
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "rates", a);
    if (d->ncontention) {
        json_t *ca = json_array();
        for (int i = 0; i < d->ncontention; i++) {
            const dlp_contention_point *c = &d->contention[i];
            json_array_append_new(ca, json_pack("{s:i, s:i, s:f, s:f}", "threads", c->threads, "workers", c->workers,
                                                "compute_share", c->compute_share, "loader_share", c->loader_share));
        }
        json_object_set_new(o, "contention", ca);
    }
    return o;
}

dlp_status dlp_device_validate(const dlp_device_profile *d, const char *where) {
    if (!d->name[0]) return DLP_ERR(DLP_ERR_FORMAT, "%s: device has no name", where);
    if (!(d->fwd_fraction > 0 && d->fwd_fraction < 1))
        return DLP_ERR(DLP_ERR_FORMAT, "%s (%s): fwd_fraction must be in (0, 1) (got %g)", where, d->name, d->fwd_fraction);
    if (!(d->contention_efficiency > 0 && d->contention_efficiency <= 1.5))
        return DLP_ERR(DLP_ERR_FORMAT, "%s (%s): contention_efficiency must be in (0, 1.5] (got %g)", where, d->name,
                       d->contention_efficiency);
    if (!(d->h2d_bytes_per_s >= 0) || !isfinite(d->h2d_bytes_per_s))
        return DLP_ERR(DLP_ERR_FORMAT, "%s (%s): h2d_bytes_per_s must be >= 0", where, d->name);
    if (d->nrates < 1) return DLP_ERR(DLP_ERR_FORMAT, "%s (%s): device has no rates", where, d->name);
    for (int i = 0; i < d->ncontention; i++) {
        const dlp_contention_point *c = &d->contention[i];
        if (c->threads < 1 || c->workers < 1 || !(c->compute_share > 0 && c->compute_share <= 1.2) ||
            !(c->loader_share > 0 && c->loader_share <= 1.2))
            return DLP_ERR(DLP_ERR_FORMAT, "%s (%s): contention[%d] needs threads, workers >= 1 and shares in (0, 1.2] "
                           "(got %d, %d, %g, %g)", where, d->name, i, c->threads, c->workers, c->compute_share,
                           c->loader_share);
    }
    for (int i = 0; i < d->nrates; i++) {
        const dlp_rate *r = &d->rates[i];
        if (!(r->per_image_s > 0) || !isfinite(r->per_image_s) || !(r->t0_s >= 0) || !(r->update_s >= 0) ||
            !(r->cores_busy >= 0) || !isfinite(r->t0_s) || !isfinite(r->update_s))
            return DLP_ERR(DLP_ERR_FORMAT,
                           "%s (%s): rates[%d] (%s %s) needs per_image_s > 0 and t0_s, update_s, cores_busy >= 0 "
                           "(got %g, %g, %g, %g)",
                           where, d->name, i, dlp_task_name(r->task), dlp_prec_name(r->prec), r->per_image_s, r->t0_s,
                           r->update_s, r->cores_busy);
    }
    return DLP_OK;
}

// --- the profile -----------------------------------------------------------------------------------------------------

void dlp_profile_init(dlp_profile *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->source, sizeof p->source, "probe");
    p->host.cores = 1;
    p->host.threads = 1;
    p->host.core_speed_rel = 1;
    p->net.gpus_per_uplink = 1;
}

dlp_status dlp_profile_validate(const dlp_profile *p, const char *where) {
    const dlp_host_profile *h = &p->host;
    if (h->cores < 1 || h->threads < h->cores)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: host needs cores >= 1 and threads >= cores (got %d, %d)", where, h->cores,
                       h->threads);
    if (!(h->smt_yield >= 0 && h->smt_yield <= 1))
        return DLP_ERR(DLP_ERR_FORMAT, "%s: host.smt_yield must be between 0 and 1 (got %g)", where, h->smt_yield);
    const dlp_pipeline_profile *pp = &p->pipeline;
    double sum = pp->read_per_file_s + pp->decode_per_image_s + pp->decode_per_pixel_s + pp->decode_per_byte_s +
                 pp->augment_per_image_s + pp->augment_per_in_pixel_s + pp->augment_per_out_pixel_s;
    if (!(sum > 0)) return DLP_ERR(DLP_ERR_FORMAT, "%s: pipeline has no positive cost coefficient", where);
    for (int i = 1; i < pp->nscaling; i++)
        if (pp->scaling[i].threads <= pp->scaling[i - 1].threads)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: pipeline.scaling must be sorted by threads (point %d)", where, i);
    if (p->devices_per_node < 0) return DLP_ERR(DLP_ERR_FORMAT, "%s: devices_per_node must be >= 0", where);
    if (p->net.gpus_per_uplink < 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: interconnect.gpus_per_uplink must be >= 1", where);
    for (int i = 0; i < p->ndevices; i++) {
        char w[320];
        snprintf(w, sizeof w, "%s: devices[%d]", where, i);
        DLP_CHECK(dlp_device_validate(&p->devices[i], w));
    }
    return DLP_OK;
}

static const json_t *req_obj(const json_t *o, const char *key, const char *where, dlp_status *st) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_object(v)) *st = DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not an object", where, key);
    return v;
}

dlp_status dlp_profile_from_json(const json_t *o, const char *where, dlp_profile *p) {
    dlp_profile_init(p);
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not a JSON object", where);
    const char *schema;
    DLP_CHECK(dlp_json_get_str(o, "schema", &schema, where));
    if (strcmp(schema, DLP_PROFILE_SCHEMA) != 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: schema '%s' is not supported (this dlperf reads %s)", where, schema,
                       DLP_PROFILE_SCHEMA);
    DLP_CHECK(dlp_field_str(o, "source", p->source, sizeof p->source, where));
    DLP_CHECK(dlp_field_opt_str(o, "id", p->id, sizeof p->id, where));
    DLP_CHECK(dlp_field_opt_str(o, "name", p->name, sizeof p->name, where));
    DLP_CHECK(dlp_field_opt_str(o, "created", p->created, sizeof p->created, where));
    DLP_CHECK(dlp_field_opt_str(o, "notes", p->notes, sizeof p->notes, where));
    dlp_status st = DLP_OK;
    char w[320];
    int64_t v;

    const json_t *h = req_obj(o, "host", where, &st);
    DLP_CHECK(st);
    snprintf(w, sizeof w, "%s: host", where);
    DLP_CHECK(dlp_field_opt_str(h, "cpu_model", p->host.cpu_model, sizeof p->host.cpu_model, w));
    DLP_CHECK(dlp_field_int(h, "cores", 1, 1 << 16, &v, w));
    p->host.cores = (int)v;
    DLP_CHECK(dlp_field_int(h, "threads", 1, 1 << 17, &v, w));
    p->host.threads = (int)v;
    DLP_CHECK(dlp_field_opt_nonneg(h, "smt_yield", 0, &p->host.smt_yield, w));
    DLP_CHECK(dlp_field_opt_pos(h, "core_speed_rel", 1, &p->host.core_speed_rel, w));
    DLP_CHECK(dlp_field_opt_nonneg(h, "mhz", 0, &p->host.mhz, w));
    DLP_CHECK(dlp_field_opt_nonneg(h, "mem_bytes", 0, &p->host.mem_bytes, w));
    DLP_CHECK(dlp_field_opt_nonneg(h, "mem_bw_bytes_per_s", 0, &p->host.mem_bw_bytes_per_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(h, "loop_overhead_s", 0, &p->host.loop_overhead_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(h, "wake_latency_busy_s", 0, &p->host.wake_latency_busy_s, w));

    const json_t *s = req_obj(o, "storage", where, &st);
    DLP_CHECK(st);
    snprintf(w, sizeof w, "%s: storage", where);
    DLP_CHECK(dlp_field_opt_str(s, "desc", p->storage.desc, sizeof p->storage.desc, w));
    DLP_CHECK(dlp_field_opt_nonneg(s, "cold_read_bytes_per_s", 0, &p->storage.cold_read_bytes_per_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(s, "cold_stream_bytes_per_s", 0, &p->storage.cold_stream_bytes_per_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(s, "cold_latency_s", 0, &p->storage.cold_latency_s, w));
    DLP_CHECK(dlp_field_opt_nonneg(s, "cold_latency_busy_s", 0, &p->storage.cold_latency_busy_s, w));
    DLP_CHECK(dlp_field_nonneg(s, "page_cache_bytes", &p->storage.page_cache_bytes, w));

    DLP_CHECK(pipeline_from_json(json_object_get(o, "pipeline"), where, &p->pipeline));

    DLP_CHECK(dlp_field_int(o, "devices_per_node", 0, 1024, &v, where));
    p->devices_per_node = (int)v;
    const json_t *devs = json_object_get(o, "devices");
    if (!json_is_array(devs)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'devices' is missing or not an array", where);
    if (json_array_size(devs) > DLP_PROFILE_MAX_DEVICES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'devices' has more than %d entries", where, DLP_PROFILE_MAX_DEVICES);
    for (size_t i = 0; i < json_array_size(devs); i++) {
        snprintf(w, sizeof w, "%s: devices[%zu]", where, i);
        DLP_CHECK(dlp_device_from_json(json_array_get(devs, i), w, &p->devices[p->ndevices++]));
    }

    const json_t *n = json_object_get(o, "interconnect");
    if (n && !json_is_null(n)) {
        if (!json_is_object(n)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'interconnect' is not an object", where);
        snprintf(w, sizeof w, "%s: interconnect", where);
        DLP_CHECK(dlp_field_opt_nonneg(n, "pcie_uplink_bytes_per_s", 0, &p->net.pcie_uplink_bytes_per_s, w));
        v = 1;
        if (json_object_get(n, "gpus_per_uplink")) DLP_CHECK(dlp_field_int(n, "gpus_per_uplink", 1, 64, &v, w));
        p->net.gpus_per_uplink = (int)v;
        DLP_CHECK(dlp_field_opt_nonneg(n, "allreduce_busbw_bytes_per_s", 0, &p->net.allreduce_busbw_bytes_per_s, w));
        DLP_CHECK(dlp_field_opt_nonneg(n, "nic_bytes_per_s", 0, &p->net.nic_bytes_per_s, w));
    }
    const json_t *c = json_object_get(o, "cost");
    if (c && !json_is_null(c)) {
        if (!json_is_object(c)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'cost' is not an object", where);
        snprintf(w, sizeof w, "%s: cost", where);
        DLP_CHECK(dlp_field_opt_nonneg(c, "price_usd", 0, &p->cost.price_usd, w));
        v = 0;
        if (json_object_get(c, "price_year")) DLP_CHECK(dlp_field_int(c, "price_year", 1990, 2100, &v, w));
        p->cost.price_year = (int)v;
        DLP_CHECK(dlp_field_opt_nonneg(c, "power_w", 0, &p->cost.power_w, w));
        DLP_CHECK(dlp_field_opt_nonneg(c, "usd_per_hour", 0, &p->cost.usd_per_hour, w));
        DLP_CHECK(dlp_field_opt_nonneg(c, "usd_per_hour_alt", 0, &p->cost.usd_per_hour_alt, w));
    }
    const json_t *ds = json_object_get(o, "stats");
    if (ds && !json_is_null(ds)) {
        snprintf(w, sizeof w, "%s: stats", where);
        DLP_CHECK(dlp_dataset_stats_from_json(ds, w, &p->stats));
        p->has_stats = 1;
    }
    return dlp_profile_validate(p, where);
}

dlp_status dlp_profile_read(const char *path, dlp_profile *p) {
    json_t *o;
    DLP_CHECK(dlp_json_load(path, &o));
    dlp_status st = dlp_profile_from_json(o, path, p);
    json_decref(o);
    return st;
}

json_t *dlp_profile_to_json(const dlp_profile *p) {
    json_t *o = json_object();
    char when[32];
    json_object_set_new(o, "schema", json_string(DLP_PROFILE_SCHEMA));
    json_object_set_new(o, "source", json_string(p->source));
    json_object_set_new(o, "id", json_string(p->id));
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "created", json_string(p->created[0] ? p->created : dlp_wall_iso8601(when, sizeof when)));
    json_t *h = json_object();
    json_object_set_new(h, "cpu_model", json_string(p->host.cpu_model));
    json_object_set_new(h, "cores", json_integer(p->host.cores));
    json_object_set_new(h, "threads", json_integer(p->host.threads));
    json_object_set_new(h, "smt_yield", json_real(p->host.smt_yield));
    json_object_set_new(h, "core_speed_rel", json_real(p->host.core_speed_rel));
    json_object_set_new(h, "mhz", json_real(p->host.mhz));
    json_object_set_new(h, "mem_bytes", json_real(p->host.mem_bytes));
    json_object_set_new(h, "mem_bw_bytes_per_s", json_real(p->host.mem_bw_bytes_per_s));
    json_object_set_new(h, "loop_overhead_s", json_real(p->host.loop_overhead_s));
    json_object_set_new(h, "wake_latency_busy_s", json_real(p->host.wake_latency_busy_s));
    json_object_set_new(o, "host", h);
    json_t *s = json_object();
    json_object_set_new(s, "desc", json_string(p->storage.desc));
    json_object_set_new(s, "cold_read_bytes_per_s", json_real(p->storage.cold_read_bytes_per_s));
    json_object_set_new(s, "cold_stream_bytes_per_s", json_real(p->storage.cold_stream_bytes_per_s));
    json_object_set_new(s, "cold_latency_s", json_real(p->storage.cold_latency_s));
    json_object_set_new(s, "cold_latency_busy_s", json_real(p->storage.cold_latency_busy_s));
    json_object_set_new(s, "page_cache_bytes", json_real(p->storage.page_cache_bytes));
    json_object_set_new(o, "storage", s);
    json_object_set_new(o, "pipeline", pipeline_to_json(&p->pipeline));
    json_object_set_new(o, "devices_per_node", json_integer(p->devices_per_node));
    json_t *d = json_array();
    for (int i = 0; i < p->ndevices; i++) json_array_append_new(d, dlp_device_to_json(&p->devices[i]));
    json_object_set_new(o, "devices", d);
    json_t *n = json_object();
    json_object_set_new(n, "pcie_uplink_bytes_per_s", json_real(p->net.pcie_uplink_bytes_per_s));
    json_object_set_new(n, "gpus_per_uplink", json_integer(p->net.gpus_per_uplink));
    json_object_set_new(n, "allreduce_busbw_bytes_per_s", json_real(p->net.allreduce_busbw_bytes_per_s));
    json_object_set_new(n, "nic_bytes_per_s", json_real(p->net.nic_bytes_per_s));
    json_object_set_new(o, "interconnect", n);
    json_t *c = json_object();
    json_object_set_new(c, "price_usd", json_real(p->cost.price_usd));
    if (p->cost.price_year) json_object_set_new(c, "price_year", json_integer(p->cost.price_year));
    json_object_set_new(c, "power_w", json_real(p->cost.power_w));
    json_object_set_new(c, "usd_per_hour", json_real(p->cost.usd_per_hour));
    json_object_set_new(c, "usd_per_hour_alt", json_real(p->cost.usd_per_hour_alt));
    json_object_set_new(o, "cost", c);
    if (p->has_stats) json_object_set_new(o, "stats", dlp_dataset_stats_to_json(&p->stats));
    json_object_set_new(o, "notes", json_string(p->notes));
    return o;
}

dlp_status dlp_profile_write(const dlp_profile *p, const char *path) {
    DLP_CHECK(dlp_profile_validate(p, path));
    json_t *o = dlp_profile_to_json(p);
    if (!o) return DLP_ERR(DLP_ERR_NOMEM, "out of memory writing %s", path);
    dlp_status st = dlp_json_write(o, path, DLP_WRITE_NOCLOBBER);
    json_decref(o);
    return st;
}

const dlp_device_profile *dlp_profile_find_device(const dlp_profile *p, const char *name) {
    for (int i = 0; i < p->ndevices; i++)
        if (strcmp(p->devices[i].name, name) == 0) return &p->devices[i];
    return NULL;
}
