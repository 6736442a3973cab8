// monitor/sink_null: the trivial sink — counts the rows it is given and writes nothing (keeps the sink path
// exercised when no file is asked for, and measures the sampler without I/O).
#include <stdlib.h>

#include "monitor/sink.h"

static dlp_status null_open(void **state, const char *path, const dlp_mon_field *fields, int nfields) {
    (void)path;
    (void)fields;
    (void)nfields;
    long *rows = calloc(1, sizeof *rows);
    DLP_TRY_ALLOC(rows);
    *state = rows;
    return DLP_OK;
}

static dlp_status null_write(void *state, const dlp_mon_row *row) {
    (void)row;
    ++*(long *)state;
    return DLP_OK;
}

static dlp_status null_close(void *state) {
    free(state);
    return DLP_OK;
}

const dlp_mon_sink_ops dlp_mon_sink_null = {"null", null_open, null_write, null_close};
