// monitor/sink_jsonl: the time series as JSON lines — one object per sample per metric set, e.g.
// {"t_s":1.000,"dt_s":0.500,"unix_s":...,"phase":"epoch 1","set":"disk","instance":"vda","read_bytes_per_s":0,...}
// ("instance" is left out for singletons such as mem). A value the interval did not have is null. Written with
// fprintf, not a JSON library, so a sample allocates nothing.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/sink.h"

typedef struct {
    dlp_mon_sink_file file;
    const dlp_mon_field *fields;  // owned by the monitor, lives as long as the sink
    int n;
} jsonl_state;

static void put_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static dlp_status jsonl_open(void **state, const char *path, const dlp_mon_field *fields, int nfields) {
    jsonl_state *s = calloc(1, sizeof *s);
    DLP_TRY_ALLOC(s);
    dlp_status st = dlp_mon_sink_file_open(&s->file, path);
    if (st != DLP_OK) {
        free(s);
        return st;
    }
    s->fields = fields;
    s->n = nfields;
    *state = s;
    return DLP_OK;
}

static dlp_status jsonl_write(void *state, const dlp_mon_row *row) {
    jsonl_state *s = state;
    for (int i = 0; i < s->n;) {
        const dlp_mon_field *g = &s->fields[i];
        fprintf(s->file.f, "{\"t_s\":%.3f,\"dt_s\":%.3f,\"unix_s\":%.3f,\"phase\":", row->t_s, row->dt_s, row->unix_s);
        put_json_str(s->file.f, row->phase);
        fputs(",\"set\":", s->file.f);
        put_json_str(s->file.f, g->set);
        if (g->instance[0]) {
            fputs(",\"instance\":", s->file.f);
            put_json_str(s->file.f, g->instance);
        }
        // The metric set: consecutive fields with the same set and instance.
        int j = i;
        for (; j < s->n && strcmp(s->fields[j].set, g->set) == 0 && strcmp(s->fields[j].instance, g->instance) == 0;
             j++) {
            fputc(',', s->file.f);
            put_json_str(s->file.f, s->fields[j].metric);
            double v = row->vals[j];
            if (isnan(v) || isinf(v)) fputs(":null", s->file.f);
            else fprintf(s->file.f, ":%.10g", v);
        }
        fputs("}\n", s->file.f);
        i = j;
    }
    return dlp_mon_sink_file_flush(&s->file);
}

static dlp_status jsonl_close(void *state) {
    jsonl_state *s = state;
    dlp_status st = dlp_mon_sink_file_close(&s->file);
    free(s);
    return st;
}

const dlp_mon_sink_ops dlp_mon_sink_jsonl = {"jsonl", jsonl_open, jsonl_write, jsonl_close};
