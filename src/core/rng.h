// core/rng: small, fast, deterministic random numbers (xoshiro256** seeded by splitmix64) with independent
// streams, so results do not depend on thread scheduling: a sample's randomness comes from (seed, stream).
// Defines: dlp_rng, dlp_rng_init, dlp_rng_u64, dlp_rng_uniform, dlp_rng_normal, dlp_rng_below, dlp_hash64.
#ifndef DLP_CORE_RNG_H
#define DLP_CORE_RNG_H
#include <stdint.h>

typedef struct dlp_rng {
    uint64_t s[4];
} dlp_rng;

uint64_t dlp_hash64(uint64_t x);  // splitmix64 finalizer: a good 64-bit mix
void dlp_rng_init(dlp_rng *r, uint64_t seed, uint64_t stream);
uint64_t dlp_rng_u64(dlp_rng *r);
double dlp_rng_uniform(dlp_rng *r);           // [0, 1)
double dlp_rng_range(dlp_rng *r, double lo, double hi);
double dlp_rng_normal(dlp_rng *r);            // N(0, 1)
uint64_t dlp_rng_below(dlp_rng *r, uint64_t n);  // [0, n), unbiased

#endif
