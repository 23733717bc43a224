/* corpus_replay.h — what every corpus replay test shares (test/unit/test_*_fuzz_replay.c): each
 * file of a committed corpus folder, in name order, read whole and handed to the harness's check.
 * Test-only (uses test/test.h's CHECKF); run from the repo root. */
#ifndef MT_CORPUS_REPLAY_H
#define MT_CORPUS_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_file.h"
#include "test/test.h"

/* check(ctx, path, data, n): 0 when the input was handled as it should be */
typedef int (*corpus_check_fn)(void *ctx, const char *path, const uint8_t *data, size_t n);

static int corpus_by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Replays every file of dir (at least min_files of them) through check; returns the count. */
static int corpus_replay(const char *dir, int min_files, corpus_check_fn check, void *ctx) {
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s (run from the repo root)", dir);
    if (!d) return 0;
    char *names[4096];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 4096;)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], corpus_by_name);
    CHECKF(n >= min_files, "only %d corpus files in %s", n, dir);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t n_buf = 0;
        uint8_t *buf = fuzz_read_file(path, &n_buf);
        CHECKF(buf != NULL, "cannot read %s", path);
        if (buf) CHECKF(check(ctx, path, buf, n_buf) == 0, "%s", path);
        free(buf);
        free(names[i]);
    }
    return n;
}

#endif
