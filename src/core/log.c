// core/log: leveled messages on stderr.
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static dlp_log_level g_level = DLP_LOG_INFO;
static atomic_long g_warns;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void dlp_log_set_level(dlp_log_level lvl) { g_level = lvl; }
dlp_log_level dlp_log_get_level(void) { return g_level; }
long dlp_log_warn_count(void) { return atomic_load(&g_warns); }

static void vlog(dlp_log_level lvl, const char *fmt, va_list ap) {
    static const char *const prefix[] = {"error: ", "warning: ", "", "debug: "};
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "%s%s\n", prefix[lvl], buf);
    pthread_mutex_unlock(&g_lock);
}

void dlp_log(dlp_log_level lvl, const char *fmt, ...) {
    if (lvl == DLP_LOG_WARN) atomic_fetch_add(&g_warns, 1);
    if (lvl > g_level) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, fmt, ap);
    va_end(ap);
}

#define DLP_WARN_KEYS 64
static struct { char key[48]; int n; } g_keys[DLP_WARN_KEYS];

void dlp_log_warn_limited(const char *key, int limit, const char *fmt, ...) {
    atomic_fetch_add(&g_warns, 1);
    if (DLP_LOG_WARN > g_level) return;
    int show = 1, last = 0;
    if (key) {
        pthread_mutex_lock(&g_lock);
        int i;
        for (i = 0; i < DLP_WARN_KEYS && g_keys[i].key[0]; i++)
            if (strncmp(g_keys[i].key, key, sizeof g_keys[i].key - 1) == 0) break;
        if (i < DLP_WARN_KEYS) {
            if (!g_keys[i].key[0]) snprintf(g_keys[i].key, sizeof g_keys[i].key, "%s", key);
            g_keys[i].n++;
            show = g_keys[i].n <= limit;
            last = g_keys[i].n == limit;
        }
        pthread_mutex_unlock(&g_lock);
    }
    if (!show) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(DLP_LOG_WARN, fmt, ap);
    va_end(ap);
    if (last) dlp_log(DLP_LOG_INFO, "(further '%s' warnings are counted, not printed)", key);
}
