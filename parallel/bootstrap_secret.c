/* bootstrap_secret.c — the job secret that authenticates the hellos of the env:// store
 * (bootstrap_env.c), from the first of:
 *   1. MT_STORE_SECRET: the secret itself (at least 16 characters; every rank sets the same);
 *   2. MT_STORE_SECRET_FILE: a file holding it (a regular file of this user, readable by no
 *      one else: mode 0600 or 0400);
 *   3. ~/.mtrain/store_secret, the same rules, created (64 random hex digits, mode 0600) by the
 *      first rank that finds it missing: the ranks of one user on one machine, or on machines
 *      that share the home folder, agree without being told anything, as munge's key does.
 * The creation is atomic (a private temporary file, link()ed to the final name; a rank that
 * loses the race reads the winner's), so ranks starting together agree. */
#include "parallel/bootstrap_internal.h"

#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_SECRET_CHARS 16
#define FIX_HINT "set MT_STORE_SECRET to one value of at least 16 characters for every rank of the job"

/* reads a secret file: regular, owned by this user, no access for group or others */
static mt_status read_secret_file(const char *path, const char *what, uint8_t *key, size_t *n_key) {
    int fd, open_errno;
    struct stat sb;
    mt_status st = mt_open_regular(path, &fd, &sb, &open_errno);
    if (st != MT_OK && open_errno)
        return mt_errorf(MT_ERR_CONFIG, "%s %s: cannot open: %s (%s)", what, path, strerror(open_errno), FIX_HINT);
    if (st != MT_OK) return mt_error_context(st, "%s: ", what);
    if (sb.st_uid != geteuid())
        st = mt_errorf(MT_ERR_CONFIG, "%s %s: owned by uid %u, not by this user (uid %u)", what, path,
                       (unsigned)sb.st_uid, (unsigned)geteuid());
    else if (sb.st_mode & 077)
        st = mt_errorf(MT_ERR_CONFIG, "%s %s: mode %03o lets others read it: chmod 600 %s", what, path,
                       (unsigned)(sb.st_mode & 0777), path);
    else if (sb.st_size > MT_STORE_SECRET_MAX)
        st = mt_errorf(MT_ERR_CONFIG, "%s %s: %lld bytes, more than a secret (at most %d)", what, path,
                       (long long)sb.st_size, MT_STORE_SECRET_MAX);
    ssize_t n = st == MT_OK ? read(fd, key, MT_STORE_SECRET_MAX) : 0;
    close(fd);
    if (st != MT_OK) return st;
    if (n < 0) return mt_errorf(MT_ERR_IO, "%s %s: read failed: %s", what, path, strerror(errno));
    while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' ')) n--;
    if (n < MIN_SECRET_CHARS)
        return mt_errorf(MT_ERR_CONFIG, "%s %s: %zd bytes, fewer than %d (e.g. `openssl rand -hex 32 > %s`)", what,
                         path, n, MIN_SECRET_CHARS, path);
    *n_key = (size_t)n;
    return MT_OK;
}

/* ~/.mtrain/store_secret: created when missing */
static mt_status default_secret(uint8_t *key, size_t *n_key, char *source, size_t n_source) {
    const char *home = getenv("HOME");
    if (!home || !*home)
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: no job secret: HOME is not set, so ~/.mtrain/store_secret "
                                        "cannot be used; " FIX_HINT);
    char dir[4096], path[4200], tmp[4300];
    snprintf(dir, sizeof dir, "%s/.mtrain", home);
    snprintf(path, sizeof path, "%s/store_secret", dir);
    snprintf(source, n_source, "%s", path);
    if (access(path, F_OK) != 0) {
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: cannot create %s for the job secret: %s; " FIX_HINT, dir,
                             strerror(errno));
        uint8_t rnd[32];
        char hex[65];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return mt_errorf(MT_ERR_IO, "env:// bootstrap: getrandom failed: %s", strerror(errno));
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        int ok = fd >= 0 && write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1;
        if (fd >= 0) ok = close(fd) == 0 && ok;
        int e = errno;
        if (ok && link(tmp, path) != 0 && errno != EEXIST) {
            e = errno;
            ok = 0;
        }
        unlink(tmp);
        if (!ok)
            return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: cannot create the job secret %s: %s; " FIX_HINT, path,
                             strerror(e));
    }
    return read_secret_file(path, "env:// bootstrap: the job secret", key, n_key);
}

mt_status mt_bootstrap_store_secret(uint8_t *key, size_t *n_key, char *source, size_t n_source) {
    const char *s = getenv("MT_STORE_SECRET");
    if (s && *s) {
        size_t n = strlen(s);
        if (n < MIN_SECRET_CHARS || n > MT_STORE_SECRET_MAX)
            return mt_errorf(MT_ERR_CONFIG, "MT_STORE_SECRET has %zu characters: expected %d to %d (e.g. "
                                            "MT_STORE_SECRET=$(openssl rand -hex 32), the same for every rank)",
                             n, MIN_SECRET_CHARS, MT_STORE_SECRET_MAX);
        memcpy(key, s, n);
        *n_key = n;
        snprintf(source, n_source, "MT_STORE_SECRET");
        return MT_OK;
    }
    const char *file = getenv("MT_STORE_SECRET_FILE");
    if (file && *file) {
        snprintf(source, n_source, "MT_STORE_SECRET_FILE=%s", file);
        return read_secret_file(file, "MT_STORE_SECRET_FILE", key, n_key);
    }
    return default_secret(key, n_key, source, n_source);
}
