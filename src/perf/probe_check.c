// perf/probe_check: the finished profile against the loader alone — the model's prediction for `data bench` on the
// probe's subset (a device that never waits: sim:custom at 10 million img/s) beside the measured rate, warm and cold,
// at 1..N threads. Recorded under "checks" in the profile's details; a self-consistency check of the fits, not
// the validation (that is `dlperf validate`, on training runs).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bench.h"
#include "hw/derive.h"
#include "perf/datastats.h"
#include "perf/model.h"
#include "perf/probe_impl.h"

static dlp_status predict_loader(dlp_probe_ctx *c, const dlp_dataset_stats *stats, int workers, int cold, double *x) {
    dlp_sim_spec s;
    DLP_CHECK(dlp_sim_spec_parse("custom,img_per_s=10000000", &s));
    dlp_device_profile dev;
    DLP_CHECK(dlp_sim_device(&s, NULL, &dev));
    dlp_workload w;
    dlp_workload_init(&w);
    w.classes = c->ds->nclasses;
    w.batch = 32;
    w.devices = 1;
    w.workers = workers;
    w.storage = cold ? DLP_STORAGE_COLD : DLP_STORAGE_WARM;
    w.stats = *stats;
    w.seed = c->cfg->seed + 1;
    dlp_prediction *pr = malloc(sizeof *pr);
    if (!pr) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    dlp_status st = dlp_predict(c->p, &dev, &w, pr);
    if (st == DLP_OK) *x = pr->img_per_s;
    free(pr);
    return st;
}

dlp_status dlp_probe_checks(dlp_probe_ctx *c) {
    if (!c->ds) return DLP_OK;
    dlp_dataset_stats *stats = malloc(sizeof *stats);
    if (!stats) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    int skipped = 0;
    dlp_status st = dlp_dataset_stats_of(c->ds, c->nsubset, 0, stats, &skipped);
    json_t *arr = json_array();
    json_object_set_new(c->details, "checks", arr);
    for (int cold = 0; cold <= 1 && st == DLP_OK; cold++) {
        if (cold && !(c->p->storage.cold_read_bytes_per_s > 0)) break;
        for (int w = 1; w <= c->threads && st == DLP_OK; w++) {
            dlp_data_bench_run r;
            double x = 0, other = 0;  // other crops than the fits saw
            st = dlp_probe_loader_rate(c, 224, w, cold, c->cfg->seed + 7, c->cfg->quick ? 1 : 2, &r, &other, NULL, NULL, NULL);
            if (st == DLP_OK) st = predict_loader(c, stats, w, cold, &x);
            if (st) break;
            r.img_per_s = r.steady_img_per_s;  // the start of the pass left out, as the model predicts a steady rate
            double ape = r.img_per_s > 0 ? fabs(x - r.img_per_s) / r.img_per_s : NAN;
            json_array_append_new(arr, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f}", "storage", cold ? "cold" : "warm",
                                                 "workers", w, "size", 224, "measured_img_per_s", r.img_per_s,
                                                 "predicted_img_per_s", x, "ape", isfinite(ape) ? ape : -1,
                                                 "other_cores", isfinite(other) ? other : -1));
            dlp_probe_say(c, "check: the loader alone, %s, %d thread(s), 224 px: measured %.0f img/s, the profile "
                          "predicts %.0f (%.1f%%)", cold ? "cold" : "warm", w, r.img_per_s, x, 100 * ape);
        }
    }
    free(stats);
    return st;
}
