// tests/unit/serve_fake: the service's test double (see serve_fake.h). Lives in tests only.
#include "serve_fake.h"

#include <time.h>

#include <jpeglib.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/clock.h"
#include "core/rng.h"

void fake_engine_init(fake_engine *e, int max_batch, int64_t base_ns, int64_t per_sample_ns) {
    memset(e, 0, sizeof *e);
    e->max_batch = max_batch;
    e->base_ns = base_ns;
    e->per_sample_ns = per_sample_ns;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
}

void fake_engine_destroy(fake_engine *e) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
}

void fake_engine_gate(fake_engine *e, int closed) {
    pthread_mutex_lock(&e->mu);
    e->gate_closed = closed;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int fake_engine_wait_entered(fake_engine *e, int samples) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&e->mu);
    int ok = 1;
    while (e->entered_samples < samples && ok) ok = pthread_cond_timedwait(&e->cv, &e->mu, &ts) == 0;
    ok = e->entered_samples >= samples;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

// A fixed pseudo-random linear classifier: logit[c] = sum_j W[c][j] x[j], W from a hash of (c, j).
static float weight(int c, int j) {
    uint64_t h = dlp_hash64(((uint64_t)c << 8) ^ (uint64_t)j ^ 0xfeedULL);
    return (float)((double)(h >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static void classify1(const float *x, float *logits) {
    for (int c = 0; c < FAKE_CLASSES; c++) {
        float s = 0;
        for (int j = 0; j < FAKE_SAMPLE_FLOATS; j++) s += weight(c, j) * x[j];
        logits[c] = s;
    }
}

static dlp_status fake_infer(void *ctx, const void *batch, int n, float *logits) {
    fake_engine *e = ctx;
    pthread_mutex_lock(&e->mu);
    e->entered++;
    e->entered_samples += n;
    pthread_cond_broadcast(&e->cv);
    while (e->gate_closed) pthread_cond_wait(&e->cv, &e->mu);
    e->calls++;
    e->samples += n;
    if (n >= 0 && n <= 256) e->batch_hist[n]++;
    pthread_mutex_unlock(&e->mu);
    dlp_sleep_ns(e->base_ns + e->per_sample_ns * n);
    const float *x = batch;
    for (int i = 0; i < n; i++) classify1(x + (size_t)i * FAKE_SAMPLE_FLOATS, logits + (size_t)i * FAKE_CLASSES);
    return DLP_OK;
}

dlp_serve_engine fake_engine_iface(fake_engine *e) {
    return (dlp_serve_engine){.name = "test-double", .ctx = e, .max_batch = e->max_batch,
                              .sample_bytes = FAKE_SAMPLE_FLOATS * sizeof(float), .num_classes = FAKE_CLASSES,
                              .infer = fake_infer};
}

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void on_error(j_common_ptr ci) {
    jerr *e = (jerr *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

static void on_message(j_common_ptr ci, int level) {
    jerr *e = (jerr *)ci->err;
    if (level < 0) {  // a warning: corrupt data; keep the first
        if (e->pub.num_warnings == 0) (*ci->err->format_message)(ci, e->msg);
        e->pub.num_warnings++;
    }
}

// Decodes the whole image with libjpeg; a libjpeg error or warning (corrupt or truncated data) is a
// DLP_ERR_FORMAT naming what libjpeg said. The sample: mean R, G, B of each 2x2 quadrant, then w and h.
static dlp_status fake_pre_run(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    (void)ctx, (void)worker;
    struct jpeg_decompress_struct ci;
    jerr e;
    memset(&e, 0, sizeof e);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    e.pub.emit_message = on_message;
    JSAMPLE *volatile row = NULL;  // volatile: read after longjmp
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&ci);
        free(row);
        return DLP_ERR(DLP_ERR_FORMAT, "cannot decode the JPEG: %s", e.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, jpeg, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    int w = (int)ci.output_width, h = (int)ci.output_height;
    row = malloc((size_t)w * 3);
    double acc[12] = {0};
    long cnt[4] = {0};
    while (ci.output_scanline < ci.output_height) {
        int y = (int)ci.output_scanline;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&ci, &rp, 1);
        const JSAMPLE *rw = rp;
        for (int x = 0; x < w; x++) {
            int q = (y >= h / 2) * 2 + (x >= w / 2);
            for (int c = 0; c < 3; c++) acc[q * 3 + c] += rw[x * 3 + c];
            cnt[q]++;
        }
    }
    jpeg_finish_decompress(&ci);
    int warned = e.pub.num_warnings > 0;
    jpeg_destroy_decompress(&ci);
    free(row);
    if (warned) return DLP_ERR(DLP_ERR_FORMAT, "corrupt JPEG data: %s", e.msg);
    float *x = dst;
    for (int q = 0; q < 4; q++)
        for (int c = 0; c < 3; c++) x[q * 3 + c] = cnt[q] ? (float)(acc[q * 3 + c] / cnt[q] / 255.0) : 0.0f;
    x[12] = (float)w / 1000.0f;
    x[13] = (float)h / 1000.0f;
    x[14] = 1.0f;
    x[15] = 0.0f;
    return DLP_OK;
}

dlp_serve_preprocess fake_preprocess_iface(void) {
    return (dlp_serve_preprocess){.name = "test-double-jpeg", .ctx = NULL, .run = fake_pre_run};
}

int fake_classify(const uint8_t *jpeg, size_t len, int k, int *cls, float *prob) {
    float x[FAKE_SAMPLE_FLOATS], logits[FAKE_CLASSES];
    if (fake_pre_run(NULL, 0, jpeg, len, x) != DLP_OK) return -1;
    classify1(x, logits);
    dlp_stats_topk(logits, FAKE_CLASSES, k, cls, prob);
    return 0;
}

void fake_make_jpeg(uint64_t seed, int w, int h, int q, uint8_t **buf, size_t *len) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_compress(&ci);
    unsigned char *mem = NULL;
    unsigned long msize = 0;
    jpeg_mem_dest(&ci, &mem, &msize);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, q, TRUE);
    jpeg_start_compress(&ci, TRUE);
    dlp_rng r;
    dlp_rng_init(&r, seed, 7);
    double f[6];
    for (int i = 0; i < 6; i++) f[i] = dlp_rng_range(&r, 0.01, 0.2);
    unsigned char *row = malloc((size_t)w * 3);
    while (ci.next_scanline < ci.image_height) {
        int y = (int)ci.next_scanline;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                row[x * 3 + c] = (unsigned char)(127.5 + 120 * sin(f[c] * x + f[c + 3] * y + (double)c));
        JSAMPROW rp = row;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    *buf = malloc(msize);
    memcpy(*buf, mem, msize);
    *len = msize;
    free(mem);
}
