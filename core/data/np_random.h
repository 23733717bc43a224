/* np_random.h — numpy's legacy RandomState, the parts Megatron-LM's FIM dataset draws from
 * (megatron/training/datasets/fim_dataset.py: np_rng.binomial(1, p) and
 * np_rng.randint(low, high, size=2)), reproduced to the bit:
 *   the MT19937 generator and its two seedings (numpy/random/_mt19937.pyx _legacy_seeding:
 *     an integer seed -> mt19937_seed, an array of 32-bit words -> mt19937_init_by_array,
 *     the reference Mersenne Twister's init_genrand and init_by_array);
 *   next_double: 53 bits from two outputs, (a >> 5) * 2^26 + (b >> 6), over 2^53;
 *   binomial: legacy_random_binomial of numpy/random/src/legacy/legacy-distributions.c, its
 *     inversion branch (n * min(p, 1 - p) <= 30; Megatron only asks n = 1); the BTPE branch
 *     for larger n is not implemented (MT_ERR_CONFIG);
 *   randint: RandomState.randint's masked rejection (random_bounded_uint64_fill with
 *     use_masked, ranges below 2^32: draw 32 bits, AND with the smallest 2^k - 1 >= range,
 *     redraw while above the range; a range of 0 draws nothing).
 * Rule kept: pure state in a plain struct; no allocation, no global state. */
#ifndef MT_NP_RANDOM_H
#define MT_NP_RANDOM_H

#include <stdint.h>

#include "core/status.h"

#define MT_NP_MT_N 624

typedef struct {
    uint32_t key[MT_NP_MT_N];
    int pos;
} mt_np_random;

/* np.random.RandomState(seed), seed in [0, 2^32). */
void mt_np_random_seed(mt_np_random *r, uint32_t seed);
/* np.random.RandomState(np.array(words, dtype=uint32)), n_words >= 1. */
void mt_np_random_seed_array(mt_np_random *r, const uint32_t *words, int n_words);
/* The next 32-bit output of MT19937. */
uint32_t mt_np_random_u32(mt_np_random *r);
/* RandomState.random_sample(): a double in [0, 1). */
double mt_np_random_double(mt_np_random *r);
/* RandomState.binomial(n, p): p in [0, 1], n >= 0 with n * min(p, 1 - p) <= 30. */
mt_status mt_np_random_binomial(mt_np_random *r, int64_t n, double p, int64_t *out);
/* RandomState.randint(low, high, size=n_out) for high - low in [1, 2^32]: out[i] in
 * [low, high). */
mt_status mt_np_random_randint(mt_np_random *r, int64_t low, int64_t high, int64_t *out, int n_out);

#endif
