// run/mllog: ":::MLLOG" lines.
#include "run/mllog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fs.h"

struct dlp_mllog {
    FILE *f;
    char path[1024];
};

dlp_status dlp_mllog_open(const char *path, dlp_mllog **out) {
    *out = NULL;
    dlp_mllog *m = calloc(1, sizeof *m);
    DLP_TRY_ALLOC(m);
    snprintf(m->path, sizeof m->path, "%s", path);
    dlp_status st = dlp_fopen_new(path, &m->f);
    if (st) {
        free(m);
        return st;
    }
    *out = m;
    return DLP_OK;
}

int64_t dlp_mllog_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *dlp_mllog_md(const char *k, json_t *v) {
    json_t *o = json_object();
    json_object_set_new(o, k, v);
    return o;
}

static const char *base_name(const char *path) {
    const char *p = strstr(path, "src/");
    return p ? p + 4 : path;
}

void dlp_mllog_event(dlp_mllog *m, dlp_mllog_type type, const char *key, json_t *value, json_t *metadata,
                     int64_t time_ms, const char *file, int line) {
    static const char *const k_types[] = {"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"};
    if (!m) {
        json_decref(value);
        json_decref(metadata);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "namespace", json_string(""));
    json_object_set_new(o, "time_ms", json_integer(time_ms > 0 ? time_ms : dlp_mllog_now_ms()));
    json_object_set_new(o, "event_type", json_string(k_types[type]));
    json_object_set_new(o, "key", json_string(key));
    json_object_set_new(o, "value", value ? value : json_null());
    json_t *md = json_object();
    json_object_set_new(md, "file", json_string(base_name(file)));
    json_object_set_new(md, "lineno", json_integer(line));
    if (metadata) json_object_update(md, metadata);
    json_decref(metadata);
    json_object_set_new(o, "metadata", md);
    char *s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));  // ", " and ": " as MLPerf's logger
    if (s) {
        fprintf(m->f, ":::MLLOG %s\n", s);
        fflush(m->f);
        free(s);
    }
    json_decref(o);
}

dlp_status dlp_mllog_close(dlp_mllog *m) {
    if (!m) return DLP_OK;
    dlp_status st = DLP_OK;
    if (m->f) {
        const int bad = ferror(m->f);
        if (fclose(m->f) != 0 || bad)  // a full disk: the log is cut short, and the run must say so
            st = DLP_ERR(DLP_ERR_IO, "cannot write the MLPerf log %s: it is incomplete", m->path);
    }
    free(m);
    return st;
}
