// report/report: the evaluation report's page — loads each run directory's saved results, condenses the monitor's
// CSV into columns, writes one HTML file: the page's style and script (report.css, report.js, built into the
// binary by report/assets.c), the results as JSON in a <script type="application/json"> block and the chart library
// read from Debian's libjs-chart.js. The script draws the charts and tables in the browser; without the library
// the page still shows every table and says why there are no charts.
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/version.h"

extern const char dlp_report_js[], dlp_report_css[];  // report/assets.c

#define MAX_CSV_BYTES (256u << 20)
#define DLP_REPORT_MAX_SAMPLES 1500  // per monitor series on the page (a 500 ms monitor: 12.5 minutes unaveraged)

const char *dlp_report_chartjs_path(void) {
    const char *p = getenv("DLPERF_CHARTJS");
    return p && *p ? p : DLP_REPORT_CHARTJS_DEFAULT;
}

// ---- a growing string ----
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

// HTML text (for the few strings written outside the JSON block)
static void sb_html(sbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': sb_str(b, "&lt;"); break;
        case '>': sb_str(b, "&gt;"); break;
        case '&': sb_str(b, "&amp;"); break;
        case '"': sb_str(b, "&quot;"); break;
        default: sb_add(b, s, 1);
        }
    }
}

// JSON inside <script>: every '<' as \u003c (it occurs only inside strings), so no "</script" or "<!--" can end
// or change the block.
static void sb_json_script(sbuf *b, const char *s) {
    for (const char *q = s; *q;) {
        const char *lt = strchr(q, '<');
        size_t n = lt ? (size_t)(lt - q) : strlen(q);
        sb_add(b, q, n);
        if (!lt) break;
        sb_str(b, "\\u003c");
        q = lt + 1;
    }
}

// ---- loading ----
static json_t *gap(json_t *gaps, const char *what, const char *why) {
    json_array_append_new(gaps, json_pack("{s:s, s:s}", "what", what, "why", why));
    return NULL;
}

// A stage's JSON result in dir; NULL (and a gap) when absent or unreadable.
static json_t *load_result(const char *dir, const char *file, const char *what, json_t *gaps, const json_t *stage) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!dlp_path_exists(path)) {
        char why[256];
        int rc = stage ? (int)json_integer_value(json_object_get(stage, "exit_status")) : -2;
        if (!stage) snprintf(why, sizeof why, "not part of this run (no %s)", file);
        else if (rc < 0) snprintf(why, sizeof why, "the stage was not run (the run was stopped or skipped it)");
        else if (rc > 0) snprintf(why, sizeof why, "the stage failed (exit status %d) and wrote no %s", rc, file);
        else snprintf(why, sizeof why, "no %s in the run directory", file);
        return gap(gaps, what, why);
    }
    json_t *j = NULL;
    dlp_status st = dlp_json_load(path, &j);
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s could not be read: %s", file, dlp_err_msg());
        dlp_err_clear();
        return gap(gaps, what, why);
    }
    return j;
}

// One CSV field starting at *p (quoted or not) into out; advances past the separator. Returns 0 at end of line.
static int csv_field(char **p, char *out, size_t len) {
    char *s = *p;
    size_t n = 0;
    if (*s == '"') {
        s++;
        while (*s && !(*s == '"' && s[1] != '"')) {
            if (*s == '"') s++;
            if (n + 1 < len) out[n++] = *s;
            s++;
        }
        if (*s == '"') s++;
    } else {
        while (*s && *s != ',' && *s != '\n' && *s != '\r') {
            if (n + 1 < len) out[n++] = *s;
            s++;
        }
    }
    out[n] = '\0';
    while (*s == '\r') s++;
    int more = *s == ',';
    if (*s == ',' || *s == '\n') s++;
    *p = s;
    return more;
}

// A long run's series averaged in groups of consecutive samples so a page holds at most DLP_REPORT_MAX_SAMPLES
// per series (a default run has a few hundred): the mean of each group's values (null when all are), dt_s summed,
// the first sample's time and phase. Returns the group size (1: left as it was).
static int downsample(json_t *cols, json_t *phase, int rows) {
    int g = (rows + DLP_REPORT_MAX_SAMPLES - 1) / DLP_REPORT_MAX_SAMPLES;
    if (g <= 1) return 1;
    const char *k;
    json_t *a;
    json_object_foreach(cols, k, a) {
        json_t *out = json_array();
        int first = strcmp(k, "t_s") == 0 || strcmp(k, "unix_s") == 0, sum = strcmp(k, "dt_s") == 0;
        for (int i = 0; i < rows; i += g) {
            double s = 0;
            int n = 0;
            for (int j = i; j < i + g && j < rows; j++) {
                json_t *v = json_array_get(a, (size_t)j);
                if (!json_is_number(v)) continue;
                if (first && n) continue;
                s += json_number_value(v);
                n++;
            }
            json_array_append_new(out, n ? json_real(first || sum ? s : s / n) : json_null());
        }
        json_object_set_new(cols, k, out);  // replaces a while iterating: the key stays, allowed by jansson
    }
    json_t *ph = json_array();
    for (int i = 0; i < rows; i += g) json_array_append(ph, json_array_get(phase, (size_t)i));
    json_array_clear(phase);
    json_array_extend(phase, ph);
    json_decref(ph);
    return g;
}

// The monitor's CSV (t_s,dt_s,unix_s,phase,<fields>) as {"fields": [...], "phase": [...], "cols": {name: [...]}}
// with null for a missing value; NULL (and a gap) when absent or empty.
static json_t *load_monitor(const char *dir, const char *file, const char *what, json_t *gaps) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!dlp_path_exists(path)) {
        char why[256];
        snprintf(why, sizeof why, "no monitor series (%s) in the run directory", file);
        return gap(gaps, what, why);
    }
    char *text = NULL;
    size_t len = 0;
    dlp_status st = dlp_read_file(path, &text, &len, MAX_CSV_BYTES);
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s could not be read: %s", file, dlp_err_msg());
        dlp_err_clear();
        return gap(gaps, what, why);
    }
    json_t *fields = json_array(), *cols = json_object(), *phase = json_array();
    json_t **arr = NULL;
    int nf = 0, ok = 1;
    char *p = text;
    char cell[512];
    int more = 1;
    while (more && *p && *p != '\n') {  // the header
        more = csv_field(&p, cell, sizeof cell);
        json_t **na = realloc(arr, (size_t)(nf + 1) * sizeof *na);
        if (!na) {
            ok = 0;
            break;
        }
        arr = na;
        arr[nf] = NULL;  // a repeated name: its values are skipped (the first column of that name is kept)
        if (!json_object_get(cols, cell)) {
            json_array_append_new(fields, json_string(cell));
            arr[nf] = json_array();
            json_object_set_new(cols, cell, arr[nf]);
        }
        nf++;
    }
    if (*p == '\n') p++;
    if (ok && (nf < 4 || strcmp(json_string_value(json_array_get(fields, 3)), "phase") != 0)) ok = 0;
    int rows = 0;
    while (ok && *p) {
        if (*p == '\n' || *p == '\r') {  // a blank line
            p++;
            continue;
        }
        int i = 0;
        more = 1;
        for (; i < nf && more; i++) {
            more = csv_field(&p, cell, sizeof cell);
            if (i == 3) {
                json_array_append_new(phase, json_string(cell));
                continue;
            }
            if (!arr[i]) continue;
            char *end;
            double v = strtod(cell, &end);
            json_array_append_new(arr[i], cell[0] && *end == '\0' && isfinite(v) ? json_real(v) : json_null());
        }
        for (; i < nf; i++) {  // a short (cut) line
            if (i == 3) json_array_append_new(phase, json_string(""));
            else if (arr[i]) json_array_append_new(arr[i], json_null());
        }
        while (more) more = csv_field(&p, cell, sizeof cell);  // extra cells
        rows++;
    }
    free(arr);
    free(text);
    if (!ok || rows == 0) {
        json_decref(fields);
        json_decref(cols);
        json_decref(phase);
        char why[256];
        snprintf(why, sizeof why, "%s %s", file, ok ? "has no samples" : "is not a monitor series (t_s,dt_s,unix_s,phase,...)");
        return gap(gaps, what, why);
    }
    json_object_del(cols, "phase");
    int group = downsample(cols, phase, rows);
    return json_pack("{s:o, s:o, s:o, s:i, s:i}", "fields", fields, "phase", phase, "cols", cols, "rows", rows,
                     "group", group);
}

// ---- the verdict ----
static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static const char *str(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

char *dlp_report_verdict(const json_t *run, const json_t *predict) {
    const json_t *s = json_object_get(run, "summary");
    const char *bn = str(s, "bottleneck");
    double train = num(s, "train_img_per_s"), prep = num(s, "prep_img_per_s"), wait = num(s, "train_data_wait_frac");
    double frac = num(s, "train_fraction_of_peak"), usd = num(s, "usd_per_million_train_images");
    const char *kind = str(run, "device_kind");  // dlperf run's (backend caps): "cpu", "gpu", "sim"
    int gpu = kind && (strcmp(kind, "gpu") == 0 || strcmp(kind, "sim") == 0);
    char buf[2048];
    size_t n = 0;
#define PUT(...) \
    do { \
        if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, __VA_ARGS__); \
    } while (0)
    if (!isfinite(train)) {
        PUT("No verdict: the training stage has no figures (it failed or did not run), so what holds this machine "
            "back is not measured.");
    } else if (!bn) {
        PUT("Training reached %.1f img/s; the input pipeline alone was not measured, so whether it or compute holds "
            "this machine back is not known.", train);
    } else if (strcmp(bn, "input pipeline") == 0) {
        PUT("The input pipeline holds this machine back: training waited for data %.0f%% of the step at %.1f img/s "
            "while the pipeline alone reached %.0f img/s. More loader threads, faster cores for JPEG decode, or "
            "faster storage would raise it; a faster %s would not.",
            100 * wait, train, prep, gpu ? "GPU" : "compute device");
    } else if (strcmp(bn, "balanced") == 0) {
        PUT("Compute and the input pipeline are balanced: training ran at %.1f img/s and the pipeline alone reaches "
            "%.0f img/s. A faster device would wait for data, so it needs more or faster loader cores with it.",
            train, prep);
    } else {
        PUT("Compute holds this machine back: training ran at %.1f img/s and the loader kept up (data wait %.1f%% of "
            "the step; the pipeline alone reaches %.0f img/s, %.0fx this rate).",
            train, 100 * (isfinite(wait) ? wait : 0), prep, prep / train);
        if (isfinite(frac)) PUT(" The %s ran at %.0f%% of its measured peak, so the kernels are not what is missing.",
                                gpu ? "GPU" : "CPU", 100 * frac);
        if (!gpu) PUT(" A GPU would fix it: the same CPU could feed a device about %.0fx faster before JPEG decode "
                      "becomes the limit.", prep / train);
        else PUT(" A faster GPU (or more of them) would fix it.");
    }
    // the cheapest and the fastest of the catalog's systems
    const json_t *preds = json_object_get(predict, "predictions"), *p, *best = NULL, *fast = NULL;
    size_t i;
    json_array_foreach(preds, i, p) {
        const json_t *c = json_object_get(p, "cost"), *pr = json_object_get(p, "prediction");
        if (isfinite(num(c, "usd_per_million_images")) &&
            (!best || num(c, "usd_per_million_images") < num(json_object_get(best, "cost"), "usd_per_million_images")))
            best = p;
        if (!fast || num(pr, "img_per_s") > num(json_object_get(fast, "prediction"), "img_per_s")) fast = p;
    }
    if (best) {
        const char *id = str(json_object_get(best, "machine"), "id");
        double c = num(json_object_get(best, "cost"), "usd_per_million_images");
        PUT(" Of the catalog's systems, %s trains cheapest ($%.3f per million images", id ? id : "?", c);
        if (isfinite(usd)) PUT(" against $%.2f here", usd);
        PUT(")");
        if (fast && fast != best) {
            const char *fid = str(json_object_get(fast, "machine"), "id");
            PUT(" and %s fastest (%.0f img/s predicted)", fid ? fid : "?",
                num(json_object_get(fast, "prediction"), "img_per_s"));
        }
        PUT(".");
    }
#undef PUT
    return strdup(buf);
}

// ---- the page ----
static const char *base_name(const char *dir, char *buf, size_t len) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(buf, len, "%.*s", (int)(n - s), dir + s);
    return buf;
}

static dlp_status load_run(const char *dir, json_t **out) {
    char path[4400], name[512];
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (!dlp_is_dir(dir)) return DLP_ERR(DLP_ERR_NOTFOUND, "%s is not a directory (give a dlperf run directory)", dir);
    if (!dlp_path_exists(path))
        return DLP_ERR(DLP_ERR_NOTFOUND, "%s has no run.json: not a dlperf run directory (dlperf run writes one)", dir);
    json_t *run = NULL;
    DLP_CHECK(dlp_json_load(path, &run));
    const char *schema = str(run, "schema");
    if (!schema || strncmp(schema, "dlperf.run/", 11) != 0) {
        json_decref(run);
        return DLP_ERR(DLP_ERR_FORMAT, "%s: schema '%s' is not dlperf.run/1", path, schema ? schema : "(none)");
    }
    json_t *gaps = json_array(), *stages = json_object_get(run, "stages");
    json_t *r = json_object();
    json_object_set_new(r, "name", json_string(base_name(dir, name, sizeof name)));
    json_object_set_new(r, "dir", json_string(dir));
    json_t *data = load_result(dir, "data.json", "input pipeline", gaps, json_object_get(stages, "data"));
    json_t *train = load_result(dir, "train.json", "training", gaps, json_object_get(stages, "train"));
    json_t *infer = load_result(dir, "infer.json", "online phase", gaps, json_object_get(stages, "infer"));
    json_t *pred = load_result(dir, "predict.json", "catalog systems", gaps, json_object_get(stages, "predict"));
    json_t *lg = NULL;
    snprintf(path, sizeof path, "%s/loadgen.json", dir);
    if (dlp_path_exists(path)) lg = load_result(dir, "loadgen.json", "LoadGen scenarios", gaps, NULL);
    json_t *val = NULL;  // `dlperf validate --json DIR/validate.json`: the model's predictions beside measurements
    snprintf(path, sizeof path, "%s/validate.json", dir);
    if (dlp_path_exists(path)) val = load_result(dir, "validate.json", "predicted vs measured", gaps, NULL);
    json_t *mon = json_object();
    json_t *mt = load_monitor(dir, "train-monitor.csv", "monitor: training", gaps);
    json_t *mi = load_monitor(dir, "infer-monitor.csv", "monitor: inference", gaps);
    if (mt) json_object_set_new(mon, "training", mt);
    if (mi) json_object_set_new(mon, "inference", mi);
    char *verdict = dlp_report_verdict(run, pred);
    json_object_set_new(r, "verdict", verdict ? json_string(verdict) : json_null());
    free(verdict);
    json_object_set_new(r, "run", run);
    json_object_set_new(r, "data", data ? data : json_null());
    json_object_set_new(r, "train", train ? train : json_null());
    json_object_set_new(r, "infer", infer ? infer : json_null());
    json_object_set_new(r, "predict", pred ? pred : json_null());
    json_object_set_new(r, "loadgen", lg ? lg : json_null());
    json_object_set_new(r, "validate", val ? val : json_null());
    json_object_set_new(r, "monitor", mon);
    json_object_set_new(r, "gaps", gaps);
    *out = r;
    return DLP_OK;
}

dlp_status dlp_report_write(const char *const *dirs, int n, const char *out_path, dlp_report_info *info) {
    if (n < 1) return DLP_ERR(DLP_ERR_INVALID, "report: give at least one run directory");
    dlp_report_info tmp;
    if (!info) info = &tmp;
    memset(info, 0, sizeof *info);
    json_t *runs = json_array();
    for (int i = 0; i < n; i++) {
        json_t *r = NULL;
        dlp_status st = load_run(dirs[i], &r);
        if (st) {
            json_decref(runs);
            return dlp_err_trace(st, __FILE__, __LINE__, "load_run(dirs[i])");
        }
        json_array_append_new(runs, r);
    }
    // the chart library
    const char *lib_path = dlp_report_chartjs_path();
    snprintf(info->chartjs_path, sizeof info->chartjs_path, "%s", lib_path);
    char *lib = NULL;
    size_t lib_len = 0;
    char lib_why[512] = "";
    if (!dlp_path_exists(lib_path)) {
        snprintf(lib_why, sizeof lib_why, "%s not found", lib_path);
    } else if (dlp_read_file(lib_path, &lib, &lib_len, 16u << 20)) {
        snprintf(lib_why, sizeof lib_why, "%s: %s", lib_path, dlp_err_msg());
        dlp_err_clear();
    } else if (strstr(lib, "</script") || strstr(lib, "</SCRIPT")) {  // cannot be inlined as it is
        snprintf(lib_why, sizeof lib_why, "%s contains '</script' and cannot be inlined", lib_path);
        free(lib);
        lib = NULL;
    }
    info->chartjs = lib != NULL;
    info->runs = n;

    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char created[64];
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:b, s:s, s:o}", "schema", "dlperf.report/1", "dlperf_version",
                            DLP_VERSION, "created", created, "charts", lib != NULL, "charts_why", lib_why, "runs", runs);
    char *js = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    if (!js) {
        free(lib);
        return DLP_ERR(DLP_ERR_NOMEM, "report: cannot serialize the results");
    }

    sbuf b = {0};
    sb_str(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>dlperf report: ");
    char name[512];
    for (int i = 0; i < n; i++) {
        if (i) sb_str(&b, " vs ");
        sb_html(&b, base_name(dirs[i], name, sizeof name));
    }
    sb_str(&b, "</title>\n<meta name=\"generator\" content=\"dlperf " DLP_VERSION "\">\n<style>\n");
    sb_str(&b, dlp_report_css);
    sb_str(&b, "</style>\n</head>\n<body>\n<main id=\"report\"><noscript><p class=\"gap\">This page draws its charts "
               "and tables with JavaScript; the numbers are in the JSON block of its source (and in the run "
               "directory's run.json).</p></noscript></main>\n<pre id=\"selfcheck\" hidden></pre>\n");
    sb_str(&b, "<script type=\"application/json\" id=\"dlp-data\">");
    sb_json_script(&b, js);
    sb_str(&b, "</script>\n");
    if (lib) {
        sb_str(&b, "<script>/* Chart.js from Debian's libjs-chart.js (");
        sb_html(&b, lib_path);
        sb_str(&b, "), MIT License */\n");
        sb_add(&b, lib, lib_len);
        sb_str(&b, "\n</script>\n");
    }
    sb_str(&b, "<script>\n");
    sb_str(&b, dlp_report_js);
    sb_str(&b, "</script>\n</body>\n</html>\n");
    free(js);
    free(lib);
    if (b.oom) {
        free(b.p);
        return DLP_ERR(DLP_ERR_NOMEM, "report: out of memory writing the page");
    }
    info->bytes = b.len;
    dlp_status st = dlp_write_atomic(out_path, b.p, b.len, DLP_WRITE_REPLACE);
    free(b.p);
    return st;
}
