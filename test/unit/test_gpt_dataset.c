/* test_gpt_dataset.c — GPT sampling. The test dataset stores token value = global token
 * position (int32), so a sample's tokens say exactly where they came from. Checks: split
 * bounds equal Megatron's get_train_valid_test_split_ (values from Python); every token of
 * the split is used once per epoch; each epoch's block of samples covers the whole split;
 * samples are consecutive runs of the stream and never leave their split; same seed => same
 * order, another seed => another order; sample numbers wrap; empty splits are clear errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/gpt_dataset.h"
#include "core/data/indexed.h"
#include "test/test.h"
#include "test/test_files.h"
#include "test/unit/dataset_files.h"

static char g_dir[] = "/tmp/mt_test_gpt_XXXXXX";

/* n_docs documents of pseudo-random lengths 1..max_len at g_dir/name, opened into ds; token
 * value = global position. */
static int make_dataset(const char *name, int n_docs, int max_len, mt_indexed *ds) {
    const char *prefix = test_path(g_dir, name);
    return test_write_dataset(prefix, n_docs, max_len, 0, 12345) && mt_indexed_open(ds, prefix) == MT_OK;
}

static void test_split_bounds(void) {
    struct { const char *split; int64_t n; int64_t want[4]; } cases[] = {
        /* Expected values computed with Megatron's get_train_valid_test_split_ in Python. */
        {"969,30,1", 1000, {0, 969, 999, 1000}},
        {"969,30,1", 10, {0, 10, 10, 10}},
        {"969,30,1", 1189, {0, 1152, 1188, 1189}},
        {"1,1,1", 2, {0, 0, 1, 2}},
        {"1,1", 3, {0, 1, 3, 3}},
        {"100", 7, {0, 7, 7, 7}},
        {"1,1,2", 2, {0, 1, 1, 2}},     /* round-half-to-even: 0.5 -> 0 */
        {"98,1,1", 200, {0, 196, 198, 200}},
        {"2/1/1", 6, {0, 2, 4, 6}},
        {"1,1,1,5", 9, {0, 3, 6, 9}},   /* weights after the third are ignored */
        {" 969, 30, 1", 1000, {0, 969, 999, 1000}},
        {"0.5,0.25,0.25", 4, {0, 2, 3, 4}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t b[4];
        mt_status st = mt_gpt_split_bounds(cases[c].split, cases[c].n, b);
        CHECKF(st == MT_OK && memcmp(b, cases[c].want, sizeof b) == 0,
               "split '%s' n=%lld: got %lld %lld %lld %lld", cases[c].split,
               (long long)cases[c].n, (long long)b[0], (long long)b[1], (long long)b[2],
               (long long)b[3]);
    }
    const char *bad[] = {"", "a,b,c", "969,30,", "-1,2,3", "0,0,0", "1;2", "nan,1", "1,,1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t b[4];
        CHECKF(mt_gpt_split_bounds(bad[i], 100, b) == MT_ERR_CONFIG, "accepted split '%s'", bad[i]);
        CHECK_STR_CONTAINS(mt_last_error(), bad[i]);
    }
}

/* Reads every sample; checks each is a consecutive run of the split's positions; counts the
 * first seq_length tokens of each (the last one is shared with the stream's next sample). */
static void check_coverage(const mt_gpt_dataset *d, int seq_length, int32_t lo, int32_t hi,
                           const char *what) {
    mt_gpt_dataset_info info;
    mt_gpt_dataset_get_info(d, &info);
    int64_t T = info.n_tokens_per_epoch, E = info.n_epochs, n = mt_gpt_dataset_len(d);
    CHECKF(T == hi - lo, "%s: tokens per epoch %lld, split holds %d", what, (long long)T, hi - lo);
    CHECK(n == info.n_samples);
    CHECK(n == (E * T - 1) / seq_length);
    int32_t *count = calloc((size_t)(hi - lo), sizeof *count);
    int32_t *tok = malloc((size_t)(seq_length + 1) * sizeof *tok);
    int n_outside = 0, n_status = 0;
    /* Samples starting in epoch 0; when the stream holds all of them, they cover the split. */
    int64_t block_end = (T + seq_length - 1) / seq_length;
    int check_block0 = block_end <= n;
    int32_t *count0 = calloc((size_t)(hi - lo), sizeof *count0);
    for (int64_t s = 0; s < n; s++) {
        if (mt_gpt_dataset_get(d, s, tok) != MT_OK) {
            n_status++;
            continue;
        }
        for (int i = 0; i <= seq_length; i++) {
            if (tok[i] < lo || tok[i] >= hi) {
                n_outside++;
                continue;
            }
            if (i < seq_length) {
                count[tok[i] - lo]++;
                if (s < block_end) count0[tok[i] - lo]++;
            }
        }
    }
    CHECKF(n_status == 0, "%s: %d samples failed: %s", what, n_status, mt_last_error());
    CHECKF(n_outside == 0, "%s: %d tokens from outside the split", what, n_outside);
    /* Every token is used E times, except the tail of the last epoch that no full sample
     * reaches (E * T - n * seq_length tokens, fewer than one sample). */
    int64_t n_short = 0, n_wrong = 0, total = 0;
    for (int64_t i = 0; i < T; i++) {
        total += count[i];
        if (count[i] == E - 1) n_short++;
        else if (count[i] != E) n_wrong++;
        if (check_block0 && count0[i] < 1) n_wrong++;
    }
    CHECKF(n_wrong == 0, "%s: %lld tokens used the wrong number of times", what, (long long)n_wrong);
    CHECKF(total == n * seq_length, "%s: %lld tokens counted, expected %lld", what,
           (long long)total, (long long)(n * seq_length));
    CHECKF(n_short == E * T - n * seq_length && n_short < seq_length + 1,
           "%s: %lld tokens short", what, (long long)n_short);
    free(count);
    free(count0);
    free(tok);
}

/* Tokens within a sample are consecutive positions except at document boundaries, where the
 * run jumps to the start of another document. */
static void check_runs(const mt_gpt_dataset *d, const mt_indexed *ds, int seq_length) {
    /* doc_start[v] = 1 when position v starts a document. */
    int64_t n_tok = mt_indexed_n_tokens(ds);
    char *starts = calloc((size_t)n_tok + 1, 1);
    int64_t pos = 0;
    for (int64_t i = 0; i < mt_indexed_n_sequences(ds); i++) {
        starts[pos] = 1;
        pos += mt_indexed_sequence_length(ds, i);
    }
    starts[pos] = 1;
    int32_t *tok = malloc((size_t)(seq_length + 1) * sizeof *tok);
    int n_bad = 0;
    for (int64_t s = 0; s < mt_gpt_dataset_len(d); s++) {
        mt_gpt_dataset_get(d, s, tok);
        for (int i = 1; i <= seq_length; i++) {
            int consecutive = tok[i] == tok[i - 1] + 1 && !starts[tok[i]];
            int jump = starts[tok[i]] && starts[tok[i - 1] + 1];
            if (!consecutive && !jump) n_bad++;
        }
    }
    CHECKF(n_bad == 0, "%d token transitions are neither consecutive nor document jumps", n_bad);
    free(tok);
    free(starts);
}

static int same_order(const mt_gpt_dataset *a, const mt_gpt_dataset *b, int seq_length) {
    if (mt_gpt_dataset_len(a) != mt_gpt_dataset_len(b)) return 0;
    int32_t *ta = malloc((size_t)(seq_length + 1) * sizeof *ta);
    int32_t *tb = malloc((size_t)(seq_length + 1) * sizeof *tb);
    int same = 1;
    for (int64_t s = 0; s < mt_gpt_dataset_len(a) && same; s++) {
        mt_gpt_dataset_get(a, s, ta);
        mt_gpt_dataset_get(b, s, tb);
        same = memcmp(ta, tb, (size_t)(seq_length + 1) * sizeof *ta) == 0;
    }
    free(ta);
    free(tb);
    return same;
}

static void test_sampling(void) {
    mt_indexed ds;
    if (!make_dataset("main", 400, 60, &ds)) {
        CHECKF(0, "cannot build the test dataset: %s", mt_last_error());
        return;
    }
    int64_t b[4];
    CHECK(mt_gpt_split_bounds("969,30,1", 400, b) == MT_OK);
    /* Token ranges of the splits (value = position). */
    int32_t edge[4] = {0, 0, 0, 0};
    {
        int64_t pos = 0, k = 1;
        for (int64_t i = 0; i < 400; i++) {
            while (k < 4 && b[k] == i) edge[k++] = (int32_t)pos;
            pos += mt_indexed_sequence_length(&ds, i);
        }
        while (k < 4) edge[k++] = (int32_t)pos;
    }
    int seqs[] = {1, 7, 32, 100, 333};
    for (size_t q = 0; q < sizeof seqs / sizeof seqs[0]; q++) {
        int L = seqs[q];
        /* One epoch (n_samples_needed 0), and several epochs with a partial last one. */
        int64_t needs[] = {0, (int64_t)(2.5 * (edge[1] - edge[0]) / L)};
        for (int k = 0; k < 2; k++) {
            mt_gpt_dataset *d = NULL;
            mt_status st = mt_gpt_dataset_open(&d, &ds, "969,30,1", MT_SPLIT_TRAIN, L, 1234,
                                               needs[k]);
            CHECKF(st == MT_OK, "open: %s", mt_last_error());
            if (st != MT_OK) continue;
            CHECK(mt_gpt_dataset_len(d) >= needs[k]);
            char what[64];
            snprintf(what, sizeof what, "train seq %d need %lld", L, (long long)needs[k]);
            check_coverage(d, L, edge[0], edge[1], what);
            if (L == 7 || L == 100) check_runs(d, &ds, L);
            mt_gpt_dataset_close(d);
        }
        /* The valid split stays inside its own documents too (several epochs: it is small). */
        mt_gpt_dataset *v = NULL;
        CHECK(mt_gpt_dataset_open(&v, &ds, "969,30,1", MT_SPLIT_VALID, L, 1234, 50) == MT_OK);
        if (v) {
            char what[64];
            snprintf(what, sizeof what, "valid seq %d", L);
            check_coverage(v, L, edge[1], edge[2], what);
            mt_gpt_dataset_close(v);
        }
    }

    /* Determinism and seeds. */
    mt_gpt_dataset *a = NULL, *a2 = NULL, *c = NULL;
    CHECK(mt_gpt_dataset_open(&a, &ds, "969,30,1", MT_SPLIT_TRAIN, 16, 1234, 3000) == MT_OK);
    CHECK(mt_gpt_dataset_open(&a2, &ds, "969,30,1", MT_SPLIT_TRAIN, 16, 1234, 3000) == MT_OK);
    CHECK(mt_gpt_dataset_open(&c, &ds, "969,30,1", MT_SPLIT_TRAIN, 16, 1235, 3000) == MT_OK);
    if (a && a2 && c) {
        CHECK(same_order(a, a2, 16));
        CHECK(!same_order(a, c, 16));
        /* Wrap-around: sample len + k is sample k; negatives wrap too. */
        int64_t n = mt_gpt_dataset_len(a);
        int32_t t1[17], t2[17];
        int n_bad = 0;
        for (int64_t k = 0; k < 50; k++) {
            mt_gpt_dataset_get(a, k, t1);
            mt_gpt_dataset_get(a, n + k, t2);
            n_bad += memcmp(t1, t2, sizeof t1) != 0;
            mt_gpt_dataset_get(a, 5 * n + k, t2);
            n_bad += memcmp(t1, t2, sizeof t1) != 0;
        }
        CHECK(n_bad == 0);
        mt_gpt_dataset_get(a, n - 1, t1);
        CHECK(mt_gpt_dataset_get(a, -1, t2) == MT_OK);
        CHECK(memcmp(t1, t2, sizeof t1) == 0);
        /* The order is shuffled: consecutive sample numbers are not stream neighbours. */
        int n_adjacent = 0;
        for (int64_t k = 0; k + 1 < 200; k++) {
            mt_gpt_dataset_get(a, k, t1);
            mt_gpt_dataset_get(a, k + 1, t2);
            n_adjacent += t1[16] == t2[0];
        }
        CHECK(n_adjacent < 20);
    }
    mt_gpt_dataset_close(a);
    mt_gpt_dataset_close(a2);
    mt_gpt_dataset_close(c);

    /* A split smaller than one sample still yields a stream (several epochs of it). */
    mt_gpt_dataset *t = NULL;
    CHECK(mt_gpt_dataset_open(&t, &ds, "969,30,1", MT_SPLIT_VALID, 2000, 7, 0) == MT_OK);
    if (t) {
        CHECK(mt_gpt_dataset_len(t) >= 1);
        check_coverage(t, 2000, edge[1], edge[2], "valid split, long samples");
        mt_gpt_dataset_close(t);
    }
    /* 400 documents: the test split rounds to 0 documents (Megatron: round(0.4) = 0). */
    CHECK(b[2] == 400 && b[3] == 400);
    CHECK(mt_gpt_dataset_open(&t, &ds, "969,30,1", MT_SPLIT_TEST, 16, 7, 0) == MT_ERR_DATA);

    /* Bad arguments. */
    mt_gpt_dataset *e = NULL;
    CHECK(mt_gpt_dataset_open(&e, &ds, "969,30,1", 3, 16, 1, 10) == MT_ERR_CONFIG);
    CHECK(mt_gpt_dataset_open(&e, &ds, "969,30,1", 0, 0, 1, 10) == MT_ERR_CONFIG);
    CHECK(mt_gpt_dataset_open(&e, &ds, "x", 0, 16, 1, 10) == MT_ERR_CONFIG);
    CHECK(e == NULL);
    mt_indexed_close(&ds);

    /* Empty split: 10 documents under 969,30,1 leave valid and test empty. */
    mt_indexed small;
    if (make_dataset("small", 10, 20, &small)) {
        CHECK(mt_gpt_dataset_open(&e, &small, "969,30,1", MT_SPLIT_VALID, 8, 1, 10) ==
              MT_ERR_DATA);
        CHECK_STR_CONTAINS(mt_last_error(), "969,30,1");
        CHECK_STR_CONTAINS(mt_last_error(), "valid");
        CHECK(mt_gpt_dataset_open(&e, &small, "969,30,1", MT_SPLIT_TEST, 8, 1, 10) == MT_ERR_DATA);
        CHECK_STR_CONTAINS(mt_last_error(), "test");
        CHECK(mt_gpt_dataset_open(&e, &small, "969,30,1", MT_SPLIT_TRAIN, 8, 1, 10) == MT_OK);
        mt_gpt_dataset_close(e);
        mt_indexed_close(&small);
    } else {
        CHECK(0);
    }
}

int main(void) {
    if (!test_tmpdir_make(g_dir)) return 1;
    test_split_bounds();
    test_sampling();
    test_tmpdir_remove(g_dir);
    TEST_MAIN_END();
}
