// core/clock: clocks and sleeping.
#include "core/clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static int64_t ts_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t dlp_now_ns(void) { return ts_ns(CLOCK_MONOTONIC); }
int64_t dlp_cpu_ns(void) { return ts_ns(CLOCK_PROCESS_CPUTIME_ID); }
int64_t dlp_thread_cpu_ns(void) { return ts_ns(CLOCK_THREAD_CPUTIME_ID); }

void dlp_sleep_until_ns(int64_t deadline_ns) {
    if (deadline_ns <= 0) return;
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000LL, .tv_nsec = deadline_ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void dlp_sleep_ns(int64_t ns) {
    if (ns > 0) dlp_sleep_until_ns(dlp_now_ns() + ns);
}

char *dlp_wall_iso8601(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void dlp_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

int dlp_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns) {
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000LL, .tv_nsec = deadline_ns % 1000000000LL};
    return pthread_cond_timedwait(cv, mu, &ts);
}
