// Unit tests for nn/convert: an NCHW fp32 batch in each layout and element type a plan may take, element by
// element against the definition (NHWC index, bf16/fp16 round to nearest even), and uint8 refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "nn/convert.h"

static void test_convert_rows(void **state) {
    (void)state;
    enum { N = 2, C = 3, H = 2, W = 5 };
    float x[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++) x[i] = (float)(i * 0.37 - 7.1);
    static const struct {
        dlp_layout layout;
        dlp_dtype type;
    } rows[] = {
        {DLP_LAYOUT_NCHW, DLP_DTYPE_F32}, {DLP_LAYOUT_NHWC, DLP_DTYPE_F32}, {DLP_LAYOUT_NCHW, DLP_DTYPE_BF16},
        {DLP_LAYOUT_NHWC, DLP_DTYPE_BF16}, {DLP_LAYOUT_NCHW, DLP_DTYPE_F16}, {DLP_LAYOUT_NHWC, DLP_DTYPE_F16},
    };
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        void *out = NULL;
        assert_int_equal(dlp_batch_convert(x, N, C, H, W, rows[r].layout, rows[r].type, &out), DLP_OK);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                for (int h = 0; h < H; h++)
                    for (int w = 0; w < W; w++) {
                        float v = x[((n * C + c) * H + h) * W + w];
                        int at = rows[r].layout == DLP_LAYOUT_NHWC ? ((n * H + h) * W + w) * C + c
                                                                    : ((n * C + c) * H + h) * W + w;
                        if (rows[r].type == DLP_DTYPE_F32) assert_true(((float *)out)[at] == v);
                        else if (rows[r].type == DLP_DTYPE_BF16) assert_int_equal(((uint16_t *)out)[at], dlp_f32_to_bf16(v));
                        else assert_int_equal(((uint16_t *)out)[at], dlp_f32_to_f16(v));
                    }
        free(out);
    }
    void *out = (void *)1;
    assert_int_equal(dlp_batch_convert(x, N, C, H, W, DLP_LAYOUT_NCHW, DLP_DTYPE_U8, &out), DLP_ERR_UNSUPPORTED);
    assert_null(out);
    dlp_err_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_convert_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
