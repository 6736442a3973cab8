// hw/fields: validated fields of the catalog and profile files — core/json's typed getters plus range checks,
// with errors that name the file, the object and the field ("catalog/gpus.json: gpus[2] (a100-80gb): field
// 'mem_bw_gb_s' must be > 0 (got -1)").
// Defines: dlp_field_pos, dlp_field_nonneg, dlp_field_opt_pos, dlp_field_opt_nonneg, dlp_field_int, dlp_field_str,
//          dlp_field_opt_str, dlp_field_frac.
#ifndef DLP_HW_FIELDS_H
#define DLP_HW_FIELDS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// Required number > 0 (finite).
dlp_status dlp_field_pos(const json_t *o, const char *key, double *out, const char *where);
// Required number >= 0 (finite).
dlp_status dlp_field_nonneg(const json_t *o, const char *key, double *out, const char *where);
// Optional: absent or null -> def; present must be a number > 0 (>= 0 for _nonneg).
dlp_status dlp_field_opt_pos(const json_t *o, const char *key, double def, double *out, const char *where);
dlp_status dlp_field_opt_nonneg(const json_t *o, const char *key, double def, double *out, const char *where);
// Required number in [0, 1].
dlp_status dlp_field_frac(const json_t *o, const char *key, double *out, const char *where);
// Required integer in [lo, hi].
dlp_status dlp_field_int(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, const char *where);
// Required non-empty string copied into buf (error if longer than len-1).
dlp_status dlp_field_str(const json_t *o, const char *key, char *buf, size_t len, const char *where);
// Optional string: absent -> "" in buf.
dlp_status dlp_field_opt_str(const json_t *o, const char *key, char *buf, size_t len, const char *where);

#endif
