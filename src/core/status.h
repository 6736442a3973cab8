// core/status: status codes and a per-thread error chain (message + the places it passed through).
// Defines: dlp_status, dlp_status_str, DLP_ERR, DLP_CHECK, DLP_TRY_ALLOC, dlp_err_msg, dlp_err_print, dlp_err_clear,
//          dlp_err_set_verbose.
#ifndef DLP_CORE_STATUS_H
#define DLP_CORE_STATUS_H
#include <stdio.h>

typedef enum {
    DLP_OK = 0,
    DLP_ERR_INVALID,      // bad argument or option
    DLP_ERR_IO,           // read/write/open failed
    DLP_ERR_NOMEM,        // allocation failed
    DLP_ERR_FORMAT,       // malformed file or data (JPEG, JSON, safetensors)
    DLP_ERR_UNSUPPORTED,  // valid request this build or machine cannot do
    DLP_ERR_NOTFOUND,     // file, device, key or name not found
    DLP_ERR_EXISTS,       // refusing to overwrite
    DLP_ERR_TIMEOUT,
    DLP_ERR_BUSY,         // queue full, resource in use
    DLP_ERR_CANCELLED,    // stopped by a signal or a caller
    DLP_ERR_NUMERIC,      // NaN/Inf or a check against a reference failed
    DLP_ERR_INTERNAL,     // a bug: an invariant did not hold
    DLP_STATUS_COUNT
} dlp_status;

const char *dlp_status_str(dlp_status s);

// Record a new error (replacing any earlier one on this thread) and return s.
dlp_status dlp_err_set(dlp_status s, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Append a place (file:line and the failed expression) to the current chain; returns s.
dlp_status dlp_err_trace(dlp_status s, const char *file, int line, const char *expr);
// Prefix context to the current message ("while loading x: <old message>").
void dlp_err_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *dlp_err_msg(void);   // "" when no error was recorded
dlp_status dlp_err_status(void); // last recorded status
void dlp_err_print(FILE *f);     // "error: <msg>\n"; verbose: then "  at file:line (expr)\n..."
// The source locations of the chain are for developers: printed only after dlp_err_set_verbose(1) (-v, --verbose
// or DLPERF_LOG=debug).
void dlp_err_set_verbose(int on);
int dlp_err_verbose(void);
void dlp_err_clear(void);

#define DLP_ERR(s, ...) dlp_err_set((s), __FILE__, __LINE__, __VA_ARGS__)
#define DLP_CHECK(expr)                                                   \
    do {                                                                  \
        dlp_status dlp_s_ = (expr);                                       \
        if (dlp_s_ != DLP_OK) return dlp_err_trace(dlp_s_, __FILE__, __LINE__, #expr); \
    } while (0)
// Like DLP_CHECK but jumps to a cleanup label, storing the status in `st`.
#define DLP_CHECK_GOTO(st, expr, label)                                   \
    do {                                                                  \
        (st) = (expr);                                                    \
        if ((st) != DLP_OK) { dlp_err_trace((st), __FILE__, __LINE__, #expr); goto label; } \
    } while (0)
#define DLP_TRY_ALLOC(ptr)                                                \
    do {                                                                  \
        if (!(ptr)) return DLP_ERR(DLP_ERR_NOMEM, "out of memory allocating %s", #ptr); \
    } while (0)

#endif
