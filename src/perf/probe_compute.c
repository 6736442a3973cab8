// perf/probe_compute: a compute backend's training step time against batch size, image size, model, precision and
// thread count, on random tensors (no loader): per (model, size, precision, threads) the median step at a few
// batch sizes and the least-squares line  t_fwd+bwd(b) = t0 + b x t_img,  stored per image of reference work
// (ResNet-50 at 224 px: per_image_s = t_img / work ratio) with the update's median time (per reference parameter
// count), the forward's share of the step, and the cores the step keeps busy (process CPU time / wall time).
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/stats.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/rng.h"
#include "data/bench.h"
#include "data/loader.h"
#include "hw/cpushare.h"
#include "hw/host.h"
#include "hw/work.h"
#include "nn/resnet.h"
#include "perf/probe_fit.h"
#include "perf/probe_impl.h"
#include "run/step.h"

typedef struct step_meas {
    double fb_s;        // forward + loss + backward, median
    double fwd_s;       // forward, median
    double upd_s;       // update, median
    double cores_busy;  // process CPU / wall over the timed steps
    int steps;
    double other_cores; // other processes' CPU use meanwhile
    int tries;
} step_meas;

// A ready training plan with its input, for the compute and contention parts.
typedef struct probe_plan {
    const dlp_backend *ops;
    dlp_plan *plan;
    dlp_net net;
    void *input;
    int32_t *labels;
    int batch;
} probe_plan;

static void plan_close(probe_plan *p) {
    if (p->plan) dlp_plan_free(p->plan);
    dlp_net_free(&p->net);
    free(p->input);
    free(p->labels);
    memset(p, 0, sizeof *p);
}

static dlp_status plan_open(const dlp_backend *ops, const char *arg, const char *model, int size, int batch,
                            dlp_dtype prec, int threads, uint64_t seed, probe_plan *p) {
    memset(p, 0, sizeof *p);
    p->ops = ops;
    p->batch = batch;
    DLP_CHECK(dlp_model_build(model, 1000, size, &p->net));
    dlp_status st = DLP_OK;
    float *params = malloc(sizeof(float) * (size_t)p->net.param_count), *bufs = malloc(sizeof(float) * (size_t)p->net.buf_count);
    p->labels = malloc(sizeof(int32_t) * (size_t)batch);
    if (!params || !bufs || !p->labels) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for %s", model);
        goto out;
    }
    dlp_resnet_init_params(&p->net, seed, 0, params, bufs);
    dlp_plan_cfg pc = {.batch = batch, .train = 1, .precision = prec, .threads = threads, .arg = arg};
    DLP_CHECK_GOTO(st, dlp_plan_create(ops, &p->net, &pc, &p->plan), out);
    DLP_CHECK_GOTO(st, dlp_plan_set_params(p->plan, params, bufs), out);
    dlp_layout layout;
    dlp_dtype in_type;
    dlp_plan_input_format(p->plan, &layout, &in_type);
    int64_t n = (int64_t)batch * dlp_net_layer_numel(&p->net, 0);
    p->input = malloc((size_t)n * dlp_dtype_size(in_type));
    if (!p->input) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the input batch");
        goto out;
    }
    dlp_rng r;
    dlp_rng_init(&r, seed, 77);
    dlp_step_fill_random(p->input, n, in_type, &r);
    for (int i = 0; i < batch; i++) p->labels[i] = (int32_t)dlp_rng_below(&r, 1000);
out:
    free(params);
    free(bufs);
    if (st) plan_close(p);
    return st;
}


// Warm-up steps, then timed steps until min_s has passed (at least min_steps, at most 64), through run/step's
// harness with each phase waited for: the medians of the forward (with the input), forward + loss + backward, and
// the update.
static dlp_status measure_once(probe_plan *p, int warmup, int min_steps, double min_s, step_meas *m) {
    memset(m, 0, sizeof *m);
    const dlp_step_cfg sc = {.plan = p->plan, .train = 1, .sync_phases = 1};
    const dlp_step_batch sb = {.input = p->input, .n = p->batch, .labels = p->labels,
                               .sgd = {.lr = 0.001f, .momentum = 0.9f, .weight_decay = 1e-4f}};
    const dlp_step_bench_cfg bc = {.warmup = warmup, .min_steps = min_steps, .max_steps = 64, .min_s = min_s};
    dlp_load_meter lm;
    dlp_load_meter_start(&lm);
    dlp_step_bench_result br;
    DLP_CHECK(dlp_step_bench(&sc, &sb, &bc, &br));
    double fwd[64], fb[64], upd[64];
    const int n = br.steps, W = DLP_STEP_NPHASES + 1;
    for (int i = 0; i < n; i++) {
        const double *row = br.ms + (size_t)i * W;
        fwd[i] = (row[DLP_STEP_INPUT] + row[DLP_STEP_FORWARD]) * 1e-3;
        fb[i] = fwd[i] + (row[DLP_STEP_LOSS] + row[DLP_STEP_BACKWARD] + row[DLP_STEP_ALLREDUCE]) * 1e-3;
        upd[i] = row[DLP_STEP_UPDATE] * 1e-3;
    }
    m->fb_s = dlp_stats_median_f64(fb, n);
    m->fwd_s = dlp_stats_median_f64(fwd, n);
    m->upd_s = dlp_stats_median_f64(upd, n);
    m->cores_busy = br.wall_s > 0 ? br.cpu_s / br.wall_s : 0;
    m->steps = n;
    m->other_cores = dlp_load_meter_cores(&lm);
    dlp_step_bench_free(&br);
    return DLP_OK;
}

// measure_once for the contention part: its shares compare rates at the canary's speed around each (contend), so
// other processes' load is no reason to measure again (on a shared VM it never stops; the retries cost minutes).
static dlp_status measure(dlp_probe_ctx *c, probe_plan *p, int warmup, int min_steps, double min_s, step_meas *m) {
    (void)c;
    DLP_CHECK(measure_once(p, warmup, min_steps, min_s, m));
    m->tries = 1;
    return DLP_OK;
}

// Splits "a,b,c" into items (up to max, each < 32 chars).
static int split_list(const char *s, char items[][32], int max) {
    int n = 0;
    while (s && *s && n < max) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len > 0 && len < 32) {
            memcpy(items[n], s, len);
            items[n][len] = '\0';
            n++;
        }
        if (!e) break;
        s = e + 1;
    }
    return n;
}

static const char *const k_line_names[] = {"t0_s", "s_per_image"};

double dlp_probe_slowest_row_share(const dlp_cpushare_sample *pts, int n, double *shares) {
    double w = 0, ws = 0;
    for (int i = 0; i < n; i++) {
        if (!(pts[i].slowest_share > 0) || !(pts[i].wall_s > 0)) return 0;
        w += pts[i].wall_s;
        ws += pts[i].wall_s * pts[i].slowest_share;
        if (shares) shares[i] = pts[i].slowest_share;
    }
    return w > 0 ? ws / w : 0;
}

// The row's share by its slowest thread (into *row_share and the points' shares), 1; 0 (nothing changed) when a point
// lacks it.
static int slowest_row_share(const dlp_cpushare_sample *pts, int n, double *row_share, double *shares) {
    double tmp[8];
    const double s = dlp_probe_slowest_row_share(pts, n, tmp);
    if (!(s > 0)) return 0;
    *row_share = s;
    memcpy(shares, tmp, sizeof(double) * (size_t)n);
    return 1;
}

// Rows for one (model, size, precision, threads): the line over batches, appended to dev.
// The largest batch's point against its repeat, each step time by the share it ran at to the power the row goes as
// (e: its measured share exponent, 0: linear; the slowest thread's share where the row goes by it; raw where a share
// is unknown): their spread, NAN without a repeat.
static double repeat_spread(const step_meas *ml, const dlp_cpushare_sample *s_pt, const step_meas *rep,
                            const dlp_cpushare_sample *s_rep, int by_slowest, double e) {
    if (!(rep->steps > 0 && ml->fb_s > 0 && rep->fb_s > 0)) return NAN;
    const double s0 = by_slowest ? s_pt->slowest_share : s_pt->share;
    const double s1 = by_slowest ? s_rep->slowest_share : s_rep->share;
    const int by_sh = s0 > 0 && s1 > 0;
    const double p = e > 0 ? e : 1;
    const double v[2] = {(by_sh ? pow(s0, p) : 1) * (ml->fb_s + ml->upd_s), (by_sh ? pow(s1, p) : 1) * (rep->fb_s + rep->upd_s)};
    return dlp_probe_speed_spread(v, 2);
}

// --- the share exponent: the row timed again beside a spinner of its own ---------------------------------------------
// A multi-thread compute step is fork-join; with OpenMP's threads spinning at its barriers (the probe's and validate's
// policy) a neighbour on one core costs it more than the share it takes (issue 35: rate ~ share^1.6-1.7 fp32 on a
// 2-core VM, measured by hand). The probe measures the power for each such row: its largest batch once more while a
// process of its own spins on the last CPU, and the exponent from the two (share, step time) points.

// A child process that spins on the last CPU this process may use until killed (at most 60 s: its own alarm; it dies
// with the probe). 0: none.
static pid_t spinner_start(void) {
    cpu_set_t cs;
    int last = -1;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &cs)) last = i;
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid > 0 ? pid : 0;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(60);
    if (last >= 0) {
        CPU_ZERO(&cs);
        CPU_SET(last, &cs);
        sched_setaffinity(0, sizeof cs, &cs);
    }
    volatile unsigned long x = 0;
    for (;;) x++;
}

static void spinner_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

// The exponent e of  step time ~ share^-e  from the point at the row's own share (a: the largest batch and its repeat,
// their geometric means) and the point beside the spinner (b); 0 when it cannot be told: a share unknown, the two
// shares less than 15% apart (the spinner took too little to measure a slope), or e outside 0.25..6 (a neighbour moved
// one of them). *why gets the reason.
static double share_exponent(const step_meas *a0, const dlp_cpushare_sample *sa0, const step_meas *a1,
                             const dlp_cpushare_sample *sa1, const step_meas *b, const dlp_cpushare_sample *sb,
                             int by_slowest, double *s_a, double *s_b, const char **why) {
    *s_a = *s_b = 0;
    *why = "not measured";
    if (!(b->steps > 0 && a0->fb_s > 0 && a1->steps > 0)) return 0;
    const double x0 = by_slowest ? sa0->slowest_share : sa0->share, x1 = by_slowest ? sa1->slowest_share : sa1->share;
    const double xb = by_slowest ? sb->slowest_share : sb->share;
    *why = "a share unknown";
    if (!(x0 > 0 && x1 > 0 && xb > 0)) return 0;
    const double ta = sqrt((a0->fb_s + a0->upd_s) * (a1->fb_s + a1->upd_s)), tb = b->fb_s + b->upd_s;
    *s_a = sqrt(x0 * x1);
    *s_b = xb;
    return dlp_probe_share_exp_fit(ta, *s_a, tb, xb, why);
}

// The try of a compute row the profile keeps (measure_tries).
typedef struct kept_try {
    step_meas ms[8];               // each batch point
    double spd[9];                 // the canary before, between and after them
    double wspd[9];                // and the work speed (dlp_probe_work; 0: not read)
    dlp_cpushare_sample sh[8];     // the CPU share the row's threads got at each batch point
    step_meas rep, sp;             // the largest batch again, and beside the spinner (zero where not measured)
    dlp_cpushare_sample rep_sh, sp_sh;
    double spread;                 // the canary readings' spread
    int tries;
} kept_try;

// The batch points of one compute row, tried until they hold (below); the kept try into *k.
static dlp_status measure_tries(dlp_probe_ctx *c, const dlp_backend *ops, const char *model, int size, dlp_dtype dt,
                                int threads, const int *batches, int nb, kept_try *k) {
    const int quick = c->cfg->quick;
    double spd[9], best_spd[9], best_spread = INFINITY, best_rs = INFINITY, wspd[9], best_wspd[9];
    dlp_cpushare_sample sh[8], best_sh[8];  // the CPU share the row's threads got at each batch point
    step_meas rep_tm = {0}, best_rep = {0};   // the largest batch measured again (not with --quick)
    dlp_cpushare_sample rep_sh = {0}, best_rep_sh = {0};
    step_meas sp_tm = {0}, best_sp = {0};     // and once more beside a spinner (multi-thread rows, not with --quick)
    dlp_cpushare_sample sp_sh = {0}, best_sp_sh = {0};
    step_meas ms[8];
    // The canary before, between and after the batch points, on as many threads as the row computes on; the row again
    // while its two measurements of the largest batch, each normalised by its share (to the row's measured power),
    // disagree beyond the band — a neighbour that moved the row moves one of them — or, without them, while the
    // canary moved more than the band around it (the try whose repeats agree best kept). Up to three tries with
    // repeats: the third pass's and fourth pass's moved rows agreed within a try but not between probes.
    const int spin = threads > 1 && !quick;
    const int tries_max = quick ? 2 : DLP_PROBE_SPEED_TRIES + 1;
    int tries = 0;
    double try_s = 0;
    // A try that took over 30 s (a big model on a busy machine) is not repeated for the canary alone: the second try
    // would double the probe for a row whose speed is known from its readings anyway (it is named if they moved); one
    // whose repeats disagree is, up to 60 s a try (ResNet-18 at 224 px on 2 cores: 30-45 s with the spinner part).
    // And a row whose threads got less than 0.9 of their time at any part of the try (a neighbour held a core: the
    // first probe of the fifth pass kept a one-thread row at share 0.71, 17% off the other probe's after a linear
    // normalisation) is measured again too; of the tries, one whose repeats agree at the highest share is kept, so the
    // profile carries the value least stretched by the normalisation.
    // So is one whose work readings (before, between and after its parts) moved more than twice the band: its
    // normalisation by their median does not hold for all of it.
    double best_try_share = 0, best_ws = 0;
    while (tries < tries_max && try_s < (isfinite(best_rs) ? 60 : 30) &&
           (isfinite(best_rs) ? best_rs > DLP_PROBE_SPEED_BAND || best_try_share < DLP_PROBE_QUIET_SHARE ||
                                    best_ws > 2 * DLP_PROBE_SPEED_BAND
                              : best_spread > 2 * DLP_PROBE_SPEED_BAND)) {
        const int64_t t_try = dlp_now_ns();
        step_meas tm[8];
        spd[0] = dlp_probe_speed(c, threads);
        wspd[0] = dlp_probe_work(c, ops, dt, threads);
        for (int i = 0; i < nb; i++) {
            probe_plan pp;
            DLP_CHECK(plan_open(ops, NULL, model, size, batches[i], dt, threads, c->cfg->seed, &pp));
            // The largest batch (not with --quick) in two halves, each under its own meter: the first is the point,
            // the second its repeat — the row's stability check (their values normalised by their shares must agree);
            // on several threads a third part beside the spinner (the share exponent).
            const int halves = i == nb - 1 && !quick;
            dlp_cpushare *meter = dlp_cpushare_start(0);
            dlp_status st = measure_once(&pp, 1, halves ? 2 : quick ? 2 : 3, halves ? 1.0 : quick ? 1.0 : 2.0, &tm[i]);
            dlp_cpushare_stop(meter, &sh[i]);
            if (st == DLP_OK && halves) {
                meter = dlp_cpushare_start(0);
                st = measure_once(&pp, 0, 2, 1.0, &rep_tm);
                dlp_cpushare_stop(meter, &rep_sh);
            }
            if (st == DLP_OK && halves && spin) {
                const pid_t sp = spinner_start();
                if (sp > 0) {
                    meter = dlp_cpushare_start(0);
                    st = measure_once(&pp, 1, 2, 1.0, &sp_tm);
                    dlp_cpushare_stop(meter, &sp_sh);
                    spinner_stop(sp);
                }
            }
            plan_close(&pp);
            DLP_CHECK(st);
            spd[i + 1] = dlp_probe_speed(c, threads);
            wspd[i + 1] = dlp_probe_work(c, ops, dt, threads);
        }
        tries++;
        try_s = dlp_ns_to_s(dlp_now_ns() - t_try);
        const double sp = dlp_probe_speed_spread(spd, nb + 1);
        // this try's repeat test, with its own share exponent where measured
        const int slow_try = threads > 1 && sh[nb - 1].slowest_share > 0 && rep_sh.slowest_share > 0;
        double xa, xb;
        const char *why;
        const double e_try = share_exponent(&tm[nb - 1], &sh[nb - 1], &rep_tm, &rep_sh, &sp_tm, &sp_sh, slow_try, &xa, &xb, &why);
        const double rs = repeat_spread(&tm[nb - 1], &sh[nb - 1], &rep_tm, &rep_sh, slow_try, e_try);
        // the try's lowest share over its points and the repeat (by the row's basis); 0: unknown
        double try_share = slow_try ? rep_sh.slowest_share : rep_sh.share;
        for (int i = 0; i < nb; i++) {
            const double x = slow_try ? sh[i].slowest_share : sh[i].share;
            if (!(x > 0)) try_share = 0;
            else if (x < try_share) try_share = x;
        }
        const double ws = dlp_probe_work_spread(wspd, nb + 1);
        const int agree = isfinite(rs) && rs <= DLP_PROBE_SPEED_BAND && ws <= 2 * DLP_PROBE_SPEED_BAND,
                  best_agree = best_rs <= DLP_PROBE_SPEED_BAND && best_ws <= 2 * DLP_PROBE_SPEED_BAND;
        const int better = isfinite(rs) ? (agree && !best_agree) || (agree && best_agree && try_share > best_try_share) ||
                                              (!agree && !best_agree && !(rs >= best_rs))
                                        : !isfinite(best_rs) && sp < best_spread;
        if (better || tries == 1) {
            best_try_share = try_share;
            best_spread = sp;
            best_rs = isfinite(rs) ? rs : INFINITY;
            best_ws = ws;
            memcpy(ms, tm, sizeof(step_meas) * (size_t)nb);
            memcpy(best_spd, spd, sizeof(double) * (size_t)(nb + 1));
            memcpy(best_wspd, wspd, sizeof(double) * (size_t)(nb + 1));
            memcpy(best_sh, sh, sizeof(dlp_cpushare_sample) * (size_t)nb);
            best_rep = rep_tm;
            best_rep_sh = rep_sh;
            best_sp = sp_tm;
            best_sp_sh = sp_sh;
        }
        const int again = isfinite(best_rs) && (best_rs > DLP_PROBE_SPEED_BAND || best_try_share < DLP_PROBE_QUIET_SHARE ||
                                                best_ws > 2 * DLP_PROBE_SPEED_BAND);
        if (tries > 1 || again)
            dlp_probe_say(c, "compute: %s %s %dpx %s, %d thread(s): try %d, repeats %.1f%% apart after normalisation, "
                          "lowest share %.2f, work readings %.1f%% apart%s", dlp_backend_name(ops), model, size,
                          dlp_dtype_name(dt), threads, tries, isfinite(rs) ? 100 * rs : -1, try_share, 100 * ws,
                          again && tries < tries_max ? ": again" : "");
    }
    memcpy(k->ms, ms, sizeof(step_meas) * (size_t)nb);
    memcpy(k->spd, best_spd, sizeof(double) * (size_t)(nb + 1));
    memcpy(k->wspd, best_wspd, sizeof(double) * (size_t)(nb + 1));
    memcpy(k->sh, best_sh, sizeof(dlp_cpushare_sample) * (size_t)nb);
    k->rep = best_rep;
    k->rep_sh = best_rep_sh;
    k->sp = best_sp;
    k->sp_sh = best_sp_sh;
    k->spread = best_spread;
    k->tries = tries;
    return DLP_OK;
}

static dlp_status fit_row(dlp_probe_ctx *c, const dlp_backend *ops, const char *model, int size, dlp_dtype dt,
                          int threads, const int *batches, int nb, dlp_device_profile *dev, json_t *out_rows,
                          double *fwd_frac_sum, int *fwd_frac_n) {
    const int quick = c->cfg->quick;
    dlp_model_work mw;
    DLP_CHECK(dlp_work_resnet(model, size, size, 1000, &mw));
    const double r = dlp_work_ratio(&mw), q = (double)mw.params / (double)dlp_work_ref()->params;
    double y[16], upd[8], busy[8];
    json_t *pts = NULL;
    const int spin = threads > 1 && !quick;  // the share exponent measured (measure_tries)
    kept_try kept;
    DLP_CHECK(measure_tries(c, ops, model, size, dt, threads, batches, nb, &kept));
    const step_meas *ms = kept.ms, best_rep = kept.rep, best_sp = kept.sp;
    const double *best_spd = kept.spd, best_spread = kept.spread;
    const dlp_cpushare_sample *best_sh = kept.sh, best_rep_sh = kept.rep_sh, best_sp_sh = kept.sp_sh;
    const int tries = kept.tries;
    const double row_speed = dlp_probe_speed_mean(best_spd, nb + 1);
    const double row_work = dlp_probe_work_median(kept.wspd, nb + 1);
    const double row_work_spread = dlp_probe_work_spread(kept.wspd, nb + 1);
    // The row's CPU share: its threads' CPU time over that plus their run-queue wait, over every point (0: unknown).
    double sh_cpu = 0, sh_wait = 0, shares[8];
    int nsh = 0;
    for (int i = 0; i < nb; i++)
        if (best_sh[i].share > 0) {
            sh_cpu += best_sh[i].cpu_s;
            sh_wait += best_sh[i].wait_s;
            shares[nsh++] = best_sh[i].share;
        }
    double row_share = nsh == nb && sh_cpu > 0 ? sh_cpu / (sh_cpu + sh_wait) : 0;
    // On two threads or more a step is fork-join (oneDNN's OpenMP regions): it goes at its slowest thread's share, not
    // at the mean (issue 35), so those rows are normalised by it — each point by its own, the row by their
    // time-weighted mean; where a point lacks it (no schedstat), by the mean share as before.
    const int by_slowest = threads > 1 && row_share > 0 && slowest_row_share(best_sh, nb, &row_share, shares);
    const double share_spread = row_share > 0 ? dlp_probe_speed_spread(shares, nsh) : INFINITY;
    // The row's share exponent from the kept try (0: not measured or not told: linear)
    double xa = 0, xb = 0;
    const char *exp_why = "one thread: linear";
    const double sexp = spin && row_share > 0 ? share_exponent(&ms[nb - 1], &best_sh[nb - 1], &best_rep, &best_rep_sh,
                                                              &best_sp, &best_sp_sh, by_slowest, &xa, &xb, &exp_why)
                                              : 0;
    if (spin && !(row_share > 0)) exp_why = "no CPU share measured";
    const double pexp = sexp > 0 ? sexp : 1;
    pts = json_array();
    for (int i = 0; i < nb; i++) {
        const step_meas m = ms[i];
        // each point at the row's speed (it ran between two readings): the fit sees one machine
        // (by its CPU share where the row's threads measured it, else by the canary around it)
        const double pt_share = by_slowest ? best_sh[i].slowest_share : best_sh[i].share;
        const double k = row_share > 0 ? pow(pt_share / row_share, pexp)
                         : row_speed > 0 && best_spd[i] > 0 ? 0.5 * (best_spd[i] + best_spd[i + 1]) / row_speed
                                                            : 1;
        y[i] = m.fb_s * k;
        upd[i] = m.upd_s * k;
        busy[i] = m.cores_busy;
        *fwd_frac_sum += m.fwd_s / m.fb_s;
        (*fwd_frac_n)++;
        json_array_append_new(pts, json_pack("{s:i, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                                             "batch", batches[i], "fwd_bwd_s", m.fb_s, "fwd_s", m.fwd_s, "update_s",
                                             m.upd_s, "cores_busy", m.cores_busy, "steps", m.steps, "other_cores",
                                             isfinite(m.other_cores) ? m.other_cores : -1, "speed_gflops",
                                             0.5 * (best_spd[i] + best_spd[i + 1]), "at_row_speed_k", k, "cpu_share",
                                             best_sh[i].share, "slowest_thread_share", best_sh[i].slowest_share,
                                             "threads_cpu_s", best_sh[i].cpu_s, "threads_wait_s", best_sh[i].wait_s,
                                             "wall_s", best_sh[i].wall_s));
        dlp_probe_say(c, "compute: %s %s %dpx %s, %d thread(s), batch %d: %.1f ms per step (%.1f img/s), %.2f cores busy, "
                      "speed %.1f GFLOP/s, CPU share %.2f", dlp_backend_name(ops), model, size, dlp_dtype_name(dt),
                      threads, batches[i], (m.fb_s + m.upd_s) * 1e3, batches[i] / (m.fb_s + m.upd_s), m.cores_busy,
                      0.5 * (best_spd[i] + best_spd[i + 1]), best_sh[i].share);
    }
    dlp_lsq_fit f;
    double t0, per_image;
    DLP_CHECK(dlp_probe_fit_step(batches, y, nb, r, &t0, &per_image, &f));
    dlp_rate *row = dlp_probe_row_new(dev, DLP_TASK_TRAIN, dlp_prec_from_dtype(dt, 0), threads, batches[nb - 1], model,
                                      size, t0, per_image, dlp_stats_median_f64(busy, nb));
    if (!row) return DLP_ERR(DLP_ERR_INVALID, "probe: too many rows for %s", dev->name);
    row->update_s = dlp_stats_median_f64(upd, nb) / q;
    snprintf(row->basis, sizeof row->basis, "dlperf probe: %s backend, %s %dpx, batches %d..%d, %d thread(s): %.2f ms + "
             "%.3f ms/img", dlp_backend_name(ops), model, size, batches[0], batches[nb - 1], threads, t0 * 1e3, per_image * r * 1e3);
    // Rescaled to the reference speed at the end of the probe (probe_speed.c); the row keeps the speed it ran at.
    const char *pn = dlp_dtype_name(dt);
    // stable: the points' CPU shares within the band where measured, else the canary's readings
    const double spr = row_share > 0 ? share_spread : best_spread;
    const double rep_spread = repeat_spread(&ms[nb - 1], &best_sh[nb - 1], &best_rep, &best_rep_sh, by_slowest, sexp);
    row->share_exp = sexp;
    if (spin) {
        const size_t bl = strlen(row->basis);
        if (sexp > 0)
            snprintf(row->basis + bl, sizeof row->basis - bl, "; time ~ share^-%.2f (share %.2f alone, %.2f beside a spinner)",
                     sexp, xa, xb);
        dlp_probe_say(c, "compute: %s %s %dpx %s, %d threads: share exponent %s%.2f (share %.2f alone, %.2f beside a "
                      "spinner%s%s)", dlp_backend_name(ops), model, size, pn, threads, sexp > 0 ? "" : "not told, linear; ",
                      sexp > 0 ? sexp : 1.0, xa, xb, sexp > 0 ? "" : ": ", sexp > 0 ? "" : exp_why);
    }
    const int reps = isfinite(rep_spread) ? 2 : 0;
    double *const vals[3] = {&row->t0_s, &row->per_image_s, &row->update_s};
    static const char *const val_names[3] = {"t0", "per_image", "update"};
    for (int k = 0; k < 3; k++) {  // the order the profile's normalisation table lists them in
        dlp_probe_norm_add(c, vals[k], 0, row_speed, row_share, threads, spr, tries, k == 1 ? &row->speed_rel : NULL,
                           "compute %s %s %dpx %s %dt %s", dlp_backend_name(ops), model, size, pn, threads, val_names[k]);
        dlp_probe_norm_repeats(c, rep_spread, reps);
        if (by_slowest) dlp_probe_norm_slowest(c);
        dlp_probe_norm_share_exp(c, sexp);
        dlp_probe_norm_work(c, dlp_probe_work_kind(dt), row_work, &row->work_gflops);
        dlp_probe_norm_work_spread(c, row_work_spread);
    }
    json_t *o = json_pack("{s:s, s:i, s:s, s:i, s:f, s:o, s:[f,f,f], s:f, s:f, s:o, s:s, s:i, s:o}", "model", model,
                          "size", size, "precision", dlp_dtype_name(dt), "threads", threads, "work_ratio", r, "points",
                          pts, "speed_readings_gflops", best_spd[0], best_spd[1], nb > 1 ? best_spd[2] : 0,
                          "speed_spread", best_spread, "cpu_share", row_share, "cpu_share_spread",
                          dlp_json_real_or_null(share_spread), "share_basis",
                          by_slowest ? "slowest_thread_share" : "cpu_share", "tries", tries, "repeat_spread",
                          dlp_json_real_or_null(rep_spread));
    json_t *wr = json_array();
    for (int i = 0; i <= nb; i++) json_array_append_new(wr, json_real(kept.wspd[i]));
    json_object_set_new(o, "work_readings_gflops_per_cpu_s", wr);
    json_object_set_new(o, "work_gflops_per_cpu_s", json_real(row_work));
    if (best_rep.steps > 0)
        json_object_set_new(o, "repeat", json_pack("{s:i, s:f, s:f, s:f, s:f, s:f}", "batch", batches[nb - 1], "fwd_bwd_s",
                                                   best_rep.fb_s, "update_s", best_rep.upd_s, "cores_busy",
                                                   best_rep.cores_busy, "cpu_share", best_rep_sh.share,
                                                   "slowest_thread_share", best_rep_sh.slowest_share));
    if (spin)
        json_object_set_new(o, "share_exponent",
                            json_pack("{s:o, s:s, s:f, s:f, s:i, s:f, s:f, s:f}", "exp", dlp_json_real_or_null(sexp > 0 ? sexp : NAN),
                                      "basis", exp_why, "share_alone", xa, "share_beside_spinner", xb, "batch",
                                      batches[nb - 1], "fwd_bwd_s", best_sp.fb_s, "update_s", best_sp.upd_s,
                                      "cpu_share", best_sp_sh.share));
    json_object_set_new(o, "fit", dlp_probe_fit_json(&f, k_line_names));
    json_array_append_new(out_rows, o);
    return DLP_OK;
}

dlp_status dlp_probe_compute(dlp_probe_ctx *c, const char *backend) {
    const dlp_backend *ops = dlp_backend_find(backend, NULL);
    char why[256] = "";
    if (!ops || dlp_backend_available(ops, why, sizeof why) != DLP_OK) {
        dlp_probe_say(c, "compute: %s is not available here (%s): skipped", backend, why[0] ? why : "not built");
        return DLP_OK;
    }
    if (c->p->ndevices >= DLP_PROFILE_MAX_DEVICES) return DLP_ERR(DLP_ERR_INVALID, "probe: too many devices");
    const int quick = c->cfg->quick;
    const int is_ref = dlp_backend_get_caps(ops)->reference;  // the slow yardstick: small problems
    char models[8][32], sizes_s[8][32];
    int nm = split_list(c->cfg->models ? c->cfg->models : (quick || is_ref ? "resnet18" : "resnet18,resnet50"), models, 8);
    int ns = split_list(c->cfg->sizes ? c->cfg->sizes : (is_ref ? "32" : (quick ? "64" : "64,112")),
                        sizes_s, 8);
    if (nm < 1 || ns < 1) return DLP_ERR(DLP_ERR_INVALID, "probe: no models or sizes to measure");
    static const int k_batches[] = {8, 32}, k_batches_ref[] = {2, 8};
    const int *batches = is_ref ? k_batches_ref : k_batches;
    dlp_host_info h;
    dlp_host_probe(&h);
    dlp_device_profile *dev = &c->p->devices[c->p->ndevices];
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "%s", backend);
    dev->kind = DLP_DEVICE_CPU;
    snprintf(dev->source, sizeof dev->source, "measured");
    dev->contention_efficiency = 1;
    json_t *rows = json_array();
    double ff = 0;
    int nff = 0;
    dlp_status st = DLP_OK;
    const int T = c->threads;
    // Every model at every size given. By default (cpu, not quick) ResNet-18 at 64 and 112 px, and ResNet-50 at 64
    // and at 224 px, the size people ask about: predicted from the small sizes alone, 224 px came out 21% slow
    // (9.8 vs 12.5 img/s, fp32 batch 32 on 2 cores) — the step time does not scale with FLOPs alone. ResNet-50 at 224
    // costs about 20 s of the probe on 2 cores.
    const int dflt = !c->cfg->models && !c->cfg->sizes && !quick && !is_ref;
    if (dflt) {
        static const struct { const char *model; int size; } k_rows[] = {
            {"resnet18", 64}, {"resnet18", 112}, {"resnet50", 64}, {"resnet50", 224}};
        for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0] && st == DLP_OK; i++)
            st = fit_row(c, ops, k_rows[i].model, k_rows[i].size, DLP_DTYPE_F32, T, batches, 2, dev, rows, &ff, &nff);
    }
    for (int im = 0; im < nm && st == DLP_OK && !dflt; im++)
        for (int is = 0; is < ns && st == DLP_OK; is++)
            st = fit_row(c, ops, models[im], atoi(sizes_s[is]), DLP_DTYPE_F32, T, batches, 2, dev, rows, &ff, &nff);
    // One thread (the cpu device sharing the host with a loader on the other cores), and bf16 where the CPU has it:
    // the first model and size only.
    if (st == DLP_OK && !quick && T > 1)
        st = fit_row(c, ops, models[0], atoi(sizes_s[0]), DLP_DTYPE_F32, 1, batches, 2, dev, rows, &ff, &nff);
    if (st == DLP_OK && !quick && !is_ref && (h.avx512_bf16 || h.amx_bf16)) {
        double ff2 = 0;
        int n2 = 0;
        st = fit_row(c, ops, models[0], atoi(sizes_s[0]), DLP_DTYPE_BF16, T, batches, 2, dev, rows, &ff2, &n2);
    }
    if (st != DLP_OK) {
        json_decref(rows);
        return st;
    }
    dev->fwd_fraction = nff > 0 ? ff / nff : 1.0 / 3.0;
    if (!(dev->fwd_fraction > 0.05 && dev->fwd_fraction < 0.95)) dev->fwd_fraction = 1.0 / 3.0;
    c->p->ndevices++;
    json_t *devs = json_object_get(c->details, "devices");
    if (!devs) {
        devs = json_object();
        json_object_set_new(c->details, "devices", devs);
    }
    json_object_set_new(devs, backend, rows);
    return DLP_OK;
}

// --- contention: the cpu backend and the loader at once -------------------------------------------------------------

static dlp_status loader_alone(dlp_probe_ctx *c, int size, int workers, double *img_per_s, double *speed) {
    dlp_data_bench_run r;
    DLP_CHECK(dlp_probe_loader_rate(c, size, workers, 0, c->cfg->seed, c->cfg->quick ? 1 : 3, &r, NULL, speed, NULL, NULL));
    *img_per_s = r.steady_img_per_s;
    return DLP_OK;
}

// Compute steps on `threads` threads while a loader with `workers` threads runs flat out: both rates, as shares of
// their rates alone.
static dlp_status contend(dlp_probe_ctx *c, const char *model, int size, int batch, int threads, int workers,
                          dlp_contention_point *pt, json_t *arr) {
    const dlp_backend *ops = dlp_backend_find("cpu", NULL);
    const int quick = c->cfg->quick;
    double xl = 0, sl = 0, sp[3] = {0, 0, 0};
    DLP_CHECK(loader_alone(c, size, workers, &xl, &sl));
    probe_plan pp;
    DLP_CHECK(plan_open(ops, NULL, model, size, batch, DLP_DTYPE_F32, threads, c->cfg->seed, &pp));
    step_meas alone, shared;
    // The canary before compute alone, between, and after the shared part: each rate at the speed around it, so a
    // share compares one machine (the loader alone: its own readings).
    sp[0] = dlp_probe_speed(c, 0);
    dlp_status st = measure(c, &pp, 1, quick ? 2 : 3, quick ? 1.0 : 2.0, &alone);
    sp[1] = dlp_probe_speed(c, 0);
    dlp_probe_bg *bg = NULL;
    if (st == DLP_OK) st = dlp_probe_bg_start(c, size, workers, &bg);
    double xl_shared = 0;
    if (st == DLP_OK) {
        int64_t i0 = dlp_probe_bg_images(bg), t0 = dlp_now_ns();
        st = measure(c, &pp, 0, quick ? 2 : 3, quick ? 1.0 : 2.0, &shared);
        double s = dlp_ns_to_s(dlp_now_ns() - t0);
        xl_shared = s > 0 ? (double)(dlp_probe_bg_images(bg) - i0) / s : 0;
    }
    dlp_status st2 = dlp_probe_bg_stop(bg);
    if (st == DLP_OK) st = st2;
    plan_close(&pp);
    DLP_CHECK(st);
    sp[2] = dlp_probe_speed(c, 0);
    double tc = alone.fb_s + alone.upd_s, tcs = shared.fb_s + shared.upd_s;
    // Rates at the shared part's speed: compute alone by its own readings, the loader alone by its own.
    const double s_alone = 0.5 * (sp[0] + sp[1]), s_shared = 0.5 * (sp[1] + sp[2]);
    double kc = s_alone > 0 && s_shared > 0 ? s_shared / s_alone : 1, kl = sl > 0 && s_shared > 0 ? s_shared / sl : 1;
    dlp_probe_contention_shares(kc * batch / tc, batch / tcs, kl * xl, xl_shared, threads, workers, pt);
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "size", json_integer(size));
    json_object_set_new(o, "batch", json_integer(batch));
    json_object_set_new(o, "threads", json_integer(threads));
    json_object_set_new(o, "workers", json_integer(workers));
    json_object_set_new(o, "compute_alone_img_per_s", json_real(batch / tc));
    json_object_set_new(o, "compute_shared_img_per_s", json_real(batch / tcs));
    json_object_set_new(o, "loader_alone_img_per_s", json_real(xl));
    json_object_set_new(o, "loader_shared_img_per_s", json_real(xl_shared));
    json_object_set_new(o, "speed_gflops", json_pack("{s:f, s:f, s:f}", "compute_alone", s_alone, "loader_alone", sl,
                                                     "shared", s_shared));
    json_object_set_new(o, "compute_share", json_real(pt->compute_share));
    json_object_set_new(o, "loader_share", json_real(pt->loader_share));
    json_object_set_new(o, "cores_busy_alone", json_real(alone.cores_busy));
    json_array_append_new(arr, o);
    dlp_probe_say(c, "contention: cpu %s %dpx batch %d on %d thread(s) with %d loader thread(s): compute %.1f -> %.1f "
                  "img/s (%.2f), loader %.0f -> %.0f img/s (%.2f)", model, size, batch, threads, workers, batch / tc,
                  batch / tcs, pt->compute_share, xl, xl_shared, pt->loader_share);
    return DLP_OK;
}

dlp_status dlp_probe_contention(dlp_probe_ctx *c) {
    dlp_device_profile *dev = NULL;
    for (int i = 0; i < c->p->ndevices; i++)
        if (strcmp(c->p->devices[i].name, "cpu") == 0) dev = &c->p->devices[i];
    if (!dev || !c->ds) return DLP_OK;
    char models[8][32], sizes_s[8][32];
    int nm = split_list(c->cfg->models ? c->cfg->models : "resnet18", models, 8);
    int ns = split_list(c->cfg->sizes ? c->cfg->sizes : "64", sizes_s, 8);
    if (nm < 1 || ns < 1) return DLP_ERR(DLP_ERR_INVALID, "probe: no model or size for the contention part");
    json_t *arr = json_array();
    json_object_set_new(c->details, "contention", arr);
    const int T = c->threads;
    int tl[2] = {T, 1}, ntl = c->cfg->quick || T == 1 ? 1 : 2;
    for (int it = 0; it < ntl; it++)
        for (int w = 1; w <= T && dev->ncontention < DLP_DEVICE_MAX_CONTENTION; w++) {
            if (tl[it] == 1 && w > 1 && T > 1) break;  // one compute thread: one loader thread on the free core
            DLP_CHECK(contend(c, models[0], atoi(sizes_s[0]), 16, tl[it], w,
                              &dev->contention[dev->ncontention], arr));
            dev->ncontention++;
        }
    return DLP_OK;
}
