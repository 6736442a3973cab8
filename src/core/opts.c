// core/opts: table-driven option parsing over getopt_long.
#include "core/opts.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

dlp_status dlp_parse_range(const char *s, const char *opt, double single_hi, double *lo, double *hi) {
    char *end;
    *lo = strtod(s, &end);
    if (end == s) goto bad;
    if (*end == '\0') {
        *hi = isnan(single_hi) ? *lo : single_hi;
        return DLP_OK;
    }
    if (*end != '-' && *end != ':' && *end != ',') goto bad;
    const char *p = end + 1;
    *hi = strtod(p, &end);
    if (end == p || *end) goto bad;
    return DLP_OK;
bad:
    return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not a range like 0.08-1", opt, s);
}

dlp_status dlp_parse_size(const char *s, int64_t *out) {
    if (!s || !*s) return DLP_ERR(DLP_ERR_INVALID, "empty size");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v)) return DLP_ERR(DLP_ERR_INVALID, "'%s' is not a size", s);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return DLP_ERR(DLP_ERR_INVALID, "'%s' is not a size (use e.g. 512K, 200M, 1G)", s);
    double r = v * mul;
    if (r > 9.0e18) return DLP_ERR(DLP_ERR_INVALID, "size '%s' is too large", s);
    *out = (int64_t)llround(r);
    return DLP_OK;
}

int dlp_parse_int_list(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (p && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < -2147483647L || v > 2147483647L || n >= max) return -1;
        out[n++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}

static int choice_index(const char *choices, const char *v) {
    int idx = 0;
    size_t vl = strlen(v);
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vl && strncmp(p, v, len) == 0) return idx;
        idx++;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

static void choice_name(const char *choices, int idx, char *buf, size_t len) {
    const char *p = choices;
    for (int i = 0; p && i < idx; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) {
        snprintf(buf, len, "?");
        return;
    }
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

// "a|b|c" of a choice table's names.
static void map_names(const dlp_opt_choice *m, char *buf, size_t len) {
    size_t n = 0;
    buf[0] = '\0';
    for (; m && m->name && n < len; m++) n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", m->name);
}

dlp_status dlp_opt_choice_parse(const dlp_opt_choice *map, const char *what, const char *name, int *value) {
    for (const dlp_opt_choice *m = map; m && m->name; m++)
        if (name && strcmp(m->name, name) == 0) {
            *value = m->value;
            return DLP_OK;
        }
    char names[256];
    map_names(map, names, sizeof names);
    return DLP_ERR(DLP_ERR_INVALID, "%s: '%s' is not one of %s", what, name ? name : "(null)", names);
}

const char *dlp_opt_choice_name(const dlp_opt_choice *map, int value) {
    for (const dlp_opt_choice *m = map; m && m->name; m++)
        if (m->value == value) return m->name;
    return "?";
}

// The names an option's choice takes: its map's, or its choices string.
static const char *choice_names(const dlp_opt *o, char *buf, size_t len) {
    if (o->type != DLP_OPT_ENUM) return (const char *)o->choices;
    map_names((const dlp_opt_choice *)o->choices, buf, len);
    return buf;
}

static dlp_status set_value(dlp_opt *o, const char *v) {
    char *end;
    switch (o->type) {
    case DLP_OPT_FLAG:
        *(int *)o->dst = v ? (strcmp(v, "0") != 0 && strcmp(v, "false") != 0) : 0;
        return DLP_OK;
    case DLP_OPT_INT: {
        if (!v) { *(int *)o->dst = 0; return DLP_OK; }
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < -2147483647L || x > 2147483647L)
            return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not an integer", o->name, v);
        *(int *)o->dst = (int)x;
        return DLP_OK;
    }
    case DLP_OPT_I64: {
        if (!v) { *(int64_t *)o->dst = 0; return DLP_OK; }
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno) return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not an integer", o->name, v);
        *(int64_t *)o->dst = x;
        return DLP_OK;
    }
    case DLP_OPT_SIZE:
        if (!v) { *(int64_t *)o->dst = 0; return DLP_OK; }
        if (dlp_parse_size(v, (int64_t *)o->dst) != DLP_OK)
            return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not a size (e.g. 512K, 200M, 1G)", o->name, v);
        return DLP_OK;
    case DLP_OPT_DOUBLE: {
        if (!v) { *(double *)o->dst = 0; return DLP_OK; }
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x))
            return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not a number", o->name, v);
        *(double *)o->dst = x;
        return DLP_OK;
    }
    case DLP_OPT_STR:
        *(const char **)o->dst = v;
        return DLP_OK;
    case DLP_OPT_CHOICE: {
        if (!v) { *(int *)o->dst = 0; return DLP_OK; }
        int i = choice_index((const char *)o->choices, v);
        if (i < 0) return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not one of %s", o->name, v, (const char *)o->choices);
        *(int *)o->dst = i;
        return DLP_OK;
    }
    case DLP_OPT_ENUM: {
        if (!v) { *(int *)o->dst = ((const dlp_opt_choice *)o->choices)[0].value; return DLP_OK; }
        for (const dlp_opt_choice *m = (const dlp_opt_choice *)o->choices; m->name; m++)
            if (strcmp(m->name, v) == 0) {
                *(int *)o->dst = m->value;
                return DLP_OK;
            }
        char names[256];
        return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not one of %s", o->name, v,
                       choice_names(o, names, sizeof names));
    }
    }
    return DLP_ERR(DLP_ERR_INTERNAL, "option --%s has an unknown type", o->name);
}

static const char *default_meta(const dlp_opt *o, char *buf, size_t len) {
    if (o->meta) return o->meta;
    switch (o->type) {
    case DLP_OPT_FLAG: return "";
    case DLP_OPT_INT: case DLP_OPT_I64: return "N";
    case DLP_OPT_SIZE: return "SIZE";
    case DLP_OPT_DOUBLE: return "X";
    case DLP_OPT_STR: return "S";
    case DLP_OPT_CHOICE: case DLP_OPT_ENUM: return choice_names(o, buf, len);
    }
    return "";
}

// -v/--verbose is every command's, unless its table has its own.
static int table_has_verbose(const dlp_opt *table) {
    for (const dlp_opt *o = table; o->name; o++)
        if (o->short_name == 'v' || strcmp(o->name, "verbose") == 0) return 1;
    return 0;
}

const char dlp_opt_from_dst[] = "(the value dst holds)";

// The default as --help prints it: the text, or for DLP_OPT_FROM_DST the value dst holds (NULL: none).
static const char *default_text(const dlp_opt *o, char *buf, size_t len) {
    if (o->def != dlp_opt_from_dst) return o->def;
    switch (o->type) {
    case DLP_OPT_FLAG: return NULL;
    case DLP_OPT_INT: snprintf(buf, len, "%d", *(const int *)o->dst); return buf;
    case DLP_OPT_I64: case DLP_OPT_SIZE: snprintf(buf, len, "%lld", (long long)*(const int64_t *)o->dst); return buf;
    case DLP_OPT_DOUBLE: snprintf(buf, len, "%g", *(const double *)o->dst); return buf;
    case DLP_OPT_STR: return *(const char *const *)o->dst;
    case DLP_OPT_CHOICE: choice_name((const char *)o->choices, *(const int *)o->dst, buf, len); return buf;
    case DLP_OPT_ENUM: return dlp_opt_choice_name((const dlp_opt_choice *)o->choices, *(const int *)o->dst);
    }
    return NULL;
}

void dlp_opts_help(FILE *f, const char *usage, const dlp_opt *table) {
    if (usage) fprintf(f, "%s\n\noptions:\n", usage);
    for (const dlp_opt *o = table; o->name; o++) {
        char left[96];
        char names[256];
        const char *meta = default_meta(o, names, sizeof names);
        if (o->short_name)
            snprintf(left, sizeof left, "  -%c, --%s%s%s", o->short_name, o->name, meta[0] ? " " : "", meta);
        else
            snprintf(left, sizeof left, "      --%s%s%s", o->name, meta[0] ? " " : "", meta);
        fprintf(f, "%-34s %s", left, o->help ? o->help : "");
        char defbuf[64];
        const char *def = default_text(o, defbuf, sizeof defbuf);
        if (def && o->type != DLP_OPT_FLAG) fprintf(f, " (default %s)", def);
        fputc('\n', f);
    }
    if (!table_has_verbose(table))
        fprintf(f, "  -v, --verbose                    errors name the source places they passed through\n");
    fprintf(f, "  -h, --help                       this help\n");
}

static int g_parse_only;
void dlp_opts_set_parse_only(int on) { g_parse_only = on; }
int dlp_opts_parse_only(void) { return g_parse_only; }

dlp_status dlp_opts_parse(dlp_opt *table, const char *usage, int argc, char **argv, int *rest) {
    int n = 0;
    for (dlp_opt *o = table; o->name; o++) n++;
    struct option *lo = calloc((size_t)n + 3, sizeof *lo);
    char *shorts = calloc((size_t)n * 2 + 5, 1);
    if (!lo || !shorts) {
        free(lo);
        free(shorts);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory parsing options");
    }
    char *sp = shorts;
    *sp++ = ':';  // report a missing value as ':'; GNU permutation lets options follow positionals
    for (int i = 0; i < n; i++) {
        dlp_opt *o = &table[i];
        o->given = 0;
        dlp_status s = o->def == dlp_opt_from_dst ? DLP_OK : set_value(o, o->def);
        if (s != DLP_OK) {
            free(lo);
            free(shorts);
            return s;
        }
        lo[i].name = o->name;
        lo[i].has_arg = o->type == DLP_OPT_FLAG ? no_argument : required_argument;
        lo[i].flag = NULL;
        lo[i].val = 256 + i;
        if (o->short_name) {
            *sp++ = (char)o->short_name;
            if (o->type != DLP_OPT_FLAG) *sp++ = ':';
        }
    }
    lo[n].name = "help";
    lo[n].has_arg = no_argument;
    lo[n].val = 'h';
    *sp++ = 'h';
    if (!table_has_verbose(table)) {
        lo[n + 1].name = "verbose";  // every command: -v, like -h
        lo[n + 1].has_arg = no_argument;
        lo[n + 1].val = 'v';
        *sp++ = 'v';
    }
    *sp = '\0';

    dlp_status st = DLP_OK;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        if (c == 'h') {
            dlp_opts_help(stdout, usage, table);
            st = DLP_ERR_CANCELLED;
            break;
        }
        if (c == 'v' && !table_has_verbose(table)) {
            dlp_err_set_verbose(1);
            continue;
        }
        if (c == '?' || c == ':') {
            const char *bad = argv[optind - 1];
            if (c == ':')
                st = DLP_ERR(DLP_ERR_INVALID, "option %s needs a value (see --help)", bad);
            else
                st = DLP_ERR(DLP_ERR_INVALID, "unknown option %s (see --help)", bad);
            break;
        }
        dlp_opt *o = NULL;
        if (c >= 256) o = &table[c - 256];
        else
            for (int i = 0; i < n; i++)
                if (table[i].short_name == c) o = &table[i];
        if (!o) {
            st = DLP_ERR(DLP_ERR_INTERNAL, "option table mismatch");
            break;
        }
        st = set_value(o, o->type == DLP_OPT_FLAG ? "1" : optarg);
        if (st != DLP_OK) break;
        o->given = 1;
    }
    if (rest) *rest = optind;
    if (st == DLP_OK && g_parse_only) {  // the options parsed: run nothing (dlp_cli_fail returns 0)
        for (int i = optind; i < argc; i++) fprintf(stderr, "parse-only: argument '%s'\n", argv[i]);
        dlp_err_clear();
        st = DLP_ERR_CANCELLED;
    }
    free(lo);
    free(shorts);
    return st;
}

json_t *dlp_opts_to_json(const dlp_opt *table) {
    json_t *obj = json_object();
    for (const dlp_opt *o = table; o->name; o++) {
        json_t *v = NULL;
        switch (o->type) {
        case DLP_OPT_FLAG: v = json_boolean(*(int *)o->dst); break;
        case DLP_OPT_INT: v = json_integer(*(int *)o->dst); break;
        case DLP_OPT_I64: case DLP_OPT_SIZE: v = json_integer(*(int64_t *)o->dst); break;
        case DLP_OPT_DOUBLE: v = json_real(*(double *)o->dst); break;
        case DLP_OPT_STR: {
            const char *s = *(const char **)o->dst;
            v = s ? json_string(s) : json_null();
            break;
        }
        case DLP_OPT_CHOICE: {
            char buf[64];
            choice_name((const char *)o->choices, *(int *)o->dst, buf, sizeof buf);
            v = json_string(buf);
            break;
        }
        case DLP_OPT_ENUM: v = json_string(dlp_opt_choice_name((const dlp_opt_choice *)o->choices, *(int *)o->dst)); break;
        }
        if (v) json_object_set_new(obj, o->name, v);
    }
    return obj;
}

int dlp_opt_given(const dlp_opt *table, const char *name) {
    for (const dlp_opt *o = table; o->name; o++)
        if (strcmp(o->name, name) == 0) return o->given;
    return 0;
}
