// monitor/sink_jsonl: the time series as JSON lines — one object per sample per metric set, e.g.
// {"t_s":1.000,"dt_s":0.500,"unix_s":...,"phase":"epoch 1","set":"disk","instance":"vda","read_bytes_per_s":0,...}
// ("instance" is left out for singletons such as mem). A value the interval did not have is null. Written with
// fprintf, not a JSON library, so a sample allocates nothing.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/sink.h"

static void put_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static dlp_status jsonl_write(void *state, const dlp_mon_row *row) {
    dlp_mon_sink_file *s = state;
    for (int i = 0; i < s->n;) {
        const dlp_mon_field *g = &s->fields[i];
        fprintf(s->f, "{\"t_s\":%.3f,\"dt_s\":%.3f,\"unix_s\":%.3f,\"phase\":", row->t_s, row->dt_s, row->unix_s);
        put_json_str(s->f, row->phase);
        fputs(",\"set\":", s->f);
        put_json_str(s->f, g->set);
        if (g->instance[0]) {
            fputs(",\"instance\":", s->f);
            put_json_str(s->f, g->instance);
        }
        // The metric set: consecutive fields with the same set and instance.
        int j = i;
        for (; j < s->n && strcmp(s->fields[j].set, g->set) == 0 && strcmp(s->fields[j].instance, g->instance) == 0;
             j++) {
            fputc(',', s->f);
            put_json_str(s->f, s->fields[j].metric);
            double v = row->vals[j];
            if (isnan(v) || isinf(v)) fputs(":null", s->f);
            else fprintf(s->f, ":%.10g", v);
        }
        fputs("}\n", s->f);
        i = j;
    }
    return dlp_mon_sink_file_flush(s);
}

const dlp_mon_sink_ops dlp_mon_sink_jsonl = {"jsonl", dlp_mon_sink_file_open, jsonl_write, dlp_mon_sink_file_close};
