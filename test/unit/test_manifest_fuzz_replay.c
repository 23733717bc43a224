/* test_manifest_fuzz_replay.c — replays every input in test/fuzz/corpus_manifest/ (seeds cut from
 * real saves, hand-made damage, inputs that once found bugs) through the manifest fuzz harness's
 * properties: a clean rejection naming the file, or a consistent manifest that writes back to
 * itself. At least one seed must parse (a real save's manifest) and at least one must be
 * rejected, so the corpus exercises both paths. Run from the repo root; no libFuzzer needed. */
#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_manifest.c"
#include "test/fuzz/corpus_replay.h"

static int check(void *ctx, const char *path, const uint8_t *data, size_t n) {
    int *n_ok = ctx;
    const char *why = NULL;
    mt_manifest m;
    if (mt_manifest_parse((const char *)data, n, path, &m) == MT_OK) {
        ++*n_ok;
        mt_manifest_free(&m);
    }
    if (fuzz_manifest_one(data, n, &why)) {
        fprintf(stderr, "%s: %s\n", path, why ? why : "");
        return 1;
    }
    return 0;
}

int main(void) {
    int n_ok = 0;
    int n = corpus_replay("test/fuzz/corpus_manifest", 8, check, &n_ok);
    printf("test_manifest_fuzz_replay: %d inputs, %d parse, %d rejected\n", n, n_ok, n - n_ok);
    CHECKF(n_ok >= 1, "no corpus file parses: the real-manifest seeds are missing");
    CHECKF(n - n_ok >= 1, "no corpus file is rejected: the damaged seeds are missing");
    TEST_MAIN_END();
}
