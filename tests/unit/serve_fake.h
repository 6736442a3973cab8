// tests/unit/serve_fake: a TEST DOUBLE for the service — a deterministic fake classifier and a JPEG
// "preprocess" that really decodes with libjpeg (so 400s are real) but reduces the image to a 16-float
// signature instead of a 224x224 tensor. Not a backend, not shipped: it exists only in the tests, until the
// real engine (ResNet via a backend plan) and the data module's preprocessing are wired in.
#ifndef DLP_TEST_SERVE_FAKE_H
#define DLP_TEST_SERVE_FAKE_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/serve.h"

#define FAKE_SAMPLE_FLOATS 16
#define FAKE_CLASSES 1000

typedef struct fake_engine {
    int max_batch;
    int64_t base_ns, per_sample_ns;  // simulated inference time per call
    // Optional gate: infer() waits while gate_closed (tests open it).
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_closed;
    int calls, samples;
    int entered, entered_samples;    // calls that reached infer() (gated or not) and their samples
    int batch_hist[257];             // calls by batch size
} fake_engine;

void fake_engine_init(fake_engine *e, int max_batch, int64_t base_ns, int64_t per_sample_ns);
void fake_engine_destroy(fake_engine *e);
void fake_engine_gate(fake_engine *e, int closed);
// Waits (up to 10 s) until infer() has been entered with at least `samples` samples in all; 1 when it was.
int fake_engine_wait_entered(fake_engine *e, int samples);
dlp_serve_engine fake_engine_iface(fake_engine *e);
dlp_serve_preprocess fake_preprocess_iface(void);
// What the service must answer for this JPEG: preprocess + one-sample inference + top-k, done directly.
int fake_classify(const uint8_t *jpeg, size_t len, int k, int *cls, float *prob);

// A JPEG of w x h with smooth, seed-dependent content, quality q (malloc'd).
void fake_make_jpeg(uint64_t seed, int w, int h, int q, uint8_t **buf, size_t *len);

#endif
