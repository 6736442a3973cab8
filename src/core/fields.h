// core/fields: validated fields of the catalog and profile files — core/json's typed getters plus range checks,
// with errors that name the file, the object and the field ("catalog/gpus.json: gpus[2] (a100-80gb): field
// 'mem_bw_gb_s' must be > 0 (got -1)").
// Field tables (as fio's options.c): a record's JSON fields are described once, a row per field with its key,
// type, offsetof, range and defaults, and the reader (dlp_fields_read) and writer (dlp_fields_write) both walk that
// table, so a field cannot be read under one name and written under another or be forgotten by one side.
// Defines: dlp_field_pos, dlp_field_nonneg, dlp_field_range, dlp_field_opt_range, dlp_field_opt_pos, dlp_field_opt_nonneg, dlp_field_int, dlp_field_str,
//          dlp_field_opt_str, dlp_field_frac, dlp_ft_type, DLP_FF_*, dlp_field_def, DLP_FIELD, DLP_FIELD_AS,
//          DLP_FIELD_CB, dlp_fields_read, dlp_fields_read_record, dlp_fields_write, dlp_fields_to_json, dlp_fields_read_array,
//          dlp_fields_write_array.
#ifndef DLP_CORE_FIELDS_H
#define DLP_CORE_FIELDS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// The largest magnitude a number field accepts (dlp_field_pos, _nonneg, a table's NUM row unless its .max says
// otherwise): implausible values are refused.
#define DLP_FIELD_NUM_MAX 1e15

// Required number > 0 (finite, at most DLP_FIELD_NUM_MAX).
dlp_status dlp_field_pos(const json_t *o, const char *key, double *out, const char *where);
// Required number >= 0 (finite, at most DLP_FIELD_NUM_MAX).
dlp_status dlp_field_nonneg(const json_t *o, const char *key, double *out, const char *where);
// Required number in [lo, hi]: the plausible range of a quantity in the file's unit (GB/s, W, $...).
dlp_status dlp_field_range(const json_t *o, const char *key, double lo, double hi, double *out, const char *where);
// Optional: absent or null -> def; present must be in [lo, hi].
dlp_status dlp_field_opt_range(const json_t *o, const char *key, double def, double lo, double hi, double *out,
                               const char *where);
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

// --- field tables --------------------------------------------------------------------------------------------------

typedef enum {
    DLP_FT_NUM,     // double
    DLP_FT_INT,     // int (or unsigned) or int64_t, by the member's size; in [min, max]
    DLP_FT_BOOL,    // int 0/1 as true/false; absent: 0, anything but a boolean (null too) is an error
    DLP_FT_STR,     // char[size]
    DLP_FT_ENUM,    // an int-sized enum, written as names[value]; read from a string of at most max - 1 (default 31)
                    // characters, an error naming the choices if it is none of them
    DLP_FT_OBJ,     // a nested object: the rows of `sub`, their offsets from the member (off 0: the record itself)
    DLP_FT_INLINE,  // the rows of `sub` in this object (a part several tables share); key is only a label
    DLP_FT_CUSTOM,  // read / write callbacks (arrays, values computed from several members)
} dlp_ft_type;

enum {
    // reader
    DLP_FF_OPT = 1u << 0,     // optional. NUM, STR: absent or null -> def (STR: ""); INT: absent -> def (null is an
                              // error); OBJ: absent or null -> not read, the record keeps what it had
    DLP_FF_POS = 1u << 1,     // NUM: > 0 and finite
    DLP_FF_NONNEG = 1u << 2,  // NUM: >= 0 and finite
    DLP_FF_RANGE = 1u << 3,   // NUM: then lo <= v <= hi ("must be between lo and hi")
    DLP_FF_BELOW = 1u << 4,   // NUM: then v < hi (every NUM: |v| <= max when max > 0, else <= DLP_FIELD_NUM_MAX)
    DLP_FF_TITLE = 1u << 5,   // STR: the record's name; errors about the rows after it name "where (name)"
    DLP_FF_UNSET0 = 1u << 6,  // NUM with RANGE: 0 ("not measured") passes too (a rate of 1e-300 B/s does not)
    // writer
    DLP_FF_OMIT0 = 1u << 8,   // left out when unset: INT 0, STR "", NUM not > 0
    DLP_FF_NULLNF = 1u << 9,  // NUM: null when NaN or infinite (json_real refuses those: the key would be lost)
    DLP_FF_DEFNP = 1u << 10,  // NUM: def when not > 0 (a record built in code that never set it)
};

typedef struct dlp_field_def dlp_field_def;
// A CUSTOM row's reader gets the object, the row's key, the `where` in force and the record (+ off); its writer
// the record (+ off) and returns the value, or NULL to leave the key out.
typedef dlp_status (*dlp_field_read_fn)(const json_t *o, const char *key, const char *where, void *rec);
typedef json_t *(*dlp_field_write_fn)(const void *rec);
// A further check of a value read (its member), after the row's own: an error names where and f->key.
typedef dlp_status (*dlp_field_check_fn)(const dlp_field_def *f, const void *member, const char *where);

struct dlp_field_def {
    const char *key;         // the JSON key; NULL ends the table
    dlp_ft_type type;
    size_t off, size;        // the member: offsetof, sizeof
    unsigned flags;          // DLP_FF_*
    double def;              // OPT, DEFNP: the value when absent (NUM, INT)
    double lo, hi;           // NUM: RANGE, BELOW
    int64_t min, max;        // INT: the accepted range; ENUM: max is the reader's buffer (0: 32)
    const char *const *names;  // ENUM: the value's names, nnames of them
    int nnames;
    const dlp_field_def *sub;  // OBJ, INLINE
    dlp_field_read_fn read;    // CUSTOM (NULL: not read)
    dlp_field_write_fn write;  // CUSTOM (NULL: not written)
    dlp_field_check_fn check;  // optional, any type but OBJ, INLINE, CUSTOM
};

// A row's key, type, member and flags: {DLP_FIELD(T, member, type, flags), .min = .., .max = ..}. The key is the
// member's name; DLP_FIELD_AS gives another (or a nested member: step.fwd_s).
#define DLP_FIELD_AS(T, key_, member, type_, flags_) \
    .key = (key_), .type = (type_), .off = offsetof(T, member), .size = sizeof(((T *)0)->member), .flags = (flags_)
#define DLP_FIELD(T, member, type_, flags_) DLP_FIELD_AS(T, #member, member, type_, flags_)
// A CUSTOM row: {DLP_FIELD_CB("rates", rates_read, rates_write)}; either callback may be NULL.
#define DLP_FIELD_CB(key_, read_, write_) .key = (key_), .type = DLP_FT_CUSTOM, .read = (read_), .write = (write_)

// Reads the table's fields of object o into rec, in table order; the first bad field is the error, naming `where`
// and the key in the wording of the dlp_field_* readers above. Fields not in the table are ignored; members not in
// it are left as they were.
dlp_status dlp_fields_read(const json_t *o, const dlp_field_def *defs, void *rec, const char *where);
// The same for a record on its own: rec (size bytes) zeroed, then o must be an object ("<where>: is not an object").
dlp_status dlp_fields_read_record(const json_t *o, const dlp_field_def *defs, void *rec, size_t size,
                                  const char *where);
// Sets the table's fields of rec on object o, in table order.
void dlp_fields_write(json_t *o, const dlp_field_def *defs, const void *rec);
// A new object with the table's fields of rec: a record's to_json when the table is the whole of it.
json_t *dlp_fields_to_json(const dlp_field_def *defs, const void *rec);
// An array of records: element i (zeroed first) read from a[i] with where "<where>: <key>[i]"; *n counts them.
// The caller checks that a is an array of at most its capacity (the messages differ per array).
dlp_status dlp_fields_read_array(const json_t *a, const dlp_field_def *defs, void *elems, size_t elem_size, int *n,
                                 const char *where, const char *key);
// n records as an array of objects.
json_t *dlp_fields_write_array(const dlp_field_def *defs, const void *elems, size_t elem_size, int n);

#endif
