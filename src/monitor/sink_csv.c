// monitor/sink_csv: the time series as CSV — a header "t_s,dt_s,unix_s,phase,<field>..." and one row per sample;
// an empty cell is a value the interval did not have (a CPU offline, a device gone). Phase names are quoted
// per RFC 4180 when they need it.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "monitor/sink.h"

typedef struct {
    FILE *f;
    char *path;
    int n;
} csv_state;

static void put_csv_text(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

static dlp_status csv_open(void **state, const char *path, const dlp_mon_field *fields, int nfields) {
    csv_state *s = calloc(1, sizeof *s);
    DLP_TRY_ALLOC(s);
    s->path = strdup(path);
    dlp_status st = s->path ? dlp_fopen_new(path, &s->f) : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (st != DLP_OK) {
        free(s->path);
        free(s);
        return st;
    }
    s->n = nfields;
    fputs("t_s,dt_s,unix_s,phase", s->f);
    for (int i = 0; i < nfields; i++) {
        fputc(',', s->f);
        put_csv_text(s->f, fields[i].name);
    }
    fputc('\n', s->f);
    *state = s;
    return DLP_OK;
}

static dlp_status csv_write(void *state, const dlp_mon_row *row) {
    csv_state *s = state;
    fprintf(s->f, "%.3f,%.3f,%.3f,", row->t_s, row->dt_s, row->unix_s);
    put_csv_text(s->f, row->phase);
    for (int i = 0; i < s->n; i++) {
        double v = row->vals[i];
        if (isnan(v)) fputc(',', s->f);
        else fprintf(s->f, ",%.10g", v);
    }
    fputc('\n', s->f);
    if (fflush(s->f) != 0 || ferror(s->f))
        return DLP_ERR(DLP_ERR_IO, "cannot write the time series to %s: %s", s->path, strerror(errno));
    return DLP_OK;
}

static dlp_status csv_close(void *state) {
    csv_state *s = state;
    int bad = ferror(s->f);
    if (fclose(s->f) != 0) bad = 1;
    dlp_status st = bad ? DLP_ERR(DLP_ERR_IO, "the time series %s is incomplete: %s", s->path, strerror(errno)) : DLP_OK;
    free(s->path);
    free(s);
    return st;
}

const dlp_mon_sink_ops dlp_mon_sink_csv = {"csv", csv_open, csv_write, csv_close};
