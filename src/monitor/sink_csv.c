// monitor/sink_csv: the time series as CSV — a header "t_s,dt_s,unix_s,phase,<field>..." and one row per sample;
// an empty cell is a value the interval did not have (a CPU offline, a device gone). Phase names are quoted
// per RFC 4180 when they need it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/sink.h"

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
    DLP_CHECK(dlp_mon_sink_file_open(state, path, fields, nfields));
    FILE *f = ((dlp_mon_sink_file *)*state)->f;
    fputs("t_s,dt_s,unix_s,phase", f);
    for (int i = 0; i < nfields; i++) {
        fputc(',', f);
        put_csv_text(f, fields[i].name);
    }
    fputc('\n', f);
    return DLP_OK;
}

static dlp_status csv_write(void *state, const dlp_mon_row *row) {
    dlp_mon_sink_file *s = state;
    fprintf(s->f, "%.3f,%.3f,%.3f,", row->t_s, row->dt_s, row->unix_s);
    put_csv_text(s->f, row->phase);
    for (int i = 0; i < s->n; i++) {
        double v = row->vals[i];
        if (isnan(v)) fputc(',', s->f);
        else fprintf(s->f, ",%.10g", v);
    }
    fputc('\n', s->f);
    return dlp_mon_sink_file_flush(s);
}

const dlp_mon_sink_ops dlp_mon_sink_csv = {"csv", csv_open, csv_write, dlp_mon_sink_file_close};
