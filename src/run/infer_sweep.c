// run/infer_sweep: the inference measurement over batch sizes (run/infer_sweep.h).
#include "run/infer_sweep.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "data/source.h"
#include "monitor/monitor.h"

void dlp_infer_plan_summary(json_t *plan, char *out, size_t len) {
    json_t *b = json_object_get(plan, "backend_plan");
    if (!b) return;
    const char *lib = json_string_value(json_object_get(b, "library"));
    const char *isa = json_string_value(json_object_get(b, "isa"));
    json_t *t = json_object_get(b, "conv_prop_timed");
    const char *kind = json_string_value(json_object_get(b, "conv_prop_kind"));
    char timed[128] = "";
    if (t && kind) {  // a batch-1 plan built both ways and timed (backend/cpu: cpu_plan_create)
        const char *other = strcmp(kind, "forward_inference") ? "forward_inference" : "forward_training";
        char kept_key[40], other_key[40];
        snprintf(kept_key, sizeof kept_key, "%s_ms", kind);
        snprintf(other_key, sizeof other_key, "%s_ms", other);
        snprintf(timed, sizeof timed, "; convolutions %s, timed %.1f ms vs %.1f ms %s", kind,
                 json_real_value(json_object_get(t, kept_key)), json_real_value(json_object_get(t, other_key)), other);
    }
    snprintf(out, len, " (%s%s%s, %lld BN folded, %lld residual adds fused%s)", lib ? lib : "", isa ? " " : "",
             isa ? isa : "", (long long)json_integer_value(json_object_get(b, "folded_bn")),
             (long long)json_integer_value(json_object_get(b, "fused_residual_sum")), timed);
}

// What one sweep holds open.
typedef struct sweep_state {
    dlp_dataset *ds;
    dlp_infer_files files;
    dlp_infer_prep *prep;
    dlp_infer_library lib;
    dlp_monitor *mon;
    dlp_layout layout;  // the format the inputs are prepared in (dtype COUNT: none yet)
    dlp_dtype dtype;
} sweep_state;

// The inputs in engine e's format: the preprocessing (and, FROM_TENSOR, the library) made again when e wants
// another format than the last.
static dlp_status prepare(const dlp_infer_model *m, const dlp_infer_sweep_cfg *c, const dlp_infer_engine *e,
                          const char *src, sweep_state *s, json_t *result) {
    if (s->dtype == e->in_dtype && s->layout == e->layout) return DLP_OK;
    dlp_infer_library_free(&s->lib);
    dlp_infer_prep_free(s->prep);
    s->prep = NULL;
    dlp_infer_prep_cfg pc = {.size = m->size, .layout = e->layout, .dtype = e->in_dtype,
                             .dct_scaling = c->bench.dct_scaling, .workers = 1};
    dlp_status st = dlp_infer_prep_create(&pc, &s->prep);
    if (st == DLP_OK && c->bench.from == DLP_INFER_FROM_TENSOR) {
        st = dlp_infer_library_load(s->prep, &s->files, c->samples, &s->lib);
        if (st == DLP_OK) {
            const dlp_infer_library *lib = &s->lib;
            double per = 1.0 / lib->n;
            if (c->on_library) c->on_library(c->ctx, lib, e);
            json_object_set_new(result, "samples",
                                json_pack("{si si ss sf sf sf}", "count", lib->n, "skipped", lib->skipped, "source", src,
                                          "read_ms_per_image", dlp_ns_to_ms(lib->read_ns) * per, "decode_ms_per_image",
                                          dlp_ns_to_ms(lib->decode_ns) * per, "resize_ms_per_image",
                                          dlp_ns_to_ms(lib->resize_ns) * per));
        }
    }
    s->layout = e->layout;
    s->dtype = e->in_dtype;
    return st;
}

// One batch size: its plan, the inputs in its format, the measurement.
static dlp_status one_batch(dlp_infer_model *m, const dlp_infer_engine_cfg *ec0, const dlp_infer_sweep_cfg *c,
                            int batch, const char *src, sweep_state *s, json_t *result, json_t *points) {
    dlp_infer_engine e;
    dlp_infer_engine_cfg ec = *ec0;
    ec.batch = batch;
    char phase[32];
    snprintf(phase, sizeof phase, "batch %d", batch);
    dlp_monitor_phase(s->mon, phase);
    DLP_CHECK(dlp_infer_engine_create(m, &ec, &e));
    dlp_status st = prepare(m, c, &e, src, s, result);
    if (st == DLP_OK && !json_object_get(result, "plan")) {
        json_t *pj = dlp_infer_engine_plan_json(&e);
        if (c->on_plan) c->on_plan(c->ctx, &e, pj);
        json_object_set_new(result, "plan", pj);
    }
    dlp_infer_point pt;
    if (st == DLP_OK) {
        dlp_infer_bench_cfg bc = c->bench;
        bc.lib = &s->lib;
        bc.files = &s->files;
        bc.prep = s->prep;
        bc.dataset = s->ds;
        bc.mon = s->mon;
        st = dlp_infer_bench(&e, &bc, &pt);
    }
    if (st == DLP_OK) {
        if (c->on_point) c->on_point(c->ctx, &pt);
        json_array_append_new(points, dlp_infer_point_to_json(&pt));
    } else {
        dlp_err_context("batch %d", batch);
    }
    dlp_infer_engine_free(&e);
    return st;
}

dlp_status dlp_infer_sweep(dlp_infer_model *m, const dlp_infer_engine_cfg *ec0, const dlp_infer_sweep_cfg *c,
                           json_t *result) {
    sweep_state s;
    memset(&s, 0, sizeof s);
    s.layout = DLP_LAYOUT_NCHW;
    s.dtype = DLP_DTYPE_COUNT;
    dlp_status st;
    char where[4096] = "";
    json_t *points = json_array();
    json_object_set_new(result, "results", points);
    if (c->images) {
        st = dlp_infer_files_add(&s.files, c->images);
    } else {
        st = dlp_data_open(c->data, "val", NULL, &s.ds, where, sizeof where);
        if (st == DLP_OK) st = dlp_infer_files_from_dataset(&s.files, s.ds, c->samples);
    }
    if (st == DLP_OK && c->mon_interval_ms > 0) {
        dlp_monitor_cfg moc = {.interval_ms = c->mon_interval_ms, .csv_path = c->mon_csv, .initial_phase = "setup"};
        st = dlp_monitor_create(&moc, &s.mon);
        if (st == DLP_OK) st = dlp_monitor_start(s.mon);
    }
    const char *src = c->images ? c->images : where;
    if (st == DLP_OK && c->on_inputs) c->on_inputs(c->ctx, m, src);
    for (int bi = 0; st == DLP_OK && bi < c->nbatches; bi++)
        st = one_batch(m, ec0, c, c->batches[bi], src, &s, result, points);
    if (s.mon) {
        dlp_status ms = dlp_monitor_stop(s.mon);
        if (ms != DLP_OK) dlp_err_print(stderr), dlp_err_clear();
        if (st == DLP_OK) json_object_set_new(result, "monitor", dlp_monitor_summary_json(s.mon));
        dlp_monitor_destroy(s.mon);
    }
    dlp_infer_library_free(&s.lib);
    dlp_infer_prep_free(s.prep);
    dlp_infer_files_free(&s.files);
    dlp_dataset_free(s.ds);
    return st;
}
