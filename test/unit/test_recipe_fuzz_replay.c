/* test_recipe_fuzz_replay.c — replays every input in test/fuzz/corpus/ (the fuzzer's seeds
 * and the inputs that once found bugs) through the fuzz harness's checks: load or apply
 * flags, validate, write_yaml round trip. Runs in CI with gcc; libFuzzer is not needed.
 * Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_recipe.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    (void)ctx, (void)path;
    return fuzz_recipe_one(data, n);
}

int main(void) {
    int n = corpus_replay("test/fuzz/corpus", 10, check, NULL);
    printf("replayed %d corpus inputs\n", n);
    TEST_MAIN_END();
}
