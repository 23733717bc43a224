/* test_bpe_fuzz_replay.c — replays every input in test/fuzz/corpus_bpe/ (hand-written GPT-2
 * vocab.json NUL merges.txt pairs and tokenizer.json files, valid and damaged) through the BPE fuzz
 * harness's checks: a clean refusal naming the file, or ids inside the vocabulary that decode (back
 * to the text for GPT-2's files), equal from the word cache, a clone and both merge loops. Runs in
 * CI with gcc; libFuzzer is not needed. Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_bpe.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    (void)ctx;
    (void)path;
    return fuzz_bpe_one(data, n);
}

int main(void) {
    int n = corpus_replay("test/fuzz/corpus_bpe", 10, check, NULL);
    /* the seeds hold both kinds for both loaders (each input goes through both) */
    CHECKF(fuzz_bpe_n_gpt2 >= 3 && n - fuzz_bpe_n_gpt2 >= 3, "%d of %d corpus files load as vocab.json + merges.txt",
           fuzz_bpe_n_gpt2, n);
    CHECKF(fuzz_bpe_n_json >= 3 && n - fuzz_bpe_n_json >= 3, "%d of %d corpus files load as tokenizer.json",
           fuzz_bpe_n_json, n);
    printf("replayed %d corpus inputs (%d load as vocab.json + merges.txt, %d as tokenizer.json)\n", n, fuzz_bpe_n_gpt2,
           fuzz_bpe_n_json);
    TEST_MAIN_END();
}
