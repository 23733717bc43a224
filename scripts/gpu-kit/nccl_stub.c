/* nccl_stub.c — stands in for libnccl.so.2 in the GPU kit when the machine has no NCCL at all
 * (neither in the CUDA toolkit nor as the nvidia-nccl wheel): the CUDA module links against it,
 * so one-GPU training still runs, and every NCCL call returns ncclSystemError with a message
 * that says NCCL is absent. Built on the GPU machine by gpu-check.sh (cc -shared, soname
 * libnccl.so.2); no NCCL header is needed: only the symbols matter to the linker, and each
 * stub returns an int status, which is what ncclResult_t is. */
#include <stddef.h>

#define MT_NCCL_ABSENT 2 /* ncclSystemError */

const char *ncclGetErrorString(int result) {
    (void)result;
    return "NCCL is not installed on this machine (the GPU kit linked its stand-in)";
}
const char *ncclGetLastError(void *comm) {
    (void)comm;
    return "NCCL is not installed on this machine (the GPU kit linked its stand-in)";
}
int ncclGetVersion(int *version) {
    if (version) *version = 0;
    return MT_NCCL_ABSENT;
}
#define MT_NCCL_STUB(name) \
    int name(void) { return MT_NCCL_ABSENT; }
MT_NCCL_STUB(ncclGetUniqueId)
MT_NCCL_STUB(ncclCommInitRankConfig)
MT_NCCL_STUB(ncclCommSplit)
MT_NCCL_STUB(ncclCommCount)
MT_NCCL_STUB(ncclCommUserRank)
MT_NCCL_STUB(ncclCommGetAsyncError)
MT_NCCL_STUB(ncclCommFinalize)
MT_NCCL_STUB(ncclCommDestroy)
MT_NCCL_STUB(ncclCommAbort)
MT_NCCL_STUB(ncclGroupStart)
MT_NCCL_STUB(ncclGroupEnd)
MT_NCCL_STUB(ncclAllReduce)
MT_NCCL_STUB(ncclAllGather)
MT_NCCL_STUB(ncclReduceScatter)
MT_NCCL_STUB(ncclBroadcast)
MT_NCCL_STUB(ncclSend)
MT_NCCL_STUB(ncclRecv)
