/* backend_cuda_stub.c — the CUDA backend's entry points for builds without CUDA (CUDA=0 or no
 * nvcc): mt_backend_cuda_create fails with MT_ERR_UNSUPPORTED and says how to get a CUDA
 * build, mt_cuda_available says 0 and why, mt_cuda_device_count says 0. Rule kept: a missing
 * backend is an error message, never a link error or a crash. When MT_HAVE_CUDA is defined, cuda/cuda_backend.cu provides
 * all three functions and this file compiles to nothing but a typedef. */
#ifndef MT_HAVE_CUDA

#include <stdio.h>
#include <string.h>

#include "core/backend.h"

#define MT_NO_CUDA_MSG                                                                     \
    "this mtrain was built without the CUDA backend (nvcc not found or CUDA=0); rebuild "  \
    "with make CUDA=1 on a machine with the CUDA toolkit, or use --backend cpu"

mt_status mt_backend_cuda_create(mt_backend *be, int device) {
    (void)device;
    if (be) memset(be, 0, sizeof *be);
    return mt_errorf(MT_ERR_UNSUPPORTED, "%s", MT_NO_CUDA_MSG);
}

int mt_cuda_device_count(void) { return 0; }

int mt_cuda_available(char *why, size_t why_bytes) {
    if (why && why_bytes) snprintf(why, why_bytes, "%s", MT_NO_CUDA_MSG);
    return 0;
}

#endif

/* keeps the translation unit non-empty when MT_HAVE_CUDA is defined (ISO C) */
typedef int mt_backend_cuda_stub_unused;
