// core/fields: range-checked JSON fields for the catalog and profiles.
#include "core/fields.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"

static dlp_status range_err(const char *where, const char *key, const char *want, double got) {
    return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' must be %s (got %g)", where ? where : "JSON", key, want, got);
}

// No quantity a record holds (seconds, bytes, bytes/s, watts, dollars) is anywhere near 1e15 of its unit: a larger
// value is a corrupt or hostile file, and taken it would print "inf" and zero capacities downstream.
static dlp_status cap_check(const char *where, const char *key, double v, double cap) {
    if (fabs(v) <= cap) return DLP_OK;
    char want[80];
    snprintf(want, sizeof want, "at most %g in size (an implausible value)", cap);
    return range_err(where, key, want, v);
}

dlp_status dlp_field_pos(const json_t *o, const char *key, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (!(*out > 0) || !isfinite(*out)) return range_err(where, key, "> 0", *out);
    return cap_check(where, key, *out, DLP_FIELD_NUM_MAX);
}

dlp_status dlp_field_nonneg(const json_t *o, const char *key, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (!(*out >= 0) || !isfinite(*out)) return range_err(where, key, ">= 0", *out);
    return cap_check(where, key, *out, DLP_FIELD_NUM_MAX);
}

dlp_status dlp_field_range(const json_t *o, const char *key, double lo, double hi, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (*out >= lo && *out <= hi) return DLP_OK;
    char want[80];
    snprintf(want, sizeof want, "between %g and %g", lo, hi);
    return range_err(where, key, want, *out);
}

dlp_status dlp_field_opt_range(const json_t *o, const char *key, double def, double lo, double hi, double *out,
                               const char *where) {
    if (!json_object_get(o, key) || json_is_null(json_object_get(o, key))) {
        *out = def;
        return DLP_OK;
    }
    return dlp_field_range(o, key, lo, hi, out, where);
}

dlp_status dlp_field_opt_pos(const json_t *o, const char *key, double def, double *out, const char *where) {
    if (!json_object_get(o, key) || json_is_null(json_object_get(o, key))) {
        *out = def;
        return DLP_OK;
    }
    return dlp_field_pos(o, key, out, where);
}

dlp_status dlp_field_opt_nonneg(const json_t *o, const char *key, double def, double *out, const char *where) {
    if (!json_object_get(o, key) || json_is_null(json_object_get(o, key))) {
        *out = def;
        return DLP_OK;
    }
    return dlp_field_nonneg(o, key, out, where);
}

dlp_status dlp_field_frac(const json_t *o, const char *key, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (!(*out >= 0 && *out <= 1)) return range_err(where, key, "between 0 and 1", *out);
    return DLP_OK;
}

dlp_status dlp_field_int(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, const char *where) {
    DLP_CHECK(dlp_json_get_int(o, key, out, where));
    if (*out < lo || *out > hi) {
        char want[64];
        snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return range_err(where, key, want, (double)*out);
    }
    return DLP_OK;
}

dlp_status dlp_field_str(const json_t *o, const char *key, char *buf, size_t len, const char *where) {
    const char *s;
    DLP_CHECK(dlp_json_get_str(o, key, &s, where));
    if (!s[0]) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is empty", where ? where : "JSON", key);
    if (strlen(s) >= len)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is too long (%zu characters, at most %zu)", where ? where : "JSON",
                       key, strlen(s), len - 1);
    memcpy(buf, s, strlen(s) + 1);
    return DLP_OK;
}

dlp_status dlp_field_opt_str(const json_t *o, const char *key, char *buf, size_t len, const char *where) {
    buf[0] = '\0';
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return DLP_OK;
    if (!json_is_string(v)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is not a string", where ? where : "JSON", key);
    const char *s = json_string_value(v);
    if (strlen(s) >= len)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is too long (%zu characters, at most %zu)", where ? where : "JSON",
                       key, strlen(s), len - 1);
    memcpy(buf, s, strlen(s) + 1);
    return DLP_OK;
}

// --- field tables --------------------------------------------------------------------------------------------------

static int64_t get_int(const void *p, size_t size) {
    if (size == sizeof(int64_t)) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void put_int(void *p, size_t size, int64_t v) {
    if (size == sizeof(int64_t)) {
        memcpy(p, &v, sizeof v);
    } else {
        int32_t x = (int32_t)v;
        memcpy(p, &x, sizeof x);
    }
}

static dlp_status read_num(const json_t *o, const dlp_field_def *f, double *v, const char *w) {
    const int opt = f->flags & DLP_FF_OPT;
    if (f->flags & DLP_FF_POS)
        DLP_CHECK(opt ? dlp_field_opt_pos(o, f->key, f->def, v, w) : dlp_field_pos(o, f->key, v, w));
    else if (f->flags & DLP_FF_NONNEG)
        DLP_CHECK(opt ? dlp_field_opt_nonneg(o, f->key, f->def, v, w) : dlp_field_nonneg(o, f->key, v, w));
    else DLP_CHECK(opt ? dlp_json_opt_num(o, f->key, f->def, v, w) : dlp_json_get_num(o, f->key, v, w));
    char want[80];
    if ((f->flags & DLP_FF_RANGE) && !(*v >= f->lo && *v <= f->hi) && !((f->flags & DLP_FF_UNSET0) && *v == 0)) {
        snprintf(want, sizeof want, "%sbetween %g and %g", f->flags & DLP_FF_UNSET0 ? "0 (not known) or " : "", f->lo,
                 f->hi);
        return range_err(w, f->key, want, *v);
    }
    if ((f->flags & DLP_FF_BELOW) && !(*v < f->hi)) {
        snprintf(want, sizeof want, "< %g", f->hi);
        return range_err(w, f->key, want, *v);
    }
    return cap_check(w, f->key, *v, f->max > 0 ? (double)f->max : DLP_FIELD_NUM_MAX);
}

static dlp_status read_enum(const json_t *o, const dlp_field_def *f, int *v, const char *w) {
    char s[256];
    size_t len = f->max > 0 && (size_t)f->max < sizeof s ? (size_t)f->max : 32;
    DLP_CHECK(dlp_field_str(o, f->key, s, len, w));
    for (int i = 0; i < f->nnames; i++)
        if (strcmp(s, f->names[i]) == 0) {
            *v = i;
            return DLP_OK;
        }
    char choices[256] = "";
    for (int i = 0; i < f->nnames; i++) {
        size_t n = strlen(choices);
        snprintf(choices + n, sizeof choices - n, "%s%s", i ? "|" : "", f->names[i]);
    }
    return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is '%s' (%s)", w ? w : "JSON", f->key, s, choices);
}

dlp_status dlp_fields_read(const json_t *o, const dlp_field_def *defs, void *rec, const char *where) {
    char titled[320], sub[320];
    const char *w = where;
    for (const dlp_field_def *f = defs; f->key; f++) {
        char *m = (char *)rec + f->off;
        switch (f->type) {
        case DLP_FT_NUM: {
            double v = 0;
            DLP_CHECK(read_num(o, f, &v, w));
            memcpy(m, &v, sizeof v);
            break;
        }
        case DLP_FT_INT: {
            int64_t v = (int64_t)f->def;
            if (!(f->flags & DLP_FF_OPT) || json_object_get(o, f->key))
                DLP_CHECK(dlp_field_int(o, f->key, f->min, f->max, &v, w));
            put_int(m, f->size, v);
            break;
        }
        case DLP_FT_BOOL: {
            const json_t *v = json_object_get(o, f->key);
            if (v && !json_is_boolean(v))
                return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is not true/false", w ? w : "JSON", f->key);
            put_int(m, f->size, v && json_is_true(v));
            break;
        }
        case DLP_FT_STR:
            if (f->flags & DLP_FF_OPT) DLP_CHECK(dlp_field_opt_str(o, f->key, m, f->size, w));
            else DLP_CHECK(dlp_field_str(o, f->key, m, f->size, w));
            if (f->flags & DLP_FF_TITLE) {
                snprintf(titled, sizeof titled, "%s (%s)", where, m);
                w = titled;
            }
            break;
        case DLP_FT_ENUM: {
            int v = 0;
            DLP_CHECK(read_enum(o, f, &v, w));
            put_int(m, f->size, v);
            break;
        }
        case DLP_FT_OBJ: {
            const json_t *v = json_object_get(o, f->key);
            if ((f->flags & DLP_FF_OPT) && (!v || json_is_null(v))) break;
            if (!json_is_object(v))
                return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is %s", w ? w : "JSON", f->key,
                               f->flags & DLP_FF_OPT ? "not an object" : "missing or not an object");
            snprintf(sub, sizeof sub, "%s: %s", w ? w : "JSON", f->key);
            DLP_CHECK(dlp_fields_read(v, f->sub, m, sub));
            break;
        }
        case DLP_FT_INLINE:
            DLP_CHECK(dlp_fields_read(o, f->sub, m, w));
            break;
        case DLP_FT_CUSTOM:
            if (f->read) DLP_CHECK(f->read(o, f->key, w, m));
            break;
        }
        if (f->check) DLP_CHECK(f->check(f, m, w));
    }
    return DLP_OK;
}

dlp_status dlp_fields_read_record(const json_t *o, const dlp_field_def *defs, void *rec, size_t size,
                                  const char *where) {
    memset(rec, 0, size);
    if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not an object", where ? where : "JSON");
    return dlp_fields_read(o, defs, rec, where);
}

void dlp_fields_write(json_t *o, const dlp_field_def *defs, const void *rec) {
    for (const dlp_field_def *f = defs; f->key; f++) {
        const char *m = (const char *)rec + f->off;
        json_t *v = NULL;
        switch (f->type) {
        case DLP_FT_NUM: {
            double x;
            memcpy(&x, m, sizeof x);
            if ((f->flags & DLP_FF_OMIT0) && !(x > 0)) continue;
            if ((f->flags & DLP_FF_DEFNP) && !(x > 0)) x = f->def;
            v = f->flags & DLP_FF_NULLNF ? dlp_json_real_or_null(x) : json_real(x);
            break;
        }
        case DLP_FT_INT: {
            int64_t x = get_int(m, f->size);
            if ((f->flags & DLP_FF_OMIT0) && x == 0) continue;
            v = json_integer(x);
            break;
        }
        case DLP_FT_BOOL:
            v = json_boolean(get_int(m, f->size));
            break;
        case DLP_FT_STR:
            if ((f->flags & DLP_FF_OMIT0) && !m[0]) continue;
            v = json_string(m);
            break;
        case DLP_FT_ENUM: {
            int64_t x = get_int(m, f->size);
            v = json_string(x >= 0 && x < f->nnames ? f->names[x] : "?");
            break;
        }
        case DLP_FT_OBJ:
            v = json_object();
            dlp_fields_write(v, f->sub, m);
            break;
        case DLP_FT_INLINE:
            dlp_fields_write(o, f->sub, m);
            continue;
        case DLP_FT_CUSTOM:
            if (!f->write || !(v = f->write(m))) continue;
            break;
        }
        json_object_set_new(o, f->key, v);  // a NULL v (e.g. a string that is not UTF-8) leaves the key out
    }
}

json_t *dlp_fields_to_json(const dlp_field_def *defs, const void *rec) {
    json_t *o = json_object();
    dlp_fields_write(o, defs, rec);
    return o;
}

dlp_status dlp_fields_read_array(const json_t *a, const dlp_field_def *defs, void *elems, size_t elem_size, int *n,
                                 const char *where, const char *key) {
    *n = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        char w[400];
        snprintf(w, sizeof w, "%s: %s[%zu]", where, key, i);
        void *e = (char *)elems + i * elem_size;
        memset(e, 0, elem_size);
        (*n)++;
        DLP_CHECK(dlp_fields_read(json_array_get(a, i), defs, e, w));
    }
    return DLP_OK;
}

json_t *dlp_fields_write_array(const dlp_field_def *defs, const void *elems, size_t elem_size, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *e = json_object();
        dlp_fields_write(e, defs, (const char *)elems + (size_t)i * elem_size);
        json_array_append_new(a, e);
    }
    return a;
}
