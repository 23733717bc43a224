/* comm_factory.h — the one place that creates communicators. It picks the implementation from
 * where the tensors live: host memory -> the shared-memory communicator (parallel/comm_shm.h) when
 * every rank shares one node, else the Gloo one (parallel/comm_gloo.h: TCP between nodes, whose
 * split gives node-local groups shared memory again); device memory -> NCCL (parallel/comm_nccl.c, inside the CUDA module: reached
 * through core/backend_cuda_module.h; refused with a clear error when the module or NCCL is
 * missing, never by handing device pointers to shared memory). Group communicators are split from
 * the world one (NCCL's ncclCommSplit model).
 * Rule: nothing outside this file and its tests calls an implementation's constructor. */
#ifndef MT_COMM_FACTORY_H
#define MT_COMM_FACTORY_H

#include "core/backend.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"

typedef enum { MT_COMM_SHM = 0, MT_COMM_NCCL } mt_comm_kind;

/* Which implementation carries buffers of this kind of memory. */
mt_comm_kind mt_comm_kind_for(int host_memory);
const char *mt_comm_kind_name(mt_comm_kind kind);
/* The world communicator over the bootstrap's ranks; collective over them. *world = NULL for a
 * single rank (nothing to communicate). be: the backend whose buffers it carries (NCCL runs on its
 * device and stream; the shared-memory one ignores it, may be NULL). Errors name the
 * implementation and the fix. */
mt_status mt_comm_world_create(mt_comm_kind kind, mt_bootstrap *bs, mt_backend *be, int timeout_s, mt_comm **world);
/* A group of `parent`'s ranks: same color -> same group, ordered by key; color < 0 -> *out = NULL.
 * Collective over parent's ranks. */
mt_status mt_comm_group_create(mt_comm *parent, int color, int key, mt_comm **out);

#endif
