/* launch.c — one attempt of `mtrain launch` (the PMIx half is launch_pmix_server.c, the output
 * relay and environment launch_io.c, --max-restarts launch_restarts.c): forks N ranks running
 * `exe ARGS` with the PMIx client environment, relays each rank's stdout/stderr, forwards
 * SIGINT/SIGTERM/SIGHUP (a second one kills) and SIGUSR1/SIGUSR2 (stop requests: mtrain saves and
 * exits 0), and when a rank exits non-zero, is killed by a signal or calls PMIx_Abort, names it
 * (quoting its last error line, the root cause such as a lost node, in every line of the
 * launcher's about the failure), gives the others MT_LAUNCH_PEER_GRACE_S (10 s) to
 * notice it and exit on their own, then SIGTERMs them, SIGKILLs what is left after the kill
 * grace period and, once every rank is reaped, ends with that rank's status (128 + signal for
 * a signal).
 * An attempt runs either in the launcher itself (max_restarts 0: mt_launch_run_once, today's
 * launcher exactly) or as the supervisor process the restart loop forks for each attempt
 * (mt_launch_attempt_process), which hands its outcome to the loop over a pipe and also takes
 * the launcher's signals from it, as bytes on its signal pipe (see take_interrupt).
 * Process control lives here on purpose: this file (with cmd/) is allowed _exit — in forked
 * children before exec, and on the failure path, where libpmix 4.2.2 must not be torn down
 * (observed: PMIx_server_finalize, a use-after-free inside libpmix, can segfault after a
 * client died while a fence was in flight; see launch.h). Children set
 * PR_SET_PDEATHSIG(SIGKILL) so no rank outlives a killed launcher. Rank 0 keeps stdin; the
 * others read /dev/null.
 * One node of a multi-node job (o->n_nodes > 1): no PMIx server; the ranks get torchrun's env://
 * variables (launch_io.c) and are named by their global rank; a local rank's failure ends this
 * node's ranks as above, the other nodes' ranks notice through their communicator / env:// store. */
#include "parallel/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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

#define MAX_RANKS 4096
_Static_assert(sizeof(mt_launch_outcome) <= PIPE_BUF, "an attempt's outcome is one atomic pipe write");

typedef struct {
    pid_t pid;
    int fd[2]; /* read ends of the rank's stdout, stderr pipes; -1 once closed */
    mt_launch_linebuf lb[2];
    int running;
} rank_t;

static int g_sig_pipe[2] = {-1, -1};
static int g_outcome_fd = -1; /* an attempt's supervisor process: where its outcome goes */

static void on_signal(int sig) { mt_launch_signal_to_pipe(g_sig_pipe[1], sig); }

/* ---- supervision ---- */

typedef struct {
    const mt_launch_opts *o;
    rank_t *ranks;
    int n, n_running;
    int failed, fail_rank, fail_code;
    char cause[sizeof ((mt_launch_outcome *)0)->what]; /* how fail_rank failed */
    char error[sizeof ((mt_launch_outcome *)0)->error]; /* fail_rank's last error line: its root cause */
    int interrupted, n_interrupts;
    int interrupt_code; /* the first non-zero status of a rank after the launcher passed a signal on */
    int unpaired[2][32]; /* [0]: signals received, [1]: passed on by the restart loop, not yet paired */
    int64_t term_at; /* when the survivors of a failure get SIGTERM (after they had a chance to report) */
    int64_t kill_at;
    char held[64]; /* signal-pipe bytes read while spawning, for supervise() ('A', SIGUSR1/2) */
    int n_held;
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

/* How long ranks get to act on a signal the launcher passed on before they are killed: a stop
 * signal makes mtrain save a checkpoint first, which can take minutes on a large model (torchrun
 * waits 30 s; Slurm's KillWait defaults to 30 s). MT_LAUNCH_STOP_GRACE_S, default 300 s; a second
 * signal kills at once. */
static int64_t stop_grace_ms(void) {
    const char *e = getenv("MT_LAUNCH_STOP_GRACE_S");
    const double s = e ? atof(e) : 300.0;
    return (int64_t)((s > 0 ? s : 300.0) * 1000);
}

static void stop_others_later(job_t *j) { j->term_at = mt_clock_ms_i64() + peer_grace_ms(); }

/* the global rank of local rank r: node_rank * N + r on a node of a multi-node job, else r */
static int grank(const job_t *j, int r) { return j->o->n_nodes > 1 ? j->o->node_rank * j->n + r : r; }

static void drain_rank(job_t *j, int r) {
    for (int w = 0; w < 2; w++)
        if (j->ranks[r].fd[w] >= 0)
            mt_launch_relay(&j->ranks[r].fd[w], &j->ranks[r].lb[w], grank(j, r), w, j->o->prefix);
}

/* The local rank still running as pid, or -1 (not ours, or already reaped). */
static int running_rank_of(const job_t *j, pid_t pid) {
    for (int r = 0; r < j->n; r++)
        if (j->ranks[r].pid == pid) return j->ranks[r].running ? r : -1;
    return -1;
}

/* Marks rank r ended with wait status ws; its exit code (128 + signal when killed). */
static int rank_ended(job_t *j, int r, int ws) {
    j->ranks[r].running = 0;
    j->n_running--;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
}

static void set_failure(job_t *j, int r, int ws, int code) {
    j->fail_rank = grank(j, r);
    j->fail_code = code;
    if (WIFSIGNALED(ws))
        snprintf(j->cause, sizeof j->cause, "was killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else
        snprintf(j->cause, sizeof j->cause, "exited with status %d", code);
}

/* The first failure's root cause. A rank that exits non-zero because a peer died (its fence or
 * collective reports "another rank left the job") can be reaped before that peer: a SIGKILLed
 * process closes its sockets, which is how the others learn of it, before the kernel reports its
 * death; a peer that exited on its own may still be unreaped beside the ranks that noticed it. So
 * when the first failure is an exit status, ranks that end within ROOT_CAUSE_WINDOW_MS are looked
 * at, and the first that ended by a signal is named instead, or, when the first failure was a
 * consequence (MT_EXIT_PEER, the status a rank exits with when a peer failed first), the first
 * that exited with any other non-zero status. */
#define ROOT_CAUSE_WINDOW_MS 300
static int find_root_cause(job_t *j, int first_code, int *ws_out, int *code_out, int *n_exited) {
    const int64_t until = mt_clock_ms_i64() + ROOT_CAUSE_WINDOW_MS;
    while (j->n_running > 0 && mt_clock_ms_i64() < until) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid <= 0) {
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        const int r = running_rank_of(j, pid);
        if (r < 0) continue;
        const int code = rank_ended(j, r, ws);
        if (WIFSIGNALED(ws) || (first_code == MT_EXIT_PEER && code != 0 && code != MT_EXIT_PEER)) {
            *ws_out = ws, *code_out = code;
            return r;
        }
        if (code) (*n_exited)++; /* another consequence */
    }
    return -1;
}

static void reap(job_t *j) {
    int ws;
    pid_t pid;
    while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
        int r = running_rank_of(j, pid);
        if (r < 0) continue;
        int code = rank_ended(j, r, ws);
        if (j->interrupted && code && !j->interrupt_code) j->interrupt_code = code;
        if (code == 0 || j->failed || j->interrupted) continue;
        j->failed = 1;
        set_failure(j, r, ws, code);
        char also[160] = "";
        if (!WIFSIGNALED(ws) && j->n_running > 0) {
            int kws = 0, kcode = 0, n_exited = 0;
            const int k = find_root_cause(j, code, &kws, &kcode, &n_exited);
            if (k >= 0) {
                snprintf(also, sizeof also, " (rank %d exited with status %d just after%s)", grank(j, r), code,
                         n_exited ? ", as did others" : "");
                drain_rank(j, r);
                r = k;
                set_failure(j, r, kws, kcode);
            }
        }
        drain_rank(j, r); /* its last words first */
        snprintf(j->error, sizeof j->error, "%s", j->ranks[r].lb[1].last_error);
        char why[sizeof j->error + 16];
        mt_launch_error_suffix(j->error, why, sizeof why);
        if (j->o->n_nodes > 1)
            fprintf(stderr, "mtrain launch: rank %d (node %d, local rank %d) %s%s; stopping this node's other %d "
                    "rank(s)%s\n", j->fail_rank, j->o->node_rank, r, j->cause, also, j->n_running, why);
        else
            fprintf(stderr, "mtrain launch: rank %d %s%s; stopping the other %d rank(s)%s\n", r, j->cause, also,
                    j->n_running, why);
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
        j->kill_at = mt_clock_ms_i64() + stop_grace_ms();
    } else {
        if (!j->interrupted && !j->failed) j->interrupted = sig;
        fprintf(stderr, "mtrain launch: got %s again, killing the %d remaining rank(s)\n", strsignal(sig),
                j->n_running);
        signal_ranks(j, SIGKILL, -1);
        j->kill_at = 0;
    }
}

/* A SIGINT / SIGTERM / SIGHUP that reached the whole process group (Ctrl-C, kill -- -PGID,
 * timeout) comes to an attempt's supervisor twice: itself, and passed on by the restart loop
 * (MT_LAUNCH_FORWARDED + sig), which got it too. The first of a pair acts; the second is dropped.
 * A signal sent to the launcher alone comes only passed on, one sent to the supervisor alone only
 * itself: each acts. Without the restart loop nothing is ever passed on: every signal acts. */
static void take_interrupt(job_t *j, int byte) {
    int fwd = byte > MT_LAUNCH_FORWARDED, sig = fwd ? byte - MT_LAUNCH_FORWARDED : byte;
    if (j->unpaired[!fwd][sig] > 0) {
        j->unpaired[!fwd][sig]--;
        return;
    }
    j->unpaired[fwd][sig]++;
    on_interrupt(j, sig);
}

static int is_interrupt(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; }
static int is_stop_request(int sig) { return sig == SIGUSR1 || sig == SIGUSR2; }

static void on_abort(job_t *j) {
    int r, status;
    char msg[512];
    if (!mt_launch_pmix_abort_info(&r, &status, msg, sizeof msg) || j->failed || j->interrupted) return;
    j->failed = 1;
    j->fail_rank = r;
    j->fail_code = status > 0 && status < 256 ? status : 1;
    snprintf(j->cause, sizeof j->cause, "called PMIx_Abort(status %d)%s%s", status, msg[0] ? ": " : "", msg);
    fprintf(stderr, "mtrain launch: rank %d %s; stopping all %d rank(s)\n", r, j->cause, j->n_running);
    stop_others(j, -1); /* the aborting rank included: PMIx_Abort asks the server to kill it */
}

/* an attempt's supervisor process hands its outcome to the restart loop (one write) */
static void report(const mt_launch_outcome *out) {
    if (g_outcome_fd < 0) return;
    while (write(g_outcome_fd, out, sizeof *out) < 0 && errno == EINTR) {
    }
}

/* Failure path: never returns (see launch.h for why _exit) */
static _Noreturn void die(job_t *j, const mt_launch_outcome *out) {
    report(out);
    if (j) signal_ranks(j, SIGKILL, -1);
    mt_launch_pmix_remove_tmpdir();
    fflush(stdout);
    fflush(stderr);
    _exit(out->code);
}

/* the ranks could not be started: nothing to restart */
static _Noreturn void setup_failed(job_t *j, mt_status st, const char *msg) {
    mt_launch_outcome out = {.kind = MT_ATTEMPT_SETUP_FAILED, .rank = -1, .code = 1, .status = (int)st};
    snprintf(out.what, sizeof out.what, "%s", msg);
    if (g_outcome_fd < 0) fprintf(stderr, "%s\n", msg); /* else the restart loop returns it */
    die(j, &out);
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
    int n_fail = snprintf(fail_msg, sizeof fail_msg, "mtrain launch: rank %d: cannot execute %s\n", grank(j, r), exe);
    if (n_fail < 0 || n_fail >= (int)sizeof fail_msg) n_fail = (int)sizeof fail_msg - 1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return mt_errorf(MT_ERR_IO, "mtrain launch: fork of rank %d: %s", grank(j, r), strerror(e));
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

/* acts on what the signal pipe holds: SIGINT / SIGTERM / SIGHUP, 'A' for a PMIx_Abort
 * (SIGCHLD: reaped by the caller) */
static void take_signal_pipe(job_t *j) {
    char sigs[64];
    ssize_t k;
    while ((k = j->n_held ? j->n_held : read(g_sig_pipe[0], sigs, sizeof sigs)) > 0) {
        if (j->n_held) memcpy(sigs, j->held, (size_t)k), j->n_held = 0;
        for (ssize_t i = 0; i < k; i++) {
            if (sigs[i] == 'A')
                on_abort(j);
            else if (is_interrupt(sigs[i]) || is_interrupt(sigs[i] - MT_LAUNCH_FORWARDED))
                take_interrupt(j, sigs[i]);
            else if (is_stop_request(sigs[i]) || is_stop_request(sigs[i] - MT_LAUNCH_FORWARDED)) {
                /* a stop request (Slurm --signal=USR1): pass it on; mtrain saves and exits 0 */
                const int sig = is_stop_request(sigs[i]) ? sigs[i] : sigs[i] - MT_LAUNCH_FORWARDED;
                fprintf(stderr, "mtrain launch: got %s, passing it to the %d running rank(s)\n", strsignal(sig),
                        j->n_running);
                signal_ranks(j, sig, -1);
            }
        }
    }
}

/* the supervision loop: relays output, acts on signals, aborts and deadlines, until every rank
 * is reaped and its pipes are drained. Signals before reaping: when a Ctrl-C reaches the ranks
 * and the launcher together, their deaths are the interrupt's, not a failure. */
static void supervise(job_t *j) {
    int64_t drain_until = 0;
    struct pollfd *pfd = calloc((size_t)(2 * j->n + 1), sizeof *pfd);
    int *who = calloc((size_t)(2 * j->n + 1), sizeof *who);
    if (!pfd || !who) setup_failed(j, MT_ERR_OOM, "mtrain launch: out of memory");
    for (;;) {
        take_signal_pipe(j);
        reap(j);
        int64_t now = mt_clock_ms_i64();
        int n_open = 0;
        for (int r = 0; r < j->n; r++) n_open += (j->ranks[r].fd[0] >= 0) + (j->ranks[r].fd[1] >= 0);
        if (j->n_running == 0) {
            if (!drain_until) drain_until = now + 1000; /* a grandchild may hold a pipe: bounded */
            if (n_open == 0 || now >= drain_until) break;
        }
        if (j->term_at && now >= j->term_at) {
            j->term_at = 0;
            if (j->n_running > 0) {
                char why[sizeof j->error + 16];
                fprintf(stderr, "mtrain launch: %d rank(s) still running after rank %d failed: SIGTERM%s\n", j->n_running,
                        j->fail_rank, mt_launch_error_suffix(j->error, why, sizeof why));
                stop_others(j, -1);
            }
        }
        if (j->kill_at && now >= j->kill_at) {
            fprintf(stderr, "mtrain launch: %d rank(s) still running after the grace period: SIGKILL\n", j->n_running);
            signal_ranks(j, SIGKILL, -1);
            j->kill_at = 0;
        }
        int timeout = 1000;
        if (j->term_at && j->term_at - now < timeout) timeout = (int)(j->term_at - now);
        if (j->kill_at && j->kill_at - now < timeout) timeout = (int)(j->kill_at - now);
        if (drain_until && drain_until - now < timeout) timeout = (int)(drain_until - now);
        if (timeout < 0) timeout = 0;
        int n = 0;
        pfd[n] = (struct pollfd){.fd = g_sig_pipe[0], .events = POLLIN};
        who[n++] = -1;
        for (int r = 0; r < j->n; r++)
            for (int w = 0; w < 2; w++)
                if (j->ranks[r].fd[w] >= 0) {
                    pfd[n] = (struct pollfd){.fd = j->ranks[r].fd[w], .events = POLLIN};
                    who[n++] = 2 * r + w;
                }
        if (poll(pfd, (nfds_t)n, timeout) <= 0) continue;
        for (int i = 1; i < n; i++)
            if (pfd[i].revents) {
                rank_t *rk = &j->ranks[who[i] / 2];
                mt_launch_relay(&rk->fd[who[i] % 2], &rk->lb[who[i] % 2], grank(j, who[i] / 2), who[i] % 2,
                                j->o->prefix);
            }
    }
    free(pfd);
    free(who);
    for (int r = 0; r < j->n; r++)
        for (int w = 0; w < 2; w++)
            if (j->ranks[r].fd[w] >= 0) close(j->ranks[r].fd[w]);
}

/* Between two spawns: a SIGINT / SIGTERM / SIGHUP (itself or passed on by the restart loop)
 * stops the start at once: the job never ran (no rank can be past its first fence before all
 * are there), so what was spawned is SIGKILLed and reaped (2 s at most), the tmpdir removed, and
 * the attempt ends with 128 + the signal. Other bytes are kept for supervise(). */
static void check_interrupt_while_spawning(job_t *j, int n_spawned) {
    char b[64];
    ssize_t k;
    int sig = 0;
    while ((k = read(g_sig_pipe[0], b, sizeof b)) > 0)
        for (ssize_t i = 0; i < k; i++) {
            int s = b[i] > MT_LAUNCH_FORWARDED ? b[i] - MT_LAUNCH_FORWARDED : b[i];
            if (is_interrupt(s)) {
                if (!sig) sig = s;
            } else if (b[i] != SIGCHLD && j->n_held < (int)sizeof j->held) {
                j->held[j->n_held++] = b[i];
            }
        }
    if (!sig) return;
    fprintf(stderr, "mtrain launch: got %s while starting the ranks (%d of %d started): killing them\n",
            strsignal(sig), n_spawned, j->n);
    signal_ranks(j, SIGKILL, -1);
    int64_t until = mt_clock_ms_i64() + 2000;
    while (j->n_running > 0 && mt_clock_ms_i64() < until) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid > 0) {
            const int r = running_rank_of(j, pid);
            if (r >= 0) j->ranks[r].running = 0, j->n_running--;
        } else {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    for (int r = 0; r < j->n; r++) drain_rank(j, r);
    mt_launch_outcome out = {.kind = MT_ATTEMPT_INTERRUPTED, .rank = -1, .code = 128 + sig};
    die(j, &out);
}

/* One attempt from the PMIx server's start to the last rank reaped. Returns a status (and
 * nothing started) when the server cannot start; _exits through setup_failed when a later
 * step fails; else fills *out and returns MT_OK with the server still up. */
static mt_status run_attempt(const mt_launch_opts *o, int restart, mt_launch_outcome *out) {
    const char *exe = o->exe ? o->exe : "/proc/self/exe";
    const int env_rdzv = o->n_nodes > 1; /* one node of several: env://, no PMIx server */
    mt_status st = env_rdzv ? MT_OK : mt_launch_pmix_start(o->n_ranks, g_sig_pipe[1]);
    if (st != MT_OK) return st;
    job_t j = {.o = o, .n = o->n_ranks, .fail_rank = -1};
    j.ranks = calloc((size_t)j.n, sizeof *j.ranks);
    char **base = mt_launch_env_base(j.n, restart);
    if (!j.ranks || !base) setup_failed(NULL, MT_ERR_OOM, "mtrain launch: out of memory");
    for (int r = 0; r < j.n; r++) j.ranks[r].fd[0] = j.ranks[r].fd[1] = -1;
    for (int r = 0; r < j.n; r++) {
        check_interrupt_while_spawning(&j, r);
        char **env = mt_launch_env_copy(base); /* setup_fork may realloc it: heap only */
        if (!env) setup_failed(&j, MT_ERR_OOM, "mtrain launch: out of memory");
        st = env_rdzv ? mt_launch_env_torchrun(o, r, restart, &env) : mt_launch_pmix_child_env(r, &env);
        if (st == MT_OK) st = spawn(&j, r, env, exe);
        mt_launch_env_free(env);
        if (st != MT_OK) setup_failed(&j, st, mt_last_error());
    }
    mt_launch_env_free(base);
    check_interrupt_while_spawning(&j, j.n);
    supervise(&j);
    *out = (mt_launch_outcome){.kind = MT_ATTEMPT_OK, .rank = -1};
    if (j.failed) {
        out->kind = MT_ATTEMPT_RANK_FAILED;
        out->rank = j.fail_rank;
        out->code = j.fail_code;
        snprintf(out->what, sizeof out->what, "%s", j.cause);
        snprintf(out->error, sizeof out->error, "%s", j.error);
    } else if (j.interrupted) {
        /* ranks that answer the signal by stopping cleanly (mtrain saves a checkpoint and exits 0) end
         * the job with 0, as they would without a launcher; otherwise the first rank's status */
        out->kind = MT_ATTEMPT_INTERRUPTED;
        out->code = j.interrupt_code;
    }
    free(j.ranks);
    return MT_OK;
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
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void restore_handlers(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

static void close_sig_pipe(void) {
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    g_sig_pipe[0] = g_sig_pipe[1] = -1;
}

mt_status mt_launch_run_once(const mt_launch_opts *o, int *exit_code) {
    *exit_code = 1;
    if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    install_handlers();
    mt_launch_outcome out;
    mt_status st = run_attempt(o, 0, &out);
    if (st != MT_OK) {
        restore_handlers();
        close_sig_pipe();
        return st;
    }
    if (out.kind != MT_ATTEMPT_OK) die(NULL, &out);
    mt_launch_pmix_finish();
    restore_handlers();
    close_sig_pipe();
    *exit_code = 0;
    return MT_OK;
}

_Noreturn void mt_launch_attempt_process(const mt_launch_opts *o, int restart, pid_t parent, const int sig_pipe[2],
                                         int outcome_fd) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* the launcher died before prctl */
    g_sig_pipe[0] = sig_pipe[0];
    g_sig_pipe[1] = sig_pipe[1];
    g_outcome_fd = outcome_fd;
    install_handlers();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    mt_launch_outcome out;
    mt_status st = run_attempt(o, restart, &out);
    if (st != MT_OK) setup_failed(NULL, st, mt_last_error());
    if (out.kind != MT_ATTEMPT_OK) die(NULL, &out);
    report(&out); /* first: a crash in the teardown below must not turn success into failure */
    mt_launch_pmix_finish();
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

mt_status mt_launch_run(const mt_launch_opts *o, int *exit_code) {
    *exit_code = 1;
    if (o->n_ranks < 1 || o->n_ranks > MAX_RANKS)
        return mt_errorf(MT_ERR_CONFIG, "mtrain launch: -n %d: the number of ranks must be 1..%d", o->n_ranks,
                         MAX_RANKS);
    if (o->n_nodes > 1) {
        if (o->node_rank < 0 || o->node_rank >= o->n_nodes)
            return mt_errorf(MT_ERR_CONFIG, "mtrain launch: --node-rank %d: expected 0..%d (--nnodes %d)", o->node_rank,
                             o->n_nodes - 1, o->n_nodes);
        if (!o->master_addr || !*o->master_addr || o->master_port < 1 || o->master_port > 65535)
            return mt_errorf(MT_ERR_CONFIG, "mtrain launch: --nnodes %d needs --master-addr HOST and --master-port "
                             "PORT (1..65535): the host of node 0, where global rank 0 serves the env:// store",
                             o->n_nodes);
        if ((long)o->n_nodes * o->n_ranks > (1L << 20))
            return mt_errorf(MT_ERR_CONFIG, "mtrain launch: --nnodes %d x --nproc-per-node %d ranks is too many",
                             o->n_nodes, o->n_ranks);
    }
    if (o->max_restarts < 0)
        return mt_errorf(MT_ERR_CONFIG, "mtrain launch: --max-restarts %d: expected 0 or more", o->max_restarts);
    if (!o->argv || !o->argv[0]) return mt_errorf(MT_ERR_CONFIG, "mtrain launch: nothing to run");
    const char *exe = o->exe ? o->exe : "/proc/self/exe";
    if (access(exe, X_OK) != 0)
        return mt_errorf(MT_ERR_IO, "mtrain launch: cannot execute %s: %s", exe, strerror(errno));
    return o->max_restarts == 0 ? mt_launch_run_once(o, exit_code) : mt_launch_run_restarts(o, exit_code);
}
