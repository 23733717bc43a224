/* np_random.c — numpy's legacy RandomState: MT19937 (Matsumoto and Nishimura's reference
 * mt19937ar: init_genrand, init_by_array, genrand_int32), numpy's 53-bit double, its legacy
 * binomial (inversion) and its masked bounded integers. See np_random.h for the sources. */
#include "core/data/np_random.h"

#include <math.h>

enum { MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

static void init_genrand(mt_np_random *r, uint32_t s) {
    r->key[0] = s;
    for (int i = 1; i < MT_NP_MT_N; i++)
        r->key[i] = 1812433253u * (r->key[i - 1] ^ (r->key[i - 1] >> 30)) + (uint32_t)i;
    r->pos = MT_NP_MT_N;
}

void mt_np_random_seed(mt_np_random *r, uint32_t seed) { init_genrand(r, seed); }

void mt_np_random_seed_array(mt_np_random *r, const uint32_t *words, int n_words) {
    uint32_t *mt = r->key;
    init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = MT_NP_MT_N > n_words ? MT_NP_MT_N : n_words; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + words[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_NP_MT_N) {
            mt[0] = mt[MT_NP_MT_N - 1];
            i = 1;
        }
        if (j >= n_words) j = 0;
    }
    for (int k = MT_NP_MT_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_NP_MT_N) {
            mt[0] = mt[MT_NP_MT_N - 1];
            i = 1;
        }
    }
    mt[0] = 0x80000000u;
    r->pos = MT_NP_MT_N;
}

static uint32_t twist(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t y = (a & MT_UPPER) | (b & MT_LOWER);
    return c ^ (y >> 1) ^ ((0u - (y & 1u)) & MT_MATRIX_A);
}

static void regenerate(mt_np_random *r) {
    uint32_t *k = r->key;
    int i = 0;
    for (; i < MT_NP_MT_N - MT_M; i++) k[i] = twist(k[i], k[i + 1], k[i + MT_M]);
    for (; i < MT_NP_MT_N - 1; i++) k[i] = twist(k[i], k[i + 1], k[i + MT_M - MT_NP_MT_N]);
    k[MT_NP_MT_N - 1] = twist(k[MT_NP_MT_N - 1], k[0], k[MT_M - 1]);
    r->pos = 0;
}

uint32_t mt_np_random_u32(mt_np_random *r) {
    if (r->pos >= MT_NP_MT_N) regenerate(r);
    uint32_t y = r->key[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double mt_np_random_double(mt_np_random *r) {
    int32_t a = (int32_t)(mt_np_random_u32(r) >> 5), b = (int32_t)(mt_np_random_u32(r) >> 6);
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

/* legacy_random_binomial_inversion (numpy/random/src/legacy/legacy-distributions.c) */
static int64_t binomial_inversion(mt_np_random *r, int64_t n, double p) {
    const double q = 1.0 - p, qn = exp((double)n * log(q)), np = (double)n * p;
    const double b = np + 10.0 * sqrt(np * q + 1);
    const int64_t bound = (int64_t)((double)n < b ? (double)n : b);
    int64_t x = 0;
    double px = qn, u = mt_np_random_double(r);
    while (u > px) {
        x++;
        if (x > bound) {
            x = 0;
            px = qn;
            u = mt_np_random_double(r);
        } else {
            u -= px;
            px = ((double)(n - x + 1) * p * px) / ((double)x * q);
        }
    }
    return x;
}

mt_status mt_np_random_binomial(mt_np_random *r, int64_t n, double p, int64_t *out) {
    if (!(p >= 0.0 && p <= 1.0) || n < 0)
        return mt_errorf(MT_ERR_CONFIG, "binomial(n = %lld, p = %g): needs n >= 0 and p in [0, 1]",
                         (long long)n, p);
    /* legacy_random_binomial_original: inversion on min(p, 1 - p) when n * it <= 30 */
    if (p <= 0.5 && p * (double)n <= 30.0) {
        *out = binomial_inversion(r, n, p);
        return MT_OK;
    }
    if (p > 0.5 && (1.0 - p) * (double)n <= 30.0) {
        *out = n - binomial_inversion(r, n, 1.0 - p);
        return MT_OK;
    }
    return mt_errorf(MT_ERR_CONFIG, "binomial(n = %lld, p = %g): numpy's BTPE branch "
                     "(n * min(p, 1 - p) > 30) is not implemented", (long long)n, p);
}

mt_status mt_np_random_randint(mt_np_random *r, int64_t low, int64_t high, int64_t *out, int n_out) {
    if (high <= low || (uint64_t)(high - low) > ((uint64_t)1 << 32))
        return mt_errorf(MT_ERR_CONFIG, "randint(%lld, %lld): needs 1 <= high - low <= 2^32",
                         (long long)low, (long long)high);
    const uint64_t rng = (uint64_t)(high - low - 1);
    uint64_t mask = rng;
    for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
    for (int i = 0; i < n_out; i++) {
        uint64_t v = 0;
        if (rng == 0xFFFFFFFFu) v = mt_np_random_u32(r);
        else if (rng > 0)
            while ((v = mt_np_random_u32(r) & mask) > rng) {}
        out[i] = low + (int64_t)v;
    }
    return MT_OK;
}
