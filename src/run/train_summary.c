// run/train_summary: a training run's summary table (run/train_summary.h).
#include "run/train_summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static const double *mget(const json_t *metrics, const char *name, const char *stat, double *out) {
    const json_t *v = json_object_get(json_object_get(metrics, name), stat);
    if (!json_is_number(v)) return NULL;
    *out = json_number_value(v);
    return out;
}

char *dlp_train_summary_text(const dlp_train_cfg *c, const dlp_train_result *r, const char *json_path) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    const json_t *j = r->json;
    const json_t *res = json_object_get(json_object_get(j, "config"), "resolved");
    const json_t *data = json_object_get(j, "data");
    fprintf(f, "dlperf train: %s, %d classes, %dx%d, batch %d, %s %s, %d compute thread%s, %d loader thread%s\n",
               json_string_value(json_object_get(json_object_get(j, "model"), "arch")),
               (int)json_integer_value(json_object_get(res, "classes")), c->size, c->size, c->batch,
               json_string_value(json_object_get(res, "device")), dlp_dtype_name(c->precision), r->threads,
               r->threads == 1 ? "" : "s", r->workers, r->workers == 1 ? "" : "s");
    fprintf(f, "%-11s %s (%lld images/epoch)", "data", json_string_value(json_object_get(data, "train")),
               (long long)json_integer_value(json_object_get(data, "train_images_per_epoch")));
    if (json_is_string(json_object_get(data, "val")))
        fprintf(f, "; val %s (%lld)", json_string_value(json_object_get(data, "val")),
                   (long long)json_integer_value(json_object_get(data, "val_images")));
    fprintf(f, "\n");
    fprintf(f, "%-11s %lld steps (to step %lld, %.2f epochs) in %.1f s: setup %.1f s, training %.1f s, eval %.1f s, "
               "checkpoints %.1f s; stopped by %s\n",
               "run", (long long)r->steps, (long long)(r->first_step + r->steps), r->epochs_done, r->wall_s, r->setup_s,
               r->train_s, r->eval_s, r->checkpoint_s, r->stopped_by);
    fprintf(f, "%-11s %10s %7s\n", "phase", "ms/step", "%");
    double total = 0;
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) total += r->phase_ms[p];
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++)
        fprintf(f, "  %-9s %10.2f %7.1f\n", dlp_train_phase_name((dlp_train_phase)p),
                   r->steps ? r->phase_ms[p] / (double)r->steps : 0, total > 0 ? 100 * r->phase_ms[p] / total : 0);
    fprintf(f, "  %-9s %10.2f %7.1f\n", "step", r->steps ? total / (double)r->steps : 0, 100.0);
    const json_t *steady = json_object_get(j, "steady_state");
    const long long wu = (long long)json_integer_value(json_object_get(steady, "warmup_steps"));
    fprintf(f, "%-11s %.2f img/s overall; %.2f steady (after %lld warm-up step%s); compute alone %.2f img/s; loader "
               "capacity ~%.0f img/s\n",
               "throughput", r->img_per_s, r->steady_img_per_s, wu, wu == 1 ? "" : "s", r->compute_img_per_s,
               r->loader_img_per_s);
    const json_t *gf = json_object_get(j, "gflop");
    if (r->peak_gflop_per_s > 0)
        fprintf(f, "%-11s %.1f GFLOP/s achieved (%.3f GFLOP per image) = %.0f%% of the %s peak %.1f GFLOP/s; %.1f GFLOP/s "
                   "(%.0f%%) while computing\n",
                   "compute", r->gflop_per_s, r->gflop_per_image, 100 * r->fraction_of_peak,
                   json_string_value(json_object_get(gf, "peak_source")), r->peak_gflop_per_s, r->compute_gflop_per_s,
                   100 * r->compute_gflop_per_s / r->peak_gflop_per_s);
    else
        fprintf(f, "%-11s %.1f GFLOP/s achieved (%.3f GFLOP per image); %.1f GFLOP/s while computing; no peak for this "
                   "backend\n",
                   "compute", r->gflop_per_s, r->gflop_per_image, r->compute_gflop_per_s);
    const json_t *note = json_object_get(gf, "peak_note");
    if (json_is_string(note)) fprintf(f, "%-11s note: %s\n", "", json_string_value(note));
    fprintf(f, "%-11s loss %.4f at the first step, %.4f at the last\n", "loss", r->first_loss, r->last_loss);
    if (r->nevals > 0) {
        fprintf(f, "%-11s val top-1 %.2f%% (best %.2f%%), top-5 %.2f%% at the end\n", "accuracy", 100 * r->last_top1,
                   100 * r->best_top1, 100 * r->last_top5);
        const json_t *eps = json_object_get(j, "epochs");
        size_t i;
        const json_t *e;
        int any = 0;
        json_array_foreach(eps, i, e) {
            const json_t *v = json_object_get(e, "val");
            if (!json_is_object(v)) continue;
            if (!any) fprintf(f, "%-11s", "  per epoch");
            fprintf(f, " %lld: %.1f%%", (long long)json_integer_value(json_object_get(e, "epoch")),
                       100 * json_number_value(json_object_get(v, "top1")));
            any = 1;
        }
        if (any) fprintf(f, "\n");
    }
    fprintf(f, "%-11s %s\n", "stall", r->verdict_text);
    const json_t *ld = json_object_get(json_object_get(j, "loader"), "train");
    if (json_is_object(ld)) {
        const json_t *ms = json_object_get(ld, "worker_ms_per_image"), *bad = json_object_get(ld, "bad");
        fprintf(f, "%-11s worker ms per image: read %.3f, decode %.3f, augment %.3f; %.1f MB read; bad files %lld",
                   "loader", json_number_value(json_object_get(ms, "read")),
                   json_number_value(json_object_get(ms, "decode")), json_number_value(json_object_get(ms, "augment")),
                   (double)json_integer_value(json_object_get(ld, "bytes_read")) / 1e6,
                   (long long)json_integer_value(json_object_get(bad, "files")));
        const char *key;
        const json_t *v;
        int first = 1;
        json_object_foreach((json_t *)bad, key, v) {
            if (strcmp(key, "files") == 0 || strcmp(key, "replaced_samples") == 0 || json_integer_value(v) == 0)
                continue;
            fprintf(f, "%s%s %lld", first ? " (" : ", ", key, (long long)json_integer_value(v));
            first = 0;
        }
        fprintf(f, "%s\n", first ? "" : ")");
    }
    const json_t *tot = json_object_get(json_object_get(j, "monitor"), "total");
    const json_t *m = json_object_get(tot, "metrics");
    double util, proc, rss;
    if (mget(m, "cpu.all.util_pct", "mean", &util) && mget(m, "proc.cpu_pct", "mean", &proc) &&
        mget(m, "proc.rss_bytes", "max", &rss))
        fprintf(f, "%-11s machine CPU %.0f%% busy, this process %.0f%% of one core on average, peak RSS %.0f MiB\n",
                   "monitor", util, proc, rss / (1 << 20));
    const json_t *dist = json_object_get(j, "dist");
    if (r->world > 1) {
        const json_t *bw = json_object_get(dist, "allreduce_busbw_gb_s");
        fprintf(f, "%-11s %d ranks (%s), global batch %d: %.2f img/s over all ranks; gradient allreduce of %.1f MB: "
                   "%.2f ms/step exposed, %.2f hidden behind backward (%.0f buckets), bus bandwidth >= %.3f GB/s\n",
                   "dist", r->world, json_string_value(json_object_get(dist, "communicator")), c->batch * r->world,
                   r->img_per_s * r->world, json_number_value(json_object_get(dist, "allreduce_bytes_per_step")) / 1e6,
                   json_number_value(json_object_get(dist, "allreduce_exposed_ms_per_step")),
                   json_number_value(json_object_get(dist, "allreduce_hidden_ms_per_step")),
                   json_number_value(json_object_get(dist, "buckets_per_step")), json_is_number(bw) ? json_number_value(bw) : 0.0);
    }
    if (r->last_checkpoint[0]) fprintf(f, "%-11s %s\n", "checkpoint", r->last_checkpoint);
    if (json_path) fprintf(f, "%-11s %s\n", "result", json_path);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
