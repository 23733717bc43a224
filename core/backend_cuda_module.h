/* backend_cuda_module.h — the one entry point of the CUDA module (build/libmtrain_cuda.so: the
 * cuda/ objects and the NCCL communicator, linked against libcudart, libcublasLt and libnccl) and
 * the loader that opens it (core/backend_cuda_module.c). mtrain itself links no CUDA library: the
 * module is opened (dlopen) only when a recipe asks for the CUDA backend, or for auto once a CUDA
 * driver (libcuda.so.1) is found, so the CPU path never loads CUDA.
 * Rule: the module resolves mt_errorf & co. from the executable that opened it (mtrain exports its
 * mt_* symbols), so its errors land in the same per-thread message as everybody else's. */
#ifndef MT_BACKEND_CUDA_MODULE_H
#define MT_BACKEND_CUDA_MODULE_H

#include <stddef.h>

#include "core/backend.h"
#include "core/status.h"

struct mt_bootstrap;
struct mt_comm;

/* bumped whenever the table below changes: a module of another version is refused */
#define MT_CUDA_MODULE_ABI 1
#define MT_CUDA_MODULE_ENTRY "mt_cuda_module_entry"
#define MT_CUDA_MODULE_FILE "libmtrain_cuda.so"

typedef struct {
    int abi;
    /* visible CUDA devices (0: none, `why` says why) */
    int (*device_count)(char *why, size_t why_bytes);
    /* the CUDA backend on `device` (see mt_backend_cuda_create in backend.h) */
    mt_status (*backend_create)(mt_backend *be, int device);
    /* the NCCL world communicator over the bootstrap's ranks, on `be`'s stream and device:
     * collective; every wait gives up after timeout_s seconds (ncclCommAbort) */
    mt_status (*nccl_world_create)(struct mt_bootstrap *bs, mt_backend *be, int timeout_s, struct mt_comm **out);
    /* "2.28.9": the NCCL the module was linked with */
    void (*nccl_version)(char *out, size_t out_bytes);
} mt_cuda_module;

typedef const mt_cuda_module *(*mt_cuda_module_entry_fn)(int abi);

/* Inside the module only (cuda/cuda_backend.cu; parallel/cuda_module.c puts them in the table):
 * nothing in mtrain itself defines or calls these. */
int mt_cuda_module_device_count(char *why, size_t why_bytes);
mt_status mt_cuda_module_backend_create(mt_backend *be, int device);
void *mt_cuda_backend_stream(mt_backend *be); /* the backend's cudaStream_t */

/* Is a CUDA driver here? Opens libcuda.so.1 (and keeps it open: the module needs it next);
 * 0 with `why` ("no CUDA driver (libcuda.so.1 not found)") otherwise. Loads nothing else. */
int mt_cuda_driver_present(char *why, size_t why_bytes);
/* Opens the module once per process (later calls return the same table). NULL with `why`
 * naming the file(s) tried and dlerror() when it is missing or does not load, or when this
 * build has no CUDA. Does not check for the driver: callers do that first. */
const mt_cuda_module *mt_cuda_module_get(char *why, size_t why_bytes);
/* 1 after the module was opened in this process (tests: the CPU path must leave it 0). */
int mt_cuda_module_loaded(void);

#endif
