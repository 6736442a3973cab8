// loadgen/conf: LoadGen's config files (mlperf.conf, user.conf) read into dlp_lg_settings — the same
// `model.scenario.key = value` lines, wildcards, precedence and units as LoadGen's TestSettings::FromConfig.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/scenario.h"

#define CONF_MAX_KEYS 256

typedef struct conf_kv {
    char key[128];
    char val[64];
} conf_kv;

// The value of model.scenario.key by LoadGen's precedence: model.scenario, *.scenario, model.*, *.*.
static const char *conf_find(const conf_kv *kv, int n, const char *model, const char *scenario, const char *key) {
    const char *m[4] = {model, "*", model, "*"}, *sc[4] = {scenario, scenario, "*", "*"};
    for (int k = 0; k < 4; k++) {
        char want[160];
        snprintf(want, sizeof want, "%s.%s.%s", m[k], sc[k], key);
        for (int i = n - 1; i >= 0; i--)  // the last line wins, as LoadGen's map overwrites
            if (strcmp(kv[i].key, want) == 0) return kv[i].val;
    }
    return NULL;
}

// LoadGen accepts a value only when it is wholly an integer (strtoul base 0) or a double.
static int conf_number(const char *v) {
    char *end;
    (void)strtoul(v, &end, 0);
    if (*v && *end == '\0') return 1;
    (void)strtod(v, &end);
    return *v && *end == '\0';
}

dlp_status dlp_lg_conf_apply(const char *text, const char *model, dlp_lg_settings *s, unsigned *set_mask,
                             char *ignored, size_t ignored_cap) {
    conf_kv *kv = calloc(CONF_MAX_KEYS, sizeof *kv);
    DLP_TRY_ALLOC(kv);
    int n = 0, line_no = 0;
    if (ignored && ignored_cap) ignored[0] = '\0';
    *set_mask = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        line_no++;
        if (len >= sizeof line) {
            free(kv);
            return DLP_ERR(DLP_ERR_FORMAT, "line %d is longer than %zu characters", line_no, sizeof line - 1);
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : p + len;
        // Tokens split on whitespace, as LoadGen's `iss >> s`: key, "=", value; "#" (a token) ends the line.
        char *tok[3] = {0}, *save = NULL;
        int nt = 0;
        for (char *t = strtok_r(line, " \t\r", &save); t && nt < 3; t = strtok_r(NULL, " \t\r", &save)) {
            if (strcmp(t, "#") == 0 && nt != 2) break;
            if (t[0] == '#' && nt == 0) break;  // "#comment" at the start of a line
            tok[nt++] = t;
        }
        if (nt == 0) continue;
        if (nt < 3 || strcmp(tok[1], "=") != 0) {
            free(kv);
            return DLP_ERR(DLP_ERR_FORMAT, "line %d: expected 'model.scenario.key = value'", line_no);
        }
        if (!conf_number(tok[2])) {
            free(kv);
            return DLP_ERR(DLP_ERR_FORMAT, "line %d: the value '%s' must be an integer or a number", line_no, tok[2]);
        }
        const char *d1 = strchr(tok[0], '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
        if (!d1 || !d2 || d1 == tok[0] || d2 == d1 + 1 || !d2[1]) {
            free(kv);
            return DLP_ERR(DLP_ERR_FORMAT, "line %d: the key '%s' is not model.scenario.key", line_no, tok[0]);
        }
        if (n == CONF_MAX_KEYS) {
            free(kv);
            return DLP_ERR(DLP_ERR_FORMAT, "more than %d settings", CONF_MAX_KEYS);
        }
        snprintf(kv[n].key, sizeof kv[n].key, "%s", tok[0]);
        snprintf(kv[n].val, sizeof kv[n].val, "%s", tok[2]);
        n++;
    }
    const char *sc = dlp_lg_scenario_name(s->scenario);
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s->scenario);
    const char *v;
    unsigned m = 0;
    // Scenario-specific keys are read under their own scenario (LoadGen reads e.g. "Server.target_latency"
    // only for the Server); here only the run's scenario matters.
    if ((v = conf_find(kv, n, model, sc, "target_qps"))) s->target_qps = strtod(v, NULL), m |= DLP_LG_CONF_TARGET_QPS;
    if ((v = conf_find(kv, n, model, sc, "target_latency"))) {
        s->target_latency_ns = (int64_t)(strtod(v, NULL) * 1e6);  // ms
        m |= DLP_LG_CONF_TARGET_LATENCY;
    }
    if ((v = conf_find(kv, n, model, sc, "target_latency_percentile"))) {
        s->target_latency_percentile = strtod(v, NULL) / 100;
        m |= DLP_LG_CONF_PERCENTILE;
    }
    if (ops && ops->sized_queries && (v = conf_find(kv, n, model, sc, "samples_per_query")))
        s->samples_per_query = (int)strtol(v, NULL, 0), m |= DLP_LG_CONF_SPQ;
    if ((v = conf_find(kv, n, model, sc, "min_duration")))
        s->min_duration_ns = (int64_t)strtoll(v, NULL, 0) * 1000000LL, m |= DLP_LG_CONF_MIN_DURATION;
    if ((v = conf_find(kv, n, model, sc, "max_duration")))
        s->max_duration_ns = (int64_t)strtoll(v, NULL, 0) * 1000000LL, m |= DLP_LG_CONF_MAX_DURATION;
    if ((v = conf_find(kv, n, model, sc, "min_query_count")))
        s->min_query_count = strtoll(v, NULL, 0), m |= DLP_LG_CONF_MIN_QUERIES;
    if ((v = conf_find(kv, n, model, sc, "max_query_count")))
        s->max_query_count = strtoll(v, NULL, 0), m |= DLP_LG_CONF_MAX_QUERIES;
    if ((v = conf_find(kv, n, model, sc, "performance_sample_count_override")) && strtoll(v, NULL, 0) > 0)
        s->sample_count = strtoll(v, NULL, 0), m |= DLP_LG_CONF_SAMPLES;
    if ((v = conf_find(kv, n, model, sc, "schedule_rng_seed")))
        s->schedule_seed = strtoull(v, NULL, 0), m |= DLP_LG_CONF_SEEDS;
    if ((v = conf_find(kv, n, model, sc, "sample_index_rng_seed")))
        s->sample_seed = strtoull(v, NULL, 0), m |= DLP_LG_CONF_SEEDS;
    if ((v = conf_find(kv, n, model, sc, "mode"))) {
        long md = strtol(v, NULL, 0);
        if (md != 1 && md != 2) {
            free(kv);
            return DLP_ERR(DLP_ERR_INVALID, "mode %ld: dlperf runs 1 (AccuracyOnly) or 2 (PerformanceOnly)", md);
        }
        s->mode = md == 1 ? DLP_LG_ACCURACY : DLP_LG_PERFORMANCE;
        m |= DLP_LG_CONF_MODE;
    }
    // Keys of this model and scenario that dlperf does not use (listed so nothing is silently dropped).
    static const char *const known[] = {"target_qps", "target_latency", "target_latency_percentile",
                                        "samples_per_query", "min_duration", "max_duration", "min_query_count",
                                        "max_query_count", "performance_sample_count_override",
                                        "schedule_rng_seed", "sample_index_rng_seed", "mode", NULL};
    size_t used = 0;
    for (int i = 0; ignored && i < n; i++) {
        const char *k = strrchr(kv[i].key, '.') + 1;
        int is_known = 0;
        for (int j = 0; known[j]; j++) is_known |= strcmp(k, known[j]) == 0;
        if (is_known) continue;
        int w = snprintf(ignored + used, used < ignored_cap ? ignored_cap - used : 0, "%s%s", used ? "\n" : "",
                         kv[i].key);
        if (w > 0) used += (size_t)w;
        if (used >= ignored_cap) break;
    }
    *set_mask = m;
    free(kv);
    return DLP_OK;
}
