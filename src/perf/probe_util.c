// perf/probe_util: what the probe's parts share (declared in perf/probe_impl.h) — progress lines, the wait for a
// quiet machine before a retry, a least-squares fit as JSON. The parts depend on this file, not on the driver
// (probe.c), which only calls them.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "hw/host.h"
#include "perf/probe_impl.h"

void dlp_probe_say(dlp_probe_ctx *c, const char *fmt, ...) {
    if (!c->cfg->progress) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "probe %5.1fs  ", dlp_ns_to_s(dlp_now_ns() - c->t_start_ns));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    c->cfg->progress(c->cfg->progress_ctx, line);
}

void dlp_probe_retry_wait(dlp_probe_ctx *c) {
    double w = c->quiet_budget_s < 15 ? c->quiet_budget_s : 15;
    if (!(w > 0)) return;
    int64_t t0 = dlp_now_ns();
    dlp_wait_quiet(w, DLP_PROBE_DISTURBED_CORES);
    c->quiet_budget_s -= dlp_ns_to_s(dlp_now_ns() - t0);
}

json_t *dlp_probe_fit_json(const dlp_lsq_fit *f, const char *const *names) {
    json_t *o = json_object(), *c = json_object();
    for (int j = 0; j < f->k; j++) json_object_set_new(c, names[j], json_real(f->coef[j]));
    json_object_set_new(o, "coef", c);
    json_object_set_new(o, "n", json_integer(f->n));
    json_object_set_new(o, "rms", json_real(f->rms));
    json_object_set_new(o, "mape", json_real(f->mape));
    json_object_set_new(o, "max_ape", json_real(f->max_ape));
    json_object_set_new(o, "r2", json_real(f->r2));
    return o;
}

dlp_rate *dlp_probe_row_new(dlp_device_profile *dev, dlp_task task, dlp_prec prec, int threads, int batch_ref,
                            const char *model, int size, double t0_s, double per_image_s, double cores_busy) {
    if (dev->nrates >= DLP_DEVICE_MAX_RATES) return NULL;
    dlp_rate *row = &dev->rates[dev->nrates++];
    memset(row, 0, sizeof *row);
    row->task = task;
    row->prec = prec;
    row->threads = threads;
    row->batch_ref = batch_ref;
    snprintf(row->model, sizeof row->model, "%s", model);
    row->size = size;
    row->t0_s = t0_s;
    row->per_image_s = per_image_s;
    row->cores_busy = cores_busy;
    return row;
}
