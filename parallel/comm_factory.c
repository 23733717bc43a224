/* comm_factory.c — creates the world communicator of the right implementation and splits groups
 * from it (see comm_factory.h); for host memory across several nodes that is Gloo (comm_gloo.h). The NCCL one lives in the CUDA module: asked for through the
 * module's table, so mtrain links no NCCL. */
#include "parallel/comm_factory.h"

#include <stdlib.h>
#include <string.h>

#include "core/backend_cuda_module.h"
#include "parallel/comm_gloo.h"
#include "parallel/comm_shm.h"

mt_comm_kind mt_comm_kind_for(int host_memory) { return host_memory ? MT_COMM_SHM : MT_COMM_NCCL; }

const char *mt_comm_kind_name(mt_comm_kind kind) { return kind == MT_COMM_NCCL ? "nccl" : "shm"; }

static mt_status nccl_world(mt_bootstrap *bs, mt_backend *be, int timeout_s, mt_comm **world) {
    char why[1024];
    if (!be || be->host_memory)
        return mt_errorf(MT_ERR_INTERNAL, "rank %d of %d: the NCCL communicator needs the CUDA backend's device and "
                         "stream (a bug in the caller)", bs->rank, bs->size);
    const mt_cuda_module *m = mt_cuda_module_get(why, sizeof why);
    if (!m || !m->nccl_world_create)
        return mt_errorf(MT_ERR_UNSUPPORTED,
                         "rank %d of %d: the CUDA backend with several ranks needs the NCCL communicator, which is "
                         "not available (%s); the shared-memory communicator cannot carry GPU buffers: run one rank "
                         "on the GPU, or train these %d ranks with --backend cpu (training.backend: cpu)",
                         bs->rank, bs->size, m ? "the CUDA module has no NCCL" : why, bs->size);
    return m->nccl_world_create(bs, be, timeout_s, world);
}

/* host memory: shared memory when every rank shares this node (node ids exchanged through the
 * bootstrap), else Gloo, whose splits keep shared memory for node-local groups */
static mt_status host_world(mt_bootstrap *bs, int timeout_s, mt_comm **world) {
    char (*nodes)[MT_NODE_ID_BYTES] = calloc((size_t)bs->size, MT_NODE_ID_BYTES), mine[MT_NODE_ID_BYTES] = "";
    if (!nodes) return mt_errorf(MT_ERR_OOM, "communicator factory: out of memory for %d ranks", bs->size);
    mt_comm_shm_node_id(mine, sizeof mine);
    mt_status st = bs->allgather(bs, mine, sizeof mine, nodes);
    int one_node = 1;
    for (int k = 1; st == MT_OK && k < bs->size; k++)
        if (strcmp(nodes[k], nodes[0])) one_node = 0;
    if (st != MT_OK) mt_error_context(st, "communicator factory: exchanging node ids: ");
    else if (one_node) st = mt_comm_shm_init(bs, timeout_s, world);
    else st = mt_comm_gloo_init(bs, (const char (*)[MT_NODE_ID_BYTES])nodes, timeout_s, world);
    free(nodes);
    return st;
}

mt_status mt_comm_world_create(mt_comm_kind kind, mt_bootstrap *bs, mt_backend *be, int timeout_s, mt_comm **world) {
    *world = NULL;
    if (bs->size <= 1) return MT_OK;
    switch (kind) {
    case MT_COMM_SHM: return host_world(bs, timeout_s, world);
    case MT_COMM_NCCL: return nccl_world(bs, be, timeout_s, world);
    }
    return mt_errorf(MT_ERR_INTERNAL, "communicator factory: unknown kind %d", (int)kind);
}

mt_status mt_comm_group_create(mt_comm *parent, int color, int key, mt_comm **out) {
    *out = NULL;
    if (!parent) return color < 0 ? MT_OK : mt_errorf(MT_ERR_INTERNAL, "communicator factory: split without a world");
    return parent->i->split(parent, color, key, out);
}
