// tests/unit/loadgen_suts: the delay and rate SUTs of the loadgen harness tests (see loadgen_suts.h).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/clock.h"
#include "loadgen_suts.h"

static void *delay_main(void *arg) {
    delay_sut *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->count == 0 && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        if (d->count == 0 && d->stop) break;
        int64_t due = d->q[d->head].due;
        pthread_mutex_unlock(&d->mu);
        dlp_sleep_until_ns(due);
        pthread_mutex_lock(&d->mu);
        dlp_lg_sample s = d->q[d->head].s;
        const dlp_lg_done *done = d->q[d->head].done;
        d->head = (d->head + 1) % d->cap;
        d->count--;
        int drop = d->drop_every > 0 && (int)(s.id % (uint64_t)d->drop_every) == d->drop_every - 1;
        if (drop && d->ndropped < 4096) {
            d->dropped[d->ndropped].s = s;
            d->dropped[d->ndropped].done = done;
            d->ndropped++;
            continue;
        }
        d->outstanding--;
        pthread_mutex_unlock(&d->mu);
        dlp_lg_response r = {.id = s.id, .outcome = DLP_LG_OK, .top1 = (int32_t)s.index};
        done->fn(done->ctx, &r, 1);
        if ((int64_t)s.id == d->answer_twice_id) done->fn(done->ctx, &r, 1);
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static dlp_status delay_issue(void *ctx, const dlp_lg_sample *s, size_t n, const dlp_lg_done *done) {
    delay_sut *d = ctx;
    int64_t call;
    pthread_mutex_lock(&d->mu);
    call = d->calls++;
    pthread_mutex_unlock(&d->mu);
    if (call == d->stall_call) dlp_sleep_ns(d->stall_ns);
    int64_t now = dlp_now_ns();
    pthread_mutex_lock(&d->mu);
    d->samples += (int64_t)n;
    if ((int64_t)n > d->max_call_samples) d->max_call_samples = (int64_t)n;
    if (d->min_call_samples == 0 || (int64_t)n < d->min_call_samples) d->min_call_samples = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        assert_true(d->count < d->cap);
        size_t at = (d->head + d->count) % d->cap;
        d->q[at].s = s[i];
        d->q[at].done = done;
        int64_t due = now + d->delay_ns;
        if (d->service_ns > 0) {
            due = (d->last_due_ns > now ? d->last_due_ns : now) + d->service_ns;
            d->last_due_ns = due;
        }
        d->q[at].due = due;
        d->count++;
    }
    d->outstanding += (int64_t)n;
    if (d->outstanding > d->max_outstanding) d->max_outstanding = d->outstanding;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return DLP_OK;
}

static void delay_destroy(void *ctx) {
    delay_sut *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    for (int i = 0; i < d->ndropped; i++) {  // late answers after the harness gave up: must be harmless
        dlp_lg_response r = {.id = d->dropped[i].s.id, .outcome = DLP_LG_ERROR, .top1 = -1};
        d->dropped[i].done->fn(d->dropped[i].done->ctx, &r, 1);
    }
    free(d->q);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

dlp_lg_sut lgt_delay_sut_new(int64_t delay_ns, delay_sut **out) {
    delay_sut *d = calloc(1, sizeof *d);
    assert_non_null(d);
    d->delay_ns = delay_ns;
    d->answer_twice_id = -1;
    d->stall_call = -1;
    d->cap = 1 << 16;
    d->q = calloc(d->cap, sizeof *d->q);
    assert_non_null(d->q);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    assert_int_equal(pthread_create(&d->th, NULL, delay_main, d), 0);
    *out = d;
    return (dlp_lg_sut){.name = "delay", .ctx = d, .issue_query = delay_issue, .destroy = delay_destroy};
}


static dlp_status rate_infer(void *ctx, int worker, const uint32_t *idx, int n, int32_t *top1) {
    rate_engine *e = ctx;
    (void)worker;
    int64_t now = dlp_now_ns();
    int64_t start = now - e->next_free_ns < 2000000 ? e->next_free_ns : now;
    if (start > now + 1000000000LL) start = now;
    e->next_free_ns = start + e->service_ns * n;
    dlp_sleep_until_ns(e->next_free_ns);
    e->calls++;
    e->samples += n;
    for (int i = 0; i < n; i++) top1[i] = (int32_t)(idx[i] % 1000);
    if (e->fail_every > 0 && idx[0] % (uint32_t)e->fail_every == 0) return DLP_ERR(DLP_ERR_NUMERIC, "fake failure");
    return DLP_OK;
}

dlp_lg_sut lgt_rate_sut_new(rate_engine *e, int max_batch) {
    dlp_lg_inproc_cfg c = {.fn = rate_infer, .ctx = e, .max_batch = max_batch, .threads = 1, .name = "rate"};
    dlp_lg_sut s;
    assert_int_equal(dlp_lg_sut_inproc_create(&c, &s), DLP_OK);
    return s;
}

void lgt_fast_settings(dlp_lg_settings *s, dlp_lg_scenario sc) {
    dlp_lg_settings_default(s, sc);
    s->min_duration_ns = 200 * MS;
    s->idle_timeout_ns = 2000 * MS;
}

