/* checkpoint_dir.c — the save folder (checkpoint.dir, --save) before the first iteration, so
 * that a run that cannot save learns it before computing anything (checkpoint.h):
 *   - rank 0 creates it if needed and checks it is a folder it can write in;
 *   - rank 0 takes an exclusive flock on DIR/mtrain.lock for the whole run (released by the
 *     kernel when the process ends, however it ends), its host and pid written in the file, so a
 *     second run saving into DIR is refused at once, naming the holder;
 *   - holding the lock proves nobody else writes in DIR, so rank 0 then removes what interrupted
 *     saves and removals left (ckpt_files.h: mt_ckpt_sweep_remnants) and finishes a retention
 *     (checkpoint.keep) that a kill cut short, so that DIR never holds more than keep + 1 saves;
 *   - the free space must hold one save: the sum over the ranks of their snapshot sizes (the
 *     payload the saver writes; the files' headers and the manifest, a few KiB each, are not
 *     counted: a save that fails on them still fails cleanly, leaving the previous one named).
 * Every rank returns the same verdict (two allreduces over the world). */
#include "train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"

#define LOCK_NAME "mtrain.lock"
#define DIR_KEY "checkpoint.dir (--save)"

static mt_status sum_world(const mt_parallel_state *ps, mt_backend *be, float *v, int n) {
    mt_status st = MT_OK;
    const mt_group *w = mt_pstate_group(ps, MT_PG_WORLD);
    void *buf = NULL;
    if (w->size <= 1) return MT_OK;
    MT_CHECK(be->i->alloc(be, (size_t)n * sizeof *v, &buf));
    MT_CHECK(be->i->copy_h2d(be, buf, v, (size_t)n * sizeof *v));
    MT_CHECK(w->comm->i->allreduce(w->comm, buf, buf, (size_t)n, MT_F32, MT_RED_SUM));
    MT_CHECK(be->i->copy_d2h(be, v, buf, (size_t)n * sizeof *v));
out:
    if (buf) be->i->free(be, buf);
    return st;
}

/* a folder, writable (a probe file created and removed) */
static mt_status check_folder(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return mt_errorf(MT_ERR_CONFIG, DIR_KEY " %s: not a folder: give a folder to save checkpoints in", dir);
    mt_status st = mt_mkdirs(dir);
    if (st != MT_OK) return mt_error_context(st, DIR_KEY ": ");
    char probe[MT_CKPT_PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.mtrain-write-probe.%d", dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return mt_errorf(MT_ERR_IO, DIR_KEY " %s: cannot write in it: %s; saves would fail: give a writable folder",
                         dir, strerror(errno));
    close(fd);
    unlink(probe);
    return MT_OK;
}

/* the exclusive lock of the folder, for the life of this process */
static mt_status lock_folder(const char *dir, int *lock_fd_plus1) {
    char path[MT_CKPT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return mt_errorf(MT_ERR_IO, "%s: cannot create the save folder's lock: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[160] = "";
        for (int i = 0; i < 20 && !holder[0]; i++) { /* the holder writes itself right after locking */
            ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            holder[n > 0 ? n : 0] = 0;
            if (!holder[0]) usleep(5000);
        }
        close(fd);
        holder[strcspn(holder, "\n")] = 0;
        if (e != EWOULDBLOCK) return mt_errorf(MT_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
        return mt_errorf(MT_ERR_CONFIG, DIR_KEY " %s is in use by another run (%s holds %s): two runs saving into "
                         "one folder delete each other's saves; wait for it to end, or give this run another --save",
                         dir, holder[0] ? holder : "a process that has not written its name yet", path);
    }
    char me[160], host[64] = "";
    gethostname(host, sizeof host - 1);
    int n = snprintf(me, sizeof me, "pid %d on host %s\n", (int)getpid(), host[0] ? host : "?");
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return mt_errorf(MT_ERR_IO, "%s: cannot write the lock: %s", path, strerror(e));
    }
    *lock_fd_plus1 = fd + 1;
    return MT_OK;
}

/* rank 0: folder, lock, remnants */
static mt_status open_on_rank0(mt_ckpt_saver *s, const mt_recipe *r, FILE *log) {
    const char *dir = r->checkpoint.dir;
    mt_status st = check_folder(dir);
    if (st == MT_OK && !s->lock_fd_plus1) st = lock_folder(dir, &s->lock_fd_plus1);
    if (st != MT_OK) return st;
    int64_t tracker = -1;
    if (mt_ckpt_read_tracker(dir, &tracker) != MT_OK) tracker = -1;
    int n_removed = 0;
    st = mt_ckpt_sweep_remnants(dir, tracker < 0 ? 0 : tracker, &n_removed);
    if (st == MT_OK && n_removed && log)
        fprintf(log, "checkpoint: removed %d folder(s) that interrupted saves or removals left in %s\n", n_removed,
                dir);
    /* a retention that a kill cut short: finished now, so that the first save starts from at most
     * checkpoint.keep saves; not when the load may want an older save of DIR (an iteration asked
     * for, or a --load that is not DIR itself, e.g. DIR/iter_N) */
    const char *load = r->checkpoint.load;
    size_t n_dir = strlen(dir), n_load = strlen(load);
    while (n_dir > 1 && dir[n_dir - 1] == '/') n_dir--;
    while (n_load > 1 && load[n_load - 1] == '/') n_load--;
    const int load_is_dir = !load[0] || (n_load == n_dir && !strncmp(load, dir, n_dir));
    if (st == MT_OK && r->checkpoint.keep > 0 && r->checkpoint.load_iteration == 0 && load_is_dir)
        st = mt_ckpt_apply_keep(dir, r->checkpoint.keep, tracker);
    return st;
}

mt_status mt_ckpt_dir_open(mt_ckpt_saver *s, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                           FILE *log) {
    mt_status st = MT_OK, local = MT_OK;
    const char *dir = r->checkpoint.dir;
    char err[1024] = "";
    if (ps->rank == 0) local = open_on_rank0(s, r, log);
    if (local != MT_OK) snprintf(err, sizeof err, "%s", mt_last_error());
    float v[2] = {local != MT_OK ? 1.0f : 0.0f, (float)(s->snapshot_bytes / 1048576.0)};
    MT_CHECK(sum_world(ps, be, v, 2));
    if (v[0] > 0)
        return local != MT_OK ? mt_errorf(local, "%s", err)
                              : mt_errorf(MT_ERR_CONFIG, DIR_KEY " %s: rank 0 cannot save there (its log says why)", dir);
    float bad = 0;
    if (ps->rank == 0) {
        struct statvfs fs;
        const double need = (double)v[1] * 1048576.0;
        if (statvfs(dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < need) {
            local = mt_errorf(MT_ERR_IO, DIR_KEY " %s: %.1f MiB free, one save needs %.1f MiB (every rank's state): "
                              "free space there or give another --save",
                              dir, (double)fs.f_bavail * (double)fs.f_frsize / 1048576.0, need / 1048576.0);
            snprintf(err, sizeof err, "%s", mt_last_error());
            bad = 1;
        }
    }
    MT_CHECK(sum_world(ps, be, &bad, 1));
    if (bad > 0)
        return local != MT_OK ? mt_errorf(local, "%s", err)
                              : mt_errorf(MT_ERR_IO, DIR_KEY " %s: not enough free space for one save (rank 0's log "
                                          "says how much)", dir);
out:
    return st;
}
