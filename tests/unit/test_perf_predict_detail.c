// Unit tests for perf/predict_detail.c: the machine of a prediction (a catalog system, cost figures replaced), the
// device picked from --device, the dataset statistics' sources, the GPU model's step explained, and a published
// figure beside a prediction.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf/predict_detail.h"

static dlp_catalog *g_cat;

static int setup(void **state) {
    (void)state;
    return dlp_catalog_load(NULL, &g_cat) == DLP_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    dlp_catalog_free(g_cat);
    return 0;
}

// A catalog system with its stack; a price alone makes it an owned machine; an unknown id is an error.
static void test_machine(void **state) {
    (void)state;
    dlp_profile *p = malloc(sizeof *p);
    const char *stack = NULL;
    dlp_predict_machine_req r = {.system = "dgx-a100", .pipeline = "dlperf"};
    assert_int_equal(dlp_predict_machine(g_cat, &r, p, &stack), DLP_OK);
    assert_non_null(stack);
    assert_true(p->ndevices >= 1);
    r.price_usd = 123456;
    r.power_w = 999;
    assert_int_equal(dlp_predict_machine(g_cat, &r, p, &stack), DLP_OK);
    assert_true(p->cost.price_usd == 123456 && p->cost.power_w == 999 && p->cost.usd_per_hour == 0);
    r.usd_per_hour = 7;
    assert_int_equal(dlp_predict_machine(g_cat, &r, p, &stack), DLP_OK);
    assert_true(p->cost.usd_per_hour == 7);
    r.system = "no-such-system";
    assert_int_not_equal(dlp_predict_machine(g_cat, &r, p, &stack), DLP_OK);
    dlp_err_clear();
    free(p);
}

// No --device: the machine's first; a GPU name: the catalog GPU emulated (published figures apply); sim options
// make it not plain; a stack named in the device string wins; cpu on a catalog system is an error.
static void test_device(void **state) {
    (void)state;
    dlp_profile *p = malloc(sizeof *p);
    const char *stack;
    dlp_predict_machine_req r = {.system = "dgx-a100", .pipeline = "dlperf"};
    assert_int_equal(dlp_predict_machine(g_cat, &r, p, &stack), DLP_OK);
    dlp_device_profile d;
    int plain = 0;
    char stk[48] = "";
    assert_int_equal(dlp_predict_device(g_cat, p, NULL, NULL, &d, &plain, stk, sizeof stk), DLP_OK);
    assert_string_equal(d.name, p->devices[0].name);
    assert_true(plain && !stk[0]);
    assert_int_equal(dlp_predict_device(g_cat, p, "h100", NULL, &d, &plain, stk, sizeof stk), DLP_OK);
    assert_true(plain);
    assert_int_equal(dlp_predict_device(g_cat, p, "sim:h100,scale=0.5", "mlperf", &d, &plain, stk, sizeof stk), DLP_OK);
    assert_false(plain);
    assert_string_equal(stk, "mlperf");
    assert_int_equal(dlp_predict_device(g_cat, p, "cpu", NULL, &d, &plain, stk, sizeof stk), DLP_ERR_NOTFOUND);
    dlp_err_clear();
    free(p);
}

// The statistics: a catalog dataset by id, else the task's ImageNet split; an unknown id names --dataset.
static void test_stats(void **state) {
    (void)state;
    dlp_profile *p = calloc(1, sizeof *p);
    dlp_workload w;
    dlp_workload_init(&w);
    int skipped;
    char where[64];
    assert_int_equal(dlp_predict_stats(g_cat, p, NULL, NULL, &w, &skipped, where, sizeof where), DLP_OK);
    assert_true(w.stats.images == dlp_catalog_dataset_find(g_cat, "imagenet-train")->stats.images);
    w.task = DLP_TASK_INFER;
    assert_int_equal(dlp_predict_stats(g_cat, p, NULL, NULL, &w, &skipped, where, sizeof where), DLP_OK);
    assert_true(w.stats.images == dlp_catalog_dataset_find(g_cat, "imagenet-val")->stats.images);
    assert_int_equal(dlp_predict_stats(g_cat, p, NULL, "nope", &w, &skipped, where, sizeof where), DLP_ERR_NOTFOUND);
    dlp_err_clear();
    free(p);
}

// The GPU model's step explained: layer kinds sorted by share, the shown ones at least 0.5% of the step, the
// factors for 10% found by bisection (a step at least 10% shorter with them), and a published figure's error.
static void test_explain_and_published(void **state) {
    (void)state;
    const dlp_gpu_spec *g = dlp_catalog_gpu(g_cat, "a100");
    assert_non_null(g);
    dlp_gm_stack stk;
    assert_int_equal(dlp_gm_stack_get(g_cat, DLP_GM_DEFAULT_STACK, &stk), DLP_OK);
    dlp_gm_explain x;
    assert_int_equal(dlp_gm_explain_compute(g, DLP_PREC_FP16, &stk, 256, &x), DLP_OK);
    assert_true(x.step_s > 0);
    for (int i = 1; i < DLP_WL_KIND_COUNT; i++) assert_true(x.st.kind_s[x.order[i - 1]] >= x.st.kind_s[x.order[i]]);
    assert_true(dlp_gm_explain_kind_shown(&x, x.order[0], 256));
    assert_true(x.mem_x == 0 || (x.mem_x > 1 && x.mem_x <= 16));
    assert_true(x.peak_x == 0 || (x.peak_x > 1 && x.peak_x <= 16));
    json_t *j = dlp_gm_explain_to_json(&x, &stk, 256, stk.ce, stk.me, stk.kernel_s);
    assert_non_null(j);
    assert_true(fabs(json_real_value(json_object_get(j, "step_s")) - x.step_s) < 1e-15);
    assert_true(json_array_size(json_object_get(j, "layer_kinds")) >= 1);
    json_decref(j);

    const dlp_published *pb = dlp_catalog_primary(g_cat, g, DLP_TASK_TRAIN, DLP_PREC_FP16);
    assert_non_null(pb);
    dlp_workload w;
    dlp_workload_init(&w);
    w.prec = DLP_PREC_FP16;
    dlp_prediction *o = calloc(1, sizeof *o);
    o->devices = 1;
    o->nodes = 1;
    o->batch = 256;
    o->per_device_img_per_s = o->cluster_img_per_s = pb->img_per_s * 1.1;
    dlp_published_cmp c;
    assert_int_equal(dlp_published_compare(pb, g, &w, o, &stk, pb->stack, &c), 1);
    assert_true(fabs(c.error - 0.1) < 1e-9 && c.same_stack);
    j = dlp_published_cmp_to_json(&c);
    assert_true(fabs(json_real_value(json_object_get(j, "error")) - 0.1) < 1e-9);
    json_decref(j);
    w.prec = DLP_PREC_FP32;  // another precision: not comparable
    assert_int_equal(dlp_published_compare(pb, g, &w, o, &stk, pb->stack, &c), 0);
    free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_explain_and_published),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
