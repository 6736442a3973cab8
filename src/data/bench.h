// data/bench: the input pipeline alone — the "preparation rate" of a data-stall analysis. Runs the loader with a
// consumer that only releases batches, for each worker count asked, and measures images/s, MB/s, worker time per
// image per stage, and CPU time; warm (files read once beforehand) or cold (dropped from the page cache first).
// Also the loader's work speed (dlp_data_decode_speed): how fast the cores decode and augment right now.
// Defines: dlp_data_bench_cfg, dlp_data_bench_run, dlp_data_bench, dlp_data_bench_run_to_json, dlp_data_decode_speed.
#ifndef DLP_DATA_BENCH_H
#define DLP_DATA_BENCH_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "data/loader.h"

#define DLP_DATA_BENCH_MAX_RUNS 32

typedef struct dlp_data_bench_cfg {
    dlp_loader_cfg loader;       // dataset, batch, transform, prefetch, read limit, drop_cache, seed; workers ignored
    int workers[DLP_DATA_BENCH_MAX_RUNS];
    int nworkers;
    int64_t images;              // images per measurement (0: the whole dataset once)
    int repeat;                  // measurements per worker count (the median is reported)
} dlp_data_bench_cfg;

typedef struct dlp_data_bench_run {
    int workers;
    int64_t images;
    double seconds;         // median over repeats
    double img_per_s, mb_per_s;  // images (bytes) over the pass's whole time, start included
    double steady_img_per_s; // median over repeats of the rate after the first batch (the start left out)
    double cpu_seconds;     // process CPU time during the measurement
    dlp_loader_stats stats; // of the median measurement
} dlp_data_bench_run;

// Fills runs[0..cfg->nworkers). When not cold (drop_cache 0), every file used is read once first.
dlp_status dlp_data_bench(const dlp_data_bench_cfg *cfg, dlp_data_bench_run *runs);
json_t *dlp_data_bench_run_to_json(const dlp_data_bench_run *r);

// The loader's work speed now: images per CPU-second of decoding and transforming (the training transform to
// 224 px) one fixed 375x500 JPEG (a rendered synthetic photo, quality 90) on `threads` threads at once (<= 0: every
// allowed CPU) for about `seconds`. Per CPU-second, so time-sharing with other processes does not move it; a virtual
// machine's neighbours and the cores' clocks do (the probe and validate read it around the pipeline's measurements
// and the runs: perf/probe_speed). *share (may be NULL): the threads' CPU time over their wall time.
dlp_status dlp_data_decode_speed(int threads, double seconds, double *img_per_cpu_s, double *share);

#endif
