/* launch.c — the process half of `mtrain launch` (the PMIx half is launch_pmix_server.c):
 * forks N ranks running `exe ARGS` with the PMIx client environment, relays each rank's
 * stdout/stderr line by line with a "[rR] " prefix (skipped for lines that already start with
 * "[r", i.e. mtrain's own "[rR tpT ppP dpD]" lines), forwards SIGINT/SIGTERM/SIGHUP (a second
 * one kills), and when a rank exits non-zero, is killed by a signal or calls PMIx_Abort, names
 * it, gives the others MT_LAUNCH_PEER_GRACE_S (10 s) to notice it and exit on their own, then
 * SIGTERMs them, SIGKILLs what is left after the kill grace period and exits with that
 * rank's status (128 + signal for a signal).
 * Process control lives here on purpose: this file (with cmd/) is allowed _exit — in forked
 * children before exec, and on the failure path, where libpmix 4.2.2 must not be torn down
 * (observed: PMIx_server_finalize, a use-after-free inside libpmix, can segfault after a
 * client died while a fence was in flight; see launch.h). Children set PR_SET_PDEATHSIG(SIGKILL) so no rank outlives a killed launcher.
 * If OMP_NUM_THREADS is unset and N > 1, each rank gets OMP_NUM_THREADS = max(1, CPUs / N), as
 * torchrun does, so N ranks do not oversubscribe the machine. Rank 0 keeps stdin; the others
 * read /dev/null. */
#include "parallel/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "parallel/launch_internal.h"

extern char **environ;

#define MAX_RANKS 4096
#define LINE_BYTES 16384

typedef struct {
    char buf[LINE_BYTES];
    size_t len;
    int mid_line; /* the last chunk written ended without a newline: no prefix before the next */
} linebuf;

typedef struct {
    pid_t pid;
    int fd[2]; /* read ends of the rank's stdout, stderr pipes; -1 once closed */
    linebuf lb[2];
    int running;
} rank_t;

static int g_sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    char c = (char)sig;
    ssize_t k = write(g_sig_pipe[1], &c, 1);
    (void)k;
    errno = saved;
}

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
static void emit(int r, int which, linebuf *lb, const char *p, size_t n, int newline, int prefix) {
    static char out[LINE_BYTES + 64];
    size_t k = 0;
    if (prefix && !lb->mid_line && !(n >= 2 && p[0] == '[' && p[1] == 'r'))
        k = (size_t)snprintf(out, 64, "[r%d] ", r);
    memcpy(out + k, p, n);
    k += n;
    if (newline) out[k++] = '\n';
    lb->mid_line = !newline;
    out_write(which == 0 ? STDOUT_FILENO : STDERR_FILENO, out, k);
}

/* reads what is available on one pipe; returns 0 once the pipe is at EOF (and closed) */
static int relay(rank_t *rk, int r, int which, int prefix) {
    linebuf *lb = &rk->lb[which];
    for (;;) {
        ssize_t k = read(rk->fd[which], lb->buf + lb->len, sizeof lb->buf - lb->len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (k <= 0) { /* EOF or error: flush the last partial line */
            if (lb->len) emit(r, which, lb, lb->buf, lb->len, prefix, prefix);
            lb->len = 0;
            close(rk->fd[which]);
            rk->fd[which] = -1;
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

static void free_env(char **env) {
    if (!env) return;
    for (char **e = env; *e; e++) free(*e);
    free(env);
}

/* heap copy of environ without the PMIx client variables of any launcher above us (PMIX_MCA_*
 * tuning stays), plus OMP_NUM_THREADS when unset */
static char **child_env_base(int n_ranks) {
    size_t n = 0;
    for (char **e = environ; *e; e++) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        if (!strncmp(*e, "PMIX_", 5) && strncmp(*e, "PMIX_MCA_", 9)) continue;
        if (!(env[k++] = strdup(*e))) goto oom;
    }
    if (n_ranks > 1 && !getenv("OMP_NUM_THREADS")) {
        cpu_set_t set;
        int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        int per = cpus / n_ranks > 0 ? cpus / n_ranks : 1;
        char buf[64];
        snprintf(buf, sizeof buf, "OMP_NUM_THREADS=%d", per);
        if (!(env[k++] = strdup(buf))) goto oom;
    }
    env[k] = NULL;
    return env;
oom:
    free_env(env);
    return NULL;
}

static char **copy_env(char **base) {
    size_t n = 0;
    while (base[n]) n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(env[i] = strdup(base[i]))) {
            free_env(env);
            return NULL;
        }
    return env;
}

/* ---- supervision ---- */

typedef struct {
    const mt_launch_opts *o;
    rank_t *ranks;
    int n, n_running;
    int failed, fail_rank, fail_code;
    int interrupted, n_interrupts;
    int64_t term_at; /* when the survivors of a failure get SIGTERM (after they had a chance to report) */
    int64_t kill_at;
} job_t;

/* After a rank fails, the others first get MT_LAUNCH_PEER_GRACE_S seconds (default 10) to notice
 * it through their communicators and exit on their own, each naming the failed rank; only then
 * are they sent SIGTERM (and SIGKILL after the kill grace). */
static int64_t peer_grace_ms(void) {
    const char *v = getenv("MT_LAUNCH_PEER_GRACE_S");
    double s = v && *v ? atof(v) : 10.0;
    return (int64_t)(s < 0 ? 0 : s * 1000);
}

static void signal_ranks(job_t *j, int sig, int except) {
    for (int r = 0; r < j->n; r++) {
        if (!j->ranks[r].running || r == except) continue;
        kill(j->ranks[r].pid, sig);
        if (sig != SIGKILL && sig != SIGCONT) kill(j->ranks[r].pid, SIGCONT); /* a stopped rank acts on it */
    }
}

static void stop_others(job_t *j, int except) {
    signal_ranks(j, SIGTERM, except);
    j->kill_at = mt_clock_ms_i64() + (int64_t)(j->o->kill_grace_s > 0 ? j->o->kill_grace_s * 1000 : 5000);
}

static void stop_others_later(job_t *j) { j->term_at = mt_clock_ms_i64() + peer_grace_ms(); }

static void drain_rank(job_t *j, int r) {
    for (int w = 0; w < 2; w++)
        if (j->ranks[r].fd[w] >= 0) relay(&j->ranks[r], r, w, j->o->prefix);
}

static void reap(job_t *j) {
    int ws;
    pid_t pid;
    while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
        int r = 0;
        while (r < j->n && j->ranks[r].pid != pid) r++;
        if (r == j->n || !j->ranks[r].running) continue;
        j->ranks[r].running = 0;
        j->n_running--;
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
        if (code == 0 || j->failed || j->interrupted) continue;
        j->failed = 1;
        j->fail_rank = r;
        j->fail_code = code;
        drain_rank(j, r); /* its last words first */
        if (WIFSIGNALED(ws))
            fprintf(stderr, "mtrain launch: rank %d was killed by signal %d (%s); stopping the other %d rank(s)\n", r,
                    WTERMSIG(ws), strsignal(WTERMSIG(ws)), j->n_running);
        else
            fprintf(stderr, "mtrain launch: rank %d exited with status %d; stopping the other %d rank(s)\n", r, code,
                    j->n_running);
        stop_others_later(j);
    }
}

static void on_interrupt(job_t *j, int sig) {
    j->n_interrupts++;
    if (j->n_interrupts == 1 && !j->failed) {
        j->interrupted = sig;
        fprintf(stderr, "mtrain launch: got %s, passing it to the %d running rank(s) (again to kill them)\n",
                strsignal(sig), j->n_running);
        signal_ranks(j, sig, -1);
        j->kill_at = mt_clock_ms_i64() + (int64_t)(j->o->kill_grace_s > 0 ? j->o->kill_grace_s * 1000 : 5000);
    } else {
        if (!j->interrupted && !j->failed) j->interrupted = sig;
        fprintf(stderr, "mtrain launch: got %s again, killing the %d remaining rank(s)\n", strsignal(sig),
                j->n_running);
        signal_ranks(j, SIGKILL, -1);
        j->kill_at = 0;
    }
}

static void on_abort(job_t *j) {
    int r, status;
    char msg[512];
    if (!mt_launch_pmix_abort_info(&r, &status, msg, sizeof msg) || j->failed || j->interrupted) return;
    j->failed = 1;
    j->fail_rank = r;
    j->fail_code = status > 0 && status < 256 ? status : 1;
    fprintf(stderr, "mtrain launch: rank %d called PMIx_Abort(status %d)%s%s; stopping all %d rank(s)\n", r, status,
            msg[0] ? ": " : "", msg, j->n_running);
    stop_others(j, -1); /* the aborting rank included: PMIx_Abort asks the server to kill it */
}

/* Failure path: never returns (see launch.h for why _exit) */
static void die(job_t *j, int code) {
    if (j) signal_ranks(j, SIGKILL, -1);
    mt_launch_pmix_remove_tmpdir();
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

static void install_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void restore_handlers(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

/* fork + exec one rank; only async-signal-safe calls in the child (libpmix has threads) */
static mt_status spawn(job_t *j, int r, char **env, const char *exe) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    }
    char fail_msg[512];
    int n_fail = snprintf(fail_msg, sizeof fail_msg, "mtrain launch: rank %d: cannot execute %s\n", r, exe);
    if (n_fail < 0 || n_fail >= (int)sizeof fail_msg) n_fail = (int)sizeof fail_msg - 1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return mt_errorf(MT_ERR_IO, "mtrain launch: fork of rank %d: %s", r, strerror(e));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* the launcher died before prctl */
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        if (r != 0) {
            int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0) dup2(devnull, STDIN_FILENO);
        }
        signal(SIGPIPE, SIG_DFL); /* ignored signals survive exec: restore */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(exe, j->o->argv, env);
        ssize_t k = write(STDERR_FILENO, fail_msg, (size_t)n_fail);
        (void)k;
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
    j->ranks[r].pid = pid;
    j->ranks[r].fd[0] = out[0];
    j->ranks[r].fd[1] = err[0];
    j->ranks[r].running = 1;
    j->n_running++;
    return MT_OK;
}

mt_status mt_launch_run(const mt_launch_opts *o, int *exit_code) {
    *exit_code = 1;
    if (o->n_ranks < 1 || o->n_ranks > MAX_RANKS)
        return mt_errorf(MT_ERR_CONFIG, "mtrain launch: -n %d: the number of ranks must be 1..%d", o->n_ranks,
                         MAX_RANKS);
    if (!o->argv || !o->argv[0]) return mt_errorf(MT_ERR_CONFIG, "mtrain launch: nothing to run");
    const char *exe = o->exe ? o->exe : "/proc/self/exe";
    if (access(exe, X_OK) != 0)
        return mt_errorf(MT_ERR_IO, "mtrain launch: cannot execute %s: %s", exe, strerror(errno));
    if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    install_handlers();
    mt_status st = mt_launch_pmix_start(o->n_ranks, g_sig_pipe[1]);
    if (st != MT_OK) {
        restore_handlers();
        return st;
    }
    job_t j = {.o = o, .n = o->n_ranks, .fail_rank = -1};
    j.ranks = calloc((size_t)j.n, sizeof *j.ranks);
    char **base = child_env_base(j.n);
    if (!j.ranks || !base) {
        fprintf(stderr, "mtrain launch: out of memory\n");
        die(NULL, 1);
    }
    for (int r = 0; r < j.n; r++) j.ranks[r].fd[0] = j.ranks[r].fd[1] = -1;
    for (int r = 0; r < j.n; r++) {
        char **env = copy_env(base); /* setup_fork may realloc it: heap only */
        if (!env) {
            fprintf(stderr, "mtrain launch: out of memory\n");
            die(&j, 1);
        }
        st = mt_launch_pmix_child_env(r, &env);
        if (st == MT_OK) st = spawn(&j, r, env, exe);
        free_env(env);
        if (st != MT_OK) {
            fprintf(stderr, "%s\n", mt_last_error());
            die(&j, 1);
        }
    }
    free_env(base);

    int64_t drain_until = 0;
    struct pollfd *pfd = calloc((size_t)(2 * j.n + 1), sizeof *pfd);
    int *who = calloc((size_t)(2 * j.n + 1), sizeof *who);
    if (!pfd || !who) {
        fprintf(stderr, "mtrain launch: out of memory\n");
        die(&j, 1);
    }
    for (;;) {
        reap(&j);
        int64_t now = mt_clock_ms_i64();
        int n_open = 0;
        for (int r = 0; r < j.n; r++) n_open += (j.ranks[r].fd[0] >= 0) + (j.ranks[r].fd[1] >= 0);
        if (j.n_running == 0) {
            if (!drain_until) drain_until = now + 1000; /* a grandchild may hold a pipe: bounded */
            if (n_open == 0 || now >= drain_until) break;
        }
        if (j.term_at && now >= j.term_at) {
            j.term_at = 0;
            if (j.n_running > 0) {
                fprintf(stderr, "mtrain launch: %d rank(s) still running after the failure: SIGTERM\n", j.n_running);
                stop_others(&j, -1);
            }
        }
        if (j.kill_at && now >= j.kill_at) {
            fprintf(stderr, "mtrain launch: %d rank(s) still running after the grace period: SIGKILL\n", j.n_running);
            signal_ranks(&j, SIGKILL, -1);
            j.kill_at = 0;
        }
        int timeout = 1000;
        if (j.term_at && j.term_at - now < timeout) timeout = (int)(j.term_at - now);
        if (j.kill_at && j.kill_at - now < timeout) timeout = (int)(j.kill_at - now);
        if (drain_until && drain_until - now < timeout) timeout = (int)(drain_until - now);
        if (timeout < 0) timeout = 0;
        int n = 0;
        pfd[n] = (struct pollfd){.fd = g_sig_pipe[0], .events = POLLIN};
        who[n++] = -1;
        for (int r = 0; r < j.n; r++)
            for (int w = 0; w < 2; w++)
                if (j.ranks[r].fd[w] >= 0) {
                    pfd[n] = (struct pollfd){.fd = j.ranks[r].fd[w], .events = POLLIN};
                    who[n++] = 2 * r + w;
                }
        if (poll(pfd, (nfds_t)n, timeout) <= 0) continue;
        for (int i = 1; i < n; i++)
            if (pfd[i].revents) relay(&j.ranks[who[i] / 2], who[i] / 2, who[i] % 2, o->prefix);
        if (pfd[0].revents) {
            char sigs[64];
            ssize_t k;
            while ((k = read(g_sig_pipe[0], sigs, sizeof sigs)) > 0) {
                for (ssize_t i = 0; i < k; i++) {
                    if (sigs[i] == 'A')
                        on_abort(&j);
                    else if (sigs[i] == SIGINT || sigs[i] == SIGTERM || sigs[i] == SIGHUP)
                        on_interrupt(&j, sigs[i]);
                    /* SIGCHLD: reaped at the top of the loop */
                }
            }
        }
    }
    free(pfd);
    free(who);
    for (int r = 0; r < j.n; r++)
        for (int w = 0; w < 2; w++)
            if (j.ranks[r].fd[w] >= 0) close(j.ranks[r].fd[w]);
    if (j.failed) die(&j, j.fail_code);
    if (j.interrupted) die(&j, 128 + j.interrupted);
    free(j.ranks);
    mt_launch_pmix_finish();
    restore_handlers();
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    g_sig_pipe[0] = g_sig_pipe[1] = -1;
    *exit_code = 0;
    return MT_OK;
}
