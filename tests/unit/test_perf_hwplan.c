// Unit tests for perf/hwplan (dlperf plan's search) and hw/parts: the choice rule on made-up candidate sets (no
// cheaper candidate is faster than the plan, a larger budget never gives a slower plan, the plan is within the
// tolerance of the fastest affordable one, the frontier lists no beaten candidate), the hand-made fixture catalog
// (tests/fixtures/plan/catalog: the candidates, their prices and the hand-computed plan), the real catalog's parts
// loading with their sources, and a parts file with an unsourced figure refused.
// Main file: src/perf/hwplan.c; also src/hw/parts.c, catalog.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "hw/catalog.h"
#include "hw/parts.h"
#include "perf/hwplan.h"
#include "testutil.h"

static char g_fx[1024];

static const char *fxdir(void) {
    const char *root = getenv("DLPERF_ROOT");
    snprintf(g_fx, sizeof g_fx, "%s/tests/fixtures/plan/catalog", root && *root ? root : ".");
    return g_fx;
}

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) {  // xorshift64, [0, 1)
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

// The properties over random candidate sets, budgets and tolerances.
static void test_choice_properties(void **state) {
    (void)state;
    enum { N = 300 };
    dlp_hwplan_cand *c = calloc(N, sizeof *c);
    assert_non_null(c);
    static const double k_tol[] = {0, 0.02, 0.1};
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++) {
            memset(&c[i], 0, sizeof c[i]);
            c[i].ok = urand() > 0.05;
            // Prices on a coarse grid (ties happen), throughput loosely rising with price.
            c[i].budget_cost = 100 * (1 + (int)(urand() * 200));
            c[i].img_per_s = c[i].budget_cost * (0.5 + urand()) * (urand() < 0.1 ? 0.1 : 1);
            c[i].total_s = 1e9 / c[i].img_per_s;
        }
        for (size_t t = 0; t < sizeof k_tol / sizeof k_tol[0]; t++) {
            dlp_hwplan_req req;
            dlp_hwplan_req_init(&req);
            req.tolerance = k_tol[t];
            double prev = 0;
            for (double b = 50; b <= 21000; b *= 1.15) {
                req.budget = b;
                int k = dlp_hwplan_choose(c, N, &req);
                double fastest = 0;
                for (int i = 0; i < N; i++)
                    if (c[i].ok && c[i].budget_cost <= b && c[i].img_per_s > fastest) fastest = c[i].img_per_s;
                if (fastest == 0) {
                    assert_int_equal(k, -1);
                    continue;
                }
                assert_true(k >= 0 && c[k].feasible && c[k].budget_cost <= b);
                assert_true(c[k].img_per_s >= (1 - req.tolerance) * fastest);
                for (int i = 0; i < N; i++)  // nothing cheaper is faster
                    if (c[i].ok && c[i].budget_cost < c[k].budget_cost) assert_true(c[i].img_per_s <= c[k].img_per_s);
                assert_true(c[k].img_per_s >= prev);  // a larger budget never slows the plan
                prev = c[k].img_per_s;
                int idx[8], m = dlp_hwplan_frontier(c, N, k, idx, 8);
                assert_true(m >= 1 && idx[0] == k);
                for (int a = 1; a < m; a++) {
                    assert_true(c[idx[a]].feasible);
                    for (int i = 0; i < N; i++)
                        if (c[i].feasible && i != idx[a])
                            assert_false(c[i].budget_cost <= c[idx[a]].budget_cost && c[i].img_per_s > c[idx[a]].img_per_s);
                    if (a > 1) assert_true(c[idx[a]].img_per_s <= c[idx[a - 1]].img_per_s);
                }
            }
        }
    }
    // A deadline alone: the cheapest that meets it.
    dlp_hwplan_req req;
    dlp_hwplan_req_init(&req);
    req.deadline_s = 2e6;
    int k = dlp_hwplan_choose(c, N, &req);
    assert_true(k >= 0 && c[k].total_s <= 2e6);
    for (int i = 0; i < N; i++)
        if (c[i].ok && c[i].total_s <= 2e6) assert_true(c[i].budget_cost >= c[k].budget_cost);
    free(c);
}

// Rows: budget -> the plan worked out by hand (tests/cli/perf_plan.sh says how).
static const struct {
    double budget;
    const char *id;
} k_fixture_plans[] = {
    {2000, NULL},                          // below every configuration ($2,100 is the cheapest: the box system)
    {3950, "box/1xgpu-b/1xcpu-6/ssd/1n"},  // $1,000 + $2,500 + $250 + $200
    {4000, "box/1xgpu-b/1xcpu-6/ssd/1n"},
    {4599, "box/1xgpu-b/1xcpu-6/ssd/1n"},  // 2x gpu-a with cpu-8 ($4,600) is not faster anyway
};

static void test_fixture_catalog(void **state) {
    (void)state;
    dlp_catalog *cat = NULL;
    dlp_parts *parts = NULL;
    assert_int_equal(dlp_catalog_load(fxdir(), &cat), DLP_OK);
    assert_int_equal(dlp_parts_load(cat, &parts), DLP_OK);
    assert_int_equal(parts->nplatforms, 1);
    assert_int_equal(parts->nstorage, 1);
    dlp_hwplan_req req;
    dlp_hwplan_req_init(&req);
    req.w.prec = DLP_PREC_FP16;
    req.w.stats = dlp_catalog_dataset_find(cat, "imagenet-train")->stats;
    dlp_hwplan_cand *c = NULL;
    int n = 0;
    assert_int_equal(dlp_hwplan_enumerate(cat, parts, &req, &c, &n), DLP_OK);
    // 2 GPUs x 2 counts x 3 CPUs x 2 storage x nodes {1, 2} + the box system x nodes {1, 2, 4}.
    assert_int_equal(n, 2 * 2 * 3 * 2 * 2 + 3);
    int found = 0;
    for (int i = 0; i < n; i++) {
        assert_true(c[i].ok);
        if (strcmp(c[i].id, "box/2xgpu-a/1xcpu-8/ssd/2n") == 0) {
            found = 1;
            assert_true(c[i].price_usd == 2 * (1000 + 2 * 1500 + 400 + 200));
            assert_true(c[i].power_w == 100 + 2 * 450 + 80 + 5);
        }
    }
    assert_true(found);
    for (size_t r = 0; r < sizeof k_fixture_plans / sizeof k_fixture_plans[0]; r++) {
        req.budget = k_fixture_plans[r].budget;
        int k = dlp_hwplan_choose(c, n, &req);
        if (!k_fixture_plans[r].id) {
            assert_int_equal(k, -1);
            continue;
        }
        assert_true(k >= 0);
        assert_string_equal(c[k].id, k_fixture_plans[r].id);
        assert_true(fabs(c[k].ratio - 1) <= 0.10);  // balanced
        assert_true(fabs(c[k].img_per_s - 4000) < 40);
    }
    // One part swapped: neighbors.
    const char *what = NULL;
    dlp_hwplan_cand a = c[0], b = c[0];
    b.cpu = &cat->cpus[(a.cpu == &cat->cpus[0]) ? 1 : 0];
    assert_true(dlp_hwplan_neighbor(&a, &b, &what));
    assert_string_equal(what, "cpu");
    b.nodes = a.nodes + 1;
    assert_false(dlp_hwplan_neighbor(&a, &b, &what));
    free(c);
    dlp_parts_free(parts);
    dlp_catalog_free(cat);
}

static void test_real_parts(void **state) {
    (void)state;
    dlp_catalog *cat = NULL;
    dlp_parts *parts = NULL;
    assert_int_equal(dlp_catalog_load(NULL, &cat), DLP_OK);
    assert_int_equal(dlp_parts_load(cat, &parts), DLP_OK);
    assert_true(parts->nplatforms >= 3 && parts->nstorage >= 1);
    for (int i = 0; i < parts->nplatforms; i++) {
        const dlp_platform *p = &parts->platforms[i];
        assert_true(p->price_usd > 0 && p->base && p->base->kind == DLP_SYSTEM_OWNED);
        // The estimate's rule: base system's price - its GPUs and CPUs (within $1 of rounding).
        double rule = p->base->price_usd - p->base->gpus * p->base->gpu->price_usd - p->base->sockets * p->base->cpu->price_usd;
        assert_true(fabs(p->price_usd - rule) <= 1);
    }
    dlp_parts_free(parts);
    dlp_catalog_free(cat);
}

// A copy of the fixture catalog whose parts.json has a figure without a source: refused, naming the field.
static void test_unsourced_refused(void **state) {
    (void)state;
    char dir[512], path[700], cmd[2048];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "cp %s/*.json %s/", fxdir(), dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/parts.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"dlperf.catalog.parts/1\", \"platforms\": [{\"id\": \"p\", \"name\": \"P\", \"base_system\": \"box\","
          " \"sockets\": 1, \"cpus\": [\"cpu-2\"], \"gpus\": [\"gpu-a\"], \"gpu_counts\": [1], \"max_nodes\": 1,"
          " \"price_usd\": 10, \"power_w\": 1, \"src\": {\"sockets\": \"fx\"}}], \"storage\": []}\n", f);
    fclose(f);
    dlp_catalog *cat = NULL;
    dlp_parts *parts = NULL;
    assert_int_equal(dlp_catalog_load(dir, &cat), DLP_OK);
    assert_int_not_equal(dlp_parts_load(cat, &parts), DLP_OK);
    assert_null(parts);
    assert_non_null(strstr(dlp_err_msg(), "has no source"));
    dlp_err_clear();
    dlp_catalog_free(cat);
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choice_properties),
        cmocka_unit_test(test_fixture_catalog),
        cmocka_unit_test(test_real_parts),
        cmocka_unit_test(test_unsourced_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
