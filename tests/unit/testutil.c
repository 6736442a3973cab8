// tests/unit/testutil: helpers shared by the unit tests.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dlp_test_tmpdir(char *buf, size_t len) {
    const char *base = getenv("DLPERF_TEST_TMP");
    if (!base || !base[0]) base = "/tmp";
    snprintf(buf, len, "%s/dlpXXXXXX", base);
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
}

void dlp_test_rmtree(const char *dir) {
    char cmd[1200];
    if (!dir || strlen(dir) < 6) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

double dlp_test_max_rel_err(const float *a, const float *b, size_t n, float floor, size_t *where) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double m = fabs((double)b[i]);
        if (m < floor) m = floor;
        double r = d / m;
        if (!(r <= worst)) {  // NaN counts as worst
            worst = isnan(r) ? INFINITY : r;
            wi = i;
        }
    }
    if (where) *where = wi;
    return worst;
}
