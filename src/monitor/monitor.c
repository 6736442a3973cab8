// monitor/monitor: the harness — opens the sources, owns the sampler thread and its schedule, the run's phases
// and counters, and hands each sample to the store and the sinks. Sources and sinks only do their own part.
#include "monitor/monitor_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"

enum { R_IMAGES, R_WAIT, R_REQUESTS, R_BYTES, NR };  // built-in run fields, in counter order

static int source_requested(const char *list, const char *name) {
    if (!list || !*list) return 1;
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == nl && strncmp(p, name, nl) == 0) return 1;
        p = comma ? comma + 1 : p + len;
    }
    return 0;
}

static dlp_status check_source_list(const char *list) {
    if (!list || !*list) return DLP_OK;
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int known = 0;
        for (const dlp_mon_source_ops *const *s = dlp_mon_sources; *s; s++)
            if (strlen((*s)->name) == len && strncmp((*s)->name, p, len) == 0) known = 1;
        if (!known) {
            char known_list[256] = "";
            size_t w = 0;
            for (const dlp_mon_source_ops *const *s = dlp_mon_sources; *s; s++)
                w += (size_t)snprintf(known_list + w, sizeof known_list - w, "%s%s", w ? "," : "", (*s)->name);
            return DLP_ERR(DLP_ERR_INVALID, "unknown monitor source '%.*s' (known: %s)", (int)len, p, known_list);
        }
        p = comma ? comma + 1 : p + len;
    }
    return DLP_OK;
}

static dlp_status open_sink(dlp_monitor *m, const dlp_mon_sink_ops *ops, const char *path) {
    if (m->nsinks == DLP_MON_MAX_SINKS) return DLP_ERR(DLP_ERR_INVALID, "too many monitor sinks (max %d)", DLP_MON_MAX_SINKS);
    dlp_mon_sink_slot *k = &m->sinks[m->nsinks];
    memset(k, 0, sizeof *k);
    snprintf(k->path, sizeof k->path, "%s", path ? path : "");
    DLP_CHECK(ops->open(&k->state, k->path, m->fields.v, m->fields.n));
    k->ops = ops;
    m->nsinks++;
    return DLP_OK;
}

dlp_status dlp_monitor_create(const dlp_monitor_cfg *cfg_in, dlp_monitor **out) {
    *out = NULL;
    dlp_monitor_cfg cfg = cfg_in ? *cfg_in : (dlp_monitor_cfg){0};
    if (cfg.interval_ms == 0) cfg.interval_ms = 500;
    if (cfg.interval_ms < 10 || cfg.interval_ms > 3600 * 1000)
        return DLP_ERR(DLP_ERR_INVALID, "monitor interval %d ms is out of range (10 ms .. 1 h)", cfg.interval_ms);
    if (cfg.tree_scan_ms < 0) return DLP_ERR(DLP_ERR_INVALID, "tree scan period %d ms is negative", cfg.tree_scan_ms);
    DLP_CHECK(check_source_list(cfg.sources));
    DLP_CHECK(dlp_check_new_output(cfg.csv_path, "--csv"));
    DLP_CHECK(dlp_check_new_output(cfg.jsonl_path, "--jsonl"));

    dlp_monitor *m = calloc(1, sizeof *m);
    DLP_TRY_ALLOC(m);
    m->interval_ns = (int64_t)cfg.interval_ms * 1000000;
    const char *root = cfg.root && *cfg.root ? cfg.root : "";
    snprintf(m->env.root, sizeof m->env.root, "%s", root);
    size_t rl = strlen(m->env.root);
    while (rl > 0 && m->env.root[rl - 1] == '/') m->env.root[--rl] = '\0';  // "/" reads the real files
    m->env.open_fn = cfg.open_fn;
    m->env.pid = cfg.pid == 0 ? (int)getpid() : cfg.pid;
    m->env.all_disks = cfg.all_disks;
    m->env.per_cpu_modes = cfg.per_cpu_modes;
    m->env.gpu_pcie = !cfg.no_gpu_pcie;
    m->env.nvml_lib = cfg.nvml_lib ? cfg.nvml_lib : getenv("DLPERF_NVML_LIB");
    m->env.tree_scan_ns = (int64_t)(cfg.tree_scan_ms ? cfg.tree_scan_ms : 2000) * 1000000;
    snprintf(m->phase, sizeof m->phase, "%s", cfg.initial_phase && *cfg.initial_phase ? cfg.initial_phase : "run");
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->pmu, NULL);
    dlp_cond_init_monotonic(&m->cv);

    dlp_status st = DLP_OK;
    for (const dlp_mon_source_ops *const *ops = dlp_mon_sources; *ops && m->nsrc < DLP_MON_MAX_SOURCES; ops++) {
        if (!source_requested(cfg.sources, (*ops)->name)) continue;
        dlp_mon_src_slot *k = &m->src[m->nsrc++];
        k->ops = *ops;
        k->base = m->fields.n;
        dlp_status s = (*ops)->available(&m->env, &m->fields, &k->state, k->note, sizeof k->note);
        if (s != DLP_OK || !k->state) {
            if (s == DLP_ERR_NOMEM && !k->note[0]) snprintf(k->note, sizeof k->note, "out of memory");
            k->state = NULL;
            m->fields.n = k->base;  // drop anything it declared before giving up
        }
        k->n = m->fields.n - k->base;
        DLP_DEBUG("monitor: %s: %s%s", k->ops->name, k->state ? "" : "not available: ", k->note);
    }
    dlp_err_clear();  // a source that is not available is not an error of the run
    m->f_run = m->fields.n;
    dlp_mon_fields_add(&m->fields, "run", NULL, "images_per_s", DLP_MON_UNIT_PER_S, DLP_MON_F_SUMMARY);
    dlp_mon_fields_add(&m->fields, "run", NULL, "data_wait_pct", DLP_MON_UNIT_PCT, DLP_MON_F_SUMMARY | DLP_MON_F_WAIT_S);
    dlp_mon_fields_add(&m->fields, "run", NULL, "requests_per_s", DLP_MON_UNIT_PER_S, DLP_MON_F_SUMMARY);
    dlp_mon_fields_add(&m->fields, "run", NULL, "input_bytes_per_s", DLP_MON_UNIT_BYTES_PER_S, DLP_MON_F_SUMMARY);
    m->f_mon = m->fields.n;
    dlp_mon_fields_add(&m->fields, "monitor", NULL, "cpu_pct", DLP_MON_UNIT_PCT, DLP_MON_F_SUMMARY | DLP_MON_F_CPU_S);
    if (m->fields.oom) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory declaring monitor fields");
        goto fail;
    }
    m->vals = calloc((size_t)m->fields.n, sizeof *m->vals);
    if (!m->vals) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for monitor values");
        goto fail;
    }
    for (int i = 0; i < m->fields.n; i++) m->vals[i] = NAN;
    DLP_CHECK_GOTO(st, dlp_mon_store_init(&m->store, m->fields.v, m->fields.n, (double)m->interval_ns * 1e-9, m->phase),
                   fail);
    if (cfg.csv_path && *cfg.csv_path) DLP_CHECK_GOTO(st, open_sink(m, &dlp_mon_sink_csv, cfg.csv_path), fail);
    if (cfg.jsonl_path && *cfg.jsonl_path) DLP_CHECK_GOTO(st, open_sink(m, &dlp_mon_sink_jsonl, cfg.jsonl_path), fail);
    *out = m;
    return DLP_OK;
fail:
    // Remove the time series files this call created (they hold only a header).
    for (int i = 0; i < m->nsinks; i++) {
        m->sinks[i].ops->close(m->sinks[i].state);
        if (m->sinks[i].path[0]) unlink(m->sinks[i].path);
    }
    m->nsinks = 0;
    dlp_monitor_destroy(m);
    return st;
}

dlp_status dlp_monitor_add_sink(dlp_monitor *m, const struct dlp_mon_sink_ops *ops, const char *path) {
    if (m->started) return DLP_ERR(DLP_ERR_INVALID, "monitor sinks must be added before dlp_monitor_start");
    return open_sink(m, ops, path);
}

// Takes one sample at now_ns (mu held). The first is the baseline: sources record their counters, no row.
static void sample_locked(dlp_monitor *m, int64_t now_ns) {
    double dt = m->have_baseline ? (double)(now_ns - m->last_ns) * 1e-9 : 0;
    if (m->have_baseline && !(dt > 0)) return;
    if (!m->have_baseline) {
        m->t0_ns = now_ns;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m->t0_unix_s = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    for (int i = 0; i < m->nsrc; i++) {
        dlp_mon_src_slot *k = &m->src[i];
        if (!k->state) {
            for (int j = 0; j < k->n; j++) m->vals[k->base + j] = NAN;
            continue;
        }
        int64_t c0 = dlp_thread_cpu_ns();
        k->ops->sample(k->state, dt, m->vals + k->base);
        k->cpu_ns += dlp_thread_cpu_ns() - c0;
    }
    int64_t d[DLP_MONITOR_COUNTER_COUNT];
    for (int c = 0; c < DLP_MONITOR_COUNTER_COUNT; c++) {
        int64_t v = atomic_load_explicit(&m->counters[c], memory_order_relaxed);
        d[c] = v - m->prev_counters[c];
        m->prev_counters[c] = v;
    }
    int64_t self = atomic_load(&m->sampler_cpu_ns) + atomic_load(&m->http_cpu_ns);
    double *r = m->vals + m->f_run;
    if (dt > 0) {
        r[R_IMAGES] = (double)d[DLP_MONITOR_IMAGES] / dt;
        r[R_WAIT] = 100.0 * (double)d[DLP_MONITOR_DATA_WAIT_NS] * 1e-9 / dt;
        r[R_REQUESTS] = (double)d[DLP_MONITOR_REQUESTS] / dt;
        r[R_BYTES] = (double)d[DLP_MONITOR_INPUT_BYTES] / dt;
        m->vals[m->f_mon] = 100.0 * (double)(self - m->prev_self_cpu_ns) * 1e-9 / dt;
    } else {
        for (int j = 0; j < NR; j++) r[j] = NAN;
        m->vals[m->f_mon] = NAN;
    }
    m->prev_self_cpu_ns = self;
    m->last_ns = now_ns;
    m->have_baseline = 1;
    if (!(dt > 0)) return;
    double t_s = (double)(now_ns - m->t0_ns) * 1e-9;
    dlp_mon_store_add(&m->store, t_s, dt, m->vals);
    m->samples++;
    dlp_mon_row row = {.t_s = t_s, .dt_s = dt, .unix_s = m->t0_unix_s + t_s, .phase = m->phase, .vals = m->vals};
    for (int i = 0; i < m->nsinks; i++) {
        dlp_mon_sink_slot *k = &m->sinks[i];
        if (k->failed) continue;
        if (k->ops->write(k->state, &row) != DLP_OK) {
            DLP_WARN("monitor: %s; this time series stops here, the run goes on", dlp_err_msg());
            dlp_err_clear();
            k->failed = 1;
        }
    }
}

static void switch_phase_locked(dlp_monitor *m, const char *name) {
    double t_s = m->have_baseline ? (double)(m->last_ns - m->t0_ns) * 1e-9 : 0;
    if (dlp_mon_store_phase(&m->store, name, t_s) != DLP_OK) {
        DLP_WARN("monitor: cannot start phase '%s': %s", name, dlp_err_msg());
        dlp_err_clear();
        return;
    }
    snprintf(m->phase, sizeof m->phase, "%s", name);
}

// Samples taken on a caller's thread (baseline, last sample, manual mode) count toward the monitor's CPU time.
static void sample_on_caller(dlp_monitor *m, int64_t now_ns) {
    int64_t c0 = dlp_thread_cpu_ns();
    sample_locked(m, now_ns);
    atomic_fetch_add(&m->sampler_cpu_ns, dlp_thread_cpu_ns() - c0);
}

static void *sampler_main(void *arg) {
    dlp_monitor *m = arg;
    int64_t cpu_before = dlp_thread_cpu_ns(), cpu_reported = 0;
    int64_t next = m->last_ns + m->interval_ns;
    char names[DLP_MON_PENDING][64];
    pthread_mutex_lock(&m->pmu);
    for (;;) {
        while (!m->stop_req && m->npending == 0 && dlp_now_ns() < next) {
            dlp_cond_wait_until(&m->cv, &m->pmu, next);
        }
        if (m->stop_req) break;
        int np = m->npending;
        memcpy(names, m->pending, sizeof names[0] * (size_t)np);
        m->npending = 0;
        pthread_mutex_unlock(&m->pmu);

        pthread_mutex_lock(&m->mu);
        int64_t now = dlp_now_ns();
        sample_locked(m, now);  // with a phase change: the boundary sample closes the old phase
        for (int i = 0; i < np; i++) switch_phase_locked(m, names[i]);
        pthread_mutex_unlock(&m->mu);
        next = np ? now + m->interval_ns : next + m->interval_ns;
        if (next <= now) next = now + m->interval_ns;  // fell behind: skip, don't burst
        int64_t c = dlp_thread_cpu_ns() - cpu_before;
        atomic_fetch_add(&m->sampler_cpu_ns, c - cpu_reported);
        cpu_reported = c;
        pthread_mutex_lock(&m->pmu);
    }
    pthread_mutex_unlock(&m->pmu);
    atomic_fetch_add(&m->sampler_cpu_ns, dlp_thread_cpu_ns() - cpu_before - cpu_reported);
    return NULL;
}

dlp_status dlp_monitor_start(dlp_monitor *m) {
    if (m->started || m->have_baseline)
        return DLP_ERR(DLP_ERR_INVALID, "monitor already started (or sampled by hand)");
    pthread_mutex_lock(&m->mu);
    sample_on_caller(m, dlp_now_ns());
    pthread_mutex_unlock(&m->mu);
    int e = pthread_create(&m->thread, NULL, sampler_main, m);
    if (e != 0) return DLP_ERR(DLP_ERR_INTERNAL, "cannot start the monitor thread: %s", strerror(e));
    m->thread_running = 1;
    m->started = 1;
    return DLP_OK;
}

dlp_status dlp_monitor_stop(dlp_monitor *m) {
    if (!m || m->stopped) return DLP_OK;
    if (m->thread_running) {
        pthread_mutex_lock(&m->pmu);
        m->stop_req = 1;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->pmu);
        pthread_join(m->thread, NULL);
        m->thread_running = 0;
        pthread_mutex_lock(&m->mu);
        sample_on_caller(m, dlp_now_ns());  // the last, partial interval
        for (int i = 0; i < m->npending; i++) switch_phase_locked(m, m->pending[i]);
        m->npending = 0;
        pthread_mutex_unlock(&m->mu);
    }
    pthread_mutex_lock(&m->mu);
    m->end_ns = m->last_ns;
    m->stopped = 1;
    dlp_status first = DLP_OK;
    for (int i = 0; i < m->nsinks; i++) {
        dlp_mon_sink_slot *k = &m->sinks[i];
        dlp_status s = k->ops->close(k->state);
        k->state = NULL;
        if (k->failed && s == DLP_OK)
            s = DLP_ERR(DLP_ERR_IO, "the time series %s is incomplete (a write failed during the run)", k->path);
        if (s != DLP_OK && first == DLP_OK) first = s;  // keeps the first error's message
        else if (s != DLP_OK) dlp_err_clear();
    }
    m->nsinks = 0;
    pthread_mutex_unlock(&m->mu);
    return first;
}

void dlp_monitor_destroy(dlp_monitor *m) {
    if (!m) return;
    if (m->thread_running || m->nsinks) {
        dlp_status s = dlp_monitor_stop(m);
        if (s != DLP_OK) {
            DLP_WARN("monitor: %s", dlp_err_msg());
            dlp_err_clear();
        }
    }
    for (int i = 0; i < m->nsrc; i++)
        if (m->src[i].state) m->src[i].ops->close(m->src[i].state);
    dlp_mon_store_free(&m->store);
    free(m->fields.v);
    free(m->vals);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->pmu);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void dlp_monitor_phase(dlp_monitor *m, const char *name) {
    if (!m || !name) return;
    if (m->thread_running) {
        pthread_mutex_lock(&m->pmu);
        if (m->npending == DLP_MON_PENDING) m->npending--;  // a burst of phase calls: the newest wins
        snprintf(m->pending[m->npending++], sizeof m->pending[0], "%s", name);
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->pmu);
        return;
    }
    pthread_mutex_lock(&m->mu);  // manual mode: the phase starts at the latest sample
    switch_phase_locked(m, name);
    pthread_mutex_unlock(&m->mu);
}

void dlp_monitor_count(dlp_monitor *m, dlp_monitor_counter c, int64_t v) {
    if (!m || (unsigned)c >= DLP_MONITOR_COUNTER_COUNT) return;
    atomic_fetch_add_explicit(&m->counters[c], v, memory_order_relaxed);
}

int64_t dlp_monitor_counter_value(const dlp_monitor *m, dlp_monitor_counter c) {
    if (!m || (unsigned)c >= DLP_MONITOR_COUNTER_COUNT) return 0;
    return atomic_load_explicit(&((dlp_monitor *)m)->counters[c], memory_order_relaxed);
}

void dlp_monitor_add_http_cpu(dlp_monitor *m, int64_t ns) { atomic_fetch_add(&m->http_cpu_ns, ns); }

dlp_status dlp_monitor_sample_at(dlp_monitor *m, int64_t t_ns) {
    if (m->thread_running || m->stopped)
        return DLP_ERR(DLP_ERR_INVALID, "manual samples need a monitor that is not started or stopped");
    pthread_mutex_lock(&m->mu);
    sample_on_caller(m, t_ns);
    pthread_mutex_unlock(&m->mu);
    return DLP_OK;
}

void dlp_monitor_overhead(const dlp_monitor *mc, double *cpu_s, double *wall_s) {
    dlp_monitor *m = (dlp_monitor *)mc;
    pthread_mutex_lock(&m->mu);
    dlp_mon_overhead_locked(m, cpu_s, wall_s);
    pthread_mutex_unlock(&m->mu);
}

void dlp_mon_overhead_locked(dlp_monitor *m, double *cpu_s, double *wall_s) {
    *cpu_s = (double)(atomic_load(&m->sampler_cpu_ns) + atomic_load(&m->http_cpu_ns)) * 1e-9;
    int64_t end = m->stopped ? m->end_ns : (m->thread_running ? dlp_now_ns() : m->last_ns);
    *wall_s = m->have_baseline ? (double)(end - m->t0_ns) * 1e-9 : 0;
}

json_t *dlp_monitor_sources_json(const dlp_monitor *m) {
    json_t *o = json_object();
    for (int i = 0; i < m->nsrc; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "available", json_boolean(m->src[i].state != NULL));
        json_object_set_new(e, "note", json_string(m->src[i].note));
        json_object_set_new(o, m->src[i].ops->name, e);
    }
    return o;
}

json_t *dlp_monitor_summary_json(dlp_monitor *m) {
    pthread_mutex_lock(&m->mu);
    json_t *o = json_object();
    json_object_set_new(o, "interval_ms", json_integer(m->interval_ns / 1000000));
    json_object_set_new(o, "root", json_string(m->env.root[0] ? m->env.root : "/"));
    json_object_set_new(o, "pid", json_integer(m->env.pid));
    json_object_set_new(o, "samples", json_integer(m->samples));
    double cpu_s, wall_s;
    dlp_mon_overhead_locked(m, &cpu_s, &wall_s);
    json_object_set_new(o, "wall_s", json_real(round(wall_s * 1000) / 1000));
    json_object_set_new(o, "sources", dlp_monitor_sources_json(m));
    json_t *ov = json_object();
    json_object_set_new(ov, "cpu_s", json_real(cpu_s));
    json_object_set_new(ov, "sampler_cpu_s", json_real((double)atomic_load(&m->sampler_cpu_ns) * 1e-9));
    json_object_set_new(ov, "metrics_http_cpu_s", json_real((double)atomic_load(&m->http_cpu_ns) * 1e-9));
    json_object_set_new(ov, "pct_of_one_core", wall_s > 0 ? json_real(100.0 * cpu_s / wall_s) : json_null());
    json_t *per = json_object();
    for (int i = 0; i < m->nsrc; i++)
        if (m->src[i].state && m->samples > 0)
            json_object_set_new(per, m->src[i].ops->name,
                                json_real((double)m->src[i].cpu_ns * 1e-6 / (double)(m->samples + 1)));
    json_object_set_new(ov, "per_sample_cpu_ms", per);
    json_object_set_new(o, "overhead", ov);
    json_t *counters = json_object();
    json_object_set_new(counters, "images", json_integer(dlp_monitor_counter_value(m, DLP_MONITOR_IMAGES)));
    json_object_set_new(counters, "data_wait_s",
                        json_real((double)dlp_monitor_counter_value(m, DLP_MONITOR_DATA_WAIT_NS) * 1e-9));
    json_object_set_new(counters, "requests", json_integer(dlp_monitor_counter_value(m, DLP_MONITOR_REQUESTS)));
    json_object_set_new(counters, "input_bytes", json_integer(dlp_monitor_counter_value(m, DLP_MONITOR_INPUT_BYTES)));
    json_object_set_new(o, "counters", counters);
    double end_s = m->have_baseline ? (double)(m->last_ns - m->t0_ns) * 1e-9 : 0;
    json_t *st = dlp_mon_store_json(&m->store, m->fields.v, end_s);
    pthread_mutex_unlock(&m->mu);
    if (st) {
        json_object_update(o, st);
        json_decref(st);
    }
    return o;
}
