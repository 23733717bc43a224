/* comm.h — the collectives interface (NCCL-style): a const table of function pointers plus
 * an opaque context, so the CPU implementations (comm_shm.c: POSIX shared memory between the
 * ranks of one node; comm_gloo.c: Gloo over TCP across nodes) and the GPU one (comm_nccl.c, in the CUDA module) are interchangeable and
 * map 1:1 onto NCCL (ncclAllReduce, ncclReduceScatter, ncclAllGather, ncclBroadcast, ncclSend/ncclRecv in
 * ncclGroupStart/End, ncclCommSplit, ncclCommAbort).
 * Rules: counts are elements (n_*), never bytes; buffers are backend memory (host memory for
 * the CPU backend); every call is collective over the communicator's ranks except send/recv;
 * every wait has a timeout and notices a dead peer, returning MT_ERR_PEER with a message
 * naming the rank ("rank 3 (pid 1234) died"). Results are deterministic: the reduction order
 * is fixed (rank 0 + rank 1 + ... in order; across nodes Gloo's ring order), whatever the timing. */
#ifndef MT_COMM_H
#define MT_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"

typedef enum { MT_RED_SUM = 0, MT_RED_MAX } mt_redop;

typedef struct mt_comm mt_comm;

struct mt_comm_i {
    const char *name;
    /* recv[i] = op over ranks of send[i], i < n; send == recv allowed (in place) */
    mt_status (*allreduce)(mt_comm *c, const void *send, void *recv, size_t n, mt_dtype dt, mt_redop op);
    /* send holds size * n_per_rank elements; rank r receives op over ranks of send[r*n .. r*n+n) */
    mt_status (*reduce_scatter)(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt,
                                mt_redop op);
    /* recv[r*n .. r*n+n) = send of rank r; send may alias recv + rank*n (in place) */
    mt_status (*allgather)(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt);
    mt_status (*broadcast)(mt_comm *c, void *buf, size_t n, mt_dtype dt, int root);
    /* point to point; between group_start and group_end sends and receives are queued and
     * progress together (no deadlock whatever the order), as with ncclGroupStart/End */
    mt_status (*send)(mt_comm *c, const void *buf, size_t n, mt_dtype dt, int peer);
    mt_status (*recv)(mt_comm *c, void *buf, size_t n, mt_dtype dt, int peer);
    mt_status (*group_start)(mt_comm *c);
    mt_status (*group_end)(mt_comm *c);
    /* counts and displacements in elements, one per rank */
    mt_status (*alltoallv)(mt_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                           void *recv, const size_t *recv_counts, const size_t *recv_displs, mt_dtype dt);
    mt_status (*barrier)(mt_comm *c);
    /* ranks with the same color form a new communicator, ordered by (key, old rank);
     * color < 0: this rank gets *out = NULL (like NCCL_SPLIT_NOCOLOR) */
    mt_status (*split)(mt_comm *c, int color, int key, mt_comm **out);
    /* marks the communicator failed so every peer's pending and future calls return
     * MT_ERR_PEER promptly; safe to call from a failure path */
    void (*abort)(mt_comm *c);
    void (*destroy)(mt_comm *c);
};

/* An implementation's table from its functions P##allreduce ... P##destroy (barrier and split
 * named apart: their natural names are taken by helpers in some implementations), so that the
 * list of operations is written once, here:
 *   const struct mt_comm_i my_impl = MT_COMM_TABLE("mine", my_, my_barrier, my_split); */
#define MT_COMM_TABLE(NAME, P, BARRIER, SPLIT)                                                            \
    {                                                                                                     \
        .name = NAME, .allreduce = P##allreduce, .reduce_scatter = P##reduce_scatter,                    \
        .allgather = P##allgather, .broadcast = P##broadcast, .send = P##send, .recv = P##recv,          \
        .group_start = P##group_start, .group_end = P##group_end, .alltoallv = P##alltoallv,             \
        .barrier = BARRIER, .split = SPLIT, .abort = P##abort, .destroy = P##destroy,                    \
    }

struct mt_comm {
    const struct mt_comm_i *i;
    void *ctx;
    int rank, size;
};

#endif
