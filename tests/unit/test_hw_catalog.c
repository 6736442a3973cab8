// Unit tests for hw/catalog and hw/derive: the catalog loads with every figure sourced; the systems and GPUs the
// issue names are there with their published facts; profiles derived from it model training from the datasheet
// (hw/gpumodel, never a published figure copied through) and reproduce the published inference figures; malformed
// catalog files give an error naming the file, the entry and the field.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hw/catalog.h"
#include "hw/derive.h"
#include "hw/gpumodel.h"
#include "hw/steptime.h"
#include "testutil.h"

static const char *const k_files[] = {"sources", "gpus", "cpus", "systems", "throughput", "datasets", "pipelines"};

static void test_loads_with_issue_entries(void **state) {
    (void)state;
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    static const char *const gpus[] = {"v100", "a100-40gb", "a100-80gb", "h100", "h200", "rtx-3090", "4090", "l4", "t4",
                                       "h100-pcie", "l40s", "b200", "a100-pcie-40gb", "a100-pcie-80gb"};
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) assert_non_null(dlp_catalog_gpu(c, gpus[i]));
    assert_string_equal(dlp_catalog_gpu(c, "A100")->id, "a100-80gb");  // aliases, any case
    assert_null(dlp_catalog_gpu(c, "b300"));
    assert_non_null(strstr(dlp_err_msg(), "unknown GPU 'b300'"));
    // Datasheet fields of the GPU model: SMs, clock, L2 where the sheet gives them (B200's does not).
    const dlp_gpu_spec *g = dlp_catalog_gpu(c, "a100-80gb");
    assert_true(g->sms == 108 && g->boost_mhz == 1410 && g->l2_mb == 40 && g->mem_bw_gb_s == 2039);
    g = dlp_catalog_gpu(c, "l40s");
    assert_true(g->sms == 142 && g->fp16_tflops == 362 && g->mem_bw_gb_s == 864);
    g = dlp_catalog_gpu(c, "b200");
    assert_true(g->sms == 0 && g->fp16_tflops == 2250 && g->mem_bw_gb_s == 8000);
    // Every published record names its stack; no H200 training record (it is predicted, not estimated).
    for (int i = 0; i < c->npublished; i++) {
        assert_true(c->published[i].stack && c->published[i].stack[0]);
        assert_false(c->published[i].task == DLP_TASK_TRAIN && strcmp(c->published[i].gpu->id, "h200-sxm") == 0);
    }
    assert_non_null(strstr(dlp_err_msg(), "h200-sxm"));  // lists what it has
    // The brief's facts about the systems.
    const dlp_system_spec *s = dlp_catalog_system(c, "dgx-a100");
    assert_non_null(s);
    assert_int_equal(s->gpus, 8);
    assert_int_equal(s->cpu->cores * s->sockets, 128);
    assert_true(s->price_usd == 199000 && s->power_w == 6500 && s->kind == DLP_SYSTEM_OWNED);
    s = dlp_catalog_system(c, "dgx-station");
    assert_true(s->gpus == 4 && strcmp(s->gpu->id, "v100-16gb") == 0 && s->cpu->cores == 20);
    assert_true(s->price_usd == 69000 && s->power_w == 1500);
    s = dlp_catalog_system(c, "desktop-4090");
    assert_true(s->gpus == 1 && s->cpu->cores == 16);
    s = dlp_catalog_system(c, "hgx-h100");
    assert_true(s->gpus == 8 && s->cpu->cores * s->sockets == 112);
    assert_non_null(dlp_catalog_system(c, "hgx-h200"));
    s = dlp_catalog_system(c, "aws-p4d");
    assert_true(s->kind == DLP_SYSTEM_CLOUD && s->cpu->threads * s->sockets == 96 && fabs(s->usd_per_hour - 32.77) < 1e-9);
    s = dlp_catalog_system(c, "aws-p5");
    assert_true(s->cpu->threads * s->sockets == 192 && fabs(s->usd_per_hour / 8 - 12.29) < 0.01);
    // Published figures from shared/REFERENCE.md.
    const dlp_published *p = dlp_catalog_primary(c, dlp_catalog_gpu(c, "a100-80gb"), DLP_TASK_TRAIN, DLP_PREC_FP16);
    assert_true(p && p->img_per_s == 2470 && p->batch == 256 && strcmp(p->src->id, "dle-pyt-rn50") == 0);
    p = dlp_catalog_primary(c, dlp_catalog_gpu(c, "v100"), DLP_TASK_TRAIN, DLP_PREC_FP32);
    assert_true(p && p->img_per_s == 367);
    p = dlp_catalog_primary(c, dlp_catalog_gpu(c, "4090"), DLP_TASK_TRAIN, DLP_PREC_FP16);
    assert_true(p && p->img_per_s == 1301);
    p = dlp_catalog_primary(c, dlp_catalog_gpu(c, "h100"), DLP_TASK_INFER, DLP_PREC_INT8);
    assert_true(p && p->img_per_s == 88714);
    // Every estimate-kind source is used only by figures marked as estimates (the loader checks it).
    for (int i = 0; i < c->npublished; i++)
        assert_int_equal(c->published[i].estimate, strcmp(c->published[i].src->kind, "estimate") == 0);
    assert_non_null(dlp_catalog_dataset_find(c, "imagenet-train"));
    assert_int_equal(dlp_catalog_dataset_find(c, "imagenet-train")->stats.images, 1281167);
    assert_non_null(dlp_catalog_pipeline_find(c, "torchvision"));
    assert_true(fabs(dlp_pcie_bytes_per_s(4, 16) - 31.504e9) < 1e6);
    dlp_catalog_free(c);
}

// Every GPU gets a device profile: training rows from the datasheet and the default stack (equal to hw/gpumodel's
// step, marked as model estimates, whatever the published figures say), inference rows reproducing the primary
// published inference figure.
static void test_derived_gpus(void **state) {
    (void)state;
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_gm_stack stk;
    assert_int_equal(dlp_gm_stack_get(c, DLP_GM_DEFAULT_STACK, &stk), DLP_OK);
    for (int i = 0; i < c->ngpus; i++) {
        const dlp_gpu_spec *g = &c->gpus[i];
        dlp_device_profile d;
        assert_int_equal(dlp_derive_gpu(c, g, &d), DLP_OK);
        assert_non_null(dlp_device_find_rate(&d, DLP_TASK_TRAIN, DLP_PREC_FP16, 0));
        assert_non_null(dlp_device_find_rate(&d, DLP_TASK_TRAIN, DLP_PREC_FP32, 0));
        // No row for what the GPU lacks: V100 and T4 have no TF32 or BF16.
        assert_int_equal(dlp_device_find_rate(&d, DLP_TASK_TRAIN, DLP_PREC_BF16, 0) != NULL, g->bf16_tflops > 0);
        assert_int_equal(dlp_device_find_rate(&d, DLP_TASK_TRAIN, DLP_PREC_TF32, 0) != NULL, g->tf32_tflops > 0);
        for (int k = 0; k < d.nrates; k++) {
            const dlp_rate *r = &d.rates[k];
            if (r->task == DLP_TASK_TRAIN) {
                dlp_gm_step gs;
                assert_int_equal(dlp_gm_step_compute(g, r->prec, &stk, &gs), DLP_OK);
                dlp_step_request q = {r->task, r->prec, 0, 256, 1.0, 1.0, 0, 0, NULL, 0};
                dlp_step_times st;
                assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
                assert_true(fabs(st.compute_s - dlp_gm_step_time(&gs, 256)) < 1e-12 * st.compute_s + 1e-15);
                assert_true(r->estimate && strstr(r->basis, "model:") && strstr(r->basis, DLP_GM_DEFAULT_STACK));
                continue;
            }
            const dlp_published *p = dlp_catalog_primary(c, g, r->task, r->prec);
            if (!p) {
                assert_true(r->estimate);  // derived rows are marked
                continue;
            }
            dlp_step_request q = {r->task, r->prec, 0, p->batch > 0 ? p->batch : 256, 1.0, 1.0, 0, 0, NULL, 0};
            dlp_step_times st;
            assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
            assert_true(fabs(q.batch / st.compute_s - p->img_per_s) / p->img_per_s < 1e-9);
            assert_int_equal(r->estimate, p->estimate);
        }
    }
    // The A100's modelled fp16 training is not its published figure copied through, and a faster datasheet is faster:
    // H200 (more bandwidth) at least as fast as H100, H100 faster than A100, A100 faster than V100.
    double rate[4];
    static const char *const ids[] = {"v100", "a100-80gb", "h100", "h200"};
    for (int k = 0; k < 4; k++) {
        dlp_gm_step gs;
        assert_int_equal(dlp_gm_step_compute(dlp_catalog_gpu(c, ids[k]), DLP_PREC_FP16, &stk, &gs), DLP_OK);
        rate[k] = 256 / dlp_gm_step_time(&gs, 256);
    }
    assert_true(rate[0] < rate[1] && rate[1] < rate[2] && rate[2] <= rate[3] * (1 + 1e-12));
    assert_true(fabs(rate[1] - 2470) > 1);
    // L4's MLPerf int8 figure (batch not stated) is a throughput: no fixed time per step.
    dlp_device_profile d;
    assert_int_equal(dlp_derive_gpu(c, dlp_catalog_gpu(c, "l4"), &d), DLP_OK);
    const dlp_rate *r = dlp_device_find_rate(&d, DLP_TASK_INFER, DLP_PREC_INT8, 0);
    assert_non_null(r);
    assert_true(r->t0_s == 0 && fabs(r->per_image_s * 12882 - 1) < 1e-12 && !r->estimate);
    // An unknown stack is an error naming the known ones.
    assert_int_equal(dlp_derive_gpu_stack(c, dlp_catalog_gpu(c, "l4"), "tensorflow-1", &d), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "stack 'tensorflow-1'"));
    assert_non_null(strstr(dlp_err_msg(), "lambda-pytorch"));
    dlp_catalog_free(c);
}

// --- malformed files ---------------------------------------------------------------------------------------------------

typedef void (*mutate_fn)(json_t *root);

static json_t *entry(json_t *root, const char *arr, size_t i) { return json_array_get(json_object_get(root, arr), i); }

static void m_missing_field(json_t *r) { json_object_del(entry(r, "gpus", 2), "mem_bw_gb_s"); }
static void m_wrong_type(json_t *r) { json_object_set_new(entry(r, "gpus", 0), "fp32_tflops", json_string("fast")); }
static void m_negative(json_t *r) { json_object_set_new(entry(r, "gpus", 4), "board_power_w", json_integer(-700)); }
static void m_price_huge(json_t *r) { json_object_set_new(entry(r, "systems", 0), "price_usd", json_real(1e308)); }
static void m_rate_tiny(json_t *r) { json_object_set_new(entry(r, "systems", 0), "storage_read_gb_s", json_real(1e-300)); }
static void m_unknown_gpu(json_t *r) { json_object_set_new(entry(r, "systems", 0), "gpu", json_string("a100-90gb")); }
static void m_unknown_cpu(json_t *r) { json_object_set_new(entry(r, "systems", 1), "cpu", json_string("pentium")); }
static void m_unknown_source(json_t *r) {
    json_object_set_new(json_object_get(entry(r, "gpus", 1), "src"), "*", json_string("nope"));
}
static void m_no_source(json_t *r) { json_object_del(json_object_get(entry(r, "gpus", 5), "src"), "*"); }
static void m_src_field(json_t *r) {
    json_object_set_new(json_object_get(entry(r, "gpus", 1), "src"), "foo_gb", json_string("nv-a100-ds"));
}
static void m_pub_gpu(json_t *r) { json_object_set_new(entry(r, "records", 0), "gpu", json_string("b300")); }
static void m_pub_stack(json_t *r) { json_object_del(entry(r, "records", 3), "stack"); }
static void m_pub_estimate(json_t *r) { json_object_set_new(entry(r, "records", 0), "estimate", json_true()); }
static void m_pub_primary8(json_t *r) { json_object_set_new(entry(r, "records", 1), "primary", json_true()); }
static void m_pub_second_primary(json_t *r) { json_object_set_new(entry(r, "records", 4), "primary", json_true()); }
static void m_pub_zero(json_t *r) { json_object_set_new(entry(r, "records", 2), "img_per_s", json_integer(0)); }
static void m_pub_precision(json_t *r) { json_object_set_new(entry(r, "records", 2), "precision", json_string("fp8")); }
static void m_cpu_threads(json_t *r) { json_object_set_new(entry(r, "cpus", 0), "threads", json_integer(32)); }
static void m_dataset_size(json_t *r) {
    json_object_del(json_array_get(json_object_get(entry(r, "datasets", 0), "sizes"), 0), "w");
}
static void m_source_kind(json_t *r) {
    json_object_set_new(json_object_get(json_object_get(r, "sources"), "imagenet"), "kind", json_string("rumor"));
}
static void m_dup_id(json_t *r) { json_object_set_new(entry(r, "gpus", 1), "id", json_string("V100-16GB")); }
static void m_alias(json_t *r) {
    json_t *a = json_array();
    json_array_append_new(a, json_string("a100"));
    json_object_set_new(entry(r, "gpus", 1), "aliases", a);
}
static void m_schema(json_t *r) { json_object_set_new(r, "schema", json_string("dlperf.catalog.gpus/2")); }
static void m_no_price(json_t *r) { json_object_del(entry(r, "systems", 0), "price_usd"); }
static void m_no_allreduce(json_t *r) { json_object_del(entry(r, "systems", 4), "allreduce_busbw_gb_s"); }
static void m_pipeline_neg(json_t *r) {
    json_object_set_new(entry(r, "pipelines", 0), "decode_per_pixel_s", json_real(-1e-9));
}

static const struct {
    const char *file;
    mutate_fn fn;
    const char *want[3];  // substrings of the error message
} k_cases[] = {
    {"gpus", m_missing_field, {"gpus.json: gpus[2] (a100-80gb)", "field 'mem_bw_gb_s'", "missing"}},
    {"gpus", m_wrong_type, {"gpus[0] (v100-16gb)", "field 'fp32_tflops'", "not a number"}},
    {"gpus", m_negative, {"gpus[4] (h200-sxm)", "field 'board_power_w' must be between 1 and 100000", "-700"}},
    {"systems", m_price_huge, {"systems[0] (dgx-a100)", "field 'price_usd' must be between 1 and 1e+09", "1e+308"}},
    {"systems", m_rate_tiny, {"systems[0] (dgx-a100)", "field 'storage_read_gb_s' must be between 1e-06", "1e-300"}},
    {"systems", m_unknown_gpu, {"systems.json: systems[0] (dgx-a100)", "field 'gpu'", "unknown GPU 'a100-90gb'"}},
    {"systems", m_unknown_cpu, {"systems[1] (dgx-station)", "field 'cpu'", "unknown CPU 'pentium'"}},
    {"gpus", m_unknown_source, {"gpus[1] (a100-40gb)", "src['*']", "unknown source 'nope'"}},
    {"gpus", m_no_source, {"gpus[5] (rtx-3090)", "figure '", "has no source"}},
    {"gpus", m_src_field, {"gpus[1] (a100-40gb)", "src names field 'foo_gb'", NULL}},
    {"throughput", m_pub_gpu, {"throughput.json: records[0]", "field 'gpu'", "unknown GPU 'b300'"}},
    {"throughput", m_pub_stack, {"throughput.json: records[3]", "field 'stack'", NULL}},
    {"throughput", m_pub_estimate, {"records[0]", "field 'estimate' must be false", "dle-pyt-rn50"}},
    {"throughput", m_pub_primary8, {"records[1]", "primary figure must be for 1 GPU", NULL}},
    {"throughput", m_pub_second_primary, {"records[4]", "second primary figure for a100-80gb train fp16", NULL}},
    {"throughput", m_pub_zero, {"records[2]", "field 'img_per_s' must be between 0.01 and 1e+07", NULL}},
    {"throughput", m_pub_precision, {"records[2]", "field 'precision' is 'fp8'", NULL}},
    {"cpus", m_cpu_threads, {"cpus.json: cpus[0] (epyc-7742)", "field 'threads' (32) is below 'cores' (64)", NULL}},
    {"datasets", m_dataset_size, {"datasets.json: datasets[0] (imagenet-train): sizes[0]", "field 'w'", NULL}},
    {"sources", m_source_kind, {"sources.json: sources['imagenet']", "field 'kind' is 'rumor'", NULL}},
    {"gpus", m_dup_id, {"gpus.json", "id 'V100-16GB' appears twice", NULL}},
    {"gpus", m_alias, {"gpus.json", "alias 'a100' of a100-80gb also names a100-40gb", NULL}},
    {"gpus", m_schema, {"gpus.json", "schema 'dlperf.catalog.gpus/2' is not supported", NULL}},
    {"systems", m_no_price, {"systems[0] (dgx-a100)", "field 'price_usd'", NULL}},
    {"systems", m_no_allreduce, {"systems[4] (hgx-h100)", "field 'allreduce_busbw_gb_s' is missing", NULL}},
    {"pipelines", m_pipeline_neg, {"pipelines.json: pipelines[0] (dlperf)", "field 'decode_per_pixel_s' must be >= 0", NULL}},
};

static char g_src[1024];

static void copy_catalog(const char *dst) {
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s.json", g_src, k_files[i]);
        snprintf(b, sizeof b, "%s/%s.json", dst, k_files[i]);
        json_error_t e;
        json_t *j = json_load_file(a, 0, &e);
        assert_non_null(j);
        assert_int_equal(json_dump_file(j, b, JSON_INDENT(1) | JSON_PRESERVE_ORDER), 0);
        json_decref(j);
    }
}

static void expect_error(const char *dir, const char *const want[3], const char *label) {
    dlp_catalog *c = NULL;
    dlp_err_clear();
    dlp_status st = dlp_catalog_load(dir, &c);
    if (st == DLP_OK) fprintf(stderr, "case %s: loaded without error\n", label);
    assert_int_not_equal(st, DLP_OK);
    assert_null(c);
    for (int k = 0; k < 3 && want[k]; k++) {
        if (!strstr(dlp_err_msg(), want[k])) fprintf(stderr, "case %s: '%s' not in: %s\n", label, want[k], dlp_err_msg());
        assert_non_null(strstr(dlp_err_msg(), want[k]));
    }
    assert_non_null(strstr(dlp_err_msg(), dir));  // the file's path is in the message
}

static void test_malformed(void **state) {
    (void)state;
    assert_int_equal(dlp_catalog_default_dir(g_src, sizeof g_src), DLP_OK);
    char dir[512];
    dlp_test_tmpdir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        copy_catalog(dir);
        char path[700];
        snprintf(path, sizeof path, "%s/%s.json", dir, k_cases[i].file);
        json_error_t e;
        json_t *j = json_load_file(path, 0, &e);
        assert_non_null(j);
        k_cases[i].fn(j);
        assert_int_equal(json_dump_file(j, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER), 0);
        json_decref(j);
        char label[32];
        snprintf(label, sizeof label, "%zu", i);
        expect_error(dir, k_cases[i].want, label);
    }
    // A copy that was not mutated loads: the cases fail for their mutation only.
    copy_catalog(dir);
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(dir, &c), DLP_OK);
    dlp_catalog_free(c);
    // Syntax error: file, line and column.
    char path[700];
    snprintf(path, sizeof path, "%s/systems.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\n  \"schema\": \"dlperf.catalog.systems/1\",\n  \"systems\": [ {\"id\": \"x\",, } ]\n}\n", f);
    fclose(f);
    const char *want_syntax[3] = {"systems.json:3:", "malformed JSON", NULL};
    expect_error(dir, want_syntax, "syntax");
    // A missing file.
    copy_catalog(dir);
    snprintf(path, sizeof path, "%s/pipelines.json", dir);
    assert_int_equal(unlink(path), 0);
    const char *want_missing[3] = {"pipelines.json", NULL, NULL};
    expect_error(dir, want_missing, "missing file");
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_with_issue_entries),
        cmocka_unit_test(test_derived_gpus),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
