/* output_lock.c — the per-dataset-name writer lock of `mtrain preprocess` (see output_lock.h):
 * flock(LOCK_EX | LOCK_NB) on NAME.lock, the holder's pid written in it, removed on release. */
#include "core/data/output_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void mt_output_lock_init(mt_output_lock *l) {
    l->fd = -1;
    l->path[0] = 0;
}

/* The pid recorded in the lock file (0 if none yet). */
static long holder_pid(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

mt_status mt_output_lock_acquire(mt_output_lock *l, const char *prefix, const char *name) {
    mt_output_lock_init(l);
    int n = snprintf(l->path, sizeof l->path, "%s.lock", name);
    if (n < 0 || (size_t)n >= sizeof l->path) {
        return mt_errorf(MT_ERR_CONFIG, "--output-prefix %s: path too long", prefix);
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            return mt_errorf(MT_ERR_IO, "%s: cannot create the lock of --output-prefix %s: %s "
                             "(is the output folder there and writable?)", l->path, prefix,
                             strerror(errno));
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            long pid = 0;
            /* the holder writes its pid right after locking: give it a moment */
            for (int i = 0; i < 20 && (pid = holder_pid(fd)) == 0; i++) usleep(5000);
            close(fd);
            if (e != EWOULDBLOCK) {
                return mt_errorf(MT_ERR_IO, "%s: cannot lock: %s", l->path, strerror(e));
            }
            char who[64];
            if (pid > 0) snprintf(who, sizeof who, "pid %ld", pid);
            else snprintf(who, sizeof who, "a process that has not written its pid yet");
            return mt_errorf(MT_ERR_IO, "--output-prefix %s: %s is being written by another "
                             "mtrain preprocess (%s holds %s); wait for it to finish, or write "
                             "to another --output-prefix", prefix, name, who, l->path);
        }
        /* Still the file at that name? (its holder may have removed it before we locked) */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(l->path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            char buf[32];
            int m = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)m, 0) != m) {
                int e = errno;
                unlink(l->path);
                close(fd);
                return mt_errorf(MT_ERR_IO, "%s: cannot write the lock: %s", l->path,
                                 strerror(e));
            }
            l->fd = fd;
            return MT_OK;
        }
        close(fd);
    }
    return mt_errorf(MT_ERR_IO, "%s: the lock file keeps changing under us (another writer?)",
                     l->path);
}

void mt_output_lock_release(mt_output_lock *l) {
    if (!l || l->fd < 0) return;
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}
