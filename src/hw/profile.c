// hw/profile: machine profiles — types, JSON reader and writer with validation, lookups.
#include "hw/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/fields.h"

const char *const dlp_prec_names[DLP_PREC_COUNT] = {"fp32", "tf32", "bf16", "fp16", "int8"};

#define PREC_CHOICES {"auto", DLP_PRECISION_AUTO}, {"fp32", DLP_PREC_FP32}, {"tf32", DLP_PREC_TF32}, \
                     {"bf16", DLP_PREC_BF16}, {"fp16", DLP_PREC_FP16}
const dlp_opt_choice dlp_prec_choices[] = {PREC_CHOICES, {"int8", DLP_PREC_INT8}, {NULL, 0}};
const dlp_opt_choice dlp_prec_train_choices[] = {PREC_CHOICES, {NULL, 0}};
#undef PREC_CHOICES

const char *dlp_prec_name(dlp_prec p) { return (unsigned)p < DLP_PREC_COUNT ? dlp_prec_names[p] : "?"; }

dlp_status dlp_prec_parse(const char *s, dlp_prec *out) {
    for (int i = 0; i < DLP_PREC_COUNT; i++)
        if (s && strcmp(s, dlp_prec_names[i]) == 0) {
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

const char *const dlp_task_names[2] = {"train", "infer"};

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

// A measured rate in bytes/s: 0 (not measured) or at least 1 KB/s. Smaller is a corrupt file, and taken it would
// print times and costs of 1e300.
#define RATE_ROW(F, m) \
    { F(m, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_RANGE | DLP_FF_UNSET0), .lo = 1e3, .hi = DLP_FIELD_NUM_MAX }
#define SIZE_F(m, t, fl) DLP_FIELD(dlp_image_size, m, t, fl)
static const dlp_field_def k_image_size_fields[] = {
    {SIZE_F(w, DLP_FT_INT, 0), .min = 1, .max = 1 << 20},  // pixels
    {SIZE_F(h, DLP_FT_INT, 0), .min = 1, .max = 1 << 20},
    {SIZE_F(weight, DLP_FT_NUM, DLP_FF_POS)},                              // share of the images (normalized)
    // 0: the dataset's; at most 1 GB (dlperf decodes at most 100 Mpixels an image: far below 1 GB of JPEG)
    {SIZE_F(mean_bytes, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1000000000},
    {0}};

static dlp_status stats_id_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_dataset_stats *s = rec;
    return s->name[0] ? DLP_OK : dlp_field_opt_str(o, key, s->name, sizeof s->name, where);
}

// A required array of at least one element (its length limit and message are the caller's).
static dlp_status nonempty_array(const json_t *o, const char *key, const char *where, const json_t **a) {
    *a = json_object_get(o, key);
    if (!json_is_array(*a) || json_array_size(*a) == 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not a non-empty array", where, key);
    return DLP_OK;
}

static dlp_status stats_sizes_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_dataset_stats *s = rec;
    const json_t *sz;
    DLP_CHECK(nonempty_array(o, key, where, &sz));
    if (json_array_size(sz) > DLP_DATASET_MAX_SIZES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has %zu entries (at most %d)", where, key, json_array_size(sz),
                       DLP_DATASET_MAX_SIZES);
    return dlp_fields_read_array(sz, k_image_size_fields, s->sizes, sizeof s->sizes[0], &s->nsizes, where, key);
}

static json_t *stats_sizes_write(const void *rec) {
    const dlp_dataset_stats *s = rec;
    return dlp_fields_write_array(k_image_size_fields, s->sizes, sizeof s->sizes[0], s->nsizes);
}

#define STATS_F(m, t, fl) DLP_FIELD(dlp_dataset_stats, m, t, fl)
static const dlp_field_def k_stats_fields[] = {
    {STATS_F(name, DLP_FT_STR, DLP_FF_OPT)},
    {DLP_FIELD_CB("id", stats_id_read, NULL)},  // read only: the name when 'name' is absent
    {STATS_F(images, DLP_FT_INT, 0), .min = 1, .max = 1000000000000},  // 1e12: no dataset is larger
    {STATS_F(mean_bytes, DLP_FT_NUM, DLP_FF_POS), .max = 1000000000},  // mean JPEG file size (1 GB at most)
    {STATS_F(progressive_fraction, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_RANGE), .lo = 0, .hi = 1},
    {DLP_FIELD_CB("sizes", stats_sizes_read, stats_sizes_write)},
    {0}};

dlp_status dlp_dataset_stats_from_json(const json_t *o, const char *where, dlp_dataset_stats *s) {
    DLP_CHECK(dlp_fields_read_record(o, k_stats_fields, s, sizeof *s, where));
    return dlp_dataset_stats_normalize(s, where);
}

json_t *dlp_dataset_stats_to_json(const dlp_dataset_stats *s) {
    json_t *o = json_object();
    dlp_fields_write(o, k_stats_fields, s);
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

static dlp_status scaling_read(const json_t *o, const char *key, const char *where, void *rec);
static json_t *scaling_write(const void *rec);

static dlp_status check_scale_mask(const dlp_field_def *f, const void *member, const char *where) {
    unsigned mask;
    memcpy(&mask, member, sizeof mask);
    if (mask & 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has bit 0 set (scales are bits 1..8)", where, f->key);
    return DLP_OK;
}

#define PIPE_F(m, t, fl) DLP_FIELD(dlp_pipeline_profile, m, t, fl)
#define PIPE_COST(m) {PIPE_F(m, DLP_FT_NUM, DLP_FF_NONNEG), .max = 3600}  // CPU seconds on one thread
// The coefficients: everything of a pipeline but its name (the catalog's pipelines.json has them too).
static const dlp_field_def k_pipeline_coeff_fields[] = {
    {PIPE_F(dct_scaling, DLP_FT_INT, 0), .min = 0, .max = 1},  // 0/1
    {PIPE_F(crop_window, DLP_FT_INT, 0), .min = 0, .max = 1},  // 0/1
    {PIPE_F(dct_scale_mask, DLP_FT_INT, DLP_FF_OPT | DLP_FF_OMIT0), .min = 0, .max = 0x1FE,
     .check = check_scale_mask},  // bit M: scale M/8 allowed (0: all)
    PIPE_COST(read_per_file_s),
    PIPE_COST(read_per_byte_s),
    PIPE_COST(decode_per_image_s),
    PIPE_COST(decode_per_pixel_s),
    PIPE_COST(decode_per_byte_s),
    PIPE_COST(augment_per_image_s),
    PIPE_COST(augment_per_in_pixel_s),
    PIPE_COST(augment_per_out_pixel_s),
    {PIPE_F(loader_cost_scale, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_POS | DLP_FF_RANGE | DLP_FF_DEFNP), .def = 1, .lo = 0.25,
     .hi = 4},  // the loader's CPU per image over the stage fits
    {PIPE_F(cost_cv, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},  // coefficient of variation of one image's cost
    {DLP_FIELD_CB("scaling", scaling_read, scaling_write)},
    {PIPE_F(oversub_efficiency, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},  // fraction of a core per extra thread
    {PIPE_F(work_img_per_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1e9},  // probe: work speed
    {0}};

static const dlp_field_def k_pipeline_fields[] = {
    {PIPE_F(name, DLP_FT_STR, 0)},
    {.key = "coefficients", .type = DLP_FT_INLINE, .sub = k_pipeline_coeff_fields},
    {0}};

#define SCALE_F(m, t, fl) DLP_FIELD(dlp_scaling_point, m, t, fl)
static const dlp_field_def k_scaling_fields[] = {
    {SCALE_F(threads, DLP_FT_INT, 0), .min = 1, .max = 4096},
    // rate at `threads` / (threads x the single-thread rate)
    {SCALE_F(efficiency, DLP_FT_NUM, DLP_FF_POS | DLP_FF_RANGE), .lo = 0.01, .hi = 1.5},
    {SCALE_F(speed_rel, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1000},  // probe: speed measured at
    {0}};

// An optional array of measured points (absent or null: none), at most max of them.
static dlp_status read_points(const json_t *o, const char *key, const char *where, const dlp_field_def *defs,
                              void *elems, size_t elem_size, int max, int *n) {
    *n = 0;
    const json_t *a = json_object_get(o, key);
    if (!a || json_is_null(a)) return DLP_OK;
    if (!json_is_array(a)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is not an array", where, key);
    if (json_array_size(a) > (size_t)max)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has more than %d points", where, key, max);
    return dlp_fields_read_array(a, defs, elems, elem_size, n, where, key);
}

static dlp_status scaling_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_pipeline_profile *p = rec;
    return read_points(o, key, where, k_scaling_fields, p->scaling, sizeof p->scaling[0], DLP_PIPELINE_MAX_SCALING,
                       &p->nscaling);
}

static json_t *scaling_write(const void *rec) {
    const dlp_pipeline_profile *p = rec;
    return dlp_fields_write_array(k_scaling_fields, p->scaling, sizeof p->scaling[0], p->nscaling);
}

dlp_status dlp_pipeline_coeffs_from_json(const json_t *o, const char *w, dlp_pipeline_profile *p) {
    return dlp_fields_read(o, k_pipeline_coeff_fields, p, w);
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

static const char *const k_kind_names[] = {"cpu", "gpu"};  // by dlp_device_kind

#define RATE_F(m, t, fl) DLP_FIELD(dlp_rate, m, t, fl)
static const dlp_field_def k_rate_fields[] = {
    {RATE_F(task, DLP_FT_ENUM, 0), .names = dlp_task_names, .nnames = 2},
    {DLP_FIELD_AS(dlp_rate, "precision", prec, DLP_FT_ENUM, 0), .names = dlp_prec_names, .nnames = DLP_PREC_COUNT},
    {RATE_F(threads, DLP_FT_INT, DLP_FF_OPT), .min = 0, .max = 4096},          // cpu device; 0 for GPUs
    {RATE_F(batch_ref, DLP_FT_INT, DLP_FF_OPT), .min = 0, .max = 1 << 20},     // 0: not stated
    {RATE_F(model, DLP_FT_STR, DLP_FF_OPT | DLP_FF_OMIT0)},                     // "": any
    {RATE_F(size, DLP_FT_INT, DLP_FF_OPT | DLP_FF_OMIT0), .min = 0, .max = 1 << 16},  // image size; 0: any
    {RATE_F(t0_s, DLP_FT_NUM, DLP_FF_NONNEG), .max = 3600},
    {RATE_F(per_image_s, DLP_FT_NUM, DLP_FF_POS), .max = 3600},                // per image of reference work
    {RATE_F(update_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 3600},
    {RATE_F(cores_busy, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},
    {RATE_F(estimate, DLP_FT_BOOL, 0)},
    {RATE_F(basis, DLP_FT_STR, DLP_FF_OPT)},
    {RATE_F(speed_rel, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1000},  // probe: speed measured at
    {RATE_F(share_exp, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 8},  // probe: time ~ share^-exp
    {RATE_F(work_gflops, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1e7},  // probe: work speed
    {0}};

#define CONT_F(m, t, fl) DLP_FIELD(dlp_contention_point, m, t, fl)
static const dlp_field_def k_contention_fields[] = {
    {CONT_F(threads, DLP_FT_INT, 0), .min = 1, .max = 4096},  // compute threads
    {CONT_F(workers, DLP_FT_INT, 0), .min = 1, .max = 4096},  // loader threads
    {CONT_F(compute_share, DLP_FT_NUM, DLP_FF_POS)},          // of compute's rate alone
    {CONT_F(loader_share, DLP_FT_NUM, DLP_FF_POS)},           // of the loader's rate alone
    {0}};

static dlp_status rates_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_device_profile *d = rec;
    const json_t *rates;
    DLP_CHECK(nonempty_array(o, key, where, &rates));
    if (json_array_size(rates) > DLP_DEVICE_MAX_RATES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has more than %d rows", where, key, DLP_DEVICE_MAX_RATES);
    return dlp_fields_read_array(rates, k_rate_fields, d->rates, sizeof d->rates[0], &d->nrates, where, key);
}

static json_t *rates_write(const void *rec) {
    const dlp_device_profile *d = rec;
    return dlp_fields_write_array(k_rate_fields, d->rates, sizeof d->rates[0], d->nrates);
}

static dlp_status contention_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_device_profile *d = rec;
    return read_points(o, key, where, k_contention_fields, d->contention, sizeof d->contention[0],
                       DLP_DEVICE_MAX_CONTENTION, &d->ncontention);
}

static json_t *contention_write(const void *rec) {  // none measured: no key
    const dlp_device_profile *d = rec;
    if (!d->ncontention) return NULL;
    return dlp_fields_write_array(k_contention_fields, d->contention, sizeof d->contention[0], d->ncontention);
}

#define DEV_F(m, t, fl) DLP_FIELD(dlp_device_profile, m, t, fl)
static const dlp_field_def k_device_fields[] = {
    {DEV_F(name, DLP_FT_STR, DLP_FF_TITLE)},
    {DEV_F(kind, DLP_FT_ENUM, 0), .names = k_kind_names, .nnames = 2, .max = 16},
    {DEV_F(source, DLP_FT_STR, DLP_FF_OPT)},  // "measured", "catalog", "custom"
    {DEV_F(fwd_fraction, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_POS | DLP_FF_BELOW), .def = 1.0 / 3.0, .hi = 1},
    RATE_ROW(DEV_F, h2d_bytes_per_s),           // pinned; 0: no copy
    RATE_ROW(DEV_F, h2d_pageable_bytes_per_s),
    {DEV_F(h2d_overlap, DLP_FT_BOOL, 0)},
    {DEV_F(contention_efficiency, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_POS), .def = 1},  // useful share of shared CPU
    {DEV_F(mem_bytes, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},
    {DEV_F(power_w, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000},
    {DEV_F(price_usd, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000000},
    {DLP_FIELD_CB("rates", rates_read, rates_write)},
    {DLP_FIELD_CB("contention", contention_read, contention_write)},
    {0}};

dlp_status dlp_device_from_json(const json_t *o, const char *where, dlp_device_profile *d) {
    DLP_CHECK(dlp_fields_read_record(o, k_device_fields, d, sizeof *d, where));
    return dlp_device_validate(d, where);
}

json_t *dlp_device_to_json(const dlp_device_profile *d) {
    json_t *o = json_object();
    dlp_fields_write(o, k_device_fields, d);
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

#define HOST_F(m, t, fl) DLP_FIELD(dlp_host_profile, m, t, fl)
static const dlp_field_def k_host_fields[] = {
    {HOST_F(cpu_model, DLP_FT_STR, DLP_FF_OPT)},
    {HOST_F(cores, DLP_FT_INT, 0), .min = 1, .max = 1 << 16},    // physical cores per node
    {HOST_F(threads, DLP_FT_INT, 0), .min = 1, .max = 1 << 17},  // hardware threads per node
    {HOST_F(smt_yield, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},  // a second hardware thread: fraction of a core
    {HOST_F(core_speed_rel, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_POS), .def = 1},  // to the development core
    {HOST_F(mhz, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},
    {HOST_F(mem_bytes, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG)},
    RATE_ROW(HOST_F, mem_bw_bytes_per_s),
    {HOST_F(loop_overhead_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 3600},      // per training step
    {HOST_F(wake_latency_busy_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 3600},  // per device op, every core busy
    {HOST_F(canary_gflops, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 1e9},  // the cores' speed while probed
    // its distribution over the probe's readings, one thread's, the steal time (absent in older profiles)
    {HOST_F(canary_p10_gflops, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1e9},
    {HOST_F(canary_p90_gflops, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1e9},
    {HOST_F(canary_samples, DLP_FT_INT, DLP_FF_OPT | DLP_FF_OMIT0), .min = 0, .max = 1 << 20},
    {HOST_F(canary1_gflops, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1e9},
    {HOST_F(cpu_share, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1},
    {HOST_F(cpu_share1, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1},
    {HOST_F(cpu_share_slowest, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_OMIT0), .max = 1},
    {HOST_F(steal_fraction, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_RANGE | DLP_FF_OMIT0), .lo = 0, .hi = 1},
    {0}};

#define STOR_F(m, t, fl) DLP_FIELD(dlp_storage_profile, m, t, fl)
static const dlp_field_def k_storage_fields[] = {
    {STOR_F(desc, DLP_FT_STR, DLP_FF_OPT)},
    RATE_ROW(STOR_F, cold_read_bytes_per_s),    // many readers together
    RATE_ROW(STOR_F, cold_stream_bytes_per_s),  // one reader
    {STOR_F(cold_latency_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 3600},           // per file, beyond the transfer
    {STOR_F(cold_latency_busy_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 3600},      // the same, every core busy
    {STOR_F(page_cache_bytes, DLP_FT_NUM, DLP_FF_NONNEG)},
    {0}};

#define NET_F(m, t, fl) DLP_FIELD(dlp_interconnect_profile, m, t, fl)
static const dlp_field_def k_interconnect_fields[] = {
    RATE_ROW(NET_F, pcie_uplink_bytes_per_s),  // shared by gpus_per_uplink GPUs
    {NET_F(gpus_per_uplink, DLP_FT_INT, DLP_FF_OPT), .def = 1, .min = 1, .max = 64},
    RATE_ROW(NET_F, allreduce_busbw_bytes_per_s),  // nccl-tests bus bandwidth
    RATE_ROW(NET_F, nic_bytes_per_s),              // per node
    {NET_F(nic_latency_s, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10},  // a ring step between nodes
    {0}};

#define COST_F(m, t, fl) DLP_FIELD(dlp_cost_profile, m, t, fl)
static const dlp_field_def k_cost_fields[] = {
    {COST_F(price_usd, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000000},
    {COST_F(price_year, DLP_FT_INT, DLP_FF_OPT | DLP_FF_OMIT0), .min = 1990, .max = 2100},
    {COST_F(power_w, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000},  // under training load
    {COST_F(usd_per_hour, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000000},
    {COST_F(usd_per_hour_alt, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG), .max = 10000000000},
    {0}};

static dlp_status schema_read(const json_t *o, const char *key, const char *where, void *rec) {
    const char *schema;
    DLP_CHECK(dlp_json_get_str(o, key, &schema, where));
    if (strcmp(schema, DLP_PROFILE_SCHEMA) != 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: schema '%s' is not supported (this dlperf reads %s)", where, schema,
                       DLP_PROFILE_SCHEMA);
    return DLP_OK;
}

static json_t *schema_write(const void *rec) { return json_string(DLP_PROFILE_SCHEMA); }

static dlp_status created_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_profile *p = rec;
    return dlp_field_opt_str(o, key, p->created, sizeof p->created, where);
}

static json_t *created_write(const void *rec) {  // now, when not set
    const dlp_profile *p = rec;
    char when[32];
    return json_string(p->created[0] ? p->created : dlp_wall_iso8601(when, sizeof when));
}

static dlp_status devices_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_profile *p = rec;
    const json_t *devs = json_object_get(o, key);
    if (!json_is_array(devs)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not an array", where, key);
    if (json_array_size(devs) > DLP_PROFILE_MAX_DEVICES)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has more than %d entries", where, key, DLP_PROFILE_MAX_DEVICES);
    for (size_t i = 0; i < json_array_size(devs); i++) {
        char w[320];
        snprintf(w, sizeof w, "%s: %s[%zu]", where, key, i);
        DLP_CHECK(dlp_device_from_json(json_array_get(devs, i), w, &p->devices[p->ndevices++]));
    }
    return DLP_OK;
}

static json_t *devices_write(const void *rec) {
    const dlp_profile *p = rec;
    json_t *d = json_array();
    for (int i = 0; i < p->ndevices; i++) json_array_append_new(d, dlp_device_to_json(&p->devices[i]));
    return d;
}

static dlp_status stats_read(const json_t *o, const char *key, const char *where, void *rec) {
    dlp_profile *p = rec;
    const json_t *ds = json_object_get(o, key);
    if (!ds || json_is_null(ds)) return DLP_OK;
    char w[320];
    snprintf(w, sizeof w, "%s: %s", where, key);
    DLP_CHECK(dlp_dataset_stats_from_json(ds, w, &p->stats));
    p->has_stats = 1;
    return DLP_OK;
}

static json_t *stats_write(const void *rec) {  // only when the profile has them
    const dlp_profile *p = rec;
    return p->has_stats ? dlp_dataset_stats_to_json(&p->stats) : NULL;
}

#define PROF_F(m, t, fl) DLP_FIELD(dlp_profile, m, t, fl)
static const dlp_field_def k_profile_fields[] = {
    {DLP_FIELD_CB("schema", schema_read, schema_write)},  // DLP_PROFILE_SCHEMA
    {PROF_F(source, DLP_FT_STR, 0)},                // "probe", "catalog"
    {PROF_F(id, DLP_FT_STR, DLP_FF_OPT)},
    {PROF_F(name, DLP_FT_STR, DLP_FF_OPT)},
    {DLP_FIELD_CB("created", created_read, created_write)},  // ISO 8601
    {PROF_F(host, DLP_FT_OBJ, 0), .sub = k_host_fields},
    {PROF_F(storage, DLP_FT_OBJ, 0), .sub = k_storage_fields},
    {PROF_F(pipeline, DLP_FT_OBJ, 0), .sub = k_pipeline_fields},
    {PROF_F(devices_per_node, DLP_FT_INT, 0), .min = 0, .max = 1024},  // 0: CPU-only host
    {DLP_FIELD_CB("devices", devices_read, devices_write)},
    {DLP_FIELD_AS(dlp_profile, "interconnect", net, DLP_FT_OBJ, DLP_FF_OPT), .sub = k_interconnect_fields},
    {PROF_F(cost, DLP_FT_OBJ, DLP_FF_OPT), .sub = k_cost_fields},
    {DLP_FIELD_CB("stats", stats_read, stats_write)},  // the workload's dataset (optional)
    {PROF_F(notes, DLP_FT_STR, DLP_FF_OPT)},
    {0}};

dlp_status dlp_profile_from_json(const json_t *o, const char *where, dlp_profile *p) {
    dlp_profile_init(p);
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not a JSON object", where);
    DLP_CHECK(dlp_fields_read(o, k_profile_fields, p, where));
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
    dlp_fields_write(o, k_profile_fields, p);
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

// The pipeline's CPU costs per file, byte, pixel and image (what dlp_profile_at_speed and _at_decode scale).
static void pipeline_costs_scale(dlp_pipeline_profile *pp, double k) {
    double *costs[] = {&pp->read_per_file_s, &pp->read_per_byte_s, &pp->decode_per_image_s, &pp->decode_per_pixel_s,
                       &pp->decode_per_byte_s, &pp->augment_per_image_s, &pp->augment_per_in_pixel_s,
                       &pp->augment_per_out_pixel_s};
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++) *costs[i] *= k;
}

void dlp_device_at_speed(dlp_device_profile *dev, double speed_rel) {
    if (!(speed_rel > 0) || dev->kind != DLP_DEVICE_CPU) return;
    for (int i = 0; i < dev->nrates; i++) {
        dev->rates[i].t0_s /= speed_rel;
        dev->rates[i].per_image_s /= speed_rel;
        dev->rates[i].update_s /= speed_rel;
    }
}

void dlp_profile_at_speed(dlp_profile *p, double speed_rel) {
    if (!(speed_rel > 0) || speed_rel == 1) return;
    const double k = 1 / speed_rel;  // a time at the reference speed takes k times as long
    pipeline_costs_scale(&p->pipeline, k);
    p->host.loop_overhead_s *= k;
    for (int d = 0; d < p->ndevices; d++) dlp_device_at_speed(&p->devices[d], speed_rel);
    if (p->host.canary_gflops > 0) {
        p->host.canary_gflops *= speed_rel;
        p->host.canary1_gflops *= speed_rel;
    }
}

void dlp_profile_at_work(dlp_profile *p, dlp_prec prec, double w) {
    if (!(w > 0)) return;
    for (int d = 0; d < p->ndevices; d++) {
        dlp_device_profile *dev = &p->devices[d];
        if (dev->kind != DLP_DEVICE_CPU) continue;
        for (int i = 0; i < dev->nrates; i++) {
            dlp_rate *r = &dev->rates[i];
            if (r->prec != prec || !(r->work_gflops > 0)) continue;
            const double k = r->work_gflops / w;  // a time at the reference work speed takes k x at w
            r->t0_s *= k;
            r->per_image_s *= k;
            r->update_s *= k;
            r->work_gflops = w;
        }
    }
}

void dlp_profile_at_decode(dlp_profile *p, double w) {
    if (!(w > 0) || !(p->pipeline.work_img_per_s > 0)) return;
    pipeline_costs_scale(&p->pipeline, p->pipeline.work_img_per_s / w);
    p->pipeline.work_img_per_s = w;
}

void dlp_profile_at_share(dlp_profile *p, double share) { dlp_profile_at_shares(p, share, 0); }

void dlp_profile_at_shares(dlp_profile *p, double share, double slowest) {
    // a profile probed at one thread only: its one-thread share is the reference
    const double ref = p->host.cpu_share > 0 ? p->host.cpu_share : p->host.cpu_share1,
                 ref1 = p->host.cpu_share1 > 0 ? p->host.cpu_share1 : ref;
    if (!(share > 0) || share > 1 || !(ref > 0)) return;
    const double refs = p->host.cpu_share_slowest;
    // the multi-thread compute rows' pace: the slowest thread's share against its reference, where both are known
    // (the run's slowest unknown: its mean share — a fork-join step's threads, left to the scheduler, mostly get alike
    // shares; a profile without the slowest reference: those rows by the mean share from host.cpu_share)
    const double ks = refs > 0 ? refs / (slowest > 0 && slowest <= 1 ? slowest : share) : ref / share;
    for (int d = 0; d < p->ndevices; d++) {
        dlp_device_profile *dev = &p->devices[d];
        if (dev->kind != DLP_DEVICE_CPU) continue;
        for (int i = 0; i < dev->nrates; i++) {
            dlp_rate *r = &dev->rates[i];
            // a time at the reference share takes k x; the probe's training rows on two threads or more were
            // normalised by their slowest thread (its inference rows by the mean share, like the rest)
            // (a row whose share exponent the probe measured: its time goes as that power of the share ratio)
            const double k0 = r->threads == 1 ? ref1 / share : dlp_rate_by_slowest(r) ? ks : ref / share;
            const double k = r->share_exp > 0 ? pow(k0, r->share_exp) : k0;
            r->t0_s *= k;
            r->per_image_s *= k;
            r->update_s *= k;
        }
    }
    dlp_pipeline_profile *pp = &p->pipeline;
    for (int k = 0; k < pp->nscaling; k++)
        if (pp->scaling[k].speed_rel > 0)  // measured by the probe (and normalised): a rate
            pp->scaling[k].efficiency *= share / (pp->scaling[k].threads == 1 ? ref1 : ref);
    p->host.loop_overhead_s *= ref / share;
    p->host.cpu_share1 = ref1 * share / ref;
    if (refs > 0) p->host.cpu_share_slowest = refs / ks;
    p->host.cpu_share = share;
}
