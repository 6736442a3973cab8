// hw/host: CPU, memory and library versions.
#include "hw/host.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <jpeglib.h>

#include "core/clock.h"
#include "core/fields.h"
#include "core/version.h"
#ifdef DLP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

static int has_flag(const char *flags, const char *f) {
    size_t n = strlen(f);
    for (const char *p = flags; (p = strstr(p, f)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

int dlp_host_cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void dlp_host_probe(dlp_host_info *h) {
    memset(h, 0, sizeof *h);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = '\0';
            if (!h->cpu_model[0] && strncmp(line, "model name", 10) == 0) snprintf(h->cpu_model, sizeof h->cpu_model, "%s", v);
            else if (h->mhz == 0 && strncmp(line, "cpu MHz", 7) == 0) sscanf(v, "%lf", &h->mhz);
            else if (strncmp(line, "flags", 5) == 0 && !h->avx2 && !h->avx512) {
                h->avx2 = has_flag(v, "avx2");
                h->avx512 = has_flag(v, "avx512f");
                h->avx512_bf16 = has_flag(v, "avx512_bf16");
                h->amx_bf16 = has_flag(v, "amx_bf16");
                h->amx_tile = has_flag(v, "amx_tile");
            }
        }
        fclose(f);
    }
    h->cpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    h->cpus_allowed = dlp_host_cpus_allowed();
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) h->mem_total_bytes = (int64_t)pages * psz;
    gethostname(h->hostname, sizeof h->hostname - 1);
    struct utsname u;
    if (uname(&u) == 0) snprintf(h->kernel, sizeof h->kernel, "%s", u.release);
}

static json_t *isa_write(const void *rec) {
    const dlp_host_info *h = rec;
    json_t *isa = json_array();
    if (h->avx2) json_array_append_new(isa, json_string("avx2"));
    if (h->avx512) json_array_append_new(isa, json_string("avx512f"));
    if (h->avx512_bf16) json_array_append_new(isa, json_string("avx512_bf16"));
    if (h->amx_bf16) json_array_append_new(isa, json_string("amx_bf16"));
    return isa;
}

#define HOST_F(m, t) DLP_FIELD(dlp_host_info, m, t, 0)
static const dlp_field_def k_host_fields[] = {
    {HOST_F(cpu_model, DLP_FT_STR)},    {HOST_F(hostname, DLP_FT_STR)},    {HOST_F(kernel, DLP_FT_STR)},
    {HOST_F(cpus_online, DLP_FT_INT)},  {HOST_F(cpus_allowed, DLP_FT_INT)}, {HOST_F(mhz, DLP_FT_NUM)},
    {HOST_F(mem_total_bytes, DLP_FT_INT)}, {DLP_FIELD_CB("isa", NULL, isa_write)}, {0}};

json_t *dlp_host_to_json(const dlp_host_info *h) {
    return dlp_fields_to_json(k_host_fields, h);
}

json_t *dlp_versions_to_json(void) {
    json_t *o = json_object();
    char buf[64];
    json_object_set_new(o, "dlperf", json_string(DLP_VERSION));
#ifdef DLP_GIT_COMMIT  // the Makefile's `git describe` of the tree this binary was built from
    json_object_set_new(o, "dlperf commit", json_string(DLP_GIT_COMMIT));
#endif
    json_object_set_new(o, "jansson", json_string(JANSSON_VERSION));
#ifdef LIBJPEG_TURBO_VERSION
#define DLP_STR2(x) #x
#define DLP_STR(x) DLP_STR2(x)
    json_object_set_new(o, "libjpeg-turbo", json_string(DLP_STR(LIBJPEG_TURBO_VERSION)));
#else
    snprintf(buf, sizeof buf, "libjpeg %d", JPEG_LIB_VERSION);
    json_object_set_new(o, "libjpeg", json_string(buf));
#endif
#ifdef DLP_HAVE_DNNL
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
    json_object_set_new(o, "oneDNN", json_string(buf));
    const char *cap = dlp_dnnl_isa_cap();
    if (cap) snprintf(buf, sizeof buf, "%s (capped at %.20s)", dlp_dnnl_isa_name(), cap);
    else snprintf(buf, sizeof buf, "%s", dlp_dnnl_isa_name());
    json_object_set_new(o, "oneDNN ISA", json_string(buf));
    json_object_set_new(o, "oneDNN kernels", json_string(dlp_dnnl_conv_kernels()));
#endif
    (void)buf;
    return o;
}

double dlp_host_cpus_busy_s_in(dlp_host_cpus which) {
    cpu_set_t set;
    if (which == DLP_HOST_CPUS_ALLOWED && sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    char line[512];
    unsigned long long sum = 0;
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        // "cpu  user nice system idle iowait irq softirq steal ..." (all CPUs), then "cpuN ..." (CPU N's)
        if (strncmp(line, "cpu", 3) != 0) continue;
        const char *p = line + 3;
        if (*p >= '0' && *p <= '9') {
            char *end;
            const long id = strtol(p, &end, 10);
            if (which != DLP_HOST_CPUS_ALLOWED || id >= CPU_SETSIZE || !CPU_ISSET(id, &set)) continue;
            p = end;
        } else if (which != DLP_HOST_CPUS_ALL) {
            continue;
        }
        unsigned long long v[8];
        if (sscanf(p, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]) != 8)
            continue;
        sum += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        seen++;
        if (which == DLP_HOST_CPUS_ALL) break;  // its one line
    }
    fclose(f);
    const long hz = sysconf(_SC_CLK_TCK);
    return seen ? (double)sum / (double)(hz > 0 ? hz : 100) : -1;
}

double dlp_host_cpus_busy_s(void) { return dlp_host_cpus_busy_s_in(DLP_HOST_CPUS_ALL); }

void dlp_load_meter_start_in(dlp_load_meter *m, dlp_host_cpus which) {
    m->which = which;
    m->busy_s = dlp_host_cpus_busy_s_in(which);
    m->own_ns = dlp_cpu_ns();
    m->wall_ns = dlp_now_ns();
}

void dlp_load_meter_start(dlp_load_meter *m) { dlp_load_meter_start_in(m, DLP_HOST_CPUS_ALL); }

double dlp_load_meter_cores(const dlp_load_meter *m) {
    double busy = dlp_host_cpus_busy_s_in(m->which);
    double wall = dlp_ns_to_s(dlp_now_ns() - m->wall_ns);
    if (m->busy_s < 0 || busy < 0 || !(wall > 0)) return NAN;
    double other = (busy - m->busy_s - dlp_ns_to_s(dlp_cpu_ns() - m->own_ns)) / wall;
    return other > 0 ? other : 0;
}

double dlp_wait_quiet(double max_s, double threshold_cores) {
    const int64_t end = dlp_now_ns() + (int64_t)(max_s * 1e9);
    double other = NAN;
    do {
        dlp_load_meter m;
        dlp_load_meter_start(&m);
        dlp_sleep_ns(500000000);
        other = dlp_load_meter_cores(&m);
        if (!(other > threshold_cores)) break;
    } while (dlp_now_ns() < end);
    return other;
}
