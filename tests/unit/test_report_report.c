// Unit tests for report/report: the verdict in words for each bottleneck (a table of cases); the page of a
// hand-made run directory: results embedded with every '<' escaped (a "</script>" in a string cannot end the
// block), the monitor's CSV as columns (quoted phase, empty cells as null, a cut last line, a long one averaged in
// groups), missing stages and series listed as gaps with their reason, the chart library inlined or, when absent,
// the page still written; a directory without run.json refused with its name.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "report/report.h"
#include "testutil.h"

typedef struct verdict_case {
    const char *summary;  // run.json's summary
    const char *kind;     // run.json's device_kind (the backend's caps)
    const char *want[3];  // substrings of the verdict
} verdict_case;

static void test_verdict(void **state) {
    (void)state;
    static const verdict_case cases[] = {
        {"{\"train_img_per_s\": 15.3, \"prep_img_per_s\": 1627, \"train_data_wait_frac\": 0.001, "
         "\"train_fraction_of_peak\": 0.78, \"bottleneck\": \"compute\"}",
         "cpu", {"Compute holds this machine back", "78% of its measured peak", "A GPU would fix it"}},
        {"{\"train_img_per_s\": 900, \"prep_img_per_s\": 1000, \"train_data_wait_frac\": 0.4, "
         "\"bottleneck\": \"input pipeline\"}",
         "gpu", {"The input pipeline holds this machine back", "40% of the step", "a faster GPU would not"}},
        {"{\"train_img_per_s\": 900, \"prep_img_per_s\": 1000, \"bottleneck\": \"balanced\"}", "gpu",
         {"balanced", "more or faster loader cores", NULL}},
        {"{\"train_img_per_s\": 10}", "cpu", {"not known", NULL, NULL}},
        {"{}", "cpu", {"No verdict", "not measured", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *run = json_pack("{s:o, s:s}", "summary", json_loads(cases[i].summary, 0, NULL), "device_kind",
                                cases[i].kind);
        char *v = dlp_report_verdict(run, NULL);
        assert_non_null(v);
        for (int k = 0; k < 3 && cases[i].want[k]; k++) {
            if (!strstr(v, cases[i].want[k])) fail_msg("case %zu: no '%s' in: %s", i, cases[i].want[k], v);
        }
        free(v);
        json_decref(run);
    }
    // the catalog's cheapest and fastest system
    json_t *run = json_pack("{s:{s:f, s:f, s:s, s:f}, s:{s:s}}", "summary", "train_img_per_s", 15.0, "prep_img_per_s",
                            1600.0, "bottleneck", "compute", "usd_per_million_train_images", 1.82, "options", "device", "cpu");
    json_t *pred = json_loads("{\"predictions\": ["
                              "{\"machine\": {\"id\": \"dgx-a100\"}, \"prediction\": {\"img_per_s\": 19722}, \"cost\": {\"usd_per_million_images\": 0.12}},"
                              "{\"machine\": {\"id\": \"desktop-4090\"}, \"prediction\": {\"img_per_s\": 1301}, \"cost\": {\"usd_per_million_images\": 0.056}}]}",
                              0, NULL);
    char *v = dlp_report_verdict(run, pred);
    assert_non_null(strstr(v, "desktop-4090 trains cheapest ($0.056 per million images against $1.82 here)"));
    assert_non_null(strstr(v, "dgx-a100 fastest (19722 img/s predicted)"));
    free(v);
    json_decref(run);
    json_decref(pred);
}

static void put(const char *dir, const char *name, const char *text) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(dlp_write_atomic(p, text, strlen(text), DLP_WRITE_REPLACE), DLP_OK);
}

static char *page_of(const char *dir, const char *chartjs, dlp_report_info *info) {
    char out[4200];
    snprintf(out, sizeof out, "%s/page.html", dir);
    setenv("DLPERF_CHARTJS", chartjs, 1);
    const char *dirs[] = {dir};
    dlp_status st = dlp_report_write(dirs, 1, out, info);
    unsetenv("DLPERF_CHARTJS");
    assert_int_equal(st, DLP_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(dlp_read_file(out, &text, &len, 64u << 20), DLP_OK);
    assert_int_equal(len, info->bytes);
    return text;
}

static void test_page(void **state) {
    (void)state;
    char dir[256];
    dlp_test_tmpdir(dir, sizeof dir);
    put(dir, "run.json",
        "{\"schema\": \"dlperf.run/1\", \"argv\": [\"run\", \"--data\", \"</script><script>alert(1)</script>\"],"
        " \"stages\": {\"data\": {\"exit_status\": 0}, \"train\": {\"exit_status\": 0}, \"infer\": {\"exit_status\": 1},"
        " \"predict\": {\"exit_status\": -1}}, \"summary\": {\"train_img_per_s\": 12.5}}");
    put(dir, "train.json", "{\"schema\": \"dlperf.train/1\", \"loss\": {\"first\": 2.3, \"last\": 1.5}}");
    put(dir, "data.json", "{\"runs\": [1, 2");  // cut: unreadable
    put(dir, "train-monitor.csv",
        "t_s,dt_s,unix_s,phase,cpu.all.util_pct,run.images_per_s,cpu.all.util_pct\n"  // a repeated name: skipped
        "0.5,0.5,100.5,\"warm-up\",50,,99\n"
        "\n"  // a blank line: skipped
        "1.0,0.5,101.0,epoch 1,75.5,12\n"
        "1.5,0.5,101.5,epoch 1,80");  // a cut last line
    // a chart library stand-in
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/chart.min.js", dir);
    put(dir, "chart.min.js", "/* CHART-LIBRARY-STANDIN */ var Chart = function () {};");
    dlp_report_info info;
    char *page = page_of(dir, lib, &info);
    assert_int_equal(info.chartjs, 1);
    assert_int_equal(info.runs, 1);
    assert_non_null(strstr(page, "CHART-LIBRARY-STANDIN"));
    // the argument with </script> is escaped in the JSON block: no "</script><script>alert" anywhere
    assert_null(strstr(page, "<script>alert"));
    assert_non_null(strstr(page, "\\u003c/script>\\u003cscript>alert(1)\\u003c/script>"));
    // the monitor series as columns: quoted phase unquoted, empty and missing cells null
    assert_non_null(strstr(page, "\"phase\":[\"warm-up\",\"epoch 1\",\"epoch 1\"]"));
    assert_non_null(strstr(page, "\"cpu.all.util_pct\":[50.0,75.5,80.0]"));
    assert_non_null(strstr(page, "\"run.images_per_s\":[null,12.0,null]"));
    // gaps with their reason
    assert_non_null(strstr(page, "data.json could not be read"));
    assert_non_null(strstr(page, "the stage failed (exit status 1) and wrote no infer.json"));
    assert_non_null(strstr(page, "the stage was not run"));
    assert_non_null(strstr(page, "no monitor series (infer-monitor.csv)"));
    free(page);

    // no chart library: still written, and it says why
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/nothing-here.js", dir);
    page = page_of(dir, missing, &info);
    assert_int_equal(info.chartjs, 0);
    assert_null(strstr(page, "CHART-LIBRARY-STANDIN"));
    assert_non_null(strstr(page, "\"charts\":false"));
    assert_non_null(strstr(page, "nothing-here.js not found"));
    free(page);

    // a long series: averaged in groups so the page holds at most 1500 samples per series
    {
        size_t cap = 4000 * 64, n = 0;
        char *csv = malloc(cap);
        assert_non_null(csv);
        n += (size_t)snprintf(csv + n, cap - n, "t_s,dt_s,unix_s,phase,x\n");
        for (int i = 0; i < 3001; i++)
            n += (size_t)snprintf(csv + n, cap - n, "%d.5,0.5,%d.5,%s,%d\n", i, 100 + i, i < 6 ? "warm-up" : "epoch 1", i);
        put(dir, "train-monitor.csv", csv);
        free(csv);
        page = page_of(dir, lib, &info);
        assert_non_null(strstr(page, "\"rows\":3001,\"group\":3"));
        assert_non_null(strstr(page, "\"x\":[1.0,4.0,7.0,"));        // the means of 0..2, 3..5, 6..8
        assert_non_null(strstr(page, "\"dt_s\":[1.5,1.5,"));          // summed
        assert_non_null(strstr(page, "\"unix_s\":[100.5,103.5,"));    // the first of each group
        assert_non_null(strstr(page, "\"phase\":[\"warm-up\",\"warm-up\",\"epoch 1\","));
        assert_non_null(strstr(page, ",3000.0]"));                     // the last group holds one sample
        free(page);
    }

    // not a run directory
    char sub[4300];
    snprintf(sub, sizeof sub, "%s/empty", dir);
    assert_int_equal(dlp_mkdirs(sub), DLP_OK);
    const char *dirs[] = {sub};
    char out[4400];
    snprintf(out, sizeof out, "%s/x.html", dir);
    assert_int_equal(dlp_report_write(dirs, 1, out, NULL), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "has no run.json"));
    dlp_err_clear();
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
