/* test_recipe_fuzz_replay.c — replays every input in test/fuzz/corpus/ (the fuzzer's seeds
 * and the inputs that once found bugs) through the fuzz harness's checks: load or apply
 * flags, validate, write_yaml round trip. Runs in CI with gcc; libFuzzer is not needed.
 * Run from the repo root. */
#include <dirent.h>

#define MT_FUZZ_NO_ENTRY 1
#include "test/fuzz/fuzz_recipe.c"
#include "test/test.h"

#define CORPUS "test/fuzz/corpus"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    DIR *d = opendir(CORPUS);
    CHECKF(d != NULL, "cannot open %s (run from the repo root)", CORPUS);
    if (!d) TEST_MAIN_END();
    char *names[4096];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 4096;)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    CHECKF(n >= 10, "only %d corpus files", n);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", CORPUS, names[i]);
        FILE *f = fopen(path, "rb");
        CHECKF(f != NULL, "cannot open %s", path);
        if (f) {
            uint8_t *buf = NULL;
            size_t n_buf = 0, cap = 0, got;
            do {
                if (n_buf == cap) {
                    cap = cap ? 2 * cap : 4096;
                    uint8_t *nb = realloc(buf, cap);
                    if (!nb) break;
                    buf = nb;
                }
                got = fread(buf + n_buf, 1, cap - n_buf, f);
                n_buf += got;
            } while (got > 0);
            fclose(f);
            CHECKF(fuzz_recipe_one(buf ? buf : (const uint8_t *)"", n_buf) == 0, "%s", path);
            free(buf);
        }
        free(names[i]);
    }
    printf("replayed %d corpus inputs\n", n);
    TEST_MAIN_END();
}
