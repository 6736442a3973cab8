// monitor/sink_csv: the time series as CSV — a header "t_s,dt_s,unix_s,phase,<field>..." and one row per sample;
// an empty cell is a value the interval did not have (a CPU offline, a device gone). Phase names are quoted
// per RFC 4180 when they need it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/sink.h"

typedef struct {
    dlp_mon_sink_file file;
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
    dlp_status st = dlp_mon_sink_file_open(&s->file, path);
    if (st != DLP_OK) {
        free(s);
        return st;
    }
    s->n = nfields;
    fputs("t_s,dt_s,unix_s,phase", s->file.f);
    for (int i = 0; i < nfields; i++) {
        fputc(',', s->file.f);
        put_csv_text(s->file.f, fields[i].name);
    }
    fputc('\n', s->file.f);
    *state = s;
    return DLP_OK;
}

static dlp_status csv_write(void *state, const dlp_mon_row *row) {
    csv_state *s = state;
    fprintf(s->file.f, "%.3f,%.3f,%.3f,", row->t_s, row->dt_s, row->unix_s);
    put_csv_text(s->file.f, row->phase);
    for (int i = 0; i < s->n; i++) {
        double v = row->vals[i];
        if (isnan(v)) fputc(',', s->file.f);
        else fprintf(s->file.f, ",%.10g", v);
    }
    fputc('\n', s->file.f);
    return dlp_mon_sink_file_flush(&s->file);
}

static dlp_status csv_close(void *state) {
    csv_state *s = state;
    dlp_status st = dlp_mon_sink_file_close(&s->file);
    free(s);
    return st;
}

const dlp_mon_sink_ops dlp_mon_sink_csv = {"csv", csv_open, csv_write, csv_close};
