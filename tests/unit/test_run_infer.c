// Unit tests for run/infer: labels (both formats and their errors), top-k, MLPerf's percentile, the model loader
// (random init, weights by name with the classes and arch read from the file, a .pth refused, an arch recognized
// from torchvision keys), the engine against direct plan calls (partial batches too), the preprocessing against
// the data module's transform and its error classes, file lists, the sample library with bad files, the three
// measurement paths (tensors, inline JPEG, loader threads), and the service's pipeline over the real engine and
// preprocessing answering what a direct top-k gives. Tiny models (resnet-mini, 32x32) on ref: ASan-friendly.
// Main file: src/run/infer.c; also src/run/infer_bench.c, src/serve/pipeline.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/jpeg_encode.h"
#include "data/synth.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/state.h"
#include "run/infer.h"
#include "serve/pipeline.h"
#include "testutil.h"

static char g_dir[256];  // fixtures: JPEGs in an ImageFolder tree, plus bad files elsewhere

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

// A synthetic-ImageNet-looking image of class cls, w x h, as JPEG (malloc'd).
static uint8_t *make_jpeg(int cls, int idx, int w, int h, size_t *len) {
    dlp_synth_params p;
    dlp_synth_defaults(&p);
    p.size_min = p.size_max = h < w ? h : w;
    uint8_t *rgb;
    int W, H;
    assert_int_equal(dlp_synth_render(&p, 0, cls, idx, &rgb, &W, &H), DLP_OK);
    dlp_jpeg_enc_opts o;
    dlp_jpeg_enc_defaults(&o);
    o.quality = 90;
    uint8_t *jpg;
    assert_int_equal(dlp_jpeg_encode(rgb, W, H, &o, &jpg, len), DLP_OK);
    free(rgb);
    return jpg;
}

static int setup(void **state) {
    (void)state;
    dlp_test_tmpdir(g_dir, sizeof g_dir);
    char p[512];
    for (int c = 0; c < 3; c++) {
        snprintf(p, sizeof p, "%s/data/c%d", g_dir, c);
        assert_int_equal(dlp_mkdirs(p), DLP_OK);
        for (int i = 0; i < 3; i++) {
            size_t len;
            uint8_t *j = make_jpeg(c, i, 56 + 8 * i, 48 + 4 * c, &len);
            snprintf(p, sizeof p, "%s/data/c%d/img%d.JPEG", g_dir, c, i);
            write_file(p, j, len);
            free(j);
        }
    }
    snprintf(p, sizeof p, "%s/data/c1/notes.txt", g_dir);  // not an image: ignored by the file lists
    write_file(p, "hello", 5);
    snprintf(p, sizeof p, "%s/bad", g_dir);
    assert_int_equal(dlp_mkdirs(p), DLP_OK);
    snprintf(p, sizeof p, "%s/bad/a_empty.jpg", g_dir);
    write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/bad/b_png.jpg", g_dir);
    write_file(p, "\x89PNG\r\n\x1a\n0000000000", 18);
    size_t len;
    uint8_t *j = make_jpeg(0, 9, 64, 48, &len);
    snprintf(p, sizeof p, "%s/bad/c_truncated.jpg", g_dir);
    write_file(p, j, len / 2);
    snprintf(p, sizeof p, "%s/bad/d_good.jpg", g_dir);
    write_file(p, j, len);
    free(j);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    dlp_test_rmtree(g_dir);
    return 0;
}

// ---- labels, top-k, percentiles -------------------------------------------------------------------------

static void test_labels(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/l.txt", g_dir);
    char **l;
    int n;
    write_file(path, "tench\r\ngoldfish\n\ngreat white shark\n", 35);
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_OK);
    assert_int_equal(n, 4);
    assert_string_equal(l[1], "goldfish");
    assert_string_equal(l[2], "");
    assert_string_equal(l[3], "great white shark");
    dlp_infer_labels_free(l, n);
    // The synthetic ImageNet's labels.txt: header, then "<index> <wnid> <description>".
    const char *syn = "# index wnid name\n0 n01441021 synthetic red stripes\n1 n01452973 synthetic lime\n\n";
    write_file(path, syn, strlen(syn));
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(l[0], "n01441021 synthetic red stripes");
    assert_string_equal(l[1], "n01452973 synthetic lime");
    dlp_infer_labels_free(l, n);
    // Out of order indices in that format, an empty file, a NUL byte: FORMAT errors naming the file.
    const char *bad = "# index wnid name\n0 n1 a\n2 n2 b\n";
    write_file(path, bad, strlen(bad));
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "line 3"));
    write_file(path, "", 0);
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "empty"));
    write_file(path, "a\nb\0c\n", 6);
    assert_int_equal(dlp_infer_labels_load(path, &l, &n), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "line 2"));
    snprintf(path, sizeof path, "%s/missing.txt", g_dir);
    assert_int_not_equal(dlp_infer_labels_load(path, &l, &n), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "missing.txt"));
    dlp_err_clear();
}

static void test_topk_percentile(void **state) {
    (void)state;
    float z[7] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 3.0f, 2.0f};
    int c[5];
    float p[5];
    dlp_infer_topk(z, 7, 5, c, p);
    const int want[5] = {5, 1, 3, 6, 4};  // the three 2.0 ties in index order
    assert_memory_equal(c, want, sizeof want);
    double sum = 0;
    for (int i = 0; i < 7; i++) sum += exp(z[i] - 3.0);
    for (int j = 0; j < 5; j++) assert_true(fabs(p[j] - exp(z[c[j]] - 3.0) / sum) < 1e-6);
    float big[2] = {1e4f, -1e4f};  // no overflow
    dlp_infer_topk(big, 2, 5, c, p);
    assert_int_equal(c[0], 0);
    assert_int_equal(c[1], 1);
    assert_true(fabs(p[0] - 1.0) < 1e-6);
    // non-finite logits (bad weights, an fp16 overflow) are never selected and leave the others' softmax finite
    float bad[4] = {NAN, 1.0f, INFINITY, 0.0f};
    dlp_infer_topk(bad, 4, 4, c, p);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[1], 3);
    assert_int_equal(c[2], -1);
    assert_int_equal(c[3], -1);
    assert_true(fabs(p[0] - exp(1.0) / (exp(1.0) + 1.0)) < 1e-6 && p[2] == 0.0f);
    // MLPerf's percentile: sorted[floor(n p)], clamped.
    int64_t v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const struct { size_t n; double p; int64_t want; } rows[] = {
        {10, 0.5, 6}, {10, 0.9, 10}, {10, 0.99, 10}, {10, 0.0, 1}, {1, 0.99, 1}, {4, 0.5, 3}, {4, 0.74, 3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(dlp_stats_rank_i64(v, rows[i].n, rows[i].p), rows[i].want);
    int64_t ns[5] = {5000000, 1000000, 3000000, 2000000, 4000000};
    dlp_infer_lat lat;
    dlp_infer_lat_from(ns, 5, &lat);
    assert_int_equal(lat.count, 5);
    assert_true(fabs(lat.min_ms - 1) < 1e-9 && fabs(lat.max_ms - 5) < 1e-9 && fabs(lat.mean_ms - 3) < 1e-9);
    assert_true(fabs(lat.p50_ms - 3) < 1e-9 && fabs(lat.p90_ms - 5) < 1e-9);
}

// ---- model ----------------------------------------------------------------------------------------------

static void test_model_load(void **state) {
    (void)state;
    // Random init: torchvision's init from the seed, flagged.
    dlp_infer_model m;
    dlp_infer_model_cfg mc = {.model = "resnet-mini", .num_classes = 7, .size = 32, .seed = 3};
    assert_int_equal(dlp_infer_model_load(&mc, &m), DLP_OK);
    assert_true(m.random_init);
    assert_int_equal(m.net.num_classes, 7);
    float *want = malloc((size_t)m.net.param_count * sizeof(float));
    dlp_resnet_init_params(&m.net, 3, 0, want, NULL);
    assert_memory_equal(want, m.params, (size_t)m.net.param_count * sizeof(float));
    // Saved with dlperf's state writer, loaded back with neither the model nor the classes given: both come from
    // the file (dlperf.arch metadata, fc.weight rows).
    dlp_rng r;
    dlp_rng_init(&r, 11, 0);
    for (int64_t i = 0; i < m.net.param_count; i++) m.params[i] = (float)dlp_rng_range(&r, -1, 1);
    for (int64_t i = 0; i < m.net.buf_count; i++) m.bufs[i] = (float)dlp_rng_range(&r, 0.5, 1.5);
    char path[512];
    snprintf(path, sizeof path, "%s/w.safetensors", g_dir);
    assert_int_equal(dlp_state_save(&m.net, path, m.params, m.bufs, 5, DLP_WRITE_REPLACE), DLP_OK);
    dlp_infer_model m2;
    dlp_infer_model_cfg mc2 = {.weights = path, .size = 32};
    assert_int_equal(dlp_infer_model_load(&mc2, &m2), DLP_OK);
    assert_false(m2.random_init);
    assert_string_equal(m2.net.arch, "resnet-mini");
    assert_int_equal(m2.net.num_classes, 7);
    assert_memory_equal(m2.params, m.params, (size_t)m.net.param_count * sizeof(float));
    assert_memory_equal(m2.bufs, m.bufs, (size_t)m.net.buf_count * sizeof(float));
    json_t *j = dlp_infer_model_to_json(&m2);
    assert_string_equal(json_string_value(json_object_get(j, "weights")), path);
    assert_true(json_is_false(json_object_get(j, "random_init")));
    json_decref(j);
    dlp_infer_model_free(&m2);
    // A dlperf training checkpoint's model file loads the same way (the sidecar is not needed).
    char ck[512];
    snprintf(ck, sizeof ck, "%s/ck.safetensors", g_dir);
    dlp_checkpoint cp;
    memset(&cp, 0, sizeof cp);
    cp.pos.step = 12;
    assert_int_equal(dlp_checkpoint_save(ck, &m.net, m.params, m.bufs, NULL, &cp), DLP_OK);
    dlp_infer_model_cfg mck = {.weights = ck, .size = 32};
    assert_int_equal(dlp_infer_model_load(&mck, &m2), DLP_OK);
    assert_string_equal(m2.net.arch, "resnet-mini");
    assert_memory_equal(m2.params, m.params, (size_t)m.net.param_count * sizeof(float));
    assert_memory_equal(m2.bufs, m.bufs, (size_t)m.net.buf_count * sizeof(float));
    dlp_infer_model_free(&m2);
    // A wrong model for the file: a strict-load error naming the file, the model and the tensor.
    dlp_infer_model_cfg mc3 = {.model = "resnet-mini-bottleneck", .weights = path, .size = 32};
    assert_int_not_equal(dlp_infer_model_load(&mc3, &m2), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "w.safetensors"));
    assert_non_null(strstr(dlp_err_msg(), "resnet-mini-bottleneck"));
    dlp_err_clear();
    // A PyTorch zip checkpoint: refused, pointing at the converter.
    snprintf(path, sizeof path, "%s/w.pth", g_dir);
    write_file(path, "PK\x03\x04rest-of-a-zip", 17);
    dlp_infer_model_cfg mc4 = {.weights = path};
    assert_int_equal(dlp_infer_model_load(&mc4, &m2), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "torchvision_to_safetensors.py"));
    dlp_err_clear();
    // torchvision keys without metadata: resnet18 recognized from the blocks per stage (then a shape mismatch,
    // since these tensors are tiny, in an error that names resnet18 and the 12 classes of fc.weight).
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    static float tiny[12 * 4];
    int64_t s4[4] = {1, 1, 1, 1}, s2[2] = {12, 4};
    char names[10][48];
    int nn = 0;
    snprintf(names[nn++], 48, "conv1.weight");
    for (int s = 1; s <= 4; s++)
        for (int b = 0; b < 2; b++) snprintf(names[nn++], 48, "layer%d.%d.conv1.weight", s, b);
    for (int i = 0; i < nn; i++) assert_int_equal(dlp_st_writer_add(&w, names[i], DLP_ST_F32, 4, s4, tiny), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "fc.weight", DLP_ST_F32, 2, s2, tiny), DLP_OK);
    snprintf(path, sizeof path, "%s/tv.safetensors", g_dir);
    assert_int_equal(dlp_st_writer_write(&w, path, DLP_WRITE_REPLACE), DLP_OK);
    dlp_st_writer_free(&w);
    dlp_infer_model_cfg mc5 = {.weights = path, .size = 32};
    assert_int_equal(dlp_infer_model_load(&mc5, &m2), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "as resnet18 (12 classes)"));
    dlp_err_clear();
    free(want);
    dlp_infer_model_free(&m);
}

// ---- engine ---------------------------------------------------------------------------------------------

static void mini_model(dlp_infer_model *m, int classes) {
    dlp_infer_model_cfg mc = {.model = "resnet-mini", .num_classes = classes, .size = 32, .seed = 21};
    assert_int_equal(dlp_infer_model_load(&mc, m), DLP_OK);
    dlp_rng r;  // BN statistics away from (0, 1), so an engine that ignored them would differ
    dlp_rng_init(&r, 4, 0);
    for (int64_t i = 0; i < m->net.buf_count; i++) m->bufs[i] = (float)dlp_rng_range(&r, 0.2, 1.5);
}

static void test_engine(void **state) {
    (void)state;
    dlp_infer_model m;
    mini_model(&m, 10);
    dlp_infer_engine e4, e1;
    dlp_infer_engine_cfg c = {.device = "ref", .batch = 4, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_infer_engine_create(&m, &c, &e4), DLP_OK);
    c.batch = 1;
    assert_int_equal(dlp_infer_engine_create(&m, &c, &e1), DLP_OK);
    assert_int_equal(e4.sample_bytes, 3 * 32 * 32 * 4);
    assert_int_equal(e4.num_classes, 10);
    float *x = malloc(4 * e4.sample_bytes), z4[40], z1[10];
    dlp_rng r;
    dlp_rng_init(&r, 8, 0);
    for (int i = 0; i < 4 * 3 * 32 * 32; i++) x[i] = (float)dlp_rng_normal(&r);
    // A batch of 4, a partial batch of 3, and one at a time agree.
    assert_int_equal(dlp_infer_engine_run(&e4, x, 4, z4), DLP_OK);
    for (int s = 0; s < 4; s++) {
        assert_int_equal(dlp_infer_engine_run(&e1, x + (size_t)s * 3 * 32 * 32, 1, z1), DLP_OK);
        size_t where;
        assert_true(dlp_test_max_rel_err(z4 + s * 10, z1, 10, 1e-3f, &where) < 1e-5);
    }
    float z3[30];
    assert_int_equal(dlp_infer_engine_run(&e4, x, 3, z3), DLP_OK);
    size_t where;
    assert_true(dlp_test_max_rel_err(z3, z4, 30, 1e-3f, &where) < 1e-5);
    // Too many samples, an unknown device, an unsupported precision on ref: errors, no plan.
    assert_int_equal(dlp_infer_engine_run(&e4, x, 5, z4), DLP_ERR_INVALID);
    dlp_infer_engine bad;
    c.device = "nope";
    assert_int_not_equal(dlp_infer_engine_create(&m, &c, &bad), DLP_OK);
    c.device = "ref";
    c.precision = DLP_DTYPE_BF16;
    assert_int_not_equal(dlp_infer_engine_create(&m, &c, &bad), DLP_OK);
    assert_non_null(strstr(dlp_err_msg(), "ref"));
    dlp_err_clear();
    json_t *pj = dlp_infer_engine_plan_json(&e4);
    assert_string_equal(json_string_value(json_object_get(pj, "backend")), "ref");
    json_decref(pj);
    free(x);
    dlp_infer_engine_free(&e4);
    dlp_infer_engine_free(&e1);
    dlp_infer_model_free(&m);
}

// ---- preprocessing, files, library ----------------------------------------------------------------------

static void test_prep(void **state) {
    (void)state;
    size_t len;
    uint8_t *j = make_jpeg(1, 2, 120, 90, &len);
    dlp_infer_prep *p;
    dlp_infer_prep_cfg pc = {.size = 64, .layout = DLP_LAYOUT_NCHW, .dtype = DLP_DTYPE_F32, .workers = 2};
    assert_int_equal(dlp_infer_prep_create(&pc, &p), DLP_OK);
    assert_int_equal(dlp_infer_prep_sample_bytes(p), 3 * 64 * 64 * 4);
    // The data module's val transform, full-size decode: the same bytes from either worker.
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_VAL);
    t.out_w = t.out_h = 64;
    t.dct_scales = 1u << 8;
    float *want = malloc(3 * 64 * 64 * 4), *got = malloc(3 * 64 * 64 * 4);
    assert_int_equal(dlp_transform_jpeg(&t, j, len, want), DLP_OK);
    for (int w = 0; w < 2; w++) {
        dlp_sample_info info;
        assert_int_equal(dlp_infer_prep_run(p, w, j, len, got, &info), DLP_OK);
        assert_memory_equal(got, want, 3 * 64 * 64 * 4);
        assert_int_equal(info.scale_num, 8);
    }
    // Bad bodies: FORMAT with the decoder's message; a worker out of range: INVALID.
    assert_int_equal(dlp_infer_prep_run(p, 0, j, 0, got, NULL), DLP_ERR_FORMAT);
    assert_int_equal(dlp_infer_prep_run(p, 0, (const uint8_t *)"\x89PNG\r\n\x1a\n", 8, got, NULL), DLP_ERR_FORMAT);
    assert_int_equal(dlp_infer_prep_run(p, 1, j, len / 3, got, NULL), DLP_ERR_FORMAT);
    assert_int_equal(dlp_infer_prep_run(p, 2, j, len, got, NULL), DLP_ERR_INVALID);
    dlp_err_clear();
    dlp_infer_prep_free(p);
    // bf16 NHWC output: the same transform with that layout and type.
    pc.layout = DLP_LAYOUT_NHWC;
    pc.dtype = DLP_DTYPE_BF16;
    pc.workers = 1;
    assert_int_equal(dlp_infer_prep_create(&pc, &p), DLP_OK);
    t.layout = DLP_LAYOUT_NHWC;
    t.dtype = DLP_DTYPE_BF16;
    assert_int_equal(dlp_infer_prep_run(p, 0, j, len, got, NULL), DLP_OK);
    assert_int_equal(dlp_transform_jpeg(&t, j, len, want), DLP_OK);
    assert_memory_equal(got, want, 3 * 64 * 64 * 2);
    dlp_infer_prep_free(p);
    pc.workers = 0;
    assert_int_equal(dlp_infer_prep_create(&pc, &p), DLP_ERR_INVALID);
    dlp_err_clear();
    free(want);
    free(got);
    free(j);
}

static void test_files_library(void **state) {
    (void)state;
    char p[512];
    dlp_infer_files f = {0};
    snprintf(p, sizeof p, "%s/data", g_dir);
    assert_int_equal(dlp_infer_files_add(&f, p), DLP_OK);
    assert_int_equal(f.n, 9);  // notes.txt is not a JPEG
    for (int i = 1; i < f.n; i++) assert_true(strcmp(f.paths[i - 1], f.paths[i]) < 0);
    assert_int_equal(f.labels[0], -1);
    snprintf(p, sizeof p, "%s/nothing-here", g_dir);
    assert_int_equal(dlp_infer_files_add(&f, p), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "nothing-here"));
    dlp_err_clear();
    dlp_infer_files_free(&f);
    // From a dataset: spread over it, with labels.
    dlp_dataset *ds;
    snprintf(p, sizeof p, "%s/data", g_dir);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_OK);
    assert_int_equal(dlp_infer_files_from_dataset(&f, ds, 3), DLP_OK);
    assert_int_equal(f.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(f.labels[i], i);  // one of each class
    dlp_infer_files_free(&f);
    dlp_dataset_free(ds);
    // The library: bad files skipped and counted, the good ones preprocessed in order.
    snprintf(p, sizeof p, "%s/bad", g_dir);
    assert_int_equal(dlp_infer_files_add(&f, p), DLP_OK);
    assert_int_equal(f.n, 4);
    dlp_infer_prep *prep;
    dlp_infer_prep_cfg pc = {.size = 32, .layout = DLP_LAYOUT_NCHW, .dtype = DLP_DTYPE_F32, .workers = 1};
    assert_int_equal(dlp_infer_prep_create(&pc, &prep), DLP_OK);
    dlp_infer_library lib;
    assert_int_equal(dlp_infer_library_load(prep, &f, 0, &lib), DLP_OK);
    assert_int_equal(lib.n, 1);
    assert_int_equal(lib.skipped, 3);
    assert_int_equal(lib.file[0], 3);
    assert_true(lib.bytes_read > 0 && lib.decode_ns > 0);
    dlp_infer_library_free(&lib);
    dlp_infer_files only_bad = {0};  // nothing usable: an error
    for (int i = 0; i < 3; i++) assert_int_equal(dlp_infer_files_add(&only_bad, f.paths[i]), DLP_OK);
    assert_int_equal(dlp_infer_library_load(prep, &only_bad, 0, &lib), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "none of the 3"));
    dlp_err_clear();
    dlp_infer_files_free(&only_bad);
    dlp_infer_prep_free(prep);
    dlp_infer_files_free(&f);
}

// ---- measurement ----------------------------------------------------------------------------------------

static void test_bench(void **state) {
    (void)state;
    dlp_infer_model m;
    mini_model(&m, 10);
    dlp_infer_engine e;
    dlp_infer_engine_cfg c = {.device = "ref", .batch = 4, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_infer_engine_create(&m, &c, &e), DLP_OK);
    char p[512];
    dlp_infer_files f = {0};
    snprintf(p, sizeof p, "%s/data", g_dir);
    assert_int_equal(dlp_infer_files_add(&f, p), DLP_OK);
    dlp_infer_prep *prep;
    dlp_infer_prep_cfg pc = {.size = 32, .layout = e.layout, .dtype = e.in_dtype, .workers = 1};
    assert_int_equal(dlp_infer_prep_create(&pc, &prep), DLP_OK);
    dlp_infer_library lib;
    assert_int_equal(dlp_infer_library_load(prep, &f, 3, &lib), DLP_OK);  // fewer samples than a batch: repeated
    // From tensors: exactly the timed calls asked for, each a full batch.
    dlp_infer_point pt;
    dlp_infer_bench_cfg bc = {.from = DLP_INFER_FROM_TENSOR, .warmup = 1, .iters = 3, .lib = &lib};
    assert_int_equal(dlp_infer_bench(&e, &bc, &pt), DLP_OK);
    assert_int_equal(pt.iters, 3);
    assert_int_equal(pt.images, 12);
    assert_int_equal(pt.latency.count, 3);
    assert_true(pt.latency.min_ms > 0 && pt.latency.min_ms <= pt.latency.p50_ms && pt.latency.p50_ms <= pt.latency.max_ms);
    assert_true(pt.infer.mean_ms <= pt.latency.mean_ms + 1e-9);
    assert_true(pt.images_per_s > 0 && pt.gflops_per_s > 0);
    json_t *j = dlp_infer_point_to_json(&pt);
    assert_int_equal(json_integer_value(json_object_get(j, "iterations")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "from")), "tensor");
    json_decref(j);
    // A minimum duration keeps it going past --iters.
    bc.iters = 1;
    bc.min_duration_s = 0.05;
    assert_int_equal(dlp_infer_bench(&e, &bc, &pt), DLP_OK);
    assert_true(pt.seconds >= 0.05 && pt.iters >= 1);
    bc.max_iters = 2;  // ...and a cap stops it
    bc.min_duration_s = 100;
    assert_int_equal(dlp_infer_bench(&e, &bc, &pt), DLP_OK);
    assert_int_equal(pt.iters, 2);
    // From JPEG inline, with a bad file among the good: stages timed, the bad one counted and skipped.
    dlp_infer_files mixed = {0};
    snprintf(p, sizeof p, "%s/bad/b_png.jpg", g_dir);
    assert_int_equal(dlp_infer_files_add(&mixed, p), DLP_OK);
    snprintf(p, sizeof p, "%s/data/c2", g_dir);
    assert_int_equal(dlp_infer_files_add(&mixed, p), DLP_OK);
    dlp_infer_bench_cfg bj = {.from = DLP_INFER_FROM_JPEG, .warmup = 0, .iters = 2, .files = &mixed, .prep = prep};
    assert_int_equal(dlp_infer_bench(&e, &bj, &pt), DLP_OK);
    assert_int_equal(pt.iters, 2);
    assert_int_equal(pt.images, 8);
    assert_int_equal(pt.bad, 3);  // 8 good samples cycling over the 4 files meet the PNG 3 times
    assert_true(pt.decode_ms > 0 && pt.resize_ms > 0 && pt.infer_ms > 0);
    assert_true(pt.latency.mean_ms >= pt.infer.mean_ms);
    // Only bad files: an error, not a hang.
    dlp_infer_files allbad = {0};
    snprintf(p, sizeof p, "%s/bad/a_empty.jpg", g_dir);
    assert_int_equal(dlp_infer_files_add(&allbad, p), DLP_OK);
    bj.files = &allbad;
    assert_int_equal(dlp_infer_bench(&e, &bj, &pt), DLP_ERR_FORMAT);
    dlp_err_clear();
    // From JPEG on loader threads over a dataset (9 samples: epochs wrap, the last batch of each is partial).
    dlp_dataset *ds;
    snprintf(p, sizeof p, "%s/data", g_dir);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_OK);
    dlp_infer_bench_cfg bl = {.from = DLP_INFER_FROM_JPEG, .warmup = 1, .iters = 5, .dataset = ds, .workers = 2};
    assert_int_equal(dlp_infer_bench(&e, &bl, &pt), DLP_OK);
    assert_int_equal(pt.iters, 5);
    assert_true(pt.images >= 5 && pt.images <= 20);
    assert_true(pt.per_image_stages && pt.decode_ms > 0);
    j = dlp_infer_point_to_json(&pt);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "stages"), "where")), "loader threads");
    json_decref(j);
    dlp_dataset_free(ds);
    dlp_infer_files_free(&allbad);
    dlp_infer_files_free(&mixed);
    dlp_infer_library_free(&lib);
    dlp_infer_prep_free(prep);
    dlp_infer_files_free(&f);
    dlp_infer_engine_free(&e);
    dlp_infer_model_free(&m);
}

// ---- the service's pipeline over the real engine and preprocessing ----------------------------------------

typedef struct wreq {
    dlp_serve_req r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} wreq;

static void wreq_done(dlp_serve_req *r) {
    wreq *w = r->user;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static dlp_status prep_run(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    return dlp_infer_prep_run(ctx, worker, jpeg, len, dst, NULL);
}

static void test_serve_pipeline(void **state) {
    (void)state;
    dlp_infer_model m;
    mini_model(&m, 10);
    dlp_infer_engine e;
    dlp_infer_engine_cfg c = {.device = "ref", .batch = 4, .precision = DLP_DTYPE_F32, .threads = 1};
    assert_int_equal(dlp_infer_engine_create(&m, &c, &e), DLP_OK);
    dlp_serve_engine eng;
    assert_int_equal(dlp_serve_engine_from_plan(e.plan, &m.net, 4, &eng), DLP_OK);
    dlp_infer_prep *prep;
    dlp_infer_prep_cfg pc = {.size = 32, .layout = e.layout, .dtype = e.in_dtype, .workers = 2};
    assert_int_equal(dlp_infer_prep_create(&pc, &prep), DLP_OK);
    dlp_serve_preprocess pre = {.name = "val", .ctx = prep, .run = prep_run};
    dlp_serve_cfg cfg;
    dlp_serve_cfg_default(&cfg);
    cfg.max_batch = 4;
    cfg.workers = 2;
    cfg.max_delay_ns = 3000000;
    dlp_serve_metrics met;
    dlp_serve_metrics_init(&met, 4);
    dlp_serve_pipeline *pl;
    assert_int_equal(dlp_serve_pipeline_create(&cfg, &eng, &pre, &met, &pl), DLP_OK);
    // 9 good images and 2 bad bodies, all at once.
    enum { N = 11 };
    char p[512];
    uint8_t *body[N];
    size_t len[N];
    wreq w[N];
    for (int i = 0; i < N; i++) {
        if (i < 9) snprintf(p, sizeof p, "%s/data/c%d/img%d.JPEG", g_dir, i % 3, i / 3);
        else snprintf(p, sizeof p, "%s/bad/%s", g_dir, i == 9 ? "b_png.jpg" : "c_truncated.jpg");
        char *d;
        assert_int_equal(dlp_read_file(p, &d, &len[i], 1 << 24), DLP_OK);
        body[i] = (uint8_t *)d;
        memset(&w[i], 0, sizeof w[i]);
        pthread_mutex_init(&w[i].mu, NULL);
        pthread_cond_init(&w[i].cv, NULL);
        w[i].r.body = body[i];
        w[i].r.len = len[i];
        w[i].r.done = wreq_done;
        w[i].r.user = &w[i];
        assert_int_equal(dlp_serve_pipeline_submit(pl, &w[i].r), DLP_OK);
    }
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&w[i].mu);
        while (!w[i].done) pthread_cond_wait(&w[i].cv, &w[i].mu);
        pthread_mutex_unlock(&w[i].mu);
    }
    // Each good answer is its own image's top-5 by a direct preprocess + one-sample run; the bad ones are 400.
    float *x = malloc(e.sample_bytes), z[10];
    for (int i = 0; i < N; i++) {
        if (i >= 9) {
            assert_int_equal(w[i].r.status, 400);
            continue;
        }
        assert_int_equal(w[i].r.status, 200);
        assert_int_equal(dlp_infer_prep_run(prep, 0, body[i], len[i], x, NULL), DLP_OK);
        assert_int_equal(dlp_infer_engine_run(&e, x, 1, z), DLP_OK);
        int cls[5];
        float prob[5];
        dlp_infer_topk(z, 10, 5, cls, prob);
        assert_int_equal(w[i].r.ntop, 5);
        assert_memory_equal(w[i].r.top_class, cls, sizeof cls);
        for (int k = 0; k < 5; k++) assert_true(fabsf(w[i].r.top_prob[k] - prob[k]) < 1e-5f);
    }
    free(x);
    assert_int_equal(dlp_serve_pipeline_drain(pl, 5000000000LL), DLP_OK);
    dlp_serve_pipeline_free(pl);
    for (int i = 0; i < N; i++) {
        free(body[i]);
        pthread_mutex_destroy(&w[i].mu);
        pthread_cond_destroy(&w[i].cv);
    }
    dlp_serve_engine_from_plan_free(&eng);
    dlp_infer_prep_free(prep);
    dlp_infer_engine_free(&e);
    dlp_infer_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),       cmocka_unit_test(test_topk_percentile), cmocka_unit_test(test_model_load),
        cmocka_unit_test(test_engine),       cmocka_unit_test(test_prep),            cmocka_unit_test(test_files_library),
        cmocka_unit_test(test_bench),        cmocka_unit_test(test_serve_pipeline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
