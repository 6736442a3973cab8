// perf/probe_mem: sustained memory bandwidth, STREAM's way — copy (a = b) and triad (a = b + s c) over arrays
// far larger than the caches, each thread on its own slice, best of several repetitions (STREAM reports the best),
// on 1..N threads. Bytes counted as STREAM does: 16 per element for copy, 24 for triad (no write-allocate).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "perf/probe_impl.h"

typedef struct mem_job {
    double *a, *b, *cc;
    size_t lo, hi;
    int op;  // 0 copy, 1 triad
    pthread_barrier_t *start, *stop;
    int reps;
} mem_job;

static void kernel(mem_job *j) {
    double *restrict a = j->a;
    const double *restrict b = j->b, *restrict c = j->cc;
    if (j->op == 0)
        for (size_t i = j->lo; i < j->hi; i++) a[i] = b[i];
    else
        for (size_t i = j->lo; i < j->hi; i++) a[i] = b[i] + 3.0 * c[i];
}

static void *mem_thread(void *arg) {
    mem_job *j = arg;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->start);
        kernel(j);
        pthread_barrier_wait(j->stop);
    }
    return NULL;
}

// Best bandwidth over reps of op on `threads` threads (the caller is thread 0).
static double run_op(double *a, double *b, double *c, size_t n, int threads, int op, int reps) {
    pthread_barrier_t start, stop;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_barrier_init(&stop, NULL, (unsigned)threads);
    mem_job jobs[64];
    pthread_t th[64];
    int started = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (mem_job){a, b, c, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, op,
                            &start, &stop, reps};
        if (t > 0 && pthread_create(&th[t], NULL, mem_thread, &jobs[t]) == 0) started++;
    }
    double best = 0;
    if (started == threads - 1) {
        for (int r = 0; r < reps; r++) {
            pthread_barrier_wait(&start);
            int64_t t0 = dlp_now_ns();
            kernel(&jobs[0]);
            pthread_barrier_wait(&stop);
            double s = dlp_ns_to_s(dlp_now_ns() - t0);
            double bw = (double)n * (op == 0 ? 16.0 : 24.0) / s;
            if (bw > best) best = bw;
        }
    }
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&stop);
    return best;
}

dlp_status dlp_probe_memory(dlp_probe_ctx *c) {
    const size_t n = (size_t)(c->cfg->quick ? 4 : 8) << 20;  // doubles per array: 32 or 64 MiB each
    const int reps = c->cfg->quick ? 4 : 8;
    double *a = dlp_alloc_aligned(n * sizeof(double)), *b = dlp_alloc_aligned(n * sizeof(double)),
           *cc = dlp_alloc_aligned(n * sizeof(double));
    if (!a || !b || !cc) {
        dlp_free_aligned(a);
        dlp_free_aligned(b);
        dlp_free_aligned(cc);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the bandwidth arrays (3 x %zu MiB)", n * 8 >> 20);
    }
    for (size_t i = 0; i < n; i++) {  // touch every page before timing
        a[i] = 0;
        b[i] = 1;
        cc[i] = 2;
    }
    json_t *arr = json_array();
    double best = 0;
    int T = c->threads < 64 ? c->threads : 64;
    for (int t = 1; t <= T; t++) {
        double cp = run_op(a, b, cc, n, t, 0, reps), tr = run_op(a, b, cc, n, t, 1, reps);
        json_t *o = json_object();
        json_object_set_new(o, "threads", json_integer(t));
        json_object_set_new(o, "copy_bytes_per_s", json_real(cp));
        json_object_set_new(o, "triad_bytes_per_s", json_real(tr));
        json_array_append_new(arr, o);
        if (tr > best) best = tr;
        dlp_probe_say(c, "memory: %d thread(s): copy %.1f GB/s, triad %.1f GB/s", t, cp / 1e9, tr / 1e9);
    }
    dlp_free_aligned(a);
    dlp_free_aligned(b);
    dlp_free_aligned(cc);
    json_t *o = json_object();
    json_object_set_new(o, "array_bytes", json_integer((json_int_t)(n * sizeof(double))));
    json_object_set_new(o, "points", arr);
    json_object_set_new(c->details, "memory", o);
    c->p->host.mem_bw_bytes_per_s = best;
    return DLP_OK;
}
