// core/json: jansson helpers.
#include "core/json.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/version.h"

dlp_status dlp_json_write(const json_t *obj, const char *path, int flags) {
    char *s = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!s) return DLP_ERR(DLP_ERR_NOMEM, "cannot serialize JSON for %s", path);
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory writing %s", path);
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    dlp_status st = dlp_write_atomic(path, t, n + 1, flags);
    free(t);
    return st;
}

dlp_status dlp_json_load(const char *path, json_t **out) {
    json_error_t e;
    *out = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (!*out) {
        if (e.line <= 0) return DLP_ERR(DLP_ERR_NOTFOUND, "cannot read %s: %s", path, e.text);
        return DLP_ERR(DLP_ERR_FORMAT, "%s:%d:%d: malformed JSON: %s", path, e.line, e.column, e.text);
    }
    return DLP_OK;
}

static dlp_status missing(const char *key, const char *where, const char *want) {
    return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not %s", where ? where : "JSON", key, want);
}

dlp_status dlp_json_get_num(const json_t *obj, const char *key, double *out, const char *where) {
    json_t *v = json_object_get(obj, key);
    if (!v || !json_is_number(v)) return missing(key, where, "a number");
    *out = json_number_value(v);
    return DLP_OK;
}

dlp_status dlp_json_get_int(const json_t *obj, const char *key, int64_t *out, const char *where) {
    json_t *v = json_object_get(obj, key);
    if (!v || !json_is_integer(v)) return missing(key, where, "an integer");
    *out = json_integer_value(v);
    return DLP_OK;
}

dlp_status dlp_json_get_str(const json_t *obj, const char *key, const char **out, const char *where) {
    json_t *v = json_object_get(obj, key);
    if (!v || !json_is_string(v)) return missing(key, where, "a string");
    *out = json_string_value(v);
    return DLP_OK;
}

dlp_status dlp_json_opt_num(const json_t *obj, const char *key, double def, double *out, const char *where) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return DLP_OK;
    }
    if (!json_is_number(v)) return missing(key, where, "a number");
    *out = json_number_value(v);
    return DLP_OK;
}

static int g_argc;
static char **g_argv;
void dlp_json_set_argv(int argc, char **argv) {
    g_argc = argc;
    g_argv = argv;
}

json_t *dlp_json_real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *dlp_json_result_new(const char *schema, int argc, char **argv) {
    if (!argv) {
        argc = g_argc;
        argv = g_argv;
    }
    json_t *r = json_object();
    char when[32];
    json_object_set_new(r, "schema", json_string(schema));
    json_object_set_new(r, "dlperf_version", json_string(DLP_VERSION));
    json_object_set_new(r, "created", json_string(dlp_wall_iso8601(when, sizeof when)));
    json_t *a = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(a, json_string(argv[i]));
    json_object_set_new(r, "argv", a);
    return r;
}
