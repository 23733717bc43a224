/* rng_normal_fill.c — many normal draws at once, with exactly the bits of mt_rng_normal.
 *
 * mt_rng_normal is Box-Muller with libm's log and cos per element (~60 ns): the weight init of
 * a 125M model spends seconds there. Here a block of draws goes through loops the compiler
 * vectorises: the same two counter draws u1, u2 (identical integer and IEEE steps), then log(u1)
 * and cos(2 pi u2) from short polynomials accurate to a few double ulps, then the same
 * sqrt / multiply / round-to-float steps. Rule that keeps the bits: libm's value and ours differ
 * by far less than 2^-36 relative (both are within a few ulps, 2^-52, of the exact value), and
 * rounding to float is monotonic, so when d * (1 - 2^-36) and d * (1 + 2^-36) round to the same
 * float, libm's value rounds to it too. Any draw where they do not (about 1 in 2000: the value
 * lies within 2^-36 of a float rounding boundary), or where cos is tiny, is recomputed with
 * mt_rng_normal itself. test/unit/test_rng.c checks millions of draws bit for bit.
 * Built with -fno-math-errno (Makefile): sqrt's argument, -2 ln u1, is never negative, and
 * without errno the compiler vectorises the square root (the same correctly rounded result). */
#include <math.h>
#include <string.h>

#include "core/rng.h"

#define FILL_BLOCK 512

/* k[0] z^(n-1) + k[1] z^(n-2) + ... + k[n-1], by Horner's rule in that order (the constant trip
 * count unrolls; p * z - c and p * z + (-c) are the same IEEE step) */
static inline double horner(double z, const double *k, int n) {
    double p = k[0];
    for (int i = 1; i < n; i++) p = p * z + k[i];
    return p;
}

/* the atanh series' coefficients 1/17, 1/15, ..., 1 */
static const double k_atanh[] = {1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0};
/* cos r = sum (-1)^i r^2i / (2i)! from i = 7 down; sin r / r likewise from 1/15! */
static const double k_cos[] = {-1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0,
                               -1.0 / 720.0,          1.0 / 24.0,        -0.5,              1.0};
static const double k_sin[] = {-1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                               -1.0 / 5040.0,           1.0 / 120.0,        -1.0 / 6.0};

/* ln(u) for u in (0, 1): u = 2^k z with z in [sqrt(1/2), sqrt(2)), ln z = 2 atanh(s),
 * s = (z - 1) / (z + 1), |s| <= 0.1716: the atanh series to s^17 leaves < 1e-15 relative. */
static inline double log_unit(double u) {
    uint64_t ix;
    memcpy(&ix, &u, 8);
    const uint64_t off = 0x3fe6a09e667f3bcdULL; /* the bits of sqrt(1/2) */
    const uint64_t tmp = ix - off;
    const int64_t k = (int64_t)tmp >> 52; /* arithmetic shift: the exponent relative to z's */
    const uint64_t iz = ix - (tmp & (0xfffULL << 52));
    double z;
    memcpy(&z, &iz, 8);
    const double f = z - 1.0; /* exact: z is within a factor 2 of 1 */
    const double s = f / (2.0 + f), w = s * s;
    const double p = horner(w, k_atanh, 9);
    return (double)k * 0x1.62e42fefa39efp-1 + 2.0 * s * p; /* ln 2 */
}

/* cos(x) for x in [0, 2 pi): x = k pi/2 + r with |r| <= pi/4, pi/2 split in three parts
 * (Cody-Waite: the first two have 33 bits, so k * part is exact for k <= 4), then the Taylor
 * series of sin r / cos r to r^15 / r^14 (< 1e-15 relative left), the quadrant picking one. */
static inline double cos_turn(double x) {
    const double kd = (x * 0x1.45f306dc9c883p-1 + 0x1.8p52) - 0x1.8p52; /* round(x * 2/pi) */
    const double r = ((x - kd * 0x1.921fb54400000p+0) - kd * 0x1.0b4611a600000p-34) - kd * 0x1.3198a2e037073p-69;
    const double z = r * r;
    const double c = horner(z, k_cos, 8);
    const double s = (horner(z, k_sin, 7) * z) * r + r;
    const int q = (int)kd & 3; /* cos(k pi/2 + r): cos r, -sin r, -cos r, sin r */
    const double v = (q & 1) ? s : c;
    return ((q + 1) & 2) ? -v : v;
}

void mt_rng_normal_fill(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t index0, double scale) {
    const uint64_t key = mt_rng_mix64(mt_rng_mix64(seed) ^ stream); /* mt_rng_u64's first two steps */
    const double rel = 0x1p-36;
    for (size_t b0 = 0; b0 < n; b0 += FILL_BLOCK) {
        const size_t nb = n - b0 < FILL_BLOCK ? n - b0 : FILL_BLOCK;
        double d[FILL_BLOCK];
        unsigned char exact[FILL_BLOCK];
        for (size_t i = 0; i < nb; i++) {
            const uint64_t j = 2 * (index0 + b0 + i);
            const double u1 = ((double)(mt_rng_mix64(key ^ j) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
            const double u2 = ((double)(mt_rng_mix64(key ^ (j + 1)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
            const double c = cos_turn(6.283185307179586 * u2);
            const double v = scale * (sqrt(-2.0 * log_unit(u1)) * c);
            const float f = (float)v, lo = (float)(v - fabs(v) * rel), hi = (float)(v + fabs(v) * rel);
            d[i] = v;
            exact[i] = (lo == f) & (hi == f) & (fabs(c) >= 0x1p-20);
        }
        for (size_t i = 0; i < nb; i++) out[b0 + i] = (float)d[i];
        for (size_t i = 0; i < nb; i++)
            if (!exact[i]) out[b0 + i] = (float)(scale * mt_rng_normal(seed, stream, index0 + b0 + i));
    }
}
