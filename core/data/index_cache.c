/* index_cache.c — sample-index cache files (layout in index_cache.h): write via temp
 * ("<file>.tmp.<pid>.<addr>") + fsync + rename, read with every size, name and checksum
 * verified; each read first removes the folder's cache temporaries whose writer died
 * (core/data/tmpfiles.h), so an interrupted build leaves nothing for long.
 * Rule kept: a cache is an optimisation: any doubt about a file makes it a miss
 * (MT_ERR_DATA with the reason), never a crash or a silently wrong index. */
#include "core/data/index_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/data/tmpfiles.h"
#include "core/file_read.h"

#define MAGIC "MTIDXC01"
#define VERSION 1u
#define ALIGN 64
#define MAX_ARRAYS 16
#define ENTRY_BYTES 40 /* name 16 + u32 + u32 + u64 + u64 */

uint64_t mt_hash64(const void *p, size_t n_bytes, uint64_t seed) {
    const unsigned char *s = p;
    /* four independent multiply-xorshift lanes over 32-byte blocks, then the tail */
    uint64_t h[4] = {seed ^ 0x9E3779B97F4A7C15ull, seed ^ 0xC2B2AE3D27D4EB4Full,
                     seed ^ 0x165667B19E3779F9ull, seed ^ 0x85EBCA77C2B2AE63ull};
    size_t i = 0;
    for (; i + 32 <= n_bytes; i += 32) {
        for (int k = 0; k < 4; k++) {
            uint64_t v;
            memcpy(&v, s + i + 8 * k, 8);
            h[k] = (h[k] ^ v) * 0xff51afd7ed558ccdull;
            h[k] ^= h[k] >> 31;
        }
    }
    uint64_t r = (uint64_t)n_bytes * 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < 4; k++) r = (r ^ h[k]) * 0xc4ceb9fe1a85ec53ull + (uint64_t)k;
    for (; i < n_bytes; i++) r = (r ^ s[i]) * 0x100000001b3ull;
    r ^= r >> 33;
    r *= 0xff51afd7ed558ccdull;
    r ^= r >> 33;
    return r;
}

mt_status mt_index_cache_name(const char *dir, const char *kind, const char *description,
                              char *out, size_t n_out_bytes) {
    uint64_t h = mt_hash64(description, strlen(description), 0);
    int n = snprintf(out, n_out_bytes, "%s/%016llx-%s.mtidx", dir, (unsigned long long)h, kind);
    if (n < 0 || (size_t)n >= n_out_bytes) {
        return mt_errorf(MT_ERR_CONFIG, "index cache folder %s: path too long", dir);
    }
    return MT_OK;
}

mt_status mt_index_cache_mkdir(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0) return MT_OK;
    if (n >= sizeof buf) return mt_errorf(MT_ERR_CONFIG, "%s: path too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            return mt_errorf(MT_ERR_IO, "%s: cannot create the index cache folder: %s", buf,
                             strerror(errno));
        }
        buf[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return mt_errorf(MT_ERR_IO, "%s: not a folder (index cache)", dir);
    }
    return MT_OK;
}

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* The header bytes for the arrays (malloc'd), its size in *n_bytes. */
static unsigned char *make_header(const char *description, const mt_cache_array *a,
                                  int n_arrays, const uint64_t *sums, size_t *n_bytes) {
    size_t nd = strlen(description);
    size_t n = 8 + 4 + 4 + 8 + nd + (size_t)n_arrays * ENTRY_BYTES + 8;
    unsigned char *h = calloc(1, round_up(n));
    if (!h) return NULL;
    uint32_t version = VERSION, na = (uint32_t)n_arrays;
    uint64_t n_desc = nd;
    size_t at = 0;
    memcpy(h, MAGIC, 8);
    at += 8;
    memcpy(h + at, &version, 4);
    at += 4;
    memcpy(h + at, &na, 4);
    at += 4;
    memcpy(h + at, &n_desc, 8);
    at += 8;
    memcpy(h + at, description, nd);
    at += nd;
    for (int i = 0; i < n_arrays; i++) {
        size_t nn = strlen(a[i].name);
        memcpy(h + at, a[i].name, nn < 15 ? nn : 15);
        uint32_t ib = (uint32_t)a[i].n_item_bytes;
        uint64_t items = (uint64_t)a[i].n_items, sum = sums ? sums[i] : 0;
        memcpy(h + at + 16, &ib, 4);
        memcpy(h + at + 24, &items, 8);
        memcpy(h + at + 32, &sum, 8);
        at += ENTRY_BYTES;
    }
    uint64_t hs = mt_hash64(h, at, 1);
    memcpy(h + at, &hs, 8);
    at += 8;
    *n_bytes = round_up(at);
    return h;
}

static mt_status write_all(int fd, const void *p, size_t n, const char *path) {
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return mt_errorf(MT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        }
        s += w;
        n -= (size_t)w;
    }
    return MT_OK;
}

mt_status mt_index_cache_write(const char *path, const char *description,
                               const mt_cache_array *arrays, int n_arrays) {
    mt_status st = MT_OK;
    char tmp[4200];
    uint64_t sums[MAX_ARRAYS];
    unsigned char *header = NULL;
    int fd = -1;
    if (n_arrays > MAX_ARRAYS) return mt_errorf(MT_ERR_INTERNAL, "index cache: too many arrays");
    /* pid + address: several ranks may write the same cache at once; each renames its own
     * complete file into place, and all of them are identical. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)(uintptr_t)&sums);
    for (int i = 0; i < n_arrays; i++) {
        sums[i] = mt_hash64(arrays[i].data, (size_t)arrays[i].n_items * (size_t)arrays[i].n_item_bytes,
                            2 + (uint64_t)i);
    }
    size_t n_header;
    header = make_header(description, arrays, n_arrays, sums, &n_header);
    if (!header) return mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    MT_CHECK(write_all(fd, header, n_header, tmp));
    static const unsigned char zeros[ALIGN] = {0};
    for (int i = 0; i < n_arrays; i++) {
        size_t nb = (size_t)arrays[i].n_items * (size_t)arrays[i].n_item_bytes;
        MT_CHECK(write_all(fd, arrays[i].data, nb, tmp));
        MT_CHECK(write_all(fd, zeros, round_up(nb) - nb, tmp));
    }
    if (fsync(fd) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        st = mt_errorf(MT_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
        int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
out:
    if (fd >= 0) close(fd);
    if (st != MT_OK) unlink(tmp);
    free(header);
    return st;
}

static mt_status read_exact(int fd, void *p, size_t n, const char *path, const char *what) {
    char *s = p;
    while (n > 0) {
        ssize_t r = read(fd, s, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            return mt_errorf(r < 0 ? MT_ERR_IO : MT_ERR_DATA, "%s: truncated while reading %s%s%s",
                             path, what, r < 0 ? ": " : "", r < 0 ? strerror(errno) : "");
        }
        s += r;
        n -= (size_t)r;
    }
    return MT_OK;
}

mt_status mt_index_cache_read(const char *path, const char *description,
                              mt_cache_array *arrays, int n_arrays, int *missing) {
    mt_status st = MT_OK;
    unsigned char *got = NULL;
    *missing = 0;
    for (int i = 0; i < n_arrays; i++) arrays[i].data = NULL;
    {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else dir[0] = 0;
        mt_tmpfiles_remove_stale_in(slash && !dir[0] ? "/" : dir, ".mtidx", "tmp", NULL);
    }
    int fd, open_errno;
    struct stat sb;
    mt_status opened = mt_open_regular(path, &fd, &sb, &open_errno);
    if (opened != MT_OK) {
        *missing = open_errno == ENOENT;
        return opened;
    }
    /* The expected header, items counts unknown: compare piecewise. */
    size_t nd = strlen(description);
    size_t n_fixed = 8 + 4 + 4 + 8 + nd + (size_t)n_arrays * ENTRY_BYTES + 8;
    size_t n_header = round_up(n_fixed);
    if ((uint64_t)sb.st_size < n_header) {
        st = mt_errorf(MT_ERR_DATA, "%s: truncated: %lld bytes, the header alone needs %zu", path,
                       (long long)sb.st_size, n_header);
        goto out;
    }
    got = malloc(n_header);
    if (!got) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", path);
        goto out;
    }
    MT_CHECK(read_exact(fd, got, n_header, path, "the header"));
    if (memcmp(got, MAGIC, 8) != 0) {
        st = mt_errorf(MT_ERR_DATA, "%s: bad magic: not an mtrain index cache", path);
        goto out;
    }
    uint32_t version, na;
    uint64_t n_desc;
    memcpy(&version, got + 8, 4);
    memcpy(&na, got + 12, 4);
    memcpy(&n_desc, got + 16, 8);
    if (version != VERSION || na != (uint32_t)n_arrays || n_desc != nd ||
        memcmp(got + 24, description, nd) != 0) {
        st = mt_errorf(MT_ERR_DATA, "%s: built from other inputs or by another version (its "
                       "description differs)", path);
        goto out;
    }
    uint64_t hs;
    memcpy(&hs, got + n_fixed - 8, 8);
    if (hs != mt_hash64(got, n_fixed - 8, 1)) {
        st = mt_errorf(MT_ERR_DATA, "%s: header checksum mismatch (corrupt)", path);
        goto out;
    }
    uint64_t sums[MAX_ARRAYS];
    uint64_t total = n_header;
    for (int i = 0; i < n_arrays; i++) {
        const unsigned char *e = got + 24 + nd + (size_t)i * ENTRY_BYTES;
        char name[16];
        memcpy(name, e, 16);
        name[15] = 0;
        uint32_t ib;
        uint64_t items;
        memcpy(&ib, e + 16, 4);
        memcpy(&items, e + 24, 8);
        memcpy(&sums[i], e + 32, 8);
        if (strncmp(name, arrays[i].name, 15) != 0 || ib != (uint32_t)arrays[i].n_item_bytes ||
            items > ((uint64_t)1 << 48) / ib) {
            st = mt_errorf(MT_ERR_DATA, "%s: array %d is \"%s\" of %u-byte items, expected "
                           "\"%s\" of %d-byte items", path, i, name, ib, arrays[i].name,
                           arrays[i].n_item_bytes);
            goto out;
        }
        arrays[i].n_items = (int64_t)items;
        total += round_up((size_t)(items * ib));
    }
    if (total != (uint64_t)sb.st_size) {
        st = mt_errorf(MT_ERR_DATA, "%s: size %lld bytes, its header describes %llu (truncated or "
                       "corrupt)", path, (long long)sb.st_size, (unsigned long long)total);
        goto out;
    }
    for (int i = 0; i < n_arrays; i++) {
        size_t nb = (size_t)arrays[i].n_items * (size_t)arrays[i].n_item_bytes;
        size_t padded = round_up(nb);
        arrays[i].data = malloc(padded ? padded : 1);
        if (!arrays[i].data) {
            st = mt_errorf(MT_ERR_OOM, "%s: cannot hold array %s (%zu bytes)", path,
                           arrays[i].name, nb);
            goto out;
        }
        MT_CHECK(read_exact(fd, arrays[i].data, padded, path, arrays[i].name));
        if (mt_hash64(arrays[i].data, nb, 2 + (uint64_t)i) != sums[i]) {
            st = mt_errorf(MT_ERR_DATA, "%s: checksum mismatch in %s (corrupt)", path,
                           arrays[i].name);
            goto out;
        }
    }
out:
    close(fd);
    free(got);
    if (st != MT_OK) {
        for (int i = 0; i < n_arrays; i++) {
            free(arrays[i].data);
            arrays[i].data = NULL;
        }
    }
    return st;
}
