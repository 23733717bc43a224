/* test_manifest_fuzz_replay.c — replays every input in test/fuzz/corpus_manifest/ (seeds cut from
 * real saves, hand-made damage, inputs that once found bugs) through the manifest fuzz harness's
 * properties: a clean rejection naming the file, or a consistent manifest that writes back to
 * itself. At least one seed must parse (a real save's manifest) and at least one must be
 * rejected, so the corpus exercises both paths. Run from the repo root; no libFuzzer needed. */
#include <dirent.h>

#define MT_FUZZ_NO_ENTRY 1
#include "core/file_read.h"
#include "test/fuzz/fuzz_manifest.c"
#include "test/test.h"

#define CORPUS "test/fuzz/corpus_manifest"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    DIR *d = opendir(CORPUS);
    CHECKF(d != NULL, "cannot open %s (run from the repo root)", CORPUS);
    if (!d) TEST_MAIN_END();
    char *names[4096];
    int n = 0, n_ok = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 4096;)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    CHECKF(n >= 8, "only %d corpus files", n);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", CORPUS, names[i]);
        char *text = NULL;
        size_t len = 0;
        mt_status st = mt_read_whole_file(path, &text, &len);
        CHECKF(st == MT_OK, "%s: %s", path, mt_last_error());
        if (st == MT_OK) {
            const char *why = NULL;
            CHECKF(!fuzz_manifest_one((const uint8_t *)text, len, &why), "%s: %s", path, why ? why : "");
            mt_manifest m;
            if (mt_manifest_parse(text, len, path, &m) == MT_OK) {
                n_ok++;
                mt_manifest_free(&m);
            }
        }
        free(text);
        free(names[i]);
    }
    printf("test_manifest_fuzz_replay: %d inputs, %d parse, %d rejected\n", n, n_ok, n - n_ok);
    CHECKF(n_ok >= 1, "no corpus file parses: the real-manifest seeds are missing");
    CHECKF(n - n_ok >= 1, "no corpus file is rejected: the damaged seeds are missing");
    TEST_MAIN_END();
}
