/* test_blended_dataset.c — blending, the index cache, and resuming.
 * Blends: "w p w p" parsing and its errors; Megatron's build_blending_indices on a hand-worked
 * case and proportions within 1% of the weights over 10k samples; a blended stream over two
 * datasets whose token values say which dataset and position they come from: 10k samples
 * follow the weights within 1%, each sample is its dataset's sample, the valid split of a
 * blend stays inside every dataset's valid documents, a missing prefix names its entry.
 * Cache: the first open saves, the second loads (same samples), another seed / changed data
 * (size, or only the mtime) build a new file, a corrupt or truncated file is rebuilt (same
 * samples, never a crash), an unwritable folder still works (UNSAVED), "" puts the cache
 * beside the data; the blending index is cached too.
 * Resume: sample s is the same whatever was read before and after a reopen from the cache. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/data/blended_dataset.h"
#include "core/data/gpt_dataset.h"
#include "core/data/index_cache.h"
#include "core/data/indexed.h"
#include "test/test.h"
#include "test/test_files.h"
#include "test/unit/dataset_files.h"

static char g_dir[] = "/tmp/mt_test_blend_XXXXXX";

/* n_docs documents of lengths 1..max_len at g_dir/name; token = base + global position. */
static int make_dataset(const char *name, int n_docs, int max_len, int32_t base,
                        uint64_t seed) {
    return test_write_dataset(test_path(g_dir, name), n_docs, max_len, base, seed);
}

static void test_parse(void) {
    double w[8];
    char *p[8];
    int n;
    char b1[] = "data/a_text_document";
    CHECK(mt_blend_parse(b1, w, p, 8, &n) == MT_OK && n == 1 && w[0] == 1.0 &&
          strcmp(p[0], "data/a_text_document") == 0);
    char b2[] = " 0.3 A\t0.7   B ";
    CHECK(mt_blend_parse(b2, w, p, 8, &n) == MT_OK && n == 2 && strcmp(p[1], "B") == 0);
    CHECK_NEAR(w[0], 0.3, 1e-12, 0);
    CHECK_NEAR(w[1], 0.7, 1e-12, 0);
    char b3[] = "30 A 50 B 20 C";
    CHECK(mt_blend_parse(b3, w, p, 8, &n) == MT_OK && n == 3);
    CHECK_NEAR(w[2], 0.2, 1e-12, 0);
    /* Megatron's --data-path A B C: no weights, weighted by size when opened (-1 until then) */
    char b4[] = "A B C";
    CHECK(mt_blend_parse(b4, w, p, 8, &n) == MT_OK && n == 3 && w[0] == -1.0 && w[2] == -1.0 &&
          strcmp(p[2], "C") == 0);
    const char *bad[] = {"", "0.3 A 0.7", "x A 1 B", "-1 A 2 B", "0 A 0 B", "nan A 1 B", "A 1 B"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char b[64];
        snprintf(b, sizeof b, "%s", bad[i]);
        CHECKF(mt_blend_parse(b, w, p, 8, &n) == MT_ERR_CONFIG, "accepted '%s'", bad[i]);
        CHECK_STR_CONTAINS(mt_last_error(), "data.path");
    }
}

static void test_blending_indices(void) {
    /* Worked by hand from Megatron's rule: error_i = w_i * max(s, 1) - count_i. */
    double w[2] = {0.3, 0.7};
    int16_t di[5];
    int64_t dsi[5];
    CHECK(mt_build_blending_indices(w, 2, 5, di, dsi) == MT_OK);
    static const int16_t want_di[5] = {1, 0, 1, 1, 0};
    static const int64_t want_dsi[5] = {0, 0, 1, 2, 1};
    CHECK(memcmp(di, want_di, sizeof di) == 0);
    CHECK(memcmp(dsi, want_dsi, sizeof dsi) == 0);
    /* Proportions over 10k samples, several weight sets. */
    double sets[3][3] = {{0.3, 0.7, 0}, {0.2, 0.5, 0.3}, {0.01, 0.98, 0.01}};
    int ns[3] = {2, 3, 3};
    int16_t *d = malloc(10000 * sizeof *d);
    int64_t *s = malloc(10000 * sizeof *s);
    for (int k = 0; k < 3; k++) {
        CHECK(mt_build_blending_indices(sets[k], ns[k], 10000, d, s) == MT_OK);
        int64_t count[3] = {0, 0, 0};
        int n_bad_seq = 0;
        for (int i = 0; i < 10000; i++) {
            n_bad_seq += s[i] != count[d[i]];
            count[d[i]]++;
        }
        CHECK(n_bad_seq == 0); /* each dataset's samples are taken in order 0, 1, 2, ... */
        for (int j = 0; j < ns[k]; j++) {
            CHECKF(fabs((double)count[j] / 10000 - sets[k][j]) < 0.01, "set %d dataset %d: %lld",
                   k, j, (long long)count[j]);
            CHECKF(llabs(count[j] - (int64_t)(sets[k][j] * 10000 + 0.5)) <= 1,
                   "set %d dataset %d: %lld samples", k, j, (long long)count[j]);
        }
    }
    free(d);
    free(s);
}

static int same_samples(const mt_blended_dataset *a, const mt_blended_dataset *b, int T,
                        int64_t from, int64_t to) {
    int32_t *x = malloc((size_t)(T + 1) * 4), *y = malloc((size_t)(T + 1) * 4);
    int same = 1;
    for (int64_t s = from; s < to && same; s++) {
        same = mt_blended_dataset_get(a, s, x) == MT_OK && mt_blended_dataset_get(b, s, y) == MT_OK &&
               memcmp(x, y, (size_t)(T + 1) * 4) == 0;
    }
    free(x);
    free(y);
    return same;
}

static void test_blend_stream(void) {
    const int T = 16;
    if (!make_dataset("A", 300, 50, 0, 1) || !make_dataset("B", 500, 40, 1000000, 2)) {
        CHECKF(0, "datasets: %s", mt_last_error());
        return;
    }
    char path[1200];
    snprintf(path, sizeof path, "0.3 %s 0.7 %s", test_path(g_dir, "A"), test_path(g_dir, "B"));
    mt_blended_dataset *d = NULL;
    mt_status st = mt_blended_dataset_open(&d, path, "969,30,1", MT_SPLIT_TRAIN, T, 1234, 10000, NULL);
    CHECKF(st == MT_OK, "open blend: %s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(mt_blended_dataset_len(d) == 10000);
    CHECK(mt_blended_dataset_n_datasets(d) == 2);
    CHECK_NEAR(mt_blended_dataset_weight(d, 1), 0.7, 1e-12, 0);
    int32_t tok[17], ref[17];
    int64_t count[2] = {0, 0};
    int n_bad = 0, n_wrong_source = 0;
    for (int64_t s = 0; s < 10000; s++) {
        int ds;
        int64_t j;
        mt_blended_dataset_source(d, s, &ds, &j);
        count[ds]++;
        if (mt_blended_dataset_get(d, s, tok) != MT_OK) {
            n_bad++;
            continue;
        }
        mt_gpt_dataset_get(mt_blended_dataset_component(d, ds), j, ref);
        n_bad += memcmp(tok, ref, sizeof tok) != 0;
        for (int i = 0; i <= T; i++) n_wrong_source += (tok[i] >= 1000000) != (ds == 1);
    }
    CHECK(n_bad == 0);
    CHECK(n_wrong_source == 0);
    CHECKF(fabs(count[0] / 10000.0 - 0.3) < 0.01 && fabs(count[1] / 10000.0 - 0.7) < 0.01,
           "blend proportions %lld / %lld", (long long)count[0], (long long)count[1]);
    /* each component was built with Megatron's ceil(ceil(N w) * 1.005) samples or more */
    CHECK(mt_gpt_dataset_len(mt_blended_dataset_component(d, 0)) >= 3015);
    CHECK(mt_gpt_dataset_len(mt_blended_dataset_component(d, 1)) >= 7035);

    /* Resume: reopening and reading from sample 5000 gives what the first stream gives. */
    mt_blended_dataset *d2 = NULL;
    CHECK(mt_blended_dataset_open(&d2, path, "969,30,1", MT_SPLIT_TRAIN, T, 1234, 10000, NULL) == MT_OK);
    if (d2) {
        CHECK(same_samples(d, d2, T, 5000, 5200));
        CHECK(same_samples(d, d2, T, -3, 3)); /* wraps like mt_gpt_dataset */
        mt_blended_dataset_close(d2);
    }
    mt_blended_dataset_close(d);

    /* The valid split of a blend: every token from the valid documents of its dataset. */
    mt_indexed a, b;
    CHECK(mt_indexed_open(&a, test_path(g_dir, "A")) == MT_OK);
    CHECK(mt_indexed_open(&b, test_path(g_dir, "B")) == MT_OK);
    int64_t ba[4], bb[4];
    mt_gpt_split_bounds("969,30,1", 300, ba);
    mt_gpt_split_bounds("969,30,1", 500, bb);
    /* token ranges of the valid documents (token = base + position) */
    int64_t lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        mt_indexed *x = k ? &b : &a;
        int64_t *bd = k ? bb : ba, pos = 0;
        for (int64_t i = 0; i < mt_indexed_n_sequences(x); i++) {
            if (i == bd[1]) lo[k] = pos;
            pos += mt_indexed_sequence_length(x, i);
            if (i + 1 == bd[2]) hi[k] = pos;
        }
    }
    mt_indexed_close(&a);
    mt_indexed_close(&b);
    mt_blended_dataset *v = NULL;
    st = mt_blended_dataset_open(&v, path, "969,30,1", MT_SPLIT_VALID, T, 1234, 640, NULL);
    CHECKF(st == MT_OK, "valid blend: %s", mt_last_error());
    if (v) {
        int n_out = 0;
        for (int64_t s = 0; s < mt_blended_dataset_len(v); s++) {
            mt_blended_dataset_get(v, s, tok);
            for (int i = 0; i <= T; i++) {
                int k = tok[i] >= 1000000;
                int64_t t = tok[i] - (k ? 1000000 : 0);
                n_out += t < lo[k] || t >= hi[k];
            }
        }
        CHECKF(n_out == 0, "%d valid tokens from outside the valid documents", n_out);
        mt_blended_dataset_close(v);
    }

    /* A missing prefix names its blend entry and file. */
    snprintf(path, sizeof path, "0.5 %s 0.5 %s", test_path(g_dir, "A"), test_path(g_dir, "nope"));
    CHECK(mt_blended_dataset_open(&v, path, "969,30,1", MT_SPLIT_TRAIN, T, 1, 100, NULL) == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "blend entry 2 of 2");
    CHECK_STR_CONTAINS(mt_last_error(), "nope.idx");
    CHECK(v == NULL);

    /* One prefix: exactly the GPT dataset's stream. */
    mt_indexed ia;
    mt_gpt_dataset *g = NULL;
    CHECK(mt_indexed_open(&ia, test_path(g_dir, "A")) == MT_OK);
    CHECK(mt_gpt_dataset_open(&g, &ia, "969,30,1", MT_SPLIT_TRAIN, T, 77, 500) == MT_OK);
    CHECK(mt_blended_dataset_open(&v, test_path(g_dir, "A"), "969,30,1", MT_SPLIT_TRAIN, T, 77, 500, NULL) == MT_OK);
    if (g && v) {
        CHECK(mt_blended_dataset_len(v) == mt_gpt_dataset_len(g));
        int n_diff = 0;
        for (int64_t s = 0; s < mt_gpt_dataset_len(g); s++) {
            mt_gpt_dataset_get(g, s, ref);
            mt_blended_dataset_get(v, s, tok);
            n_diff += memcmp(tok, ref, sizeof tok) != 0;
        }
        CHECK(n_diff == 0);
    }
    mt_blended_dataset_close(v);
    mt_gpt_dataset_close(g);
    mt_indexed_close(&ia);
}

static int gpt_same(const mt_gpt_dataset *a, const mt_gpt_dataset *b, int T) {
    if (mt_gpt_dataset_len(a) != mt_gpt_dataset_len(b)) return 0;
    int32_t x[65], y[65];
    for (int64_t s = 0; s < mt_gpt_dataset_len(a); s++) {
        if (mt_gpt_dataset_get(a, s, x) != MT_OK || mt_gpt_dataset_get(b, s, y) != MT_OK ||
            memcmp(x, y, (size_t)(T + 1) * 4) != 0) {
            return 0;
        }
    }
    return 1;
}

static mt_index_cache_state open_state(mt_indexed *ds, const char *cache, uint64_t seed,
                                       mt_gpt_dataset **out, char *file, size_t n_file) {
    mt_status st = mt_gpt_dataset_open_cached(out, ds, "969,30,1", MT_SPLIT_TRAIN, 32, seed, 2000,
                                              cache);
    CHECKF(st == MT_OK, "open cached: %s", mt_last_error());
    if (st != MT_OK) return (mt_index_cache_state)-1;
    mt_gpt_dataset_info info;
    mt_gpt_dataset_get_info(*out, &info);
    if (file) snprintf(file, n_file, "%s", info.cache_file);
    return info.cache_state;
}

static void flip_byte(const char *path, long at) {
    int fd = open(path, O_RDWR);
    if (fd < 0) return;
    unsigned char c;
    if (pread(fd, &c, 1, at) == 1) {
        c ^= 0x5a;
        if (pwrite(fd, &c, 1, at) != 1) perror("pwrite");
    }
    close(fd);
}

static void test_cache(void) {
    if (!make_dataset("C", 400, 60, 0, 3)) {
        CHECKF(0, "dataset: %s", mt_last_error());
        return;
    }
    char cache[600], file[1024], file2[1024];
    snprintf(cache, sizeof cache, "%s/cache/nested", g_dir);
    mt_indexed ds;
    CHECK(mt_indexed_open(&ds, test_path(g_dir, "C")) == MT_OK);
    mt_gpt_dataset *ref = NULL, *d = NULL;
    CHECK(mt_gpt_dataset_open(&ref, &ds, "969,30,1", MT_SPLIT_TRAIN, 32, 5, 2000) == MT_OK);
    mt_gpt_dataset_info info;
    mt_gpt_dataset_get_info(ref, &info);
    CHECK(info.cache_state == MT_INDEX_CACHE_OFF && info.cache_file[0] == 0);

    /* first open saves, the second loads; both equal the uncached stream */
    CHECK(open_state(&ds, cache, 5, &d, file, sizeof file) == MT_INDEX_CACHE_SAVED);
    CHECK(gpt_same(d, ref, 32));
    mt_gpt_dataset_close(d);
    struct stat sb;
    CHECKF(stat(file, &sb) == 0 && sb.st_size > 0, "cache file %s", file);
    CHECK(strstr(file, cache) == file && strstr(file, "GPTDataset-train"));
    CHECK(open_state(&ds, cache, 5, &d, NULL, 0) == MT_INDEX_CACHE_LOADED);
    CHECK(gpt_same(d, ref, 32));
    /* resume from the cache: sample 777 is sample 777 */
    int32_t x[33], y[33];
    CHECK(mt_gpt_dataset_get(d, 777, x) == MT_OK && mt_gpt_dataset_get(ref, 777, y) == MT_OK &&
          memcmp(x, y, sizeof x) == 0);
    mt_gpt_dataset_close(d);

    /* another seed: another file */
    CHECK(open_state(&ds, cache, 6, &d, file2, sizeof file2) == MT_INDEX_CACHE_SAVED);
    CHECK(strcmp(file, file2) != 0);
    mt_gpt_dataset_close(d);

    /* corrupt: a flipped byte in the arrays, in the header, a truncation, garbage */
    long offsets[2] = {(long)sb.st_size - 100, 20};
    for (int k = 0; k < 2; k++) {
        flip_byte(file, offsets[k]);
        CHECK(open_state(&ds, cache, 5, &d, NULL, 0) == MT_INDEX_CACHE_REBUILT);
        mt_gpt_dataset_get_info(d, &info);
        CHECKF(info.cache_note[0] != 0, "no note for a corrupt cache (case %d)", k);
        CHECK(gpt_same(d, ref, 32));
        mt_gpt_dataset_close(d);
        CHECK(open_state(&ds, cache, 5, &d, NULL, 0) == MT_INDEX_CACHE_LOADED); /* replaced */
        mt_gpt_dataset_close(d);
    }
    CHECK(truncate(file, sb.st_size / 2) == 0);
    CHECK(open_state(&ds, cache, 5, &d, NULL, 0) == MT_INDEX_CACHE_REBUILT);
    mt_gpt_dataset_get_info(d, &info);
    CHECK_STR_CONTAINS(info.cache_note, "truncated");
    CHECK(gpt_same(d, ref, 32));
    mt_gpt_dataset_close(d);
    FILE *f = fopen(file, "wb");
    if (f) {
        fputs("garbage", f);
        fclose(f);
    }
    CHECK(open_state(&ds, cache, 5, &d, NULL, 0) == MT_INDEX_CACHE_REBUILT);
    CHECK(gpt_same(d, ref, 32));
    mt_gpt_dataset_close(d);

    /* changed data: the same prefix rewritten (other size) -> another file */
    mt_gpt_dataset_close(ref);
    mt_indexed_close(&ds);
    CHECK(make_dataset("C", 420, 60, 0, 3));
    CHECK(mt_indexed_open(&ds, test_path(g_dir, "C")) == MT_OK);
    CHECK(open_state(&ds, cache, 5, &d, file2, sizeof file2) == MT_INDEX_CACHE_SAVED);
    CHECK(strcmp(file, file2) != 0);
    mt_gpt_dataset_close(d);
    /* only the modification time changes -> another file too */
    char idx[600];
    snprintf(idx, sizeof idx, "%s.idx", test_path(g_dir, "C"));
    struct timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, idx, times, 0) == 0);
    CHECK(open_state(&ds, cache, 5, &d, file, sizeof file) == MT_INDEX_CACHE_SAVED);
    CHECK(strcmp(file, file2) != 0);
    mt_gpt_dataset_close(d);

    /* "" = beside the data: <dir>/cache/GPTDataset_indices */
    CHECK(open_state(&ds, "", 5, &d, file, sizeof file) == MT_INDEX_CACHE_SAVED);
    char beside[700];
    snprintf(beside, sizeof beside, "%s/cache/GPTDataset_indices/", g_dir);
    CHECKF(strstr(file, beside) == file, "default cache file %s", file);
    mt_gpt_dataset_close(d);
    CHECK(open_state(&ds, "", 5, &d, NULL, 0) == MT_INDEX_CACHE_LOADED);
    mt_gpt_dataset_close(d);

    /* an unusable folder (a regular file in the way): works, not saved, says why */
    char blocked[700];
    snprintf(blocked, sizeof blocked, "%s/blocker", g_dir);
    f = fopen(blocked, "wb");
    if (f) fclose(f);
    snprintf(blocked, sizeof blocked, "%s/blocker/sub", g_dir);
    CHECK(open_state(&ds, blocked, 5, &d, NULL, 0) == MT_INDEX_CACHE_UNSAVED);
    mt_gpt_dataset_get_info(d, &info);
    CHECK_STR_CONTAINS(info.cache_note, "blocker");
    mt_gpt_dataset_close(d);
    mt_indexed_close(&ds);

    /* the blending index is cached as well */
    char path[1200];
    snprintf(path, sizeof path, "1 %s 3 %s", test_path(g_dir, "A"), test_path(g_dir, "C"));
    mt_blended_dataset *b1 = NULL, *b2 = NULL, *b0 = NULL;
    CHECK(mt_blended_dataset_open(&b0, path, "969,30,1", MT_SPLIT_TRAIN, 32, 9, 3000, NULL) == MT_OK);
    CHECK(mt_blended_dataset_open(&b1, path, "969,30,1", MT_SPLIT_TRAIN, 32, 9, 3000, cache) == MT_OK);
    CHECK(b1 && mt_blended_dataset_cache_state(b1) == MT_INDEX_CACHE_SAVED);
    CHECK(mt_blended_dataset_open(&b2, path, "969,30,1", MT_SPLIT_TRAIN, 32, 9, 3000, cache) == MT_OK);
    CHECK(b2 && mt_blended_dataset_cache_state(b2) == MT_INDEX_CACHE_LOADED);
    if (b0 && b1 && b2) {
        CHECK(same_samples(b0, b1, 32, 0, 3000));
        CHECK(same_samples(b0, b2, 32, 0, 3000));
        CHECK(mt_gpt_dataset_len(mt_blended_dataset_component(b2, 0)) > 0);
    }
    mt_blended_dataset_close(b0);
    mt_blended_dataset_close(b1);
    mt_blended_dataset_close(b2);
}

int main(void) {
    if (!test_tmpdir_make(g_dir)) return 1;
    test_parse();
    test_blending_indices();
    test_blend_stream();
    test_cache();
    test_tmpdir_remove(g_dir);
    TEST_MAIN_END();
}
