/* test_rng.c — the counter-based RNG: mt_rng_normal_fill gives exactly the bits of
 * (float)(scale * mt_rng_normal(...)) element by element (tolerance: none; the weight init
 * relies on it, and a saved run's initial weights must not change), for several streams,
 * scales (the init's std and its output-layer std), offsets that do not start a block, and
 * lengths that end mid-block; any split of a range into pieces gives the same values (the
 * init's thread split). Also a sanity check of the distribution (mean ~0, variance ~1).
 * `test_rng --count N` checks N draws (a long soak; the default is 4M). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "test/test.h"

static size_t mismatches(const float *got, uint64_t seed, uint64_t stream, uint64_t i0, size_t n, double scale,
                         size_t *first_bad) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float want = (float)(scale * mt_rng_normal(seed, stream, i0 + i));
        if (memcmp(&want, &got[i], sizeof want) != 0) {
            if (!bad) *first_bad = i;
            bad++;
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    size_t count = (size_t)4 << 20;
    if (argc == 3 && strcmp(argv[1], "--count") == 0) count = (size_t)strtoull(argv[2], NULL, 10);
    float *buf = malloc(count * sizeof *buf), *pieces = malloc(count * sizeof *pieces);
    if (!buf || !pieces) return 1;

    /* bits: a long range at one (stream, scale), then short odd ranges at others */
    const uint64_t seed = 1234, stream = mt_hash_str("qkv_w") ^ (3 * 0x9e3779b97f4a7c15ULL);
    const double scale = 0.02;
    mt_rng_normal_fill(buf, count, seed, stream, 0, scale);
    size_t first = 0, bad = mismatches(buf, seed, stream, 0, count, scale, &first);
    CHECKF(bad == 0, "%zu of %zu draws differ from mt_rng_normal (first at %zu)", bad, count, first);

    const double scales[] = {1.0, 0.02 / 4.898979485566356, 0.0, -3.5, 1e-30};
    const uint64_t offsets[] = {0, 1, 511, 513, (uint64_t)1 << 40, UINT64_MAX / 4};
    const size_t lengths[] = {1, 7, 512, 1000, 4099};
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++)
        for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++)
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
                const uint64_t st = mt_hash_str("fc_w") + si * 977 + oi;
                mt_rng_normal_fill(buf, lengths[li], 42 + oi, st, offsets[oi], scales[si]);
                bad = mismatches(buf, 42 + oi, st, offsets[oi], lengths[li], scales[si], &first);
                CHECKF(bad == 0, "scale %g offset %llu length %zu: %zu draws differ (first at %zu)", scales[si],
                       (unsigned long long)offsets[oi], lengths[li], bad, first);
            }

    /* any split of the range gives the same values (threads draw pieces of a tensor) */
    const size_t n_split = count < 100000 ? count : 100000;
    mt_rng_normal_fill(buf, n_split, seed, stream, 17, scale);
    for (size_t lo = 0; lo < n_split;) {
        size_t len = 1 + (lo * 2654435761u) % 3001;
        if (len > n_split - lo) len = n_split - lo;
        mt_rng_normal_fill(pieces + lo, len, seed, stream, 17 + lo, scale);
        lo += len;
    }
    CHECK(memcmp(buf, pieces, n_split * sizeof *buf) == 0);

    /* the distribution: over 4M draws the mean is within ~5 sigma (5/sqrt(n) = 0.0025) of 0 and
     * the variance within 0.01 of 1 */
    mt_rng_normal_fill(buf, count, 7, 11, 0, 1.0);
    double s1 = 0, s2 = 0;
    for (size_t i = 0; i < count; i++) {
        s1 += buf[i];
        s2 += (double)buf[i] * buf[i];
    }
    const double mean = s1 / (double)count, var = s2 / (double)count - mean * mean;
    CHECK_NEAR(mean, 0.0, 5.0 / sqrt((double)count), 0);
    CHECK_NEAR(var, 1.0, 0.01, 0);
    free(buf);
    free(pieces);
    TEST_MAIN_END();
}
