// monitor/prom: the Prometheus text format writer.
#include "monitor/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dlp_prom_init(dlp_prom_buf *b) { memset(b, 0, sizeof *b); }

void dlp_prom_reset(dlp_prom_buf *b) {
    b->len = 0;
    b->failed = 0;
    if (b->data) b->data[0] = '\0';
}

void dlp_prom_free(dlp_prom_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int reserve(dlp_prom_buf *b, size_t extra) {
    if (b->failed) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static void put(dlp_prom_buf *b, const char *s, size_t n) {
    if (reserve(b, n) != 0) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void puts_(dlp_prom_buf *b, const char *s) { put(b, s, strlen(s)); }

// Label values escape \ " and newline; HELP text escapes \ and newline.
static void put_escaped(dlp_prom_buf *b, const char *s, int quote) {
    for (const char *p = s; *p; p++) {
        if (*p == '\\') put(b, "\\\\", 2);
        else if (*p == '\n') put(b, "\\n", 2);
        else if (quote && *p == '"') put(b, "\\\"", 2);
        else put(b, p, 1);
    }
}

void dlp_prom_family(dlp_prom_buf *b, const char *name, const char *type, const char *help) {
    puts_(b, "# HELP ");
    puts_(b, name);
    put(b, " ", 1);
    put_escaped(b, help ? help : "", 0);
    puts_(b, "\n# TYPE ");
    puts_(b, name);
    put(b, " ", 1);
    puts_(b, type);
    put(b, "\n", 1);
}

static void put_value(dlp_prom_buf *b, double v) {
    char num[40];
    if (isnan(v)) snprintf(num, sizeof num, "NaN");
    else if (isinf(v)) snprintf(num, sizeof num, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 9.007199254740992e15) snprintf(num, sizeof num, "%.0f", v);
    else snprintf(num, sizeof num, "%.15g", v);
    puts_(b, num);
}

void dlp_prom_sample_labels(dlp_prom_buf *b, const char *name, double value, const char *const *labels, int n) {
    puts_(b, name);
    if (n > 0) {
        put(b, "{", 1);
        for (int i = 0; i < n; i++) {
            if (i) put(b, ",", 1);
            puts_(b, labels[2 * i]);
            put(b, "=\"", 2);
            put_escaped(b, labels[2 * i + 1] ? labels[2 * i + 1] : "", 1);
            put(b, "\"", 1);
        }
        put(b, "}", 1);
    }
    put(b, " ", 1);
    put_value(b, value);
    put(b, "\n", 1);
}

void dlp_prom_sample(dlp_prom_buf *b, const char *name, double value, ...) {
    const char *labels[16];
    int n = 0;
    va_list ap;
    va_start(ap, value);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k) break;
        const char *v = va_arg(ap, const char *);
        if (n < 8) {
            labels[2 * n] = k;
            labels[2 * n + 1] = v;
            n++;
        }
    }
    va_end(ap);
    dlp_prom_sample_labels(b, name, value, labels, n);
}

int dlp_prom_valid_name(const char *s, int label) {
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++) {
        int c = (unsigned char)*p;
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
        int digit = c >= '0' && c <= '9';
        if (!(alpha || (p != s && digit))) return 0;
    }
    return 1;
}
