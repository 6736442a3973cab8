// backend/plan: the public dlp_backend_* / dlp_plan_* calls over a backend's interface (backend/backend_impl.h). The
// optional entries are handled here once, so no caller tests for NULL.
#include <jansson.h>

#include "backend/backend_impl.h"
#include "core/log.h"

const char *dlp_backend_name(const dlp_backend *b) { return b->name; }
const char *dlp_backend_summary(const dlp_backend *b) { return b->summary; }

dlp_status dlp_backend_available(const dlp_backend *b, char *why, size_t why_len) {
    if (why && why_len) why[0] = '\0';
    return b->available(why, why_len);
}

int dlp_backend_has(const dlp_backend *b, dlp_backend_feature f) {
    switch (f) {
    case DLP_BACKEND_PEAK: return b->measure_peak != NULL;
    case DLP_BACKEND_INPUT_GRAD: return b->get_input_grad != NULL;
    case DLP_BACKEND_INPUT_STATS: return b->input_stats != NULL;
    case DLP_BACKEND_ASYNC: return b->sync != NULL;
    case DLP_BACKEND_PLAN_INFO: return b->plan_info != NULL;
    }
    return 0;
}

const dlp_backend_caps *dlp_backend_get_caps(const dlp_backend *b) { return &b->caps; }

const char *dlp_backend_kind_name(dlp_backend_kind k) {
    switch (k) {
    case DLP_BACKEND_KIND_CPU: return "cpu";
    case DLP_BACKEND_KIND_GPU: return "gpu";
    case DLP_BACKEND_KIND_SIM: return "sim";
    case DLP_BACKEND_KIND_UNKNOWN: break;
    }
    return "unknown";
}

dlp_status dlp_backend_measure_peak(const dlp_backend *b, dlp_dtype precision, int threads, double *gflops) {
    *gflops = 0;
    return b->measure_peak ? b->measure_peak(precision, threads, gflops) : DLP_OK;
}

dlp_status dlp_backend_measure_speed(const dlp_backend *b, dlp_dtype precision, int threads, double seconds,
                                     double *gflops_per_cpu_s, double *share) {
    *gflops_per_cpu_s = 0;
    if (share) *share = 0;
    return b->measure_speed ? b->measure_speed(precision, threads, seconds, gflops_per_cpu_s, share) : DLP_OK;
}

dlp_status dlp_plan_create(const dlp_backend *b, const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
    *out = NULL;
    DLP_CHECK(b->plan_create(net, cfg, out));
    (*out)->param_count = net->param_count;
    return DLP_OK;
}

void dlp_plan_free(dlp_plan *p) {
    if (p) p->ops->plan_free(p);
}

const dlp_backend *dlp_plan_backend(const dlp_plan *p) { return p->ops; }
int64_t dlp_plan_param_count(const dlp_plan *p) { return p->param_count; }

void dlp_plan_input_format(const dlp_plan *p, dlp_layout *layout, dlp_dtype *dtype) {
    p->ops->input_format(p, layout, dtype);
}

dlp_status dlp_plan_set_params(dlp_plan *p, const float *params, const float *bufs) {
    return p->ops->set_params(p, params, bufs);
}
dlp_status dlp_plan_get_params(dlp_plan *p, float *params, float *bufs) { return p->ops->get_params(p, params, bufs); }
dlp_status dlp_plan_get_grads(dlp_plan *p, float *grads) { return p->ops->get_grads(p, grads); }
dlp_status dlp_plan_set_momentum(dlp_plan *p, const float *v) { return p->ops->set_momentum(p, v); }
dlp_status dlp_plan_get_momentum(dlp_plan *p, float *v) { return p->ops->get_momentum(p, v); }
float *dlp_plan_grad_buffer(dlp_plan *p) { return p->ops->grad_buffer(p); }

dlp_status dlp_plan_set_input(dlp_plan *p, const void *batch, int n) { return p->ops->set_input(p, batch, n); }
dlp_status dlp_plan_forward(dlp_plan *p, dlp_pass pass) { return p->ops->forward(p, pass); }
dlp_status dlp_plan_get_output(dlp_plan *p, float *out) { return p->ops->get_output(p, out); }
dlp_status dlp_plan_loss(dlp_plan *p, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    return p->ops->loss(p, labels, label_smoothing, out);
}
dlp_status dlp_plan_backward(dlp_plan *p, const float *dy) { return p->ops->backward(p, dy); }
dlp_status dlp_plan_get_input_grad(dlp_plan *p, float *dx) {
    if (!p->ops->get_input_grad)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "the %s backend does not keep the input gradient", p->ops->name);
    return p->ops->get_input_grad(p, dx);
}
dlp_status dlp_plan_update(dlp_plan *p, const dlp_sgd *hp) { return p->ops->update(p, hp); }
dlp_status dlp_plan_sync(dlp_plan *p) { return p->ops->sync ? p->ops->sync(p) : DLP_OK; }
void *dlp_plan_stream(dlp_plan *p) { return p->ops->stream ? p->ops->stream(p) : NULL; }

dlp_status dlp_plan_input_stats(dlp_plan *p, double *copy_ms, double *stall_ms, int64_t *copies) {
    *copy_ms = *stall_ms = 0;
    *copies = 0;
    return p->ops->input_stats ? p->ops->input_stats(p, copy_ms, stall_ms, copies) : DLP_OK;
}

dlp_status dlp_plan_info(const dlp_plan *p, json_t *obj) {
    if (!p->ops->plan_info)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "the %s backend does not describe its plans", p->ops->name);
    return p->ops->plan_info(p, obj);
}

json_t *dlp_plan_info_json(const dlp_plan *p) {
    if (!p->ops->plan_info) return NULL;
    json_t *info = json_object();
    if (p->ops->plan_info(p, info) == DLP_OK) return info;
    dlp_err_clear();
    json_decref(info);
    return NULL;
}
