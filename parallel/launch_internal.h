/* launch_internal.h — the pieces of `mtrain launch` as they use each other; not a public
 * interface (that is launch.h):
 *   launch_pmix_server.c  the PMIx server (one per process), used by launch.c
 *   launch_io.c           the output relay, the ranks' environment and the signal self-pipe's write
 *   launch.c              one attempt: fork the ranks, supervise them to the end
 *   launch_restarts.c     --max-restarts: one attempt after another, each in its own process */
#ifndef MT_LAUNCH_INTERNAL_H
#define MT_LAUNCH_INTERNAL_H

#include "core/status.h"
#include "parallel/launch.h"

#include <stddef.h>
#include <sys/types.h>

/* ---- the PMIx server (launch_pmix_server.c) ---- */

/* Starts the PMIx server in a fresh private tmpdir (under $TMPDIR or /tmp) and registers one
 * namespace of n_ranks ranks, all on this node (local rank = rank). notify_fd: the server
 * writes the byte 'A' there (from libpmix's thread) when a rank calls PMIx_Abort. */
mt_status mt_launch_pmix_start(int n_ranks, int notify_fd);

/* Registers rank `rank` as a client and adds the PMIx variables for it to *env, a
 * heap-allocated NULL-terminated array of heap strings (setup_fork may realloc it). */
mt_status mt_launch_pmix_child_env(int rank, char ***env);

/* The first PMIx_Abort seen: returns 1 and fills rank / status / msg (may be ""), else 0. */
int mt_launch_pmix_abort_info(int *rank, int *status, char *msg, int n_msg);

/* Success path: deregisters, PMIx_server_finalize, removes the tmpdir. */
void mt_launch_pmix_finish(void);

/* Failure path: removes the tmpdir only, never touching libpmix (libpmix 4.2.2, observed: a
 * use-after-free in PMIx_server_finalize when a rank died during a fence). Async-signal-unsafe but libpmix-free. */
void mt_launch_pmix_remove_tmpdir(void);

/* ---- output relay and environment (launch_io.c) ---- */

#define MT_LAUNCH_LINE_BYTES 16384

typedef struct {
    char buf[MT_LAUNCH_LINE_BYTES];
    size_t len;
    int mid_line; /* the last chunk written ended without a newline: no prefix before the next */
    char last_error[512]; /* stderr: what followed ": error: " on the last line that had it (and its
                             indented continuation lines), or "" */
    int in_error;         /* the last stderr line was such a line or a continuation of one */
} mt_launch_linebuf;

/* Passes on what is available on the non-blocking pipe *fd of rank r to our stdout (which 0) or
 * stderr (1), whole lines at a time, "[rR] "-prefixed when prefix is set (see launch.h). On
 * stderr it keeps the message of the last "<tool>: error: <message>" line in lb->last_error:
 * what the launcher quotes as the failed rank's cause (a lost node, ...) in its own lines.
 * Returns 1 while the pipe is open, 0 once it hit EOF: then the last partial line is flushed,
 * *fd closed and set to -1. */
int mt_launch_relay(int *fd, mt_launch_linebuf *lb, int r, int which, int prefix);

/* A heap copy of environ for the ranks of attempt `restart` (0 = the first): without the PMIx
 * client variables of a launcher above us (PMIX_MCA_* tuning stays), OMP_NUM_THREADS =
 * max(1, CPUs / n_ranks) when unset and n_ranks > 1, MT_RESTART_COUNT and
 * TORCHELASTIC_RESTART_COUNT = restart (replacing inherited ones). NULL when out of memory. */
char **mt_launch_env_base(int n_ranks, int restart);
/* One node of a multi-node job (o->n_nodes > 1): sets (replacing inherited ones) torchrun's
 * worker variables for local rank `local_rank` in *env (heap array, may be realloc'ed): RANK =
 * node_rank * N + local_rank, LOCAL_RANK, WORLD_SIZE = n_nodes * N, LOCAL_WORLD_SIZE = N,
 * GROUP_RANK = node_rank, GROUP_WORLD_SIZE = n_nodes, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME,
 * MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_MAX_RESTARTS, and MT_BOOTSTRAP=env
 * (parallel/bootstrap_env.c). MT_ERR_OOM when out of memory. */
mt_status mt_launch_env_torchrun(const mt_launch_opts *o, int local_rank, int restart, char ***env);
/* "; its error: <error>" for a launcher line about a failed rank that left an error line, else
 * "" (into buf) */
const char *mt_launch_error_suffix(const char *error, char *buf, size_t buf_bytes);
char **mt_launch_env_copy(char **base); /* heap copy of a NULL-terminated array; NULL: OOM */
void mt_launch_env_free(char **env);    /* NULL is fine */

/* ---- one attempt (launch.c) and the restart loop (launch_restarts.c) ---- */

typedef enum {
    MT_ATTEMPT_OK = 1,          /* every rank exited 0 */
    MT_ATTEMPT_RANK_FAILED,     /* a rank exited non-zero, was killed, or called PMIx_Abort */
    MT_ATTEMPT_INTERRUPTED,     /* the launcher got SIGINT / SIGTERM / SIGHUP first */
    MT_ATTEMPT_SETUP_FAILED,    /* the server or a fork failed: nothing to restart */
} mt_attempt_kind;

/* How an attempt ended, sent whole (one write, under PIPE_BUF) from its supervisor process to
 * the restart loop. */
typedef struct {
    int kind;          /* mt_attempt_kind */
    int rank;          /* RANK_FAILED: the first rank that failed; else -1 */
    int code;          /* the attempt's exit status: the failed rank's (128 + signal for a
                          signal), 128 + the interrupting signal, 1 for a setup failure, 0 */
    int status;        /* SETUP_FAILED: the mt_status of the failure */
    char what[1024];   /* RANK_FAILED: the cause, "exited with status 3", "was killed by signal
                          9 (Killed)", "called PMIx_Abort(status 2): msg"; SETUP_FAILED: the
                          error message */
    char error[512];   /* RANK_FAILED: the rank's last error message (mt_launch_linebuf), or "" */
} mt_launch_outcome;

/* The max_restarts == 0 path of mt_launch_run: one attempt in this very process, exactly as
 * launch.h describes (returns on success and setup failure, _exits otherwise). */
/* A signal handler's whole work (async-signal-safe, errno kept): the signal number as one byte
 * into the self-pipe fd, for the supervision loop to read (launch_io.c). */
void mt_launch_signal_to_pipe(int fd, int sig);

mt_status mt_launch_run_once(const mt_launch_opts *o, int *exit_code);

/* The max_restarts > 0 path of mt_launch_run (launch_restarts.c): never touches libpmix and
 * always returns. */
mt_status mt_launch_run_restarts(const mt_launch_opts *o, int *exit_code);

/* Runs attempt `restart` as the supervisor process the restart loop (pid `parent`) forked with
 * SIGINT/SIGTERM/SIGHUP/SIGCHLD blocked, and never returns: it dies with its parent
 * (PR_SET_PDEATHSIG), installs its handlers, unblocks the signals, runs the attempt.
 * sig_pipe: its signal pipe (read end, write end), made by the restart loop, which keeps a copy
 * of the write end to pass on the launcher's SIGINT / SIGTERM / SIGHUP as the byte
 * MT_LAUNCH_FORWARDED + sig; one that reached the whole process group (Ctrl-C) arrives both
 * ways and counts once. The outcome is written to outcome_fd before the process tears down
 * (PMIx_server_finalize on success; nothing of libpmix otherwise) and _exits with its code. */
#define MT_LAUNCH_FORWARDED 100
_Noreturn void mt_launch_attempt_process(const mt_launch_opts *o, int restart, pid_t parent, const int sig_pipe[2],
                                         int outcome_fd);

#endif
