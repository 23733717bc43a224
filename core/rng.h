/* rng.h — counter-based random numbers: every value is a pure function of (seed, stream,
 * index), so a shard of a tensor (tp, pp, any layout) draws exactly the values the full
 * tensor would have at those positions. Used for weight init and data shuffling. */
#ifndef MT_RNG_H
#define MT_RNG_H

#include <stdint.h>

/* 64-bit mix of (seed, stream, index) (splitmix64 finaliser over a combined counter). */
uint64_t mt_rng_u64(uint64_t seed, uint64_t stream, uint64_t index);
/* Uniform in (0, 1), never 0 or 1. */
double mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
/* Standard normal (Box-Muller on two counter draws). */
double mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);
/* Stable 64-bit hash of a string (FNV-1a), to derive per-tensor streams from names. */
uint64_t mt_hash_str(const char *s);

#endif
