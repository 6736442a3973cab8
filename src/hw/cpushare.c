// hw/cpushare: the share of the cores this process's threads got while they wanted them (see cpushare.h).
#include "hw/cpushare.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "hw/host.h"

#define MAX_TASKS 512

typedef struct task_seen {
    long tid;
    uint64_t cpu_ns, wait_ns;  // as last read
    uint64_t acc_cpu_ns, acc_wait_ns;  // its growth within the interval
    int alive;                 // seen in the latest sample
} task_seen;

struct dlp_cpushare {
    pthread_t th;
    pthread_mutex_t mu;
    int stop, period_ms, cores;
    long self_tid;           // the sampler, left out
    int64_t t0_ns;
    double proc0_s;
    uint64_t cpu_ns, wait_ns;  // accumulated since the start
    int passive;             // OpenMP's idle threads sleep (OMP_WAIT_POLICY=passive): the share by the free cores
    dlp_load_meter load;     // passive: the allowed CPUs' busy time (/proc/stat, steal included) from the start
    task_seen t[MAX_TASKS];
    int n;
};

static int read_schedstat(const char *path, uint64_t *cpu, uint64_t *wait) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long a = 0, b = 0;
    int ok = fscanf(f, "%llu %llu", &a, &b) == 2;
    fclose(f);
    *cpu = a;
    *wait = b;
    return ok;
}

int dlp_cpushare_available(void) {
    uint64_t a, b;
    return read_schedstat("/proc/self/schedstat", &a, &b);
}

static double proc_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One pass over /proc/self/task: each thread's growth since it was last seen (all of it for a thread new since the
// start, `count` 0 for the baseline) added to the sums. Caller holds the mutex.
static void sample(dlp_cpushare *m, int count) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    for (int i = 0; i < m->n; i++) m->t[i].alive = 0;
    struct dirent *e;
    char path[96];
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        long tid = strtol(e->d_name, NULL, 10);
        if (tid == m->self_tid) continue;
        uint64_t cpu, wait;
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
        if (!read_schedstat(path, &cpu, &wait)) continue;
        task_seen *s = NULL;
        for (int i = 0; i < m->n; i++)
            if (m->t[i].tid == tid) s = &m->t[i];
        if (!s) {
            if (m->n >= MAX_TASKS) {  // drop the entries of threads gone (their part of the slowest share with them)
                int k = 0;
                for (int i = 0; i < m->n; i++)
                    if (m->t[i].alive) m->t[k++] = m->t[i];
                m->n = k;
            }
            if (m->n >= MAX_TASKS) continue;
            s = &m->t[m->n++];
            s->tid = tid;
            s->cpu_ns = s->wait_ns = 0;  // new since the start: all of its time is in the interval
            s->acc_cpu_ns = s->acc_wait_ns = 0;
        }
        if (count) {
            // a reused tid reads less than the thread before it: a new thread, counted from zero
            const int fresh = cpu < s->cpu_ns || wait < s->wait_ns;
            const uint64_t dc = fresh ? cpu : cpu - s->cpu_ns, dw = fresh ? wait : wait - s->wait_ns;
            m->cpu_ns += dc;
            m->wait_ns += dw;
            if (fresh) s->acc_cpu_ns = s->acc_wait_ns = 0;  // another thread under the same tid
            s->acc_cpu_ns += dc;
            s->acc_wait_ns += dw;
        }
        s->cpu_ns = cpu;
        s->wait_ns = wait;
        s->alive = 1;
    }
    closedir(d);
}

static void *sampler(void *p) {
    dlp_cpushare *m = p;
    pthread_mutex_lock(&m->mu);
    m->self_tid = (long)syscall(SYS_gettid);
    while (!m->stop) {
        pthread_mutex_unlock(&m->mu);
        struct timespec ts = {0, (long)m->period_ms * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&m->mu);
        if (!m->stop) sample(m, 1);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

dlp_cpushare *dlp_cpushare_start(int period_ms) {
    if (!dlp_cpushare_available()) return NULL;
    dlp_cpushare *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->period_ms = period_ms > 0 ? period_ms : 20;
    cpu_set_t set;
    m->cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (m->cores < 1) m->cores = 1;
    m->self_tid = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_lock(&m->mu);  // the sampler waits for the baseline
    if (pthread_create(&m->th, NULL, sampler, m) != 0) {
        pthread_mutex_unlock(&m->mu);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return NULL;
    }
    const char *wp = getenv("OMP_WAIT_POLICY");
    m->passive = wp && strcasecmp(wp, "passive") == 0;
    if (m->passive) dlp_load_meter_start_in(&m->load, DLP_HOST_CPUS_ALLOWED);
    m->t0_ns = dlp_now_ns();
    m->proc0_s = proc_cpu_s();
    sample(m, 0);
    pthread_mutex_unlock(&m->mu);
    return m;
}

static void fill(dlp_cpushare *m, dlp_cpushare_sample *out) {
    out->wall_s = dlp_ns_to_s(dlp_now_ns() - m->t0_ns);
    out->proc_cpu_s = proc_cpu_s() - m->proc0_s;
    out->cpu_s = (double)m->cpu_ns * 1e-9;
    out->wait_s = (double)m->wait_ns * 1e-9;
    out->raw_share = m->cpu_ns > 0 ? (double)m->cpu_ns / (double)(m->cpu_ns + m->wait_ns) : 0;
    out->runnable = out->wall_s > 0 ? (out->cpu_s + out->wait_s) / out->wall_s : 0;
    out->cores = m->cores;
    const double alone = out->runnable > m->cores ? m->cores / out->runnable : 1;
    out->share = out->raw_share > 0 ? out->raw_share / alone : 0;
    if (out->share > 1) out->share = 1;
    out->free_share = 0;
    // the cores other processes and the hypervisor took (NAN: unknown), and what is left of what the process wanted
    const double others = m->passive ? dlp_load_meter_cores(&m->load) : NAN;
    if (!isnan(others) && out->wall_s > 0.05 && out->runnable > 0) {
        const double want = out->runnable < m->cores ? out->runnable : m->cores;
        out->free_share = (m->cores - others) / want;
        if (out->free_share > 1) out->free_share = 1;
        if (out->free_share < 0.01) out->free_share = 0.01;
    }
    // the slowest thread among those that wanted a core at least a quarter of the interval
    out->slowest_share = 0;
    const double want_min = 0.25 * out->wall_s * 1e9;
    for (int i = 0; i < m->n; i++) {
        const task_seen *t = &m->t[i];
        const double want = (double)(t->acc_cpu_ns + t->acc_wait_ns);
        if (want <= 0 || want < want_min) continue;
        const double sh = (double)t->acc_cpu_ns / want;
        if (out->slowest_share == 0 || sh < out->slowest_share) out->slowest_share = sh;
    }
    // and, like the mean share, without the part the process waited for itself: a training run's loader thread
    // beside its compute threads (more runnable than cores) is in the run's own prediction already (the shared-cpu
    // cost), so read as others' load it was counted twice (issue 35: the bf16 two-thread run with a loader, slowest
    // thread 0.94 on a quiet machine, predicted 14-18% low at that share)
    out->slowest_raw = out->slowest_share;
    if (out->slowest_share > 0) {
        out->slowest_share /= alone;
        if (out->slowest_share > 1) out->slowest_share = 1;
    }
    // With passive waits every wake-up of a sleeping OpenMP thread counts as run-queue wait (issue 35: a training run
    // on the cpu device read 0.51-0.60 on an idle machine), which is not other processes' load: the share is then the
    // free cores' (what the probe's active-wait share reads too where others hold cores), and so is the slowest
    // thread's (its threads sleep at the barriers; the scheduler squeezes them alike: docs/model-validation.md).
    out->passive = m->passive;
    out->sched_share = out->share;
    if (m->passive && out->free_share > 0) {
        out->share = out->free_share;
        if (out->slowest_share > 0) out->slowest_share = out->free_share;
    }
}

void dlp_cpushare_read(dlp_cpushare *m, dlp_cpushare_sample *out) {
    memset(out, 0, sizeof *out);
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    sample(m, 1);
    fill(m, out);
    pthread_mutex_unlock(&m->mu);
}

void dlp_cpushare_stop(dlp_cpushare *m, dlp_cpushare_sample *out) {
    dlp_cpushare_sample s;
    dlp_cpushare_read(m, &s);
    if (out) *out = s;
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->th, NULL);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
