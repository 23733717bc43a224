/* launch_internal.h — the PMIx server half of `mtrain launch` (launch_pmix_server.c), as used
 * by the process half (launch.c). Not a public interface. One server per process. */
#ifndef MT_LAUNCH_INTERNAL_H
#define MT_LAUNCH_INTERNAL_H

#include "core/status.h"

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

#endif
