// monitor/monitor_impl: the monitor's state, shared by the files of the module (not part of the API).
// Defines: struct dlp_monitor, dlp_mon_src_slot, dlp_mon_sink_slot, dlp_monitor_add_http_cpu, dlp_mon_overhead_locked.
#ifndef DLP_MONITOR_IMPL_H
#define DLP_MONITOR_IMPL_H
#include <pthread.h>
#include <stdatomic.h>

#include "monitor/monitor.h"
#include "monitor/sink.h"
#include "monitor/source.h"
#include "monitor/store.h"

#define DLP_MON_MAX_SOURCES 16
#define DLP_MON_MAX_SINKS 8
#define DLP_MON_PENDING 16

typedef struct dlp_mon_src_slot {
    const dlp_mon_source_ops *ops;
    void *state;      // NULL when not available
    int base, n;      // its fields: [base, base + n)
    char note[512];   // what was found, or why it is not available
    int64_t cpu_ns;   // sampling cost (thread CPU time), summed
} dlp_mon_src_slot;

typedef struct dlp_mon_sink_slot {
    const dlp_mon_sink_ops *ops;
    void *state;
    char path[1024];
    int failed;
} dlp_mon_sink_slot;

struct dlp_monitor {
    _Alignas(64) _Atomic int64_t counters[DLP_MONITOR_COUNTER_COUNT];  // hot: the run increments them
    _Alignas(64) int64_t interval_ns;
    dlp_mon_env env;
    dlp_mon_fields fields;
    dlp_mon_src_slot src[DLP_MON_MAX_SOURCES];
    int nsrc;
    int f_run, f_mon;  // first built-in field of the run counters / the monitor's overhead
    double *vals;      // [fields.n] the current row
    dlp_mon_sink_slot sinks[DLP_MON_MAX_SINKS];
    int nsinks;
    dlp_mon_store store;

    pthread_mutex_t mu;  // sources' state, store, phase: the sampler, summaries and /metrics take it
    pthread_mutex_t pmu; // pending phases and the stop flag (never held while sampling)
    pthread_cond_t cv;
    pthread_t thread;
    int thread_running, stop_req, started, stopped;
    char pending[DLP_MON_PENDING][64];
    int npending;

    char phase[64];
    int64_t t0_ns, last_ns, end_ns;
    double t0_unix_s;
    int have_baseline;
    int64_t samples;
    int64_t prev_counters[DLP_MONITOR_COUNTER_COUNT];
    _Atomic int64_t sampler_cpu_ns;  // the sampler's own CPU time
    _Atomic int64_t http_cpu_ns;     // CPU time spent rendering /metrics
    int64_t prev_self_cpu_ns;
};

// Adds CPU time spent serving /metrics to the monitor's overhead.
void dlp_monitor_add_http_cpu(dlp_monitor *mon, int64_t ns);
// dlp_monitor_overhead with mu already held.
void dlp_mon_overhead_locked(dlp_monitor *mon, double *cpu_s, double *wall_s);

#endif
