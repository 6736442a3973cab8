// run/infer_bench: the measurement of one batch size — warm-up calls, then timed calls until both the minimum
// count and the minimum duration are met, each call timed on CLOCK_MONOTONIC; inputs from the preprocessed
// library, or from JPEG files read and decoded inline (stages timed separately) or by the loader's threads
// (the wait for a batch is the data stall).
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/loader.h"
#include "monitor/monitor.h"
#include "run/infer.h"

typedef struct times {
    int64_t *total, *infer;
    size_t n, cap;
} times;

static dlp_status times_push(times *t, int64_t total, int64_t infer) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        int64_t *a = realloc(t->total, nc * sizeof *a);
        if (!a) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for latency samples");
        t->total = a;
        int64_t *b = realloc(t->infer, nc * sizeof *b);
        if (!b) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for latency samples");
        t->infer = b;
        t->cap = nc;
    }
    t->total[t->n] = total;
    t->infer[t->n] = infer;
    t->n++;
    return DLP_OK;
}

static void times_free(times *t) {
    free(t->total);
    free(t->infer);
}

// One call's input: fill `batch` (e->batch samples) and say how long each stage took.
typedef struct source {
    const dlp_infer_bench_cfg *cfg;
    dlp_infer_engine *e;
    // tensor
    const uint8_t *staged;  // the library itself, or a copy cycled to at least one batch
    uint8_t *own;
    int nsamples;
    int64_t cursor;
    // jpeg inline
    uint8_t *buf;
    int64_t file_cursor;
    int consecutive_bad;
    // jpeg loader
    dlp_loader *loader;
    dlp_batch *held;
    int64_t epoch;
    // stage totals over the timed calls
    int64_t read_ns, decode_ns, resize_ns, wait_ns;
    int64_t bad;
} source;

static dlp_status source_open(source *s, dlp_infer_engine *e, const dlp_infer_bench_cfg *cfg) {
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->e = e;
    const size_t sb = e->sample_bytes;
    if (cfg->from == DLP_INFER_FROM_TENSOR) {
        const dlp_infer_library *lib = cfg->lib;
        if (!lib || lib->n < 1) return DLP_ERR(DLP_ERR_INVALID, "no preprocessed samples to run");
        if (lib->sample_bytes != sb)
            return DLP_ERR(DLP_ERR_INVALID, "preprocessed samples have %zu bytes but the plan takes %zu (layout/type)",
                           lib->sample_bytes, sb);
        if (lib->n >= e->batch) {
            s->staged = lib->data;
            s->nsamples = lib->n;
        } else {  // fewer samples than a batch: repeat them
            s->own = dlp_alloc_aligned((size_t)e->batch * sb);
            DLP_TRY_ALLOC(s->own);
            for (int i = 0; i < e->batch; i++) memcpy(s->own + (size_t)i * sb, lib->data + (size_t)(i % lib->n) * sb, sb);
            s->staged = s->own;
            s->nsamples = e->batch;
        }
        return DLP_OK;
    }
    if (cfg->workers <= 0) {
        if (!cfg->files || cfg->files->n < 1 || !cfg->prep)
            return DLP_ERR(DLP_ERR_INVALID, "inline JPEG decoding needs files and a preprocess");
        if (dlp_infer_prep_sample_bytes(cfg->prep) != sb)
            return DLP_ERR(DLP_ERR_INVALID, "the preprocess writes %zu bytes per sample but the plan takes %zu",
                           dlp_infer_prep_sample_bytes(cfg->prep), sb);
        s->buf = dlp_alloc_aligned((size_t)e->batch * sb);
        DLP_TRY_ALLOC(s->buf);
        return DLP_OK;
    }
    if (!cfg->dataset) return DLP_ERR(DLP_ERR_INVALID, "decoding on loader threads needs a dataset (--data)");
    dlp_loader_cfg lc;
    dlp_loader_cfg_defaults(&lc, cfg->dataset, DLP_XFORM_VAL);
    const dlp_layer *in = &e->net->layers[0];
    lc.batch = e->batch;
    lc.workers = cfg->workers;
    lc.transform.out_w = in->w;
    lc.transform.out_h = in->h;
    lc.transform.layout = e->layout;
    lc.transform.dtype = e->in_dtype;
    lc.transform.dct_scales = cfg->dct_scaling ? 0 : 1u << 8;
    lc.shuffle = 0;
    lc.drop_last = 0;
    DLP_CHECK(dlp_loader_create(&lc, &s->loader));
    DLP_CHECK(dlp_loader_start_epoch(s->loader, 0));
    return DLP_OK;
}

static void source_close(source *s) {
    if (s->held) dlp_loader_release(s->loader, s->held);
    dlp_loader_free(s->loader);
    dlp_free_aligned(s->own);
    dlp_free_aligned(s->buf);
}

// Next call's input: *data, *n; stage times of this call into st_* (ns).
static dlp_status source_next(source *s, const void **data, int *n, int64_t *read_ns, int64_t *decode_ns,
                              int64_t *resize_ns, int64_t *wait_ns) {
    *read_ns = *decode_ns = *resize_ns = *wait_ns = 0;
    const int b = s->e->batch;
    const size_t sb = s->e->sample_bytes;
    if (s->cfg->from == DLP_INFER_FROM_TENSOR) {
        if (s->cursor + b > s->nsamples) s->cursor = 0;
        *data = s->staged + (size_t)s->cursor * sb;
        *n = b;
        s->cursor += b;
        return DLP_OK;
    }
    if (!s->loader) {
        const dlp_infer_files *f = s->cfg->files;
        for (int i = 0; i < b;) {
            const char *path = f->paths[s->file_cursor++ % f->n];
            char *bytes = NULL;
            size_t len = 0;
            int64_t t0 = dlp_now_ns();
            dlp_status st = dlp_read_file(path, &bytes, &len, (size_t)64 << 20);
            *read_ns += dlp_now_ns() - t0;
            dlp_sample_info info;
            memset(&info, 0, sizeof info);
            if (st == DLP_OK) {
                st = dlp_infer_prep_run(s->cfg->prep, 0, (const uint8_t *)bytes, len, s->buf + (size_t)i * sb, &info);
                *decode_ns += info.decode_ns;
                *resize_ns += info.augment_ns;
            }
            free(bytes);
            if (st == DLP_ERR_NOMEM) return st;
            if (st) {
                dlp_log_warn_limited("infer-bad-file", 20, "%s: %s; skipped", path, dlp_err_msg());
                dlp_err_clear();
                s->bad++;
                if (++s->consecutive_bad >= f->n)
                    return DLP_ERR(DLP_ERR_FORMAT, "none of the %d images could be decoded", f->n);
                continue;
            }
            s->consecutive_bad = 0;
            i++;
        }
        *data = s->buf;
        *n = b;
        return DLP_OK;
    }
    if (s->held) {
        dlp_loader_release(s->loader, s->held);
        s->held = NULL;
    }
    int64_t t0 = dlp_now_ns();
    dlp_batch *bt = NULL;
    for (int tries = 0; !bt; tries++) {
        DLP_CHECK(dlp_loader_next(s->loader, &bt));
        if (!bt) {
            if (tries > 0) return DLP_ERR(DLP_ERR_FORMAT, "the dataset yielded no batch");
            DLP_CHECK(dlp_loader_start_epoch(s->loader, ++s->epoch));
        }
    }
    *wait_ns = dlp_now_ns() - t0;
    s->held = bt;
    *data = bt->data;
    *n = bt->n;
    return DLP_OK;
}

dlp_status dlp_infer_bench(dlp_infer_engine *e, const dlp_infer_bench_cfg *cfg, dlp_infer_point *out) {
    memset(out, 0, sizeof *out);
    out->batch = e->batch;
    out->from = cfg->from;
    out->workers = cfg->from == DLP_INFER_FROM_JPEG ? cfg->workers : 0;
    out->create_ms = e->create_ms;
    if (cfg->iters < 1 && cfg->min_duration_s <= 0)
        return DLP_ERR(DLP_ERR_INVALID, "give at least one timed iteration or a minimum duration");
    float *logits = malloc((size_t)e->batch * (size_t)e->num_classes * sizeof *logits);
    DLP_TRY_ALLOC(logits);
    source s;
    times t = {0};
    dlp_status st = source_open(&s, e, cfg);
    int64_t images = 0, infer_total = 0, t_start = 0;
    const int64_t min_ns = (int64_t)(cfg->min_duration_s * 1e9);
    dlp_loader_stats ls0;
    memset(&ls0, 0, sizeof ls0);
    for (int64_t k = 0; st == DLP_OK; k++) {
        const int timed = k >= cfg->warmup;
        if (timed) {
            int64_t done = k - cfg->warmup;
            int64_t now = dlp_now_ns();
            if (done == 0) {
                t_start = now;
                s.read_ns = s.decode_ns = s.resize_ns = s.wait_ns = 0;
                s.bad = 0;
                if (s.loader) dlp_loader_get_stats(s.loader, &ls0);
            }
            if (cfg->max_iters > 0 && done >= cfg->max_iters) break;
            if (done >= cfg->iters && now - t_start >= min_ns && done > 0) break;
        }
        const void *data = NULL;
        int n = 0;
        int64_t rd, dec, rs, wt;
        int64_t t0 = dlp_now_ns();
        DLP_CHECK_GOTO(st, source_next(&s, &data, &n, &rd, &dec, &rs, &wt), out);
        int64_t t1 = dlp_now_ns();
        DLP_CHECK_GOTO(st, dlp_infer_engine_run(e, data, n, logits), out);
        int64_t t2 = dlp_now_ns();
        if (!timed) continue;
        s.read_ns += rd, s.decode_ns += dec, s.resize_ns += rs, s.wait_ns += wt;
        images += n;
        infer_total += t2 - t1;
        DLP_CHECK_GOTO(st, times_push(&t, t2 - t0, t2 - t1), out);
        dlp_monitor_count(cfg->mon, DLP_MONITOR_IMAGES, n);
        if (wt) dlp_monitor_count(cfg->mon, DLP_MONITOR_DATA_WAIT_NS, wt);
    }
    if (st == DLP_OK) {
        const int64_t wall = dlp_now_ns() - t_start;
        const double calls = (double)(t.n ? t.n : 1);
        out->iters = (int64_t)t.n;
        out->images = images;
        out->seconds = dlp_ns_to_s(wall);
        out->images_per_s = wall > 0 ? (double)images / dlp_ns_to_s(wall) : 0;
        out->gflops_per_s = out->images_per_s * dlp_net_forward_flops(e->net) / 1e9;
        out->infer_ms = dlp_ns_to_ms(infer_total) / calls;
        if (s.loader) {
            dlp_loader_stats ls;
            dlp_loader_get_stats(s.loader, &ls);
            int64_t im = ls.images - ls0.images;
            double per = im > 0 ? 1.0 / (double)im : 0;
            out->per_image_stages = 1;
            out->read_ms = dlp_ns_to_ms(ls.read_ns - ls0.read_ns) * per;
            out->decode_ms = dlp_ns_to_ms(ls.decode_ns - ls0.decode_ns) * per;
            out->resize_ms = dlp_ns_to_ms(ls.augment_ns - ls0.augment_ns) * per;
            out->bad = ls.bad - ls0.bad;
        } else {
            out->read_ms = dlp_ns_to_ms(s.read_ns) / calls;
            out->decode_ms = dlp_ns_to_ms(s.decode_ns) / calls;
            out->resize_ms = dlp_ns_to_ms(s.resize_ns) / calls;
            out->bad = s.bad;
        }
        out->wait_ms = dlp_ns_to_ms(s.wait_ns) / calls;
        dlp_infer_lat_from(t.total, t.n, &out->latency);
        dlp_infer_lat_from(t.infer, t.n, &out->infer);
    }
out:
    source_close(&s);
    times_free(&t);
    free(logits);
    return st;
}

json_t *dlp_infer_point_to_json(const dlp_infer_point *p) {
    json_t *o = json_object();
    json_object_set_new(o, "batch", json_integer(p->batch));
    json_object_set_new(o, "from", json_string(p->from == DLP_INFER_FROM_JPEG ? "jpeg" : "tensor"));
    json_object_set_new(o, "iterations", json_integer(p->iters));
    json_object_set_new(o, "images", json_integer(p->images));
    json_object_set_new(o, "seconds", json_real(p->seconds));
    json_object_set_new(o, "images_per_s", json_real(p->images_per_s));
    json_object_set_new(o, "gflops_per_s", json_real(p->gflops_per_s));
    json_object_set_new(o, "latency_ms", dlp_infer_lat_to_json(&p->latency));
    json_object_set_new(o, "inference_ms", dlp_infer_lat_to_json(&p->infer));
    json_t *stages = json_object();
    if (p->from == DLP_INFER_FROM_JPEG) {
        json_object_set_new(stages, "where", json_string(p->per_image_stages ? "loader threads" : "inline"));
        json_object_set_new(stages, "per", json_string(p->per_image_stages ? "image (worker time)" : "call"));
        json_object_set_new(stages, "read_ms", json_real(p->read_ms));
        json_object_set_new(stages, "decode_ms", json_real(p->decode_ms));
        json_object_set_new(stages, "resize_ms", json_real(p->resize_ms));
        if (p->per_image_stages) json_object_set_new(stages, "wait_ms_per_call", json_real(p->wait_ms));
        json_object_set_new(stages, "bad_files", json_integer(p->bad));
    }
    json_object_set_new(stages, "inference_ms_per_call", json_real(p->infer_ms));
    json_object_set_new(o, "stages", stages);
    json_object_set_new(o, "plan_create_ms", json_real(p->create_ms));
    return o;
}
