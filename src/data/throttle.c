// data/throttle: token bucket (reserve, then sleep off the debt outside the lock, so threads queue fairly).
#include "data/throttle.h"

#include "core/clock.h"

void dlp_throttle_init(dlp_throttle *t, int64_t bytes_per_s) {
    pthread_mutex_init(&t->mu, NULL);
    t->rate_bytes_per_s = bytes_per_s > 0 ? (double)bytes_per_s : 0.0;
    t->burst_bytes = t->rate_bytes_per_s * 0.05;
    if (t->burst_bytes < 65536.0) t->burst_bytes = 65536.0;
    t->tokens = t->burst_bytes;
    t->last_ns = dlp_now_ns();
    atomic_store(&t->cancelled, 0);
}

void dlp_throttle_cancel(dlp_throttle *t) { atomic_store(&t->cancelled, 1); }

void dlp_throttle_destroy(dlp_throttle *t) { pthread_mutex_destroy(&t->mu); }

int64_t dlp_throttle_acquire(dlp_throttle *t, int64_t bytes) {
    if (t->rate_bytes_per_s <= 0 || bytes <= 0 || atomic_load(&t->cancelled)) return 0;
    pthread_mutex_lock(&t->mu);
    int64_t now = dlp_now_ns();
    t->tokens += t->rate_bytes_per_s * (double)(now - t->last_ns) * 1e-9;
    if (t->tokens > t->burst_bytes) t->tokens = t->burst_bytes;
    t->last_ns = now;
    t->tokens -= (double)bytes;
    int64_t wait_ns = t->tokens < 0 ? (int64_t)(-t->tokens / t->rate_bytes_per_s * 1e9) : 0;
    pthread_mutex_unlock(&t->mu);
    int64_t until = now + wait_ns, slept = 0;
    while (wait_ns > 0 && !atomic_load(&t->cancelled)) {  // in slices, so a stop is not held up by slow "storage"
        int64_t left = until - dlp_now_ns();
        if (left <= 0) break;
        dlp_sleep_ns(left < 20000000 ? left : 20000000);
        slept = dlp_now_ns() - now;
    }
    return slept;
}
