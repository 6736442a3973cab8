// perf/probe_pipeline: the input pipeline's CPU cost per image, fitted from its own stages.
//
// 1. Per sample, one thread, files in memory: the data module's transformer (the code each loader worker runs) over
//    the dataset's files for several output sizes and crop-scale ranges. Each sample's decode and augment times
//    (its CPU time, split as the stage clocks split its wall time, so a preempted sample still counts right) and its
//    work — pixels decoded in the crop window at the chosen DCT scale, bytes entropy-decoded up to the window's last
//    row, pixels resized from, pixels written — give two least-squares fits:
//        decode  = decode_per_image + decode_per_pixel x decoded_px + decode_per_byte x entropy_bytes
//        augment = augment_per_image + augment_per_in_pixel x resize_px + augment_per_out_pixel x out_px
// 2. The loader itself (data bench: worker threads, ring, consumer) on the same files, warm, one thread at several
//    output sizes: its wall time per image beyond the stage times it reports is its own per-sample overhead.
// 3. The loader at 1..N threads (and beyond the cores): scaling efficiency and oversubscription.
// 4. The model's expected work per image (perf/imgwork) against what the samples really did, per configuration.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/bench.h"
#include "data/transform.h"
#include "hw/cpushare.h"
#include "hw/host.h"
#include "perf/datastats.h"
#include "perf/imgwork.h"
#include "perf/probe_fit.h"
#include "perf/probe_impl.h"

typedef struct file_buf {
    uint8_t *data;
    size_t len;
} file_buf;

typedef struct pcfg {
    int size;
    double scale_lo, scale_hi;
} pcfg;

static dlp_status load_files(dlp_probe_ctx *c, int n, file_buf *f, int *nout) {
    char path[4096];
    *nout = 0;
    for (int i = 0; i < n; i++) {
        int64_t idx = n < c->ds->n ? (int64_t)((double)i * c->ds->n / n) : i;  // the loader's subset rule
        dlp_dataset_path(c->ds, idx, path, sizeof path);
        char *d;
        size_t len;
        if (dlp_read_file(path, &d, &len, 64 << 20) != DLP_OK) continue;  // an unreadable file is the loader's business
        f[*nout].data = (uint8_t *)d;
        f[*nout].len = len;
        (*nout)++;
    }
    if (*nout < 8) return DLP_ERR(DLP_ERR_FORMAT, "%s: only %d of %d sampled files could be read", c->data_dir, *nout, n);
    return DLP_OK;
}

static double ceil_scaled(int n, int s) { return (double)((n * s + 7) / 8); }

// Runs one configuration over the files; appends samples. file_stat (optional) gets each file's header facts.
static dlp_status run_config(const pcfg *pc, const file_buf *f, int nf, uint64_t seed, int cfg_index, dlp_pipeline_sample *out,
                             int *nout, dlp_file_stat *fst, int *fst_file, int *nfst, unsigned *scales_seen) {
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    t.out_w = t.out_h = pc->size;
    t.scale_lo = pc->scale_lo;
    t.scale_hi = pc->scale_hi;
    dlp_transformer *x;
    DLP_CHECK(dlp_transformer_create(&t, &x));
    void *dst = malloc(dlp_transform_sample_bytes(&t));
    if (!dst) {
        dlp_transformer_free(x);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    // Like a loader worker, each file is first copied into one reused buffer (the worker's read), untimed here: the
    // decoder then finds it in the cache as it does in the loader, not in memory 600 files away.
    size_t cap = 0;
    for (int i = 0; i < nf; i++)
        if (f[i].len > cap) cap = f[i].len;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) {
        free(dst);
        dlp_transformer_free(x);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < nf; i++) {
        dlp_rng rng;
        dlp_rng_init(&rng, seed, (uint64_t)cfg_index * 1000003ULL + (uint64_t)i);
        dlp_sample_info info;
        memcpy(buf, f[i].data, f[i].len);
        int64_t c0 = dlp_thread_cpu_ns();
        dlp_status st = dlp_transformer_run(x, buf, f[i].len, NULL, &rng, dst, &info);
        int64_t c1 = dlp_thread_cpu_ns();
        if (st != DLP_OK) continue;  // a bad file: the loader skips it too
        double cpu = (double)(c1 - c0) * 1e-9;
        double wall = (double)(info.decode_ns + info.augment_ns);
        if (!(wall > 0) || !(cpu > 0)) continue;
        dlp_pipeline_sample *s = &out[n++];
        s->dec_s = cpu * (double)info.decode_ns / wall;
        s->aug_s = cpu * (double)info.augment_ns / wall;
        const dlp_crop *cr = &info.crop;
        int sc = info.scale_num;
        s->dec_px = (double)info.dec_w * info.dec_h;
        double rows = info.jpeg.progressive ? 1.0 : (double)(cr->y + cr->h) / info.height;
        s->ent_bytes = (double)f[i].len * (rows < 1 ? rows : 1);
        s->rsz_px = ceil_scaled(cr->w, sc) * ceil_scaled(cr->h, sc);
        s->out_px = (double)pc->size * pc->size;
        *scales_seen |= 1u << sc;
        if (fst) {
            fst_file[*nfst] = i;
            dlp_file_stat *e = &fst[(*nfst)++];
            e->w = info.width;
            e->h = info.height;
            e->bytes = (int64_t)f[i].len;
            e->progressive = info.jpeg.progressive;
        }
    }
    free(buf);
    free(dst);
    dlp_transformer_free(x);
    *nout = n;
    return DLP_OK;
}

// The DCT scales the decoder chooses from, asked of the transformer itself: on the file with the largest shorter side,
// for each M = 1..8 a crop that scale M/8 just brings to the output size; the scale it picks is M when M is allowed,
// else the next allowed one above.
static unsigned detect_dct_scales(const file_buf *f, const dlp_file_stat *fst, const int *fst_file, int nfst) {
    int best = -1, side = 0;
    for (int i = 0; i < nfst; i++) {
        int m = fst[i].w < fst[i].h ? fst[i].w : fst[i].h;
        if (m > side) {
            side = m;
            best = fst_file[i];
        }
    }
    if (best < 0 || side < 8) return 0;
    int out = side / 8;
    unsigned mask = 0;
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    t.out_w = t.out_h = out;
    t.flip_p = 0;
    dlp_transformer *x = NULL;
    void *dst = malloc(dlp_transform_sample_bytes(&t));
    if (!dst || dlp_transformer_create(&t, &x) != DLP_OK) {
        free(dst);
        return 0;
    }
    for (int m = 1; m <= 8; m++) {
        dlp_crop cr = {.x = 0, .y = 0, .w = (8 * out + m - 1) / m, .h = (8 * out + m - 1) / m};
        if (cr.w > side) continue;
        dlp_sample_info info;
        if (dlp_transformer_run(x, f[best].data, f[best].len, &cr, NULL, dst, &info) == DLP_OK && info.scale_num >= 1 &&
            info.scale_num <= 8)
            mask |= 1u << info.scale_num;
    }
    dlp_transformer_free(x);
    free(dst);
    return mask;
}

static const char *const k_dec_names[] = {"decode_per_image_s", "decode_per_pixel_s", "decode_per_byte_s"};
static const char *const k_aug_names[] = {"augment_per_image_s", "augment_per_in_pixel_s", "augment_per_out_pixel_s"};

// One data-bench measurement of the loader on the subset, warm.
static dlp_status loader_runs(dlp_probe_ctx *c, int size, const int *workers, int nw, int repeat, int64_t images,
                              dlp_data_bench_run *runs) {
    dlp_data_bench_cfg bc;
    memset(&bc, 0, sizeof bc);
    dlp_loader_cfg_defaults(&bc.loader, c->ds, DLP_XFORM_TRAIN);
    bc.loader.batch = 32;
    bc.loader.transform.out_w = bc.loader.transform.out_h = size;
    bc.loader.seed = c->cfg->seed;
    for (int i = 0; i < nw; i++) bc.workers[i] = workers[i];
    bc.nworkers = nw;
    bc.images = images;
    bc.repeat = repeat;
    return dlp_data_bench(&bc, runs);
}

// One probe_pipeline run's shared state: the files in memory, the per-sample configurations and samples, the fits.
typedef struct pipe_run {
    dlp_probe_ctx *c;
    dlp_pipeline_profile *pp;
    json_t *det;
    const pcfg *cfgs;
    int ncfg;
    file_buf *f;
    int nfiles, nf;                // files sampled, files read
    dlp_file_stat *fst;
    int *fst_file, nfst;
    dlp_pipeline_sample *smp;
    int *cfg_n, ns;                // samples per configuration, in all
    dlp_lsq_fit fd, fa;            // the decode and augment fits
    dlp_dataset_stats stats;       // the files' statistics, for perf/imgwork's expected work
} pipe_run;

// The fitted stages' CPU time for one image of the expected work iw (without the loader's own cost scale).
static double stages_cost_s(const dlp_pipeline_profile *pp, const dlp_image_work *iw) {
    return pp->read_per_file_s + pp->read_per_byte_s * iw->bytes + pp->decode_per_image_s +
           pp->decode_per_pixel_s * iw->decoded_pixels + pp->decode_per_byte_s * iw->entropy_bytes +
           pp->augment_per_image_s + pp->augment_per_in_pixel_s * iw->resize_pixels +
           pp->augment_per_out_pixel_s * iw->out_pixels;
}

// perf/imgwork's expected work per image of the files at output size `size` (the default crop scales).
static dlp_status expected_work(const pipe_run *r, int size, dlp_image_work *iw) {
    dlp_img_transform tf;
    dlp_img_transform_init(&tf, 1, size);
    return dlp_image_work_expect(&r->stats, r->pp, &tf, r->c->cfg->seed, 0, iw);
}

// 1. Per-sample stage costs: every configuration over the files, the DCT scales, the two fits, the files' statistics.
static dlp_status pipe_stage_fits(pipe_run *r) {
    dlp_probe_ctx *c = r->c;
    dlp_probe_say(c, "pipeline: per-sample decode and augment costs, %d files x %d crop configurations, 1 thread", r->nf,
                  r->ncfg);
    unsigned seen = 0;
    for (int k = 0; k < r->ncfg; k++) {
        int got = 0;
        DLP_CHECK(run_config(&r->cfgs[k], r->f, r->nf, c->cfg->seed, k, r->smp + r->ns, &got, k == 0 ? r->fst : NULL,
                             r->fst_file, &r->nfst, &seen));
        r->cfg_n[k] = got;
        r->ns += got;
    }
    if (r->ns < 16) return DLP_ERR(DLP_ERR_FORMAT, "%s: only %d usable samples for the pipeline fit", c->data_dir, r->ns);
    // The DCT scales the decoder chooses from (the model picks among the same, smallest first).
    r->pp->dct_scale_mask = detect_dct_scales(r->f, r->fst, r->fst_file, r->nfst);
    if (!r->pp->dct_scale_mask) r->pp->dct_scale_mask = seen & 0x1FEu;  // no file large enough: those seen
    json_object_set_new(r->det, "dct_scale_mask", json_integer(r->pp->dct_scale_mask));
    DLP_CHECK(dlp_probe_fit_pipeline(r->smp, r->ns, r->pp, &r->fd, &r->fa));
    json_object_set_new(r->det, "decode_fit", dlp_probe_fit_json(&r->fd, k_dec_names));
    json_object_set_new(r->det, "augment_fit", dlp_probe_fit_json(&r->fa, k_aug_names));
    return dlp_dataset_stats_from_files(r->fst, r->nfst, c->ds->n, c->data_dir, &r->stats);
}

// How much one image's cost varies (crop, source size, file): CV of decode + augment at 224 px, 8-100 % crops.
static void pipe_cost_cv(pipe_run *r) {
    int o0 = 0, kk = -1;
    for (int k = 0; k < r->ncfg && kk < 0; k++) {
        if (r->cfgs[k].size == 224 && r->cfgs[k].scale_lo < 0.1) kk = k;
        else o0 += r->cfg_n[k];
    }
    if (kk < 0 || r->cfg_n[kk] <= 2) return;
    const dlp_pipeline_sample *smp = r->smp;
    double m = 0, v = 0;
    for (int i = o0; i < o0 + r->cfg_n[kk]; i++) m += smp[i].dec_s + smp[i].aug_s;
    m /= r->cfg_n[kk];
    for (int i = o0; i < o0 + r->cfg_n[kk]; i++) {
        double d = smp[i].dec_s + smp[i].aug_s - m;
        v += d * d;
    }
    r->pp->cost_cv = m > 0 ? sqrt(v / (r->cfg_n[kk] - 1)) / m : 0;
    json_object_set_new(r->det, "cost_cv_224", json_real(r->pp->cost_cv));
}

// Per configuration: measured means, the fit's prediction on the measured work, and the model's expected work
// (perf/imgwork on the files' statistics) against the work the samples really did.
static dlp_status pipe_config_means(pipe_run *r) {
    const dlp_lsq_fit *fd = &r->fd, *fa = &r->fa;
    json_t *per = json_array();
    json_object_set_new(r->det, "configs", per);
    double ape_fit = 0, ape_work = 0;
    int off = 0;
    for (int k = 0; k < r->ncfg; k++) {
        const pcfg *pc = &r->cfgs[k];
        double m_dec = 0, m_aug = 0, w_dec = 0, w_ent = 0, w_rsz = 0;
        for (int i = off; i < off + r->cfg_n[k]; i++) {
            m_dec += r->smp[i].dec_s;
            m_aug += r->smp[i].aug_s;
            w_dec += r->smp[i].dec_px;
            w_ent += r->smp[i].ent_bytes;
            w_rsz += r->smp[i].rsz_px;
        }
        double n = r->cfg_n[k] > 0 ? r->cfg_n[k] : 1;
        m_dec /= n, m_aug /= n, w_dec /= n, w_ent /= n, w_rsz /= n;
        off += r->cfg_n[k];
        double out_px = (double)pc->size * pc->size;
        double p_dec = fd->coef[0] + fd->coef[1] * w_dec + fd->coef[2] * w_ent;
        double p_aug = fa->coef[0] + fa->coef[1] * w_rsz + fa->coef[2] * out_px;
        dlp_img_transform tf;
        dlp_img_transform_init(&tf, 1, pc->size);
        tf.scale_min = pc->scale_lo;
        tf.scale_max = pc->scale_hi;
        dlp_image_work iw;
        DLP_CHECK(dlp_image_work_expect(&r->stats, r->pp, &tf, r->c->cfg->seed, 0, &iw));
        double e_dec = fd->coef[0] + fd->coef[1] * iw.decoded_pixels + fd->coef[2] * iw.entropy_bytes;
        double e_aug = fa->coef[0] + fa->coef[1] * iw.resize_pixels + fa->coef[2] * iw.out_pixels;
        ape_fit += fabs((p_dec + p_aug) / (m_dec + m_aug) - 1);
        ape_work += fabs((e_dec + e_aug) / (m_dec + m_aug) - 1);
        json_t *o = json_object();
        json_object_set_new(o, "size", json_integer(pc->size));
        json_object_set_new(o, "scale", json_pack("[ff]", pc->scale_lo, pc->scale_hi));
        json_object_set_new(o, "samples", json_integer(r->cfg_n[k]));
        json_object_set_new(o, "decode_ms", json_real(m_dec * 1e3));
        json_object_set_new(o, "augment_ms", json_real(m_aug * 1e3));
        json_object_set_new(o, "fit_ms", json_real((p_dec + p_aug) * 1e3));
        json_object_set_new(o, "model_ms", json_real((e_dec + e_aug) * 1e3));
        json_object_set_new(o, "decoded_px", json_real(w_dec));
        json_object_set_new(o, "model_decoded_px", json_real(iw.decoded_pixels));
        json_object_set_new(o, "entropy_bytes", json_real(w_ent));
        json_object_set_new(o, "model_entropy_bytes", json_real(iw.entropy_bytes));
        json_object_set_new(o, "resize_px", json_real(w_rsz));
        json_object_set_new(o, "model_resize_px", json_real(iw.resize_pixels));
        json_array_append_new(per, o);
    }
    json_object_set_new(r->det, "fit_mape_of_config_means", json_real(ape_fit / r->ncfg));
    pipe_cost_cv(r);
    json_object_set_new(r->det, "model_work_mape_of_config_means", json_real(ape_work / r->ncfg));
    dlp_probe_say(r->c, "pipeline: decode %.3f ms + %.2f ns/px + %.2f ns/B (rms %.3f ms), augment %.3f ms + %.2f ns/px "
                  "in + %.2f ns/px out (rms %.3f ms); config means within %.1f%% (fit), %.1f%% (expected work)",
                  fd->coef[0] * 1e3, fd->coef[1] * 1e9, fd->coef[2] * 1e9, fd->rms * 1e3, fa->coef[0] * 1e3,
                  fa->coef[1] * 1e9, fa->coef[2] * 1e9, fa->rms * 1e3, 100 * ape_fit / r->ncfg, 100 * ape_work / r->ncfg);
    return DLP_OK;
}

// 2. The loader itself, 1 thread, warm: its wall time per image against the fits. The loader's own CPU time per
// image (the worker's and the consumer's) over the model's cost for the same files (the fits on the expected work
// of perf/imgwork), median over output sizes: loader_cost_scale. It carries what the transformer alone on one
// buffer does not have (claiming samples, accounting, writing each sample into its batch slot), or the other way
// round.
static dlp_status pipe_loader_one_thread(pipe_run *r) {
    const int quick = r->c->cfg->quick;
    dlp_pipeline_profile *pp = r->pp;
    static const int k_sizes_full[] = {64, 128, 224}, k_sizes_quick[] = {64, 224};
    const int *osz = quick ? k_sizes_quick : k_sizes_full;
    const int nosz = quick ? 2 : 3;
    const int repeat = quick ? 1 : 3;
    double ratio[8];
    json_t *la = json_array();
    json_object_set_new(r->det, "loader_one_thread", la);
    for (int k = 0; k < nosz; k++) {
        dlp_data_bench_run b;
        int one = 1;
        DLP_CHECK(loader_runs(r->c, osz[k], &one, 1, repeat, r->nf, &b));
        double n = b.images > 0 ? (double)b.images : 1;
        double stages = (double)(b.stats.read_ns + b.stats.decode_ns + b.stats.augment_ns) * 1e-9 / n;
        double wall = b.seconds / n;
        dlp_image_work iw;
        DLP_CHECK(expected_work(r, osz[k], &iw));
        double cm = stages_cost_s(pp, &iw);
        // CPU time, not wall time: a loaded machine's preemptions are not the loader's cost.
        ratio[k] = cm > 0 ? b.cpu_seconds / n / cm : 1;
        json_t *o = json_object();
        json_object_set_new(o, "size", json_integer(osz[k]));
        json_object_set_new(o, "img_per_s", json_real(b.img_per_s));
        json_object_set_new(o, "wall_ms_per_image", json_real(wall * 1e3));
        json_object_set_new(o, "read_ms", json_real((double)b.stats.read_ns * 1e-6 / n));
        json_object_set_new(o, "decode_ms", json_real((double)b.stats.decode_ns * 1e-6 / n));
        json_object_set_new(o, "augment_ms", json_real((double)b.stats.augment_ns * 1e-6 / n));
        json_object_set_new(o, "beyond_stage_times_ms", json_real((wall - stages) * 1e3));
        json_object_set_new(o, "model_stage_ms", json_real(cm * 1e3));
        json_object_set_new(o, "cpu_over_model", json_real(ratio[k]));
        json_object_set_new(o, "cpu_ms_per_image", json_real(b.cpu_seconds * 1e3 / n));
        json_array_append_new(la, o);
    }
    double o_med = dlp_stats_median_f64(ratio, nosz);
    pp->loader_cost_scale = o_med < 0.25 ? 0.25 : o_med > 4 ? 4 : o_med;
    dlp_probe_say(r->c, "pipeline: the loader's CPU time per image is %.3f x the fitted stages' (1 thread, median over "
                  "%d output sizes)", pp->loader_cost_scale, nosz);
    return DLP_OK;
}

// One loader row of the scaling part: `passes` warm passes at `workers` threads, each under its own CPU-share meter,
// the canary before the first and after each. Where the loader's threads were busy (every worker ready to run nearly
// all the time: the data bench has no device to wait for), its rate is normalised by its own CPU seconds per image:
// at the share S its threads would get, min(workers, cores) x S / (CPU s per image) — what time-sharing with other
// processes does not move (the pass's rate over its share also carries how many of its threads were ready, which
// a loaded machine moves). Otherwise by the share. rep_spread: the passes' normalised values' spread about their
// median (dlp_probe_repeat_spread: the middle three of five).
typedef struct loader_row {
    dlp_data_bench_run run;  // the median pass (by normalised value)
    double rate_per_share;   // normalised: img/s at share 1 (multiply by a share)
    double share;            // median of the passes' CPU shares
    double speed, speed_spread, other_cores, rep_spread, busy;
    double work;             // the loader's work speed around the passes (dlp_probe_decode_work; 0: not read)
    int passes, by_cpu;
    double pass_value[16], pass_share[16], pass_cpi[16], pass_rate[16];  // each pass: normalised, share, CPU s/img, img/s
} loader_row;

static dlp_status loader_row_measure(dlp_probe_ctx *c, int workers, int passes, int T, loader_row *lr) {
    memset(lr, 0, sizeof *lr);
    double spd[17], v[16], sh[16], busy[16], other[16];
    dlp_data_bench_run runs[16];
    if (passes < 1) passes = 1;
    if (passes > 16) passes = 16;
    spd[0] = dlp_probe_speed(c, workers);
    const double par = workers < T ? workers : T;
    double wk[17];
    wk[0] = dlp_probe_decode_work(c, (int)par);
    for (int p = 0; p < passes; p++) {
        dlp_data_bench_cfg bc;
        memset(&bc, 0, sizeof bc);
        dlp_loader_cfg_defaults(&bc.loader, c->ds, DLP_XFORM_TRAIN);
        bc.loader.batch = 32;
        bc.loader.transform.out_w = bc.loader.transform.out_h = 224;
        bc.loader.seed = c->cfg->seed;
        bc.workers[0] = workers;
        bc.nworkers = 1;
        bc.images = c->nsubset;
        bc.repeat = 1;
        dlp_load_meter lm;
        dlp_load_meter_start(&lm);
        dlp_cpushare *meter = dlp_cpushare_start(0);
        dlp_cpushare_sample s;
        dlp_status st = dlp_data_bench(&bc, &runs[p]);
        dlp_cpushare_stop(meter, &s);
        DLP_CHECK(st);
        other[p] = dlp_load_meter_cores(&lm);
        spd[p + 1] = dlp_probe_speed(c, workers);
        wk[p + 1] = dlp_probe_decode_work(c, (int)par);
        const double n = runs[p].images > 0 ? (double)runs[p].images : 1, cpi = runs[p].cpu_seconds / n;
        lr->pass_cpi[p] = runs[p].images > 0 ? cpi : 0;
        sh[p] = s.share;
        // how many of the cores it could use its threads wanted: (CPU + run-queue wait) over wall, of min(workers, cores)
        busy[p] = s.wall_s > 0 ? s.runnable / par : 0;
        v[p] = cpi > 0 ? par / cpi : 0;
    }
    double bmed = dlp_stats_median_f64(busy, (size_t)passes), smed = dlp_stats_median_f64(sh, (size_t)passes);
    // CPU-bound: its threads were ready to run at least 60% of the time (a 0.4 s pass at two threads on a quiet
    // machine shows 0.88: the start and the last batch keep one thread idle a while)
    lr->by_cpu = bmed >= 0.6;
    for (int p = 0; p < passes; p++)
        if (!lr->by_cpu) v[p] = sh[p] > 0 ? runs[p].steady_img_per_s / sh[p] : 0;
    double vm = dlp_stats_median_f64(v, (size_t)passes);
    int mi = 0;
    for (int p = 0; p < passes; p++)
        if (fabs(v[p] - vm) < fabs(v[mi] - vm)) mi = p;
    lr->run = runs[mi];
    lr->rate_per_share = vm;
    lr->share = smed;
    lr->busy = bmed;
    lr->passes = passes;
    lr->speed = dlp_probe_speed_mean(spd, passes + 1);
    lr->work = dlp_probe_work_median(wk, passes + 1);
    lr->speed_spread = dlp_probe_speed_spread(spd, passes + 1);
    lr->other_cores = dlp_stats_median_f64(other, (size_t)passes);
    lr->rep_spread = passes > 1 ? dlp_probe_repeat_spread(v, passes) : 0;
    for (int p = 0; p < passes; p++) {
        lr->pass_value[p] = v[p];
        lr->pass_share[p] = sh[p];
        lr->pass_rate[p] = runs[p].steady_img_per_s;
    }
    return DLP_OK;
}

// 3. Scaling over threads (224 px, warm), and the loader's rate at 1 thread against the model's.
static dlp_status pipe_loader_scaling(pipe_run *r) {
    dlp_probe_ctx *c = r->c;
    dlp_pipeline_profile *pp = r->pp;
    int wl[DLP_DATA_BENCH_MAX_RUNS], nw = 0;
    const int T = c->threads;
    for (int k = 1; k <= T && nw < DLP_DATA_BENCH_MAX_RUNS - 2; k++) wl[nw++] = k;
    wl[nw++] = T + 1;
    if (2 * T > T + 1) wl[nw++] = 2 * T;
    // 5 passes per thread count (a pass lasts about half a second at two threads on a quiet machine): every
    // pipeline-bound prediction with that many threads rests on these rates, and the passes' agreement after
    // normalisation is the row's stability check (a row whose passes disagree beyond the band is named).
    const int repeat_scaling = c->cfg->quick ? 1 : 5;
    dlp_probe_say(c, "pipeline: loader scaling at 1..%d threads (224 px, %d images, median of %d passes)", wl[nw - 1],
                  r->nf, repeat_scaling);
    dlp_data_bench_run runs[DLP_DATA_BENCH_MAX_RUNS];
    double others[DLP_DATA_BENCH_MAX_RUNS], speeds[DLP_DATA_BENCH_MAX_RUNS], spreads[DLP_DATA_BENCH_MAX_RUNS],
        shares[DLP_DATA_BENCH_MAX_RUNS];
    loader_row lrs[DLP_DATA_BENCH_MAX_RUNS];
    for (int i = 0; i < nw; i++) {
        DLP_CHECK(loader_row_measure(c, wl[i], repeat_scaling, T, &lrs[i]));
        runs[i] = lrs[i].run;
        others[i] = lrs[i].other_cores;
        speeds[i] = lrs[i].speed;
        spreads[i] = lrs[i].speed_spread;
        shares[i] = lrs[i].share;
    }
    json_t *sa = json_array();
    json_object_set_new(r->det, "loader_scaling", sa);
    // Steady rates (the start of each pass left out): what a training run's loader keeps up once it runs.
    const double x1 = runs[0].steady_img_per_s;
    double rates[DLP_DATA_BENCH_MAX_RUNS];
    for (int i = 0; i < nw; i++) {
        rates[i] = runs[i].steady_img_per_s;
        json_t *o = json_object();
        json_object_set_new(o, "workers", json_integer(wl[i]));
        json_object_set_new(o, "img_per_s", json_real(runs[i].steady_img_per_s));
        json_object_set_new(o, "whole_pass_img_per_s", json_real(runs[i].img_per_s));
        json_object_set_new(o, "efficiency", json_real(x1 > 0 ? runs[i].steady_img_per_s / (wl[i] * x1) : 0));
        json_object_set_new(o, "cpu_ms_per_image",
                            json_real(runs[i].images > 0 ? runs[i].cpu_seconds * 1e3 / (double)runs[i].images : 0));
        json_object_set_new(o, "other_cores", json_real(isfinite(others[i]) ? others[i] : -1));
        json_object_set_new(o, "speed_gflops", json_real(speeds[i]));
        json_object_set_new(o, "speed_spread", json_real(isfinite(spreads[i]) ? spreads[i] : -1));
        json_object_set_new(o, "cpu_share", json_real(shares[i]));
        json_object_set_new(o, "passes", json_integer(lrs[i].passes));
        json_object_set_new(o, "busy", json_real(lrs[i].busy));
        json_object_set_new(o, "basis", json_string(lrs[i].by_cpu ? "cpu_per_image" : "cpu_share"));
        json_object_set_new(o, "img_per_s_at_share1", json_real(lrs[i].rate_per_share));
        json_object_set_new(o, "work_img_per_cpu_s", json_real(lrs[i].work));
        json_object_set_new(o, "repeat_spread", json_real(lrs[i].rep_spread));
        json_t *pa = json_array();
        for (int p = 0; p < lrs[i].passes; p++)
            json_array_append_new(pa, json_pack("{s:f, s:f, s:f, s:f}", "img_per_s", lrs[i].pass_rate[p], "cpu_share",
                                                lrs[i].pass_share[p], "cpu_ms_per_image", 1e3 * lrs[i].pass_cpi[p],
                                                "img_per_s_at_share1", lrs[i].pass_value[p]));
        json_object_set_new(o, "pass", pa);
        json_array_append_new(sa, o);
    }
    // Every rate at one speed per class (one thread: its first run's; more: the first multi-thread run's), so the
    // efficiencies and the oversubscription compare one machine; the efficiencies are normalised to the reference
    // speed at the end of the probe. By the CPU share the loader's threads got where every run measured it (a
    // time-shared machine), else by the canary around each run.
    int by_share = 1;
    for (int i = 0; i < nw; i++) by_share &= shares[i] > 0;
    const double *basis = by_share ? shares : speeds;
    double sref[2] = {basis[0], nw > 1 ? basis[1] : basis[0]};
    for (int i = 0; i < nw; i++) {
        const double sc = sref[wl[i] > 1];
        if (by_share && sc > 0) rates[i] = lrs[i].rate_per_share * sc;  // by its CPU per image (or share): at sc
        else if (sc > 0 && basis[i] > 0) rates[i] *= sc / basis[i];
        // and at the loader's work speed the CPU costs were measured at (the efficiencies are relative to them)
        if (c->pipe_work > 0 && lrs[i].work > 0) rates[i] *= c->pipe_work / lrs[i].work;
    }
    // The model's CPU cost per image for these runs (224 px, the subset's files): efficiencies relative to it, so
    // that the model gives back the loader's measured rates.
    dlp_image_work iw;
    DLP_CHECK(expected_work(r, 224, &iw));
    double c224 = pp->loader_cost_scale * stages_cost_s(pp, &iw);
    dlp_probe_scaling(wl, rates, nw, c->p->host.cores, c224, pp);
    for (int k = 0; k < pp->nscaling; k++)
        for (int i = 0; i < nw; i++)
            if (wl[i] == pp->scaling[k].threads) {
                dlp_probe_norm_add(c, &pp->scaling[k].efficiency, 1, by_share ? speeds[wl[i] > 1] : sref[wl[i] > 1],
                                   by_share ? sref[wl[i] > 1] : 0, wl[i] == 1 ? 1 : 0,
                                   isfinite(spreads[i]) ? spreads[i] : 1, 1, &pp->scaling[k].speed_rel,
                                   "loader %d thread(s) 224px", wl[i]);
                dlp_probe_norm_repeats(c, lrs[i].rep_spread, lrs[i].passes);
                break;
            }
    // Rows beyond the cores (the oversubscription term): not a normalised value of their own, but checked alike
    for (int i = 0; i < nw; i++)
        if (wl[i] > T && speeds[i] > 0) {
            dlp_probe_norm_add(c, NULL, 1, speeds[i], 0, wl[i], isfinite(spreads[i]) ? spreads[i] : 1, 1, NULL,
                               "loader %d thread(s) 224px", wl[i]);
            dlp_probe_norm_repeats(c, lrs[i].rep_spread, lrs[i].passes);
        }
    dlp_probe_say(c, "pipeline: %.0f img/s on 1 thread (efficiency %.2f of its CPU cost), %.2f at %d threads, "
                  "oversubscription adds %.2f core per thread", x1, dlp_pipeline_efficiency(pp, 1),
                  dlp_pipeline_efficiency(pp, c->p->host.cores), c->p->host.cores, pp->oversub_efficiency);
    // The loader's wall time per image at 1 thread against the model's c (the fits + overhead) for the same files.
    DLP_CHECK(expected_work(r, 224, &iw));
    double cpred = stages_cost_s(pp, &iw);
    cpred *= pp->loader_cost_scale;
    json_object_set_new(r->det, "model_img_per_s_1thread_224", json_real(1 / cpred));
    json_object_set_new(r->det, "loader_img_per_s_1thread_224", json_real(x1));
    return DLP_OK;
}

dlp_status dlp_probe_pipeline(dlp_probe_ctx *c) {
    const int quick = c->cfg->quick;
    pipe_run r = {.c = c, .pp = &c->p->pipeline, .det = json_object()};
    json_object_set_new(c->details, "pipeline", r.det);
    snprintf(r.pp->name, sizeof r.pp->name, "dlperf");
    r.pp->dct_scaling = 1;
    r.pp->crop_window = 1;
    static const pcfg k_full[] = {{64, 0.08, 1}, {96, 0.08, 1}, {128, 0.08, 1}, {160, 0.08, 1}, {224, 0.08, 1},
                                  {288, 0.08, 1}, {64, 0.5, 1},  {128, 0.5, 1},  {224, 0.5, 1},  {224, 1, 1}};
    static const pcfg k_quick[] = {{64, 0.08, 1}, {128, 0.08, 1}, {224, 0.08, 1}, {224, 0.5, 1}};
    r.cfgs = quick ? k_quick : k_full;
    r.ncfg = quick ? (int)(sizeof k_quick / sizeof k_quick[0]) : (int)(sizeof k_full / sizeof k_full[0]);
    r.nfiles = c->nsubset;
    r.f = calloc((size_t)r.nfiles, sizeof *r.f);
    r.fst = calloc((size_t)r.nfiles, sizeof *r.fst);
    r.fst_file = calloc((size_t)r.nfiles, sizeof *r.fst_file);
    r.smp = calloc((size_t)r.nfiles * (size_t)r.ncfg, sizeof *r.smp);
    r.cfg_n = calloc((size_t)r.ncfg, sizeof *r.cfg_n);
    dlp_status st = DLP_OK;
    if (!r.f || !r.fst || !r.fst_file || !r.smp || !r.cfg_n) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (st == DLP_OK) st = load_files(c, r.nfiles, r.f, &r.nf);
    // The loader's work speed before, between and after the parts that measure the CPU costs (one thread, as they
    // run): the speed those costs hold at (normalised to the probe's reference at its end, probe_speed.c)
    double pw[3] = {0};
    if (st == DLP_OK) pw[0] = dlp_probe_decode_work(c, 1);
    if (st == DLP_OK) st = pipe_stage_fits(&r);
    if (st == DLP_OK) st = pipe_config_means(&r);
    if (st == DLP_OK) pw[1] = dlp_probe_decode_work(c, 1);
    if (st == DLP_OK) st = pipe_loader_one_thread(&r);
    if (st == DLP_OK) pw[2] = dlp_probe_decode_work(c, 1);
    c->pipe_work = dlp_probe_work_median(pw, 3);
    if (st == DLP_OK) st = pipe_loader_scaling(&r);
    for (int i = 0; r.f && i < r.nfiles; i++) free(r.f[i].data);
    free(r.f);
    free(r.fst);
    free(r.fst_file);
    free(r.smp);
    free(r.cfg_n);
    return st;
}
