// tests/unit/testutil: helpers shared by the unit tests (temporary directories, tolerances).
#ifndef DLP_TESTUTIL_H
#define DLP_TESTUTIL_H
#include <stddef.h>

// Creates a fresh directory under $DLPERF_TEST_TMP (or /tmp) and writes its path into buf.
void dlp_test_tmpdir(char *buf, size_t len);
void dlp_test_rmtree(const char *dir);
// max |a-b| / max(|b|, floor) over n values; *where gets the index of the worst element.
double dlp_test_max_rel_err(const float *a, const float *b, size_t n, float floor, size_t *where);

#endif
