/* cuda_module.c — the CUDA module's entry point, mt_cuda_module_entry (core/backend_cuda_module.h):
 * the table of the CUDA backend (cuda/) and the NCCL communicator (parallel/comm_nccl.c). Built
 * only into build/libmtrain_cuda.so, never into mtrain, and the module's only exported symbol
 * (everything else in it is compiled with -fvisibility=hidden). It sits in parallel/ because it
 * names both layers. */
#include "core/backend_cuda_module.h"
#include "parallel/comm_nccl.h"

__attribute__((visibility("default"))) const mt_cuda_module *mt_cuda_module_entry(int abi);

const mt_cuda_module *mt_cuda_module_entry(int abi) {
    static const mt_cuda_module table = {
        .abi = MT_CUDA_MODULE_ABI,
        .device_count = mt_cuda_module_device_count,
        .backend_create = mt_cuda_module_backend_create,
        .nccl_world_create = mt_comm_nccl_world_create,
        .nccl_version = mt_comm_nccl_version,
    };
    return abi == MT_CUDA_MODULE_ABI ? &table : NULL;
}
