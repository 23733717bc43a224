/* launch_io.c — the plumbing of `mtrain launch` that does not supervise anything: the output
 * relay (each rank's stdout / stderr passed on line by line, one write per line, keeping the
 * message of a rank's last "error:" line on stderr for the launcher's own lines, with a
 * "[rR] " prefix unless the line already starts with "[r", i.e. mtrain's own
 * "[rR tpT ppP dpD]" lines, or is one of Megatron's log lines, which one rank prints and a parser
 * of Megatron's log reads as they are) and the ranks' environment (the launcher's, without the PMIx client
 * variables of a launcher above it, with OMP_NUM_THREADS = max(1, CPUs / N) when unset and
 * N > 1, as torchrun does, and the attempt number as MT_RESTART_COUNT and
 * TORCHELASTIC_RESTART_COUNT; on a node of a multi-node job, torchrun's env:// worker variables),
 * and the signal handlers' write into their self-pipe. No exit, no libpmix. */
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

/* Megatron's training_log / evaluate_and_print_results lines: " [YYYY-" (the iteration line's
 * timestamp), " validation loss at " and the lines of dashes around it */
static int megatron_line(const char *p, size_t n) {
    if (n >= 4 && p[0] == ' ' && p[1] == '[' && p[2] >= '0' && p[2] <= '9') return 1;
    if (n >= 20 && !memcmp(p, " validation loss at ", 20)) return 1;
    size_t i = 0;
    while (i < n && p[i] == '-') i++;
    return n >= 8 && i == n;
}

/* writes one line (or the part of one) of rank r to fd 1 or 2 in a single write */
static void emit(int r, int which, mt_launch_linebuf *lb, const char *p, size_t n, int newline, int prefix) {
    static char out[MT_LAUNCH_LINE_BYTES + 64];
    size_t k = 0;
    if (prefix && !lb->mid_line && !(n >= 2 && p[0] == '[' && p[1] == 'r') && !megatron_line(p, n))
        k = (size_t)snprintf(out, 64, "[r%d] ", r);
    memcpy(out + k, p, n);
    k += n;
    if (newline) out[k++] = '\n';
    lb->mid_line = !newline;
    out_write(which == 0 ? STDOUT_FILENO : STDERR_FILENO, out, k);
}

/* keeps the message of a "<tool>: error: <message>" line (mtrain's form of a rank's failure),
 * with the indented lines right after it (a message of several lines) joined on */
static void note_error(mt_launch_linebuf *lb, const char *p, size_t n) {
    static const char tag[] = ": error: ";
    const char *e = memmem(p, n, tag, sizeof tag - 1);
    size_t used = 0;
    if (e) {
        e += sizeof tag - 1;
    } else if (lb->in_error && n > 0 && (p[0] == ' ' || p[0] == '\t')) {
        for (e = p; e < p + n && (*e == ' ' || *e == '\t');) e++;
        used = strlen(lb->last_error);
        if (used + 1 < sizeof lb->last_error) lb->last_error[used++] = ' ';
    } else {
        lb->in_error = 0;
        return;
    }
    lb->in_error = 1;
    size_t k = (size_t)(p + n - e);
    if (used + k >= sizeof lb->last_error) k = sizeof lb->last_error - 1 - used;
    memcpy(lb->last_error + used, e, k);
    lb->last_error[used + k] = 0;
}

const char *mt_launch_error_suffix(const char *error, char *buf, size_t buf_bytes) {
    snprintf(buf, buf_bytes, "%s%s", error && *error ? "; its error: " : "", error ? error : "");
    return buf;
}

int mt_launch_relay(int *fd, mt_launch_linebuf *lb, int r, int which, int prefix) {
    for (;;) {
        ssize_t k = read(*fd, lb->buf + lb->len, sizeof lb->buf - lb->len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (k <= 0) { /* EOF or error: flush the last partial line */
            if (lb->len && which == 1) note_error(lb, lb->buf, lb->len);
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
            if (which == 1) note_error(lb, lb->buf + start, i - start);
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

/* sets NAME=VALUE in the heap array *env, replacing an entry of that name */
static int env_set(char ***env, const char *name, const char *value) {
    size_t n = 0, len = strlen(name) + strlen(value) + 2;
    char *entry = malloc(len);
    if (!entry) return 0;
    snprintf(entry, len, "%s=%s", name, value);
    for (; (*env)[n]; n++)
        if (is_var((*env)[n], name)) {
            free((*env)[n]);
            (*env)[n] = entry;
            return 1;
        }
    char **grown = realloc(*env, (n + 2) * sizeof *grown);
    if (!grown) {
        free(entry);
        return 0;
    }
    grown[n] = entry;
    grown[n + 1] = NULL;
    *env = grown;
    return 1;
}

mt_status mt_launch_env_torchrun(const mt_launch_opts *o, int local_rank, int restart, char ***env) {
    (void)restart; /* TORCHELASTIC_RESTART_COUNT is in the base environment */
    const int n = o->n_ranks, world = o->n_nodes * n, rank = o->node_rank * n + local_rank;
    char v[16][32];
    snprintf(v[0], sizeof v[0], "%d", rank);
    snprintf(v[1], sizeof v[1], "%d", local_rank);
    snprintf(v[2], sizeof v[2], "%d", world);
    snprintf(v[3], sizeof v[3], "%d", n);
    snprintf(v[4], sizeof v[4], "%d", o->node_rank);
    snprintf(v[5], sizeof v[5], "%d", o->n_nodes);
    snprintf(v[6], sizeof v[6], "%d", o->master_port);
    snprintf(v[7], sizeof v[7], "%d", o->max_restarts);
    const char *const kv[][2] = {
        {"RANK", v[0]},           {"LOCAL_RANK", v[1]},         {"WORLD_SIZE", v[2]},
        {"LOCAL_WORLD_SIZE", v[3]}, {"GROUP_RANK", v[4]},       {"GROUP_WORLD_SIZE", v[5]},
        {"ROLE_RANK", v[0]},      {"ROLE_WORLD_SIZE", v[2]},    {"ROLE_NAME", o->role ? o->role : "default"},
        {"MASTER_ADDR", o->master_addr}, {"MASTER_PORT", v[6]},
        {"TORCHELASTIC_RUN_ID", o->run_id ? o->run_id : "none"}, {"TORCHELASTIC_MAX_RESTARTS", v[7]},
        {"MT_BOOTSTRAP", "env"},
        {"TORCHELASTIC_USE_AGENT_STORE", "False"}, /* the store is rank 0's, on MASTER_PORT itself */
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (!env_set(env, kv[i][0], kv[i][1])) return mt_errorf(MT_ERR_OOM, "mtrain launch: out of memory");
    return MT_OK;
}

void mt_launch_signal_to_pipe(int fd, int sig) {
    int saved = errno;
    char c = (char)sig;
    ssize_t k = write(fd, &c, 1);
    (void)k;
    errno = saved;
}
