// Unit tests for hw/canary: the cores' speed reading is positive, plausible for a CPU (0.05 to 100,000 GFLOP/s
// summed over the allowed CPUs), lasts about what was asked, and two readings of the same machine agree within a
// factor of four (it is compared between runs by validate; a loaded CI machine moves it, not by that much).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clock.h"
#include "hw/canary.h"

static void test_canary(void **state) {
    (void)state;
    int64_t t0 = dlp_now_ns();
    const double a = dlp_host_canary_gflops(0.1);
    const double took = dlp_ns_to_s(dlp_now_ns() - t0);
    const double b = dlp_host_canary_gflops(0.1);
    assert_true(a > 0.05 && a < 1e5);
    assert_true(b > 0.05 && b < 1e5);
    assert_true(a / b < 4 && b / a < 4);
    assert_true(took >= 0.1 && took < 5);  // the loop stops at the deadline (a round is ~microseconds)
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_canary)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
