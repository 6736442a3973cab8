// hw/gpumodel: the GPU step model from the datasheet and a stack's fitted efficiencies (see gpumodel.h).
#include "hw/gpumodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf/lsq.h"

// --- the layers of the reference work --------------------------------------------------------------------------------

static dlp_wlayer g_layers[DLP_WORK_MAX_LAYERS];
static int g_nlayers;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static double g_pass_flops[2 * DLP_WORK_MAX_LAYERS], g_pass_elems[2 * DLP_WORK_MAX_LAYERS];  // [2 i + backward]
static void layer_elems(const dlp_wlayer *l, double *fwd, double *bwd);
static void init_layers(void) {
    if (dlp_work_layers("resnet50", 224, 224, 1000, g_layers, DLP_WORK_MAX_LAYERS, &g_nlayers) != DLP_OK) g_nlayers = 0;
    for (int i = 0; i < g_nlayers; i++) {  // what pass_times derives from a layer, once (a fit asks ~10^4 times)
        g_pass_flops[2 * i] = g_layers[i].flops;
        g_pass_flops[2 * i + 1] = 2 * g_layers[i].flops;
        layer_elems(&g_layers[i], &g_pass_elems[2 * i], &g_pass_elems[2 * i + 1]);
    }
}

// Bytes moved per image in elements, forward and backward, for a layer's pass (the element size multiplies).
//   conv/fc: read input, write output; backward: dgrad reads dY and writes dX, wgrad reads dY and X
//   batch norm: statistics read X, normalize reads X and writes Y; backward reads dY and X twice (reduce, apply),
//               writes dX
//   ReLU: read, write; backward reads dY and Y, writes dX.  add: two reads and a write; backward passes dY through
//   pooling: read input, write output; backward read dY, write dX.  loss: the logits.
static void layer_elems(const dlp_wlayer *l, double *fwd, double *bwd) {
    switch (l->kind) {
    case DLP_WL_CONV:
    case DLP_WL_FC: *fwd = l->in_elems + l->out_elems; *bwd = 2 * l->out_elems + 2 * l->in_elems; break;
    case DLP_WL_BN: *fwd = 3 * l->out_elems; *bwd = 5 * l->out_elems; break;
    case DLP_WL_RELU: *fwd = 2 * l->out_elems; *bwd = 3 * l->out_elems; break;
    case DLP_WL_ADD: *fwd = l->in_elems + l->out_elems; *bwd = 2 * l->out_elems; break;
    case DLP_WL_POOL: *fwd = l->in_elems + l->out_elems; *bwd = l->in_elems + l->out_elems; break;
    default: *fwd = 2 * l->in_elems; *bwd = 2 * l->in_elems; break;
    }
}

static int kernels_of(const dlp_wlayer *l) { return l->kind == DLP_WL_CONV || l->kind == DLP_WL_FC ? 3 : 2; }

#define UPDATE_KERNELS 4

static double elem_bytes(dlp_prec p) { return p == DLP_PREC_FP16 || p == DLP_PREC_BF16 ? 2.0 : 4.0; }
// Optimizer traffic per parameter: fp32 weight, gradient and momentum read, weight and momentum written (20 B), with
// mixed precision also the half-precision weight copy written (22 B).
static double update_bytes_per_param(dlp_prec p) { return p == DLP_PREC_FP16 || p == DLP_PREC_BF16 ? 22.0 : 20.0; }
static double params_ref(void) { return (double)dlp_work_ref()->params; }

// The regressors of the step: per image, the FLOPs/peak of compute-bound passes (xc) and the bytes/bandwidth of
// memory-bound ones (xm) under the classification of efficiencies (ce, me); kernels per step. Fills st if given.
typedef struct {
    double xc, xm, kernels, update_bw;  // update_bw: update bytes / bandwidth (per step)
} regs;

// A pass's compute and memory times at full rate (before the efficiencies): FLOPs / peak, bytes / memory rate, where
// the memory rate is the HBM bandwidth or, lower, the SMs' k bytes per SM per clock.
static void pass_times(const dlp_wlayer *l, int backward, const dlp_gpu_spec *g, dlp_prec prec, double k, double *tc,
                       double *tm) {
    double peak = dlp_gpu_peak(g, prec) * 1e12, bw = g->mem_bw_gb_s * 1e9;
    if (k > 0 && g->sms > 0 && g->boost_mhz > 0 && g->sms * g->boost_mhz * 1e6 * k < bw) bw = g->sms * g->boost_mhz * 1e6 * k;
    double ef, eb;
    layer_elems(l, &ef, &eb);
    double F = backward ? 2 * l->flops : l->flops, B = elem_bytes(prec) * (backward ? eb : ef);
    *tc = peak > 0 ? F / peak : INFINITY;
    *tm = bw > 0 ? B / bw : INFINITY;
}

int dlp_gm_pclass(dlp_prec prec) { return prec == DLP_PREC_TF32 ? 1 : prec == DLP_PREC_FP32 ? 2 : 0; }

static double pfactor(const dlp_gm_stack *s, dlp_prec prec) {
    double f = s->pscale[dlp_gm_pclass(prec)];
    return f > 0 ? f : 1;
}

void dlp_gm_effective(const dlp_gm_stack *s, dlp_prec prec, double *ce, double *me, double *kernel_s) {
    double f = pfactor(s, prec);
    *ce = s->ce / f;
    *me = s->me / f;
    *kernel_s = s->kernel_s * f;
}

// Two records' GPUs have the same datasheet (a 16 and a 32 GB V100): they cannot tell compute from memory time apart.
int dlp_gm_same_sheet(const dlp_gpu_spec *a, const dlp_gpu_spec *b) {
    return a == b || (a->sms == b->sms && a->boost_mhz == b->boost_mhz && a->mem_bw_gb_s == b->mem_bw_gb_s &&
                      a->fp32_tflops == b->fp32_tflops && a->tf32_tflops == b->tf32_tflops &&
                      a->fp16_tflops == b->fp16_tflops && a->bf16_tflops == b->bf16_tflops);
}

static int count_sheets(const dlp_gm_record *r, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= dlp_gm_same_sheet(r[j].gpu, r[i].gpu);
        k += !seen;
    }
    return k;
}

double dlp_gm_layer_time(const dlp_wlayer *l, int backward, const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *s,
                         int *memory_bound) {
    double tc, tm;
    pass_times(l, backward, g, prec, s->sm_bytes_per_clk, &tc, &tm);
    int mem = tm / s->me >= tc / s->ce;
    if (memory_bound) *memory_bound = mem;
    return mem ? tm / s->me : tc / s->ce;
}

static dlp_status step_regs(const dlp_gpu_spec *g, dlp_prec prec, double ce, double me, double k, regs *r,
                            dlp_gm_step *st) {
    pthread_once(&g_once, init_layers);
    if (g_nlayers == 0) return DLP_ERR(DLP_ERR_INVALID, "gpumodel: the reference layers could not be built");
    if (!(dlp_gpu_peak(g, prec) > 0))
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "GPU %s has no %s rate on its datasheet", g->id, dlp_prec_name(prec));
    if (!(g->mem_bw_gb_s > 0)) return DLP_ERR(DLP_ERR_INVALID, "GPU %s has no memory bandwidth", g->id);
    double e = elem_bytes(prec);
    memset(r, 0, sizeof *r);
    // pass_times' arithmetic on the per-pass figures init_layers derived
    double peak = dlp_gpu_peak(g, prec) * 1e12, bw = g->mem_bw_gb_s * 1e9;
    if (k > 0 && g->sms > 0 && g->boost_mhz > 0 && g->sms * g->boost_mhz * 1e6 * k < bw) bw = g->sms * g->boost_mhz * 1e6 * k;
    for (int i = 0; i < g_nlayers; i++) {
        const dlp_wlayer *l = &g_layers[i];
        for (int pass = 0; pass < 2; pass++) {
            const double F = g_pass_flops[2 * i + pass], E = g_pass_elems[2 * i + pass];
            double tc = F / peak, tm = e * E / bw;
            int mem = tm / me >= tc / ce;
            if (mem) r->xm += tm;
            else r->xc += tc;
            if (st) {
                double t = mem ? tm / me : tc / ce;
                if (pass) st->bwd_s += t;
                else st->fwd_s += t;
                st->kind_s[l->kind] += t;
                if (mem) {
                    st->kind_mem_s[l->kind] += t;
                    st->memory_bound_s += t;
                } else {
                    st->compute_bound_s += t;
                }
                st->flops += F;
                st->bytes += e * E;
            }
        }
        r->kernels += kernels_of(l);
    }
    r->kernels += UPDATE_KERNELS;
    r->update_bw = params_ref() * update_bytes_per_param(prec) / (g->mem_bw_gb_s * 1e9);
    return DLP_OK;
}

dlp_status dlp_gm_step_compute(const dlp_gpu_spec *g, dlp_prec prec, const dlp_gm_stack *s, dlp_gm_step *out) {
    memset(out, 0, sizeof *out);
    if (!(s->ce > 0) || !(s->me > 0) || !(s->kernel_s >= 0))
        return DLP_ERR(DLP_ERR_INVALID, "stack %s: efficiencies must be > 0 (ce %g, me %g)", s->name, s->ce, s->me);
    regs r;
    DLP_CHECK(step_regs(g, prec, s->ce, s->me, s->sm_bytes_per_clk, &r, out));
    out->kernels = (int)r.kernels;
    out->kernel_s = r.kernels * s->kernel_s;
    out->update_s = r.update_bw / s->me;
    double f = pfactor(s, prec);  // the stack's factor at this precision class scales every time of the step
    out->fwd_s *= f;
    out->bwd_s *= f;
    out->kernel_s *= f;
    out->update_s *= f;
    out->compute_bound_s *= f;
    out->memory_bound_s *= f;
    for (int k = 0; k < DLP_WL_KIND_COUNT; k++) {
        out->kind_s[k] *= f;
        out->kind_mem_s[k] *= f;
    }
    return DLP_OK;
}

double dlp_gm_step_time(const dlp_gm_step *st, int batch) {
    if (batch <= 0) batch = DLP_GM_DEFAULT_BATCH;
    return st->kernel_s + batch * (st->fwd_s + st->bwd_s) + st->update_s;
}

static double allreduce_s(int n, double busbw) {
    if (n <= 1 || !(busbw > 0)) return 0;
    return 2.0 * (n - 1) / n * params_ref() * 4.0 / busbw;  // fp32 gradients
}

double dlp_gm_img_per_s(const dlp_gm_step *st, const dlp_gm_stack *s, int batch, int n, double busbw) {
    if (batch <= 0) batch = DLP_GM_DEFAULT_BATCH;
    if (n < 1) n = 1;
    double t = dlp_gm_step_time(st, batch);
    if (n > 1) t = t * (1 + s->loss * (n - 1)) + (1 - s->overlap) * allreduce_s(n, busbw);
    return n * batch / t;
}

double dlp_gm_busbw(const dlp_gpu_spec *g) {
    if (g->nvlink_gb_s > 0) return 0.8 * g->nvlink_gb_s / 2 * 1e9;  // datasheets give both directions
    return 0.8 * dlp_pcie_bytes_per_s(g->pcie_gen, g->pcie_lanes);
}

// --- fitting -----------------------------------------------------------------------------------------------------------

// Per image of one GPU at the record's batch, with the multi-GPU terms of stack s taken out.
static double single_y(const dlp_gm_record *r, const dlp_gm_stack *s) {
    int b = r->batch > 0 ? r->batch : DLP_GM_DEFAULT_BATCH;
    double step_n = (double)r->gpus * b / r->img_per_s;
    if (r->gpus <= 1) return step_n / b;
    double t1 = (step_n - (1 - s->overlap) * allreduce_s(r->gpus, r->busbw_bytes_per_s)) / (1 + s->loss * (r->gpus - 1));
    return t1 / b;
}

static dlp_status predict_record(const dlp_gm_record *r, const dlp_gm_stack *s, double *img_per_s) {
    dlp_gm_step st;
    DLP_CHECK(dlp_gm_step_compute(r->gpu, r->prec, s, &st));
    *img_per_s = dlp_gm_img_per_s(&st, s, r->batch, r->gpus, r->busbw_bytes_per_s);
    return DLP_OK;
}

// Weighted non-negative least squares for (1/ce, 1/me, kernel_s) with the efficiencies at most 1: a coefficient
// below 1 is held at 1 (that share of the peak at most) and the others fitted again.
static dlp_status solve_bounded(const double *X, const double *y, const double *w, int n, double coef[3]) {
    int fixed[2] = {0, 0};
    double Xs[DLP_GM_MAX_RECORDS * 3], ys[DLP_GM_MAX_RECORDS];
    for (int round = 0; round < 3; round++) {
        int cols[3], k = 0;
        for (int j = 0; j < 3; j++)
            if (j == 2 || !fixed[j]) cols[k++] = j;
        for (int i = 0; i < n; i++) {
            ys[i] = y[i];
            for (int j = 0; j < 2; j++)
                if (fixed[j]) ys[i] -= X[3 * i + j];
            for (int m = 0; m < k; m++) Xs[k * i + m] = X[3 * i + cols[m]];
        }
        dlp_lsq_fit f;
        DLP_CHECK(dlp_lsq_solve(Xs, ys, w, n, k, 1, &f));
        coef[0] = coef[1] = 1;
        coef[2] = 0;
        for (int m = 0; m < k; m++) coef[cols[m]] = f.coef[m];
        int again = 0;
        for (int j = 0; j < 2; j++)
            if (!fixed[j] && coef[j] < 1) {
                fixed[j] = 1;
                again = 1;
            }
        if (!again) break;
        coef[0] = fixed[0] ? 1 : coef[0];
        coef[1] = fixed[1] ? 1 : coef[1];
    }
    return DLP_OK;
}

// The stack's factor per precision class: the weighted least-squares ratio of the records' 1-GPU times to the
// model's at factor 1, class by class; a class without records takes the geometric mean of the others'. norm: the
// class with the most records is held at 1 (a full fit: its shape carries the overall speed); else out->scale is
// that class's factor.
static dlp_status fit_pclass(const dlp_gm_record *r, int n, dlp_gm_stack *out, int norm) {
    double sy[DLP_GM_PCLASSES] = {0}, ss[DLP_GM_PCLASSES] = {0};
    int cnt[DLP_GM_PCLASSES] = {0};
    dlp_gm_stack one = *out;
    for (int c = 0; c < DLP_GM_PCLASSES; c++) one.pscale[c] = 1;
    for (int i = 0; i < n; i++) {
        dlp_gm_step st;
        DLP_CHECK(dlp_gm_step_compute(r[i].gpu, r[i].prec, &one, &st));
        int b = r[i].batch > 0 ? r[i].batch : DLP_GM_DEFAULT_BATCH, c = dlp_gm_pclass(r[i].prec);
        double m = dlp_gm_step_time(&st, b) / b, y = single_y(&r[i], out), w = 1 / (y * y);
        sy[c] += w * y * m;
        ss[c] += w * m * m;
        cnt[c]++;
    }
    int cmax = 0, have = 0;
    double logsum = 0;
    for (int c = 0; c < DLP_GM_PCLASSES; c++) {
        out->pn[c] = cnt[c];
        if (cnt[c] > cnt[cmax]) cmax = c;
        if (!cnt[c]) continue;
        out->pscale[c] = sy[c] / ss[c];
        if (!(out->pscale[c] > 0) || !isfinite(out->pscale[c]))
            return DLP_ERR(DLP_ERR_INVALID, "stack %s: precision factor fit failed", out->name);
        logsum += log(out->pscale[c]);
        have++;
    }
    if (!have) return DLP_ERR(DLP_ERR_INVALID, "stack %s: no records to fit", out->name);
    double gm = exp(logsum / have), base = norm ? out->pscale[cmax] : 1;
    for (int c = 0; c < DLP_GM_PCLASSES; c++) out->pscale[c] = (cnt[c] ? out->pscale[c] : gm) / base;
    out->scale = out->pscale[cmax];
    return DLP_OK;
}

static dlp_status fit_at(const char *name, const dlp_gm_record *r, int n, const dlp_gm_stack *prior, double k,
                         dlp_gm_stack *out) {
    memset(out, 0, sizeof *out);
    out->sm_bytes_per_clk = k;
    snprintf(out->name, sizeof out->name, "%s", name ? name : "?");
    if (n < 1) return DLP_ERR(DLP_ERR_INVALID, "stack %s: no records to fit", out->name);
    if (n > DLP_GM_MAX_RECORDS) return DLP_ERR(DLP_ERR_INVALID, "stack %s: %d records (at most %d)", out->name, n, DLP_GM_MAX_RECORDS);
    int nsingle = 0, ngpus = 0;
    for (int i = 0; i < n; i++) {
        if (!(r[i].img_per_s > 0) || r[i].gpus < 1 || !r[i].gpu)
            return DLP_ERR(DLP_ERR_INVALID, "stack %s: record %d is not a positive throughput", out->name, i);
        nsingle += r[i].gpus == 1;
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= r[j].gpu == r[i].gpu;
        ngpus += !seen;
    }
    out->nrecords = n;
    out->ngpus = ngpus;
    int nsheets = count_sheets(r, n);
    for (int c = 0; c < DLP_GM_PCLASSES; c++) out->pscale[c] = prior && prior->pscale[c] > 0 ? prior->pscale[c] : 1;
    out->overlap = DLP_GM_OVERLAP;
    out->loss = prior ? prior->loss : 0;
    out->ce = prior ? prior->ce : 0.3;
    out->me = prior ? prior->me : 0.6;
    out->kernel_s = prior ? prior->kernel_s : 5e-6;
    // A full fit needs two GPUs (else compute and memory time cannot be told apart) and some records to spare.
    int full = !prior || (nsheets >= 2 && n >= 4);
    out->scaled = !full;
    out->scale = 1;
    double X[DLP_GM_MAX_RECORDS * 3], y[DLP_GM_MAX_RECORDS], w[DLP_GM_MAX_RECORDS];
    // Alternating: the shape (or the prior's) on the records with the precision factors and the multi-GPU terms taken
    // out, then the factors, then the loss per GPU; until the parameters stop moving.
    for (int it = 0; it < 20; it++) {
        double prev[4] = {out->ce, out->me, out->kernel_s, out->loss};
        for (int i = 0; i < n; i++) {
            regs g;
            DLP_CHECK(step_regs(r[i].gpu, r[i].prec, full ? out->ce : prior->ce, full ? out->me : prior->me,
                                 out->sm_bytes_per_clk, &g, NULL));
            int b = r[i].batch > 0 ? r[i].batch : DLP_GM_DEFAULT_BATCH;
            y[i] = single_y(&r[i], out) / (full ? pfactor(out, r[i].prec) : 1);  // the shape's time (full fit)
            w[i] = 1.0 / (y[i] * y[i]);  // relative errors
            if (full) {
                X[3 * i] = g.xc;
                X[3 * i + 1] = g.xm + g.update_bw / b;
                X[3 * i + 2] = g.kernels / b;
            } else {
                X[i] = (g.xc / prior->ce + (g.xm + g.update_bw / b) / prior->me + g.kernels * prior->kernel_s / b);
            }
        }
        if (full) {
            double coef[3];
            if (n < 3) return DLP_ERR(DLP_ERR_INVALID, "stack %s: %d records cannot fit 3 parameters", out->name, n);
            DLP_CHECK(solve_bounded(X, y, w, n, coef));
            dlp_lsq_fit f = {.coef = {coef[0], coef[1], coef[2]}};
            if (!(f.coef[0] > 0) || !(f.coef[1] > 0)) {
                if (!prior)
                    return DLP_ERR(DLP_ERR_INVALID, "stack %s: the records do not determine a compute and a memory "
                                   "efficiency (fit gave %g, %g)", out->name, f.coef[0], f.coef[1]);
                full = 0;  // fall back to scaling the prior
                out->scaled = 1;
                out->sm_bytes_per_clk = prior->sm_bytes_per_clk;
                out->ce = prior->ce;
                out->me = prior->me;
                out->kernel_s = prior->kernel_s;
                continue;
            }
            out->ce = 1 / f.coef[0];
            out->me = 1 / f.coef[1];
            out->kernel_s = f.coef[2];
            DLP_CHECK(fit_pclass(r, n, out, 1));
        } else {
            out->ce = prior->ce;
            out->me = prior->me;
            out->kernel_s = prior->kernel_s;
            out->sm_bytes_per_clk = prior->sm_bytes_per_clk;
            DLP_CHECK(fit_pclass(r, n, out, 0));
        }
        // The loss per added GPU, from the multi-GPU records against the fitted 1-GPU step (only when 1-GPU records
        // pin that step down; else the prior's).
        if (nsingle > 0) {
            double sum = 0;
            int m = 0;
            for (int i = 0; i < n; i++) {
                if (r[i].gpus <= 1) continue;
                dlp_gm_step st;
                DLP_CHECK(dlp_gm_step_compute(r[i].gpu, r[i].prec, out, &st));
                int b = r[i].batch > 0 ? r[i].batch : DLP_GM_DEFAULT_BATCH;
                double t1 = dlp_gm_step_time(&st, b), tn = (double)r[i].gpus * b / r[i].img_per_s;
                sum += ((tn - (1 - out->overlap) * allreduce_s(r[i].gpus, r[i].busbw_bytes_per_s)) / t1 - 1) / (r[i].gpus - 1);
                m++;
            }
            if (m > 0) out->loss = sum / m > 0 ? sum / m : 0;
        }
        const double tol = 1e-5;
        if (it >= 3 && fabs(out->ce - prev[0]) < tol * out->ce && fabs(out->me - prev[1]) < tol * out->me &&
            fabs(out->kernel_s - prev[2]) <= tol * out->kernel_s && fabs(out->loss - prev[3]) <= tol * out->loss)
            break;
    }
    double ape = 0;
    for (int i = 0; i < n; i++) {
        double p = 0;
        DLP_CHECK(predict_record(&r[i], out, &p));
        ape += fabs(p - r[i].img_per_s) / r[i].img_per_s;
    }
    out->fit_mape = ape / n;
    return DLP_OK;
}

dlp_status dlp_gm_fit(const char *name, const dlp_gm_record *r, int n, const dlp_gm_stack *prior, dlp_gm_stack *out) {
    if (prior && !(count_sheets(r, n) >= 2 && n >= 4)) return fit_at(name, r, n, prior, prior->sm_bytes_per_clk, out);
    // The SM limit is chosen as the rest are fitted: the value on this grid whose fit explains these records best.
    static const double k_grid[] = {0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16};
    int have = 0;
    for (size_t g = 0; g < sizeof k_grid / sizeof k_grid[0]; g++) {
        dlp_gm_stack t;
        if (fit_at(name, r, n, prior, k_grid[g], &t) != DLP_OK) {
            dlp_err_clear();
            continue;
        }
        if (!have || t.fit_mape < out->fit_mape) *out = t;
        have = 1;
    }
    return have ? DLP_OK : fit_at(name, r, n, prior, 0, out);
}

int dlp_gm_records(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, dlp_gm_record *out, int max) {
    int n = 0;
    for (int i = 0; i < c->npublished; i++) {
        const dlp_published *p = &c->published[i];
        if (p->task != DLP_TASK_TRAIN || p->estimate || p->gpu == exclude) continue;
        if (stack && strcasecmp(p->stack, stack) != 0) continue;
        if (dlp_gpu_peak(p->gpu, p->prec) <= 0) continue;
        if (n < max) out[n] = (dlp_gm_record){p->gpu, p->prec, p->batch, p->gpus, p->img_per_s, dlp_gm_busbw(p->gpu), p};
        n++;
    }
    return n < max ? n : max;
}

static void known_stacks(const dlp_catalog *c, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->npublished; i++) {
        const dlp_published *p = &c->published[i];
        if (p->task != DLP_TASK_TRAIN || p->estimate) continue;
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= c->published[j].task == DLP_TASK_TRAIN && !c->published[j].estimate &&
                    strcasecmp(c->published[j].stack, p->stack) == 0;
        if (!seen && used + strlen(p->stack) + 3 < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", p->stack);
    }
}

// The prior: one set of efficiencies for every stack's records, each stack allowed its own overall speed (a scale
// on all its times), fitted in turns — the efficiencies on the records with their stack's scale taken out, then
// each stack's scale — so that how much faster one stack is than another does not bend the shared shape.
static dlp_status fit_prior(const dlp_gm_record *all, int na, dlp_gm_stack *prior) {
    dlp_gm_record adj[DLP_GM_MAX_RECORDS];
    double scale[DLP_GM_MAX_RECORDS];
    int grp[DLP_GM_MAX_RECORDS], gcls[DLP_GM_MAX_RECORDS], ng = 0;
    const char *names[DLP_GM_MAX_RECORDS];
    for (int i = 0; i < na; i++) {
        const char *st = all[i].pub ? all[i].pub->stack : "";
        grp[i] = -1;
        for (int g = 0; g < ng; g++)
            if (strcasecmp(names[g], st) == 0 && gcls[g] == dlp_gm_pclass(all[i].prec)) grp[i] = g;
        if (grp[i] < 0) {
            names[ng] = st;
            gcls[ng] = dlp_gm_pclass(all[i].prec);
            scale[ng] = 1;
            grp[i] = ng++;
        }
    }
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < na; i++) {
            adj[i] = all[i];
            adj[i].img_per_s = all[i].img_per_s * scale[grp[i]];  // time / scale
        }
        // The SM limit's grid in the first and the last round; between them at the first round's choice (time).
        if (round == 0 || round == 3) DLP_CHECK(dlp_gm_fit("all stacks", adj, na, NULL, prior));
        else DLP_CHECK(fit_at("all stacks", adj, na, NULL, prior->sm_bytes_per_clk, prior));
        double logsum = 0;
        for (int g = 0; g < ng; g++) {
            double sy = 0, ss = 0;
            for (int i = 0; i < na; i++) {
                if (grp[i] != g) continue;
                double p = 0;
                DLP_CHECK(predict_record(&all[i], prior, &p));
                double yt = 1 / all[i].img_per_s, mt = 1 / p, wi = 1 / (yt * yt);
                sy += wi * yt * mt;
                ss += wi * mt * mt;
            }
            scale[g] = ss > 0 ? sy / ss : 1;
            logsum += log(scale[g]);
        }
        double gm = exp(logsum / ng);
        for (int g = 0; g < ng; g++) scale[g] /= gm;
    }
    return DLP_OK;
}

// Drops the records whose GPU has exclude's datasheet.
static int drop_sheet(dlp_gm_record *r, int n, const dlp_gpu_spec *exclude) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!dlp_gm_same_sheet(r[i].gpu, exclude)) r[k++] = r[i];
    return k;
}

dlp_status dlp_gm_fit_catalog(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, dlp_gm_stack *out) {
    return dlp_gm_fit_catalog_held(c, stack, exclude, 0, out);
}

dlp_status dlp_gm_fit_catalog_held(const dlp_catalog *c, const char *stack, const dlp_gpu_spec *exclude, int by_sheet,
                                   dlp_gm_stack *out) {
    dlp_gm_record all[DLP_GM_MAX_RECORDS];
    dlp_gm_record rec[DLP_GM_MAX_RECORDS];
    int ns = dlp_gm_records(c, stack, exclude, rec, DLP_GM_MAX_RECORDS);
    if (by_sheet && exclude) ns = drop_sheet(rec, ns, exclude);
    if (ns == 0) {
        char known[512];
        known_stacks(c, known, sizeof known);
        return DLP_ERR(DLP_ERR_NOTFOUND, "stack '%s' has no training records in %s/throughput.json%s%s (stacks: %s)",
                       stack ? stack : "(null)", c->dir, exclude ? " once those of " : "", exclude ? exclude->id : "", known);
    }
    int na = dlp_gm_records(c, NULL, exclude, all, DLP_GM_MAX_RECORDS);
    if (by_sheet && exclude) na = drop_sheet(all, na, exclude);
    dlp_gm_stack prior;
    DLP_CHECK(fit_prior(all, na, &prior));
    return dlp_gm_fit(stack, rec, ns, &prior, out);
}

const char *dlp_gm_stack_default(const dlp_system_spec *s) {
    return s && s->stack && s->stack[0] ? s->stack : DLP_GM_DEFAULT_STACK;
}

// --- fitted stacks, cached per catalog ---------------------------------------------------------------------------------

#define GM_CACHE_MAX 32
typedef struct {
    int n;
    dlp_gm_stack stacks[GM_CACHE_MAX];
} gm_cache;
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;

dlp_status dlp_gm_stack_get(const dlp_catalog *c, const char *stack, dlp_gm_stack *out) {
    pthread_mutex_lock(&g_cache_mu);
    gm_cache *gc = c->gm_cache;
    for (int i = 0; gc && i < gc->n; i++)
        if (strcasecmp(gc->stacks[i].name, stack) == 0) {
            *out = gc->stacks[i];
            pthread_mutex_unlock(&g_cache_mu);
            return DLP_OK;
        }
    pthread_mutex_unlock(&g_cache_mu);
    DLP_CHECK(dlp_gm_fit_catalog(c, stack, NULL, out));
    pthread_mutex_lock(&g_cache_mu);
    if (!c->gm_cache) ((dlp_catalog *)c)->gm_cache = calloc(1, sizeof(gm_cache));  // the cache is not the catalog's content
    gc = c->gm_cache;
    if (gc && gc->n < GM_CACHE_MAX) gc->stacks[gc->n++] = *out;
    pthread_mutex_unlock(&g_cache_mu);
    return DLP_OK;
}
