/* launch.h — `mtrain launch`: a torchrun-style launcher for the ranks of one machine. It is a
 * small PMIx server (launch_pmix_server.c), so the ranks bootstrap exactly as under
 * `srun --mpi=pmix` or `mpirun`: PMIx_Init, fence, get (parallel/bootstrap_pmix.c).
 * The launcher forks N ranks running `exe ARGS`, relays their output, forwards
 * SIGINT/SIGTERM/SIGHUP, and when one rank fails stops the others (SIGTERM, SIGKILL after a
 * grace period) and reports that rank's status. */
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
} mt_launch_opts;

/* Runs the job to the end. On success (every rank exited 0) it finalizes the PMIx server,
 * removes its private tmpdir, sets *exit_code = 0 and returns MT_OK. A setup failure before
 * any rank ran returns a status with a message. When a rank fails, or the launcher is
 * interrupted, it does NOT return: it prints "mtrain launch: rank R exited with status S"
 * (or "was killed by signal"), stops the other ranks, removes the tmpdir and calls
 * _exit(S, or 128 + signal). Why _exit below cmd/: libpmix 4.2.2 can crash in
 * PMIx_server_finalize (and in its exit-time teardown) when a rank died during a fence
 * (a use-after-free inside libpmix, observed with 4.2.2), so on that path the library must not
 * be torn down at all. */
mt_status mt_launch_run(const mt_launch_opts *o, int *exit_code);

#endif
