// Unit tests for hw/profile, hw/steptime and the sim specs of hw/derive: reading, writing and round-tripping
// profiles; malformed profiles (missing field, wrong type, negative rate, unknown precision, wrong schema) give
// errors naming the field and the file; step times by hand; a measured GPU profile replaces the catalog's.
// Main file: src/hw/profile.c; also src/hw/steptime.c, derive.c (sim specs).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "hw/catalog.h"
#include "hw/derive.h"
#include "core/fields.h"
#include "hw/profile.h"
#include "hw/steptime.h"
#include "testutil.h"

#define FIXTURE "tests/fixtures/model/profile-dev.json"
#define NEAR(a, b, rel) assert_true(fabs((double)(a) - (double)(b)) <= (rel) * fabs((double)(b)) + 1e-15)

static void test_read_fixture(void **state) {
    (void)state;
    dlp_profile *p = malloc(sizeof *p);
    dlp_status st = dlp_profile_read(FIXTURE, p);
    if (st) dlp_err_print(stderr);
    assert_int_equal(st, DLP_OK);
    assert_int_equal(p->host.cores, 2);
    assert_int_equal(p->pipeline.nscaling, 2);
    NEAR(dlp_pipeline_efficiency(&p->pipeline, 2), 0.95, 1e-12);
    const dlp_device_profile *d = dlp_profile_find_device(p, "cpu");
    assert_non_null(d);
    assert_int_equal(d->kind, DLP_DEVICE_CPU);
    assert_int_equal(d->nrates, 4);
    // Rows by thread count: the most threads <= asked, else the fewest above.
    assert_int_equal(dlp_device_find_rate(d, DLP_TASK_TRAIN, DLP_PREC_FP32, 2)->threads, 2);
    assert_int_equal(dlp_device_find_rate(d, DLP_TASK_TRAIN, DLP_PREC_FP32, 1)->threads, 1);
    assert_int_equal(dlp_device_find_rate(d, DLP_TASK_TRAIN, DLP_PREC_FP32, 8)->threads, 2);
    assert_int_equal(dlp_device_find_rate(d, DLP_TASK_TRAIN, DLP_PREC_FP32, 0)->threads, 2);
    assert_int_equal(dlp_device_find_rate(d, DLP_TASK_TRAIN, DLP_PREC_BF16, 1)->threads, 2);
    assert_null(dlp_device_find_rate(d, DLP_TASK_INFER, DLP_PREC_FP16, 0));
    free(p);
}

static void test_round_trip(void **state) {
    (void)state;
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_profile *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    assert_int_equal(dlp_derive_system(c, dlp_catalog_system(c, "dgx-a100"), NULL, a), DLP_OK);
    snprintf(a->created, sizeof a->created, "2026-11-30T00:00:00Z");
    a->has_stats = 1;
    a->stats = dlp_catalog_dataset_find(c, "imagenet-train")->stats;
    json_t *ja = dlp_profile_to_json(a);
    assert_int_equal(dlp_profile_from_json(ja, "memory", b), DLP_OK);
    json_t *jb = dlp_profile_to_json(b);
    char *sa = json_dumps(ja, JSON_SORT_KEYS), *sb = json_dumps(jb, JSON_SORT_KEYS);
    assert_string_equal(sa, sb);
    free(sa);
    free(sb);
    json_decref(ja);
    json_decref(jb);
    // Through a file, which is never overwritten.
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.json", dir);
    assert_int_equal(dlp_profile_write(a, path), DLP_OK);
    assert_int_equal(dlp_profile_write(a, path), DLP_ERR_EXISTS);
    assert_int_equal(dlp_profile_read(path, b), DLP_OK);
    assert_int_equal(b->devices_per_node, 8);
    assert_string_equal(b->devices[0].name, "a100-80gb");
    assert_int_equal(b->devices[0].nrates, a->devices[0].nrates);
    NEAR(b->devices[0].rates[3].per_image_s, a->devices[0].rates[3].per_image_s, 1e-9);
    assert_int_equal(b->stats.images, 1281167);
    dlp_test_rmtree(dir);
    free(a);
    free(b);
    dlp_catalog_free(c);
}

// --- malformed profiles ------------------------------------------------------------------------------------------------

typedef void (*mutate_fn)(json_t *root);
static json_t *dev0(json_t *r) { return json_array_get(json_object_get(r, "devices"), 0); }
static json_t *rate0(json_t *r) { return json_array_get(json_object_get(dev0(r), "rates"), 0); }

static void m_no_cores(json_t *r) { json_object_del(json_object_get(r, "host"), "cores"); }
static void m_type(json_t *r) { json_object_set_new(json_object_get(r, "pipeline"), "decode_per_pixel_s", json_string("x")); }
static void m_neg_rate(json_t *r) { json_object_set_new(rate0(r), "per_image_s", json_real(-0.5)); }
static void m_zero_rate(json_t *r) { json_object_set_new(rate0(r), "per_image_s", json_integer(0)); }
static void m_prec(json_t *r) { json_object_set_new(rate0(r), "precision", json_string("fp8")); }
static void m_task(json_t *r) { json_object_set_new(rate0(r), "task", json_string("serve")); }
static void m_schema(json_t *r) { json_object_set_new(r, "schema", json_string("dlperf.profile/2")); }
static void m_kind(json_t *r) { json_object_set_new(dev0(r), "kind", json_string("tpu")); }
static void m_eff(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(json_object_get(r, "pipeline"), "scaling"), 1), "efficiency",
                        json_integer(0));
}
static void m_threads(json_t *r) { json_object_set_new(json_object_get(r, "host"), "threads", json_integer(1)); }
static void m_no_storage(json_t *r) { json_object_del(r, "storage"); }
static void m_rates_empty(json_t *r) { json_object_set_new(dev0(r), "rates", json_array()); }
static void m_fwd(json_t *r) { json_object_set_new(dev0(r), "fwd_fraction", json_real(1.5)); }
static void m_devices(json_t *r) { json_object_set_new(r, "devices", json_string("cpu")); }
static void m_neg_storage(json_t *r) {
    json_object_set_new(json_object_get(r, "storage"), "cold_read_bytes_per_s", json_integer(-1));
}
static void m_overlap(json_t *r) { json_object_set_new(dev0(r), "h2d_overlap", json_string("yes")); }
static void m_unsorted(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(json_object_get(r, "pipeline"), "scaling"), 1), "threads",
                        json_integer(1));
}
static void m_stats(json_t *r) {
    json_t *s = json_object();
    json_object_set_new(s, "images", json_integer(10));
    json_object_set_new(s, "mean_bytes", json_integer(1000));
    json_object_set_new(r, "stats", s);
}

static const struct {
    mutate_fn fn;
    const char *want[2];
} k_cases[] = {
    {m_no_cores, {": host: field 'cores'", "missing"}},
    {m_type, {": pipeline: field 'decode_per_pixel_s'", "not a number"}},
    {m_neg_rate, {"devices[0] (cpu): rates[0]: field 'per_image_s' must be > 0", "-0.5"}},
    {m_zero_rate, {"devices[0] (cpu): rates[0]: field 'per_image_s' must be > 0", NULL}},
    {m_prec, {"rates[0]: field 'precision' is 'fp8'", NULL}},
    {m_task, {"rates[0]: field 'task' is 'serve'", NULL}},
    {m_schema, {"schema 'dlperf.profile/2' is not supported", "dlperf.profile/1"}},
    {m_kind, {"devices[0] (cpu): field 'kind' is 'tpu'", NULL}},
    {m_eff, {"pipeline: scaling[1]: field 'efficiency' must be > 0", NULL}},
    {m_threads, {"threads >= cores", NULL}},
    {m_no_storage, {"field 'storage' is missing", NULL}},
    {m_rates_empty, {"devices[0] (cpu): field 'rates' is missing or not a non-empty array", NULL}},
    {m_fwd, {"field 'fwd_fraction' must be < 1", NULL}},
    {m_devices, {"field 'devices' is missing or not an array", NULL}},
    {m_neg_storage, {": storage: field 'cold_read_bytes_per_s' must be >= 0", NULL}},
    {m_overlap, {"field 'h2d_overlap' is not true/false", NULL}},
    {m_unsorted, {"pipeline.scaling must be sorted", NULL}},
    {m_stats, {": stats: field 'sizes'", NULL}},
};

// The fields the probe measures survive a write and a read: rate rows per model and size, contention points,
// the DCT scale set, the loader's per-sample overhead, the wake-up latency, the cores' speed while probed.
static void test_round_trip_probe_fields(void **state) {
    (void)state;
    dlp_profile *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    assert_int_equal(dlp_profile_read(FIXTURE, a), DLP_OK);
    a->pipeline.dct_scale_mask = 1u << 1 | 1u << 2 | 1u << 4 | 1u << 8;
    a->pipeline.loader_cost_scale = 0.93;
    a->host.wake_latency_busy_s = 1.25e-4;
    a->host.canary_gflops = 142.6;
    dlp_device_profile *d = &a->devices[0];
    d->rates[1].size = 64;
    snprintf(d->rates[1].model, sizeof d->rates[1].model, "resnet18");
    d->rates[d->nrates] = d->rates[1];
    d->rates[d->nrates].size = 112;
    d->rates[d->nrates].per_image_s = 0.3;
    d->nrates++;
    d->ncontention = 2;
    d->contention[0] = (dlp_contention_point){2, 1, 0.85, 0.4};
    d->contention[1] = (dlp_contention_point){2, 2, 0.7, 0.6};
    char dir[400], path[512];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/probe-fields.json", dir);
    remove(path);
    assert_int_equal(dlp_profile_write(a, path), DLP_OK);
    assert_int_equal(dlp_profile_write(a, path), DLP_ERR_EXISTS);  // never overwritten
    dlp_err_clear();
    assert_int_equal(dlp_profile_read(path, b), DLP_OK);
    assert_int_equal(b->pipeline.dct_scale_mask, a->pipeline.dct_scale_mask);
    NEAR(b->pipeline.loader_cost_scale, 0.93, 1e-12);
    NEAR(b->host.wake_latency_busy_s, 1.25e-4, 1e-12);
    NEAR(b->host.canary_gflops, 142.6, 1e-12);
    const dlp_device_profile *e = dlp_profile_find_device(b, "cpu");
    assert_int_equal(e->nrates, d->nrates);
    assert_int_equal(e->ncontention, 2);
    assert_int_equal(e->contention[1].workers, 2);
    NEAR(e->contention[1].compute_share, 0.7, 1e-12);
    NEAR(e->contention[0].loader_share, 0.4, 1e-12);
    // The row measured closest to a workload: same model, then nearest size; any row when no preference.
    const dlp_rate *r = dlp_device_find_rate_for(e, DLP_TASK_TRAIN, DLP_PREC_FP32, 2, "resnet18", 100);
    assert_int_equal(r->size, 112);
    r = dlp_device_find_rate_for(e, DLP_TASK_TRAIN, DLP_PREC_FP32, 2, "resnet18", 70);
    assert_int_equal(r->size, 64);
    r = dlp_device_find_rate_for(e, DLP_TASK_TRAIN, DLP_PREC_FP32, 1, "resnet18", 64);
    assert_int_equal(r->threads, 1);  // the thread rule first
    assert_int_equal(dlp_device_find_contention(e, 2, 2)->workers, 2);
    assert_int_equal(dlp_device_find_contention(e, 2, 3)->workers, 2);  // the nearest
    assert_int_equal(dlp_device_find_contention(e, 1, 1)->threads, 2);
    // Bad values name the field.
    json_t *o = dlp_profile_to_json(a);
    json_t *c0 = json_array_get(json_object_get(json_array_get(json_object_get(o, "devices"), 0), "contention"), 0);
    json_object_set_new(c0, "loader_share", json_real(1.7));
    assert_int_equal(dlp_profile_from_json(o, "p.json", b), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "contention[0]"));
    json_object_set_new(c0, "loader_share", json_real(0.4));
    json_object_set_new(json_object_get(o, "pipeline"), "dct_scale_mask", json_integer(3));
    assert_int_equal(dlp_profile_from_json(o, "p.json", b), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "dct_scale_mask"));
    dlp_err_clear();
    json_decref(o);
    dlp_test_rmtree(dir);
    free(a);
    free(b);
}

static void test_malformed(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    dlp_profile *p = malloc(sizeof *p);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        json_error_t e;
        json_t *j = json_load_file(FIXTURE, 0, &e);
        assert_non_null(j);
        k_cases[i].fn(j);
        snprintf(path, sizeof path, "%s/bad%zu.json", dir, i);
        assert_int_equal(json_dump_file(j, path, JSON_INDENT(1)), 0);
        json_decref(j);
        dlp_err_clear();
        assert_int_equal(dlp_profile_read(path, p), DLP_ERR_FORMAT);
        const char *msg = dlp_err_msg();
        for (int k = 0; k < 2; k++)
            if (k_cases[i].want[k] && !strstr(msg, k_cases[i].want[k]))
                fail_msg("case %zu: '%s' not in: %s", i, k_cases[i].want[k], msg);
        if (!strstr(msg, path)) fail_msg("case %zu: the file is not named in: %s", i, msg);
    }
    // Not JSON at all; no file.
    snprintf(path, sizeof path, "%s/text.json", dir);
    FILE *f = fopen(path, "w");
    fputs("schema: dlperf.profile/1\n", f);
    fclose(f);
    assert_int_equal(dlp_profile_read(path, p), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "text.json:1:"));
    snprintf(path, sizeof path, "%s/none.json", dir);
    assert_int_equal(dlp_profile_read(path, p), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "none.json"));
    free(p);
    dlp_test_rmtree(dir);
}

// --- step times --------------------------------------------------------------------------------------------------------

static void test_step_times(void **state) {
    (void)state;
    dlp_device_profile d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "g");
    d.kind = DLP_DEVICE_GPU;
    d.fwd_fraction = 1.0 / 3;
    d.contention_efficiency = 1;
    d.h2d_bytes_per_s = 1e9;
    d.nrates = 2;
    d.rates[0] = (dlp_rate){.task = DLP_TASK_TRAIN, .prec = DLP_PREC_FP16, .t0_s = 0.01, .per_image_s = 0.002, .update_s = 0.005};
    d.rates[1] = (dlp_rate){.task = DLP_TASK_INFER, .prec = DLP_PREC_FP16, .t0_s = 0.001, .per_image_s = 0.0005};
    // Batch 10 of twice the reference work, half its parameters, 1 MB per image:
    // fwd+bwd = 10 ms + 10 x 2 ms x 2 = 50 ms; update 5 x 0.5 = 2.5 ms; copy 10 MB / 1 GB/s = 10 ms.
    dlp_step_request q = {DLP_TASK_TRAIN, DLP_PREC_FP16, 0, 10, 2.0, 0.5, 1e6, 0, NULL, 0};
    dlp_step_times st;
    assert_int_equal(dlp_device_validate(&d, "test"), DLP_OK);
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
    NEAR(st.fwd_s, 0.05 / 3, 1e-12);
    NEAR(st.bwd_s, 0.10 / 3, 1e-12);
    NEAR(st.update_s, 0.0025, 1e-12);
    NEAR(st.compute_s, 0.0525, 1e-12);
    NEAR(st.h2d_s, 0.010, 1e-12);
    NEAR(st.step_s, 0.0625, 1e-12);
    d.h2d_overlap = 1;
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
    NEAR(st.step_s, 0.0525, 1e-12);
    q.h2d_bytes_per_s = 1e8;  // a slower shared link: the copy (100 ms) sets the step
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
    NEAR(st.step_s, 0.100, 1e-12);
    q.task = DLP_TASK_INFER;
    q.h2d_bytes_per_s = 0;
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_OK);
    NEAR(st.compute_s, 0.001 + 10 * 0.0005 * 2, 1e-12);
    assert_true(st.bwd_s == 0 && st.update_s == 0);
    q.prec = DLP_PREC_BF16;
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_ERR_UNSUPPORTED);
    assert_non_null(strstr(dlp_err_msg(), "device g has no infer rate at bf16 (it has: train fp16, infer fp16)"));
    q.batch = 0;
    assert_int_equal(dlp_step_times_compute(&d, &q, &st), DLP_ERR_INVALID);
}

// --- sim specs and measured GPU profiles --------------------------------------------------------------------------------

static void test_sim_spec(void **state) {
    (void)state;
    dlp_sim_spec s;
    assert_int_equal(dlp_sim_spec_parse("a100", &s), DLP_OK);
    assert_true(strcmp(s.gpu, "a100") == 0 && s.scale == 1 && s.t0_s < 0 && s.overlap < 0);
    assert_int_equal(dlp_sim_spec_parse("h100,scale=0.1,t0_ms=2,pcie_gbps=12,overlap=0", &s), DLP_OK);
    assert_true(s.scale == 0.1 && fabs(s.t0_s - 0.002) < 1e-15 && s.pcie_bytes_per_s == 12e9 && s.overlap == 0);
    assert_int_equal(dlp_sim_spec_parse("custom,img_per_s=500", &s), DLP_OK);
    static const struct { const char *arg, *want; } bad[] = {
        {"", "needs a GPU"},
        {"scale=2", "first item must be a GPU name"},
        {"a100,speed=2", "unknown option 'speed'"},
        {"a100,scale", "not key=value"},
        {"a100,scale=-1", "scale=-1: needs a number > 0"},
        {"a100,scale=abc", "needs a number > 0"},
        {"a100,overlap=2", "overlap=2: 0 or 1"},
        {"custom", "sim:custom needs img_per_s"},
        {"a100,img_per_s=5", "img_per_s applies to sim:custom only"},
        {"a100,t0_ms=-1", "t0_ms=-1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dlp_sim_spec_parse(bad[i].arg, &s), DLP_ERR_INVALID);
        if (!strstr(dlp_err_msg(), bad[i].want)) fail_msg("'%s': '%s' not in: %s", bad[i].arg, bad[i].want, dlp_err_msg());
    }
    // Options applied to the device: scale divides every time, t0_ms replaces t0, pcie_gbps the copy rate.
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_device_profile base, d;
    assert_int_equal(dlp_derive_gpu(c, dlp_catalog_gpu(c, "a100"), &base), DLP_OK);
    assert_int_equal(dlp_sim_spec_parse("a100,scale=0.5,pcie_gbps=8,overlap=0", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_int_equal(d.nrates, base.nrates);
    for (int i = 0; i < d.nrates; i++) {
        NEAR(d.rates[i].per_image_s, 2 * base.rates[i].per_image_s, 1e-12);
        NEAR(d.rates[i].t0_s, 2 * base.rates[i].t0_s, 1e-12);
    }
    assert_true(d.h2d_bytes_per_s == 8e9 && d.h2d_overlap == 0);
    assert_int_equal(dlp_sim_spec_parse("custom,img_per_s=400,t0_ms=3", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, NULL, &d), DLP_OK);
    const dlp_rate *r = dlp_device_find_rate(&d, DLP_TASK_TRAIN, DLP_PREC_FP32, 0);
    assert_true(r && fabs(r->per_image_s - 1.0 / 400) < 1e-15 && fabs(r->t0_s - 0.003) < 1e-15);
    assert_true(d.h2d_bytes_per_s == 0);  // no copy unless pcie_gbps is given
    assert_int_equal(dlp_sim_spec_parse("a1000", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "unknown GPU 'a1000'"));
    dlp_catalog_free(c);
}

// Writes a measured profile for a100-80gb doing 1000 img/s at fp16 (and nothing else) into dir/name.
static void write_measured(const char *path) {
    dlp_profile *p = malloc(sizeof *p);
    dlp_profile_init(p);
    snprintf(p->id, sizeof p->id, "gpu-box");
    snprintf(p->pipeline.name, sizeof p->pipeline.name, "dlperf");
    p->pipeline.decode_per_image_s = 0.001;
    p->devices_per_node = 1;
    p->ndevices = 1;
    dlp_device_profile *d = &p->devices[0];
    snprintf(d->name, sizeof d->name, "a100-80gb");
    d->kind = DLP_DEVICE_GPU;
    snprintf(d->source, sizeof d->source, "measured");
    d->fwd_fraction = 0.3;
    d->contention_efficiency = 1;
    d->h2d_bytes_per_s = 2e10;
    d->h2d_overlap = 1;
    d->nrates = 1;
    d->rates[0] = (dlp_rate){.task = DLP_TASK_TRAIN, .prec = DLP_PREC_FP16, .t0_s = 0.001, .per_image_s = 0.001};
    snprintf(d->rates[0].basis, sizeof d->rates[0].basis, "measured: test");
    assert_int_equal(dlp_profile_write(p, path), DLP_OK);
    free(p);
}

static void test_measured_replaces_catalog(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a100-80gb.json", dir);
    write_measured(path);
    dlp_catalog *c;
    assert_int_equal(dlp_catalog_load(NULL, &c), DLP_OK);
    dlp_sim_spec s;
    dlp_device_profile d;
    // profile=FILE
    char arg[700];
    snprintf(arg, sizeof arg, "a100,profile=%s", path);
    assert_int_equal(dlp_sim_spec_parse(arg, &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_string_equal(d.source, "measured");
    assert_int_equal(d.nrates, 1);
    NEAR(d.fwd_fraction, 0.3, 1e-12);
    // $DLPERF_PROFILES/<id>.json is found for the GPU, in sim devices and in derived systems.
    setenv("DLPERF_PROFILES", dir, 1);
    assert_int_equal(dlp_sim_spec_parse("a100", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_string_equal(d.source, "measured");
    dlp_profile *p = malloc(sizeof *p);
    assert_int_equal(dlp_derive_system(c, dlp_catalog_system(c, "dgx-a100"), NULL, p), DLP_OK);
    assert_string_equal(p->devices[0].source, "measured");
    NEAR(p->devices[0].rates[0].per_image_s, 0.001, 1e-12);
    // Another GPU is still derived from the catalog.
    assert_int_equal(dlp_sim_spec_parse("h100", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_string_equal(d.source, "catalog");
    unsetenv("DLPERF_PROFILES");
    assert_int_equal(dlp_sim_spec_parse("a100", &s), DLP_OK);
    assert_int_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_string_equal(d.source, "catalog");
    // A bad measured file is an error, not a silent fallback.
    snprintf(arg, sizeof arg, "a100,profile=%s/missing.json", dir);
    assert_int_equal(dlp_sim_spec_parse(arg, &s), DLP_OK);
    assert_int_not_equal(dlp_sim_device(&s, c, &d), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "missing.json"));
    free(p);
    dlp_catalog_free(c);
    dlp_test_rmtree(dir);
}

// The field-table facility on its own: one table reads and writes every kind of row, with the reader's wording.
typedef struct {
    double x;
} ft_inner;
typedef struct {
    char name[8];
    int kind, flag, n, skip;
    int64_t big;
    double frac, pos, nan;
    ft_inner in;  // an object of its own
} ft_rec;
static const char *const k_ft_kinds[] = {"a", "b"};
#define FT(m, t, fl) DLP_FIELD(ft_rec, m, t, fl)
static const dlp_field_def k_ft_in[] = {{DLP_FIELD(ft_inner, x, DLP_FT_NUM, 0)}, {0}};
static const dlp_field_def k_ft[] = {
    {FT(name, DLP_FT_STR, DLP_FF_TITLE)},
    {FT(kind, DLP_FT_ENUM, 0), .names = k_ft_kinds, .nnames = 2},
    {FT(flag, DLP_FT_BOOL, 0)},
    {FT(n, DLP_FT_INT, DLP_FF_OPT), .def = 7, .min = 1, .max = 9},
    {FT(skip, DLP_FT_INT, DLP_FF_OPT | DLP_FF_OMIT0), .min = 0, .max = 9},
    {FT(big, DLP_FT_INT, 0), .min = 0, .max = INT64_MAX},
    {FT(frac, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NONNEG | DLP_FF_RANGE), .lo = 0, .hi = 1},
    {FT(pos, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_POS | DLP_FF_BELOW | DLP_FF_DEFNP), .def = 0.5, .hi = 2},
    {FT(nan, DLP_FT_NUM, DLP_FF_OPT | DLP_FF_NULLNF)},
    {DLP_FIELD_AS(ft_rec, "inner", in, DLP_FT_OBJ, DLP_FF_OPT), .sub = k_ft_in},
    {0}};

static void ft_expect(const char *json, const char *want) {
    json_t *o = json_loads(json, 0, NULL);
    assert_non_null(o);
    ft_rec r;
    dlp_err_clear();
    dlp_status st = dlp_fields_read_record(o, k_ft, &r, sizeof r, "f");
    json_decref(o);
    if (!strstr(dlp_err_msg(), want)) fprintf(stderr, "got '%s', want '%s'\n", dlp_err_msg(), want);
    assert_int_equal(st, DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), want));
}

static void test_field_table(void **state) {
    (void)state;
    json_t *o = json_loads("{\"name\": \"x\", \"kind\": \"b\", \"flag\": true, \"big\": 5000000000, \"frac\": null,"
                           " \"inner\": {\"x\": 3}}", 0, NULL);
    ft_rec r;
    assert_int_equal(dlp_fields_read_record(o, k_ft, &r, sizeof r, "f"), DLP_OK);
    json_decref(o);
    assert_string_equal(r.name, "x");
    assert_int_equal(r.kind, 1);
    assert_int_equal(r.flag, 1);
    assert_int_equal(r.n, 7);  // defaults
    NEAR(r.pos, 0.5, 0);
    assert_true(r.big == 5000000000LL);
    NEAR(r.in.x, 3, 0);
    r.pos = 0;  // DEFNP: written as its default
    r.nan = NAN;
    json_t *w = json_object();
    dlp_fields_write(w, k_ft, &r);
    char *s = json_dumps(w, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s, "{\"name\":\"x\",\"kind\":\"b\",\"flag\":true,\"n\":7,\"big\":5000000000,\"frac\":0.0,"
                           "\"pos\":0.5,\"nan\":null,\"inner\":{\"x\":3.0}}");
    free(s);
    json_decref(w);
    ft_expect("[]", "f: is not an object");
    ft_expect("{\"kind\": \"a\"}", "f: field 'name' is missing or not a string");
    ft_expect("{\"name\": \"x\", \"kind\": \"c\"}", "f (x): field 'kind' is 'c' (a|b)");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"flag\": 1}", "f (x): field 'flag' is not true/false");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"n\": null}", "field 'n' is missing or not an integer");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"n\": 10}", "field 'n' must be an integer in [1, 9] (got 10)");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"big\": 1, \"frac\": 1.5}", "field 'frac' must be between 0 and 1");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"big\": 1, \"pos\": 2}", "field 'pos' must be < 2 (got 2)");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"big\": 1, \"inner\": 3}", "f (x): field 'inner' is not an object");
    ft_expect("{\"name\": \"x\", \"kind\": \"a\", \"big\": 1, \"inner\": {}}", "f (x): inner: field 'x' is missing");
    ft_expect("{\"name\": \"toolongname\"}", "field 'name' is too long (11 characters, at most 7)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_fixture),
        cmocka_unit_test(test_field_table),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_probe_fields),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_step_times),
        cmocka_unit_test(test_sim_spec),
        cmocka_unit_test(test_measured_replaces_catalog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
