/* test_files.h — scratch files for the C tests: a folder made with mkdtemp and removed at the
 * end, paths in it, small files written whole, and a monotonic clock for the throughput lines. */
#ifndef MT_TEST_FILES_H
#define MT_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

/* mkdtemp(dir) (dir ends in XXXXXX); 0 with a message when it fails. */
static inline int test_tmpdir_make(char *dir) {
    if (mkdtemp(dir)) return 1;
    perror("mkdtemp");
    return 0;
}

/* rm -rf dir (a message when that fails). */
static inline void test_tmpdir_remove(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* "dir/name" in one of 64 rotating buffers (valid until 64 more calls). */
static inline char *test_path(const char *dir, const char *name) {
    static char buf[64][600];
    static int k;
    k = (k + 1) % 64;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static inline int test_file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Writes text as the whole file (nothing when it cannot be opened). */
static inline void test_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The whole file in a malloc'd buffer (one spare byte; not NULL for an empty file), its size in
 * *n_bytes; NULL when it cannot be opened. */
static inline unsigned char *test_read_file(const char *path, size_t *n_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n + 1 : 1);
    *n_bytes = p && n > 0 ? fread(p, 1, (size_t)n, f) : 0;
    fclose(f);
    return p;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
