/* ckpt_files.c — the checkpoint folder's file-system steps (ckpt_files.h): tracker, fsync of
 * folders, removal of a save, listing of complete saves. POSIX calls only. */
#include "core/ckpt/ckpt_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/manifest.h"
#include "core/file_read.h"

void mt_ckpt_iter_path(const char *root, int64_t iteration, const char *suffix, char *buf, size_t n_bytes) {
    snprintf(buf, n_bytes, "%s/iter_%07" PRId64 "%s", root, iteration, suffix ? suffix : "");
}

mt_status mt_ckpt_read_tracker(const char *root, int64_t *iteration) {
    char path[MT_CKPT_PATH_MAX], text[64];
    snprintf(path, sizeof path, "%s/%s", root, MT_CKPT_TRACKER);
    int fd, open_errno;
    struct stat sb;
    mt_status st = mt_open_regular(path, &fd, &sb, &open_errno);
    if (st != MT_OK && open_errno)
        return mt_errorf(MT_ERR_IO, "%s: cannot open the checkpoint tracker: %s", path, strerror(open_errno));
    if (st != MT_OK) return st;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    while (end && (*end == '\n' || *end == ' ' || *end == '\r')) end++;
    if (errno || end == text || *end || v < 0)
        return mt_errorf(MT_ERR_DATA, "%s: the tracker should hold an iteration number, holds \"%.20s\"; fix or "
                         "delete it, or load a save by iteration (checkpoint.load_iteration / --ckpt-step)", path, text);
    *iteration = v;
    return MT_OK;
}

mt_status mt_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return mt_errorf(MT_ERR_IO, "%s: cannot open folder to fsync: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc && e != EINVAL) return mt_errorf(MT_ERR_IO, "%s: fsync of folder failed: %s", dir, strerror(e));
    return MT_OK;
}

mt_status mt_ckpt_write_tracker(const char *root, int64_t iteration, int do_fsync) {
    char path[MT_CKPT_PATH_MAX], tmp[MT_CKPT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", root, MT_CKPT_TRACKER);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return mt_errorf(MT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    char text[32];
    int n = snprintf(text, sizeof text, "%" PRId64 "\n", iteration);
    ssize_t w = write(fd, text, (size_t)n);
    int e = errno;
    if (w == n && do_fsync && fsync(fd)) w = -1, e = errno;
    if (close(fd) && w == n) w = -1, e = errno;
    if (w != n) {
        unlink(tmp);
        return mt_errorf(MT_ERR_IO, "%s: write failed: %s; the previous tracker is unchanged", tmp,
                         w < 0 ? strerror(e) : "short write");
    }
    if (rename(tmp, path)) {
        e = errno;
        unlink(tmp);
        return mt_errorf(MT_ERR_IO, "%s: cannot rename into place: %s", path, strerror(e));
    }
    return do_fsync ? mt_fsync_dir(root) : MT_OK;
}

mt_status mt_remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? MT_OK : mt_errorf(MT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    /* the manifest first: a removal cut short (kill -9) must not leave a folder that looks like a
     * complete save (mt_ckpt_is_save_dir) with some of its rank files gone */
    char mf[MT_CKPT_PATH_MAX + 64];
    snprintf(mf, sizeof mf, "%s/%s", dir, MT_MANIFEST_NAME);
    if (unlink(mf) && errno != ENOENT) {
        int err = errno;
        closedir(d);
        return mt_errorf(MT_ERR_IO, "%s: cannot remove: %s", mf, strerror(err));
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[MT_CKPT_PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) && errno != ENOENT) {
            int err = errno;
            closedir(d);
            return mt_errorf(MT_ERR_IO, "%s: cannot remove: %s", p, strerror(err));
        }
    }
    closedir(d);
    if (rmdir(dir) && errno != ENOENT) return mt_errorf(MT_ERR_IO, "%s: cannot remove: %s", dir, strerror(errno));
    return MT_OK;
}

mt_status mt_mkdirs(const char *dir) {
    char p[MT_CKPT_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return mt_errorf(MT_ERR_IO, "%s: cannot create folder: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) && errno != EEXIST) return mt_errorf(MT_ERR_IO, "%s: cannot create folder: %s", p, strerror(errno));
    return MT_OK;
}

int mt_ckpt_is_save_dir(const char *dir) {
    char p[MT_CKPT_PATH_MAX + 512];
    snprintf(p, sizeof p, "%s/%s", dir, MT_MANIFEST_NAME);
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int mt_ckpt_list_saves(const char *root, int64_t *its, int max) {
    DIR *d = opendir(root);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *s = e->d_name;
        if (strncmp(s, "iter_", 5) || strlen(s) < 12) continue;
        char *end = NULL;
        long long v = strtoll(s + 5, &end, 10);
        if (*end || v < 0) continue; /* iter_N.tmp and others */
        char p[MT_CKPT_PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%.255s", root, s) >= (int)sizeof p || !mt_ckpt_is_save_dir(p)) continue;
        if (its && n < max) its[n] = v;
        n++;
    }
    closedir(d);
    if (its) qsort(its, (size_t)(n < max ? n : max), sizeof *its, cmp_i64);
    return n;
}

mt_status mt_ckpt_remove_save(const char *root, int64_t iteration) {
    char dir[MT_CKPT_PATH_MAX], del[MT_CKPT_PATH_MAX];
    mt_ckpt_iter_path(root, iteration, NULL, dir, sizeof dir);
    mt_ckpt_iter_path(root, iteration, ".del", del, sizeof del);
    mt_status st = mt_remove_flat_dir(del);
    if (st != MT_OK) return st;
    /* off its final name in one step: a removal cut short leaves iter_N.del, never a final name
     * without a manifest or with some rank files gone */
    if (rename(dir, del)) {
        if (errno == ENOENT) return MT_OK;
        return mt_errorf(MT_ERR_IO, "%s: cannot move aside for removal: %s", dir, strerror(errno));
    }
    return mt_remove_flat_dir(del);
}

/* iter_N (suffix "" or a known one) -> N and the suffix; -1 for other names */
static int64_t entry_iteration(const char *name, const char **suffix) {
    if (strncmp(name, "iter_", 5) || strlen(name) < 12) return -1;
    char *end = NULL;
    long long v = strtoll(name + 5, &end, 10);
    if (v < 0 || end == name + 5) return -1;
    if (*end && strcmp(end, ".tmp") && strcmp(end, ".del")) return -1; /* iter_N.old may be the only copy */
    *suffix = end;
    return v;
}

mt_status mt_ckpt_sweep_remnants(const char *root, int64_t below, int *n_removed) {
    *n_removed = 0;
    DIR *d = opendir(root);
    if (!d) return errno == ENOENT ? MT_OK : mt_errorf(MT_ERR_IO, "%s: cannot open: %s", root, strerror(errno));
    mt_status st = MT_OK;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) { /* collect first: removing while reading skips entries */
        const char *suffix = NULL;
        int64_t it = entry_iteration(e->d_name, &suffix);
        if (it < 0) continue;
        char p[MT_CKPT_PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%.255s", root, e->d_name) >= (int)sizeof p) continue;
        int remnant = *suffix || (it < below && !mt_ckpt_is_save_dir(p));
        if (!remnant) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, (size_t)cap * sizeof *names);
            if (!grown) {
                st = mt_errorf(MT_ERR_OOM, "%s: listing remnants", root);
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(p))) {
            st = mt_errorf(MT_ERR_OOM, "%s: listing remnants", root);
            break;
        }
        n++;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        if (st == MT_OK) st = mt_remove_flat_dir(names[i]);
        if (st == MT_OK) (*n_removed)++;
        free(names[i]);
    }
    free(names);
    return st;
}

mt_status mt_ckpt_apply_keep(const char *root, int keep, int64_t protect) {
    int64_t its[4096];
    int n = mt_ckpt_list_saves(root, its, 4096);
    if (n > 4096) n = 4096;
    for (int i = 0; i + keep < n; i++)
        if (its[i] != protect) {
            mt_status st = mt_ckpt_remove_save(root, its[i]);
            if (st != MT_OK) return st;
        }
    return MT_OK;
}
