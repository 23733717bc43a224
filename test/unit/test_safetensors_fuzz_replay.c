/* test_safetensors_fuzz_replay.c — replays every input in test/fuzz/corpus_safetensors/ (the
 * fuzzer's seeds and the inputs that once found bugs) through the fuzz harness's checks: CRC
 * paths agree, the parse is a clean rejection or a consistent header, and an accepted header
 * writes back to the same tensors. Runs in CI with gcc; libFuzzer is not needed.
 * Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_safetensors.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    int *n_ok = ctx;
    mt_st_header h;
    if (mt_st_parse(data, n, path, &h) == MT_OK) ++*n_ok;
    mt_st_header_free(&h);
    return fuzz_safetensors_one(data, n);
}

int main(void) {
    int n_ok = 0;
    int n = corpus_replay("test/fuzz/corpus_safetensors", 10, check, &n_ok);
    /* the seeds hold both kinds: the write-back oracle ran, and rejections were exercised */
    CHECKF(n_ok >= 3 && n - n_ok >= 3, "%d of %d corpus files parse", n_ok, n);
    printf("replayed %d corpus inputs (%d parse)\n", n, n_ok);
    TEST_MAIN_END();
}
