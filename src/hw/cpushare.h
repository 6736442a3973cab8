// hw/cpushare: the share of the cores this process's threads got while they wanted them. On a machine time-shared
// with other processes (or tenants) a thread that is ready to run waits on the run queue; the kernel counts that wait
// per thread (/proc/self/task/*/schedstat: CPU time, run-queue wait). Over an interval, the CPU time over CPU time plus
// run-queue wait of every thread of the process is the fraction of its wanted time it ran: 1 on a machine to itself,
// 0.5 when every ready thread shared its core with one other. A thread that sleeps or blocks (an idle loader, an
// emulated device) adds neither, so the share is that of the work done, however busy the process was. A process with
// more runnable threads than cores waits for itself too: `share` takes that part out (the probe's oversubscribed
// loader rows and a training run's loader beside its compute threads keep it in their own rates).
// Defines: dlp_cpushare (start, stop, free), dlp_cpushare_sample, dlp_cpushare_available.
#ifndef DLP_HW_CPUSHARE_H
#define DLP_HW_CPUSHARE_H
#include <stdint.h>

typedef struct dlp_cpushare_sample {
    double wall_s;     // the interval
    double cpu_s;      // CPU time of the process's threads in it (schedstat; threads gone before a sample: up to
                       // one sampling period of theirs is missed, in both sums alike)
    double wait_s;     // their time ready to run but waiting for a core
    double proc_cpu_s; // the process's CPU time in it (CLOCK_PROCESS_CPUTIME_ID, every thread, exact)
    double raw_share;  // cpu_s / (cpu_s + wait_s); 0 when unknown (nothing ran, or schedstat unreadable)
    double runnable;   // (cpu_s + wait_s) / wall_s: how many of the process's threads wanted a core, on average
    int cores;         // CPUs the process may run on
    double share;      // raw_share over what the process would get alone: more runnable threads than cores wait
                       // for each other (min(1, cores / runnable)), which is not the machine's other work. 0: unknown
    double slowest_share;  // the lowest share of one thread (its CPU over CPU plus wait) among the threads that wanted
                           // a core at least a quarter of the interval: what a fork-join step waits for (issue 35:
                           // the cpu backend's two-thread steps went at it, not at the mean share); like `share`,
                           // over what it would get alone (min(1, cores / runnable)), at most 1. 0: none such
    double slowest_raw;    // that thread's CPU over CPU plus wait as measured (its own threads' part not taken out)
    double free_share; // with OpenMP's passive waits (OMP_WAIT_POLICY=passive, dlperf train's default on the cpu
                       // device): the cores the machine's other processes and the hypervisor left (allowed CPUs'
                       // busy time in /proc/stat less this process's) over the cores the process wanted (its
                       // runnable threads, at most the cores), at most 1; 0: not measured (active waits)
    double sched_share; // the run-queue share as measured (share before the passive case below)
    int passive;        // measured with passive waits: `share` and `slowest_share` are free_share (the run-queue wait
                        // of a passive process counts every OpenMP wake-up, so it is not comparable with the probe's)
} dlp_cpushare_sample;

typedef struct dlp_cpushare dlp_cpushare;
// 1 when this kernel reports the run-queue wait (/proc/self/schedstat readable).
int dlp_cpushare_available(void);
// Starts a meter: a thread samples every thread's schedstat every period_ms (<= 0: 20 ms), so that threads which
// end within the interval are counted too. NULL when unavailable (out of memory, no schedstat).
dlp_cpushare *dlp_cpushare_start(int period_ms);
// The interval so far (the meter keeps running).
void dlp_cpushare_read(dlp_cpushare *m, dlp_cpushare_sample *out);
// The interval, and the meter stopped and freed (out may be NULL; m NULL: out zeroed).
void dlp_cpushare_stop(dlp_cpushare *m, dlp_cpushare_sample *out);

#endif
