// hw/steptime: a device's step time from its profile rows.
#include "hw/steptime.h"

#include <stdio.h>
#include <string.h>

dlp_status dlp_step_times_compute(const dlp_device_profile *d, const dlp_step_request *q, dlp_step_times *out) {
    memset(out, 0, sizeof *out);
    if (q->batch < 1 || !(q->work_ratio > 0) || q->params_ratio < 0 || q->input_bytes < 0)
        return DLP_ERR(DLP_ERR_INVALID, "step on %s: batch %d, work ratio %g, params ratio %g: need batch >= 1, ratio > 0",
                       d->name, q->batch, q->work_ratio, q->params_ratio);
    const dlp_rate *r = dlp_device_find_rate_for(d, q->task, q->prec, q->threads, q->model, q->size);
    if (!r) {
        char have[256] = "";
        size_t n = 0;
        for (int i = 0; i < d->nrates && n + 32 < sizeof have; i++)
            n += (size_t)snprintf(have + n, sizeof have - n, "%s%s %s", n ? ", " : "", dlp_task_name(d->rates[i].task),
                                  dlp_prec_name(d->rates[i].prec));
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "device %s has no %s rate at %s (it has: %s)", d->name, dlp_task_name(q->task),
                       dlp_prec_name(q->prec), have[0] ? have : "none");
    }
    out->rate = r;
    double scale = 1.0;
    // A cpu row measured at fewer threads than asked is used as is; one measured at more threads than the
    // caller allows is scaled down in proportion (an extrapolation; predict notes it).
    if (d->kind == DLP_DEVICE_CPU && q->threads > 0 && r->threads > q->threads) scale = (double)r->threads / q->threads;
    double work = (r->t0_s + q->batch * r->per_image_s * q->work_ratio) * scale;
    if (q->task == DLP_TASK_TRAIN) {
        out->fwd_s = d->fwd_fraction * work;
        out->bwd_s = work - out->fwd_s;
        out->update_s = r->update_s * q->params_ratio * scale;
    } else {
        out->fwd_s = work;
    }
    out->compute_s = out->fwd_s + out->bwd_s + out->update_s;
    double bw = q->h2d_bytes_per_s > 0 ? q->h2d_bytes_per_s : d->h2d_bytes_per_s;
    if (bw > 0 && q->input_bytes > 0) out->h2d_s = q->batch * q->input_bytes / bw;
    out->step_s = d->h2d_overlap ? (out->compute_s > out->h2d_s ? out->compute_s : out->h2d_s) : out->compute_s + out->h2d_s;
    out->cores_busy = r->cores_busy;
    if (d->kind == DLP_DEVICE_CPU && q->threads > 0 && r->threads > q->threads) out->cores_busy = q->threads;
    return DLP_OK;
}
