// Unit tests for nn/resnet: parameter counts, names and order as torchvision's state_dict, shapes at any input
// size, class counts, and the initialization's statistics and determinism.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/resnet.h"

// Figures from torchvision 0.14: sum(p.numel() for p in m.parameters()), len(list(m.parameters())),
// len(m.state_dict()) (with num_batches_tracked), running-stat elements.
static const struct {
    const char *name;
    int64_t params;
    int ntensors, nstate;
    int64_t running;
} k_rows[] = {
    {"resnet18", 11689512, 62, 122, 9600},
    {"resnet34", 21797672, 110, 218, 17024},
    {"resnet50", 25557032, 161, 320, 53120},
    {"resnet101", 44549160, 314, 626, 105344},
    {"resnet152", 60192808, 467, 932, 151424},
};

static void test_counts_match_torchvision(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        dlp_net net;
        assert_int_equal(dlp_model_build(k_rows[i].name, 1000, 224, &net), DLP_OK);
        assert_int_equal(net.param_count, k_rows[i].params);
        assert_int_equal(net.nparams, k_rows[i].ntensors);
        int nbn = net.nbufs / 2;  // each BN has running_mean, running_var (+ num_batches_tracked in state_dict)
        assert_int_equal(net.nparams + net.nbufs + nbn, k_rows[i].nstate);
        assert_int_equal(net.buf_count, k_rows[i].running);
        assert_string_equal(net.params[0].name, "conv1.weight");
        assert_string_equal(net.params[net.nparams - 2].name, "fc.weight");
        assert_string_equal(net.params[net.nparams - 1].name, "fc.bias");
        assert_int_equal(net.num_classes, 1000);
        const dlp_layer *out = &net.layers[dlp_net_output(&net)];
        assert_int_equal(out->c, 1000);
        // parameters are contiguous, in order, each owned by a layer at or after the previous one's
        for (int p = 1; p < net.nparams; p++) {
            assert_int_equal(net.params[p].offset, net.params[p - 1].offset + net.params[p - 1].numel);
            assert_true(net.params[p].layer >= net.params[p - 1].layer);
        }
        dlp_net_free(&net);
    }
}

static void test_resnet50_layout(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet50", 1000, 224, &net), DLP_OK);
    // ~4.1 GMAC (torchvision's "4.09 GFLOPS") = 8.2 GFLOP per image
    double f = dlp_net_forward_flops(&net);
    assert_true(f > 8.1e9 && f < 8.3e9);
    const dlp_param *p = dlp_net_find_param(&net, "layer1.0.downsample.0.weight");
    assert_non_null(p);
    assert_int_equal(p->shape[0], 256);
    assert_int_equal(p->shape[1], 64);
    assert_int_equal(p->shape[2], 1);
    // v1.5: the stride is on the 3x3 conv2 of the first block of stages 2-4
    const dlp_layer *c2 = &net.layers[dlp_net_find_param(&net, "layer2.0.conv2.weight")->layer];
    const dlp_layer *c1 = &net.layers[dlp_net_find_param(&net, "layer2.0.conv1.weight")->layer];
    assert_int_equal(c2->stride, 2);
    assert_int_equal(c1->stride, 1);
    assert_int_equal(c2->h, 28);
    assert_non_null(dlp_net_find_param(&net, "layer4.2.bn3.running_var"));
    assert_null(dlp_net_find_param(&net, "layer4.3.bn3.weight"));
    // state_dict order of a bottleneck: conv1 bn1 conv2 bn2 conv3 bn3 downsample.0 downsample.1
    const dlp_param *a = dlp_net_find_param(&net, "layer3.0.bn3.bias");
    assert_string_equal(net.params[(a - net.params) + 1].name, "layer3.0.downsample.0.weight");
    const dlp_layer *fc = &net.layers[dlp_net_output(&net)];
    assert_int_equal(net.layers[fc->in0].kind, DLP_LAYER_AVGPOOL);
    assert_int_equal(net.layers[fc->in0].c, 2048);
    dlp_net_free(&net);
}

static void test_sizes_and_classes(void **state) {
    (void)state;
    static const struct { const char *name; int classes, size, ok, final_hw; } rows[] = {
        {"resnet18", 10, 32, 1, 1},   {"resnet18", 10, 64, 1, 2},  {"resnet50", 5, 112, 1, 4},
        {"resnet50", 1000, 225, 1, 8}, {"resnet-mini", 3, 33, 1, 2}, {"resnet18", 10, 31, 0, 0},
        {"resnet18", 0, 64, 0, 0},     {"resnet19", 10, 64, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_net net;
        dlp_status st = dlp_model_build(rows[i].name, rows[i].classes, rows[i].size, &net);
        assert_int_equal(st == DLP_OK, rows[i].ok);
        if (!rows[i].ok) {
            assert_true(strlen(dlp_err_msg()) > 10);
            continue;
        }
        const dlp_layer *fc = &net.layers[dlp_net_output(&net)];
        const dlp_layer *last = &net.layers[net.layers[fc->in0].in0];  // the last block's relu
        assert_int_equal(last->h, rows[i].final_hw);
        assert_int_equal(fc->c, rows[i].classes);
        dlp_net_free(&net);
    }
}

static void test_non_square(void **state) {
    (void)state;
    dlp_resnet_cfg cfg;
    assert_int_equal(dlp_resnet_cfg_from_name("resnet50", 7, 224, &cfg), DLP_OK);
    cfg.height = 40;
    cfg.width_px = 100;
    dlp_net net;
    assert_int_equal(dlp_resnet_build(&cfg, &net), DLP_OK);
    const dlp_layer *pool = &net.layers[net.layers[dlp_net_output(&net)].in0];
    const dlp_layer *last = &net.layers[pool->in0];
    assert_int_equal(last->h, 2);  // 40 -> 20 -> 10 -> 10 -> 5 -> 3 -> 2
    assert_int_equal(last->w, 4);  // 100 -> 50 -> 25 -> 25 -> 13 -> 7 -> 4
    assert_int_equal(pool->c, 2048);
    dlp_net_free(&net);
    cfg.width_px = 31;
    assert_int_equal(dlp_resnet_build(&cfg, &net), DLP_ERR_INVALID);
}

static void test_init(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet18", 10, 64, &net), DLP_OK);
    float *p = malloc((size_t)net.param_count * sizeof(float)), *q = malloc((size_t)net.param_count * sizeof(float));
    float *b = malloc((size_t)net.buf_count * sizeof(float));
    dlp_resnet_init_params(&net, 7, 1, p, b);
    dlp_resnet_init_params(&net, 7, 1, q, NULL);
    assert_memory_equal(p, q, (size_t)net.param_count * sizeof(float));
    dlp_resnet_init_params(&net, 8, 1, q, NULL);
    assert_true(memcmp(p, q, (size_t)net.param_count * sizeof(float)) != 0);
    // conv std = sqrt(2 / fan_out): layer3.0.conv1 is (256, 128, 3, 3): std = sqrt(2/2304)
    const dlp_param *c = dlp_net_find_param(&net, "layer3.0.conv1.weight");
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < c->numel; i++) {
        s += p[c->offset + i];
        s2 += (double)p[c->offset + i] * p[c->offset + i];
    }
    double mean = s / c->numel, sd = sqrt(s2 / c->numel - mean * mean), want = sqrt(2.0 / 2304);
    assert_true(fabs(mean) < 0.01 * want * 10);
    assert_true(fabs(sd / want - 1) < 0.01);
    // fc: U(-1/sqrt(512), 1/sqrt(512))
    const dlp_param *fw = dlp_net_find_param(&net, "fc.weight");
    float mx = 0;
    for (int64_t i = 0; i < fw->numel; i++) mx = fabsf(p[fw->offset + i]) > mx ? fabsf(p[fw->offset + i]) : mx;
    assert_true(mx <= 1 / sqrtf(512) && mx > 0.9f / sqrtf(512));
    // BN: gamma 1 except the last BN of each block (zero_init_residual), beta 0, running var 1
    assert_true(p[dlp_net_find_param(&net, "bn1.weight")->offset] == 1.0f);
    assert_true(p[dlp_net_find_param(&net, "layer1.0.bn1.weight")->offset] == 1.0f);
    assert_true(p[dlp_net_find_param(&net, "layer1.0.bn2.weight")->offset] == 0.0f);
    assert_true(p[dlp_net_find_param(&net, "layer2.0.downsample.1.weight")->offset] == 1.0f);
    assert_true(p[dlp_net_find_param(&net, "layer2.0.bn2.bias")->offset] == 0.0f);
    assert_true(b[dlp_net_find_param(&net, "layer2.0.bn2.running_var")->offset] == 1.0f);
    assert_true(b[dlp_net_find_param(&net, "layer2.0.bn2.running_mean")->offset] == 0.0f);
    dlp_resnet_init_params(&net, 7, 0, q, NULL);
    assert_true(q[dlp_net_find_param(&net, "layer1.0.bn2.weight")->offset] == 1.0f);
    free(p);
    free(q);
    free(b);
    dlp_net_free(&net);
}

static void test_buckets(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet50", 1000, 224, &net), DLP_OK);
    dlp_bucket *b;
    int n;
    assert_int_equal(dlp_net_buckets(&net, 1 << 20, &b, &n), DLP_OK);
    assert_true(n > 10);
    int64_t end = net.param_count;
    for (int i = 0; i < n; i++) {  // from the end, contiguous, covering everything, at least 1M but the last
        assert_int_equal(b[i].offset + b[i].count, end);
        if (i < n - 1) assert_true(b[i].count >= (1 << 20));
        assert_int_equal(b[i].ready_layer, net.params[b[i].param_lo].layer);
        end = b[i].offset;
    }
    assert_int_equal(end, 0);
    assert_string_equal(net.params[b[0].param_hi - 1].name, "fc.bias");
    free(b);
    assert_int_equal(dlp_net_buckets(&net, 0, &b, &n), DLP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(b[0].count, net.param_count);
    free(b);
    dlp_net_free(&net);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_match_torchvision),
        cmocka_unit_test(test_resnet50_layout),
        cmocka_unit_test(test_sizes_and_classes),
        cmocka_unit_test(test_non_square),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
