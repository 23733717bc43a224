/* comm_nccl.h — the NCCL communicator (parallel/comm_nccl.c), built only into the CUDA module
 * (build/libmtrain_cuda.so) and reached through its entry point (core/backend_cuda_module.h):
 * nothing in mtrain itself links NCCL. The factory (parallel/comm_factory.c) is its only caller. */
#ifndef MT_COMM_NCCL_H
#define MT_COMM_NCCL_H

#include <stddef.h>

#include "core/backend.h"
#include "core/backend_cuda_module.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"

/* The world communicator over the bootstrap's ranks (bs->size >= 2), on be's device and stream
 * (be: a CUDA backend). Rank 0 draws the ncclUniqueId, the bootstrap's allgather carries it to
 * every rank (PMIx or env://, so ranks may be on several nodes), then ncclCommInitRankConfig,
 * non-blocking, polled until done or timeout_s seconds (then ncclCommAbort and MT_ERR_PEER).
 * Collective over the bootstrap's ranks. */
mt_status mt_comm_nccl_world_create(mt_bootstrap *bs, mt_backend *be, int timeout_s, mt_comm **out);
/* "2.28.9" (the NCCL linked into the module) */
void mt_comm_nccl_version(char *out, size_t out_bytes);

#endif
