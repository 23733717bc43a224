/* rng.h — counter-based random numbers: every value is a pure function of (seed, stream,
 * index), so a shard of a tensor (tp, pp, any layout) draws exactly the values the full
 * tensor would have at those positions. Used for weight init and data shuffling. */
#ifndef MT_RNG_H
#define MT_RNG_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's finaliser: the one mixing step every draw below is built from */
static inline uint64_t mt_rng_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 64-bit mix of (seed, stream, index) (splitmix64 finaliser over a combined counter). */
uint64_t mt_rng_u64(uint64_t seed, uint64_t stream, uint64_t index);
/* Uniform in (0, 1), never 0 or 1. */
double mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
/* Standard normal (Box-Muller on two counter draws). */
double mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);
/* out[i] = (float)(scale * mt_rng_normal(seed, stream, index0 + i)) for i < n, bit for bit, a
 * few times faster (rng_normal_fill.c: vectorisable log / cos, libm where rounding is close). */
void mt_rng_normal_fill(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t index0, double scale);
/* Stable 64-bit hash of a string (FNV-1a), to derive per-tensor streams from names. */
uint64_t mt_hash_str(const char *s);

#endif
