// core/opts: one options table per command feeds getopt_long parsing, --help text and the JSON echo of the
// settings a result was produced with.
// Defines: dlp_opt, dlp_opt_type, dlp_opt_choice, dlp_opts_parse, dlp_opts_help, dlp_opts_to_json, dlp_parse_size, dlp_opt_given.
#ifndef DLP_CORE_OPTS_H
#define DLP_CORE_OPTS_H
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef enum {
    DLP_OPT_FLAG,    // int*: 1 when given (no argument)
    DLP_OPT_INT,     // int*
    DLP_OPT_I64,     // int64_t*
    DLP_OPT_SIZE,    // int64_t*: bytes with K/M/G/T suffix (powers of 1024), e.g. 200M
    DLP_OPT_DOUBLE,  // double*
    DLP_OPT_STR,     // const char **: points into argv or at the default literal
    DLP_OPT_CHOICE,  // int*: index into the '|'-separated choices
    DLP_OPT_ENUM,    // int*: the value the name given maps to (map: a table of names and values)
} dlp_opt_type;

// One name of a value-mapped choice (DLP_OPT_ENUM) and the value it stores; a table of them ends with {NULL, 0}. The table is
// the one place the names of a kind of value are spelled (e.g. dlp_precision_choices in core/dtype.h).
typedef struct dlp_opt_choice {
    const char *name;
    int value;
} dlp_opt_choice;

typedef struct dlp_opt {
    const char *name;     // long name without dashes; NULL ends the table
    int short_name;       // 0 for none
    dlp_opt_type type;
    void *dst;
    const char *def;      // default in text form (NULL: zero / NULL string; DLP_OPT_FROM_DST: what dst holds)
    const char *meta;     // argument name in --help ("N", "DIR"); NULL: from type
    const char *help;
    const void *choices;  // DLP_OPT_CHOICE: "fp32|bf16|fp16" (a string); DLP_OPT_ENUM: a dlp_opt_choice table
    int given;  // set by dlp_opts_parse when the option was on the command line
} dlp_opt;

// .def = DLP_OPT_FROM_DST: the default is the value dst holds before parsing, set by the config's *_default()
// function, so that the default is written once; --help prints that value.
extern const char dlp_opt_from_dst[];
#define DLP_OPT_FROM_DST dlp_opt_from_dst

// Applies defaults, then parses argv[first..argc). Non-option arguments are moved to the end; *rest is set to
// the index of the first one. "-h/--help" prints help to stdout and returns DLP_ERR_CANCELLED;
// "-v/--verbose" (every table has it) turns on dlp_err_set_verbose.
dlp_status dlp_opts_parse(dlp_opt *table, const char *usage, int argc, char **argv, int *rest);
// Parse-only mode (`dlperf --parse-only`, DLPERF_PARSE_ONLY=1): dlp_opts_parse then returns DLP_ERR_CANCELLED with no
// message (as --help does) once the options parsed, so the command runs nothing; it notes leftover arguments on stderr.
void dlp_opts_set_parse_only(int on);
int dlp_opts_parse_only(void);
void dlp_opts_help(FILE *f, const char *usage, const dlp_opt *table);
// A JSON object {"name": value, ...} of every option's value after parsing (jansson json_t*).
struct json_t;
struct json_t *dlp_opts_to_json(const dlp_opt *table);
// "200M" -> 209715200. Accepts K/M/G/T with optional "i" and "B" (KiB, MB...): powers of 1024.
dlp_status dlp_parse_size(const char *s, int64_t *out);
int dlp_opt_given(const dlp_opt *table, const char *name);
// The value of name in a choice table; DLP_ERR_INVALID naming what (e.g. "precision") and the choices otherwise.
dlp_status dlp_opt_choice_parse(const dlp_opt_choice *map, const char *what, const char *name, int *value);
// The name of value in a choice table; "?" when it has none.
const char *dlp_opt_choice_name(const dlp_opt_choice *map, int value);
// "0.08-1" (or 0.08:1, 0.08,1) -> lo, hi for the option --opt. A single value X gives lo = X and hi = single_hi,
// or hi = X when single_hi is NAN. DLP_ERR_INVALID naming the option otherwise.
dlp_status dlp_parse_range(const char *s, const char *opt, double single_hi, double *lo, double *hi);
// Splits "1,2,4" into up to max ints; returns count or -1 on a malformed list.
int dlp_parse_int_list(const char *s, int *out, int max);

#endif
