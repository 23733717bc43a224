/* comm_factory.c — creates the world communicator of the right implementation and splits groups
 * from it (see comm_factory.h). */
#include "parallel/comm_factory.h"

#include "parallel/comm_shm.h"

mt_comm_kind mt_comm_kind_for(int host_memory) { return host_memory ? MT_COMM_SHM : MT_COMM_NCCL; }

mt_status mt_comm_world_create(mt_comm_kind kind, mt_bootstrap *bs, int timeout_s, mt_comm **world) {
    *world = NULL;
    if (bs->size <= 1) return MT_OK;
    switch (kind) {
    case MT_COMM_SHM: return mt_comm_shm_init(bs, timeout_s, world);
    case MT_COMM_NCCL:
        return mt_errorf(MT_ERR_UNSUPPORTED,
                         "rank %d of %d: the CUDA backend with several ranks needs the NCCL communicator, which "
                         "mtrain does not have yet (the shared-memory one cannot carry GPU buffers); run one rank "
                         "on the GPU, or train these %d ranks with --backend cpu (training.backend: cpu)",
                         bs->rank, bs->size, bs->size);
    }
    return mt_errorf(MT_ERR_INTERNAL, "communicator factory: unknown kind %d", (int)kind);
}

mt_status mt_comm_group_create(mt_comm *parent, int color, int key, mt_comm **out) {
    *out = NULL;
    if (!parent) return color < 0 ? MT_OK : mt_errorf(MT_ERR_INTERNAL, "communicator factory: split without a world");
    return parent->i->split(parent, color, key, out);
}
