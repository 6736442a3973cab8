// run/classify: given images through an inference plan, each one's top-k.
#include "run/classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"

// Class names: --labels, else a dataset's labels.txt found beside the images (the synthetic ImageNet writes one
// at its root, two levels above val/<wnid>/x.JPEG) when it names as many classes as the model has.
static dlp_status find_labels(const char *labels_path, const char *first_image, int nclasses, char ***labels, int *n,
                              char *src, size_t src_len) {
    *labels = NULL;
    *n = 0;
    if (labels_path) {
        snprintf(src, src_len, "%s", labels_path);
        return dlp_infer_labels_load(labels_path, labels, n);
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", first_image ? first_image : "");
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        *slash = '\0';
        char p[4200];
        snprintf(p, sizeof p, "%s/labels.txt", dir[0] ? dir : "/");
        char head[16] = "";
        FILE *f = fopen(p, "r");
        if (!f) continue;
        size_t got = fread(head, 1, sizeof head - 1, f);
        fclose(f);
        head[got] = '\0';
        if (strncmp(head, "# index wnid", 12) != 0) continue;  // only the synthetic ImageNet's own format
        if (dlp_infer_labels_load(p, labels, n) == DLP_OK && *n == nclasses) {
            snprintf(src, src_len, "%s", p);
            return DLP_OK;
        }
        dlp_err_clear();
        dlp_infer_labels_free(*labels, *n);
        *labels = NULL;
        *n = 0;
    }
    return DLP_OK;
}

dlp_status dlp_classify(dlp_infer_model *m, const dlp_infer_engine_cfg *ec, const dlp_classify_cfg *c,
                        dlp_classify_result *r) {
    memset(r, 0, sizeof *r);
    dlp_infer_engine e;
    memset(&e, 0, sizeof e);
    dlp_infer_prep *prep = NULL;
    dlp_infer_library lib;
    memset(&lib, 0, sizeof lib);
    dlp_status st = DLP_OK;
    for (int i = 0; i < c->npaths && st == DLP_OK; i++) st = dlp_infer_files_add(&r->files, c->paths[i]);
    if (st == DLP_OK && r->files.n == 0)
        st = DLP_ERR(DLP_ERR_INVALID, "--top5 needs images: dlperf infer --top5 a.jpg b.jpg (or a directory)");
    if (st == DLP_OK)
        st = find_labels(c->labels_path, r->files.paths[0], m->net.num_classes, &r->labels, &r->nlabels, r->labels_src,
                         sizeof r->labels_src);
    if (st == DLP_OK && r->labels_src[0] && !c->labels_path && c->on_labels) c->on_labels(c->ctx, r->labels_src);
    dlp_infer_engine_cfg ecb = *ec;
    ecb.batch = r->files.n < ecb.batch ? r->files.n : ecb.batch;
    if (st == DLP_OK) st = dlp_infer_engine_create(m, &ecb, &e);
    if (st == DLP_OK) {
        dlp_infer_prep_cfg pc = {.size = m->size, .layout = e.layout, .dtype = e.in_dtype, .dct_scaling = c->dct_scaling,
                                 .workers = 1};
        st = dlp_infer_prep_create(&pc, &prep);
    }
    if (st == DLP_OK) st = dlp_infer_library_load(prep, &r->files, 0, &lib);
    if (st == DLP_OK) {
        r->num_classes = e.num_classes;
        r->logits = malloc((size_t)lib.n * (size_t)e.num_classes * sizeof *r->logits);
        r->paths = calloc((size_t)lib.n + 1, sizeof *r->paths);
        r->cls = calloc((size_t)lib.n + 1, sizeof *r->cls);
        r->prob = calloc((size_t)lib.n + 1, sizeof *r->prob);
        if (!r->logits || !r->paths || !r->cls || !r->prob) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for logits");
    }
    for (int i = 0; st == DLP_OK && i < lib.n; i += e.batch) {
        int n = lib.n - i < e.batch ? lib.n - i : e.batch;
        st = dlp_infer_engine_run(&e, lib.data + (size_t)i * lib.sample_bytes, n, r->logits + (size_t)i * e.num_classes);
    }
    for (int i = 0; st == DLP_OK && i < lib.n; i++) {
        for (int j = 0; j < DLP_CLASSIFY_TOPK; j++) r->cls[i][j] = -1, r->prob[i][j] = 0;
        dlp_infer_topk(r->logits + (size_t)i * e.num_classes, e.num_classes, DLP_CLASSIFY_TOPK, r->cls[i], r->prob[i]);
        r->paths[i] = r->files.paths[lib.file[i]];
    }
    if (st == DLP_OK) {
        r->n = lib.n;
        r->skipped = lib.skipped;
        r->nfiles = r->files.n;
        r->plan = dlp_infer_engine_plan_json(&e);
    }
    dlp_infer_library_free(&lib);
    dlp_infer_prep_free(prep);
    dlp_infer_engine_free(&e);
    return st;
}

void dlp_classify_free(dlp_classify_result *r) {
    DLP_FREE_ALL(r->logits, r->paths, r->cls, r->prob);
    json_decref(r->plan);
    dlp_infer_labels_free(r->labels, r->nlabels);
    dlp_infer_files_free(&r->files);
    memset(r, 0, sizeof *r);
}

void dlp_classify_json(const dlp_classify_result *r, json_t *result) {
    json_t *arr = json_array();
    for (int i = 0; i < r->n; i++) {
        const int *cls = r->cls[i];
        const float *prob = r->prob[i];
        json_t *top = json_array();
        for (int j = 0; j < DLP_CLASSIFY_TOPK && cls[j] >= 0; j++) {
            json_t *t = json_pack("{si so}", "class", cls[j], "prob", dlp_json_real_or_null(prob[j]));
            json_t *lab = cls[j] < r->nlabels ? json_string(r->labels[cls[j]]) : NULL;  // NULL: not UTF-8
            if (cls[j] < r->nlabels) json_object_set_new(t, "label", lab ? lab : json_null());
            json_array_append_new(top, t);
        }
        json_t *logit_arr = json_array();
        for (int k = 0; k < r->num_classes; k++)  // keeps every index
            json_array_append_new(logit_arr, dlp_json_real_or_null(r->logits[(size_t)i * r->num_classes + k]));
        json_array_append_new(arr, json_pack("{ss so so}", "path", r->paths[i], "top5", top, "logits", logit_arr));
    }
    json_object_set_new(result, "top5", arr);
    json_object_set_new(result, "labels", r->labels_src[0] ? json_string(r->labels_src) : json_null());
    json_object_set_new(result, "skipped_images", json_integer(r->skipped));
    json_object_set_new(result, "plan", json_incref(r->plan));
}
