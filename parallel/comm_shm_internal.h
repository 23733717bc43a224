/* comm_shm_internal.h — the shared-memory segment layout and the per-process context shared by
 * comm_shm_core.c (segments, waits, liveness, abort, split), comm_shm_coll.c (collectives) and
 * comm_shm_p2p.c (send/recv, groups). Not part of any public interface.
 * Segment layout (one per communicator, all offsets 4 KiB / 256 B aligned):
 *   shm_hdr | shm_member[n] | data: 2 halves x n slots x slot_bytes | rings: n x n x (shm_ring + ring_bytes)
 * Rule: everything another process reads is a C11 atomic or is published by one (release/acquire). */
#ifndef MT_COMM_SHM_INTERNAL_H
#define MT_COMM_SHM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "parallel/comm_shm.h"

#define SHM_MAGIC_READY 0x6d747261696e5231ull  /* "mtrainR1" */
#define SHM_MAGIC_FAILED 0x6d747261696e4641ull /* "mtrainFA" */
#define SHM_NAME_BYTES 64
#define SHM_REASON_BYTES 512
#define SHM_DEFAULT_SLOT_BYTES (1u << 20)
#define SHM_DEFAULT_RING_BYTES (256u << 10)

typedef struct {
    _Atomic uint64_t magic;       /* 0 while the creator initialises, then READY or FAILED */
    uint64_t seg_bytes;
    uint64_t slot_bytes;          /* per rank per half */
    uint64_t ring_bytes;          /* per ordered pair */
    uint64_t members_off, data_off, rings_off, ring_stride;
    int32_t n_ranks;
    int32_t spin;                 /* 1: spin before sleeping */
    _Atomic int32_t n_attached;
    /* abort state, used in the family's root (world) segment */
    _Atomic int32_t abort_claim;
    _Atomic int32_t aborted;
    int32_t abort_rank, abort_pid;
    char abort_reason[SHM_REASON_BYTES];
    _Alignas(64) _Atomic uint32_t bar_word; /* futex: bumped when a barrier completes / a rank attaches */
    _Atomic int32_t bar_sleepers;
    char pad_[64 - 2 * sizeof(uint32_t)];
} shm_hdr;

typedef struct {
    int32_t color, key;
    char name[SHM_NAME_BYTES];    /* candidate segment name if this rank leads its new group */
} shm_split_xchg;

typedef struct {
    _Alignas(256) int32_t pid;
    int32_t world_rank;
    uint64_t starttime;           /* /proc/<pid>/stat field 22: detects a reused pid */
    shm_split_xchg xchg;
    _Alignas(64) _Atomic uint64_t arrive; /* barriers this rank has entered */
    _Alignas(64) _Atomic uint32_t bell;   /* futex: bumped when a peer moved data to / from us */
    _Atomic int32_t bell_sleepers;
} shm_member;

typedef struct {
    _Alignas(64) _Atomic uint64_t head; /* bytes written by the sender */
    _Alignas(64) _Atomic uint64_t tail; /* bytes consumed by the receiver */
} shm_ring;

/* One per root (world) segment per process: keeps the root mapping, whose abort flag every
 * communicator of the family watches, alive until the last communicator is destroyed. */
typedef struct {
    shm_hdr *root;
    size_t root_bytes;
    int refs;
} shm_family;

typedef struct {
    int kind; /* 0 send, 1 recv */
    int peer;
    char *buf;
    uint64_t n_bytes;
    uint64_t done;      /* stream bytes moved: 8-byte length header, then payload */
    uint64_t header;    /* recv: the length header as read */
    int complete;
} shm_p2p_op;

typedef struct {
    mt_comm comm;       /* comm.ctx points back here */
    shm_family *fam;
    shm_hdr *hdr;
    size_t map_bytes;
    int own_map;        /* 0 for the root communicator: the family owns that mapping */
    int rank, n;
    int world_rank;
    int timeout_s;
    int spin;
    uint64_t spin_ns;   /* current spin budget (adaptive, see shm_wait) */
    shm_member *members;
    char *data;
    char *rings;
    uint64_t bar_seq;   /* barriers entered by this rank */
    uint64_t unit;      /* double-buffer steps: half = unit & 1 */
    mt_status failed;   /* sticky failure after a peer error */
    char fail_msg[512];
    /* p2p */
    int group_depth;
    shm_p2p_op *ops;
    int n_ops, cap_ops;
    unsigned char *busy; /* 2 * n: an earlier op to (kind, peer) is still pending in this pass */
    uint64_t *counts;    /* n * n: alltoallv count matrix */
} shm_ctx;

static inline shm_ctx *shm_of(mt_comm *c) { return (shm_ctx *)c->ctx; }
static inline char *shm_slot(shm_ctx *c, int half, int r) {
    return c->data + ((size_t)half * (size_t)c->n + (size_t)r) * c->hdr->slot_bytes;
}
static inline shm_ring *shm_ring_at(shm_ctx *c, int src, int dst) {
    return (shm_ring *)(c->rings + ((size_t)src * (size_t)c->n + (size_t)dst) * c->hdr->ring_stride);
}

/* Wait until cond(c, arg, &blocker) holds, sleeping on `word` (futex) between checks; errors
 * name `what` and the blocking rank. Checks the family's abort flag and peer liveness. */
typedef int (*shm_cond_fn)(shm_ctx *c, void *arg, int *blocker);
mt_status shm_wait(shm_ctx *c, _Atomic uint32_t *word, _Atomic int32_t *sleepers, shm_cond_fn cond, void *arg,
                   const char *what);
/* Wake every sleeper on a futex word after bumping it. */
void shm_wake(_Atomic uint32_t *word, _Atomic int32_t *sleepers);
/* A full barrier over the communicator (also the step between writing and reading slots). */
mt_status shm_barrier(shm_ctx *c, const char *what);
/* MT_OK, or the sticky failure / abort error (entry check of every call); groupable = 0 also
 * refuses the call inside group_start/group_end. */
mt_status shm_check(shm_ctx *c, const char *what, int groupable);
/* /proc/<pid>/stat: 0 = exists (state, starttime filled when readable), -1 = no such process. */
int shm_proc_stat(pid_t pid, char *state, uint64_t *starttime);
/* Records a peer failure so later calls fail the same way; returns st. */
mt_status shm_fail(shm_ctx *c, mt_status st);

mt_status shm_split(mt_comm *comm, int color, int key, mt_comm **out);
void shm_abort(mt_comm *comm);
void shm_destroy(mt_comm *comm);

mt_status shm_allreduce(mt_comm *c, const void *send, void *recv, size_t n, mt_dtype dt, mt_redop op);
mt_status shm_reduce_scatter(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt,
                             mt_redop op);
mt_status shm_allgather(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt);
mt_status shm_broadcast(mt_comm *c, void *buf, size_t n, mt_dtype dt, int root);
mt_status shm_alltoallv(mt_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                        void *recv, const size_t *recv_counts, const size_t *recv_displs, mt_dtype dt);
mt_status shm_barrier_op(mt_comm *c);

mt_status shm_send(mt_comm *c, const void *buf, size_t n, mt_dtype dt, int peer);
mt_status shm_recv(mt_comm *c, void *buf, size_t n, mt_dtype dt, int peer);
mt_status shm_group_start(mt_comm *c);
mt_status shm_group_end(mt_comm *c);

extern const struct mt_comm_i mt_comm_shm_i;

#endif
