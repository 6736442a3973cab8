// core/rng: xoshiro256** with splitmix64 seeding.
#include "core/rng.h"

#include <math.h>

uint64_t dlp_hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void dlp_rng_init(dlp_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = dlp_hash64(seed) ^ dlp_hash64(stream * 0xd1342543de82ef95ULL + 1);
    for (int i = 0; i < 4; i++) {
        x += 0x9e3779b97f4a7c15ULL;
        r->s[i] = dlp_hash64(x);
    }
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dlp_rng_u64(dlp_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dlp_rng_uniform(dlp_rng *r) { return (double)(dlp_rng_u64(r) >> 11) * 0x1.0p-53; }
double dlp_rng_range(dlp_rng *r, double lo, double hi) { return lo + (hi - lo) * dlp_rng_uniform(r); }

double dlp_rng_normal(dlp_rng *r) {
    double u1 = dlp_rng_uniform(r), u2 = dlp_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t dlp_rng_below(dlp_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = dlp_rng_u64(r);
    while (x >= lim);
    return x % n;
}
