// dist/bench: the allreduce benchmark (dist/bench.h).
#include "dist/bench.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

// Rank r's input: (r + 1) x (1 + i mod 13) / 4 — small multiples of 1/4, so every partial sum is exact in fp32.
static float input_at(int rank, int64_t i) { return (float)(rank + 1) * (float)(1 + i % 13) * 0.25f; }

static void fill(float *buf, int64_t n, int rank) {
    for (int64_t i = 0; i < n; i++) buf[i] = input_at(rank, i);
}

// Elements that are not the mean of all ranks' inputs (within fp32 rounding of the 1/n scale).
static int64_t count_wrong(const float *buf, int64_t n, int size) {
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) want += input_at(r, i);
        want /= size;
        if (!(fabs(buf[i] - want) <= 1e-6 * fabs(want))) wrong++;
    }
    return wrong;
}

dlp_status dlp_dist_bench(dlp_comm *c, const dlp_dist_bench_cfg *cfg, dlp_dist_bench_point *out, int max, int *n) {
    *n = 0;
    if (cfg->min_bytes < 4 || cfg->max_bytes < cfg->min_bytes || cfg->factor < 2 || cfg->iters < 1 || cfg->warmup < 0)
        return DLP_ERR(DLP_ERR_INVALID, "dist bench: sizes %lld..%lld bytes (at least 4), factor %d (at least 2), %d "
                       "iterations (at least 1), %d warm-up", (long long)cfg->min_bytes, (long long)cfg->max_bytes,
                       cfg->factor, cfg->iters, cfg->warmup);
    const int size = dlp_comm_size(c), rank = dlp_comm_rank(c);
    const int64_t max_count = cfg->max_bytes / 4;
    float *host = malloc((size_t)max_count * sizeof *host);
    void *dev = NULL;  // the communicator's buffer: host memory, or device memory for nccl
    double *times = malloc((size_t)size * sizeof *times);
    int64_t *wrongs = malloc((size_t)size * sizeof *wrongs);
    dlp_status st = DLP_OK;
    if (!host || !times || !wrongs) st = DLP_ERR(DLP_ERR_NOMEM, "dist bench: out of memory for %lld bytes", (long long)cfg->max_bytes);
    if (!st) st = dlp_comm_mem_alloc(c, (size_t)max_count * sizeof(float), &dev);
    float *buf = dev;
    for (int64_t bytes = cfg->min_bytes; !st && bytes <= cfg->max_bytes && *n < max; bytes *= cfg->factor) {
        const int64_t count = bytes / 4;
        // correctness first: one allreduce of known inputs
        fill(host, count, rank);
        if ((st = dlp_comm_mem_put(c, buf, host, (size_t)count * 4)) || (st = dlp_comm_allreduce(c, buf, count, NULL)) ||
            (st = dlp_comm_sync(c)) || (st = dlp_comm_mem_get(c, host, buf, (size_t)count * 4)))
            break;
        int64_t wrong = count_wrong(host, count, size);
        for (int i = 0; i < cfg->warmup && !st; i++) st = dlp_comm_allreduce(c, buf, count, NULL);
        if (!st) st = dlp_comm_sync(c);
        if (!st) st = dlp_comm_barrier(c);
        if (st) break;
        int64_t t0 = dlp_now_ns();
        for (int i = 0; i < cfg->iters && !st; i++) st = dlp_comm_allreduce(c, buf, count, NULL);
        if (!st) st = dlp_comm_sync(c);
        double us = dlp_ns_to_ms(dlp_now_ns() - t0) * 1e3 / cfg->iters;
        if (st) break;
        // every rank gets the slowest rank's time and the total of wrong elements
        if ((st = dlp_comm_gather(c, &us, sizeof us, times, 0)) || (st = dlp_comm_gather(c, &wrong, sizeof wrong, wrongs, 0)))
            break;
        if (rank == 0) {
            for (int r = 1; r < size; r++) {
                if (times[r] > us) us = times[r];
                wrong += wrongs[r];
            }
        }
        if ((st = dlp_comm_broadcast(c, &us, sizeof us, 0)) || (st = dlp_comm_broadcast(c, &wrong, sizeof wrong, 0))) break;
        dlp_dist_bench_point *p = &out[(*n)++];
        p->bytes = count * 4;
        p->count = count;
        p->time_us = us;
        p->algbw_gb_s = us > 0 ? (double)p->bytes / (us * 1e-6) * 1e-9 : 0;
        p->busbw_gb_s = p->algbw_gb_s * 2.0 * (size - 1) / size;
        p->wrong = wrong;
        if (bytes > cfg->max_bytes / cfg->factor) break;  // the next size would pass max (and may overflow)
    }
    dlp_comm_mem_free(c, dev);
    free(host);
    free(times);
    free(wrongs);
    return st;
}

json_t *dlp_dist_bench_to_json(const dlp_dist_bench_point *p, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:I,s:I,s:f,s:f,s:f,s:I}", "bytes", (json_int_t)p[i].bytes, "count",
                                           (json_int_t)p[i].count, "time_us", p[i].time_us, "algbw_gb_s",
                                           p[i].algbw_gb_s, "busbw_gb_s", p[i].busbw_gb_s, "wrong",
                                           (json_int_t)p[i].wrong));
    return a;
}
