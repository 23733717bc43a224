/* fuzz_file.h — files for the fuzz harnesses and their replays: one file read whole, the
 * plain replay driver of a harness built with -DMT_FUZZ_REPLAY_MAIN (PROG FILE...: each file
 * through the harness, "ok" or "FAILED" per file, exit 1 when any failed), and
 * FUZZ_ENTRY_POINTS(one), a harness's libFuzzer entry (left out under MT_FUZZ_NO_ENTRY, where a
 * unit test replays the corpus itself) and that replay main; fuzz_write_file for the harnesses whose
 * parser reads files. Define those two before including. */
#ifndef MT_FUZZ_FILE_H
#define MT_FUZZ_FILE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The whole file in a malloc'd buffer (not NULL for an empty file); NULL when it cannot be
 * opened. */
static inline uint8_t *fuzz_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = NULL;
    size_t cap = 0, got;
    *n = 0;
    do {
        if (*n == cap) {
            uint8_t *nb = realloc(b, cap = cap ? 2 * cap : 4096);
            if (!nb) break;
            b = nb;
        }
        got = fread(b + *n, 1, cap - *n, f);
        *n += got;
    } while (got > 0);
    fclose(f);
    return b ? b : calloc(1, 1);
}

/* Writes n bytes to path (created or truncated, mode 0600): 0, or -1 when it cannot. */
static inline int fuzz_write_file(const char *path, const void *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        c += w, n -= (size_t)w;
    }
    return close(fd);
}

/* one(data, n): nonzero when the input was mishandled. */
static inline int fuzz_replay_files(int argc, char **argv, int (*one)(const uint8_t *, size_t)) {
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        size_t n = 0;
        uint8_t *buf = fuzz_read_file(argv[i], &n);
        if (!buf) { perror(argv[i]); failed++; continue; }
        int bad = one(buf, n);
        printf("%s: %s\n", argv[i], bad ? "FAILED" : "ok");
        failed += bad;
        free(buf);
    }
    return failed ? 1 : 0;
}

/* libFuzzer's entry: a mishandled input aborts */
#ifndef MT_FUZZ_NO_ENTRY
#define FUZZ_LIBFUZZER_ENTRY(one)                                         \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);         \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {        \
        if (one(data, size)) abort();                                     \
        return 0;                                                         \
    }
#else
#define FUZZ_LIBFUZZER_ENTRY(one)
#endif
#ifdef MT_FUZZ_REPLAY_MAIN
#define FUZZ_REPLAY_MAIN(one) \
    int main(int argc, char **argv) { return fuzz_replay_files(argc, argv, one); }
#else
#define FUZZ_REPLAY_MAIN(one)
#endif
#define FUZZ_ENTRY_POINTS(one) FUZZ_LIBFUZZER_ENTRY(one) FUZZ_REPLAY_MAIN(one)

#endif
