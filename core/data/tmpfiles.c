/* tmpfiles.c — owner-named temporaries: naming, the cleanup-on-signal table and handler, and
 * the removal of temporaries whose owner died (see tmpfiles.h).
 * Rule kept: a name is removed only when it is exactly "<base>.<tag>.<digits>[.<rest>]", the
 * digits are a pid other than ours, and kill(pid, 0) says ESRCH (no such process). */
#include "core/data/tmpfiles.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TMP 64
#define MAX_PATH 4096

static struct {
    atomic_int used;
    char path[MAX_PATH];
} g_tmp[MAX_TMP];

static const int k_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction g_old[3];
static int g_installed;

mt_status mt_tmpfiles_name(const char *final_path, const char *tag, char *out, size_t n_out) {
    int n = snprintf(out, n_out, "%s.%s.%ld", final_path, tag, (long)getpid());
    if (n < 0 || (size_t)n >= n_out) {
        return mt_errorf(MT_ERR_CONFIG, "%s: path too long for its temporary name", final_path);
    }
    return MT_OK;
}

int mt_tmpfiles_register(const char *path) {
    size_t n = strlen(path);
    if (n >= MAX_PATH) return -1;
    for (int i = 0; i < MAX_TMP; i++) {
        int expect = 0;
        /* 2 = being filled: the handler skips it */
        if (atomic_compare_exchange_strong(&g_tmp[i].used, &expect, 2)) {
            memcpy(g_tmp[i].path, path, n + 1);
            atomic_store(&g_tmp[i].used, 1);
            return i;
        }
    }
    return -1;
}

void mt_tmpfiles_forget(int slot) {
    if (slot >= 0 && slot < MAX_TMP) atomic_store(&g_tmp[slot].used, 0);
}

static void on_signal(int sig) {
    for (int i = 0; i < MAX_TMP; i++) {
        if (atomic_load(&g_tmp[i].used) == 1) unlink(g_tmp[i].path);
    }
    for (int k = 0; k < 3; k++) {
        if (k_signals[k] == sig) sigaction(sig, &g_old[k], NULL);
    }
    /* The previous action was a handler (not ours): let it run too; else die by the signal. */
    raise(sig);
}

void mt_tmpfiles_signals_install(void) {
    if (g_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 3; k++) sigaddset(&sa.sa_mask, k_signals[k]);
    for (int k = 0; k < 3; k++) {
        sigaction(k_signals[k], NULL, &g_old[k]);
        /* A signal ignored by whoever started us (nohup) stays ignored. */
        if (g_old[k].sa_handler == SIG_IGN) continue;
        sigaction(k_signals[k], &sa, NULL);
    }
    g_installed = 1;
}

void mt_tmpfiles_signals_restore(void) {
    if (!g_installed) return;
    for (int k = 0; k < 3; k++) sigaction(k_signals[k], &g_old[k], NULL);
    g_installed = 0;
}

/* name == "<base>.<tag>.<digits>" or "<base>.<tag>.<digits>.<rest>" (base given, or any base
 * ending in base_suffix when base is NULL): the pid, else 0. */
static long owner_pid(const char *name, const char *base, const char *base_suffix,
                      const char *tag) {
    char mid[80];
    int nm = snprintf(mid, sizeof mid, ".%s.", tag);
    if (nm < 0 || (size_t)nm >= sizeof mid) return 0;
    const char *p;
    if (base) {
        size_t nb = strlen(base);
        if (strncmp(name, base, nb) != 0 || strncmp(name + nb, mid, (size_t)nm) != 0) return 0;
        p = name + nb + nm;
    } else {
        const char *hit = strstr(name, mid);
        if (!hit) return 0;
        size_t ns = strlen(base_suffix), nb = (size_t)(hit - name);
        if (nb < ns || strncmp(hit - ns, base_suffix, ns) != 0) return 0;
        p = hit + nm;
    }
    if (*p < '0' || *p > '9') return 0;
    char *end;
    long pid = strtol(p, &end, 10);
    if (*end != 0 && *end != '.') return 0;
    return pid > 0 ? pid : 0;
}

static void remove_stale(const char *dir, const char *base, const char *base_suffix,
                         const char *tag, int *n_removed) {
    DIR *d = opendir(dir[0] ? dir : ".");
    if (!d) return;
    long me = (long)getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = owner_pid(e->d_name, base, base_suffix, tag);
        if (pid <= 0 || pid == me) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to see) */
        char path[MAX_PATH + 256];
        int n = snprintf(path, sizeof path, "%s%s%s", dir, dir[0] ? "/" : "", e->d_name);
        if (n < 0 || (size_t)n >= sizeof path) continue;
        if (unlink(path) == 0 && n_removed) (*n_removed)++;
    }
    closedir(d);
}

void mt_tmpfiles_remove_stale(const char *final_path, const char *tag, int *n_removed) {
    char dir[MAX_PATH];
    const char *slash = strrchr(final_path, '/');
    const char *base = slash ? slash + 1 : final_path;
    size_t nd = slash ? (size_t)(slash - final_path) : 0;
    if (nd >= sizeof dir) return;
    if (slash && nd == 0) {
        strcpy(dir, "/");
    } else {
        memcpy(dir, final_path, nd);
        dir[nd] = 0;
    }
    if (!base[0]) return;
    remove_stale(dir, base, NULL, tag, n_removed);
}

void mt_tmpfiles_remove_stale_in(const char *dir, const char *name_suffix, const char *tag,
                                 int *n_removed) {
    remove_stale(dir, NULL, name_suffix, tag, n_removed);
}
