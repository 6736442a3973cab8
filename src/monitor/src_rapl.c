// monitor/src_rapl: CPU package, core and DRAM energy from the RAPL powercap interface
// (/sys/class/powercap/intel-rapl:*/energy_uj; AMD Zen CPUs appear there too on recent kernels). energy_uj wraps
// at max_energy_range_uj; it is readable by root only since Linux 5.10, and an unreadable zone makes the domain
// "not available", never an error.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "monitor/source.h"

#define MAX_ZONES 32

typedef struct {
    char dir[64];     // "intel-rapl:0:1"
    char domain[64];  // "package-0", "package-0/dram"
    dlp_mon_file f;
    uint64_t max_uj;  // wrap point (0: unknown)
    uint64_t prev_uj;
    int have_prev;
    double energy_j;  // accumulated since the monitor started
    double power_w;   // over the latest interval
} rapl_zone;

typedef struct {
    rapl_zone z[MAX_ZONES];
    int n;
    int64_t anomalies;
} rapl_state;

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void rapl_close(void *state) {
    rapl_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->n; i++) dlp_mon_file_close(&s->z[i].f);
    free(s);
}

static int read_u64_file(dlp_mon_file *f, uint64_t *out) {
    int e = dlp_mon_file_read(f);
    if (e) return e;
    const char *p = f->buf;
    return dlp_mon_parse_u64(&p, out) == 0 ? 0 : EINVAL;
}

static const char *hint_for(int e) {
    if (e == EACCES || e == EPERM)
        return " (energy_uj is readable by root only since Linux 5.10; run as root or make it readable)";
    return "";
}

static dlp_status rapl_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                 size_t note_len) {
    dlp_mon_dir d;
    int e = dlp_mon_dir_open(&d, env, "/sys/class/powercap");
    if (e == ENOENT) {
        snprintf(note, note_len, "no %s/sys/class/powercap: no powercap driver (a VM, or a kernel without RAPL)",
                 env->root);
        return DLP_ERR_UNSUPPORTED;
    }
    if (e) {
        snprintf(note, note_len, "cannot list %s/sys/class/powercap: %s", env->root, strerror(e));
        return DLP_ERR_UNSUPPORTED;
    }
    char dirs[MAX_ZONES][64];
    int nd = 0;
    for (const char *name; (name = dlp_mon_dir_next(&d)) && nd < MAX_ZONES;)
        if (strncmp(name, "intel-rapl:", 11) == 0 && strlen(name) < sizeof dirs[0])  // not intel-rapl-mmio (dup)
            snprintf(dirs[nd++], sizeof dirs[0], "%s", name);
    dlp_mon_dir_close(&d);
    if (nd == 0) {
        snprintf(note, note_len,
                 "no intel-rapl:* zone in %s/sys/class/powercap (RAPL driver not loaded: modprobe intel_rapl_msr)",
                 env->root);
        return DLP_ERR_UNSUPPORTED;
    }
    qsort(dirs, (size_t)nd, sizeof dirs[0], cmp_str);  // parents before their sub-zones

    rapl_state *s = calloc(1, sizeof *s);
    if (!s) return DLP_ERR_NOMEM;
    char names[MAX_ZONES][64];
    char unreadable[512] = "";
    size_t uw = 0;
    int first_err = 0;
    char first_path[1100] = "";
    for (int i = 0; i < nd; i++) {
        char rel[160];
        snprintf(rel, sizeof rel, "/sys/class/powercap/%s/name", dirs[i]);
        if (dlp_mon_read_small(env, rel, names[i], sizeof names[i]) != 0 || !names[i][0])
            snprintf(names[i], sizeof names[i], "%s", dirs[i]);
        // Domain: a sub-zone (two colons) is named after its parent: "package-0/dram".
        char domain[64];
        const char *last = strrchr(dirs[i], ':');
        const char *firstc = strchr(dirs[i], ':');
        snprintf(domain, sizeof domain, "%s", names[i]);
        if (last != firstc) {
            for (int j = 0; j < i; j++)
                if (strncmp(dirs[j], dirs[i], (size_t)(last - dirs[i])) == 0 && dirs[j][last - dirs[i]] == '\0') {
                    snprintf(domain, sizeof domain, "%.31s/%.31s", names[j], names[i]);
                    break;
                }
        }
        rapl_zone *z = &s->z[s->n];
        snprintf(rel, sizeof rel, "/sys/class/powercap/%s/energy_uj", dirs[i]);
        e = dlp_mon_file_open(&z->f, env, rel, 64);
        uint64_t uj = 0;
        if (e == 0) e = read_u64_file(&z->f, &uj);
        if (e) {
            dlp_mon_file_close(&z->f);
            if (!first_err) {
                first_err = e;
                dlp_mon_path(env, rel, first_path, sizeof first_path);
            }
            if (uw < sizeof unreadable)
                uw += (size_t)snprintf(unreadable + uw, sizeof unreadable - uw, "%s%s (%s)", uw ? ", " : "", domain,
                                       strerror(e));
            continue;
        }
        snprintf(z->dir, sizeof z->dir, "%s", dirs[i]);
        snprintf(z->domain, sizeof z->domain, "%s", domain);
        char buf[64];
        snprintf(rel, sizeof rel, "/sys/class/powercap/%s/max_energy_range_uj", dirs[i]);
        const char *p = buf;
        if (dlp_mon_read_small(env, rel, buf, sizeof buf) != 0 || dlp_mon_parse_u64(&p, &z->max_uj) != 0) z->max_uj = 0;
        z->power_w = NAN;
        s->n++;
    }
    if (s->n == 0) {
        snprintf(note, note_len, "%s: %s%s", first_path, strerror(first_err), hint_for(first_err));
        rapl_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    size_t w = 0;
    for (int i = 0; i < s->n; i++) {
        dlp_mon_fields_add(fl, "rapl", s->z[i].domain, "power_w", DLP_MON_UNIT_W, DLP_MON_F_SUMMARY);
        if (w < note_len) w += (size_t)snprintf(note + w, note_len - w, "%s%s", i ? " " : "", s->z[i].domain);
    }
    if (unreadable[0] && w < note_len) snprintf(note + w, note_len - w, "; not readable: %s", unreadable);
    *state = s;
    return DLP_OK;
}

static void rapl_sample(void *state, double dt_s, double *vals) {
    rapl_state *s = state;
    for (int i = 0; i < s->n; i++) {
        rapl_zone *z = &s->z[i];
        vals[i] = NAN;
        uint64_t uj;
        if (read_u64_file(&z->f, &uj) != 0) {
            dlp_log_warn_limited("monitor.rapl.read", 3, "monitor: cannot re-read RAPL %s energy; value missing",
                                 z->domain);
            z->have_prev = 0;
            z->power_w = NAN;
            continue;
        }
        if (z->have_prev && dt_s > 0) {
            int bad = 0;
            uint64_t d = dlp_mon_counter_delta(z->prev_uj, uj, z->max_uj, &bad);
            if (bad) s->anomalies++;
            z->energy_j += (double)d * 1e-6;
            z->power_w = (double)d * 1e-6 / dt_s;
            vals[i] = z->power_w;
        }
        z->prev_uj = uj;
        z->have_prev = 1;
    }
}

static void rapl_prom(void *state, dlp_prom_buf *b) {
    rapl_state *s = state;
    dlp_prom_family(b, "dlperf_rapl_energy_joules_total", "counter",
                    "Energy used by the RAPL domain since the monitor started (wraps of energy_uj handled).");
    for (int i = 0; i < s->n; i++)
        dlp_prom_sample(b, "dlperf_rapl_energy_joules_total", s->z[i].energy_j, "domain", s->z[i].domain,
                        (char *)NULL);
    dlp_prom_family(b, "dlperf_rapl_power_watts", "gauge", "Mean power of the RAPL domain over the latest interval.");
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->z[i].power_w))
            dlp_prom_sample(b, "dlperf_rapl_power_watts", s->z[i].power_w, "domain", s->z[i].domain, (char *)NULL);
}

const dlp_mon_source_ops dlp_mon_src_rapl =
    DLP_MON_SOURCE_OPS(rapl,
                       "CPU package, core and DRAM power from RAPL (/sys/class/powercap/intel-rapl:*)",
                       rapl_close);
