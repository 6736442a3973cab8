// Unit tests for data/transform_spec.c: the transform from the commands' option strings, and a synthetic set's
// dataset.json read back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/tensor.h"
#include "data/transform_spec.h"
#include "testutil.h"

static void test_parse_wh(void **state) {
    (void)state;
    int w, h;
    assert_int_equal(dlp_parse_wh("224", "crop", &w, &h), DLP_OK);
    assert_true(w == 224 && h == 224);
    assert_int_equal(dlp_parse_wh("160x96", "crop", &w, &h), DLP_OK);
    assert_true(w == 160 && h == 96);
    assert_int_equal(dlp_parse_wh("32X48", "crop", &w, &h), DLP_OK);
    assert_true(w == 32 && h == 48);
    assert_int_equal(dlp_parse_wh("0", "crop", &w, &h), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "--crop"));
    dlp_err_clear();
    assert_int_equal(dlp_parse_wh("12x", "crop", &w, &h), DLP_ERR_INVALID);
    dlp_err_clear();
    assert_int_equal(dlp_parse_wh("9000", "crop", &w, &h), DLP_ERR_INVALID);
    dlp_err_clear();
}

// The strings of `data bench`/`data crop`: output size, ranges, element type, layout, DCT scales; bad ones named.
static void test_spec_apply(void **state) {
    (void)state;
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_TRAIN);
    dlp_transform_spec s = {.crop = "64x48", .scale = "0.2-0.9", .ratio = "0.5-2", .dct_scales = "1,2",
                            .dtype = DLP_DTYPE_BF16, .layout = DLP_LAYOUT_NHWC};
    assert_int_equal(dlp_transform_spec_apply(&s, &t), DLP_OK);
    assert_true(t.out_w == 64 && t.out_h == 48);
    assert_true(t.scale_lo == 0.2 && t.scale_hi == 0.9 && t.ratio_lo == 0.5 && t.ratio_hi == 2);
    assert_int_equal(t.dtype, DLP_DTYPE_BF16);
    assert_int_equal(t.layout, DLP_LAYOUT_NHWC);
    assert_int_equal(t.dct_scales, (1u << 8) | (1u << 1) | (1u << 2));  // full size always allowed
    s.no_dct = 1;
    assert_int_equal(dlp_transform_spec_apply(&s, &t), DLP_OK);
    assert_int_equal(t.dct_scales, 1u << 8);
    s.no_dct = 0;
    s.dct_scales = "3,9";
    assert_int_equal(dlp_transform_spec_apply(&s, &t), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "--dct-scales"));
    dlp_err_clear();
    s.dct_scales = NULL;
    s.scale = "0.9-0.2";
    assert_int_not_equal(dlp_transform_spec_apply(&s, &t), DLP_OK);
    dlp_err_clear();
}

static void test_synth_report_load(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    dlp_synth_report rep = {.images = -1};
    dlp_synth_report_load(dir, &rep);  // no dataset.json: left as it is
    assert_int_equal(rep.images, -1);
    snprintf(path, sizeof path, "%s/dataset.json", dir);
    static const char j[] = "{\"images\": 30, \"bytes\": 4000, \"mix\": {\"gray\": 1, \"sub444\": 2, \"sub422\": 3, "
                            "\"sub420\": 24, \"progressive\": 5, \"over_1000px\": 0}}";
    assert_int_equal(dlp_write_atomic(path, j, strlen(j), DLP_WRITE_NOCLOBBER), DLP_OK);
    dlp_synth_report_load(dir, &rep);
    assert_true(rep.images == 30 && rep.bytes == 4000 && rep.gray == 1 && rep.sub444 == 2 && rep.sub422 == 3 &&
                rep.sub420 == 24 && rep.progressive == 5 && rep.over_1000px == 0);
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_wh),
        cmocka_unit_test(test_spec_apply),
        cmocka_unit_test(test_synth_report_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
