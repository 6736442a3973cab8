// hw/fields: range-checked JSON fields for the catalog and profiles.
#include "hw/fields.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"

static dlp_status range_err(const char *where, const char *key, const char *want, double got) {
    return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' must be %s (got %g)", where ? where : "JSON", key, want, got);
}

dlp_status dlp_field_pos(const json_t *o, const char *key, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (!(*out > 0) || !isfinite(*out)) return range_err(where, key, "> 0", *out);
    return DLP_OK;
}

dlp_status dlp_field_nonneg(const json_t *o, const char *key, double *out, const char *where) {
    DLP_CHECK(dlp_json_get_num(o, key, out, where));
    if (!(*out >= 0) || !isfinite(*out)) return range_err(where, key, ">= 0", *out);
    return DLP_OK;
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
