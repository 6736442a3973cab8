// loadgen/sut_local: the local SUT — dlperf's inference engine (serve/stack) behind loadgen's in-process SUT.
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "data/source.h"
#include "loadgen/sut_local.h"

struct dlp_lg_local {
    dlp_serve_stack stack;      // the model and stack.ladders[t]: thread t's plans of batch 1, 2, 4, .. max_batch
    uint8_t **batch_bufs;       // (threads) max_batch samples each
    float **logits;             // (threads)
    int threads;
    dlp_infer_files files;
    dlp_infer_library lib;
    // top-1 against the dataset's labels (when the samples come from a dataset)
    _Atomic long long answered, correct;
};

void dlp_lg_local_free(dlp_lg_local *ls) {
    if (!ls) return;
    for (int t = 0; t < ls->threads; t++) {
        if (ls->batch_bufs) free(ls->batch_bufs[t]);
        if (ls->logits) free(ls->logits[t]);
    }
    free(ls->batch_bufs);
    free(ls->logits);
    dlp_infer_library_free(&ls->lib);
    dlp_infer_files_free(&ls->files);
    dlp_serve_stack_close(&ls->stack);
    free(ls);
}

// dlp_lg_infer_fn: samples by library index -> the worker's plan (a plan computes its whole batch whatever the
// call's n, so the samples are copied into the worker's batch buffer) -> top-1 of each.
static dlp_status local_infer(void *ctx, int worker, const uint32_t *indices, int n, int32_t *top1) {
    dlp_lg_local *ls = ctx;
    const dlp_serve_engine *e = &ls->stack.ladders[worker].engine;
    const size_t sb = ls->lib.sample_bytes;
    for (int i = 0; i < n; i++) {
        if (indices[i] >= (uint32_t)ls->lib.n)
            return DLP_ERR(DLP_ERR_INVALID, "sample %u is not in the library of %d", indices[i], ls->lib.n);
        memcpy(ls->batch_bufs[worker] + (size_t)i * sb, ls->lib.data + (size_t)indices[i] * sb, sb);
    }
    DLP_CHECK(e->infer(e->ctx, ls->batch_bufs[worker], n, ls->logits[worker]));
    for (int i = 0; i < n; i++) {
        const float *z = ls->logits[worker] + (size_t)i * e->num_classes;
        int best = 0;
        for (int k = 1; k < e->num_classes; k++)
            if (z[k] > z[best]) best = k;
        top1[i] = best;
        int32_t truth = ls->files.labels[ls->lib.file[indices[i]]];
        if (truth >= 0) {
            ls->answered++;
            ls->correct += best == truth;
        }
    }
    return DLP_OK;
}

// The files of the library and the engine: one plan ladder per SUT thread; compute threads (0: the CPUs this
// process may use) divided among them, at least 1 each; one transformer fills the sample library.
static dlp_status local_open_engine(const dlp_lg_local_cfg *cfg, dlp_lg_local *ls, char *where, size_t where_cap) {
    dlp_status st = DLP_OK;
    dlp_dataset *ds = NULL;
    if (cfg->images) st = dlp_infer_files_add(&ls->files, cfg->images);
    else {
        st = dlp_data_open(cfg->data, "val", NULL, &ds, where, where_cap);
        if (st == DLP_OK) st = dlp_infer_files_from_dataset(&ls->files, ds, cfg->samples);
    }
    dlp_serve_stack_cfg sc = cfg->stack;
    sc.copies = cfg->threads;
    sc.share_threads = 1;
    sc.workers = 1;
    sc.random_init_warning = "no --weights: %s runs with torchvision's random initialization (seed %lld); timings "
                             "are valid, answers are not";
    if (st == DLP_OK) st = dlp_serve_stack_open(&sc, &ls->stack);
    // The dataset's labels mean something to the model only if it was trained on those classes (same count).
    if (st == DLP_OK && ds && ds->nclasses != ls->stack.model.net.num_classes)
        for (int i = 0; i < ls->files.n; i++) ls->files.labels[i] = -1;
    dlp_dataset_free(ds);
    return st;
}

static dlp_status local_alloc_batches(dlp_lg_local *ls, int threads, int max_batch) {
    ls->batch_bufs = calloc((size_t)threads, sizeof *ls->batch_bufs);
    ls->logits = calloc((size_t)threads, sizeof *ls->logits);
    if (!ls->batch_bufs || !ls->logits) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the SUT");
    ls->threads = threads;
    for (int t = 0; t < threads; t++) {
        const dlp_serve_engine *e = &ls->stack.ladders[t].engine;
        ls->batch_bufs[t] = malloc((size_t)max_batch * e->sample_bytes);
        ls->logits[t] = malloc((size_t)max_batch * (size_t)e->num_classes * sizeof(float));
        if (!ls->batch_bufs[t] || !ls->logits[t]) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the SUT's batches");
    }
    return DLP_OK;
}

dlp_status dlp_lg_sut_local_open(const dlp_lg_local_cfg *cfg, dlp_lg_sut *sut, dlp_lg_local **out) {
    *out = NULL;
    int max_batch = cfg->stack.max_batch;
    if (max_batch < 1 || cfg->threads < 1 || cfg->threads > 64)
        return DLP_ERR(DLP_ERR_INVALID, "--max-batch must be >= 1 and --sut-threads in 1..64");
    dlp_lg_local *ls = calloc(1, sizeof *ls);
    DLP_TRY_ALLOC(ls);
    char where[4096] = "";
    dlp_status st = local_open_engine(cfg, ls, where, sizeof where);
    if (st == DLP_OK) st = local_alloc_batches(ls, cfg->threads, max_batch);
    int64_t t0 = dlp_now_ns();
    if (st == DLP_OK) st = dlp_infer_library_load(ls->stack.prep, &ls->files, cfg->samples, &ls->lib);
    if (st == DLP_OK) {
        const dlp_infer_engine *e = &ls->stack.ladders[0].plans[0];
        char ladder[64];
        dlp_serve_ladder_describe(&ls->stack.ladders[0], ladder, sizeof ladder);
        DLP_INFO("loadgen: in-process SUT: %s (%d classes) on %s %s, %d thread%s with plans of batch %s; %d samples "
                 "of %s preprocessed in %.1f s (%s %s)%s", ls->stack.model.net.arch, ls->stack.model.net.num_classes,
                 dlp_backend_name(e->ops), dlp_dtype_name(e->precision), ls->threads, ls->threads > 1 ? "s" : "",
                 ladder, ls->lib.n, cfg->images ? cfg->images : where, dlp_ns_to_s(dlp_now_ns() - t0),
                 dlp_layout_name(e->layout), dlp_dtype_name(e->in_dtype), ls->lib.skipped ? " (some images skipped)" : "");
        dlp_lg_inproc_cfg ic = {.fn = local_infer, .ctx = ls, .max_batch = max_batch, .threads = ls->threads,
                                .name = "local"};
        st = dlp_lg_sut_inproc_create(&ic, sut);
    }
    if (st) {
        dlp_lg_local_free(ls);
        return st;
    }
    *out = ls;
    return DLP_OK;
}

int dlp_lg_local_samples(const dlp_lg_local *ls) { return ls->lib.n; }

int32_t dlp_lg_local_label(const dlp_lg_local *ls, uint32_t idx) {
    return idx < (uint32_t)ls->lib.n ? ls->files.labels[ls->lib.file[idx]] : -1;
}

void dlp_lg_local_top1(const dlp_lg_local *ls, long long *answered, long long *correct) {
    *answered = ls->answered;
    *correct = ls->correct;
}

json_t *dlp_lg_local_json(const dlp_lg_local *ls) {
    json_t *lj = json_object();
    json_object_set_new(lj, "model", dlp_infer_model_to_json(&ls->stack.model));
    const dlp_serve_ladder *l0 = &ls->stack.ladders[0];
    json_object_set_new(lj, "plan", dlp_infer_engine_plan_json(&l0->plans[l0->n - 1]));
    json_object_set_new(lj, "plans", json_integer((json_int_t)l0->n * ls->threads));
    json_object_set_new(lj, "preprocessed", json_true());
    if (ls->answered > 0) {
        json_object_set_new(lj, "top1_answered", json_integer(ls->answered));
        json_object_set_new(lj, "top1_accuracy", json_real((double)ls->correct / (double)ls->answered));
    }
    return lj;
}
