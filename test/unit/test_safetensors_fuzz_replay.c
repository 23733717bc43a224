/* test_safetensors_fuzz_replay.c — replays every input in test/fuzz/corpus_safetensors/ (the
 * fuzzer's seeds and the inputs that once found bugs) through the fuzz harness's checks: CRC
 * paths agree, the parse is a clean rejection or a consistent header, and an accepted header
 * writes back to the same tensors. Runs in CI with gcc; libFuzzer is not needed.
 * Run from the repo root. */
#include <dirent.h>

#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_safetensors.c"
#include "test/test.h"

#define CORPUS "test/fuzz/corpus_safetensors"

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
    CHECKF(n >= 10, "only %d corpus files", n);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", CORPUS, names[i]);
        size_t n_buf = 0;
        uint8_t *buf = fuzz_read(path, &n_buf);
        CHECKF(buf != NULL, "cannot read %s", path);
        if (buf) {
            CHECKF(fuzz_safetensors_one(buf, n_buf) == 0, "%s", path);
            mt_st_header h;
            if (mt_st_parse(buf, n_buf, path, &h) == MT_OK) n_ok++;
            mt_st_header_free(&h);
            free(buf);
        }
        free(names[i]);
    }
    /* the seeds hold both kinds: the write-back oracle ran, and rejections were exercised */
    CHECKF(n_ok >= 3 && n - n_ok >= 3, "%d of %d corpus files parse", n_ok, n);
    printf("replayed %d corpus inputs (%d parse)\n", n, n_ok);
    TEST_MAIN_END();
}
