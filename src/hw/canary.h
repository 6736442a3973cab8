// hw/canary: the cores' speed at this moment (a fixed multiply-add loop on every allowed CPU at once, or on one), and
// the hypervisor's steal time from /proc/stat.
// Defines: dlp_host_canary_gflops, dlp_host_canary_gflops_on, dlp_host_cpu_ticks, dlp_cpu_ticks, dlp_steal_fraction.
#ifndef DLP_HW_CANARY_H
#define DLP_HW_CANARY_H
#include <stdint.h>

// Runs the loop for about `seconds` on one thread per allowed CPU; returns GFLOP/s summed over them (0 on failure).
// Compare two readings of the same machine only: the figure is not a peak.
double dlp_host_canary_gflops(double seconds);
// The same on `threads` threads (<= 0: one per allowed CPU): what that many threads of this process get done now,
// other tenants and processes included.
double dlp_host_canary_gflops_on(double seconds, int threads);

// The "cpu" line of /proc/stat: ticks stolen by the hypervisor and ticks in all (every state); 0 when unreadable.
typedef struct dlp_cpu_ticks {
    uint64_t steal, total;
} dlp_cpu_ticks;
int dlp_host_cpu_ticks(dlp_cpu_ticks *out);
// Share of the CPUs' time stolen between two readings (0..1; NAN when unknown).
double dlp_steal_fraction(const dlp_cpu_ticks *a, const dlp_cpu_ticks *b);

#endif
