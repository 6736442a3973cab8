// core/status: status strings and the per-thread error chain.
#include "core/status.h"

#include <stdarg.h>
#include <string.h>

#define DLP_ERR_MSG_MAX 1024
#define DLP_ERR_TRACE_MAX 16

typedef struct {
    dlp_status status;
    char msg[DLP_ERR_MSG_MAX];
    int ntrace;
    char trace[DLP_ERR_TRACE_MAX][160];
} dlp_err_state;

static _Thread_local dlp_err_state g_err;
static int g_err_verbose;  // print the chain of places (-v); users get the message alone

void dlp_err_set_verbose(int on) { g_err_verbose = on; }
int dlp_err_verbose(void) { return g_err_verbose; }

static const char *const k_status_str[DLP_STATUS_COUNT] = {
    [DLP_OK] = "ok",
    [DLP_ERR_INVALID] = "invalid argument",
    [DLP_ERR_IO] = "I/O error",
    [DLP_ERR_NOMEM] = "out of memory",
    [DLP_ERR_FORMAT] = "malformed data",
    [DLP_ERR_UNSUPPORTED] = "not supported",
    [DLP_ERR_NOTFOUND] = "not found",
    [DLP_ERR_EXISTS] = "already exists",
    [DLP_ERR_TIMEOUT] = "timed out",
    [DLP_ERR_BUSY] = "busy",
    [DLP_ERR_CANCELLED] = "cancelled",
    [DLP_ERR_NUMERIC] = "numerical error",
    [DLP_ERR_INTERNAL] = "internal error",
};

const char *dlp_status_str(dlp_status s) {
    if ((int)s < 0 || s >= DLP_STATUS_COUNT) return "unknown status";
    return k_status_str[s];
}

static const char *base_name(const char *path) {
    const char *p = strstr(path, "src/");
    if (p) return p + 4;
    p = strrchr(path, '/');
    return p ? p + 1 : path;
}

dlp_status dlp_err_set(dlp_status s, const char *file, int line, const char *fmt, ...) {
    g_err.status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err.msg, sizeof g_err.msg, fmt, ap);
    va_end(ap);
    g_err.ntrace = 0;
    snprintf(g_err.trace[g_err.ntrace++], sizeof g_err.trace[0], "%s:%d", base_name(file), line);
    return s;
}

dlp_status dlp_err_trace(dlp_status s, const char *file, int line, const char *expr) {
    if (g_err.msg[0] == '\0') {  // a status returned without a message: still say something
        g_err.status = s;
        snprintf(g_err.msg, sizeof g_err.msg, "%s", dlp_status_str(s));
        g_err.ntrace = 0;
    }
    if (g_err.ntrace < DLP_ERR_TRACE_MAX) {
        char e[96];
        snprintf(e, sizeof e, "%s", expr);
        snprintf(g_err.trace[g_err.ntrace++], sizeof g_err.trace[0], "%s:%d (%s)", base_name(file), line, e);
    }
    return s;
}

void dlp_err_context(const char *fmt, ...) {
    char pre[512], old[DLP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, g_err.msg, sizeof old);
    if (old[0])
        snprintf(g_err.msg, sizeof g_err.msg, "%s: %s", pre, old);
    else
        snprintf(g_err.msg, sizeof g_err.msg, "%s", pre);
}

const char *dlp_err_msg(void) { return g_err.msg; }
dlp_status dlp_err_status(void) { return g_err.status; }

void dlp_err_print(FILE *f) {
    fprintf(f, "error: %s\n", g_err.msg[0] ? g_err.msg : "unknown error");
    if (!g_err_verbose) return;
    for (int i = 0; i < g_err.ntrace; i++) fprintf(f, "  at %s\n", g_err.trace[i]);
}

void dlp_err_clear(void) {
    g_err.status = DLP_OK;
    g_err.msg[0] = '\0';
    g_err.ntrace = 0;
}
