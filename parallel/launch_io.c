/* launch_io.c — the plumbing of `mtrain launch` that does not supervise anything: the output
 * relay (each rank's stdout / stderr passed on line by line, one write per line, with a
 * "[rR] " prefix unless the line already starts with "[r", i.e. mtrain's own
 * "[rR tpT ppP dpD]" lines) and the ranks' environment (the launcher's, without the PMIx client
 * variables of a launcher above it, with OMP_NUM_THREADS = max(1, CPUs / N) when unset and
 * N > 1, as torchrun does, and the attempt number as MT_RESTART_COUNT and
 * TORCHELASTIC_RESTART_COUNT). No exit, no libpmix. */
#include "parallel/launch_internal.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* ---- output relay ---- */

static void out_write(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 100);
        } else {
            return; /* our own stdout is gone (EPIPE...): drop the output, keep supervising */
        }
    }
}

/* writes one line (or the part of one) of rank r to fd 1 or 2 in a single write */
static void emit(int r, int which, mt_launch_linebuf *lb, const char *p, size_t n, int newline, int prefix) {
    static char out[MT_LAUNCH_LINE_BYTES + 64];
    size_t k = 0;
    if (prefix && !lb->mid_line && !(n >= 2 && p[0] == '[' && p[1] == 'r'))
        k = (size_t)snprintf(out, 64, "[r%d] ", r);
    memcpy(out + k, p, n);
    k += n;
    if (newline) out[k++] = '\n';
    lb->mid_line = !newline;
    out_write(which == 0 ? STDOUT_FILENO : STDERR_FILENO, out, k);
}

int mt_launch_relay(int *fd, mt_launch_linebuf *lb, int r, int which, int prefix) {
    for (;;) {
        ssize_t k = read(*fd, lb->buf + lb->len, sizeof lb->buf - lb->len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (k <= 0) { /* EOF or error: flush the last partial line */
            if (lb->len) emit(r, which, lb, lb->buf, lb->len, prefix, prefix);
            lb->len = 0;
            close(*fd);
            *fd = -1;
            return 0;
        }
        lb->len += (size_t)k;
        size_t start = 0;
        for (size_t i = 0; i < lb->len; i++) {
            if (lb->buf[i] != '\n') continue;
            emit(r, which, lb, lb->buf + start, i - start, 1, prefix);
            start = i + 1;
        }
        if (start) {
            memmove(lb->buf, lb->buf + start, lb->len - start);
            lb->len -= start;
        }
        if (lb->len == sizeof lb->buf) { /* a line longer than the buffer: pass it on in pieces */
            emit(r, which, lb, lb->buf, lb->len, 0, prefix);
            lb->len = 0;
        }
    }
}

/* ---- environment ---- */

void mt_launch_env_free(char **env) {
    if (!env) return;
    for (char **e = env; *e; e++) free(*e);
    free(env);
}

static int is_var(const char *entry, const char *name) {
    size_t n = strlen(name);
    return !strncmp(entry, name, n) && entry[n] == '=';
}

char **mt_launch_env_base(int n_ranks, int restart) {
    size_t n = 0;
    for (char **e = environ; *e; e++) n++;
    char **env = calloc(n + 4, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    char buf[64];
    for (char **e = environ; *e; e++) {
        if (!strncmp(*e, "PMIX_", 5) && strncmp(*e, "PMIX_MCA_", 9)) continue;
        if (is_var(*e, "MT_RESTART_COUNT") || is_var(*e, "TORCHELASTIC_RESTART_COUNT")) continue;
        if (!(env[k++] = strdup(*e))) goto oom;
    }
    if (n_ranks > 1 && !getenv("OMP_NUM_THREADS")) {
        cpu_set_t set;
        int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        int per = cpus / n_ranks > 0 ? cpus / n_ranks : 1;
        snprintf(buf, sizeof buf, "OMP_NUM_THREADS=%d", per);
        if (!(env[k++] = strdup(buf))) goto oom;
    }
    snprintf(buf, sizeof buf, "MT_RESTART_COUNT=%d", restart);
    if (!(env[k++] = strdup(buf))) goto oom;
    snprintf(buf, sizeof buf, "TORCHELASTIC_RESTART_COUNT=%d", restart);
    if (!(env[k++] = strdup(buf))) goto oom;
    env[k] = NULL;
    return env;
oom:
    mt_launch_env_free(env);
    return NULL;
}

char **mt_launch_env_copy(char **base) {
    size_t n = 0;
    while (base[n]) n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(env[i] = strdup(base[i]))) {
            mt_launch_env_free(env);
            return NULL;
        }
    return env;
}
