/* test_spm_fuzz_replay.c — replays every input in test/fuzz/corpus_spm/ (the fuzzer's seeds:
 * models trained by python3-sentencepiece on KJV text, and damaged ones) through the fuzz
 * harness's checks: a clean refusal naming the file, or ids inside the vocabulary under each of
 * Megatron's three classes, equal from a clone, that decode. Runs in CI with gcc; libFuzzer is
 * not needed. Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_spm.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    int *n_ok = ctx;
    mt_tokenizer *tok = NULL;
    if (mt_tokenizer_spm_open_bytes(&tok, "gptspm", data, n, path) == MT_OK) ++*n_ok;
    mt_clear_error();
    mt_tokenizer_free(tok);
    return fuzz_spm_one(data, n);
}

int main(void) {
    int n_ok = 0;
    int n = corpus_replay("test/fuzz/corpus_spm", 6, check, &n_ok);
    /* the seeds hold both kinds: models that load and encode, and refusals */
    CHECKF(n_ok >= 3 && n - n_ok >= 3, "%d of %d corpus files load", n_ok, n);
    printf("replayed %d corpus inputs (%d load)\n", n, n_ok);
    TEST_MAIN_END();
}
