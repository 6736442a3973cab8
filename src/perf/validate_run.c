// perf/validate_run: one configuration — its prediction from the profile alone, then a short training run through
// run/train with the real loader, measured in its steady state: warm-up steps skipped (the ring filled ahead of the
// first step, plan warm-up), then the steps' wall times (each step's phases, data wait included, back to back) cut
// into windows; the median window rate is the measurement (robust to a window disturbed by other work on the
// machine), the mean over all steady steps is recorded beside it.
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/stats.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "backend/backend.h"
#include "hw/canary.h"
#include "hw/cpushare.h"
#include "hw/host.h"
#include "perf/probe_impl.h"
#include "dist/launch.h"
#include "perf/validate.h"
#include "run/train.h"

// Reads every file once, so a warm run finds the dataset in the page cache.
static void warm_dataset(const dlp_dataset *ds) {
    char path[4096];
    char *buf = malloc(1 << 16);
    if (!buf) return;
    for (int64_t i = 0; i < ds->n; i++) {
        dlp_dataset_path(ds, i, path, sizeof path);
        (void)dlp_warm_file(path, buf, 1 << 16);
    }
    free(buf);
}

typedef struct meas {
    const dlp_validate_cfg *vc;
    int batch, cold, warmup_min;
    int64_t t_first_ns;       // when the first step finished
    int warm_done;            // the warm-up is over
    int64_t t_meas0_ns, t_meas1_ns;
    double busy0_s, busy1_s;  // all CPUs' busy time at the start and the end of the measurement
    int64_t own0_ns, own1_ns; // this process's CPU time then
    dlp_cpushare *meter;      // the run's threads' CPU share over the measurement (started with it)
    dlp_cpushare_sample share;
    int64_t share_read_ns;
    int n, cap;
    double *step_s, *wait_s;  // measured steps
    int warmup_steps;
} meas;

static int on_event(void *ctx, const dlp_train_event *ev) {
    meas *m = ctx;
    if (ev->kind != DLP_TRAIN_EV_STEP || !ev->phase_ms) return 0;
    int64_t now = dlp_now_ns();
    if (!m->t_first_ns) m->t_first_ns = now;
    int last_of_epoch = ev->steps_per_epoch > 0 && ev->step_in_epoch >= ev->steps_per_epoch;
    if (!m->warm_done) {
        m->warmup_steps++;
        if (m->warmup_steps >= m->warmup_min && dlp_ns_to_s(now - m->t_first_ns) >= 1.0) {
            m->warm_done = 1;
            m->t_meas0_ns = now;
            m->busy0_s = dlp_host_cpus_busy_s();
            m->own0_ns = dlp_cpu_ns();
            m->meter = dlp_cpushare_start(0);
            m->share_read_ns = now;
        }
        return m->cold && last_of_epoch;  // cold reads end with the first epoch
    }
    double s = 0;
    for (int p = 0; p < DLP_TRAIN_PH_COUNT; p++) s += ev->phase_ms[p];
    if (m->n < m->cap) {
        m->step_s[m->n] = s * 1e-3;
        m->wait_s[m->n] = ev->phase_ms[DLP_TRAIN_PH_DATA_WAIT] * 1e-3;
        m->n++;
    }
    double t = dlp_ns_to_s(now - m->t_meas0_ns);
    m->t_meas1_ns = now;
    m->busy1_s = dlp_host_cpus_busy_s();
    m->own1_ns = dlp_cpu_ns();
    const int done = (m->cold && last_of_epoch) || m->n >= m->cap || t >= m->vc->max_seconds ||
                     (m->n >= m->vc->min_steps && t >= m->vc->min_seconds);
    // the share up to this step (read at most every 50 ms, and at the last step: a read scans the threads)
    if (m->meter && (done || now - m->share_read_ns >= 50000000)) {
        dlp_cpushare_read(m->meter, &m->share);
        m->share_read_ns = now;
    }
    return done;
}

// Median window rate over the measured steps: k windows of consecutive steps.
static void windows(const meas *m, dlp_validate_row *row) {
    int n = m->n;
    double tot = 0, wait = 0;
    for (int i = 0; i < n; i++) {
        tot += m->step_s[i];
        wait += m->wait_s[i];
    }
    row->steps_measured = n;
    row->measured_s = tot;
    row->measured_mean_img_per_s = tot > 0 ? (double)n * m->batch / tot : NAN;
    row->observed_stall = tot > 0 ? wait / tot : NAN;
    int k = n / 3;  // at least 3 steps per window
    if (k > 5) k = 5;
    if (k < 1) k = 1;
    double rate[5];
    for (int w = 0; w < k; w++) {
        int lo = n * w / k, hi = n * (w + 1) / k;
        double s = 0;
        for (int i = lo; i < hi; i++) s += m->step_s[i];
        rate[w] = s > 0 ? (double)(hi - lo) * m->batch / s : 0;
    }
    row->windows = k;
    row->measured_img_per_s = dlp_stats_median_f64(rate, k);
    double lo = rate[0], hi = rate[0];
    for (int w = 1; w < k; w++) {
        if (rate[w] < lo) lo = rate[w];
        if (rate[w] > hi) hi = rate[w];
    }
    row->window_spread = row->measured_img_per_s > 0 ? (hi - lo) / row->measured_img_per_s : NAN;
}

static double json_num(const json_t *o, const char *a, const char *b, const char *c) {
    const json_t *v = json_object_get(o, a);
    if (v && b) v = json_object_get(v, b);
    if (v && c) v = json_object_get(v, c);
    return json_is_number(v) ? json_number_value(v) : 0;
}

// The smallest CPU share of the ranks (dist.per_rank[].cpu_share; the slowest sets the lock-step pace), NAN: none.
static double ranks_min_share(const json_t *r) {
    const json_t *per = json_object_get(json_object_get(r, "dist"), "per_rank");
    double s = NAN;
    for (size_t i = 0; i < json_array_size(per); i++) {
        const double v = json_number_value(json_object_get(json_array_get(per, i), "cpu_share"));
        if (v > 0 && !(v >= s)) s = v;
    }
    return s;
}

// A configuration of several data-parallel ranks: `mpirun -np R dlperf train` on the same dataset, measured from
// its result — the steady images/s of rank 0's loop times the ranks (every rank steps in lock-step through the
// allreduce), its data-wait share and its loader's read share.
static void run_ranks(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row) {
    char mpirun[4400], dir[] = "/tmp/dlperf-validate.XXXXXX", out[4200], log[4200], cmd[12288], rl[96] = "";
    const int to = (int)(vc->max_seconds > 0 ? 3 * vc->max_seconds + 120 : 600), nodes = c->nodes > 1 ? c->nodes : 1;
    if (nodes > 1 ? dlp_mpirun_hosts_prefix(mpirun, sizeof mpirun, c->launcher, c->hostfile, nodes, c->ranks,
                                            vc->self_exe, to)  // across hosts (issue 30)
                  : dlp_mpirun_prefix(mpirun, sizeof mpirun, c->ranks, vc->self_exe, to)) {
        snprintf(row->error, sizeof row->error, "run: cannot find this program's path for mpirun");
        return;
    }
    if (!c->launcher[0] && !dlp_mpirun_available()) {
        snprintf(row->error, sizeof row->error, "run: %d ranks need mpirun (Open MPI), which is not here", c->ranks * nodes);
        return;
    }
    if (!mkdtemp(dir)) {
        snprintf(row->error, sizeof row->error, "run: no temporary directory");
        return;
    }
    snprintf(out, sizeof out, "%s/train.json", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    if (c->read_limit_bytes_per_s > 0) snprintf(rl, sizeof rl, " --read-limit %lld", (long long)c->read_limit_bytes_per_s);
    if (c->images > 0)
        snprintf(rl + strlen(rl), sizeof rl - strlen(rl), " --limit-samples %lld", (long long)c->images);
    const int warm = 2 * c->workers + 2 > 3 ? 2 * c->workers + 2 : 3, steps = warm + (vc->min_steps > 12 ? vc->min_steps : 12);
    snprintf(cmd, sizeof cmd,
             "%s train --data '%s' --val-data none --no-eval --model %s --size %d --batch %d --device %s --threads %d "
             "--workers %d --precision %s --steps %d --measure-warmup %d --lr 0.01 --peak off --no-monitor --seed %llu "
             "--quiet%s%s --json '%s' >'%s' 2>&1",
             mpirun, vc->ds->root, c->model,
             c->size, c->batch, c->device, c->threads, c->workers, dlp_prec_name(c->prec), steps,
             warm, (unsigned long long)vc->seed, rl, c->cold ? " --drop-cache" : "", out, log);
    int64_t t0 = dlp_now_ns();
    int rc = system(cmd);
    row->run_s = dlp_ns_to_s(dlp_now_ns() - t0);
    json_error_t je;
    json_t *r = rc == 0 ? json_load_file(out, 0, &je) : NULL;
    const double steady = json_num(r, "throughput", "steady_img_per_s", NULL);
    const int world = (int)json_num(r, "dist", "ranks", NULL);
    if (!r || !(steady > 0) || world != c->ranks * nodes) {
        char tail[200];
        dlp_file_last_line(log, tail, sizeof tail);
        snprintf(row->error, sizeof row->error, "run: mpirun -np %d dlperf train %s (exit status %d)%s%s", c->ranks * nodes,
                 r ? "gave no steady throughput" : "failed", rc, tail[0] ? ": " : "", tail);
    } else {
        row->measured_img_per_s = steady * world;
        row->measured_mean_img_per_s = row->measured_img_per_s;
        row->windows = 1;
        row->warmup_steps = warm;
        row->observed_stall = json_num(r, "stall", "data_wait_frac", NULL);
        double rd = json_num(r, "loader", "read_ns", NULL), de = json_num(r, "loader", "decode_ns", NULL),
               au = json_num(r, "loader", "augment_ns", NULL);
        row->read_share = rd + de + au > 0 ? rd / (rd + de + au) : 0;
        row->observed_regime = dlp_validate_observed_regime(row->observed_stall, row->read_share);
        row->other_load_cores = 0;
        row->cpu_share = ranks_min_share(r);
        row->ape = dlp_validate_ape(row->predicted_img_per_s, row->measured_img_per_s);
        row->ok = 1;
    }
    json_decref(r);
    unlink(out);
    unlink(log);
    rmdir(dir);
}

static void run_once(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row) {
    memset(row, 0, sizeof *row);
    row->cfg = *c;
    dlp_validate_config_label(c, row->label, sizeof row->label);
    row->predicted_img_per_s = row->measured_img_per_s = row->ape = row->cpu_share = NAN;
    row->cpu_share_slowest = row->predicted_at_mean_share_img_per_s = row->ape_at_mean_share = row->cpu_runnable = NAN;
    dlp_prediction *pr = malloc(sizeof *pr);
    dlp_status st = pr ? dlp_validate_predict(vc, c, pr) : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (st) {
        snprintf(row->error, sizeof row->error, "prediction: %s", dlp_err_msg());
        dlp_err_clear();
        free(pr);
        return;
    }
    row->predicted_img_per_s = pr->img_per_s;
    snprintf(row->predicted_bottleneck, sizeof row->predicted_bottleneck, "%s", dlp_stage_name(pr->bottleneck));
    row->predicted_regime = dlp_validate_regime_of_stage(pr->bottleneck);
    row->predicted_stall = pr->data_stall_fraction;
    free(pr);

    if (!c->cold) warm_dataset(vc->ds);
    if (c->ranks > 1 || c->nodes > 1) {
        run_ranks(vc, c, row);
        return;
    }
    meas m = {.vc = vc, .batch = c->batch, .cold = c->cold};
    m.warmup_min = 2 * c->workers + 2 > 3 ? 2 * c->workers + 2 : 3;  // the ring (2 x workers batches) drains first
    m.cap = 4096;
    m.step_s = malloc(sizeof(double) * (size_t)m.cap);
    m.wait_s = malloc(sizeof(double) * (size_t)m.cap);
    if (!m.step_s || !m.wait_s) {
        snprintf(row->error, sizeof row->error, "out of memory");
        free(m.step_s);
        free(m.wait_s);
        return;
    }
    dlp_train_cfg tc;
    dlp_train_cfg_defaults(&tc);
    tc.model = c->model;
    tc.size = c->size;
    tc.train_ds = vc->ds;
    tc.val_data = "none";
    tc.eval = 0;
    tc.batch = c->batch;
    tc.steps = 1000000;  // the callback ends the run
    tc.device = c->device;
    tc.precision = c->prec == DLP_PREC_BF16 ? DLP_DTYPE_BF16 : DLP_DTYPE_F32;
    tc.threads = c->threads;
    tc.workers = c->workers;
    tc.seed = vc->seed;
    tc.sched.base_lr = 0.01;
    tc.read_limit_bytes_per_s = c->read_limit_bytes_per_s;
    tc.limit_samples = c->images;
    tc.drop_cache = c->cold;
    tc.measure_warmup_steps = 0;
    tc.peak = DLP_TRAIN_PEAK_OFF;
    tc.monitor = 0;
    tc.log_interval_s = 1e9;
    tc.callback = on_event;
    tc.callback_ctx = &m;
    dlp_train_result r;
    memset(&r, 0, sizeof r);
    int64_t t0 = dlp_now_ns();
    st = dlp_train_run(&tc, &r);
    row->run_s = dlp_ns_to_s(dlp_now_ns() - t0);
    dlp_cpushare_stop(m.meter, NULL);
    row->cpu_share = m.share.share > 0 ? m.share.share : NAN;
    row->cpu_share_slowest = m.share.slowest_share > 0 ? m.share.slowest_share : NAN;
    row->cpu_runnable = m.share.runnable > 0 ? m.share.runnable : NAN;
    row->warmup_steps = m.warmup_steps;
    if (st) {
        snprintf(row->error, sizeof row->error, "run: %s", dlp_err_msg());
        dlp_err_clear();
    } else if (m.n < 3) {
        snprintf(row->error, sizeof row->error, "only %d steps after the warm-up (%d steps%s): too few to measure", m.n,
                 m.warmup_steps, c->cold ? "; a cold run stays in its first epoch: use a larger dataset or batch" : "");
    } else {
        windows(&m, row);
        // Other work on the machine while this one was measured: CPUs busy beyond this process, in cores.
        double wall = dlp_ns_to_s(m.t_meas1_ns - m.t_meas0_ns);
        row->other_load_cores = m.busy0_s >= 0 && m.busy1_s >= 0 && wall > 0
                                    ? (m.busy1_s - m.busy0_s - dlp_ns_to_s(m.own1_ns - m.own0_ns)) / wall
                                    : NAN;
        if (row->other_load_cores < 0) row->other_load_cores = 0;
        // The loader threads' time split: reads (with cold waits and the read limit's sleep) against the rest.
        double rd = json_num(r.json, "loader", "train", "read_ns"), de = json_num(r.json, "loader", "train", "decode_ns"),
               au = json_num(r.json, "loader", "train", "augment_ns");
        row->read_share = rd + de + au > 0 ? rd / (rd + de + au) : 0;
        row->observed_regime = dlp_validate_observed_regime(row->observed_stall, row->read_share);
        row->ape = dlp_validate_ape(row->predicted_img_per_s, row->measured_img_per_s);
        row->ok = 1;
    }
    dlp_train_result_free(&r);
    free(m.step_s);
    free(m.wait_s);
}

// The prediction for the run at the speed it saw: the profile's CPU-side timings scaled to that speed.
static void predict_at_speed(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row) {
    row->predicted_at_speed_img_per_s = row->ape_at_speed = NAN;
    if (!row->ok || !isfinite(row->speed) || !(row->speed > 0)) return;
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *pr = malloc(sizeof *pr);
    if (p && pr) {
        *p = *vc->profile;
        dlp_profile_at_speed(p, isfinite(row->speed_one) && row->speed_one > 0 ? row->speed_one : row->speed);
        dlp_validate_cfg v2 = *vc;
        v2.profile = p;
        if (dlp_validate_predict(&v2, c, pr) == DLP_OK) {
            row->predicted_at_speed_img_per_s = pr->img_per_s;
            row->ape_at_speed = dlp_validate_ape(pr->img_per_s, row->measured_img_per_s);
        }
        dlp_err_clear();
    }
    free(p);
    free(pr);
}

// The prediction for the run from profile vc->profile at the CPU share the run saw (NAN: unknown).
// slowest: the share of the run's slowest thread, for the multi-thread cpu compute rows (<= 0 or NAN: by share).
// work: the work speed read around the run (GFLOP per CPU-second; NAN or 0: unknown): the profile's rows of the run's
// precision that hold at a work speed are brought to it.
static double predict_at_share(const dlp_validate_cfg *vc, const dlp_validate_config *c, double share, double slowest,
                               double work, double decode) {
    if (!(share > 0) || !(vc->profile->host.cpu_share > 0 || vc->profile->host.cpu_share1 > 0)) return NAN;
    double out = NAN;
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *pr = malloc(sizeof *pr);
    if (p && pr) {
        *p = *vc->profile;
        dlp_profile_at_shares(p, share, isfinite(slowest) ? slowest : 0);  // each row from its class's reference
        if (isfinite(work) && work > 0) dlp_profile_at_work(p, c->prec, work);
        if (isfinite(decode) && decode > 0) dlp_profile_at_decode(p, decode);
        dlp_validate_cfg v2 = *vc;
        v2.profile = p;
        if (dlp_validate_predict(&v2, c, pr) == DLP_OK) out = pr->img_per_s;
        dlp_err_clear();
    }
    free(p);
    free(pr);
    return out;
}

double dlp_validate_predict_other_share(const dlp_validate_cfg *vc2, const dlp_validate_row *row) {
    return row->ok ? predict_at_share(vc2, &row->cfg, row->cpu_share, row->cpu_share_slowest, row->work, row->decode_work) : NAN;
}

double dlp_validate_predict_other_mean_share(const dlp_validate_cfg *vc2, const dlp_validate_row *row) {
    return row->ok ? predict_at_share(vc2, &row->cfg, row->cpu_share, row->cpu_share, row->work, row->decode_work) : NAN;
}

void dlp_validate_predict_other(const dlp_validate_cfg *vc2, const dlp_validate_row *row, double ref_gflops,
                                double ref1_gflops, double *pred, double *pred_speed) {
    *pred = *pred_speed = NAN;
    if (!row->ok) return;
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *pr = malloc(sizeof *pr);
    if (p && pr && dlp_validate_predict(vc2, &row->cfg, pr) == DLP_OK) {
        *pred = pr->img_per_s;
        const dlp_host_profile *h = &vc2->profile->host;
        double rel = NAN;
        if (isfinite(row->speed_one) && h->canary1_gflops > 0 && ref1_gflops > 0)
            rel = row->speed_one * ref1_gflops / h->canary1_gflops;
        else if (isfinite(row->speed) && h->canary_gflops > 0 && ref_gflops > 0)
            rel = row->speed * ref_gflops / h->canary_gflops;
        if (rel > 0) {
            *p = *vc2->profile;
            dlp_profile_at_speed(p, rel);
            dlp_validate_cfg v3 = *vc2;
            v3.profile = p;
            if (dlp_validate_predict(&v3, &row->cfg, pr) == DLP_OK) *pred_speed = pr->img_per_s;
        }
    }
    dlp_err_clear();
    free(p);
    free(pr);
}

// Each canary reading around a run: as long as the probe's readings around its rows, so that a run's speed and the
// profile's reference are the same measurement (on a time-shared machine a thread that wakes gets a scheduler's
// credit of a few ms before its fair share, which a short reading overstates: the same bias on both sides).
#define VALIDATE_CANARY_S DLP_PROBE_CANARY_S

// The work speed of the profile's cpu rows of the run's precision (their work_gflops; 0: none holds at one).
static double profile_work_ref(const dlp_profile *p, dlp_prec prec) {
    for (int d = 0; d < p->ndevices; d++)
        if (p->devices[d].kind == DLP_DEVICE_CPU)
            for (int i = 0; i < p->devices[d].nrates; i++)
                if (p->devices[d].rates[i].prec == prec && p->devices[d].rates[i].work_gflops > 0)
                    return p->devices[d].rates[i].work_gflops;
    return 0;
}

// One work-speed reading for a cpu-device run (its precision, its threads; 0 when the device does not compute on the
// host's cores or they were time-shared meanwhile).
static double work_read(const dlp_validate_config *c) {
    if (dlp_backend_kind_of(c->device) != DLP_BACKEND_KIND_CPU) return 0;
    const dlp_backend *b = dlp_backend_find(c->device, NULL);
    dlp_err_clear();
    const dlp_dtype dt = c->prec == DLP_PREC_BF16 ? DLP_DTYPE_BF16 : c->prec == DLP_PREC_INT8 ? DLP_DTYPE_I8 : DLP_DTYPE_F32;
    return dlp_work_read(b, dt, c->threads > 0 ? c->threads : dlp_host_cpus_allowed());
}

// The mean of two readings that were taken (NAN: neither).
static double mean_of_read(double a, double b) { return a > 0 && b > 0 ? 0.5 * (a + b) : a > 0 ? a : b > 0 ? b : NAN; }

// One run with the cores' speed read just before and just after it (when the profile has the speed as probed), and
// the steal time over it.
static void run_timed(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row) {
    const double c0 = vc->canary_base_gflops > 0 ? dlp_host_canary_gflops(VALIDATE_CANARY_S) : 0;
    // One loader thread feeding a device that does not compute on the host: that thread's speed is what moves the
    // run, so the one-thread canary too (when the profile has its reference).
    const int one = vc->at_speed && vc->profile->host.canary1_gflops > 0 && c->workers == 1 &&
                    dlp_backend_kind_of(c->device) != DLP_BACKEND_KIND_CPU;
    const double o0 = one ? dlp_host_canary_gflops_on(VALIDATE_CANARY_S, 1) : 0;
    const double wref = profile_work_ref(vc->profile, c->prec);
    const double w0 = wref > 0 ? work_read(c) : 0;
    const double dref = vc->profile->pipeline.work_img_per_s;
    const double d0 = dref > 0 ? dlp_decode_read(c->workers > 0 ? c->workers : 1) : 0;
    dlp_cpu_ticks t0, t1;
    const int has_ticks = dlp_host_cpu_ticks(&t0);
    run_once(vc, c, row);
    const double w1 = wref > 0 ? work_read(c) : 0;
    const double d1 = dref > 0 ? dlp_decode_read(c->workers > 0 ? c->workers : 1) : 0;
    row->speed = row->speed_drift = row->steal = row->speed_one = NAN;
    row->work = mean_of_read(w0, w1);
    row->work_rel = isfinite(row->work) ? row->work / wref : NAN;
    row->decode_work = mean_of_read(d0, d1);
    row->decode_rel = isfinite(row->decode_work) ? row->decode_work / dref : NAN;
    row->predicted_at_share_img_per_s = row->ape_at_share = NAN;
    row->predicted_at_mean_share_img_per_s = row->ape_at_mean_share = NAN;
    if (row->ok) {
        row->predicted_at_share_img_per_s = predict_at_share(vc, c, row->cpu_share, row->cpu_share_slowest, row->work, row->decode_work);
        row->ape_at_share = dlp_validate_ape(row->predicted_at_share_img_per_s, dlp_validate_measured_at_share(row));
        // the model before: every multi-thread row by the process's mean share (for comparison)
        row->predicted_at_mean_share_img_per_s = predict_at_share(vc, c, row->cpu_share, row->cpu_share, row->work, row->decode_work);
        row->ape_at_mean_share =
            dlp_validate_ape(row->predicted_at_mean_share_img_per_s, dlp_validate_measured_at_share(row));
    }
    if (o0 > 0) {
        const double o1 = dlp_host_canary_gflops_on(VALIDATE_CANARY_S, 1);
        if (o1 > 0) row->speed_one = 0.5 * (o0 + o1) / vc->profile->host.canary1_gflops;
    }
    if (has_ticks && dlp_host_cpu_ticks(&t1)) row->steal = dlp_steal_fraction(&t0, &t1);
    if (c0 > 0) {
        const double c1 = dlp_host_canary_gflops(VALIDATE_CANARY_S);
        if (c1 > 0) {
            row->speed = 0.5 * (c0 + c1) / vc->canary_base_gflops;
            row->speed_drift = fabs(c1 - c0) / (0.5 * (c0 + c1));
        }
    }
    predict_at_speed(vc, c, row);
}

// How far a run is from the machine the profile describes, in units of the tolerances (<= 1: close enough): other
// processes' load, and the cores running faster or slower than when probed.
double dlp_validate_disturbance(const dlp_validate_cfg *vc, const dlp_validate_row *r) {
    // A normalised profile: the run is compared at its own speed, so only a speed that moved during it disturbs it.
    if (vc->at_speed)
        return isfinite(r->speed_drift) && vc->speed_tolerance > 0 ? r->speed_drift / vc->speed_tolerance : 0;
    double d = isfinite(r->other_load_cores) && vc->disturbed_cores > 0 ? r->other_load_cores / vc->disturbed_cores : 0;
    if (isfinite(r->speed) && vc->speed_tolerance > 0 && fabs(r->speed - 1) / vc->speed_tolerance > d)
        d = fabs(r->speed - 1) / vc->speed_tolerance;
    return d;
}

void dlp_validate_run_config(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_validate_row *row) {
    run_timed(vc, c, row);
    int runs = 1;
    // Other work on the machine, or cores slowed (or sped up) by a virtual machine's neighbours, move a run where
    // the model (the machine as probed) does not: again, and keep the run closest to the machine as probed (chosen
    // by the load and the cores' speed, never by the error).
    while (row->ok && runs <= vc->retries && dlp_validate_disturbance(vc, row) > 1) {
        dlp_validate_row *again = malloc(sizeof *again);
        if (!again) break;
        if (!vc->at_speed) dlp_wait_quiet(vc->quiet_wait_s, vc->disturbed_cores);
        run_timed(vc, c, again);
        runs++;
        if (again->ok && dlp_validate_disturbance(vc, again) < dlp_validate_disturbance(vc, row)) *row = *again;
        free(again);
    }
    row->runs = runs;
}
