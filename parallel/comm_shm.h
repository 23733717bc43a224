/* comm_shm.h — the CPU implementation of comm.h: POSIX shared memory between the ranks (processes)
 * of one node. What it guarantees:
 *   - any size goes through a bounded per-communicator segment (chunked, double-buffered);
 *   - reductions run in a fixed order (rank 0 + rank 1 + ... + rank n-1, element by element,
 *     bf16 accumulated in fp32), so results are bitwise identical on every rank and every run
 *     and equal the serial sum in that order;
 *   - waits spin briefly (yielding every few us, adaptive budget <= 50 us) only when the node's
 *     ranks fit its cores, else sleep on a futex at once; each has
 *     a deadline (timeout_s, 0 = none) and checks its peers every ~100 ms (a dead, zombie or
 *     pid-reused peer is "died"); errors are MT_ERR_PEER naming the rank (world rank, pid);
 *   - abort() on any communicator fails every wait of the whole family (the world communicator
 *     and everything split from it) on every rank within ~100 ms: "rank R (pid P) aborted: why",
 *     where "why" is the aborting thread's mt_last_error();
 *   - segment names ("/mtrain-<creator pid>-<random>") are unlinked as soon as every member has
 *     attached (and by the survivors on any failure during creation), so /dev/shm keeps nothing,
 *     kill -9 included.
 * A communicator is used by one thread at a time (as a NCCL communicator); distinct communicators
 * may be driven by distinct threads at once: each has its own segment and context, the one
 * process-wide piece (the family's reference count) changes only in split / destroy, the abort flag
 * is atomic and error messages are per thread (the overlap engine's thread, parallel/grad_overlap.h,
 * relies on this). After a peer failure
 * it stays failed: every later call returns the same error.
 * Tuning (read by the rank that creates the world segment; sub-communicators inherit):
 *   MT_COMM_SHM_SLOT_BYTES  per-rank chunk buffer, x2 for double buffering (default 1 MiB)
 *   MT_COMM_SHM_RING_BYTES  per ordered pair send/recv ring (default 256 KiB)
 *   MT_COMM_SHM_SPIN        1 = spin before sleeping, 0 = never spin (default: spin only when the
 *                           ranks fit the union of their CPU affinity masks) */
#ifndef MT_COMM_SHM_H
#define MT_COMM_SHM_H

#include "parallel/bootstrap.h"
#include "parallel/comm.h"

/* The world communicator over all bs->size ranks, which must all run on this node (the error
 * says which ranks are elsewhere). Collective over the bootstrap. */
mt_status mt_comm_shm_init(mt_bootstrap *bs, int timeout_s, mt_comm **world);

/* For communicators made inside another one (the network communicator's node-local groups,
 * parallel/comm_gloo.c): the n ranks exchange one blob of mt_comm_shm_xchg_bytes() each through
 * `xchg` (an allgather among them, called exactly once when n > 1), then attach. The ranks must
 * share this node (mt_comm_shm_node_id equal), else the error names the one elsewhere. */
typedef mt_status (*mt_comm_shm_xchg_fn)(void *xctx, const void *mine, size_t n_bytes, void *all);
size_t mt_comm_shm_xchg_bytes(void);
mt_status mt_comm_shm_create_xchg(int rank, int n, mt_comm_shm_xchg_fn xchg, void *xctx, int timeout_s,
                                  mt_comm **out);
/* "hostname/boot-id" of this node, equal on every rank of one node */
#define MT_NODE_ID_BYTES 100
void mt_comm_shm_node_id(char *buf, size_t buf_bytes);

/* For programs that fork their ranks themselves (tests, benchmarks): the parent creates a handle
 * before forking (anonymous shared memory, nothing named), each child calls
 * mt_comm_shm_create_local with its rank, and the parent frees the handle when the children are
 * done (children just exit or leave it mapped). The handle can be reused for several worlds. */
typedef struct mt_comm_shm_local mt_comm_shm_local;
mt_status mt_comm_shm_local_create(int n_ranks, mt_comm_shm_local **out);
mt_status mt_comm_shm_create_local(mt_comm_shm_local *local, int rank, int timeout_s, mt_comm **world);
void mt_comm_shm_local_free(mt_comm_shm_local *local);

#endif
