// data/throttle: a token bucket shared by threads, to emulate storage slower than this machine's
// (`--read-limit 200M`): each read reserves its bytes and sleeps until the average rate is back under the limit.
// Defines: dlp_throttle, dlp_throttle_init, dlp_throttle_destroy, dlp_throttle_acquire, dlp_throttle_cancel.
#ifndef DLP_DATA_THROTTLE_H
#define DLP_DATA_THROTTLE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct dlp_throttle {
    pthread_mutex_t mu;
    double rate_bytes_per_s;  // 0: unlimited
    double burst_bytes;       // bucket size: 50 ms of the rate, at least 64 KiB
    double tokens;            // may go negative: a reservation not yet paid for by time
    int64_t last_ns;
    atomic_int cancelled;     // set by dlp_throttle_cancel: sleepers return early
} dlp_throttle;

void dlp_throttle_init(dlp_throttle *t, int64_t bytes_per_s);
void dlp_throttle_destroy(dlp_throttle *t);
// Reserves bytes; sleeps as long as needed to keep the rate; returns the nanoseconds slept.
int64_t dlp_throttle_acquire(dlp_throttle *t, int64_t bytes);
// Wakes every sleeper within 20 ms and makes later acquires return at once (used when the loader stops).
void dlp_throttle_cancel(dlp_throttle *t);

#endif
