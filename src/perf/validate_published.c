// perf/validate_published: the GPU model (hw/gpumodel) against the catalog's published training figures, each
// predicted with its GPU held out: leave-one-GPU-out within each stack (see validate.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fs.h"
#include "core/json.h"
#include "hw/gpumodel.h"
#include "perf/validate.h"

// The distinct stacks of the catalog's training records, in order of first appearance.
static int list_stacks(const dlp_catalog *c, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < c->npublished; i++) {
        const dlp_published *p = &c->published[i];
        if (p->task != DLP_TASK_TRAIN || p->estimate) continue;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= strcasecmp(out[j], p->stack) == 0;
        if (!seen && n < max) out[n++] = p->stack;
    }
    return n;
}

dlp_status dlp_validate_published(const dlp_catalog *c, dlp_vp_row *rows, int max, int *n, int *skipped) {
    return dlp_validate_published_by(c, 0, rows, max, n, skipped);
}

static int held_together(const dlp_gpu_spec *a, const dlp_gpu_spec *b, int by_sheet) {
    return by_sheet ? dlp_gm_same_sheet(a, b) : a == b;
}

dlp_status dlp_validate_published_by(const dlp_catalog *c, int by_sheet, dlp_vp_row *rows, int max, int *n, int *skipped) {
    *n = 0;
    *skipped = 0;
    const char *stacks[64];
    int ns = list_stacks(c, stacks, 64);
    for (int s = 0; s < ns; s++) {
        dlp_gm_record rec[DLP_GM_MAX_RECORDS];
        int nr = dlp_gm_records(c, stacks[s], NULL, rec, DLP_GM_MAX_RECORDS);
        for (int i = 0; i < nr; i++) {
            int first = 1;
            for (int j = 0; j < i; j++) first &= !held_together(rec[j].gpu, rec[i].gpu, by_sheet);
            if (!first) continue;
            // Fit without any record of this GPU (the prior over all stacks leaves it out too).
            dlp_gm_stack fit;
            dlp_status st = dlp_gm_fit_catalog_held(c, stacks[s], rec[i].gpu, by_sheet, &fit);
            if (st == DLP_ERR_NOTFOUND) {  // the stack has no other GPU: nothing to predict it from
                dlp_err_clear();
                for (int j = i; j < nr; j++) *skipped += held_together(rec[j].gpu, rec[i].gpu, by_sheet);
                continue;
            }
            DLP_CHECK(st);
            for (int j = i; j < nr; j++) {
                if (!held_together(rec[j].gpu, rec[i].gpu, by_sheet)) continue;
                dlp_gm_step step;
                DLP_CHECK(dlp_gm_step_compute(rec[j].gpu, rec[j].prec, &fit, &step));
                if (*n >= max) return DLP_ERR(DLP_ERR_INVALID, "more than %d published records", max);
                dlp_vp_row *r = &rows[(*n)++];
                memset(r, 0, sizeof *r);
                r->pub = rec[j].pub;
                snprintf(r->stack, sizeof r->stack, "%s", stacks[s]);
                r->batch = rec[j].batch;
                r->predicted = dlp_gm_img_per_s(&step, &fit, rec[j].batch, rec[j].gpus, rec[j].busbw_bytes_per_s);
                r->error = (r->predicted - rec[j].img_per_s) / rec[j].img_per_s;
                r->fit = fit;
            }
        }
    }
    return DLP_OK;
}

// The stricter pass: each GPU held out together with its same-datasheet twins; its MAPE overall and per stack.
// The sum of one stack's absolute relative errors over the rows, and (*k) how many rows it has.
static double stack_abs_error(const dlp_vp_row *rows, int n, const char *stack, int *k) {
    double ss = 0;
    *k = 0;
    for (int i = 0; i < n; i++)
        if (strcasecmp(rows[i].stack, stack) == 0) {
            ss += fabs(rows[i].error);
            (*k)++;
        }
    return ss;
}

static dlp_status print_by_sheet(const dlp_catalog *c, json_t *res) {
    dlp_vp_row *rows = calloc(DLP_GM_MAX_RECORDS, sizeof *rows);
    if (!rows) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    int n = 0, skipped = 0;
    dlp_status st = dlp_validate_published_by(c, 1, rows, DLP_GM_MAX_RECORDS, &n, &skipped);
    if (st == DLP_OK) {
        json_t *o = json_object(), *js = json_object();
        double sum = 0;
        for (int i = 0; i < n; i++) sum += fabs(rows[i].error);
        printf("\nHeld out by datasheet (a GPU together with every GPU of the same datasheet, e.g. V100 16 and 32 GB):\n"
               "  MAPE %.1f%% over %d held-out records (%d could not be held out)\n", n ? 100 * sum / n : 0, n, skipped);
        const char *stacks[64];
        int ns = list_stacks(c, stacks, 64);
        for (int s = 0; s < ns; s++) {
            int k;
            const double ss = stack_abs_error(rows, n, stacks[s], &k);
            if (!k) continue;
            printf("  %-17s MAPE %5.1f%% over %2d held out\n", stacks[s], 100 * ss / k, k);
            json_object_set_new(js, stacks[s], json_real(ss / k));
        }
        json_object_set_new(o, "mape", json_real(n ? sum / n : 0));
        json_object_set_new(o, "held_out", json_integer(n));
        json_object_set_new(o, "not_held_out", json_integer(skipped));
        json_object_set_new(o, "stacks", js);
        json_object_set_new(res, "by_datasheet", o);
    }
    free(rows);
    return st;
}

dlp_status dlp_validate_published_run(const char *catalog_dir, const char *json_path) {
    dlp_catalog *c = NULL;
    DLP_CHECK(dlp_catalog_load(catalog_dir, &c));
    dlp_vp_row *rows = calloc(DLP_GM_MAX_RECORDS, sizeof *rows);
    if (!rows) {
        dlp_catalog_free(c);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    int n = 0, skipped = 0;
    dlp_status st = dlp_validate_published(c, rows, DLP_GM_MAX_RECORDS, &n, &skipped);
    json_t *res = NULL;
    if (st == DLP_OK) {
        printf("Leave-one-GPU-out within each stack: every published training record predicted from its GPU's datasheet\n"
               "and the stack's efficiencies fitted on the stack's other GPUs (and a prior fitted on every stack's other\n"
               "GPUs); no record of the held-out GPU enters either fit.\n\n");
        printf("%-15s %-15s %4s %6s %-5s %10s %10s %8s  %s\n", "gpu", "stack", "gpus", "batch", "prec", "published",
               "predicted", "error", "fit");
        res = dlp_json_result_new("dlperf.validate_published/1", 0, NULL);
        json_t *ja = json_array();
        json_object_set_new(res, "rows", ja);
        double sum = 0;
        int n8 = 0;
        char gpus_seen[64][48];
        int ng = 0;
        for (int i = 0; i < n; i++) {
            const dlp_vp_row *r = &rows[i];
            const dlp_published *p = r->pub;
            char b[16];
            if (r->batch > 0) snprintf(b, sizeof b, "%d", r->batch);
            else snprintf(b, sizeof b, "(%d)", DLP_GM_DEFAULT_BATCH);
            double ce, me, ks;
            dlp_gm_effective(&r->fit, p->prec, &ce, &me, &ks);  // at the record's precision
            printf("%-15s %-15s %4d %6s %-5s %10.0f %10.0f %+7.1f%%  %s ce %.3f me %.3f\n", p->gpu->id, r->stack, p->gpus,
                   b, dlp_prec_name(p->prec), p->img_per_s, r->predicted, 100 * r->error, r->fit.scaled ? "prior x" : "own",
                   ce, me);
            sum += fabs(r->error);
            n8 += p->gpus > 1;
            int seen = 0;
            for (int g = 0; g < ng; g++) seen |= strcmp(gpus_seen[g], p->gpu->id) == 0;
            if (!seen && ng < 64) snprintf(gpus_seen[ng++], sizeof gpus_seen[0], "%s", p->gpu->id);
            json_t *e = json_object();
            json_object_set_new(e, "gpu", json_string(p->gpu->id));
            json_object_set_new(e, "stack", json_string(r->stack));
            json_object_set_new(e, "gpus", json_integer(p->gpus));
            json_object_set_new(e, "batch", json_integer(p->batch));
            json_object_set_new(e, "precision", json_string(dlp_prec_name(p->prec)));
            json_object_set_new(e, "published_img_per_s", json_real(p->img_per_s));
            json_object_set_new(e, "predicted_img_per_s", json_real(r->predicted));
            json_object_set_new(e, "error", json_real(r->error));
            json_object_set_new(e, "source", json_string(p->src->id));
            json_object_set_new(e, "fit_scaled_prior", json_boolean(r->fit.scaled));
            json_array_append_new(ja, e);
        }
        double mape = n ? sum / n : 0;
        printf("\nMAPE %.1f%% over %d held-out records (%d multi-GPU) on %d GPUs", 100 * mape, n, n8, ng);
        const char *stacks[64];
        int ns = list_stacks(c, stacks, 64), used = 0;
        json_t *js = json_object();
        for (int s = 0; s < ns; s++) {
            int k;
            const double ss = stack_abs_error(rows, n, stacks[s], &k);
            used += k > 0;
            dlp_gm_stack full;
            json_t *o = json_object();
            if (dlp_gm_fit_catalog(c, stacks[s], NULL, &full) == DLP_OK) {
                json_object_set_new(o, "ce", json_real(full.ce));
                json_object_set_new(o, "me", json_real(full.me));
                json_object_set_new(o, "kernel_s", json_real(full.kernel_s));
                json_object_set_new(o, "loss_per_gpu", json_real(full.loss));
                json_object_set_new(o, "overlap", json_real(full.overlap));
                json_object_set_new(o, "records", json_integer(full.nrecords));
                json_object_set_new(o, "gpus", json_integer(full.ngpus));
                json_object_set_new(o, "scaled_prior", json_boolean(full.scaled));
                json_object_set_new(o, "scale", json_real(full.scale));
                json_object_set_new(o, "sm_bytes_per_clk", json_real(full.sm_bytes_per_clk));
                json_t *pf = json_object();
                static const char *const cls[DLP_GM_PCLASSES] = {"16bit", "tf32", "fp32"};
                for (int pk = 0; pk < DLP_GM_PCLASSES; pk++) json_object_set_new(pf, cls[pk], json_real(full.pscale[pk]));
                json_object_set_new(o, "precision_factor", pf);
            } else {
                dlp_err_clear();
            }
            json_object_set_new(o, "held_out_records", json_integer(k));
            if (k) json_object_set_new(o, "mape", json_real(ss / k));
            json_object_set_new(js, stacks[s], o);
        }
        printf(", %d stacks\n", used);
        for (int s = 0; s < ns; s++) {
            json_t *o = json_object_get(js, stacks[s]);
            json_t *m = json_object_get(o, "mape");
            printf("  %-17s", stacks[s]);
            if (m) printf(" MAPE %5.1f%% over %2d held out", 100 * json_real_value(m),
                          (int)json_integer_value(json_object_get(o, "held_out_records")));
            else printf(" %-31s", " (one GPU only: nothing held out)");
            if (json_object_get(o, "ce"))
                printf("; fitted on all %d records (%d GPUs)%s: ce %.3f, me %.3f, %.1f us per kernel, loss %.2f%% per "
                       "added GPU, SM limit %g B/clk", (int)json_integer_value(json_object_get(o, "records")),
                       (int)json_integer_value(json_object_get(o, "gpus")),
                       json_is_true(json_object_get(o, "scaled_prior")) ? " as a scaled prior" : "",
                       json_real_value(json_object_get(o, "ce")), json_real_value(json_object_get(o, "me")),
                       1e6 * json_real_value(json_object_get(o, "kernel_s")),
                       100 * json_real_value(json_object_get(o, "loss_per_gpu")),
                       json_real_value(json_object_get(o, "sm_bytes_per_clk")));
            json_t *pf = json_object_get(o, "precision_factor");
            if (pf)
                printf("; time x%.2f at tf32, x%.2f at fp32 (16-bit x%.2f)",
                       json_real_value(json_object_get(pf, "tf32")), json_real_value(json_object_get(pf, "fp32")),
                       json_real_value(json_object_get(pf, "16bit")));
            printf("\n");
        }
        if (skipped) printf("  (%d records of GPUs that are alone in their stack could not be held out)\n", skipped);
        if (st == DLP_OK) st = print_by_sheet(c, res);
        json_object_set_new(res, "stacks", js);
        json_object_set_new(res, "mape", json_real(mape));
        json_object_set_new(res, "held_out", json_integer(n));
        json_object_set_new(res, "multi_gpu_held_out", json_integer(n8));
        json_object_set_new(res, "gpus", json_integer(ng));
        json_object_set_new(res, "not_held_out", json_integer(skipped));
        if (json_path) st = dlp_json_write(res, json_path, DLP_WRITE_NOCLOBBER);
    }
    json_decref(res);
    free(rows);
    dlp_catalog_free(c);
    return st;
}
