// tests/unit/testutil: helpers shared by the unit tests (temporary directories, tolerances, plan inputs).
#ifndef DLP_TESTUTIL_H
#define DLP_TESTUTIL_H
#include <stddef.h>

#include "backend/backend.h"

// Creates a fresh directory under $DLPERF_TEST_TMP (or /tmp) and writes its path into buf.
void dlp_test_tmpdir(char *buf, size_t len);
void dlp_test_rmtree(const char *dir);
// max |a-b| / max(|b|, floor) over n values; *where gets the index of the worst element.
double dlp_test_max_rel_err(const float *a, const float *b, size_t n, float floor, size_t *where);
// dlp_plan_set_input with an fp32 NCHW batch of n images of net's input, converted to what the plan takes
// (dlp_plan_input_format: cuda wants NHWC in its compute type; ref and cpu NCHW fp32). DLP_ERR_NOMEM, or
// DLP_ERR_UNSUPPORTED for an input type other than fp32, bf16 and fp16.
dlp_status dlp_test_set_input(dlp_plan *p, const dlp_net *net, const float *x, int n);

// Seeded test parameters: conv/fc weights N(0, 1/fan_in) (outputs stay O(1)), fc bias N(0, 0.1), BN gamma in
// [0.5, 1.5], beta N(0, 0.2); running mean N(0, 0.2), running var in [0.5, 1.5].
void dlp_test_init_params(const dlp_net *net, uint64_t seed, float *params, float *bufs);

#endif
