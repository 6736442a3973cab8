// core/json: JSON in and out on top of jansson — atomic result files, loading with errors that name the file,
// line and field, and typed field getters.
// Defines: dlp_json_write, dlp_json_load, dlp_json_get_*, dlp_json_result_new.
#ifndef DLP_CORE_JSON_H
#define DLP_CORE_JSON_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

// Writes obj (indented, keys in insertion order) to path atomically; NOCLOBBER/REPLACE from core/fs.h.
dlp_status dlp_json_write(const json_t *obj, const char *path, int flags);
// Loads a JSON file; on a syntax error the message names the file, line and column.
dlp_status dlp_json_load(const char *path, json_t **out);
// Typed getters. `where` names the file (or object) for the error message, e.g. "catalog/gpus.json: gpus[3]".
// Required fields: a missing or mistyped field is DLP_ERR_FORMAT naming the field.
dlp_status dlp_json_get_num(const json_t *obj, const char *key, double *out, const char *where);
dlp_status dlp_json_get_int(const json_t *obj, const char *key, int64_t *out, const char *where);
dlp_status dlp_json_get_str(const json_t *obj, const char *key, const char **out, const char *where);
// Optional numeric field: returns def when absent; error only when present with the wrong type.
dlp_status dlp_json_opt_num(const json_t *obj, const char *key, double def, double *out, const char *where);
// A number, or null when it is NaN or infinite (jansson's json_real refuses those: set_new would drop the key).
json_t *dlp_json_real_or_null(double v);
// A result object {"schema": schema, "dlperf_version", "created", "argv": [...]} to which a command adds its own.
json_t *dlp_json_result_new(const char *schema, int argc, char **argv);
// Saved once by the CLI so any result can echo the command line.
void dlp_json_set_argv(int argc, char **argv);

#endif
