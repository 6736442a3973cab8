// data/bench: loader throughput measurements.
#include "data/bench.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/stats.h"
#include "core/clock.h"
#include "core/fields.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/jpeg_encode.h"
#include "data/synth.h"
#include "data/transform.h"

// Reads the files once so a warm run measures the pipeline, not the disk.
static void warm_files(const dlp_dataset *ds, int64_t n_used) {
    char path[4096];
    char *buf = malloc(1 << 16);
    if (!buf) return;
    for (int64_t i = 0; i < n_used; i++) {
        int64_t idx = n_used < ds->n ? (int64_t)((double)i * ds->n / n_used) : i;
        dlp_dataset_path(ds, idx, path, sizeof path);
        (void)dlp_warm_file(path, buf, 1 << 16);  // regular files only: a list naming /dev/zero must not hang
    }
    free(buf);
}

// One timed pass. *steady: images/s from the first batch's delivery to the last's (the first batch's images left
// out): the rate without the start (threads, decoder handles, first touches of the batch slots, the first batch's
// latency), which is what a long run sees.
static dlp_status measure(const dlp_data_bench_cfg *cfg, int workers, double *secs, double *cpu, dlp_loader_stats *st,
                          int64_t *images, double *steady) {
    dlp_loader_cfg lc = cfg->loader;
    lc.workers = workers;
    if (cfg->images > 0) lc.limit_samples = cfg->images;
    lc.drop_last = 0;
    lc.no_lookahead = 1;  // one pass, timed: no work on a next epoch counted in it
    dlp_loader *l;
    DLP_CHECK(dlp_loader_create(&lc, &l));
    int64_t c0 = dlp_cpu_ns(), t0 = dlp_now_ns();
    dlp_status s = dlp_loader_start_epoch(l, lc.epoch);
    dlp_batch *b;
    int64_t t_first = 0, n_after = 0;
    while (s == DLP_OK && (s = dlp_loader_next(l, &b)) == DLP_OK && b) {
        if (!t_first) t_first = dlp_now_ns();
        else n_after += b->n;
        dlp_loader_release(l, b);
    }
    int64_t t1 = dlp_now_ns(), c1 = dlp_cpu_ns();
    *steady = t_first && n_after > 0 && t1 > t_first ? (double)n_after / dlp_ns_to_s(t1 - t_first) : 0;
    dlp_loader_get_stats(l, st);
    dlp_loader_free(l);
    DLP_CHECK(s);
    *secs = dlp_ns_to_s(t1 - t0);
    *cpu = dlp_ns_to_s(c1 - c0);
    *images = st->images;
    return DLP_OK;
}

dlp_status dlp_data_bench(const dlp_data_bench_cfg *cfg, dlp_data_bench_run *runs) {
    if (cfg->nworkers < 1 || cfg->nworkers > DLP_DATA_BENCH_MAX_RUNS)
        return DLP_ERR(DLP_ERR_INVALID, "give 1..%d worker counts", DLP_DATA_BENCH_MAX_RUNS);
    const dlp_dataset *ds = cfg->loader.dataset;
    int64_t n_used = cfg->images > 0 && cfg->images < ds->n ? cfg->images : ds->n;
    if (!cfg->loader.drop_cache) {
        int64_t t0 = dlp_now_ns();
        warm_files(ds, n_used);
        DLP_INFO("read %lld files once to warm the page cache (%.1f s)", (long long)n_used, dlp_ns_to_s(dlp_now_ns() - t0));
    }
    int repeat = cfg->repeat > 0 ? cfg->repeat : 1;
    for (int k = 0; k < cfg->nworkers; k++) {
        double secs[64], cpus[64], steady[64];
        dlp_loader_stats stats[64];
        int64_t imgs[64];
        if (repeat > 64) repeat = 64;
        for (int r = 0; r < repeat; r++)
            DLP_CHECK(measure(cfg, cfg->workers[k], &secs[r], &cpus[r], &stats[r], &imgs[r], &steady[r]));
        double sorted[64];
        memcpy(sorted, secs, sizeof(double) * (size_t)repeat);
        dlp_stats_sort_f64(sorted, (size_t)repeat);
        double med = sorted[repeat / 2];
        int mi = 0;
        for (int r = 0; r < repeat; r++)
            if (secs[r] == med) mi = r;
        dlp_data_bench_run *o = &runs[k];
        memset(o, 0, sizeof *o);
        o->workers = cfg->workers[k];
        o->images = imgs[mi];
        o->seconds = med;
        o->cpu_seconds = cpus[mi];
        o->stats = stats[mi];
        o->img_per_s = med > 0 ? (double)imgs[mi] / med : 0;
        double ss[64];  // the median steady rate over the repeats (0 where a pass had one batch only)
        memcpy(ss, steady, sizeof(double) * (size_t)repeat);
        dlp_stats_sort_f64(ss, (size_t)repeat);
        o->steady_img_per_s = ss[repeat / 2] > 0 ? ss[repeat / 2] : o->img_per_s;
        o->mb_per_s = med > 0 ? (double)stats[mi].bytes_read / 1e6 / med : 0;
    }
    return DLP_OK;
}

static json_t *loader_write(const void *rec) {
    return dlp_loader_stats_to_json(&((const dlp_data_bench_run *)rec)->stats);
}

#define RUN_I(m) {DLP_FIELD(dlp_data_bench_run, m, DLP_FT_INT, 0)}
#define RUN_N(m) {DLP_FIELD(dlp_data_bench_run, m, DLP_FT_NUM, 0)}
static const dlp_field_def k_run_fields[] = {
    RUN_I(workers),          RUN_I(images),   RUN_N(seconds),     RUN_N(img_per_s),
    RUN_N(steady_img_per_s), RUN_N(mb_per_s), RUN_N(cpu_seconds), {DLP_FIELD_CB("loader", NULL, loader_write)},
    {0}};

json_t *dlp_data_bench_run_to_json(const dlp_data_bench_run *r) {
    return dlp_fields_to_json(k_run_fields, r);
}

// --- the loader's work speed -----------------------------------------------------------------------------------

static uint8_t *g_speed_jpg;
static size_t g_speed_len;
static pthread_once_t g_speed_once = PTHREAD_ONCE_INIT;

static void speed_jpeg_make(void) {
    dlp_synth_params sp;
    dlp_synth_defaults(&sp);
    sp.size_min = sp.size_max = 375;
    sp.seed = 35;
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    if (dlp_synth_render(&sp, 0, 3, 7, &rgb, &w, &h) == DLP_OK) {
        dlp_jpeg_enc_opts o;
        dlp_jpeg_enc_defaults(&o);
        if (dlp_jpeg_encode(rgb, w, h, &o, &g_speed_jpg, &g_speed_len) != DLP_OK) g_speed_jpg = NULL, g_speed_len = 0;
    }
    free(rgb);
    dlp_err_clear();
}

// As the convolution's work speed (backend/cpu/cpu_peak.c): the reading cut into DECODE_PARTS stretches of wall time,
// the median stretch taken, so a moment when the cores ran at half speed does not make the reading.
#define DECODE_PARTS 5

typedef struct decode_arg {
    int64_t start_ns, end_ns;
    int64_t images[DECODE_PARTS], cpu_ns[DECODE_PARTS], wall_ns;
    dlp_status st;
} decode_arg;

static void *decode_thread(void *p) {
    decode_arg *a = p;
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    dlp_transformer *x = NULL;
    void *dst = malloc(dlp_transform_sample_bytes(&t));
    uint8_t *buf = malloc(g_speed_len);
    a->st = !dst || !buf ? DLP_ERR(DLP_ERR_NOMEM, "out of memory") : dlp_transformer_create(&t, &x);
    dlp_rng rng;
    dlp_rng_init(&rng, 35, 0);
    const int64_t w0 = dlp_now_ns();
    int64_t c0 = dlp_thread_cpu_ns(), now = w0;
    for (int n = 0; a->st == DLP_OK && (n < 2 || now < a->end_ns); n++) {
        memcpy(buf, g_speed_jpg, g_speed_len);  // as a loader worker reads each file into its buffer
        dlp_sample_info info;
        a->st = dlp_transformer_run(x, buf, g_speed_len, NULL, &rng, dst, &info);
        now = dlp_now_ns();
        const int64_t c1 = dlp_thread_cpu_ns();
        int part = (int)((now - a->start_ns) * DECODE_PARTS / (a->end_ns - a->start_ns));
        part = part < 0 ? 0 : part >= DECODE_PARTS ? DECODE_PARTS - 1 : part;
        a->images[part]++;
        a->cpu_ns[part] += c1 - c0;
        c0 = c1;
    }
    a->wall_ns = now - w0;
    dlp_transformer_free(x);
    free(buf);
    free(dst);
    return NULL;
}

dlp_status dlp_data_decode_speed(int threads, double seconds, double *img_per_cpu_s, double *share) {
    *img_per_cpu_s = 0;
    if (share) *share = 0;
    pthread_once(&g_speed_once, speed_jpeg_make);
    if (!g_speed_jpg) return DLP_ERR(DLP_ERR_INTERNAL, "the loader's work speed: its test image could not be made");
    if (threads <= 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    decode_arg a[64];
    pthread_t t[64];
    const int64_t start = dlp_now_ns() + 5000000, end = start + (int64_t)(seconds * 1e9);  // after the set-up
    int started = 0;
    for (int i = 0; i < threads; i++) {
        a[i] = (decode_arg){.start_ns = start, .end_ns = end, .st = DLP_OK};
        if (pthread_create(&t[i], NULL, decode_thread, &a[i]) != 0) break;
        started++;
    }
    dlp_status st = started ? DLP_OK : DLP_ERR(DLP_ERR_IO, "the loader's work speed: no thread could start");
    double imgs[DECODE_PARTS] = {0}, cpu[DECODE_PARTS] = {0}, cpu_all = 0, wall = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        if (a[i].st != DLP_OK && st == DLP_OK) st = a[i].st;
        for (int k = 0; k < DECODE_PARTS; k++) {
            imgs[k] += (double)a[i].images[k];
            cpu[k] += (double)a[i].cpu_ns[k] * 1e-9;
            cpu_all += (double)a[i].cpu_ns[k] * 1e-9;
        }
        wall += (double)a[i].wall_ns * 1e-9;
    }
    double rate[DECODE_PARTS];
    int n = 0;
    for (int k = 0; k < DECODE_PARTS; k++)
        if (cpu[k] > 0) rate[n++] = imgs[k] / cpu[k];
    if (st == DLP_OK && n) *img_per_cpu_s = dlp_stats_median_f64(rate, (size_t)n);
    if (st == DLP_OK && share && wall > 0) *share = cpu_all / wall;
    return st;
}
