/* launch_restarts.c — `mtrain launch --max-restarts N` (N > 0), torchrun's automatic restarts:
 * the launcher runs attempt 0, 1, 2, ... of the whole job, each in a supervisor process of its
 * own (a fork of the launcher, no exec) that holds that attempt's PMIx server, forks and
 * supervises its ranks exactly as a launcher without restarts does (launch.c) and hands back
 * its outcome over a pipe. When a rank of attempt k failed (exited non-zero, was killed by a
 * signal, called PMIx_Abort), the supervisor has stopped the others and reaped them all; the
 * launcher logs "mtrain launch: rank R CAUSE; restarting all N ranks (restart k+1 of MAX)" (then
 * "; its error: MESSAGE" when the rank printed an error line, as launch.c's lines do) and
 * starts attempt k+1 with the same arguments, its ranks seeing MT_RESTART_COUNT =
 * TORCHELASTIC_RESTART_COUNT = k+1. After MAX restarts the next failure ends the job with that
 * rank's status ("restarts exhausted"); ranks that all exit 0 end it with 0.
 * Why a process per attempt: after a rank died during a fence libpmix 4.2.2 must not be torn
 * down (PMIx_server_finalize, a use-after-free; see launch.h), so one process cannot finalize
 * and re-initialise its server between attempts, nor is it known to be safe to keep a server
 * with a dead namespace's half-done fence in it. A supervisor's libpmix, fresh for each attempt,
 * ends with the supervisor's _exit; this loop never touches libpmix, so mt_launch_run returns
 * here even on failure.
 * Signals: SIGINT / SIGTERM / SIGHUP to the launcher are passed to the running supervisor as
 * bytes on its signal pipe (one that reached the whole process group, like a Ctrl-C, reaches
 * the supervisor too and counts once: see launch.c), it forwards them to the ranks as ever (a
 * second one kills them; after a third the launcher SIGKILLs a supervisor still there 2 s
 * later, and its ranks die with it through PR_SET_PDEATHSIG), and the job is not restarted: it
 * ends with the attempt's status (128 + signal when the signal stopped it). The ranks are the
 * launcher's grandchildren. */
#include "parallel/launch_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

static int g_pipe[2] = {-1, -1}; /* the launcher's own signal pipe */

static void on_signal(int sig) { mt_launch_signal_to_pipe(g_pipe[1], sig); }

typedef struct {
    pid_t pid;       /* the attempt's supervisor; 0 once reaped */
    int ws;          /* its wait status */
    int sig_fd;      /* write end of its signal pipe */
    int outcome_fd;  /* read end of its outcome pipe */
} attempt_t;

typedef struct {
    const mt_launch_opts *o;
    int interrupted, n_interrupts; /* the first SIGINT / SIGTERM / SIGHUP, how many */
    int64_t kill_at;               /* after a third one: when a supervisor still there gets SIGKILL */
} loop_t;

#define SUPERVISOR_GRACE_MS 2000

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* forks the supervisor of attempt k (signals blocked across the fork, so none reaches the
 * child before it has its own dispositions) */
static mt_status start_attempt(const mt_launch_opts *o, int k, attempt_t *a) {
    int sp[2], op[2];
    if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    if (pipe2(op, O_CLOEXEC) != 0) {
        int e = errno;
        close(sp[0]), close(sp[1]);
        return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(e));
    }
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(g_pipe[0]);
        close(g_pipe[1]);
        close(op[0]);
        mt_launch_attempt_process(o, k, parent, sp, op[1]); /* never returns */
    }
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(op[1]);
    close(sp[0]);
    if (pid < 0) {
        close(sp[1]), close(op[0]);
        return mt_errorf(MT_ERR_IO, "mtrain launch: fork of the supervisor of attempt %d: %s", k, strerror(e));
    }
    *a = (attempt_t){.pid = pid, .sig_fd = sp[1], .outcome_fd = op[0]};
    return MT_OK;
}

/* reads the launcher's signal pipe; passes SIGINT / SIGTERM / SIGHUP on to the running attempt */
static void take_signals(loop_t *l, attempt_t *a) {
    char sigs[64];
    ssize_t k;
    while ((k = read(g_pipe[0], sigs, sizeof sigs)) > 0) {
        for (ssize_t i = 0; i < k; i++) {
            int sig = sigs[i];
            if ((sig == SIGUSR1 || sig == SIGUSR2) && a && a->pid) { /* a stop request: passed on, no restart rule */
                char c = (char)(MT_LAUNCH_FORWARDED + sig);
                ssize_t w = write(a->sig_fd, &c, 1);
                (void)w;
                continue;
            }
            if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP) continue; /* SIGCHLD: reaped by the caller */
            if (!l->interrupted) l->interrupted = sig;
            l->n_interrupts++;
            if (!a || !a->pid) continue;
            if (l->n_interrupts >= 3) {
                if (!l->kill_at) l->kill_at = mt_clock_ms_i64() + SUPERVISOR_GRACE_MS;
            } else {
                char c = (char)(MT_LAUNCH_FORWARDED + sig);
                ssize_t w = write(a->sig_fd, &c, 1);
                (void)w;
            }
        }
    }
}

/* waits until the attempt's supervisor is gone; returns 1 and fills *out when it reported */
static int wait_attempt(loop_t *l, attempt_t *a, mt_launch_outcome *out) {
    while (a->pid) {
        take_signals(l, a);
        pid_t p = waitpid(a->pid, &a->ws, WNOHANG);
        if (p == a->pid || (p < 0 && errno == ECHILD)) {
            a->pid = 0;
            break;
        }
        int64_t now = mt_clock_ms_i64();
        if (l->kill_at && now >= l->kill_at) { /* a wedged supervisor: its ranks die with it */
            fprintf(stderr, "mtrain launch: the attempt's supervisor (pid %d) is still running %d s after the third "
                            "signal: SIGKILL\n", (int)a->pid, SUPERVISOR_GRACE_MS / 1000);
            kill(a->pid, SIGKILL);
            l->kill_at = 0;
        }
        int timeout = 1000;
        if (l->kill_at && l->kill_at - now < timeout) timeout = (int)(l->kill_at - now);
        struct pollfd pfd = {.fd = g_pipe[0], .events = POLLIN};
        poll(&pfd, 1, timeout < 0 ? 0 : timeout);
    }
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t k = read(a->outcome_fd, (char *)out + got, sizeof *out - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close_fd(&a->sig_fd);
    close_fd(&a->outcome_fd);
    return got == sizeof *out;
}

/* runs attempts until one ends the job; returns a status only for a setup failure */
static mt_status run_loop(loop_t *l, int *exit_code) {
    const mt_launch_opts *o = l->o;
    for (int k = 0;; k++) {
        attempt_t a;
        mt_status st = start_attempt(o, k, &a);
        if (st != MT_OK) return st;
        mt_launch_outcome out;
        char why[sizeof out.error + 16];
        if (!wait_attempt(l, &a, &out)) {
            if (WIFSIGNALED(a.ws))
                fprintf(stderr, "mtrain launch: the supervisor of attempt %d was killed by signal %d (%s) before it "
                                "reported; not restarting\n", k, WTERMSIG(a.ws), strsignal(WTERMSIG(a.ws)));
            else
                fprintf(stderr, "mtrain launch: the supervisor of attempt %d exited with status %d before it "
                                "reported; not restarting\n", k, WIFEXITED(a.ws) ? WEXITSTATUS(a.ws) : -1);
            *exit_code = l->interrupted ? 128 + l->interrupted : 1;
            return MT_OK;
        }
        take_signals(l, NULL); /* a signal that came as the attempt ended still stops the job */
        switch (out.kind) {
        case MT_ATTEMPT_OK:
            if (k > 0) fprintf(stderr, "mtrain launch: all %d rank(s) exited 0 after %d restart(s)\n", o->n_ranks, k);
            *exit_code = 0;
            return MT_OK;
        case MT_ATTEMPT_SETUP_FAILED:
            return mt_errorf((mt_status)out.status, "%s", out.what);
        case MT_ATTEMPT_INTERRUPTED:
            *exit_code = out.code;
            return MT_OK;
        case MT_ATTEMPT_RANK_FAILED:
            *exit_code = out.code;
            mt_launch_error_suffix(out.error, why, sizeof why);
            if (l->interrupted) {
                fprintf(stderr, "mtrain launch: rank %d %s; not restarting: the launcher got %s%s\n", out.rank, out.what,
                        strsignal(l->interrupted), why);
                return MT_OK;
            }
            if (out.code == MT_EXIT_CONFIG) {
                fprintf(stderr, "mtrain launch: rank %d %s; not restarting: status %d is mtrain's for a wrong "
                                "command line or recipe, which every attempt would repeat (fix it and launch again)%s\n",
                        out.rank, out.what, MT_EXIT_CONFIG, why);
                return MT_OK;
            }
            if (k >= o->max_restarts) {
                fprintf(stderr, "mtrain launch: rank %d %s; restarts exhausted (%d of %d used): exiting with "
                                "status %d%s\n", out.rank, out.what, k, o->max_restarts, out.code, why);
                return MT_OK;
            }
            fprintf(stderr, "mtrain launch: rank %d %s; restarting all %d ranks (restart %d of %d)%s\n", out.rank,
                    out.what, o->n_ranks, k + 1, o->max_restarts, why);
            break;
        default:
            return mt_errorf(MT_ERR_INTERNAL, "mtrain launch: attempt %d reported outcome %d", k, out.kind);
        }
    }
}

mt_status mt_launch_run_restarts(const mt_launch_opts *o, int *exit_code) {
    *exit_code = 1;
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return mt_errorf(MT_ERR_IO, "mtrain launch: pipe: %s", strerror(errno));
    struct sigaction sa, old[6];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
    sigaction(SIGHUP, &sa, &old[2]);
    sigaction(SIGUSR1, &sa, &old[4]);
    sigaction(SIGUSR2, &sa, &old[5]);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, &old[3]);
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    loop_t l = {.o = o};
    mt_status st = run_loop(&l, exit_code);
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
    sigaction(SIGHUP, &old[2], NULL);
    sigaction(SIGUSR1, &old[4], NULL);
    sigaction(SIGUSR2, &old[5], NULL);
    sigaction(SIGCHLD, &old[3], NULL);
    signal(SIGPIPE, old_pipe);
    close_fd(&g_pipe[0]);
    close_fd(&g_pipe[1]);
    return st;
}
