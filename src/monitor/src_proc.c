// monitor/src_proc: CPU time and resident memory of the monitored process tree (the root pid and its
// descendants) from /proc/<pid>/stat. The tree is re-discovered every tree_scan_ns through
// /proc/<pid>/task/<tid>/children, or, on kernels without those files, by one bounded scan of /proc/*/stat
// parent ids; in between, each sample reads only the main threads' children files (new children show up within
// one interval) and the known processes' stat files, kept open. CPU time counts
// utime+stime+cutime+cstime of each live member, so children that exited and were reaped inside the tree stay
// counted (in their parent's cutime). At most MAX_PROCS processes are followed.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "monitor/source.h"

#define MAX_PROCS 4096
#define MAX_SCAN 32768  // /proc entries read by the fallback scan
#define HASH_SIZE 8192  // open addressing over pids, > 2 * MAX_PROCS / 2

typedef struct {
    int pid;
    int fd;               // /proc/<pid>/stat, kept open
    uint64_t start;       // starttime: tells a reused pid apart
} proc_ent;

typedef struct {
    uint64_t ticks;  // utime + stime + cutime + cstime
    uint64_t rss_pages;
    int64_t threads;
    int ppid;
    uint64_t start;
} proc_stat;

typedef struct {
    dlp_mon_env env;
    int root_pid;
    int use_children;
    proc_ent ents[MAX_PROCS];
    int n;
    int list[MAX_PROCS];  // discovery scratch
    int hash[HASH_SIZE];  // pid + 1, 0 = empty
    int *scan_pid, *scan_ppid;  // fallback scan scratch [MAX_SCAN]
    char buf[65536];
    double since_scan_s;
    uint64_t prev_ticks;
    int have_prev;
    double cpu_s;  // accumulated since the monitor started
    double rss_bytes, procs, threads;
    long hz, page;
    int64_t anomalies;
    int warned_cap;
} proc_state;

// Parses "/proc/<pid>/stat": "pid (comm) S ppid ... utime stime cutime cstime ... num_threads . starttime . rss".
static int parse_stat(const char *buf, proc_stat *out) {
    const char *p = strrchr(buf, ')');  // comm may contain blanks and parentheses
    if (!p) return -1;
    p++;
    memset(out, 0, sizeof *out);
    long long v[25] = {0};
    for (int field = 3; field <= 24; field++) {
        while (*p == ' ') p++;
        if (!*p || *p == '\n') return -1;
        if (field != 3) {
            char *end;
            v[field] = strtoll(p, &end, 10);
            if (end == p) return -1;
            p = end;
        } else {
            while (*p && *p != ' ') p++;
        }
    }
    out->ppid = (int)v[4];
    long long t = v[14] + v[15] + (v[16] > 0 ? v[16] : 0) + (v[17] > 0 ? v[17] : 0);
    out->ticks = t > 0 ? (uint64_t)t : 0;
    out->threads = v[20];
    out->start = (uint64_t)v[22];
    out->rss_pages = v[24] > 0 ? (uint64_t)v[24] : 0;
    return 0;
}

static int read_stat_fd(proc_state *s, int fd, proc_stat *st) {
    ssize_t r;
    do r = pread(fd, s->buf, 4095, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) return -1;
    s->buf[r] = '\0';
    return parse_stat(s->buf, st);
}

static int read_stat_pid(proc_state *s, int pid, proc_stat *st, int *fd_out) {
    char rel[64];
    snprintf(rel, sizeof rel, "/proc/%d/stat", pid);
    int fd = dlp_mon_open(&s->env, rel, O_RDONLY);
    if (fd < 0) return -1;
    int r = read_stat_fd(s, fd, st);
    if (r != 0 || !fd_out) close(fd);
    else *fd_out = fd;
    return r;
}

static int hash_add(proc_state *s, int pid) {  // 1 if added, 0 if present
    unsigned h = ((unsigned)pid * 2654435761u) % HASH_SIZE;
    while (s->hash[h]) {
        if (s->hash[h] == pid + 1) return 0;
        h = (h + 1) % HASH_SIZE;
    }
    s->hash[h] = pid + 1;
    return 1;
}

static int hash_has(const proc_state *s, int pid) {
    unsigned h = ((unsigned)pid * 2654435761u) % HASH_SIZE;
    while (s->hash[h]) {
        if (s->hash[h] == pid + 1) return 1;
        h = (h + 1) % HASH_SIZE;
    }
    return 0;
}

static int list_add(proc_state *s, int *n, int pid) {
    if (*n >= MAX_PROCS) {
        if (!s->warned_cap) {
            DLP_WARN("monitor: the process tree of %d has more than %d processes; only the first are counted",
                     s->root_pid, MAX_PROCS);
            s->warned_cap = 1;
        }
        return -1;
    }
    if (hash_add(s, pid)) s->list[(*n)++] = pid;
    return 0;
}

// Children created by one thread, from /proc/<pid>/task/<tid>/children ("101 102 ").
static void add_thread_children(proc_state *s, int pid, const char *tid, int *n) {
    char rel[96];
    snprintf(rel, sizeof rel, "/proc/%d/task/%.20s/children", pid, tid);
    int fd = dlp_mon_open(&s->env, rel, O_RDONLY);
    if (fd < 0) return;
    ssize_t r;
    do r = read(fd, s->buf, sizeof s->buf - 1);
    while (r < 0 && errno == EINTR);
    close(fd);
    if (r <= 0) return;
    s->buf[r] = '\0';
    const char *p = s->buf;
    uint64_t c;
    while (dlp_mon_parse_u64(&p, &c) == 0)
        if (list_add(s, n, (int)c) != 0) break;
}

// Children of pid: of every thread (full), or of the main thread only (the cheap check done every sample).
static void add_children(proc_state *s, int pid, int full, int *n) {
    char rel[96];
    if (!full) {
        snprintf(rel, sizeof rel, "%d", pid);
        add_thread_children(s, pid, rel, n);
        return;
    }
    snprintf(rel, sizeof rel, "/proc/%d/task", pid);
    dlp_mon_dir d;
    if (dlp_mon_dir_open(&d, &s->env, rel) != 0) return;
    for (const char *tid; (tid = dlp_mon_dir_next(&d));) add_thread_children(s, pid, tid, n);
    dlp_mon_dir_close(&d);
}

// Fallback: one pass over /proc/*/stat (at most MAX_SCAN entries) for parent ids, then the tree from them.
static void scan_ppids(proc_state *s, int *n) {
    dlp_mon_dir d;
    if (dlp_mon_dir_open(&d, &s->env, "/proc") != 0) return;
    int m = 0;
    for (const char *name; (name = dlp_mon_dir_next(&d)) && m < MAX_SCAN;) {
        if (name[0] < '0' || name[0] > '9') continue;
        int pid = atoi(name);
        proc_stat st;
        if (pid <= 0 || read_stat_pid(s, pid, &st, NULL) != 0) continue;
        s->scan_pid[m] = pid;
        s->scan_ppid[m] = st.ppid;
        m++;
    }
    dlp_mon_dir_close(&d);
    for (int added = 1; added;) {  // one pass per tree level
        added = 0;
        for (int i = 0; i < m; i++)
            if (!hash_has(s, s->scan_pid[i]) && hash_has(s, s->scan_ppid[i])) {
                if (list_add(s, n, s->scan_pid[i]) != 0) return;
                added = 1;
            }
    }
}

static void drop_ent(proc_state *s, int i) {
    if (s->ents[i].fd >= 0) close(s->ents[i].fd);
    s->ents[i] = s->ents[--s->n];
}

// Walks the tree and opens the processes not yet known. A full walk (every thread's children, or the /proc
// scan) rebuilds the set, dropping processes that left the tree; the cheap walk done on the other samples (main
// threads' children) only adds, so a new child shows up within one interval.
static void discover(proc_state *s, int full) {
    memset(s->hash, 0, sizeof s->hash);
    int n = 0;
    list_add(s, &n, s->root_pid);
    if (!full)
        for (int i = 0; i < s->n; i++) list_add(s, &n, s->ents[i].pid);
    if (s->use_children)
        for (int i = 0; i < n; i++) add_children(s, s->list[i], full, &n);
    else if (full)
        scan_ppids(s, &n);
    // Drop known processes that left the tree, then open the new ones.
    for (int i = 0; full && i < s->n;)
        if (!hash_has(s, s->ents[i].pid)) drop_ent(s, i);
        else i++;
    memset(s->hash, 0, sizeof s->hash);
    for (int i = 0; i < s->n; i++) hash_add(s, s->ents[i].pid);
    for (int i = 0; i < n && s->n < MAX_PROCS; i++) {
        if (hash_has(s, s->list[i])) continue;
        proc_stat st;
        int fd = -1;
        if (read_stat_pid(s, s->list[i], &st, &fd) != 0) continue;
        s->ents[s->n++] = (proc_ent){.pid = s->list[i], .fd = fd, .start = st.start};
    }
}

static void proc_close(void *state) {
    proc_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->n; i++)
        if (s->ents[i].fd >= 0) close(s->ents[i].fd);
    free(s->scan_pid);
    free(s->scan_ppid);
    free(s);
}

static dlp_status proc_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                 size_t note_len) {
    if (env->pid <= 0) {
        snprintf(note, note_len, "no process to follow (pid %d)", env->pid);
        return DLP_ERR_UNSUPPORTED;
    }
    proc_state *s = calloc(1, sizeof *s);
    if (!s) return DLP_ERR_NOMEM;
    s->env = *env;
    s->root_pid = env->pid;
    s->hz = sysconf(_SC_CLK_TCK);
    if (s->hz <= 0) s->hz = 100;
    s->page = sysconf(_SC_PAGESIZE);
    if (s->page <= 0) s->page = 4096;
    proc_stat st;
    if (read_stat_pid(s, s->root_pid, &st, NULL) != 0) {
        snprintf(note, note_len, "cannot read %s/proc/%d/stat: %s", env->root, s->root_pid,
                 errno ? strerror(errno) : "malformed");
        proc_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    char rel[96];
    snprintf(rel, sizeof rel, "/proc/%d/task/%d/children", s->root_pid, s->root_pid);
    int fd = dlp_mon_open(env, rel, O_RDONLY);
    s->use_children = fd >= 0;
    if (fd >= 0) close(fd);
    if (!s->use_children) {
        s->scan_pid = malloc(MAX_SCAN * sizeof *s->scan_pid);
        s->scan_ppid = malloc(MAX_SCAN * sizeof *s->scan_ppid);
        if (!s->scan_pid || !s->scan_ppid) {
            proc_close(s);
            return DLP_ERR_NOMEM;
        }
    }
    dlp_mon_fields_add(fl, "proc", NULL, "cpu_pct", DLP_MON_UNIT_PCT, DLP_MON_F_SUMMARY | DLP_MON_F_CPU_S);
    dlp_mon_fields_add(fl, "proc", NULL, "rss_bytes", DLP_MON_UNIT_BYTES, DLP_MON_F_SUMMARY);
    dlp_mon_fields_add(fl, "proc", NULL, "processes", DLP_MON_UNIT_COUNT, DLP_MON_F_SUMMARY);
    dlp_mon_fields_add(fl, "proc", NULL, "threads", DLP_MON_UNIT_COUNT, DLP_MON_F_SUMMARY);
    snprintf(note, note_len, "tree of pid %d (children found by %s)", s->root_pid,
             s->use_children ? "/proc/<pid>/task/<tid>/children" : "a scan of /proc/*/stat");
    s->rss_bytes = s->procs = s->threads = NAN;
    *state = s;
    return DLP_OK;
}

static void proc_sample(void *state, double dt_s, double *vals) {
    proc_state *s = state;
    for (int i = 0; i < 4; i++) vals[i] = NAN;
    s->since_scan_s += dt_s;
    int full = dt_s == 0 || s->since_scan_s * 1e9 >= (double)s->env.tree_scan_ns;
    if (full) s->since_scan_s = 0;
    discover(s, full);
    uint64_t ticks = 0, rss = 0;
    int64_t threads = 0;
    for (int i = 0; i < s->n;) {
        proc_stat st;
        if (read_stat_fd(s, s->ents[i].fd, &st) != 0 || st.start != s->ents[i].start) {
            drop_ent(s, i);  // exited (and reaped), or the pid was reused
            continue;
        }
        ticks += st.ticks;
        rss += st.rss_pages;
        threads += st.threads;
        i++;
    }
    if (s->n == 0) {  // the whole tree is gone
        s->have_prev = 0;
        s->rss_bytes = s->procs = s->threads = NAN;
        return;
    }
    s->rss_bytes = (double)rss * (double)s->page;
    s->procs = s->n;
    s->threads = (double)threads;
    if (s->have_prev && dt_s > 0) {
        // A member re-parented out of the tree takes its time with it: that reads as a decrease, counted 0.
        uint64_t d = 0;
        if (ticks >= s->prev_ticks) d = ticks - s->prev_ticks;
        else s->anomalies++;
        double cpu_s = (double)d / (double)s->hz;
        s->cpu_s += cpu_s;
        vals[0] = 100.0 * cpu_s / dt_s;
    }
    s->prev_ticks = ticks;
    s->have_prev = 1;
    vals[1] = s->rss_bytes;
    vals[2] = s->procs;
    vals[3] = s->threads;
}

static void proc_prom(void *state, dlp_prom_buf *b) {
    proc_state *s = state;
    dlp_prom_family(b, "dlperf_process_cpu_seconds_total", "counter",
                    "CPU seconds used by the monitored process tree since the monitor started.");
    dlp_prom_sample(b, "dlperf_process_cpu_seconds_total", s->cpu_s, (char *)NULL);
    if (isnan(s->rss_bytes)) return;
    dlp_prom_family(b, "dlperf_process_resident_memory_bytes", "gauge",
                    "Resident memory of the monitored process tree (sum over its processes).");
    dlp_prom_sample(b, "dlperf_process_resident_memory_bytes", s->rss_bytes, (char *)NULL);
    dlp_prom_family(b, "dlperf_processes", "gauge", "Processes in the monitored tree.");
    dlp_prom_sample(b, "dlperf_processes", s->procs, (char *)NULL);
    dlp_prom_family(b, "dlperf_process_threads", "gauge", "Threads in the monitored process tree.");
    dlp_prom_sample(b, "dlperf_process_threads", s->threads, (char *)NULL);
}

const dlp_mon_source_ops dlp_mon_src_proc =
    DLP_MON_SOURCE_OPS(proc,
                       "CPU time and resident memory of the monitored process tree (/proc/<pid>/stat)",
                       proc_close);
