// monitor/src_cpu: per-core and total CPU utilization by mode from /proc/stat. CPUs that go offline or come
// online between samples get no value for that interval (they rejoin the total once seen twice in a row);
// counters that go backwards (idle/iowait after hotplug) count zero for the interval.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "monitor/source.h"

#define NMODES 8
#define MAX_CPUS 8192
static const char *const k_modes[NMODES] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};
enum { M_IDLE = 3, M_IOWAIT = 4 };

typedef struct {
    uint64_t raw[NMODES];  // jiffies (USER_HZ)
    int present;           // seen in the latest read
    int have_prev;         // raw[] holds the previous read
} cpu_slot;

typedef struct {
    dlp_mon_file f;
    int ncpu;  // slots: possible CPUs
    cpu_slot *cpu;
    int per_cpu_modes;
    int online;
    long hz;
    int64_t anomalies;
    int warned_range;
    uint64_t (*cur)[NMODES];  // [ncpu] the latest read, before it is paired with raw[]
} cpu_state;

// Highest CPU number in a list like "0-3,8-11" or "0"; -1 on a malformed list.
static int max_in_cpu_list(const char *s) {
    int best = -1;
    const char *p = s;
    while (*p) {
        uint64_t a, b;
        if (dlp_mon_parse_u64(&p, &a) != 0) return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (dlp_mon_parse_u64(&p, &b) != 0) return -1;
        }
        if ((int64_t)b > best) best = (int)(b > MAX_CPUS ? MAX_CPUS : b);
        if (*p == ',') p++;
        else if (*p && *p != '\n') return -1;
        else break;
    }
    return best;
}

// Parses the per-CPU lines ("cpuN user nice system idle iowait irq softirq steal ...") into slots; marks who is
// present. Returns the number of CPUs found, or -1 if the file has no per-CPU line.
static int parse_stat(cpu_state *s) {
    for (int i = 0; i < s->ncpu; i++) s->cpu[i].present = 0;
    int found = 0;
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        if (strncmp(p, "cpu", 3) != 0) {
            if (found) break;  // the CPU block is over (intr, ctxt, ...)
            continue;
        }
        const char *q = p + 3;
        if (*q < '0' || *q > '9') continue;  // the "cpu " total: we sum the cores we can pair instead
        uint64_t id;
        if (dlp_mon_parse_u64(&q, &id) != 0) continue;
        if (id >= (uint64_t)s->ncpu) {
            if (!s->warned_range) {
                DLP_WARN("monitor: cpu%llu in /proc/stat is beyond the %d CPUs counted at start; not monitored",
                         (unsigned long long)id, s->ncpu);
                s->warned_range = 1;
            }
            continue;
        }
        uint64_t v[NMODES] = {0};
        int m;
        for (m = 0; m < NMODES; m++)
            if (dlp_mon_parse_u64(&q, &v[m]) != 0) break;
        if (m < 4) continue;  // not even user/nice/system/idle: malformed line
        memcpy(s->cur[id], v, sizeof v);
        s->cpu[id].present = 1;
        found++;
    }
    return found ? found : -1;
}

static void cpu_close(void *state) {
    cpu_state *s = state;
    if (!s) return;
    dlp_mon_file_close(&s->f);
    free(s->cpu);
    free(s->cur);
    free(s);
}

static dlp_status cpu_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                size_t note_len) {
    dlp_status st;
    cpu_state *s = dlp_mon_file_state_open(sizeof *s, env, "/proc/stat", 16384, &st, note, note_len);
    if (!s) return st;
    char possible[256];
    int maxid = -1;
    if (dlp_mon_read_small(env, "/sys/devices/system/cpu/possible", possible, sizeof possible) == 0)
        maxid = max_in_cpu_list(possible);
    // Also count what /proc/stat shows now (the possible list may be missing, e.g. in a fixture).
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        const char *q = p + 3;
        uint64_t id;
        if (strncmp(p, "cpu", 3) == 0 && *q >= '0' && *q <= '9' && dlp_mon_parse_u64(&q, &id) == 0 &&
            (int64_t)id > maxid && id < MAX_CPUS)
            maxid = (int)id;
    }
    if (maxid < 0) {
        snprintf(note, note_len, "%s/proc/stat has no per-CPU lines", env->root);
        cpu_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    s->ncpu = maxid + 1;
    s->cpu = calloc((size_t)s->ncpu, sizeof *s->cpu);
    s->cur = calloc((size_t)s->ncpu, sizeof *s->cur);
    if (!s->cpu || !s->cur) {
        cpu_close(s);
        return DLP_ERR_NOMEM;
    }
    s->per_cpu_modes = env->per_cpu_modes;
    s->hz = sysconf(_SC_CLK_TCK);
    if (s->hz <= 0) s->hz = 100;
    int online = parse_stat(s);

    const int S = DLP_MON_F_SUMMARY;
    dlp_mon_fields_add(fl, "cpu", "all", "util_pct", DLP_MON_UNIT_PCT, S);
    for (int m = 0; m < NMODES; m++) {
        char name[32];
        snprintf(name, sizeof name, "%s_pct", k_modes[m]);
        dlp_mon_fields_add(fl, "cpu", "all", name, DLP_MON_UNIT_PCT, S);
    }
    dlp_mon_fields_add(fl, "cpu", "all", "busiest_core_pct", DLP_MON_UNIT_PCT, S);
    dlp_mon_fields_add(fl, "cpu", "all", "online", DLP_MON_UNIT_COUNT, S);
    for (int c = 0; c < s->ncpu; c++) {
        char inst[16];
        snprintf(inst, sizeof inst, "%d", c);
        dlp_mon_fields_add(fl, "cpu", inst, "util_pct", DLP_MON_UNIT_PCT, 0);
        if (s->per_cpu_modes)
            for (int m = 0; m < NMODES; m++) {
                char name[32];
                snprintf(name, sizeof name, "%s_pct", k_modes[m]);
                dlp_mon_fields_add(fl, "cpu", inst, name, DLP_MON_UNIT_PCT, 0);
            }
    }
    snprintf(note, note_len, "%d CPUs online of %d", online, s->ncpu);
    *state = s;
    return DLP_OK;
}

static void cpu_sample(void *state, double dt_s, double *vals) {
    cpu_state *s = state;
    const int per = 1 + (s->per_cpu_modes ? NMODES : 0);
    const int nall = NMODES + 3;
    int n = nall + s->ncpu * per;
    for (int i = 0; i < n; i++) vals[i] = NAN;
    if (dlp_mon_file_read(&s->f) != 0) {
        dlp_log_warn_limited("monitor.cpu.read", 3, "monitor: cannot re-read /proc/stat; CPU values missing");
        for (int c = 0; c < s->ncpu; c++) s->cpu[c].have_prev = s->cpu[c].present = 0;
        s->online = 0;
        return;
    }
    int online = 0;
    uint64_t sum[NMODES] = {0};
    uint64_t total_all = 0;
    double busiest = NAN;
    parse_stat(s);  // sets present[] and cur[]; have_prev[] still says who was there last time
    for (int c = 0; c < s->ncpu; c++) {
        cpu_slot *k = &s->cpu[c];
        if (!k->present) {
            k->have_prev = 0;
            continue;
        }
        online++;
        if (k->have_prev && dt_s > 0) {
            uint64_t d[NMODES], tot = 0;
            int bad = 0;
            for (int m = 0; m < NMODES; m++) {
                d[m] = dlp_mon_counter_delta(k->raw[m], s->cur[c][m], 0, &bad);
                tot += d[m];
            }
            if (bad) s->anomalies++;
            if (tot > 0) {
                double *v = vals + nall + c * per;
                double util = 100.0 * (double)(tot - d[M_IDLE] - d[M_IOWAIT]) / (double)tot;
                v[0] = util;
                if (s->per_cpu_modes)
                    for (int m = 0; m < NMODES; m++) v[1 + m] = 100.0 * (double)d[m] / (double)tot;
                if (isnan(busiest) || util > busiest) busiest = util;
                for (int m = 0; m < NMODES; m++) sum[m] += d[m];
                total_all += tot;
            }
        }
        memcpy(k->raw, s->cur[c], sizeof k->raw);
        k->have_prev = 1;
    }
    s->online = online;
    vals[NMODES + 2] = online;
    if (total_all > 0) {
        vals[0] = 100.0 * (double)(total_all - sum[M_IDLE] - sum[M_IOWAIT]) / (double)total_all;
        for (int m = 0; m < NMODES; m++) vals[1 + m] = 100.0 * (double)sum[m] / (double)total_all;
        vals[NMODES + 1] = busiest;
    }
}

static void cpu_prom(void *state, dlp_prom_buf *b) {
    cpu_state *s = state;
    dlp_prom_family(b, "dlperf_cpu_seconds_total", "counter",
                    "Seconds each CPU spent in each mode since boot (/proc/stat).");
    for (int c = 0; c < s->ncpu; c++) {
        if (!s->cpu[c].present || !s->cpu[c].have_prev) continue;
        char id[16];
        snprintf(id, sizeof id, "%d", c);
        for (int m = 0; m < NMODES; m++)
            dlp_prom_sample(b, "dlperf_cpu_seconds_total", (double)s->cpu[c].raw[m] / (double)s->hz, "cpu", id,
                            "mode", k_modes[m], (char *)NULL);
    }
    dlp_prom_family(b, "dlperf_cpus_online", "gauge", "CPUs online at the latest sample.");
    dlp_prom_sample(b, "dlperf_cpus_online", s->online, (char *)NULL);
    dlp_prom_family(b, "dlperf_cpu_time_decreases_total", "counter",
                    "CPU counter readings that went backwards (counted as zero for the interval).");
    dlp_prom_sample(b, "dlperf_cpu_time_decreases_total", (double)s->anomalies, (char *)NULL);
}

const dlp_mon_source_ops dlp_mon_src_cpu =
    DLP_MON_SOURCE_OPS(cpu, "per-core and total CPU utilization by mode (/proc/stat)", cpu_close);
