/* mapped_files.c — file identities re-checked on demand, and the SIGBUS handler for faults in
 * registered dataset mappings (see mapped_files.h).
 * Rule kept: the handler only reads the slot table (each slot published by an atomic store of
 * its `used` flag after the fields), writes one line with write(2) and leaves with _exit(1). */
#include "core/data/mapped_files.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define MAX_MAPPINGS 1024

typedef struct {
    atomic_int used;
    uintptr_t addr;
    size_t n_bytes;
    const char *path;
} slot;

static slot g_slots[MAX_MAPPINGS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_installed;
static struct sigaction g_old;

void mt_file_id_from_stat(mt_file_id *id, const struct stat *sb) {
    id->dev = (uint64_t)sb->st_dev;
    id->ino = (uint64_t)sb->st_ino;
    id->size = (int64_t)sb->st_size;
    id->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + (int64_t)sb->st_mtim.tv_nsec;
}

mt_status mt_file_id_check(const mt_file_id *id, const char *path, const char *what) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return mt_errorf(MT_ERR_IO, "%s: removed or unreadable while %s: %s (restore the file "
                         "and restart; to change a dataset, write a new prefix with mtrain "
                         "preprocess instead of replacing it under a run)", path, what,
                         strerror(errno));
    }
    mt_file_id now;
    mt_file_id_from_stat(&now, &sb);
    if (now.dev != id->dev || now.ino != id->ino) {
        return mt_errorf(MT_ERR_DATA, "%s changed while %s: it was replaced by another file "
                         "(inode %llu, now %llu; %lld bytes, now %lld): the samples would no "
                         "longer be the ones this run started with; restore the file and "
                         "restart (to change a dataset, write a new prefix with mtrain "
                         "preprocess and point data.path at it)", path, what,
                         (unsigned long long)id->ino, (unsigned long long)now.ino,
                         (long long)id->size, (long long)now.size);
    }
    if (now.size != id->size || now.mtime_ns != id->mtime_ns) {
        return mt_errorf(MT_ERR_DATA, "%s changed while %s: it was rewritten in place (%lld "
                         "bytes, now %lld%s): the samples would no longer be the ones this run "
                         "started with; restore the file and restart (to change a dataset, "
                         "write a new prefix with mtrain preprocess and point data.path at it)",
                         path, what, (long long)id->size, (long long)now.size,
                         now.size == id->size ? ", modification time changed" : "");
    }
    return MT_OK;
}

/* ---- the SIGBUS message --------------------------------------------------------------- */

static size_t put_str(char *buf, size_t n, size_t at, const char *s) {
    while (*s && at + 1 < n) buf[at++] = *s++;
    return at;
}

static size_t put_u64(char *buf, size_t n, size_t at, uint64_t v) {
    char d[24];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k > 0 && at + 1 < n) buf[at++] = d[--k];
    return at;
}

size_t mt_mapped_format_fault(char *buf, size_t n, const char *path, uint64_t offset,
                              uint64_t n_mapped) {
    size_t at = 0;
    if (n == 0) return 0;
    at = put_str(buf, n, at, "mtrain: error: ");
    at = put_str(buf, n, at, path);
    at = put_str(buf, n, at, " changed or was truncated while training read it (SIGBUS at "
                             "offset ");
    at = put_u64(buf, n, at, offset);
    at = put_str(buf, n, at, " of the ");
    at = put_u64(buf, n, at, n_mapped);
    at = put_str(buf, n, at, " bytes it had at open): restore the file and restart; to "
                             "change a dataset, write a new prefix with mtrain preprocess "
                             "instead of overwriting it under a run\n");
    buf[at] = 0;
    return at;
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    uintptr_t a = (uintptr_t)info->si_addr;
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        slot *s = &g_slots[i];
        if (!atomic_load(&s->used)) continue;
        if (a >= s->addr && a - s->addr < s->n_bytes) {
            char msg[1536];
            size_t len = mt_mapped_format_fault(msg, sizeof msg, s->path,
                                                (uint64_t)(a - s->addr), (uint64_t)s->n_bytes);
            ssize_t w = write(2, msg, len);
            (void)w;
            _exit(1);
        }
    }
    /* Not ours: hand it to whoever was there before (by default the fault repeats on return
     * under SIG_DFL and the process dies with SIGBUS as it would have). */
    if ((g_old.sa_flags & SA_SIGINFO) && g_old.sa_sigaction) {
        g_old.sa_sigaction(sig, info, uctx);
    } else if (g_old.sa_handler != SIG_DFL && g_old.sa_handler != SIG_IGN && g_old.sa_handler) {
        g_old.sa_handler(sig);
    } else {
        signal(SIGBUS, SIG_DFL);
    }
}

int mt_mapped_register(const void *addr, size_t n_bytes, const char *path) {
    int got = -1;
    pthread_mutex_lock(&g_mu);
    if (!g_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &g_old) == 0) g_installed = 1;
    }
    for (int i = 0; i < MAX_MAPPINGS && got < 0; i++) {
        if (atomic_load(&g_slots[i].used)) continue;
        g_slots[i].addr = (uintptr_t)addr;
        g_slots[i].n_bytes = n_bytes;
        g_slots[i].path = path;
        atomic_store(&g_slots[i].used, 1);
        got = i;
    }
    pthread_mutex_unlock(&g_mu);
    return got;
}

void mt_mapped_unregister(int slot_index) {
    if (slot_index < 0 || slot_index >= MAX_MAPPINGS) return;
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_slots[slot_index].used, 0);
    pthread_mutex_unlock(&g_mu);
}
