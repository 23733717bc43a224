/* launch.h — `mtrain launch`: a torchrun-style launcher for the ranks of one machine. It is a
 * small PMIx server (launch_pmix_server.c), so the ranks bootstrap exactly as under
 * `srun --mpi=pmix` or `mpirun`: PMIx_Init, fence, get (parallel/bootstrap_pmix.c).
 * The launcher forks N ranks running `exe ARGS`, relays their output, forwards
 * SIGINT/SIGTERM/SIGHUP, and when one rank fails stops the others (SIGTERM, SIGKILL after a
 * grace period) and reports that rank's status. With max_restarts > 0 (torchrun's
 * --max-restarts) a failed job is started again, all N ranks with the same arguments, up to
 * max_restarts times (launch_restarts.c). Every rank sees MT_RESTART_COUNT and
 * TORCHELASTIC_RESTART_COUNT = its attempt's number (0 first), to resume from its latest
 * checkpoint after a restart. */
#ifndef MT_LAUNCH_H
#define MT_LAUNCH_H

#include "core/status.h"

typedef struct {
    int n_ranks;          /* >= 1 */
    char *const *argv;    /* argv[0] is the program name the ranks see; NULL-terminated */
    const char *exe;      /* the executable; NULL = /proc/self/exe (this mtrain) */
    int prefix;           /* 1: prefix every output line with "[rR] " unless it already
                             starts with "[r" (mtrain's own "[rR tpT ppP dpD]" lines) */
    double kill_grace_s;  /* SIGTERM -> SIGKILL delay for the remaining ranks; <= 0: 5 s */
    int max_restarts;     /* >= 0: how many times a failed job is restarted; 0 = never */
    /* One node of a multi-node job (torchrun's --nnodes / --node-rank / --master-addr /
     * --master-port): n_nodes > 1 starts only this node's n_ranks ranks, as global ranks
     * node_rank * n_ranks + local rank of WORLD_SIZE = n_nodes * n_ranks, and they bootstrap
     * through env:// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
     * GROUP_WORLD_SIZE, ROLE_*, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID,
     * TORCHELASTIC_MAX_RESTARTS; MT_BOOTSTRAP=env) with rank 0's store at master_addr:master_port:
     * no PMIx server (it would know only this node's ranks). n_nodes <= 1: one node, the PMIx
     * server as above. */
    int n_nodes;              /* 0 or 1: single node (PMIx); > 1: env:// */
    int node_rank;            /* 0..n_nodes-1 */
    const char *master_addr;  /* n_nodes > 1: the host of global rank 0 (its env:// store) */
    int master_port;          /* n_nodes > 1: 1..65535 */
    const char *run_id;       /* TORCHELASTIC_RUN_ID; NULL: "none" */
    const char *role;         /* ROLE_NAME; NULL: "default" */
} mt_launch_opts;

/* Runs the job to the end.
 * max_restarts == 0 (the ranks are this process's children): on success (every rank exited 0)
 * it finalizes the PMIx server, removes its private tmpdir, sets *exit_code = 0 and returns
 * MT_OK. A setup failure before any rank ran returns a status with a message. When a rank
 * fails, or the launcher is interrupted, it does NOT return: it prints "mtrain launch: rank R
 * exited with status S" (or "was killed by signal"), stops the other ranks, removes the tmpdir
 * and calls _exit(S, or 128 + signal). Why _exit below cmd/: libpmix 4.2.2 can crash in
 * PMIx_server_finalize (and in its exit-time teardown) when a rank died during a fence
 * (a use-after-free inside libpmix, observed with 4.2.2), so on that path the library must not
 * be torn down at all.
 * max_restarts > 0: each attempt runs in a supervisor process of its own (the ranks are this
 * process's grandchildren) and this process never touches libpmix, so it always returns: MT_OK
 * with *exit_code = 0 when an attempt's ranks all exited 0; with the failed rank's status when
 * a failure came after max_restarts restarts ("restarts exhausted") or while the launcher was
 * being interrupted; 128 + signal when SIGINT / SIGTERM / SIGHUP stopped the job (never
 * restarted); or a status when an attempt could not start its ranks. */
mt_status mt_launch_run(const mt_launch_opts *o, int *exit_code);

#endif
