/* cuda_common.cuh — what every .cu file in cuda/ shares: the CUDA backend's context struct,
 * the CUDA_CHECK / CUBLAS_CHECK macros (a failing call returns MT_ERR_CUDA with
 * "file:line: call: error string"; nothing in cuda/ ever exits or aborts), bf16 helpers,
 * warp reductions, and the entry points each op family exports to cuda_backend.cu.
 * Rule: cuda/ is C++ inside, C at its edge — core/ sees only mt_backend_cuda_create and
 * mt_cuda_available (extern "C"); everything else is reached through the function table. */
#ifndef MT_CUDA_COMMON_CUH
#define MT_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>

#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "core/backend.h"
#include "core/status.h"
}

/* Returns MT_ERR_CUDA from the enclosing function (which must return mt_status). */
#define CUDA_CHECK(call)                                                                     \
    do {                                                                                     \
        cudaError_t mt_cuda_e_ = (call);                                                     \
        if (mt_cuda_e_ != cudaSuccess) {                                                     \
            (void)cudaGetLastError(); /* clear a non-sticky error so the next call is clean */ \
            return mt_errorf(MT_ERR_CUDA, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,   \
                             cudaGetErrorString(mt_cuda_e_), cudaGetErrorName(mt_cuda_e_));  \
        }                                                                                    \
    } while (0)

#define CUBLAS_CHECK(call)                                                                   \
    do {                                                                                     \
        cublasStatus_t mt_cublas_s_ = (call);                                                \
        if (mt_cublas_s_ != CUBLAS_STATUS_SUCCESS)                                           \
            return mt_errorf(MT_ERR_CUDA, "%s:%d: %s: %s (cuBLASLt status %d)", __FILE__,    \
                             __LINE__, #call, cublasLtGetStatusString(mt_cublas_s_),          \
                             (int)mt_cublas_s_);                                             \
    } while (0)

/* After a kernel launch: catches bad launch configurations at once (not kernel faults,
 * which surface at the next sync). */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

typedef __nv_bfloat16 bf16;

struct mt_cuda_matmul_cache; /* cuda_matmul.cu: per-shape descriptors + chosen algorithm */

typedef struct mt_cuda_ctx {
    int device;
    cudaStream_t stream;        /* every op and copy runs on this one stream, in order */
    cublasLtHandle_t lt;
    void *workspace;            /* cuBLASLt workspace, workspace_bytes */
    size_t workspace_bytes;
    float *scratch;             /* reduction partials (dbias, norm dweight/dbias), scratch_bytes */
    size_t scratch_bytes;
    int n_sm;
    int cc_major, cc_minor;
    char device_name[256];
    struct mt_cuda_matmul_cache *mm_cache;
} mt_cuda_ctx;

static inline mt_cuda_ctx *mt_cuda_ctx_of(mt_backend *be) { return (mt_cuda_ctx *)be->ctx; }

static inline unsigned mt_cuda_ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

/* ---- device helpers ---- */

__device__ __forceinline__ float mt_warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float mt_ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ bf16 mt_to_bf16(float v) { return __float2bfloat16_rn(v); }

/* ---- op entry points (each .cu file exports its family to cuda_backend.cu) ---- */

/* cuda_matmul.cu */
mt_status mt_cuda_matmul_fwd(mt_backend *be, const mt_matmul_fwd_args *a);
mt_status mt_cuda_matmul_bwd(mt_backend *be, const mt_matmul_bwd_args *a);
void mt_cuda_matmul_cache_free(mt_cuda_ctx *ctx);

/* cuda_layernorm.cu */
mt_status mt_cuda_layernorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cuda_layernorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);
mt_status mt_cuda_rmsnorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);

#endif
