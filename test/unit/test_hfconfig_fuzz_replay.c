/* test_hfconfig_fuzz_replay.c — replays every input in test/fuzz/corpus_hfconfig/ (hand-written
 * config.json files of GPT-2, Llama, Mistral and Mixtral shapes, valid and damaged) through the
 * config.json fuzz harness's checks: each import against the fixed tiny recipes and against the
 * recipe derived from the config is a clean refusal naming config.json or stops at the missing
 * weights, the derived recipe validates (positive dimensions) or is refused with MT_ERR_CONFIG, and
 * a config of only mapped fields is accepted against its own recipe. Runs in CI with gcc; libFuzzer
 * is not needed. Run from the repo root. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_hfconfig.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    (void)ctx;
    (void)path;
    return fuzz_hfconfig_one(data, n);
}

int main(void) {
    int n = corpus_replay("test/fuzz/corpus_hfconfig", 10, check, NULL);
    /* the seeds hold both kinds: configs some import accepts, and configs every import refuses */
    CHECKF(fuzz_hfc_n_accepted >= 3 && n - fuzz_hfc_n_accepted >= 3, "%d of %d corpus files accepted",
           fuzz_hfc_n_accepted, n);
    CHECKF(fuzz_hfc_n_derived >= 3, "only %d corpus files give a recipe that validates", fuzz_hfc_n_derived);
    printf("replayed %d corpus inputs (%d accepted, %d give a valid recipe)\n", n, fuzz_hfc_n_accepted,
           fuzz_hfc_n_derived);
    TEST_MAIN_END();
}
