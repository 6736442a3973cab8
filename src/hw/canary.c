// hw/canary: how fast the cores run right now. A virtual machine's cores slow down and speed up with what the host's
// other tenants do (a busy SMT sibling, shared caches and memory, clocks), often without any steal time in
// /proc/stat: a fixed floating-point loop on every allowed CPU at once, timed, says how much work a core does per
// second at this moment, so a measurement can be compared with the machine as it was probed.
#pragma GCC optimize("O3")
#include "hw/canary.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "hw/host.h"

#define LANES 128  // independent multiply-adds per round: enough to fill the FMA pipes of any x86-64 core

typedef struct canary_arg {
    int64_t end_ns;
    double flop;
    float sink;
} canary_arg;

static void *canary_thread(void *p) {
    canary_arg *a = p;
    float acc[LANES];
    for (int i = 0; i < LANES; i++) acc[i] = 1.0f + (float)i * 1e-3f;
    const float m = 0.9999f, c = 1e-4f;
    double rounds = 0;
    do {
        for (int r = 0; r < 2048; r++)
            for (int i = 0; i < LANES; i++) acc[i] = acc[i] * m + c;  // converges to 1: no overflow, no denormals
        rounds += 2048;
    } while (dlp_now_ns() < a->end_ns);
    float s = 0;
    for (int i = 0; i < LANES; i++) s += acc[i];
    a->sink = s;
    a->flop = rounds * LANES * 2;
    return NULL;
}

double dlp_host_canary_gflops(double seconds) { return dlp_host_canary_gflops_on(seconds, 0); }

double dlp_host_canary_gflops_on(double seconds, int threads) {
    int n = threads > 0 ? threads : dlp_host_cpus_allowed();
    if (n < 1) n = 1;
    if (n > 256) n = 256;
    canary_arg *a = calloc((size_t)n, sizeof *a);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!a || !t) {
        free(a);
        free(t);
        return 0;
    }
    const int64_t t0 = dlp_now_ns(), end = t0 + (int64_t)(seconds * 1e9);
    int started = 0;
    for (int i = 0; i < n; i++) {
        a[i].end_ns = end;
        if (pthread_create(&t[i], NULL, canary_thread, &a[i]) != 0) break;
        started++;
    }
    double flop = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        flop += a[i].flop;
    }
    const double wall = dlp_ns_to_s(dlp_now_ns() - t0);
    free(a);
    free(t);
    return started > 0 && wall > 0 ? flop / wall / 1e9 : 0;
}

int dlp_host_cpu_ticks(dlp_cpu_ticks *out) {
    out->steal = out->total = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 8) return 0;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already inside user and nice]
    for (int i = 0; i < 8; i++) out->total += v[i];
    out->steal = v[7];
    return 1;
}

double dlp_steal_fraction(const dlp_cpu_ticks *a, const dlp_cpu_ticks *b) {
    if (!a->total || b->total <= a->total || b->steal < a->steal) return NAN;
    return (double)(b->steal - a->steal) / (double)(b->total - a->total);
}
