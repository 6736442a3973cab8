// core/log: leveled messages for humans on stderr; thread-safe, one line per call.
// Defines: dlp_log_level, dlp_log_set_level, dlp_log, DLP_INFO, DLP_WARN, DLP_DEBUG.
#ifndef DLP_CORE_LOG_H
#define DLP_CORE_LOG_H

typedef enum { DLP_LOG_ERROR = 0, DLP_LOG_WARN, DLP_LOG_INFO, DLP_LOG_DEBUG } dlp_log_level;

void dlp_log_set_level(dlp_log_level lvl);
dlp_log_level dlp_log_get_level(void);
void dlp_log(dlp_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Warnings are counted so a run can report how many it printed; repeats beyond `limit` per key are
// suppressed (key NULL: never suppressed).
void dlp_log_warn_limited(const char *key, int limit, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
long dlp_log_warn_count(void);

#define DLP_ERROR(...) dlp_log(DLP_LOG_ERROR, __VA_ARGS__)
#define DLP_WARN(...) dlp_log(DLP_LOG_WARN, __VA_ARGS__)
#define DLP_INFO(...) dlp_log(DLP_LOG_INFO, __VA_ARGS__)
#define DLP_DEBUG(...) dlp_log(DLP_LOG_DEBUG, __VA_ARGS__)

#endif
