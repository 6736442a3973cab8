// Unit tests for perf/validate's arithmetic and configurations: APE and MAPE (missing measurements left out),
// regimes from a predicted stage and from a run's stall and read share, configuration lists in JSON (and their
// errors, naming the entry and the field), the built-in sweep (>= 30 configurations spanning the regimes, epochs of a
// few steps, devices at the knee, the cpu device at 224 px), and a
// configuration's prediction from a profile alone, by hand.
// Main file: src/perf/validate.c.
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
#include "hw/work.h"
#include "perf/validate.h"
#include "testutil.h"

#define FIXTURE "tests/fixtures/model/profile-dev.json"
#define NEAR(a, b, rel) assert_true(fabs((double)(a) - (double)(b)) <= (rel) * fabs((double)(b)) + 1e-12)

static void test_ape_mape(void **state) {
    (void)state;
    NEAR(dlp_validate_ape(110, 100), 0.10, 1e-12);
    NEAR(dlp_validate_ape(90, 100), 0.10, 1e-12);
    NEAR(dlp_validate_ape(100, 100), 0.0, 0);
    assert_true(isnan(dlp_validate_ape(100, 0)));     // nothing measured
    assert_true(isnan(dlp_validate_ape(NAN, 100)));   // nothing predicted
    const double a[] = {0.02, NAN, 0.04, 0.00};
    NEAR(dlp_validate_mape(a, 4), 0.02, 1e-12);       // the failed row is left out, not counted as 0
    const double none[] = {NAN, NAN};
    assert_true(isnan(dlp_validate_mape(none, 2)));
    // at the run's CPU share: the rate over every measured step (what the share covers), not the median window
    dlp_validate_row r;
    memset(&r, 0, sizeof r);
    r.measured_img_per_s = 12.4;  // two windows 100% apart: their median
    r.measured_mean_img_per_s = 9.1;
    NEAR(dlp_validate_measured_at_share(&r), 9.1, 1e-12);
    r.measured_mean_img_per_s = NAN;  // not known (a multi-rank run's result): the median window
    NEAR(dlp_validate_measured_at_share(&r), 12.4, 1e-12);
}

static void test_regimes(void **state) {
    (void)state;
    static const struct { dlp_stage s; const char *r; } rows[] = {
        {DLP_STAGE_READ, "storage"},   {DLP_STAGE_IOWAIT, "storage"},  {DLP_STAGE_PREP, "pipeline"},
        {DLP_STAGE_HOSTMEM, "pipeline"}, {DLP_STAGE_COMPUTE, "device"}, {DLP_STAGE_H2D, "device"},
        {DLP_STAGE_ALLREDUCE, "device"}, {DLP_STAGE_SHARED_CPU, "device"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_string_equal(dlp_validate_regime_of_stage(rows[i].s), rows[i].r);
    static const struct { double stall, read; const char *r; } obs[] = {
        {0.00, 0.9, "device"},  {0.099, 0.9, "device"},  {0.10, 0.25, "storage"}, {0.5, 0.80, "storage"},
        {0.10, 0.249, "pipeline"}, {0.9, 0.02, "pipeline"},
    };
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
        assert_string_equal(dlp_validate_observed_regime(obs[i].stall, obs[i].read), obs[i].r);
}

static dlp_status parse(const char *text, dlp_validate_config *c, int *n) {
    json_error_t e;
    json_t *a = json_loads(text, 0, &e);
    assert_non_null(a);
    dlp_status st = dlp_validate_configs_from_json(a, "configs.json", c, 8, n);
    json_decref(a);
    return st;
}

static void test_configs_json(void **state) {
    (void)state;
    dlp_validate_config c[8];
    int n;
    assert_int_equal(parse("[{\"device\": \"sim:custom,img_per_s=400\", \"workers\": 2, \"storage\": \"cold\"},"
                           " {\"device\": \"cpu\", \"model\": \"resnet18\", \"size\": 64, \"batch\": 16, \"threads\": 1,"
                           "  \"precision\": \"bf16\", \"read_limit\": \"20M\", \"name\": \"mine\"},"
                           " {\"device\": \"sim:t4\", \"read_limit\": 5000000}]", c, &n), DLP_OK);
    assert_int_equal(n, 3);
    assert_string_equal(c[0].device, "sim:custom,img_per_s=400");
    assert_string_equal(c[0].model, "resnet50");  // defaults
    assert_int_equal(c[0].size, 224);
    assert_int_equal(c[0].batch, 32);
    assert_int_equal(c[0].workers, 2);
    assert_int_equal(c[0].cold, 1);
    assert_int_equal(c[1].threads, 1);
    assert_int_equal(c[1].prec, DLP_PREC_BF16);
    assert_int_equal(c[1].read_limit_bytes_per_s, 20 << 20);
    assert_int_equal(c[2].read_limit_bytes_per_s, 5000000);
    char label[160];
    dlp_validate_config_label(&c[0], label, sizeof label);
    assert_string_equal(label, "sim:custom,img_per_s=400 r50/224 b32 w2 cold");
    dlp_validate_config_label(&c[1], label, sizeof label);
    assert_string_equal(label, "mine");
    c[1].name[0] = '\0';
    dlp_validate_config_label(&c[1], label, sizeof label);
    assert_string_equal(label, "cpu r18/64 b16 w1 t1 bf16 warm lim20M");
    // A subset of the set (epochs of a few steps) and a device at the knee (its rate set later from the profile).
    assert_int_equal(parse("[{\"device\": \"sim:custom,img_per_s=5000\", \"batch\": 256, \"images\": 1000},"
                           " {\"balance\": 0.9, \"workers\": 2}]", c, &n), DLP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(c[0].images, 1000);
    assert_true(c[0].balance == 0);
    assert_string_equal(c[1].device, "sim:custom");
    NEAR(c[1].balance, 0.9, 0);
    dlp_validate_config_label(&c[0], label, sizeof label);
    assert_string_equal(label, "sim:custom,img_per_s=5000 r50/224 b256 w1 warm n1000");
    dlp_validate_config_label(&c[1], label, sizeof label);
    assert_string_equal(label, "sim:custom r50/224 b32 w2 warm knee0.90x");
    // Errors name the entry and the field.
    static const struct { const char *text, *want; } bad[] = {
        {"{}", "JSON array"},
        {"[]", "empty"},
        {"[3]", "configs.json: [0]: is not an object"},
        {"[{\"model\": \"resnet50\"}]", "'device'"},
        {"[{\"device\": \"gpu0\"}]", "field 'device' is 'gpu0'"},
        {"[{\"device\": \"cpu\", \"storage\": \"lukewarm\"}]", "field 'storage' is 'lukewarm'"},
        {"[{\"device\": \"cpu\", \"precision\": \"fp8\"}]", "field 'precision' is 'fp8'"},
        {"[{\"device\": \"cpu\", \"read_limit\": \"fast\"}]", "field 'read_limit' is 'fast'"},
        {"[{\"device\": \"cpu\", \"batch\": 0}]", "'batch'"},
        {"[{\"device\": \"cpu\"}, {\"device\": \"cpu\", \"wokers\": 2}]", "configs.json: [1]: unknown field 'wokers'"},
        {"[{\"device\": \"cpu\", \"images\": 0}]", "'images'"},
        {"[{\"balance\": 0}]", "'balance'"},
        {"[{\"device\": \"sim:t4\", \"balance\": 1}]", "device must be sim:custom"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dlp_err_clear();
        assert_int_equal(parse(bad[i].text, c, &n), DLP_ERR_FORMAT);
        if (!strstr(dlp_err_msg(), bad[i].want)) fail_msg("'%s': error '%s' lacks '%s'", bad[i].text, dlp_err_msg(), bad[i].want);
    }
    dlp_err_clear();
}

static dlp_dataset_stats toy_stats(void) {
    dlp_dataset_stats s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "toy");
    s.images = 2600;
    s.mean_bytes = 110000;
    s.nsizes = 1;
    s.sizes[0] = (dlp_image_size){500, 375, 1.0, 0};
    return s;
}

static void test_builtin_sweep(void **state) {
    (void)state;
    dlp_validate_config c[DLP_VALIDATE_MAX_CONFIGS];
    int n = dlp_validate_builtin(0, c, DLP_VALIDATE_MAX_CONFIGS);
    assert_true(n >= 20);
    int nq = dlp_validate_builtin(1, c + n, DLP_VALIDATE_MAX_CONFIGS - n);
    assert_true(nq >= 3 && nq < n);
    int cold = 0, lim5 = 0, lim20 = 0, cpu = 0, w1 = 0, w2 = 0, speeds = 0;
    double seen[16];
    for (int i = 0; i < n; i++) {
        char a[160], b[160];
        dlp_validate_config_label(&c[i], a, sizeof a);
        for (int j = 0; j < i; j++) {
            dlp_validate_config_label(&c[j], b, sizeof b);
            if (strcmp(a, b) == 0) fail_msg("two built-in configurations are the same: %s", a);
        }
        cold += c[i].cold;
        lim5 += c[i].read_limit_bytes_per_s == 5 << 20;
        lim20 += c[i].read_limit_bytes_per_s == 20 << 20;
        cpu += strcmp(c[i].device, "cpu") == 0;
        w1 += c[i].workers == 1;
        w2 += c[i].workers == 2;
        const char *ips = strstr(c[i].device, "img_per_s=");
        if (ips) {
            double v = atof(ips + 10);
            int known = 0;
            for (int k = 0; k < speeds; k++) known |= seen[k] == v;
            if (!known && speeds < 16) seen[speeds++] = v;
        }
    }
    assert_true(cold >= 2 && lim5 >= 1 && lim20 >= 1 && cpu >= 3 && w1 >= 3 && w2 >= 3 && speeds >= 3);
    // On a 2-core machine like the fixture's, the sweep's predictions span the three regimes.
    dlp_profile *p = malloc(sizeof *p);
    assert_int_equal(dlp_profile_read(FIXTURE, p), DLP_OK);
    dlp_catalog *cat;
    assert_int_equal(dlp_catalog_load(NULL, &cat), DLP_OK);
    dlp_dataset_stats s = toy_stats();
    dlp_validate_cfg vc;
    dlp_validate_cfg_init(&vc);
    vc.profile = p;
    vc.catalog = cat;
    vc.stats = &s;
    int reg[3] = {0}, knees = 0, subsets = 0, cpu224 = 0;
    dlp_prediction *pr = malloc(sizeof *pr);
    for (int i = 0; i < n; i++) {
        if (c[i].balance > 0) {
            // The knee: the device's rate is balance x the loader's predicted rate for this configuration.
            dlp_validate_config fast = c[i];
            snprintf(fast.device, sizeof fast.device, "sim:custom,img_per_s=1000000");
            fast.balance = 0;
            assert_int_equal(dlp_validate_predict(&vc, &fast, pr), DLP_OK);
            const double loader = pr->loader_img_per_s;  // the slowest of the loader's stages
            assert_true(isfinite(loader) && loader > 0);
            assert_int_equal(dlp_validate_resolve_balance(&vc, &c[i]), DLP_OK);
            const char *ips = strstr(c[i].device, "img_per_s=");
            assert_non_null(ips);
            NEAR(atof(ips + 10), c[i].balance * loader, 0.5 / (c[i].balance * loader));
            knees++;
        }
        subsets += c[i].images > 0 && c[i].images / c[i].batch <= 8;
        cpu224 += strcmp(c[i].device, "cpu") == 0 && c[i].size == 224;
        dlp_status st = dlp_validate_predict(&vc, &c[i], pr);
        if (st) fail_msg("%s: %s", c[i].device, dlp_err_msg());
        const char *r = dlp_validate_regime_of_stage(pr->bottleneck);
        reg[strcmp(r, "device") == 0 ? 0 : strcmp(r, "pipeline") == 0 ? 1 : 2]++;
    }
    assert_true(reg[0] >= 3 && reg[1] >= 3 && reg[2] >= 3);
    assert_true(n >= 30 && knees >= 3 && subsets >= 3 && cpu224 >= 2);
    free(pr);
    free(p);
    dlp_catalog_free(cat);
}

static void test_predict_by_hand(void **state) {
    (void)state;
    dlp_profile *p = malloc(sizeof *p);
    assert_int_equal(dlp_profile_read(FIXTURE, p), DLP_OK);
    dlp_dataset_stats s = toy_stats();
    dlp_validate_cfg vc;
    dlp_validate_cfg_init(&vc);
    vc.profile = p;
    vc.stats = &s;
    dlp_prediction *pr = malloc(sizeof *pr);
    dlp_validate_config c;
    dlp_validate_config_default(&c);
    // A device-bound emulated device: 32 images of ResNet-50 work (1000 classes: ratio 1) at 100 img/s, plus the
    // profile's loop overhead of 0.2 ms per step.
    snprintf(c.device, sizeof c.device, "sim:custom,img_per_s=100");
    assert_int_equal(dlp_validate_predict(&vc, &c, pr), DLP_OK);
    NEAR(pr->img_per_s, 32 / (32 / 100.0 + 0.0002), 1e-9);
    assert_string_equal(dlp_validate_regime_of_stage(pr->bottleneck), "device");
    // A read limit of 5 MiB/s on 110 KB files: 47.66 img/s, storage-bound.
    snprintf(c.device, sizeof c.device, "sim:custom,img_per_s=2000");
    c.read_limit_bytes_per_s = 5 << 20;
    assert_int_equal(dlp_validate_predict(&vc, &c, pr), DLP_OK);
    NEAR(pr->img_per_s, (5 << 20) / 110000.0, 1e-9);
    assert_string_equal(dlp_validate_regime_of_stage(pr->bottleneck), "storage");
    // A device the profile does not have.
    snprintf(c.device, sizeof c.device, "ref");
    assert_int_equal(dlp_validate_predict(&vc, &c, pr), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "no measured 'ref' device"));
    dlp_err_clear();
    free(pr);
    free(p);
}

// A run's distance from the machine as probed: other processes' load and the cores' speed, each over its
// tolerance, the larger counts; unknown parts count as undisturbed.
static void test_disturbance(void **state) {
    (void)state;
    dlp_validate_cfg vc;
    dlp_validate_cfg_init(&vc);
    assert_true(vc.disturbed_cores == 0.2 && vc.speed_tolerance == 0.08);
    dlp_validate_row r;
    memset(&r, 0, sizeof r);
    r.other_load_cores = 0.1;
    r.speed = NAN;
    NEAR(dlp_validate_disturbance(&vc, &r), 0.5, 1e-12);
    r.speed = 0.96;  // 4% slow: half the tolerance, the load's half counts the same
    NEAR(dlp_validate_disturbance(&vc, &r), 0.5, 1e-9);
    r.speed = 1.12;  // 12% fast: 1.5 tolerances, the larger part
    NEAR(dlp_validate_disturbance(&vc, &r), 1.5, 1e-9);
    r.speed = 1.0;
    r.other_load_cores = 0.5;
    NEAR(dlp_validate_disturbance(&vc, &r), 2.5, 1e-12);
    r.other_load_cores = NAN;
    r.speed = NAN;
    NEAR(dlp_validate_disturbance(&vc, &r), 0.0, 0);
    vc.canary_base_gflops = 0;  // no speed in the profile: the load alone
    r.other_load_cores = 0.3;
    NEAR(dlp_validate_disturbance(&vc, &r), 1.5, 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ape_mape),
        cmocka_unit_test(test_regimes),
        cmocka_unit_test(test_configs_json),
        cmocka_unit_test(test_builtin_sweep),
        cmocka_unit_test(test_predict_by_hand),
        cmocka_unit_test(test_disturbance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
