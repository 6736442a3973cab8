// monitor/sink_file: the file behind the CSV and JSON-lines sinks — created without overwriting, flushed after
// every sample (a run that dies keeps the rows written so far), and closed reporting whether it is complete.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "monitor/sink.h"

dlp_status dlp_mon_sink_file_open(void **state, const char *path, const dlp_mon_field *fields, int nfields) {
    dlp_mon_sink_file *sf = calloc(1, sizeof *sf);
    if (sf) sf->path = strdup(path);
    if (!sf || !sf->path) {
        free(sf);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    dlp_status st = dlp_fopen_new(path, &sf->f);
    if (st != DLP_OK) {
        free(sf->path);
        free(sf);
        return st;
    }
    sf->fields = fields;
    sf->n = nfields;
    *state = sf;
    return DLP_OK;
}

dlp_status dlp_mon_sink_file_flush(const dlp_mon_sink_file *sf) {
    if (fflush(sf->f) != 0 || ferror(sf->f))
        return DLP_ERR(DLP_ERR_IO, "cannot write the time series to %s: %s", sf->path, strerror(errno));
    return DLP_OK;
}

dlp_status dlp_mon_sink_file_close(void *state) {
    dlp_mon_sink_file *sf = state;
    int bad = ferror(sf->f);
    if (fclose(sf->f) != 0) bad = 1;
    dlp_status st = bad ? DLP_ERR(DLP_ERR_IO, "the time series %s is incomplete: %s", sf->path, strerror(errno)) : DLP_OK;
    free(sf->path);
    free(sf);
    return st;
}
