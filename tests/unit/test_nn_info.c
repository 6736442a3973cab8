// Unit tests for nn/info.c: a model's figures (layer counts, per-layer FLOPs and parameters, labels, the JSON) and
// dlp_model_init / dlp_model_work_ratio.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/info.h"
#include "nn/resnet.h"

// ResNet-50 at 224 px: torchvision's 25,557,032 parameters, 53 convolutions and batch norms; the layers' FLOPs add
// up to the net's forward FLOPs, and their parameters to its parameter count.
static void test_resnet50_figures(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet50", 1000, 224, &net), DLP_OK);
    dlp_net_info ni;
    dlp_net_info_of(&net, &ni);
    assert_int_equal(ni.conv_layers, 53);
    assert_int_equal(ni.bn_layers, 53);
    assert_int_equal(net.param_count, 25557032);
    double flops = 0;
    int64_t params = 0;
    for (int i = 0; i < net.nlayers; i++) {
        flops += dlp_net_layer_flops(&net, i);
        params += dlp_net_layer_params(&net, i);
    }
    assert_true(fabs(flops - dlp_net_forward_flops(&net)) <= 1e-9 * flops);
    assert_true(fabs(ni.forward_gflop - 8.178) < 0.001);  // as `dlperf nn info` prints it
    assert_int_equal(params, net.param_count);
    assert_true(ni.activation_bytes > 0 && ni.activation_bytes % 4 == 0);
    char label[64];
    dlp_net_layer_label(&net, 0, label, sizeof label);
    assert_string_equal(label, "input");
    dlp_net_layer_label(&net, 1, label, sizeof label);
    assert_string_equal(label, "conv1");
    json_t *o = json_object();
    dlp_net_info_json(&net, &ni, o);
    assert_string_equal(json_string_value(json_object_get(o, "arch")), "resnet50");
    assert_int_equal(json_integer_value(json_object_get(o, "conv_layers")), 53);
    assert_int_equal(json_integer_value(json_object_get(o, "parameters")), 25557032);
    assert_int_equal(json_array_size(json_object_get(o, "input")), 3);
    assert_true(fabs(json_real_value(json_object_get(o, "train_gflop_per_image")) - 3 * ni.forward_gflop) < 1e-12);
    json_decref(o);
    dlp_net_free(&net);
}

// dlp_model_init gives the same weights as building and initializing by hand; an unknown model is an error.
static void test_model_init(void **state) {
    (void)state;
    dlp_net net, ref;
    float *p, *b;
    assert_int_equal(dlp_model_init("resnet-mini", 3, 32, 5, 0, &net, &p, &b), DLP_OK);
    assert_int_equal(dlp_model_build("resnet-mini", 3, 32, &ref), DLP_OK);
    float *rp = malloc((size_t)ref.param_count * sizeof *rp), *rb = malloc((size_t)ref.buf_count * sizeof *rb);
    dlp_resnet_init_params(&ref, 5, 0, rp, rb);
    assert_memory_equal(p, rp, (size_t)ref.param_count * sizeof *rp);
    assert_memory_equal(b, rb, (size_t)ref.buf_count * sizeof *rb);
    free(rp), free(rb), free(p), free(b);
    dlp_net_free(&ref);
    dlp_net_free(&net);
    assert_int_not_equal(dlp_model_init("resnet-nope", 3, 32, 5, 0, &net, &p, &b), DLP_OK);
    dlp_err_clear();
}

// ResNet-50 at 224 is the unit; ResNet-18 does less work with fewer parameters; an unknown model leaves 1 and 1.
static void test_work_ratio(void **state) {
    (void)state;
    double w, pr;
    dlp_model_work_ratio("resnet50", 224, &w, &pr);
    assert_true(fabs(w - 1) < 1e-12 && fabs(pr - 1) < 1e-12);
    dlp_model_work_ratio("resnet18", 224, &w, &pr);
    assert_true(w > 0.2 && w < 0.5 && pr > 0.4 && pr < 0.5);
    dlp_model_work_ratio("resnet-nope", 224, &w, &pr);
    assert_true(w == 1 && pr == 1);
    dlp_err_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_figures),
        cmocka_unit_test(test_model_init),
        cmocka_unit_test(test_work_ratio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
