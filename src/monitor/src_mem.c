// monitor/src_mem: system memory from /proc/meminfo — total, available (MemAvailable, or an estimate on kernels
// before 3.14), used, page cache and dirty pages.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "monitor/source.h"

enum { K_TOTAL, K_FREE, K_AVAIL, K_BUFFERS, K_CACHED, K_DIRTY, K_SWAP_TOTAL, K_SWAP_FREE, NKEYS };
static const char *const k_keys[NKEYS] = {"MemTotal:", "MemFree:",   "MemAvailable:", "Buffers:",
                                          "Cached:",   "Dirty:",     "SwapTotal:",    "SwapFree:"};

typedef struct {
    dlp_mon_file f;
    double v[NKEYS];  // bytes; NaN when the line is missing
    int estimated_avail;
    int have;
} mem_state;

static int parse_meminfo(mem_state *s) {
    for (int k = 0; k < NKEYS; k++) s->v[k] = NAN;
    int found = 0;
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        for (int k = 0; k < NKEYS; k++) {
            size_t kl = strlen(k_keys[k]);
            if (strncmp(p, k_keys[k], kl) != 0) continue;
            const char *q = p + kl;
            uint64_t x;
            if (dlp_mon_parse_u64(&q, &x) == 0) {
                while (*q == ' ') q++;
                s->v[k] = (double)x * (strncmp(q, "kB", 2) == 0 ? 1024.0 : 1.0);
                found++;
            }
            break;
        }
    }
    s->estimated_avail = 0;
    if (isnan(s->v[K_AVAIL]) && !isnan(s->v[K_FREE])) {
        // Kernels before 3.14: free + buffers + page cache is the usual stand-in.
        s->v[K_AVAIL] = s->v[K_FREE] + (isnan(s->v[K_BUFFERS]) ? 0 : s->v[K_BUFFERS]) +
                        (isnan(s->v[K_CACHED]) ? 0 : s->v[K_CACHED]);
        s->estimated_avail = 1;
    }
    return found;
}

static dlp_status mem_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                size_t note_len) {
    dlp_status st;
    mem_state *s = dlp_mon_file_state_open(sizeof *s, env, "/proc/meminfo", 4096, &st, note, note_len);
    if (!s) return st;
    parse_meminfo(s);
    if (isnan(s->v[K_TOTAL]) || isnan(s->v[K_AVAIL])) {
        snprintf(note, note_len, "%s/proc/meminfo has no MemTotal or MemFree line", env->root);
        dlp_mon_file_state_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    const int S = DLP_MON_F_SUMMARY;
    dlp_mon_fields_add(fl, "mem", NULL, "available_bytes", DLP_MON_UNIT_BYTES, S);
    dlp_mon_fields_add(fl, "mem", NULL, "used_bytes", DLP_MON_UNIT_BYTES, S);
    dlp_mon_fields_add(fl, "mem", NULL, "cached_bytes", DLP_MON_UNIT_BYTES, S);
    dlp_mon_fields_add(fl, "mem", NULL, "dirty_bytes", DLP_MON_UNIT_BYTES, S);
    snprintf(note, note_len, "%.1f GiB total%s", s->v[K_TOTAL] / (1 << 30),
             s->estimated_avail ? "; no MemAvailable (kernel < 3.14): estimated as free + buffers + cached" : "");
    *state = s;
    return DLP_OK;
}

static void mem_sample(void *state, double dt_s, double *vals) {
    mem_state *s = state;
    (void)dt_s;
    for (int i = 0; i < 4; i++) vals[i] = NAN;
    if (dlp_mon_file_read(&s->f) != 0 || parse_meminfo(s) == 0) {
        dlp_log_warn_limited("monitor.mem.read", 3, "monitor: cannot re-read /proc/meminfo; memory values missing");
        s->have = 0;
        return;
    }
    s->have = 1;
    // Gauges: a value at the end of the interval (also on the baseline call).
    vals[0] = s->v[K_AVAIL];
    vals[1] = s->v[K_TOTAL] - s->v[K_AVAIL];
    vals[2] = s->v[K_CACHED];
    vals[3] = s->v[K_DIRTY];
}

static void mem_prom(void *state, dlp_prom_buf *b) {
    mem_state *s = state;
    if (!s->have) return;
    static const struct { int key; const char *name, *help; } rows[] = {
        {K_TOTAL, "dlperf_memory_total_bytes", "Physical memory (MemTotal)."},
        {K_AVAIL, "dlperf_memory_available_bytes", "Memory available for new work without swapping (MemAvailable)."},
        {K_FREE, "dlperf_memory_free_bytes", "Unused memory (MemFree)."},
        {K_CACHED, "dlperf_memory_cached_bytes", "Page cache (Cached)."},
        {K_DIRTY, "dlperf_memory_dirty_bytes", "Memory waiting to be written back to disk (Dirty)."},
        {K_SWAP_TOTAL, "dlperf_memory_swap_total_bytes", "Swap space (SwapTotal)."},
        {K_SWAP_FREE, "dlperf_memory_swap_free_bytes", "Unused swap space (SwapFree)."},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (isnan(s->v[rows[i].key])) continue;
        dlp_prom_family(b, rows[i].name, "gauge", rows[i].help);
        dlp_prom_sample(b, rows[i].name, s->v[rows[i].key], (char *)NULL);
    }
}

const dlp_mon_source_ops dlp_mon_src_mem =
    DLP_MON_SOURCE_OPS(mem, "memory available, used, page cache, dirty (/proc/meminfo)", dlp_mon_file_state_close);
