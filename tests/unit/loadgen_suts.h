// tests/unit/loadgen_suts: the SUTs of known behaviour the loadgen harness tests run against (linked into every
// unit test binary by the Makefile's TEST_SUPPORT rule; used by test_loadgen_run.c and test_loadgen_search.c).
// Defines: delay_sut (lgt_delay_sut_new), rate_engine (lgt_rate_sut_new), lgt_fast_settings, MS (lgt_: these are
// linked into every test binary, so their names say whose they are).
#ifndef DLP_TESTS_LOADGEN_SUTS_H
#define DLP_TESTS_LOADGEN_SUTS_H
#include <pthread.h>
#include <stdint.h>

#include "loadgen/loadgen.h"

#define MS 1000000LL

// A pure-delay SUT: answers each sample `delay_ns` after it was issued, with unlimited parallelism (a timer
// thread and a FIFO). With service_ns > 0 it is instead one server of known capacity (1e9/service_ns
// samples/s): each sample is done at max(its issue, the previous one's end) + service_ns, computed at issue
// time, so late wake-ups of the timer thread add latency noise but never lower the capacity. It records how
// queries arrived; optional misbehaviour: drop or double-answer samples, stall inside issue_query once.
typedef struct delay_sut {
    int64_t delay_ns;
    int64_t service_ns;
    int64_t last_due_ns;
    int drop_every;       // never answer samples with id % drop_every == drop_every - 1 (until destroy)
    int answer_twice_id;  // answer this id twice (-1: none)
    int stall_call;       // issue_query call number that sleeps stall_ns before taking its samples (-1: none)
    int64_t stall_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct { dlp_lg_sample s; const dlp_lg_done *done; int64_t due; } *q;
    size_t cap, head, count;
    struct { dlp_lg_sample s; const dlp_lg_done *done; } dropped[4096];
    int ndropped;
    int stop;
    pthread_t th;
    int64_t calls, samples, outstanding, max_outstanding, max_call_samples, min_call_samples;
} delay_sut;

dlp_lg_sut lgt_delay_sut_new(int64_t delay_ns, delay_sut **out);

// A SUT of known capacity: the in-process SUT with one worker whose "inference" takes service_ns per sample,
// paced by absolute deadlines: a call that starts within 2 ms of the previous deadline is taken to start at
// it (the lag is sleep overshoot, not idleness), so the overshoot does not accumulate while work is queued.
typedef struct rate_engine {
    int64_t service_ns;
    int64_t next_free_ns;
    int64_t calls, samples;
    int fail_every;  // fail calls whose first index % fail_every == 0 (0: never)
} rate_engine;

dlp_lg_sut lgt_rate_sut_new(rate_engine *e, int max_batch);

// The scenario's defaults with a short run: min duration 200 ms, idle timeout 2 s.
void lgt_fast_settings(dlp_lg_settings *s, dlp_lg_scenario sc);

#endif
