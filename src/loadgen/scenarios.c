// loadgen/scenarios: the registry — every scenario, one line each. See loadgen/scenario.h for how to add one.
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#include "loadgen/scenario.h"

// One X(x) per scenario, defined as `const dlp_lg_scenario_ops dlp_lg_scenario_x` in loadgen/scenario_x.c.
// The order is the public index (dlp_lg_scenario): the built-in four stay first, new ones go at the end.
#define DLP_LG_SCENARIOS(X) X(single) X(multi) X(server) X(offline)

#define LG_DECLARE(x) extern const dlp_lg_scenario_ops dlp_lg_scenario_##x;
#define LG_ENTRY(x) &dlp_lg_scenario_##x,
#define LG_INDEX(x) LG_INDEX_##x,
DLP_LG_SCENARIOS(LG_DECLARE)
static const dlp_lg_scenario_ops *const k_scenarios[] = {DLP_LG_SCENARIOS(LG_ENTRY)};
enum { DLP_LG_SCENARIOS(LG_INDEX) LG_NSCENARIOS };
_Static_assert((int)LG_INDEX_single == (int)DLP_LG_SINGLE_STREAM && (int)LG_INDEX_multi == (int)DLP_LG_MULTI_STREAM &&
                   (int)LG_INDEX_server == (int)DLP_LG_SERVER && (int)LG_INDEX_offline == (int)DLP_LG_OFFLINE,
               "the built-in scenarios keep their public indices: add new ones at the end of DLP_LG_SCENARIOS");

const dlp_lg_scenario_ops *dlp_lg_scenario_ops_of(dlp_lg_scenario s) {
    return (unsigned)s < LG_NSCENARIOS ? k_scenarios[s] : NULL;
}

int dlp_lg_scenario_count(void) { return LG_NSCENARIOS; }

const char *dlp_lg_scenario_name(dlp_lg_scenario s) {
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s);
    return ops ? ops->name : "?";
}

int dlp_lg_scenario_searchable(dlp_lg_scenario s) {
    const dlp_lg_scenario_ops *ops = dlp_lg_scenario_ops_of(s);
    return ops && ops->searchable;
}

// The names joined by sep, the last two by last_sep ("A, B, C or D"), into buf.
static void join_names(char *buf, size_t cap, const char *sep, const char *last_sep) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < LG_NSCENARIOS; i++) {
        const char *pre = i == 0 ? "" : i == LG_NSCENARIOS - 1 ? last_sep : sep;
        int n = snprintf(buf + len, cap - len, "%s%s", pre, k_scenarios[i]->name);
        if (n < 0 || (size_t)n >= cap - len) return;
        len += (size_t)n;
    }
}

static char g_choices[512];
static pthread_once_t g_choices_once = PTHREAD_ONCE_INIT;
static void build_choices(void) { join_names(g_choices, sizeof g_choices, "|", "|"); }

const char *dlp_lg_scenario_choices(void) {
    pthread_once(&g_choices_once, build_choices);
    return g_choices;
}

dlp_status dlp_lg_scenario_parse(const char *s, dlp_lg_scenario *out) {
    for (int i = 0; s && i < LG_NSCENARIOS; i++)
        for (const char *const *a = k_scenarios[i]->aliases; *a; a++)
            if (strcasecmp(s, *a) == 0) {
                *out = (dlp_lg_scenario)i;
                return DLP_OK;
            }
    char names[512];
    join_names(names, sizeof names, ", ", " or ");
    return DLP_ERR(DLP_ERR_INVALID, "unknown scenario '%s' (use %s)", s ? s : "", names);
}
