// The oneDNN backend's own elementwise kernels against plain definitions: cpu_kernel_add_relu_bwd (a gradient's
// last accumulation fused with an add+ReLU backward) in fp32 and bf16 — the bf16 sum rounded to nearest even
// once, ties and NaN included, in place or not.
// Main file: src/backend/cpu/cpu_kernels.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DLP_HAVE_DNNL
#include "backend/cpu/cpu.h"

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Round to nearest even by way of double: the two bf16 neighbours of f, the nearer one (ties: the even mantissa).
static uint16_t to_bf16_ref(float f) {
    if (isnan(f)) return 0x7fc0;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffff) == 0) return lo;
    double dl = fabs((double)f - (double)from_bf16(lo)), dh = fabs((double)from_bf16(hi) - (double)f);
    if (isinf(from_bf16(hi)) && !isinf(f)) dh = fabs((double)f - (double)from_bf16(lo)) * 2 + 1;  // overflow edge
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void run(void *dst, void *a, void *b, void *y, int64_t n, int bf16) {
    cpu_tensor td = {.data = dst}, ta = {.data = a}, tb = {.data = b}, ty = {.data = y};
    cpu_step s = {0};
    s.a = &td;
    s.b = &ta;
    s.c = &tb;
    s.d = &ty;
    s.n = n;
    s.m = bf16;
    cpu_kernel_add_relu_bwd(NULL, &s);
}

static void test_fp32(void **state) {
    (void)state;
    const int64_t n = 100003;  // not a multiple of the vector width
    float *a = malloc(n * 4), *b = malloc(n * 4), *y = malloc(n * 4), *d = malloc(n * 4);
    assert_non_null(a && b && y && d);
    srand(3);
    for (int64_t i = 0; i < n; i++) {
        a[i] = (float)rand() / RAND_MAX - 0.5f;
        b[i] = (float)rand() / RAND_MAX - 0.5f;
        y[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? (float)rand() / RAND_MAX : -1e-30f;
    }
    run(d, a, b, y, n, 0);
    for (int64_t i = 0; i < n; i++) assert_true(d[i] == (y[i] > 0 ? a[i] + b[i] : 0.0f));
    run(a, a, b, y, n, 0);  // in place: the destination is the first addend
    assert_memory_equal(a, d, n * 4);
    free(a), free(b), free(y), free(d);
}

static void test_bf16(void **state) {
    (void)state;
    const int64_t n = 65536 + 17;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *y = malloc(n * 2), *d = malloc(n * 2);
    assert_non_null(a && b && y && d);
    srand(5);
    for (int64_t i = 0; i < n; i++) {
        a[i] = (uint16_t)rand();
        b[i] = (uint16_t)rand();
        y[i] = (uint16_t)(i % 4 == 0 ? 0x0000 : i % 4 == 1 ? 0x8000 : i % 4 == 2 ? 0x3f80 : 0xbf80);  // 0,-0,1,-1
    }
    // exact ties: 1 + 2^-8 is halfway between two bf16 values (1 and 1+2^-7): rounds to the even one, 1
    a[2] = 0x3f80;                 // 1.0
    b[2] = 0x3b80;                 // 2^-8
    a[6] = 0x3f81;                 // 1 + 2^-7
    b[6] = 0x3b80;                 // + 2^-8: halfway to 1 + 2^-6, which is even
    a[10] = 0x7fc0;                // NaN stays NaN
    b[10] = 0x3f80;
    run(d, a, b, y, n, 1);
    int64_t checked = 0;
    for (int64_t i = 0; i < n; i++) {
        const float sum = from_bf16(a[i]) + from_bf16(b[i]);
        const int on = from_bf16(y[i]) > 0;
        if (!on) {
            assert_int_equal(d[i], 0);
        } else if (isnan(sum)) {
            assert_true(isnan(from_bf16(d[i])));
        } else {
            if (d[i] != to_bf16_ref(sum)) fprintf(stderr, "i %lld: %04x + %04x = %04x, want %04x\n", (long long)i, a[i], b[i], d[i], to_bf16_ref(sum));
            assert_int_equal(d[i], to_bf16_ref(sum));
            checked++;
        }
    }
    assert_int_equal(d[2], 0x3f80);
    assert_int_equal(d[6], 0x3f82);
    assert_true(isnan(from_bf16(d[10])));
    assert_true(checked > n / 5);  // a quarter of y is positive
    run(a, a, b, y, n, 1);
    assert_memory_equal(a, d, n * 2);
    free(a), free(b), free(y), free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
static void test_skip(void **state) {
    (void)state;
    skip();
}
int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_skip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
