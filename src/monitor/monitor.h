// monitor: hardware monitoring for a run — a sampler thread that reads the sources (CPU, process tree, memory,
// disk, network, RAPL, NVIDIA GPUs) every interval, the run's phases and counters, per-phase summaries for the
// result JSON, CSV / JSON-lines time series, and the Prometheus exposition of the latest values.
// Defines: dlp_monitor, dlp_monitor_cfg, dlp_monitor_counter, dlp_monitor_create/start/stop/destroy,
//          dlp_monitor_phase, dlp_monitor_count, dlp_monitor_summary_json, dlp_monitor_sources_json,
//          dlp_monitor_render_prom, dlp_monitor_sample_at, dlp_monitor_add_sink, dlp_monitor_overhead.
//
// Use from a run (train, infer, serve):
//     dlp_monitor_cfg cfg = {.csv_path = opt_csv};           // interval 500 ms, this process's tree
//     dlp_monitor *mon;  DLP_CHECK(dlp_monitor_create(&cfg, &mon));  DLP_CHECK(dlp_monitor_start(mon));
//     dlp_monitor_phase(mon, "warm-up");  ...  dlp_monitor_phase(mon, "epoch 1");
//     dlp_monitor_count(mon, DLP_MONITOR_IMAGES, batch);      // lock-free; mon may be NULL
//     dlp_monitor_stop(mon);  json_object_set_new(result, "monitor", dlp_monitor_summary_json(mon));
//     dlp_monitor_destroy(mon);
#ifndef DLP_MONITOR_H
#define DLP_MONITOR_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"
#include "monitor/prom.h"

typedef struct dlp_monitor dlp_monitor;

typedef struct dlp_monitor_cfg {
    int interval_ms;            // sampling period; 0: 500
    int pid;                    // root of the process tree to account; 0: this process; -1: none
    const char *root;           // read /proc and /sys under this directory (tests); NULL or "": the real ones
    const char *sources;        // comma list of sources to use ("cpu,mem"); NULL: all
    const char *csv_path;       // time series, one row per sample (NULL: none); never overwrites a file
    const char *jsonl_path;     // time series, one line per sample per metric set (NULL: none)
    const char *initial_phase;  // phase before the first dlp_monitor_phase; NULL: "run"
    const char *nvml_lib;       // NULL: $DLPERF_NVML_LIB, else "libnvidia-ml.so.1"
    int all_disks;              // also partitions, loop, ram and zram devices
    int per_cpu_modes;          // per-core user/system/... columns in the time series (not only util_pct)
    int no_gpu_pcie;            // skip NVML PCIe throughput (each query blocks ~20 ms per GPU)
    int tree_scan_ms;           // process-tree re-discovery period; 0: 2000
    int (*open_fn)(const char *path, int flags);  // tests: replaces open(2) for every file the sources read
} dlp_monitor_cfg;

// Counters the run increments (relaxed atomics: cheap in hot loops).
typedef enum {
    DLP_MONITOR_IMAGES = 0,      // images processed (trained or inferred)
    DLP_MONITOR_DATA_WAIT_NS,    // time the compute loop waited for input, ns
    DLP_MONITOR_REQUESTS,        // requests served
    DLP_MONITOR_INPUT_BYTES,     // bytes of input read (dataset files, request bodies)
    DLP_MONITOR_COUNTER_COUNT
} dlp_monitor_counter;

// Opens every requested source (those not available here are recorded with the reason, never an error) and
// creates the time series files (DLP_ERR_EXISTS if one exists).
dlp_status dlp_monitor_create(const dlp_monitor_cfg *cfg, dlp_monitor **out);
// Takes the baseline sample and starts the sampler thread.
dlp_status dlp_monitor_start(dlp_monitor *mon);
// Takes a last sample, stops the thread and closes the time series (an error here means a file is incomplete).
dlp_status dlp_monitor_stop(dlp_monitor *mon);
void dlp_monitor_destroy(dlp_monitor *mon);

// Marks the start of a phase ("warm-up", "epoch 1", "eval", "serving"). With the thread running, the sampler
// takes a sample at the boundary so no interval spans two phases; the call itself does not wait for it.
// mon may be NULL (no-op).
void dlp_monitor_phase(dlp_monitor *mon, const char *name);
// Adds v to a counter; mon may be NULL (no-op).
void dlp_monitor_count(dlp_monitor *mon, dlp_monitor_counter c, int64_t v);
int64_t dlp_monitor_counter_value(const dlp_monitor *mon, dlp_monitor_counter c);

// {"interval_ms", "samples", "wall_s", "sources": {...}, "overhead": {...}, "phases": [...], "total": {...}}:
// per phase and for the whole run, per metric mean (time-weighted), p50, p95, max and, for rates, the total.
json_t *dlp_monitor_summary_json(dlp_monitor *mon);
// {"cpu": {"available": true, "note": "2 CPUs online of 2"}, "rapl": {"available": false, "note": "why"}, ...}
json_t *dlp_monitor_sources_json(const dlp_monitor *mon);
// The monitor's own CPU time (sampler thread + /metrics rendering), seconds, and the wall time it ran.
void dlp_monitor_overhead(const dlp_monitor *mon, double *cpu_s, double *wall_s);

// Appends the Prometheus text exposition of the latest sample (sources' counters and gauges, the run's counters,
// the monitor's own CPU time) to out. Thread-safe; usable by any HTTP server.
dlp_status dlp_monitor_render_prom(dlp_monitor *mon, dlp_prom_buf *out);

// Manual sampling without the thread (tests, replay): takes a sample stamped t_ns (CLOCK_MONOTONIC-like, ns);
// the first call is the baseline. Not allowed while the thread runs.
dlp_status dlp_monitor_sample_at(dlp_monitor *mon, int64_t t_ns);

// Adds a time-series sink (see monitor/sink.h) writing to path; before dlp_monitor_start only.
struct dlp_mon_sink_ops;
dlp_status dlp_monitor_add_sink(dlp_monitor *mon, const struct dlp_mon_sink_ops *ops, const char *path);

#endif
