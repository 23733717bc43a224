/* file_read.c — mt_open_regular and mt_read_whole_file (file_read.h): open with O_NONBLOCK (a
 * FIFO then opens at once instead of waiting for a writer), fstat, refuse what is not a regular
 * file, clear O_NONBLOCK again; and one read of the whole regular file, NUL-terminated. Shared
 * by the readers of user-given files: json_tree.c (manifests, config.json), the tokenizers, the
 * checkpoint shards, safetensors imports, datasets and their index caches. */
#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m)
                                                                                           ? "a device"
                                                                                           : "not a file";
}

mt_status mt_open_regular(const char *path, int *fd, struct stat *sb, int *open_errno) {
    *fd = -1;
    if (open_errno) *open_errno = 0;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) {
        int e = errno;
        if (open_errno) *open_errno = e;
        return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (fstat(f, sb) != 0 || !S_ISREG(sb->st_mode)) {
        mode_t m = sb->st_mode;
        close(f);
        return mt_errorf(MT_ERR_IO, "%s: cannot read: %s, not a regular file", path, kind_of(m));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return MT_OK;
}

mt_status mt_read_whole_file(const char *path, char **text, size_t *n_bytes) {
    *text = NULL;
    int fd;
    struct stat sb;
    mt_status st = mt_open_regular(path, &fd, &sb, NULL);
    if (st != MT_OK) return st;
    size_t n = (size_t)sb.st_size, got = 0;
    char *t = malloc(n + 1);
    if (!t) {
        close(fd);
        return mt_errorf(MT_ERR_OOM, "%s: cannot hold %zu bytes", path, n);
    }
    while (got < n) {
        ssize_t k = read(fd, t + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (got != n) {
        free(t);
        return mt_errorf(MT_ERR_IO, "%s: read failed (%zu of %zu bytes)", path, got, n);
    }
    t[n] = 0;
    *text = t;
    *n_bytes = n;
    return MT_OK;
}
