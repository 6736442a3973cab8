// monitor/monitor_prom: the monitor's Prometheus exposition — the run's counters, the monitor's own cost, which
// sources are available, the current phase, then each source's counters and gauges from the latest sample.
// No HTTP here: the /metrics server (monitor/http_mhd.c, or the serving command's) calls it.
#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "hw/host.h"
#include "monitor/monitor_impl.h"

// dlperf_build_info{version, <library>...} 1: dlperf's version and the libraries compiled in (hw/host's list; label
// names lower-cased, '-' to '_'; the oneDNN ISA and kernel lines are about the host, not the build, and stay out).
enum { BUILD_LABELS = 12 };
static char g_build_kv[2 * BUILD_LABELS][64];
static const char *g_build_labels[2 * BUILD_LABELS];
static int g_build_n;
static pthread_once_t g_build_once = PTHREAD_ONCE_INIT;

static void build_labels_init(void) {
    json_t *v = dlp_versions_to_json();
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (g_build_n >= BUILD_LABELS || !json_is_string(x) || strchr(k, ' ')) continue;
        char *name = g_build_kv[2 * g_build_n];
        snprintf(name, 64, "%s", strcmp(k, "dlperf") == 0 ? "version" : k);
        for (char *p = name; *p; p++) *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
        snprintf(g_build_kv[2 * g_build_n + 1], 64, "%s", json_string_value(x));
        g_build_labels[2 * g_build_n] = g_build_kv[2 * g_build_n];
        g_build_labels[2 * g_build_n + 1] = g_build_kv[2 * g_build_n + 1];
        g_build_n++;
    }
    json_decref(v);
}

dlp_status dlp_monitor_render_prom(dlp_monitor *m, dlp_prom_buf *b) {
    int64_t c0 = dlp_thread_cpu_ns();
    static const struct { int c; double scale; const char *name, *help; } counters[] = {
        {DLP_MONITOR_IMAGES, 1, "dlperf_images_processed_total", "Images processed by the run (trained or inferred)."},
        {DLP_MONITOR_DATA_WAIT_NS, 1e-9, "dlperf_data_wait_seconds_total",
         "Seconds the compute loop waited for input data."},
        // requests are the service's: dlperf_serve_requests_total{code} (the monitor's JSON keeps its count)
        {DLP_MONITOR_INPUT_BYTES, 1, "dlperf_input_bytes_total", "Bytes of input read (dataset files, request bodies)."},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        dlp_prom_family(b, counters[i].name, "counter", counters[i].help);
        dlp_prom_sample(b, counters[i].name,
                        (double)dlp_monitor_counter_value(m, (dlp_monitor_counter)counters[i].c) * counters[i].scale,
                        (char *)NULL);
    }
    pthread_once(&g_build_once, build_labels_init);
    dlp_prom_family(b, "dlperf_build_info", "gauge", "dlperf's version and the libraries it was built with (value 1).");
    dlp_prom_sample_labels(b, "dlperf_build_info", 1, g_build_labels, g_build_n);
    pthread_mutex_lock(&m->mu);
    double cpu_s, wall_s;
    dlp_mon_overhead_locked(m, &cpu_s, &wall_s);
    dlp_prom_family(b, "dlperf_monitor_cpu_seconds_total", "counter",
                    "CPU seconds the monitor itself used (sampler thread and /metrics rendering).");
    dlp_prom_sample(b, "dlperf_monitor_cpu_seconds_total", cpu_s, (char *)NULL);
    dlp_prom_family(b, "dlperf_monitor_samples_total", "counter", "Samples the monitor has taken.");
    dlp_prom_sample(b, "dlperf_monitor_samples_total", (double)m->samples, (char *)NULL);
    dlp_prom_family(b, "dlperf_monitor_source_available", "gauge",
                    "1 if the monitor source works on this machine, 0 if not (see the run's JSON for why).");
    for (int i = 0; i < m->nsrc; i++)
        dlp_prom_sample(b, "dlperf_monitor_source_available", m->src[i].state ? 1 : 0, "source", m->src[i].ops->name,
                        (char *)NULL);
    dlp_prom_family(b, "dlperf_phase_info", "gauge", "The phase the run is in (value 1).");
    dlp_prom_sample(b, "dlperf_phase_info", 1, "phase", m->phase, (char *)NULL);
    if (m->have_baseline)
        for (int i = 0; i < m->nsrc; i++)
            if (m->src[i].state && m->src[i].ops->prom) m->src[i].ops->prom(m->src[i].state, b);
    pthread_mutex_unlock(&m->mu);
    dlp_monitor_add_http_cpu(m, dlp_thread_cpu_ns() - c0);
    if (b->failed) return DLP_ERR(DLP_ERR_NOMEM, "out of memory rendering /metrics");
    return DLP_OK;
}
