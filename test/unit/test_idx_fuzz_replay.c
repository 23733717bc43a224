/* test_idx_fuzz_replay.c — replays every input in test/fuzz/corpus_idx/ (datasets written by
 * mt_indexed_writer_* for each integer dtype, float relabellings, and damaged ones: truncated,
 * wrong magic / version / dtype, counts that overflow, pointers past the .bin, document indices
 * not monotone) through the indexed-dataset fuzz harness's checks: a clean MT_ERR_DATA naming the
 * file, or a dataset whose lengths, pointers, documents, reads and max_token scan match the bytes.
 * Runs in CI with gcc; libFuzzer is not needed. Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_idx.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    (void)ctx;
    (void)path;
    return fuzz_idx_one(data, n);
}

int main(void) {
    int n = corpus_replay("test/fuzz/corpus_idx", 10, check, NULL);
    /* the seeds hold both kinds: datasets that open and read, and refusals */
    CHECKF(fuzz_idx_n_accepted >= 3 && n - fuzz_idx_n_accepted >= 3, "%d of %d corpus files open", fuzz_idx_n_accepted,
           n);
    printf("replayed %d corpus inputs (%d open)\n", n, fuzz_idx_n_accepted);
    TEST_MAIN_END();
}
