// perf/probe_bg: the loader for the probe's wall-clock parts — a loader running flat out in the background (a consumer
// thread takes its batches as fast as they come, epoch after epoch, on the probe's subset of the dataset, warm), the
// load other work shares the cores with; and the loader's measured rate, repeated while other processes disturb it.
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "data/bench.h"
#include "data/loader.h"
#include "hw/cpushare.h"
#include "hw/host.h"
#include "perf/probe_impl.h"

struct dlp_probe_bg {
    dlp_loader *l;
    pthread_t th;
    int started;
    atomic_int stop;
    atomic_llong images;
    dlp_status st;
};

static void *consume(void *arg) {
    dlp_probe_bg *k = arg;
    int64_t epoch = 0;
    while (!atomic_load(&k->stop)) {
        dlp_status st = dlp_loader_start_epoch(k->l, epoch++);
        dlp_batch *b;
        while (st == DLP_OK && !atomic_load(&k->stop) && (st = dlp_loader_next(k->l, &b)) == DLP_OK && b) {
            atomic_fetch_add(&k->images, b->n);
            dlp_loader_release(k->l, b);
        }
        if (st != DLP_OK) {
            k->st = st;
            break;
        }
    }
    return NULL;
}

dlp_status dlp_probe_bg_start(dlp_probe_ctx *c, int size, int workers, dlp_probe_bg **out) {
    *out = NULL;
    dlp_probe_bg *k = calloc(1, sizeof *k);
    if (!k) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    dlp_loader_cfg lc;
    dlp_loader_cfg_defaults(&lc, c->ds, DLP_XFORM_TRAIN);
    lc.batch = 32;
    lc.workers = workers;
    lc.transform.out_w = lc.transform.out_h = size;
    lc.seed = c->cfg->seed;
    lc.limit_samples = c->nsubset;
    dlp_status st = dlp_loader_create(&lc, &k->l);
    if (st) {
        free(k);
        return st;
    }
    if (pthread_create(&k->th, NULL, consume, k) != 0) {
        dlp_loader_free(k->l);
        free(k);
        return DLP_ERR(DLP_ERR_INTERNAL, "cannot start a thread");
    }
    k->started = 1;
    dlp_sleep_ns(200000000);  // the ring fills, the loader reaches its steady rate
    *out = k;
    return DLP_OK;
}

int64_t dlp_probe_bg_images(dlp_probe_bg *k) { return k ? atomic_load(&k->images) : 0; }

dlp_status dlp_probe_bg_stop(dlp_probe_bg *k) {
    if (!k) return DLP_OK;
    atomic_store(&k->stop, 1);
    // The consumer may be blocked on a batch: the loader still runs, so one comes, and the consumer sees stop.
    if (k->started) pthread_join(k->th, NULL);
    dlp_status st = k->st;
    dlp_loader_free(k->l);
    free(k);
    return st;
}

dlp_status dlp_probe_loader_rate(dlp_probe_ctx *c, int size, int workers, int cold, uint64_t seed, int repeat,
                                 dlp_data_bench_run *out, double *other_cores, double *speed, double *spread,
                                 double *share) {
    dlp_data_bench_cfg bc;
    memset(&bc, 0, sizeof bc);
    dlp_loader_cfg_defaults(&bc.loader, c->ds, DLP_XFORM_TRAIN);
    bc.loader.batch = 32;
    bc.loader.transform.out_w = bc.loader.transform.out_h = size;
    bc.loader.seed = seed;
    bc.loader.drop_cache = cold;
    bc.workers[0] = workers;
    bc.nworkers = 1;
    bc.images = c->nsubset;
    bc.repeat = repeat > 0 ? repeat : 1;
    // The canary before and after each try (one thread for one worker, else every CPU); measured again while the
    // cores' speed moved more than the band around it: the steadiest try is kept. Other processes' load alone is
    // no reason to measure again: the speed says what it cost, and the rate is normalised to it.
    double best_spread = INFINITY, best_other = INFINITY, best_speed = 0, best_share = 0;
    const int tries_max = c->cfg->quick ? 1 : DLP_PROBE_SPEED_TRIES;
    for (int t = 0; t < tries_max && best_spread > 2 * DLP_PROBE_SPEED_BAND; t++) {
        double r2[2];
        r2[0] = dlp_probe_speed(c, workers);
        dlp_load_meter lm;
        dlp_load_meter_start(&lm);
        dlp_data_bench_run r;
        dlp_cpushare *meter = dlp_cpushare_start(0);  // the loader threads' share of the cores, over the whole try
        dlp_cpushare_sample sh;
        dlp_status st = dlp_data_bench(&bc, &r);
        dlp_cpushare_stop(meter, &sh);
        DLP_CHECK(st);
        double other = dlp_load_meter_cores(&lm);
        r2[1] = dlp_probe_speed(c, workers);
        const double sp = dlp_probe_speed_spread(r2, 2);
        if (t == 0 || sp < best_spread) {
            *out = r;
            best_other = other;
            best_spread = sp;
            best_speed = dlp_probe_speed_mean(r2, 2);
            best_share = sh.share;
        }
    }
    if (other_cores) *other_cores = best_other;
    if (speed) *speed = best_speed;
    if (spread) *spread = best_spread;
    if (share) *share = best_share;
    return DLP_OK;
}
