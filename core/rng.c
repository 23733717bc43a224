/* rng.c — counter-based RNG (splitmix64 mixing). Pure functions, no state. */
#include "core/rng.h"

#include <math.h>

uint64_t mt_rng_u64(uint64_t seed, uint64_t stream, uint64_t index) {
    return mt_rng_mix64(mt_rng_mix64(mt_rng_mix64(seed) ^ stream) ^ index);
}

double mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    /* 53 random bits, shifted by half a step so the result is in (0, 1) */
    return ((double)(mt_rng_u64(seed, stream, index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    double u1 = mt_rng_uniform(seed, stream, 2 * index);
    double u2 = mt_rng_uniform(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t mt_hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}
