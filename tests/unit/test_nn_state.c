// Unit tests for nn/safetensors (round trip, every validation error), nn/state (loading by name, conversions,
// missing / unexpected / mismatched tensors), nn/checkpoint (save, resume, mismatched pairs) and nn/schedule
// (hand-computed learning rates).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/tensor.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"
#include "nn/state.h"
#include "testutil.h"

// ---- safetensors ------------------------------------------------------------------------------------------

static void test_st_round_trip(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    float a[6] = {1, -2, 3.5f, 4, 5, 6};
    int64_t n = 42;
    uint16_t h[3] = {dlp_f32_to_bf16(1.5f), dlp_f32_to_bf16(-2.0f), dlp_f32_to_bf16(0.25f)};
    uint16_t f16[2] = {dlp_f32_to_f16(0.5f), dlp_f32_to_f16(-3.0f)};
    double d = 0.1;
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2}, s0[1] = {0};
    assert_int_equal(dlp_st_writer_add(&w, "a", DLP_ST_F32, 2, s23, a), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "count", DLP_ST_I64, 0, NULL, &n), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "h", DLP_ST_BF16, 1, s3, h), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "f16", DLP_ST_F16, 1, s2, f16), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "empty", DLP_ST_F32, 1, s0, NULL), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "d", DLP_ST_F64, 0, NULL, &d), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "a", DLP_ST_F32, 2, s23, a), DLP_ERR_INVALID);  // duplicate
    assert_int_equal(dlp_st_writer_add(&w, "__metadata__", DLP_ST_F32, 2, s23, a), DLP_ERR_INVALID);
    assert_int_equal(dlp_st_writer_meta(&w, "format", "pt"), DLP_OK);
    assert_int_equal(dlp_st_writer_write(&w, path, DLP_WRITE_NOCLOBBER), DLP_OK);
    assert_int_equal(dlp_st_writer_write(&w, path, DLP_WRITE_NOCLOBBER), DLP_ERR_EXISTS);
    dlp_st_writer_free(&w);

    dlp_st_file f;
    assert_int_equal(dlp_st_open(path, 0, &f), DLP_OK);
    assert_int_equal(f.ntensors, 6);
    assert_string_equal(dlp_st_meta(&f, "format"), "pt");
    assert_null(dlp_st_meta(&f, "nope"));
    uint64_t hlen;
    memcpy(&hlen, f.buf, 8);
    assert_int_equal(hlen % 8, 0);  // header padded to 8 bytes, as the reference writer does
    const dlp_st_tensor *t = dlp_st_find(&f, "a");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[1], 3);
    float back[6];
    assert_int_equal(dlp_st_read_f32(&f, t, back), DLP_OK);
    assert_memory_equal(back, a, sizeof a);
    assert_int_equal(dlp_st_read_f32(&f, dlp_st_find(&f, "h"), back), DLP_OK);
    assert_true(back[0] == 1.5f && back[1] == -2.0f && back[2] == 0.25f);
    assert_int_equal(dlp_st_read_f32(&f, dlp_st_find(&f, "f16"), back), DLP_OK);
    assert_true(back[0] == 0.5f && back[1] == -3.0f);
    assert_int_equal(dlp_st_read_f32(&f, dlp_st_find(&f, "d"), back), DLP_OK);
    assert_true(back[0] == 0.1f);
    int64_t c;
    t = dlp_st_find(&f, "count");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_int_equal(dlp_st_read_i64(&f, t, &c), DLP_OK);
    assert_int_equal(c, 42);
    assert_int_equal(dlp_st_read_f32(&f, t, back), DLP_ERR_FORMAT);  // I64 is not floating
    assert_non_null(strstr(dlp_err_msg(), "'count' is I64"));
    assert_int_equal(dlp_st_find(&f, "empty")->numel, 0);
    dlp_st_close(&f);
    dlp_test_rmtree(dir);
}

// Builds a file from a header string and `data_len` bytes of data.
static dlp_status parse_text(const char *header, size_t data_len, size_t hlen_override) {
    size_t hl = strlen(header), len = 8 + hl + data_len;
    char *buf = calloc(1, len);
    uint64_t h = hlen_override ? hlen_override : hl;
    memcpy(buf, &h, 8);
    memcpy(buf + 8, header, hl);
    dlp_st_file f;
    dlp_status st = dlp_st_parse("bad.safetensors", buf, len, &f);
    if (st == DLP_OK) dlp_st_close(&f);
    return st;
}

static void test_st_validation(void **state) {
    (void)state;
    static const struct { const char *header; size_t data, hlen; const char *msg; } rows[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 1000, "does not fit the file"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, 0, "not valid JSON"},
        {"[1,2]", 0, 0, "not a JSON object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 8, 0, "outside the data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, 0, "for 3 F32 elements"},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "unsupported dtype 'Q4'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, 0, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, 0, "overlaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0, "belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, 0, "last 4 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0, "not valid JSON"},  // duplicate
        {"{\"__metadata__\":{\"x\":1}}", 0, 0, "not a string"},
        {"{\"__metadata__\":{\"x\":\"y\"}}", 0, 0, NULL},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, "empty name"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, 0, "dimensions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, 0, "overflows"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_status st = parse_text(rows[i].header, rows[i].data, rows[i].hlen);
        if (!rows[i].msg) {
            assert_int_equal(st, DLP_OK);
            continue;
        }
        if (st != DLP_ERR_FORMAT || !strstr(dlp_err_msg(), rows[i].msg) || !strstr(dlp_err_msg(), "bad.safetensors"))
            fail_msg("row %zu: status %d, message '%s' (wanted '%s')", i, st, dlp_err_msg(), rows[i].msg);
    }
    // too short, and a missing file
    char *b = calloc(1, 4);
    dlp_st_file f;
    assert_int_equal(dlp_st_parse("short.safetensors", b, 4, &f), DLP_ERR_FORMAT);
    assert_int_equal(dlp_st_open("/nonexistent/x.safetensors", 0, &f), DLP_ERR_NOTFOUND);
}

// ---- state_dict loading -----------------------------------------------------------------------------------

static void test_state_load(void **state) {
    (void)state;
    char dir[512], path[600], p10[600], p16[600], pmod[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r18-1000.safetensors", dir);
    snprintf(p10, sizeof p10, "%s/r18-10.safetensors", dir);
    snprintf(p16, sizeof p16, "%s/r18-bf16.safetensors", dir);
    snprintf(pmod, sizeof pmod, "%s/r18-module.safetensors", dir);
    dlp_net n1000, n10;
    assert_int_equal(dlp_model_build("resnet18", 1000, 64, &n1000), DLP_OK);
    assert_int_equal(dlp_model_build("resnet18", 10, 64, &n10), DLP_OK);
    float *p = malloc((size_t)n1000.param_count * sizeof(float)), *b = malloc((size_t)n1000.buf_count * sizeof(float));
    float *q = malloc((size_t)n1000.param_count * sizeof(float)), *c = malloc((size_t)n1000.buf_count * sizeof(float));
    dlp_resnet_init_params(&n1000, 5, 0, p, b);
    for (int64_t i = 0; i < n1000.buf_count; i++) b[i] += 0.001f * (float)(i % 13);
    assert_int_equal(dlp_state_save(&n1000, path, p, b, 17, DLP_WRITE_NOCLOBBER), DLP_OK);
    int64_t nbt = 0;
    assert_int_equal(dlp_state_load(&n1000, path, DLP_STATE_STRICT, q, c, &nbt), DLP_OK);
    assert_memory_equal(p, q, (size_t)n1000.param_count * sizeof(float));
    assert_memory_equal(b, c, (size_t)n1000.buf_count * sizeof(float));
    assert_int_equal(nbt, 17);
    // the file has torchvision's 122 keys in state_dict order
    dlp_st_file f;
    assert_int_equal(dlp_st_open(path, 0, &f), DLP_OK);
    assert_int_equal(f.ntensors, 122);
    assert_string_equal(f.tensors[0].name, "conv1.weight");
    assert_string_equal(f.tensors[5].name, "bn1.num_batches_tracked");
    assert_string_equal(f.tensors[121].name, "fc.bias");
    dlp_st_close(&f);

    // a 1000-class checkpoint into a 10-class net: the tensor and both shapes
    assert_int_equal(dlp_state_load(&n10, path, DLP_STATE_STRICT, q, c, NULL), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "'fc.weight' has shape (1000, 512)"));
    assert_non_null(strstr(dlp_err_msg(), "needs (10, 512)"));
    assert_non_null(strstr(dlp_err_msg(), "r18-1000.safetensors"));
    // partial: everything but the fc
    float *q10 = calloc((size_t)n10.param_count, sizeof(float));
    assert_int_equal(dlp_state_load(&n10, path, DLP_STATE_PARTIAL, q10, c, NULL), DLP_OK);
    assert_memory_equal(q10, p, (size_t)dlp_net_find_param(&n10, "fc.weight")->offset * sizeof(float));
    assert_true(q10[dlp_net_find_param(&n10, "fc.bias")->offset] == 0.0f);

    // missing and unexpected keys, named
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    for (int i = 1; i < n10.nparams; i++)  // no conv1.weight
        assert_int_equal(dlp_st_writer_add(&w, n10.params[i].name, DLP_ST_F32, n10.params[i].ndim, n10.params[i].shape,
                                           p + n10.params[i].offset), DLP_OK);
    for (int i = 0; i < n10.nbufs; i++)
        assert_int_equal(dlp_st_writer_add(&w, n10.bufs[i].name, DLP_ST_F32, n10.bufs[i].ndim, n10.bufs[i].shape,
                                           b + n10.bufs[i].offset), DLP_OK);
    int64_t one = 1;
    assert_int_equal(dlp_st_writer_add(&w, "head.weight", DLP_ST_F32, 1, (int64_t[]){1}, p), DLP_OK);
    assert_int_equal(dlp_st_writer_add(&w, "layer1.0.bn1.num_batches_tracked", DLP_ST_I64, 0, NULL, &one), DLP_OK);
    assert_int_equal(dlp_st_writer_write(&w, p10, DLP_WRITE_NOCLOBBER), DLP_OK);
    dlp_st_writer_free(&w);
    assert_int_equal(dlp_state_load(&n10, p10, DLP_STATE_STRICT, q10, c, NULL), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "1 missing key(s): conv1.weight"));
    assert_non_null(strstr(dlp_err_msg(), "1 unexpected key(s): head.weight"));

    // BF16 weights are converted; DataParallel's module. prefix is accepted
    dlp_st_writer_init(&w);
    uint16_t *h = malloc((size_t)n10.param_count * 2);
    for (int64_t i = 0; i < n10.param_count; i++) h[i] = dlp_f32_to_bf16(p[i]);
    dlp_st_writer w2;
    dlp_st_writer_init(&w2);
    for (int i = 0; i < n10.nparams; i++) {
        char nm[96];
        snprintf(nm, sizeof nm, "module.%s", n10.params[i].name);
        assert_int_equal(dlp_st_writer_add(&w, n10.params[i].name, DLP_ST_BF16, n10.params[i].ndim, n10.params[i].shape,
                                           h + n10.params[i].offset), DLP_OK);
        assert_int_equal(dlp_st_writer_add(&w2, nm, DLP_ST_F32, n10.params[i].ndim, n10.params[i].shape,
                                           p + n10.params[i].offset), DLP_OK);
    }
    assert_int_equal(dlp_st_writer_write(&w, p16, DLP_WRITE_NOCLOBBER), DLP_OK);
    assert_int_equal(dlp_st_writer_write(&w2, pmod, DLP_WRITE_NOCLOBBER), DLP_OK);
    dlp_st_writer_free(&w);
    dlp_st_writer_free(&w2);
    assert_int_equal(dlp_state_load(&n10, p16, DLP_STATE_STRICT, q10, NULL, NULL), DLP_OK);  // bufs NULL: params only
    assert_true(q10[7] == dlp_bf16_to_f32(h[7]));
    assert_int_equal(dlp_state_load(&n10, pmod, DLP_STATE_STRICT, q10, NULL, NULL), DLP_OK);
    assert_memory_equal(q10, p, 1000 * sizeof(float));
    free(h);
    free(q10);
    free(p);
    free(b);
    free(q);
    free(c);
    dlp_net_free(&n1000);
    dlp_net_free(&n10);
    dlp_test_rmtree(dir);
}

// ---- checkpoints ------------------------------------------------------------------------------------------

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void test_checkpoint(void **state) {
    (void)state;
    char dir[512], path[600], sp[700];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    dlp_checkpoint_state_path(path, sp, sizeof sp);
    assert_non_null(strstr(sp, "/ck.state.safetensors"));
    char other[64];
    dlp_checkpoint_state_path("x.bin", other, sizeof other);
    assert_string_equal(other, "x.bin.state.safetensors");

    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 7, 32, &net), DLP_OK);
    const size_t pb = (size_t)net.param_count * sizeof(float), bb = (size_t)net.buf_count * sizeof(float);
    float *p = malloc(pb), *b = malloc(bb), *v = malloc(pb), *p2 = malloc(pb), *b2 = malloc(bb), *v2 = malloc(pb);
    dlp_resnet_init_params(&net, 3, 1, p, b);
    for (int64_t i = 0; i < net.param_count; i++) v[i] = 1e-3f * (float)(i % 101) - 0.05f;
    dlp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    dlp_lr_schedule_default(&ck.sched);
    ck.sched.batch = 64;
    ck.sched.steps_per_epoch = 100;
    ck.sched.total_steps = 9000;
    ck.sched.warmup_epochs = 2;
    ck.pos = (dlp_train_pos){.epoch = 3, .step_in_epoch = 17, .step = 317, .samples_seen = 317 * 64,
                             .seed = 0xfedcba9876543210ULL, .rng = {1, 2, 3, 0xffffffffffffffffULL},
                             .last_loss = 2.25, .best_top1 = 0.5};
    ck.config = json_pack("{s:s, s:i}", "model", "resnet-mini", "batch", 64);
    assert_int_equal(dlp_checkpoint_save(path, &net, p, b, v, &ck), DLP_OK);
    json_decref(ck.config);
    assert_int_equal(count_files(dir), 2);  // no temporary files left behind

    dlp_checkpoint back;
    assert_int_equal(dlp_checkpoint_load(path, &net, p2, b2, v2, 0, &back), DLP_OK);
    assert_memory_equal(p, p2, pb);
    assert_memory_equal(b, b2, bb);
    assert_memory_equal(v, v2, pb);
    assert_int_equal(back.num_batches_tracked, 317);
    assert_int_equal(back.pos.epoch, 3);
    assert_int_equal(back.pos.step_in_epoch, 17);
    assert_int_equal(back.pos.step, 317);
    assert_int_equal(back.pos.samples_seen, 317 * 64);
    assert_true(back.pos.seed == 0xfedcba9876543210ULL);
    assert_true(back.pos.rng[3] == 0xffffffffffffffffULL && back.pos.rng[0] == 1);
    assert_true(back.pos.last_loss == 2.25 && back.pos.best_top1 == 0.5);
    assert_int_equal(back.sched.batch, 64);
    assert_true(back.sched.warmup_epochs == 2);
    assert_true(dlp_lr_at(&back.sched, 317) == dlp_lr_at(&ck.sched, 317));
    assert_string_equal(json_string_value(json_object_get(back.config, "model")), "resnet-mini");
    dlp_checkpoint_free(&back);

    // A second save replaces both files; a sidecar from another save is refused.
    char keep[800];
    snprintf(keep, sizeof keep, "%s/old-state", dir);
    assert_int_equal(rename(sp, keep), 0);
    ck.config = NULL;
    ck.pos.step = 400;
    assert_int_equal(dlp_checkpoint_save(path, &net, p, b, NULL, &ck), DLP_OK);
    assert_int_equal(dlp_checkpoint_load(path, &net, p2, b2, v2, 0, &back), DLP_OK);
    assert_int_equal(back.pos.step, 400);
    assert_true(v2[5] == 0.0f);  // NULL momentum saved as zeros
    dlp_checkpoint_free(&back);
    assert_int_equal(rename(keep, sp), 0);
    assert_int_equal(dlp_checkpoint_load(path, &net, p2, b2, v2, 0, &back), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "different saves"));
    // no sidecar: refused unless the model alone is enough
    assert_int_equal(remove(sp), 0);
    assert_int_equal(dlp_checkpoint_load(path, &net, p2, b2, v2, 0, &back), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "cannot resume"));
    assert_int_equal(dlp_checkpoint_load(path, &net, p2, b2, v2, 1, &back), DLP_OK);
    assert_int_equal(back.pos.step, 0);
    assert_int_equal(back.num_batches_tracked, 400);
    // another model's checkpoint
    dlp_net other_net;
    assert_int_equal(dlp_model_build("resnet-mini", 8, 32, &other_net), DLP_OK);
    assert_int_equal(dlp_checkpoint_load(path, &other_net, p2, b2, NULL, 1, &back), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "fc.weight"));
    dlp_net_free(&other_net);
    free(p);
    free(b);
    free(v);
    free(p2);
    free(b2);
    free(v2);
    dlp_net_free(&net);
    dlp_test_rmtree(dir);
}

// ---- schedules --------------------------------------------------------------------------------------------

static void test_schedule(void **state) {
    (void)state;
    dlp_lr_schedule s;
    dlp_lr_schedule_default(&s);
    // Goyal et al.: 0.1 per 256 images, batch 32 x 8 processes -> peak 0.1; batch 128 x 8 -> 0.4
    s.batch = 128;
    s.world = 8;
    s.steps_per_epoch = 100;
    s.total_steps = 1000;
    s.warmup_epochs = 1;  // 100 steps
    assert_int_equal(dlp_lr_schedule_check(&s), DLP_OK);
    assert_true(fabs(dlp_lr_peak(&s) - 0.4) < 1e-12);
    assert_int_equal(dlp_lr_warmup_steps(&s), 100);
    // warm-up from 0.1 * peak: step 0 -> 0.04, step 50 -> 0.04 + 0.36 * 0.5 = 0.22, step 100 -> 0.4
    assert_true(fabs(dlp_lr_at(&s, 0) - 0.04) < 1e-12);
    assert_true(fabs(dlp_lr_at(&s, 50) - 0.22) < 1e-12);
    assert_true(fabs(dlp_lr_at(&s, 100) - 0.4) < 1e-12);
    // cosine over the 900 remaining steps: halfway (step 550) -> 0.2; a quarter (325) -> 0.2 (1 + cos(pi/4))
    assert_true(fabs(dlp_lr_at(&s, 550) - 0.2) < 1e-12);
    assert_true(fabs(dlp_lr_at(&s, 325) - 0.2 * (1 + sqrt(0.5))) < 1e-12);
    assert_true(fabs(dlp_lr_at(&s, 1000)) < 1e-12);
    assert_true(fabs(dlp_lr_at(&s, 5000)) < 1e-12);  // past the end: stays at final_lr
    s.final_lr = 0.004;  // halfway: 0.004 + 0.396 / 2 = 0.202
    assert_true(fabs(dlp_lr_at(&s, 550) - 0.202) < 1e-12);
    // step decay at epochs 30, 60, 80 (x0.1), warm-up 5 epochs in steps, unscaled lr 1.0
    dlp_lr_schedule t;
    dlp_lr_schedule_default(&t);
    t.base_lr = 1.0;
    t.scale_by_batch = 0;
    t.decay = DLP_LR_STEP;
    t.steps_per_epoch = 10;
    t.warmup_steps = 50;
    t.warmup_start = 0;
    assert_int_equal(dlp_lr_schedule_check(&t), DLP_OK);
    assert_true(dlp_lr_at(&t, 0) == 0.0);
    assert_true(fabs(dlp_lr_at(&t, 25) - 0.5) < 1e-12);
    assert_true(dlp_lr_at(&t, 299) == 1.0);
    assert_true(fabs(dlp_lr_at(&t, 300) - 0.1) < 1e-12);
    assert_true(fabs(dlp_lr_at(&t, 650) - 0.01) < 1e-12);
    assert_true(fabs(dlp_lr_at(&t, 800) - 0.001) < 1e-12);
    t.decay = DLP_LR_CONSTANT;
    assert_true(dlp_lr_at(&t, 10000) == 1.0);
    // JSON round trip
    json_t *j = dlp_lr_schedule_to_json(&s);
    dlp_lr_schedule u;
    assert_int_equal(dlp_lr_schedule_from_json(j, &u, "test"), DLP_OK);
    json_decref(j);
    for (int64_t k = 0; k <= 1000; k += 37) assert_true(dlp_lr_at(&u, k) == dlp_lr_at(&s, k));
    // bad schedules are named
    static const struct { int field; const char *msg; } bad[] = {
        {0, "base lr"}, {1, "cosine decay needs a total"}, {2, "warm-up in epochs needs"}, {3, "step gamma"},
        {4, "milestones must ascend"}, {5, "final lr"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dlp_lr_schedule x = s;
        switch (bad[i].field) {
        case 0: x.base_lr = -1; break;
        case 1: x.total_steps = 50; break;
        case 2: x.steps_per_epoch = 0; x.total_steps = 10; x.warmup_epochs = 1; break;
        case 3: x.decay = DLP_LR_STEP; x.step_gamma = 2; break;
        case 4: x.decay = DLP_LR_STEP; x.step_epochs[1] = 10; break;
        case 5: x.final_lr = 5; break;
        }
        assert_int_equal(dlp_lr_schedule_check(&x), DLP_ERR_INVALID);
        if (!strstr(dlp_err_msg(), bad[i].msg)) fail_msg("row %zu: '%s'", i, dlp_err_msg());
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_st_round_trip),
        cmocka_unit_test(test_st_validation),
        cmocka_unit_test(test_state_load),
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
