// monitor/prom: a writer for the Prometheus text exposition format (version 0.0.4), independent of HTTP so any
// server can serve what it builds: metric families with HELP and TYPE, samples with escaped labels.
// Defines: dlp_prom_buf, dlp_prom_init, dlp_prom_reset, dlp_prom_free, dlp_prom_family, dlp_prom_sample,
//          dlp_prom_sample_labels, dlp_prom_valid_name, DLP_PROM_CONTENT_TYPE.
#ifndef DLP_MONITOR_PROM_H
#define DLP_MONITOR_PROM_H
#include <stddef.h>

#define DLP_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct dlp_prom_buf {
    char *data;  // NUL-terminated text
    size_t len, cap;
    int failed;  // an allocation failed: the text is incomplete
} dlp_prom_buf;

void dlp_prom_init(dlp_prom_buf *b);
void dlp_prom_reset(dlp_prom_buf *b);  // empties the text, keeps the memory
void dlp_prom_free(dlp_prom_buf *b);
// "# HELP name help" and "# TYPE name type" (type: counter, gauge, untyped). Write a family once, then all of
// its samples, before the next family.
void dlp_prom_family(dlp_prom_buf *b, const char *name, const char *type, const char *help);
// "name{k1="v1",k2="v2"} value": label names and values in pairs, ended by NULL. Values are escaped
// (backslash, double quote, newline); NaN and infinities are written as NaN, +Inf, -Inf.
void dlp_prom_sample(dlp_prom_buf *b, const char *name, double value, ...) __attribute__((sentinel));
// The same with labels as an array {k1, v1, k2, v2, ...} of n pairs.
void dlp_prom_sample_labels(dlp_prom_buf *b, const char *name, double value, const char *const *labels, int n);
// 1 if s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or a valid label name when label is 1
// ([a-zA-Z_][a-zA-Z0-9_]*).
int dlp_prom_valid_name(const char *s, int label);

#endif
