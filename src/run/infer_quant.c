// run/infer_quant: int8 calibration of a model (its activation ranges, nn/quant) and accuracy on a dataset's val
// split (run/infer.h): both run image files through the serving preprocessing into an inference engine.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/source.h"
#include "run/infer.h"

// Runs the files through engine e in calls of e->batch images; fn gets each call's logits and the files' indices.
// Files that cannot be read or decoded are skipped (counted, the first named in a warning).
typedef dlp_status (*chunk_fn)(void *ctx, const float *logits, int n, const int *file);
static dlp_status run_files(dlp_infer_engine *e, dlp_infer_prep *prep, const dlp_infer_files *f, chunk_fn fn,
                            void *ctx, int *skipped) {
    const size_t sb = dlp_infer_prep_sample_bytes(prep);
    uint8_t *batch = malloc(sb * (size_t)e->batch);
    float *logits = malloc(sizeof(float) * (size_t)e->batch * (size_t)e->num_classes);
    int *idx = malloc(sizeof(int) * (size_t)e->batch);
    dlp_status st = batch && logits && idx ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    *skipped = 0;
    int n = 0;
    for (int i = 0; st == DLP_OK && i <= f->n; i++) {
        if (i < f->n) {
            char *data = NULL;
            size_t len = 0;
            dlp_status rs = dlp_read_file(f->paths[i], &data, &len, 64u << 20);
            if (!rs) rs = dlp_infer_prep_run(prep, 0, (const uint8_t *)data, len, batch + sb * (size_t)n, NULL);
            free(data);
            if (rs) {
                if (!(*skipped)++) DLP_WARN("%s: %s; skipped", f->paths[i], dlp_err_msg());
                dlp_err_clear();
                continue;
            }
            idx[n++] = i;
        }
        if (n == e->batch || (i == f->n && n > 0)) {
            st = dlp_infer_engine_run(e, batch, n, logits);
            if (!st) st = fn(ctx, logits, n, idx);
            n = 0;
        }
    }
    free(batch);
    free(logits);
    free(idx);
    return st;
}

static dlp_status open_split(const char *data, const char *split, dlp_infer_files *files, int max, char *where,
                             size_t len) {
    dlp_dataset *ds = NULL;
    dlp_status st = dlp_data_open(data, split, NULL, &ds, where, len);
    if (!st) st = dlp_infer_files_from_dataset(files, ds, max);
    dlp_dataset_free(ds);
    return st;
}

static dlp_status no_logits(void *ctx, const float *logits, int n, const int *file) {
    (void)ctx, (void)logits, (void)file;
    *(int *)ctx += n;
    return DLP_OK;
}

static void note(const dlp_infer_calib_cfg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const dlp_infer_calib_cfg *c, const char *fmt, ...) {
    if (!c->on_note) return;
    char line[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->on_note(c->ctx, line);
}

static dlp_status calibrate(dlp_infer_model *m, const dlp_infer_calib_cfg *c, double pct, uint64_t hash) {
    dlp_infer_files files;
    memset(&files, 0, sizeof files);
    char where[4096] = "";
    dlp_status st = open_split(c->data, "train", &files, c->images, where, sizeof where);
    if (st) {  // an ImageFolder or list has no train split: its images (the val split's) then
        dlp_err_clear();
        dlp_infer_files_free(&files);
        st = open_split(c->data, "val", &files, c->images, where, sizeof where);
    }
    dlp_calib *cal = NULL;
    if (!st) st = dlp_calib_create(&m->net, c->method, pct, &cal);
    dlp_infer_engine e;
    memset(&e, 0, sizeof e);
    dlp_infer_engine_cfg ec = {.device = c->device ? c->device : "cpu", .batch = files.n < 16 ? files.n : 16,
                               .precision = DLP_DTYPE_F32, .threads = c->threads, .observe = dlp_calib_observe,
                               .observe_ctx = cal};
    if (!st) st = dlp_infer_engine_create(m, &ec, &e);
    dlp_infer_prep *prep = NULL;
    if (!st) {
        dlp_infer_prep_cfg pc = {.size = m->size, .layout = e.layout, .dtype = e.in_dtype, .dct_scaling = c->dct_scaling,
                                 .workers = 1};
        st = dlp_infer_prep_create(&pc, &prep);
    }
    int done = 0, skipped = 0;
    const int64_t t0 = dlp_now_ns();
    if (!st) st = run_files(&e, prep, &files, no_logits, &done, &skipped);
    if (!st && done < 1) st = DLP_ERR(DLP_ERR_FORMAT, "calibration: none of the %d images of %s could be read", files.n, where);
    if (!st && dlp_calib_finish(cal, done, hash, &m->quant)) {  // the backend has no observer: no int8 there
        dlp_err_clear();
        st = DLP_ERR(DLP_ERR_UNSUPPORTED, "int8 inference runs on the cpu device (oneDNN int8 convolutions); the %s "
                     "device has none; hint: --device cpu", ec.device);
    }
    if (!st) {
        snprintf(m->quant_src, sizeof m->quant_src, "calibrated on %d images of %s", done, where);
        note(c, "int8: %s ranges %s (%d skipped) in %.1f s", dlp_opt_choice_name(dlp_calib_method_choices, (int)c->method),
             m->quant_src, skipped, dlp_ns_to_s(dlp_now_ns() - t0));
    }
    dlp_infer_prep_free(prep);
    dlp_infer_engine_free(&e);
    dlp_calib_free(cal);
    dlp_infer_files_free(&files);
    if (st) dlp_err_context("int8 calibration on %s", c->data ? c->data : "synthetic");
    return st;
}

dlp_status dlp_infer_model_quantize(dlp_infer_model *m, const dlp_infer_calib_cfg *c) {
    dlp_quant_free(&m->quant);
    const double pct = c->percentile > 0 ? c->percentile : 99.99;
    if (c->images < 1) return DLP_ERR(DLP_ERR_INVALID, "int8 calibration needs at least 1 image (got %d)", c->images);
    const uint64_t hash = dlp_quant_weights_hash(m->params, m->net.param_count, m->bufs, m->net.buf_count);
    char def[1200];
    const char *path = c->path;
    if (!path && !m->random_init) {
        dlp_quant_default_path(m->weights, c->method, def, sizeof def);
        path = def;
    }
    if (path && dlp_path_exists(path)) {
        DLP_CHECK(dlp_quant_load(path, &m->net, hash, &m->quant));
        // beside the weights (not named by the user): a file of another image count or percentile is made again
        if (c->path || (m->quant.images == c->images &&
                        (m->quant.method != DLP_CALIB_PERCENTILE || fabs(m->quant.percentile - pct) < 1e-6))) {
            snprintf(m->quant_src, sizeof m->quant_src, "%s", path);
            note(c, "int8: activation ranges from %s (%d images, %s)", path, m->quant.images,
                 dlp_opt_choice_name(dlp_calib_method_choices, (int)m->quant.method));
            return DLP_OK;
        }
        dlp_quant_free(&m->quant);
    }
    DLP_CHECK(calibrate(m, c, pct, hash));
    if (path) {
        dlp_status st = dlp_quant_save(&m->quant, path);
        if (st) {  // the ranges are in memory: a read-only weights directory costs only the reuse
            DLP_WARN("%s; the calibration is not kept", dlp_err_msg());
            dlp_err_clear();
        } else {
            note(c, "int8: calibration saved to %s", path);
        }
    }
    return DLP_OK;
}

json_t *dlp_infer_quant_to_json(const dlp_infer_model *m) {
    if (m->quant.nlayers <= 0) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(dlp_opt_choice_name(dlp_calib_method_choices, (int)m->quant.method)));
    json_object_set_new(o, "images", json_integer(m->quant.images));
    if (m->quant.method == DLP_CALIB_PERCENTILE) json_object_set_new(o, "percentile", json_real(m->quant.percentile));
    json_object_set_new(o, "source", json_string(m->quant_src));
    return o;
}

typedef struct acc_ctx {
    dlp_infer_accuracy *a;
    const dlp_infer_files *files;
    int k;
} acc_ctx;

static dlp_status score(void *ctx, const float *logits, int n, const int *file) {
    acc_ctx *c = ctx;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * (size_t)c->k;
        const int label = c->files->labels[file[i]];
        int above = 0, best = 0;
        for (int j = 0; j < c->k; j++) {
            if (z[j] > z[best]) best = j;
            if (label >= 0 && label < c->k && j != label && (z[j] > z[label] || (z[j] == z[label] && j < label)))
                above++;
        }
        c->a->pred[c->a->n++] = best;
        c->a->top1 += label == best;
        c->a->top5 += label >= 0 && label < c->k && above < 5;
    }
    return DLP_OK;
}

dlp_status dlp_infer_accuracy_run(dlp_infer_model *m, const dlp_infer_engine_cfg *ec, const char *data, int max,
                                  int dct_scaling, dlp_infer_accuracy *out) {
    memset(out, 0, sizeof *out);
    dlp_infer_files files;
    memset(&files, 0, sizeof files);
    char where[4096] = "";
    dlp_status st = open_split(data, "val", &files, max, where, sizeof where);
    if (!st) {
        out->pred = calloc((size_t)files.n + 1, sizeof(int));
        if (!out->pred) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    dlp_infer_engine e;
    memset(&e, 0, sizeof e);
    if (!st) st = dlp_infer_engine_create(m, ec, &e);
    dlp_infer_prep *prep = NULL;
    if (!st) {
        dlp_infer_prep_cfg pc = {.size = m->size, .layout = e.layout, .dtype = e.in_dtype, .dct_scaling = dct_scaling,
                                 .workers = 1};
        st = dlp_infer_prep_create(&pc, &prep);
    }
    acc_ctx ac = {out, &files, m->net.num_classes};
    if (!st) st = run_files(&e, prep, &files, score, &ac, &out->skipped);
    if (!st && out->n < 1) st = DLP_ERR(DLP_ERR_FORMAT, "no image of %s could be read", where);
    dlp_infer_prep_free(prep);
    dlp_infer_engine_free(&e);
    dlp_infer_files_free(&files);
    if (st) {
        dlp_infer_accuracy_free(out);
        dlp_err_context("accuracy on the val split of %s", data ? data : "synthetic");
    }
    return st;
}

void dlp_infer_accuracy_free(dlp_infer_accuracy *a) {
    if (!a) return;
    free(a->pred);
    memset(a, 0, sizeof *a);
}
