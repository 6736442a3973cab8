// Unit tests for the KServe v2 codec of the service (serve/kserve.c) and the tensor conversion (serve/tensor.c):
// the /v2 routes and model checks, requests as JSON and with the binary-data extension (FP32, BF16, UINT8, NCHW
// and NHWC, BYTES JPEGs binary and base64), each fault answered 400 with a message naming it, the answers
// (logits as JSON and binary, classification strings), and the conversions' values.
// Main file: src/serve/kserve.c; also src/serve/tensor.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/kserve.h"

// The fake engine's format: 3 x 4 x 2 FP32 NCHW (24 elements), 5 classes.
static const dlp_serve_preprocess FMT = {"t", NULL, NULL, 3, 4, 2, DLP_LAYOUT_NCHW, DLP_DTYPE_F32};

static int parse(const char *json, const void *bin, size_t binlen, int with_header_len, dlp_kserve_req *k, char *err) {
    size_t jl = strlen(json);
    uint8_t *body = malloc(jl + binlen + 1);
    memcpy(body, json, jl);
    if (binlen) memcpy(body + jl, bin, binlen);
    char hl[32];
    snprintf(hl, sizeof hl, "%zu", jl);
    int st = dlp_kserve_parse(body, jl + binlen, with_header_len ? hl : NULL, &FMT, 5, k, err, 300);
    if (st == 0 && k->data && !k->owned) {  // points into the body: keep a copy for the caller
        void *c = malloc(k->data_len + 1);
        memcpy(c, k->data, k->data_len);
        k->owned = c;
        k->data = c;
    }
    free(body);
    return st;
}

static void expect_fault(const char *json, const void *bin, size_t binlen, int hl, const char *words) {
    dlp_kserve_req k;
    char err[300] = "";
    assert_int_equal(parse(json, bin, binlen, hl, &k, err), 400);
    if (!strstr(err, words)) fail_msg("expected '%s' in: %s", words, err);
    assert_null(k.owned);
}

static void test_routes(void **state) {
    (void)state;
    int st;
    char err[300];
    assert_int_equal(dlp_kserve_route_parse("/v1/classify", "m", &st, err, sizeof err), DLP_KSERVE_NONE);
    assert_int_equal(dlp_kserve_route_parse("/v2x", "m", &st, err, sizeof err), DLP_KSERVE_NONE);
    assert_int_equal(dlp_kserve_route_parse("/v2", "m", &st, err, sizeof err), DLP_KSERVE_SERVER_META);
    assert_int_equal(dlp_kserve_route_parse("/v2/health/live", "m", &st, err, sizeof err), DLP_KSERVE_LIVE);
    assert_int_equal(dlp_kserve_route_parse("/v2/health/ready", "m", &st, err, sizeof err), DLP_KSERVE_READY);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m", "m", &st, err, sizeof err), DLP_KSERVE_MODEL_META);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m/ready", "m", &st, err, sizeof err), DLP_KSERVE_MODEL_READY);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m/infer", "m", &st, err, sizeof err), DLP_KSERVE_INFER);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m/versions/1/infer", "m", &st, err, sizeof err), DLP_KSERVE_INFER);
    assert_int_equal(st, 0);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m/versions/2/infer", "m", &st, err, sizeof err), DLP_KSERVE_NOT_FOUND);
    assert_int_equal(st, 404);
    assert_non_null(strstr(err, "only version is 1"));
    assert_int_equal(dlp_kserve_route_parse("/v2/models/other/infer", "m", &st, err, sizeof err), DLP_KSERVE_NOT_FOUND);
    assert_non_null(strstr(err, "unknown model 'other'"));
    assert_int_equal(dlp_kserve_route_parse("/v2/models/m/explain", "m", &st, err, sizeof err), DLP_KSERVE_NOT_FOUND);
    assert_int_equal(dlp_kserve_route_parse("/v2/models/", "m", &st, err, sizeof err), DLP_KSERVE_NOT_FOUND);
    assert_int_equal(dlp_kserve_route_parse("/v2/repository/index", "m", &st, err, sizeof err), DLP_KSERVE_NOT_FOUND);
}

static void test_json_tensors(void **state) {
    (void)state;
    dlp_kserve_req k;
    char err[300] = "";
    // FP32 NCHW, nested data, an id, binary output asked for.
    const char *j = "{\"id\":\"r1\",\"parameters\":{\"binary_data_output\":true},\"inputs\":[{\"name\":\"input\","
                    "\"datatype\":\"FP32\",\"shape\":[1,3,4,2],\"data\":[[0,1,2,3,4,5,6,7],[8,9,10,11,12,13,14,15],"
                    "[16,17,18,19,20,21,22,23.5]]}]}";
    assert_int_equal(parse(j, NULL, 0, 0, &k, err), 0);
    assert_int_equal(k.kind, DLP_SERVE_IN_TENSOR);
    assert_int_equal(k.tensor.layout, DLP_LAYOUT_NCHW);
    assert_int_equal(k.data_len, 24 * 4);
    const float *f = (const float *)k.data;
    assert_true(f[0] == 0 && f[9] == 9 && f[23] == 23.5f);
    assert_string_equal(k.id, "r1");
    assert_int_equal(k.binary_out, 1);
    dlp_kserve_req_free(&k);
    // UINT8 NHWC [1,4,2,3] with classification.
    char u8[512] = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"UINT8\",\"shape\":[1,4,2,3],\"data\":[";
    for (int i = 0; i < 24; i++) snprintf(u8 + strlen(u8), sizeof u8 - strlen(u8), i ? ",%d" : "%d", i * 10);
    strcat(u8, "]}],\"outputs\":[{\"name\":\"output\",\"parameters\":{\"classification\":2}}]}");
    assert_int_equal(parse(u8, NULL, 0, 0, &k, err), 0);
    assert_int_equal(k.tensor.layout, DLP_LAYOUT_NHWC);
    assert_int_equal(k.tensor.dtype, DLP_DTYPE_U8);
    assert_int_equal(k.data[23], 230);
    assert_int_equal(k.classification, 2);
    assert_int_equal(k.binary_out, 0);
    dlp_kserve_req_free(&k);
}

static void test_binary_tensors(void **state) {
    (void)state;
    dlp_kserve_req k;
    char err[300] = "";
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i * 0.5f - 3;
    const char *j = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],"
                    "\"parameters\":{\"binary_data_size\":96}}]}";
    assert_int_equal(parse(j, x, sizeof x, 1, &k, err), 0);
    assert_int_equal(k.data_len, 96);
    assert_memory_equal(k.data, x, 96);
    dlp_kserve_req_free(&k);
    uint16_t bf[24] = {0};
    const char *jb = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BF16\",\"shape\":[1,4,2,3],"
                     "\"parameters\":{\"binary_data_size\":48}}],\"outputs\":[{\"name\":\"output\",\"parameters\":"
                     "{\"binary_data\":true}}]}";
    assert_int_equal(parse(jb, bf, sizeof bf, 1, &k, err), 0);
    assert_int_equal(k.tensor.dtype, DLP_DTYPE_BF16);
    assert_int_equal(k.tensor.layout, DLP_LAYOUT_NHWC);
    assert_int_equal(k.binary_out, 1);
    dlp_kserve_req_free(&k);
    // BYTES: one JPEG, binary (4-byte length first) and base64 in JSON.
    uint8_t jpg[12] = {12 - 4, 0, 0, 0, 0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 4};
    const char *jj = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[1],"
                     "\"parameters\":{\"binary_data_size\":12}}]}";
    assert_int_equal(parse(jj, jpg, sizeof jpg, 1, &k, err), 0);
    assert_int_equal(k.kind, DLP_SERVE_IN_JPEG);
    assert_int_equal(k.data_len, 8);
    assert_memory_equal(k.data, jpg + 4, 8);
    dlp_kserve_req_free(&k);
    const char *j64 = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"/9j/4AECAwQ=\"]}]}";
    assert_int_equal(parse(j64, NULL, 0, 0, &k, err), 0);
    assert_int_equal(k.data_len, 8);
    assert_memory_equal(k.data, jpg + 4, 8);
    dlp_kserve_req_free(&k);
}

static void test_faults(void **state) {
    (void)state;
    float x[30] = {0};
    const char *hdr = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],"
                      "\"parameters\":{\"binary_data_size\":96}}]}";
    expect_fault(hdr, x, 50, 1, "more than the 50 bytes");                  // truncated
    expect_fault(hdr, x, 100, 1, "100 bytes follow the JSON header");       // extra bytes
    expect_fault(hdr, x, 96, 0, "not JSON");                                // binary without the header length
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],"
                 "\"parameters\":{\"binary_data_size\":80}}]}", x, 80, 1, "need 96 bytes");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,5,2],\"data\":[1]}]}", NULL, 0, 0,
                 "the model takes 3 channels of 4x2");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,3,4,2],\"data\":[1]}]}", NULL, 0, 0,
                 "a batch of 2");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP16\",\"shape\":[1,3,4,2],\"data\":[1]}]}", NULL, 0, 0,
                 "datatype 'FP16'");
    expect_fault("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],\"data\":[1]}]}", NULL, 0, 0,
                 "unknown input 'x'");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],\"data\":[1,2]}]}", NULL, 0, 0,
                 "\"data\" has 2 elements, its shape says 24");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"UINT8\",\"shape\":[1,3,4,2],\"data\":[256]}]}", NULL, 0,
                 0, "not an integer in 0..255");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],\"data\":[\"a\"]}]}", NULL,
                 0, 0, "is not a number");
    expect_fault("{\"inputs\":[]}", NULL, 0, 0, "0 inputs");
    expect_fault("[1]", NULL, 0, 0, "not a JSON object");
    expect_fault("{}", NULL, 0, 0, "no \"inputs\"");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2]}]}", NULL, 0, 0,
                 "neither \"data\" nor binary_data_size");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"R0lGOA==\"]}]}", NULL,
                 0, 0, "not a JPEG");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"*!\"]}]}", NULL, 0, 0,
                 "not base64");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"\",\"\"]}]}", NULL, 0,
                 0, "must be [1]");
    uint8_t b[8] = {9, 0, 0, 0, 0xFF, 0xD8, 0xFF, 0};
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"BYTES\",\"shape\":[1],"
                 "\"parameters\":{\"binary_data_size\":8}}]}", b, 8, 1, "the element says 9 bytes");
    expect_fault("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],"
                 "\"parameters\":{\"binary_data_size\":96}}],\"outputs\":[{\"name\":\"probs\"}]}", x, 96, 1,
                 "unknown output 'probs'");
    float ok[24] = {0};
    char j[400];
    snprintf(j, sizeof j, "%s", "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3,4,2],"
             "\"parameters\":{\"binary_data_size\":96}}],\"outputs\":[{\"name\":\"output\",\"parameters\":"
             "{\"classification\":6}}]}");
    expect_fault(j, ok, 96, 1, "classification must be an integer in 0..5");
    // Header lengths that do not fit the body.
    dlp_kserve_req k;
    char err[300];
    const uint8_t body[] = "{}";
    assert_int_equal(dlp_kserve_parse(body, 2, "3", &FMT, 5, &k, err, sizeof err), 400);
    assert_non_null(strstr(err, "Inference-Header-Content-Length '3'"));
    assert_int_equal(dlp_kserve_parse(body, 2, "-1", &FMT, 5, &k, err, sizeof err), 400);
    assert_int_equal(dlp_kserve_parse(body, 2, "1x", &FMT, 5, &k, err, sizeof err), 400);
    assert_int_equal(dlp_kserve_parse(body, 0, NULL, &FMT, 5, &k, err, sizeof err), 400);
    assert_non_null(strstr(err, "empty body"));
}

static void test_convert(void **state) {
    (void)state;
    // UINT8 NHWC pixels -> FP32 NCHW, normalized with ImageNet's mean and std.
    dlp_serve_tensor t = {DLP_DTYPE_U8, DLP_LAYOUT_NHWC, 3, 4, 2};
    uint8_t px[24];
    for (int i = 0; i < 24; i++) px[i] = (uint8_t)(i * 11);
    char err[300];
    assert_int_equal(dlp_serve_tensor_check(&t, &FMT, err, sizeof err), 0);
    float out[24];
    dlp_serve_tensor_convert(&t, px, &FMT, out);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 8; p++) {
            float want = ((float)px[p * 3 + c] / 255.0f - mean[c]) / sd[c];
            assert_true(fabsf(out[c * 8 + p] - want) < 1e-5f);
        }
    // FP32 NCHW -> BF16 NHWC (a BF16 engine input).
    dlp_serve_preprocess bfmt = FMT;
    bfmt.layout = DLP_LAYOUT_NHWC;
    bfmt.dtype = DLP_DTYPE_BF16;
    dlp_serve_tensor tf = {DLP_DTYPE_F32, DLP_LAYOUT_NCHW, 3, 4, 2};
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i - 7.25f;
    uint16_t bo[24];
    dlp_serve_tensor_convert(&tf, x, &bfmt, bo);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 8; p++) assert_int_equal(bo[p * 3 + c], dlp_f32_to_bf16(x[c * 8 + p]));
    // Same format: a copy.
    float y[24];
    dlp_serve_tensor_convert(&tf, x, &FMT, y);
    assert_memory_equal(x, y, sizeof x);
    // Refusals: a float tensor into a UINT8 model, a model with no format.
    dlp_serve_preprocess u8fmt = FMT;
    u8fmt.dtype = DLP_DTYPE_U8;
    assert_int_equal(dlp_serve_tensor_check(&tf, &u8fmt, err, sizeof err), 400);
    dlp_serve_preprocess none = {"n", NULL, NULL, 0, 0, 0, 0, 0};
    assert_int_equal(dlp_serve_tensor_check(&tf, &none, err, sizeof err), 400);
    assert_non_null(strstr(err, "JPEGs only"));
}

static void test_answers(void **state) {
    (void)state;
    dlp_kserve_req k;
    memset(&k, 0, sizeof k);
    snprintf(k.id, sizeof k.id, "q7");
    dlp_serve_req r;
    memset(&r, 0, sizeof r);
    r.status = 200;
    const float logits[5] = {0.5f, 2.0f, -1.0f, 1.5f, NAN};
    const char *labels[5] = {"a", "b", "c", "d", "e"};
    size_t len, jl;
    char *b = dlp_kserve_answer(&k, &r, "m", logits, 5, labels, 5, &len, &jl);
    assert_int_equal(jl, 0);
    json_t *o = json_loadb(b, len, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "id")), "q7");
    json_t *out = json_array_get(json_object_get(o, "outputs"), 0);
    assert_string_equal(json_string_value(json_object_get(out, "name")), "output");
    json_t *data = json_object_get(out, "data");
    assert_int_equal(json_array_size(data), 5);
    assert_true(json_real_value(json_array_get(data, 1)) == 2.0);
    assert_true(json_is_null(json_array_get(data, 4)));  // a NaN logit cannot be JSON
    json_decref(o);
    free(b);
    // Binary logits: the JSON header, then the floats; *json_len is the header's length.
    k.binary_out = 1;
    b = dlp_kserve_answer(&k, &r, "m", logits, 5, NULL, 0, &len, &jl);
    assert_true(jl > 0 && len == jl + 20);
    assert_memory_equal(b + jl, logits, 20);
    o = json_loadb(b, jl, 0, NULL);
    out = json_array_get(json_object_get(o, "outputs"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "parameters"), "binary_data_size")), 20);
    json_decref(o);
    free(b);
    // Classification, JSON: "value:index:label", highest first.
    k.binary_out = 0;
    k.classification = 2;
    b = dlp_kserve_answer(&k, &r, "m", logits, 5, labels, 5, &len, &jl);
    o = json_loadb(b, len, 0, NULL);
    out = json_array_get(json_object_get(o, "outputs"), 0);
    assert_string_equal(json_string_value(json_object_get(out, "datatype")), "BYTES");
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "data"), 0)), "2.000000:1:b");
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "data"), 1)), "1.500000:3:d");
    json_decref(o);
    free(b);
    // Classification, binary: 4-byte lengths then the strings.
    k.binary_out = 1;
    b = dlp_kserve_answer(&k, &r, "m", logits, 5, NULL, 0, &len, &jl);
    uint32_t n0;
    memcpy(&n0, b + jl, 4);
    assert_int_equal(n0, strlen("2.000000:1"));
    assert_memory_equal(b + jl + 4, "2.000000:1", n0);
    free(b);
    // An error: the protocol's {"error"} only.
    r.status = 400;
    snprintf(r.error, sizeof r.error, "bad \"thing\"");
    b = dlp_kserve_answer(&k, &r, "m", logits, 5, NULL, 0, &len, &jl);
    assert_string_equal(b, "{\"error\":\"bad \\\"thing\\\"\"}");
    free(b);
}

static void test_metadata(void **state) {
    (void)state;
    size_t len;
    char *b = dlp_kserve_model_metadata("m", "dlperf_ref", &FMT, 5, 8, &len);
    json_t *o = json_loadb(b, len, 0, NULL);
    assert_non_null(o);
    json_t *in = json_array_get(json_object_get(o, "inputs"), 0);
    assert_string_equal(json_string_value(json_object_get(in, "datatype")), "FP32");
    json_t *sh = json_object_get(in, "shape");
    assert_int_equal(json_integer_value(json_array_get(sh, 1)), 3);
    assert_int_equal(json_integer_value(json_array_get(sh, 3)), 2);
    json_t *os = json_object_get(json_array_get(json_object_get(o, "outputs"), 0), "shape");
    assert_int_equal(json_integer_value(json_array_get(os, 1)), 5);
    json_decref(o);
    free(b);
    b = dlp_kserve_server_metadata(&len);
    o = json_loadb(b, len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "dlperf");
    json_decref(o);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),   cmocka_unit_test(test_json_tensors), cmocka_unit_test(test_binary_tensors),
        cmocka_unit_test(test_faults),   cmocka_unit_test(test_convert),      cmocka_unit_test(test_answers),
        cmocka_unit_test(test_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
