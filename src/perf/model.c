// perf/model: stage capacities, the pipeline's throughput, the bottleneck and what would fix it.
#include "perf/model.h"
#include "perf/model_net.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/rng.h"
#include "core/fields.h"
#include "hw/work.h"

static const char *const k_stage_names[DLP_STAGE_COUNT] = {
    "read", "decode+augment", "read-wait", "host-memory", "shared-cpu", "host-to-device", "compute", "allreduce",
};

const char *dlp_stage_name(dlp_stage s) { return (unsigned)s < DLP_STAGE_COUNT ? k_stage_names[s] : "?"; }

const char *dlp_storage_state_name(dlp_storage_state s) {
    return s == DLP_STORAGE_WARM ? "warm" : s == DLP_STORAGE_COLD ? "cold" : "auto";
}

void dlp_workload_init(dlp_workload *w) {
    memset(w, 0, sizeof *w);
    snprintf(w->model, sizeof w->model, "resnet50");
    w->classes = 1000;
    w->task = DLP_TASK_TRAIN;
    w->prec = DLP_PREC_FP32;
    w->batch = 32;
    w->nodes = 1;
    dlp_img_transform_init(&w->tf, 1, 224);
    w->bucket_bytes = DLP_NET_BUCKET_BYTES;  // perf/model_net.h: the trainer's bucket
    w->grad_bytes_per_param = 4;
    w->epochs = 90;
    w->seed = 1;
}

double dlp_loader_parallelism(const dlp_host_profile *h, const dlp_pipeline_profile *p, double cores, int workers) {
    if (workers < 1 || !(cores > 0)) return 0;
    double base = workers < cores ? workers : cores;
    double par = base * dlp_pipeline_efficiency(p, (int)ceil(base));
    double extra = workers - base;
    if (extra > 0) {
        double eff = dlp_pipeline_efficiency(p, (int)ceil(cores));
        double smt = h->threads > h->cores ? h->threads - h->cores : 0;  // hardware threads beyond the cores
        double s = extra < smt ? extra : smt;
        par += s * h->smt_yield * eff;
        par += (extra - s) * p->oversub_efficiency * eff;
    }
    return par;
}

static void add_fix(dlp_prediction *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_fix(dlp_prediction *o, const char *fmt, ...) {
    if (o->nfix >= 4) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->fix[o->nfix++], sizeof o->fix[0], fmt, ap);
    va_end(ap);
}

static void add_note(dlp_prediction *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(dlp_prediction *o, const char *fmt, ...) {
    if (o->nnotes >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->notes[o->nnotes++], sizeof o->notes[0], fmt, ap);
    va_end(ap);
}

static void set_stage(dlp_prediction *o, dlp_stage s, double cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_stage(dlp_prediction *o, dlp_stage s, double cap, const char *fmt, ...) {
    o->stages[s].present = 1;
    o->stages[s].img_per_s = cap;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->stages[s].detail, sizeof o->stages[s].detail, fmt, ap);
    va_end(ap);
}

// "1.25 GB/s" or "37 MB/s" into a small rotating buffer (up to 4 in one printf).
static const char *rate_str(double bytes_per_s) {
    static _Thread_local char bufs[4][32];
    static _Thread_local int k;
    char *b = bufs[k++ & 3];
    if (bytes_per_s >= 1e9) snprintf(b, 32, "%.2f GB/s", bytes_per_s / 1e9);
    else snprintf(b, 32, "%.1f MB/s", bytes_per_s / 1e6);
    return b;
}

static double dmin(double a, double b) { return a < b ? a : b; }
static double dmax(double a, double b) { return a > b ? a : b; }

// The loader as a closed network (the machine-repairman model): `workers` threads cycle between the CPU, where j
// of them together prepare par(j)/c images/s, and — with cold reads — a wait of w_io per image that uses no CPU.
// Processor sharing and an infinite-server wait have the product form (BCMP: exact for any service-time
// distribution): P(j on the CPU) ~ w^(W-j)/(W-j)! x prod_{i<=j} c/par(i), and the rate is sum_j P(j) par(j)/c.
// Without waits every thread is on the CPU: par(W)/c.
double dlp_loader_rate(const dlp_host_profile *h, const dlp_pipeline_profile *p, double cores, int workers, double c,
                       double w_io) {
    if (workers < 1 || !(c > 0)) return 0;
    if (!(w_io > 0)) return dlp_loader_parallelism(h, p, cores, workers) / c;
    // log P(j) up to a constant, j = 0..W
    double lmax = -INFINITY, lprod = 0;
    double *lp = malloc(sizeof(double) * ((size_t)workers + 1));
    if (!lp) return dlp_loader_parallelism(h, p, cores, workers) / (c + w_io);
    for (int j = 0; j <= workers; j++) {
        if (j > 0) lprod += log(c / dlp_loader_parallelism(h, p, cores, j));
        lp[j] = (workers - j) * log(w_io) - lgamma(workers - j + 1.0) + lprod;
        if (lp[j] > lmax) lmax = lp[j];
    }
    double z = 0, x = 0;
    for (int j = 0; j <= workers; j++) {
        double e = exp(lp[j] - lmax);
        z += e;
        if (j > 0) x += e * dlp_loader_parallelism(h, p, cores, j) / c;
    }
    free(lp);
    return x / z;
}

// The loader's capacity at `workers` threads (CPU and cold-read waits).
static double loader_cap(const dlp_profile *p, double cores, int workers, double c, double w_io) {
    return dlp_loader_rate(&p->host, &p->pipeline, cores, workers, c, w_io);
}

// Marsaglia and Tsang's gamma variate (shape k >= 1, scale 1).
static double gamma_rv(dlp_rng *r, double k) {
    const double d = k - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double z = dlp_rng_normal(r), v = 1 + c * z;
        if (v <= 0) continue;
        v = v * v * v;
        double u = dlp_rng_uniform(r);
        if (log(u) < 0.5 * z * z + d - d * v + d * log(v)) return d * v;
    }
}

double dlp_ring_factor(double loader_batch_s, double device_batch_s, double cv, int slots) {
    if (!(cv > 0) || slots < 1 || !(loader_batch_s > 0) || !(device_batch_s > 0) || !isfinite(loader_batch_s) ||
        !isfinite(device_batch_s))
        return 1;
    const double k = cv < 1 ? 1 / (cv * cv) : 1;  // gamma shape for this CV (at most 1: exponential)
    const double scale = loader_batch_s / k;
    enum { N = 20000, SKIP = 1000 };
    double *done = malloc(sizeof(double) * N);
    if (!done) return 1;
    dlp_rng r;
    dlp_rng_init(&r, 12345, 67);
    double t_load = 0, t_first = 0;
    for (int j = 0; j < N; j++) {
        double start = t_load;
        if (j >= slots && done[j - slots] > start) start = done[j - slots];  // the slot is free once released
        t_load = start + scale * gamma_rv(&r, k);
        double prev = j > 0 ? done[j - 1] : 0;
        done[j] = (prev > t_load ? prev : t_load) + device_batch_s;
        if (j == SKIP) t_first = done[j];
    }
    double rate = (N - 1 - SKIP) / (done[N - 1] - t_first);
    free(done);
    double f = rate / (1 / (loader_batch_s > device_batch_s ? loader_batch_s : device_batch_s));
    return f < 1 ? f : 1;
}

// The cpu device and the loader on the same cores. Alone, compute runs xc img/s and the loader xl; both flat out
// at once, the probe measured shares (a of compute's rate, l of the loader's). The rates both can sustain lie on
// the line from (1, 0) to (a, l) and from there to (0, 1) in (compute share, loader share); training needs as many
// images from each: the throughput is where x/xc and x/xl meet that frontier. *loader_side: 1 when that point is
// on the loader's segment (the loader limits; compute waits for data).
static double shared_rate(double xc, double xl, double a, double l, int *loader_side) {
    *loader_side = 0;
    if (!(xc > 0) || !(xl > 0)) return 0;
    if (a >= 1 && l >= 1) {  // no contention measured: each runs as alone
        *loader_side = xl < xc;
        return xc < xl ? xc : xl;
    }
    // segment 1: s_c = 1 - (1 - a) / l x s_l, for s_l <= l
    double x1 = 1.0 / (1.0 / xc + (1 - a) / (l * xl));
    if (x1 / xl <= l + 1e-12) return x1;
    *loader_side = 1;
    // segment 2: s_c = a (1 - s_l) / (1 - l)
    return a / ((1 - l) / xc + a / xl);
}

// The workload against the machine (n devices per node), before anything is computed.
static dlp_status check_workload(const dlp_profile *p, const dlp_workload *w, int is_cpu, int n) {
    const dlp_host_profile *h = &p->host;
    // The cpu device with n > 1: n data-parallel processes on this host, each with its share of the cores.
    if (is_cpu && n > 1 && w->threads > 0 && n * w->threads > h->threads)
        return DLP_ERR(DLP_ERR_INVALID, "%d cpu ranks x %d compute threads is more than the %d hardware threads", n,
                       w->threads, h->threads);
    if (!is_cpu && p->devices_per_node > 0 && n > p->devices_per_node)
        return DLP_ERR(DLP_ERR_INVALID, "%s has %d GPUs per node (asked for %d devices; use --nodes for more)",
                       p->id[0] ? p->id : "the machine", p->devices_per_node, n);
    if (w->batch < 1) return DLP_ERR(DLP_ERR_INVALID, "batch must be >= 1 (got %d)", w->batch);
    if (w->task == DLP_TASK_TRAIN && w->prec == DLP_PREC_INT8)
        return DLP_ERR(DLP_ERR_INVALID, "int8 is an inference precision (use --mode infer, or fp16/bf16/fp32)");
    return DLP_OK;
}

// Loader CPU time per image on one thread (read, decode, augment of o->work, scaled): sets o's figures of it and
// returns the total.
static double loader_cpu_cost(const dlp_pipeline_profile *pp, dlp_prediction *o) {
    const dlp_image_work *iw = &o->work;
    o->read_cpu_s = pp->read_per_file_s + pp->read_per_byte_s * iw->bytes;
    o->decode_cpu_s = pp->decode_per_image_s + pp->decode_per_pixel_s * iw->decoded_pixels +
                      pp->decode_per_byte_s * iw->entropy_bytes;
    o->augment_cpu_s = pp->augment_per_image_s + pp->augment_per_in_pixel_s * iw->resize_pixels +
                       pp->augment_per_out_pixel_s * iw->out_pixels;
    o->loader_cost_scale = pp->loader_cost_scale > 0 ? pp->loader_cost_scale : 1;
    const double c = o->loader_cost_scale * (o->read_cpu_s + o->decode_cpu_s + o->augment_cpu_s);
    o->loader_cpu_s_per_image = c;
    return c;
}

// Device step: the input copied per image, the host-to-device rate (a PCIe uplink shared by the GPUs on it), the
// cpu device's compute threads and the step's times (o->step).
static dlp_status device_step(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w, int is_cpu,
                              dlp_prediction *o) {
    const dlp_host_profile *h = &p->host;
    const int n = o->devices, b = w->batch, size = w->tf.size;
    double in_elem = w->input_bytes > 0 ? w->input_bytes : (double)dlp_prec_input_bytes(w->prec);
    o->input_bytes_per_image = 3.0 * size * size * in_elem;
    double h2d = dev->h2d_bytes_per_s;
    if (!is_cpu && h2d > 0 && p->net.pcie_uplink_bytes_per_s > 0) {
        int share = p->net.gpus_per_uplink < n ? p->net.gpus_per_uplink : n;
        h2d = dmin(h2d, p->net.pcie_uplink_bytes_per_s / share);
    }
    o->h2d_bytes_per_s = h2d;
    o->threads = is_cpu ? (w->threads > 0 ? w->threads : (h->cores / n > 0 ? h->cores / n : 1)) : 0;
    dlp_step_request req = {w->task, w->prec, o->threads, b, o->work_ratio, o->params_ratio,
                            is_cpu ? 0 : o->input_bytes_per_image, h2d, w->model, size};
    DLP_CHECK(dlp_step_times_compute(dev, &req, &o->step));
    const dlp_step_times *st = &o->step;
    if (is_cpu && st->rate->threads != o->threads)
        add_note(o, "the profile has no %s row at %d threads; used the one at %d threads (%s)", dlp_prec_name(w->prec),
                 o->threads, st->rate->threads, st->rate->threads > o->threads ? "scaled down" : "not scaled up");
    if (st->rate->estimate) add_note(o, "device figure is an estimate: %s", st->rate->basis);
    return DLP_OK;
}

// Allreduce: ring inside the node over the bus bandwidth, across nodes over the NICs; the slower level sets the
// pace. Buckets are reduced while backward runs; only what outlasts backward is exposed. Sets o->allreduce_s and
// o->allreduce_exposed_s (0 without an allreduce) and *f_out, the share of the gradients in one bucket (1 without).
static dlp_status allreduce_time(const dlp_profile *p, const dlp_workload *w, const dlp_model_work *mw, int is_cpu,
                                 dlp_prediction *o, double *f_out) {
    const int n = o->devices, nodes = o->nodes, b = o->batch, N = n * nodes;
    const dlp_step_times *st = &o->step;
    double t_ar = 0, exposed = 0, f = 1;
    if (w->task == DLP_TASK_TRAIN && N > 1) {
        double S = (double)mw->params * w->grad_bytes_per_param, t_intra = 0, t_inter = 0;
        if (n > 1) {
            if (!(p->net.allreduce_busbw_bytes_per_s > 0))
                return DLP_ERR(DLP_ERR_INVALID, "profile %s has no allreduce bus bandwidth "
                               "(interconnect.allreduce_busbw_bytes_per_s) for %d devices", p->id, n);
            t_intra = 2.0 * (n - 1) / n * S / p->net.allreduce_busbw_bytes_per_s;
        }
        if (nodes > 1) {
            if (!(p->net.nic_bytes_per_s > 0))
                return DLP_ERR(DLP_ERR_INVALID, "profile %s has no network bandwidth (interconnect.nic_bytes_per_s) for "
                               "%d nodes", p->id, nodes);
            dlp_net_link link = {.bytes_per_s = p->net.nic_bytes_per_s,  // perf/model_net
                                 .latency_s = w->net_latency_s > 0 ? w->net_latency_s : p->net.nic_latency_s};
            if (w->net_link) link = *w->net_link;  // measured: each bucket at its size's time
            t_inter = dlp_net_ring_s(S, w->bucket_bytes, nodes, &link);
            o->net_bytes_per_s_needed = dlp_net_rate_for_exposed(S, w->bucket_bytes, nodes, link.latency_s,
                                                                 st->bwd_s, is_cpu, st->compute_s);
            add_note(o, "network: ring allreduce over %d nodes, %.3g Gbit/s links, %.0f us per ring step: %.2f ms%s; "
                     "compute is the bottleneck above %.3g Gbit/s", nodes, link.bytes_per_s * 8e-9, link.latency_s * 1e6,
                     t_inter * 1e3, link.npts > 0 && link.ranks == nodes ? " (each bucket at the time measured at its "
                     "size)" : "", o->net_bytes_per_s_needed * 8e-9);
        }
        t_ar = dmax(t_intra, t_inter);
        f = w->bucket_bytes > 0 ? dmin(1.0, w->bucket_bytes / S) : 1.0;
        exposed = dlp_net_exposed_s(t_ar, f, st->bwd_s, is_cpu);  // host MPI hides nothing behind backward
        set_stage(o, DLP_STAGE_ALLREDUCE, n * b / t_ar, "%.1f MB of gradients over %d devices: %.2f ms (%.2f ms exposed "
                  "after backward)", S / 1e6, N, t_ar * 1e3, exposed * 1e3);
    }
    o->allreduce_s = t_ar;
    o->allreduce_exposed_s = exposed;
    *f_out = f;
    return DLP_OK;
}

// The device's step with the software's loss per added GPU (synchronization, stragglers) beyond the allreduce, as
// its stack measured it, and the exposed allreduce; the compute and host-to-device stages.
static void device_stages(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w,
                          dlp_prediction *o) {
    const int n = o->devices, b = o->batch, N = n * o->nodes;
    const dlp_step_times *st = &o->step;
    double mp_loss = N > 1 && w->step_loss_per_device > 0 ? w->step_loss_per_device * (N - 1) * st->step_s : 0;
    o->device_step_s = st->step_s + mp_loss + o->allreduce_exposed_s + p->host.loop_overhead_s;
    o->device_img_per_s = n * b / o->device_step_s;
    char loss_txt[48] = "";
    if (mp_loss > 0) snprintf(loss_txt, sizeof loss_txt, ", multi-GPU loss %.2f", mp_loss * 1e3);
    set_stage(o, DLP_STAGE_COMPUTE, n * b / (st->compute_s + mp_loss), "%s %s, batch %d: %.2f ms per step (fwd %.2f, "
              "bwd %.2f, update %.2f%s)", dev->name, dlp_prec_name(w->prec), b, (st->compute_s + mp_loss) * 1e3,
              st->fwd_s * 1e3, st->bwd_s * 1e3, st->update_s * 1e3, loss_txt);
    if (st->h2d_s > 0)
        set_stage(o, DLP_STAGE_H2D, n * b / st->h2d_s, "%.0f KB per image at %.1f GB/s per device: %.2f ms per step%s",
                  o->input_bytes_per_image / 1e3, o->h2d_bytes_per_s / 1e9, st->h2d_s * 1e3,
                  dev->h2d_overlap ? " (overlapped)" : "");
}

// Loader: threads and the cores they can use (GPU host threads take theirs first); sets o->workers_total,
// o->loader_cores and o->loader_parallelism, and the prep stage (c: the loader's CPU time per image).
static dlp_status loader_stage(const dlp_profile *p, const dlp_workload *w, int is_cpu, double c, dlp_prediction *o) {
    const dlp_host_profile *h = &p->host;
    const dlp_step_times *st = &o->step;
    const int n = o->devices;
    double free_cores = is_cpu ? h->cores : h->cores - n * st->cores_busy;
    if (!(free_cores > 0.05))
        return DLP_ERR(DLP_ERR_INVALID, "the devices' host threads (%.2f cores each) leave no core for the loader",
                       st->cores_busy);
    int workers = w->workers;
    if (workers <= 0) {
        double avail = is_cpu ? h->threads : h->threads - n * st->cores_busy;
        workers = (int)floor(avail / n);
        if (workers < 1) workers = 1;
    }
    const int W = workers * n;
    o->workers_total = W;
    o->loader_cores = free_cores;
    o->loader_parallelism = dlp_loader_parallelism(h, &p->pipeline, free_cores, W);
    set_stage(o, DLP_STAGE_PREP, o->loader_parallelism / c, "%d thread(s) on %.1f cores (%.2f thread-equivalents), "
              "%.2f ms CPU per image (read %.2f, decode %.2f, augment %.2f)", W, free_cores, o->loader_parallelism,
              c * 1e3, o->read_cpu_s * 1e3, o->decode_cpu_s * 1e3, o->augment_cpu_s * 1e3);
    return DLP_OK;
}

// Storage: the read stage (cold reads, a read-rate limit), the loader's wait for cold reads (o->io_wait_s_per_image)
// and the host memory traffic per image.
static dlp_status storage_stages(const dlp_profile *p, const dlp_workload *w, int cold, double c, dlp_prediction *o) {
    const dlp_host_profile *h = &p->host;
    const double free_cores = o->loader_cores;
    const int W = o->workers_total;
    const double bytes = o->work.bytes;
    double w_io = 0;
    if (cold) {
        const dlp_storage_profile *sp = &p->storage;
        if (!(sp->cold_read_bytes_per_s > 0))
            return DLP_ERR(DLP_ERR_INVALID, "profile %s has no cold-storage read rate (storage.cold_read_bytes_per_s); "
                           "predict with --storage warm", p->id);
        // The wait per file: as measured with one loader thread, moving linearly to what it is with every core
        // running one (cold_latency_busy_s) as the loader's threads fill the cores.
        double lat = sp->cold_latency_s;
        if (sp->cold_latency_busy_s > 0 && free_cores > 1) {
            double frac = dmin(1, (dmin(W, free_cores) - 1) / (free_cores - 1));
            lat += frac * (sp->cold_latency_busy_s - sp->cold_latency_s);
        }
        w_io = lat + (sp->cold_stream_bytes_per_s > 0 ? bytes / sp->cold_stream_bytes_per_s : 0);
        double x = sp->cold_read_bytes_per_s / bytes;
        if (w->read_limit_bytes_per_s > 0 && w->read_limit_bytes_per_s < sp->cold_read_bytes_per_s)
            set_stage(o, DLP_STAGE_READ, w->read_limit_bytes_per_s / bytes, "read-rate limit %.1f MB/s, %.0f KB per image",
                      w->read_limit_bytes_per_s / 1e6, bytes / 1e3);
        else
            set_stage(o, DLP_STAGE_READ, x, "cold: %s at %.2f GB/s, %.0f KB per image", sp->desc[0] ? sp->desc : "storage",
                      sp->cold_read_bytes_per_s / 1e9, bytes / 1e3);
    } else if (w->read_limit_bytes_per_s > 0) {
        set_stage(o, DLP_STAGE_READ, w->read_limit_bytes_per_s / bytes, "read-rate limit %.1f MB/s, %.0f KB per image",
                  w->read_limit_bytes_per_s / 1e6, bytes / 1e3);
    }
    o->io_wait_s_per_image = w_io;
    if (w_io > 0) {
        double xr = loader_cap(p, free_cores, W, c, w_io);
        set_stage(o, DLP_STAGE_IOWAIT, xr, "%d thread(s), each %.2f ms CPU + %.2f ms waiting for the read per image "
                  "(%.0f%% of their time waiting)", W, c * 1e3, w_io * 1e3, 100 * dmin(1, xr * w_io / W));
    }
    if (h->mem_bw_bytes_per_s > 0) {
        // Page cache to user buffer (3x the file), IDCT output written and read by the resize, the batch
        // written and read by the copy or the compute.
        double mb = 3 * bytes + 6 * o->work.decoded_pixels + 2 * o->input_bytes_per_image;
        set_stage(o, DLP_STAGE_HOSTMEM, h->mem_bw_bytes_per_s / mb, "%.2f MB per image at %.0f GB/s", mb / 1e6,
                  h->mem_bw_bytes_per_s / 1e9);
    }
    return DLP_OK;
}

// The loader's side of the pipeline: the rate of its slowest stage, named in *bl_out; a cold-read wait is named
// only when it costs the loader more than a tenth of its CPU-bound rate.
static double loader_side_rate(const dlp_prediction *o, dlp_stage *bl_out) {
    static const dlp_stage k_loader_side[] = {DLP_STAGE_READ, DLP_STAGE_PREP, DLP_STAGE_IOWAIT, DLP_STAGE_HOSTMEM};
    double xl = INFINITY;
    dlp_stage bl = DLP_STAGE_PREP;
    for (size_t i = 0; i < sizeof k_loader_side / sizeof k_loader_side[0]; i++) {
        const dlp_stage_cap *s = &o->stages[k_loader_side[i]];
        if (s->present && s->img_per_s < xl) {
            xl = s->img_per_s;
            bl = k_loader_side[i];
        }
    }
    if (bl == DLP_STAGE_IOWAIT && o->stages[DLP_STAGE_IOWAIT].img_per_s >= 0.9 * o->stages[DLP_STAGE_PREP].img_per_s)
        bl = DLP_STAGE_PREP;
    *bl_out = bl;
    return xl;
}

// The cpu device: compute and the loader draw on the same cores (docs/model.md, "The cpu device: contention"). xl
// and bl: the loader's rate and its slowest stage, bd: the device's. Sets *x_out (the throughput) and *x_busy_out
// (what compute would run if it never waited for data); returns the bottleneck: the loader's stage when it limits
// (compute waits for data), else compute on the shared cores.
static dlp_stage shared_cpu_rate(const dlp_profile *p, const dlp_device_profile *dev, double c, double xl,
                                 dlp_stage bl, dlp_stage bd, dlp_prediction *o, double *x_out, double *x_busy_out) {
    const dlp_host_profile *h = &p->host;
    const dlp_step_times *st = &o->step;
    const int b = o->batch, W = o->workers_total;
    double x, x_busy;
    const dlp_contention_point *cp = dlp_device_find_contention(dev, o->threads, W);
    const double xc = o->device_img_per_s;
    int loader_side = 0;
    if (cp) {
        const double a = cp->compute_share, l = cp->loader_share;
        x = shared_rate(xc, xl, a, l, &loader_side);
        set_stage(o, DLP_STAGE_SHARED_CPU, x, "compute alone %.1f img/s and the loader alone %.0f img/s on the same "
                  "cores (measured with %d compute and %d loader thread(s): %.0f%% and %.0f%% of their rates when both "
                  "run)", xc, xl, cp->threads, cp->workers, 100 * a, 100 * l);
        // What compute would run with the loader at this rate if it never waited for data (segment 1 extended).
        double sc = l > 0 ? 1 - (1 - a) / l * (x / xl) : 1;
        x_busy = loader_side && sc > 0 ? dmin(xc, xc * sc) : x;
    } else {  // not measured (catalog profiles): CPU time shared, scaled by contention_efficiency
        double s_c = st->cores_busy * st->compute_s / b;
        double c_eff = h->cores + h->smt_yield * (h->threads - h->cores);
        double eff = dlp_pipeline_efficiency(&p->pipeline, (int)ceil(dmin(W, h->cores)));
        double xs = c_eff * dev->contention_efficiency / (s_c + c / eff);
        set_stage(o, DLP_STAGE_SHARED_CPU, xs, "%.1f cores shared: compute %.2f ms CPU per image (%.1f cores busy), "
                  "loader %.2f ms, efficiency %.2f", c_eff, s_c * 1e3, st->cores_busy, c / eff * 1e3,
                  dev->contention_efficiency);
        x = dmin(xs, dmin(xc, xl));
        loader_side = xl <= xs && xl < xc;
        x_busy = loader_side ? dmin(xc, xs) : x;
    }
    *x_out = x;
    *x_busy_out = x_busy;
    return loader_side ? bl : (x < xc * 0.999 ? DLP_STAGE_SHARED_CPU : bd);
}

// What would keep the devices busy (at o->busy_img_per_s): the loader's cores and threads, the storage and host-to-
// device rates, the page cache and, when the allreduce is exposed, the bus bandwidth (f: the share of the gradients
// in one bucket).
static void keep_busy_needs(const dlp_profile *p, const dlp_dataset_stats *stats, double c, double f,
                            dlp_prediction *o) {
    const dlp_pipeline_profile *pp = &p->pipeline;
    const dlp_step_times *st = &o->step;
    const int n = o->devices;
    const double free_cores = o->loader_cores, w_io = o->io_wait_s_per_image, bytes = o->work.bytes;
    const double t_ar = o->allreduce_s, exposed = o->allreduce_exposed_s;
    const double target = o->busy_img_per_s;
    double eff_need = dlp_pipeline_efficiency(pp, (int)ceil(target * c));
    o->loader_cores_needed = target * c / eff_need;
    o->loader_threads_needed = 0;
    if (loader_cap(p, free_cores, 65536, c, w_io) >= target * (1 - 1e-9)) {  // the rate grows with threads
        int lo = 1, hi = 65536;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (loader_cap(p, free_cores, mid, c, w_io) >= target * (1 - 1e-9)) hi = mid;
            else lo = mid + 1;
        }
        o->loader_threads_needed = lo;
    }
    o->storage_bytes_per_s_needed = target * bytes;
    o->page_cache_bytes_needed = (double)stats->images * stats->mean_bytes;
    o->h2d_bytes_per_s_needed = target / n * o->input_bytes_per_image;
    if (t_ar > 0 && exposed > 0.02 * o->device_step_s && st->bwd_s * (1 - f) > 0)
        o->busbw_needed = p->net.allreduce_busbw_bytes_per_s * t_ar / (st->bwd_s * (1 - f));
}

static dlp_status predict_state(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w, int cold,
                                dlp_prediction *o) {
    memset(o, 0, sizeof *o);
    const int is_cpu = dev->kind == DLP_DEVICE_CPU;
    const dlp_pipeline_profile *pp = &p->pipeline;
    int n = w->devices > 0 ? w->devices : (p->devices_per_node > 0 ? p->devices_per_node : 1);
    DLP_CHECK(check_workload(p, w, is_cpu, n));
    const int nodes = w->nodes > 0 ? w->nodes : 1, b = w->batch, size = w->tf.size;
    o->devices = n;
    o->nodes = nodes;
    o->batch = b;
    o->task = w->task;
    o->prec = w->prec;
    o->storage_cold = cold;

    // Work: the model's FLOPs relative to the reference, the expected JPEG work per image.
    dlp_model_work mw;
    DLP_CHECK(dlp_work_resnet(w->model, size, size, w->classes, &mw));
    o->work_ratio = dlp_work_ratio(&mw);
    o->params_ratio = (double)mw.params / (double)dlp_work_ref()->params;
    dlp_dataset_stats stats = w->stats;
    DLP_CHECK(dlp_dataset_stats_normalize(&stats, stats.name[0] ? stats.name : "workload dataset"));
    DLP_CHECK(dlp_image_work_expect(&stats, pp, &w->tf, w->seed, w->samples, &o->work));

    const double c = loader_cpu_cost(pp, o);
    DLP_CHECK(device_step(p, dev, w, is_cpu, o));
    const dlp_step_times *st = &o->step;
    double f = 1;
    DLP_CHECK(allreduce_time(p, w, &mw, is_cpu, o, &f));
    const double exposed = o->allreduce_exposed_s;
    device_stages(p, dev, w, o);
    DLP_CHECK(loader_stage(p, w, is_cpu, c, o));
    DLP_CHECK(storage_stages(p, w, cold, c, o));

    // The pipeline: the slowest stage sets the pace.
    dlp_stage bl;
    const double xl = loader_side_rate(o, &bl);
    o->loader_img_per_s = xl;
    dlp_stage bd = DLP_STAGE_COMPUTE;
    if (st->h2d_s > st->compute_s && st->h2d_s >= exposed) bd = DLP_STAGE_H2D;
    else if (exposed > st->compute_s) bd = DLP_STAGE_ALLREDUCE;
    double x = o->device_img_per_s;
    dlp_stage bn = bd;
    double x_busy = o->device_img_per_s;
    if (is_cpu) {
        bn = shared_cpu_rate(p, dev, c, xl, bl, bd, o, &x, &x_busy);
    } else {
        if (xl < x) {
            x = xl;
            bn = bl;
        }
        // Near the knee the ring of batch slots between the loader and the device runs a little below the slower
        // of the two: a batch that takes the loader longer than average cannot always be made up for.
        int slots = w->prefetch > 0 ? w->prefetch : 2 * o->workers_total;
        double cv = pp->cost_cv > 0 ? pp->cost_cv / sqrt((double)b) : 0;
        o->ring_factor = dlp_ring_factor(b / xl, b / o->device_img_per_s, cv, slots);
        x *= o->ring_factor;
    }
    // The device waits for the loader's first batch once per run: the loader goes on into the next epoch's batches
    // when an epoch's are all claimed (data/loader), so epoch ends and evaluation passes do not drain the ring.
    // Only when the loader keeps ahead is that wait not already in the steady rate.
    o->first_batch_s = xl > x * 1.001 && isfinite(xl) ? n * b / xl : 0;
    o->img_per_s = x;
    o->bottleneck = bn;
    o->busy_img_per_s = dmax(x, x_busy);
    o->data_stall_fraction = dmax(0, 1 - x / o->busy_img_per_s);
    o->per_device_img_per_s = x / n;
    o->cluster_img_per_s = x * nodes;
    o->step_s = n * b / x;
    o->epoch_s = (double)stats.images / o->cluster_img_per_s;
    keep_busy_needs(p, &stats, c, f, o);
    return DLP_OK;
}

static void write_fixes(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w, dlp_prediction *o) {
    const int n = o->devices;
    const char *unit = n > 1 ? "devices" : "device";
    double spare = o->loader_cores - o->loader_cores_needed;
    switch (o->bottleneck) {
    case DLP_STAGE_COMPUTE:
        add_fix(o, "%s compute is the bottleneck: the input pipeline keeps up (it needs %.1f cores, %.1f per device; "
                "%.1f are free%s)", dev->name, o->loader_cores_needed, o->loader_cores_needed / n, o->loader_cores,
                spare > 0.5 ? ", the rest is headroom" : "");
        break;
    case DLP_STAGE_PREP:
        if (o->loader_threads_needed > 0 && o->loader_cores_needed <= o->loader_cores + 1e-9)
            add_fix(o, "decode+augment sets the pace: %d loader threads (%d per device) would keep the %s busy; "
                    "raise --workers to %d", o->loader_threads_needed, (o->loader_threads_needed + n - 1) / n, unit,
                    (o->loader_threads_needed + n - 1) / n);
        else
            add_fix(o, "decode+augment sets the pace: keeping the %s busy needs %.1f cores of this speed (%.1f per "
                    "device), the host has %.1f for the loader; use a CPU with at least %.0f cores per device, faster "
                    "cores, a cheaper decode (smaller source images), or GPU decode", unit, o->loader_cores_needed,
                    o->loader_cores_needed / n, o->loader_cores, ceil(o->loader_cores_needed / n));
        break;
    case DLP_STAGE_IOWAIT:
        add_fix(o, "loader threads wait %.2f ms per image for cold reads: %d threads (%d per device) would hide the "
                "wait; raise --workers", o->io_wait_s_per_image * 1e3, o->loader_threads_needed,
                (o->loader_threads_needed + n - 1) / n);
        break;
    case DLP_STAGE_READ:
        if (w->read_limit_bytes_per_s > 0)
            add_fix(o, "the read-rate limit (%s) sets the pace: the %s need %s of reads",
                    rate_str(w->read_limit_bytes_per_s), unit, rate_str(o->storage_bytes_per_s_needed));
        else
            add_fix(o, "storage reads set the pace: the %s need %s, the storage gives %s; use faster "
                    "storage, or keep the dataset in the page cache (%.0f GB; it holds %.0f GB)", unit,
                    rate_str(o->storage_bytes_per_s_needed), rate_str(p->storage.cold_read_bytes_per_s),
                    o->page_cache_bytes_needed / 1e9, p->storage.page_cache_bytes / 1e9);
        break;
    case DLP_STAGE_HOSTMEM:
        add_fix(o, "host memory bandwidth sets the pace (%.0f GB/s)", p->host.mem_bw_bytes_per_s / 1e9);
        break;
    case DLP_STAGE_SHARED_CPU:
        add_fix(o, "compute and the loader share the CPU: compute alone would run %.1f img/s; more cores, or fewer "
                "loader cycles per image (smaller images, a cheaper pipeline), speed it up", o->device_img_per_s);
        break;
    case DLP_STAGE_H2D:
        add_fix(o, "host-to-device copies set the pace: %s needed per device, the link gives %s; send "
                "uint8 images (4x less than fp32) or use a faster host link", rate_str(o->h2d_bytes_per_s_needed),
                rate_str(o->h2d_bytes_per_s));
        break;
    case DLP_STAGE_ALLREDUCE:
        if (o->nodes > 1) {  // between the nodes (perf/model_net)
            add_fix(o, "the network is the bottleneck: the gradient allreduce over the nodes' %.3g Gbit/s links exposes "
                    "%.2f ms per step, compute takes %.2f; links of %.3g Gbit/s would make compute the bottleneck",
                    p->net.nic_bytes_per_s * 8e-9, o->allreduce_exposed_s * 1e3, o->step.compute_s * 1e3,
                    o->net_bytes_per_s_needed * 8e-9);
            break;
        }
        add_fix(o, "gradient allreduce exposes %.2f ms per step: a bus bandwidth of %.0f GB/s would hide it under "
                "backward (the profile has %.0f GB/s)", o->allreduce_exposed_s * 1e3, o->busbw_needed / 1e9,
                p->net.allreduce_busbw_bytes_per_s / 1e9);
        break;
    default:
        break;
    }
    if (o->bottleneck != DLP_STAGE_COMPUTE && o->bottleneck != DLP_STAGE_H2D && o->bottleneck != DLP_STAGE_ALLREDUCE &&
        o->bottleneck != DLP_STAGE_SHARED_CPU)
        add_fix(o, "the %s would run %.0f img/s (%.0f per device) if fed: the data stall is %.0f%% of the time",
                unit, o->busy_img_per_s, o->busy_img_per_s / n, 100 * o->data_stall_fraction);
    if (o->bottleneck != DLP_STAGE_READ && o->storage_cold)
        add_fix(o, "cold reads need %s at full speed (the storage gives %s)",
                rate_str(o->storage_bytes_per_s_needed), rate_str(p->storage.cold_read_bytes_per_s));
}

dlp_status dlp_predict(const dlp_profile *p, const dlp_device_profile *dev, const dlp_workload *w, dlp_prediction *out) {
    double dataset_bytes = (double)w->stats.images * w->stats.mean_bytes;
    int have_cold = p->storage.cold_read_bytes_per_s > 0;
    int fits = dataset_bytes <= p->storage.page_cache_bytes;
    int steady_cold = w->storage == DLP_STORAGE_COLD || (w->storage == DLP_STORAGE_AUTO && !fits && have_cold);
    DLP_CHECK(predict_state(p, dev, w, steady_cold, out));
    out->first_epoch_s = out->epoch_s;
    if (w->storage == DLP_STORAGE_AUTO) {
        if (!fits && !have_cold)
            add_note(out, "the dataset (%.0f GB) does not fit in the page cache (%.0f GB) but the profile has no cold-"
                     "storage figures: predicted as warm", dataset_bytes / 1e9, p->storage.page_cache_bytes / 1e9);
        if (!steady_cold && have_cold) {
            dlp_prediction *first = malloc(sizeof *first);
            DLP_TRY_ALLOC(first);
            dlp_status st = predict_state(p, dev, w, 1, first);
            if (st == DLP_OK) {
                out->first_epoch_s = first->epoch_s;
                if (first->img_per_s < out->img_per_s * 0.999)
                    add_note(out, "the first epoch reads cold: %.0f img/s (%s-bound); later epochs come from the page "
                             "cache", first->img_per_s, dlp_stage_name(first->bottleneck));
            }
            free(first);
            DLP_CHECK(st);
        } else if (steady_cold) {
            add_note(out, "the dataset (%.0f GB) does not fit in the page cache (%.0f GB): every epoch reads cold",
                     dataset_bytes / 1e9, p->storage.page_cache_bytes / 1e9);
        }
    }
    int epochs = w->epochs > 0 ? w->epochs : 1;
    out->total_s = out->first_batch_s + out->first_epoch_s + (epochs - 1) * out->epoch_s;
    write_fixes(p, dev, w, out);
    return DLP_OK;
}


// --- the prediction as JSON: one table per object, the rows in the order they are written ---------------------------

static const char *const k_storage_names[] = {"warm", "cold"};  // by storage_cold

#define WORK_F(m) {DLP_FIELD(dlp_image_work, m, DLP_FT_NUM, DLP_FF_NULLNF)}  // per image, mean over the dataset
static const dlp_field_def k_image_work_fields[] = {
    WORK_F(bytes), WORK_F(entropy_bytes), WORK_F(decoded_pixels), WORK_F(resize_pixels), WORK_F(out_pixels),
    WORK_F(mean_dct_scale), WORK_F(mean_crop_area), {0}};

#define PRED_NUM(k, m) {DLP_FIELD_AS(dlp_prediction, k, m, DLP_FT_NUM, DLP_FF_NULLNF)}
#define PRED_INT(k, m, fl) {DLP_FIELD_AS(dlp_prediction, k, m, DLP_FT_INT, fl)}

static const dlp_field_def k_loader_fields[] = {  // one thread, per image, seconds
    PRED_NUM("read_cpu_s", read_cpu_s),
    PRED_NUM("decode_cpu_s", decode_cpu_s),
    PRED_NUM("augment_cpu_s", augment_cpu_s),
    PRED_NUM("cost_scale", loader_cost_scale),
    PRED_NUM("cpu_s_per_image", loader_cpu_s_per_image),
    PRED_NUM("io_wait_s_per_image", io_wait_s_per_image),
    PRED_NUM("cores", loader_cores),              // cores the loader can use
    PRED_NUM("parallelism", loader_parallelism),  // single-thread equivalents
    {0}};

static json_t *basis_write(const void *rec) {  // the rate row the step time came from
    const dlp_prediction *o = rec;
    return o->step.rate ? json_string(o->step.rate->basis) : NULL;
}

static const dlp_field_def k_device_step_fields[] = {  // per device, one step, seconds
    PRED_NUM("h2d_s", step.h2d_s),
    PRED_NUM("fwd_s", step.fwd_s),
    PRED_NUM("bwd_s", step.bwd_s),
    PRED_NUM("update_s", step.update_s),
    PRED_NUM("compute_s", step.compute_s),
    PRED_NUM("step_s", step.step_s),
    PRED_NUM("allreduce_s", allreduce_s),
    PRED_NUM("allreduce_exposed_s", allreduce_exposed_s),
    PRED_NUM("device_step_s", device_step_s),
    PRED_NUM("h2d_bytes_per_s", h2d_bytes_per_s),
    PRED_NUM("input_bytes_per_image", input_bytes_per_image),
    {DLP_FIELD_CB("basis", NULL, basis_write)},
    {0}};

static const dlp_field_def k_stage_fields[] = {
    {DLP_FIELD(dlp_stage_cap, img_per_s, DLP_FT_NUM, DLP_FF_NULLNF)},  // node-wide, this stage alone
    {DLP_FIELD(dlp_stage_cap, detail, DLP_FT_STR, 0)},
    {0}};

static json_t *stages_write(const void *rec) {  // the stages present, each named by its index
    const dlp_prediction *o = rec;
    json_t *sa = json_array();
    for (int i = 0; i < DLP_STAGE_COUNT; i++) {
        if (!o->stages[i].present) continue;
        json_t *s = json_object();
        json_object_set_new(s, "stage", json_string(dlp_stage_name((dlp_stage)i)));
        dlp_fields_write(s, k_stage_fields, &o->stages[i]);
        json_array_append_new(sa, s);
    }
    return sa;
}

static json_t *cores_per_device_write(const void *rec) {
    const dlp_prediction *o = rec;
    return dlp_json_real_or_null(o->loader_cores_needed / o->devices);
}

static const dlp_field_def k_needs_fields[] = {  // what would keep the device busy
    PRED_NUM("loader_cores", loader_cores_needed),
    {DLP_FIELD_CB("loader_cores_per_device", NULL, cores_per_device_write)},
    PRED_INT("loader_threads", loader_threads_needed, 0),  // 0: none would do
    PRED_NUM("storage_bytes_per_s", storage_bytes_per_s_needed),
    PRED_NUM("page_cache_bytes", page_cache_bytes_needed),
    PRED_NUM("h2d_bytes_per_s_per_device", h2d_bytes_per_s_needed),
    PRED_NUM("allreduce_busbw_bytes_per_s", busbw_needed),  // 0: hidden under backward
    PRED_NUM("net_bytes_per_s_for_compute", net_bytes_per_s_needed),  // nodes > 1: the link rate for compute-bound
    {0}};

static json_t *strings_write(const char *first, size_t stride, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(first + (size_t)i * stride));
    return a;
}

static json_t *fix_write(const void *rec) {
    const dlp_prediction *o = rec;
    return strings_write(o->fix[0], sizeof o->fix[0], o->nfix);
}

static json_t *notes_write(const void *rec) {
    const dlp_prediction *o = rec;
    return strings_write(o->notes[0], sizeof o->notes[0], o->nnotes);
}

static const dlp_field_def k_prediction_fields[] = {
    {DLP_FIELD(dlp_prediction, task, DLP_FT_ENUM, 0), .names = dlp_task_names, .nnames = 2},
    {DLP_FIELD_AS(dlp_prediction, "precision", prec, DLP_FT_ENUM, 0), .names = dlp_prec_names,
     .nnames = DLP_PREC_COUNT},
    PRED_INT("devices_per_node", devices, 0),
    PRED_INT("nodes", nodes, 0),
    PRED_INT("batch_per_device", batch, 0),
    PRED_INT("loader_threads", workers_total, 0),  // node
    PRED_INT("compute_threads", threads, DLP_FF_OMIT0),  // cpu device
    {DLP_FIELD_AS(dlp_prediction, "storage", storage_cold, DLP_FT_ENUM, 0), .names = k_storage_names, .nnames = 2},
    PRED_NUM("work_ratio", work_ratio),  // model FLOPs / ResNet-50's at 224
    {DLP_FIELD_AS(dlp_prediction, "image_work", work, DLP_FT_OBJ, 0), .sub = k_image_work_fields},
    {.key = "loader", .type = DLP_FT_OBJ, .sub = k_loader_fields},
    {.key = "device_step", .type = DLP_FT_OBJ, .sub = k_device_step_fields},
    {DLP_FIELD_CB("stages", NULL, stages_write)},
    PRED_NUM("img_per_s", img_per_s),  // node
    PRED_NUM("per_device_img_per_s", per_device_img_per_s),
    PRED_NUM("cluster_img_per_s", cluster_img_per_s),
    PRED_NUM("device_img_per_s", device_img_per_s),  // node, if the loader kept up
    {DLP_FIELD(dlp_prediction, bottleneck, DLP_FT_ENUM, 0), .names = k_stage_names, .nnames = DLP_STAGE_COUNT},
    PRED_NUM("data_stall_fraction", data_stall_fraction),
    PRED_NUM("step_s", step_s),
    PRED_NUM("epoch_s", epoch_s),
    PRED_NUM("first_epoch_s", first_epoch_s),
    PRED_NUM("total_s", total_s),
    {.key = "needs", .type = DLP_FT_OBJ, .sub = k_needs_fields},
    {DLP_FIELD_CB("fix", NULL, fix_write)},
    {DLP_FIELD_CB("notes", NULL, notes_write)},
    {0}};

json_t *dlp_prediction_to_json(const dlp_prediction *o) {
    json_t *r = json_object();
    dlp_fields_write(r, k_prediction_fields, o);
    return r;
}
