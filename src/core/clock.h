// core/clock: monotonic and CPU clocks in nanoseconds, sleeping, and a simple rate limiter.
// Defines: dlp_now_ns, dlp_cpu_ns, dlp_thread_cpu_ns, dlp_sleep_ns, dlp_wall_iso8601, dlp_cond_init_monotonic,
//          dlp_cond_wait_until.
#ifndef DLP_CORE_CLOCK_H
#define DLP_CORE_CLOCK_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

int64_t dlp_now_ns(void);         // CLOCK_MONOTONIC
int64_t dlp_cpu_ns(void);         // CPU time of the whole process
int64_t dlp_thread_cpu_ns(void);  // CPU time of the calling thread
void dlp_sleep_ns(int64_t ns);    // sleeps the full time, resuming after signals
void dlp_sleep_until_ns(int64_t deadline_ns);  // absolute CLOCK_MONOTONIC deadline
// "2026-11-30T05:23:09Z" (UTC) into buf; returns buf.
char *dlp_wall_iso8601(char *buf, size_t len);
// A condition variable whose timed waits take CLOCK_MONOTONIC deadlines (dlp_now_ns's clock), so a change of the
// wall clock neither shortens nor stretches them.
void dlp_cond_init_monotonic(pthread_cond_t *cv);
// Waits on such a condition variable (mu held) until signalled or until dlp_now_ns() reaches deadline_ns;
// pthread_cond_timedwait's result (ETIMEDOUT when the deadline passed).
int dlp_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);
static inline double dlp_ns_to_ms(int64_t ns) { return (double)ns * 1e-6; }
static inline double dlp_ns_to_s(int64_t ns) { return (double)ns * 1e-9; }

#endif
