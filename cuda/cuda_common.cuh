/* cuda_common.cuh — what every .cu file in cuda/ shares: the CUDA backend's context struct,
 * the CUDA_CHECK / CUBLAS_CHECK macros (a failing call returns MT_ERR_CUDA with
 * "file:line: call: error string"; nothing in cuda/ ever exits or aborts), bf16 helpers,
 * warp reductions, and the entry points each op family exports to cuda_backend.cu.
 * Rule: cuda/ is C++ inside, C at its edge — the module's one exported entry point
 * (parallel/cuda_module.c, opened by core/backend_cuda_module.c) hands out the backend's create
 * function; everything else is reached through the function table. */
#ifndef MT_CUDA_COMMON_CUH
#define MT_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "core/backend.h"
#include "core/op_check.h"
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
    float *scratch;             /* reduction partials (dbias, norm dweight/dbias, sum), scratch_bytes */
    size_t scratch_bytes;
    int n_sm;
    int cc_major, cc_minor;
    char device_name[256];      /* cudaDeviceProp.name, e.g. "NVIDIA H100 80GB HBM3" */
    char display_name[288];     /* be->device_name: device_name + " (cuda:<device>)" */
    struct mt_cuda_matmul_cache *mm_cache;
} mt_cuda_ctx;

static inline mt_cuda_ctx *mt_cuda_ctx_of(mt_backend *be) { return (mt_cuda_ctx *)be->ctx; }

static inline unsigned mt_cuda_ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

/* 1 if the device lets a block of `kernel` have `bytes` of dynamic shared memory (opting in above
 * 48 KiB); 0 otherwise, the error cleared (the caller then takes another path) */
template <typename K> static inline int mt_cuda_smem_optin(K kernel, size_t bytes) {
    int dev = 0, max_optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        bytes > (size_t)max_optin ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return 1;
}

static inline int mt_cuda_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The row slabs of a column reduction (dbias, a norm's dweight / dbias) whose gx column blocks
 * have ty lanes of rows each: ~4 blocks per SM, >= 8 rows per lane, at most 65535 and at most
 * what the scratch holds at slab_bytes each; 0 when not even one slab fits the scratch. */
static inline size_t mt_cuda_reduce_slabs(const mt_cuda_ctx *ctx, unsigned gx, int rows, int ty, size_t slab_bytes) {
    const size_t max_slabs = ctx->scratch_bytes / slab_bytes;
    const size_t want = mt_cuda_ceil_div((size_t)ctx->n_sm * 4, gx);
    const size_t by_rows = mt_cuda_ceil_div((size_t)rows, (size_t)ty * 8);
    size_t slabs = want < by_rows ? want : by_rows;
    if (slabs > max_slabs) slabs = max_slabs;
    if (slabs > 65535) slabs = 65535;
    if (slabs < 1) slabs = max_slabs < 1 ? 0 : 1;
    return slabs;
}

/* ---- device helpers ---- */

__device__ __forceinline__ float mt_warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float mt_ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ bf16 mt_to_bf16(float v) { return __float2bfloat16_rn(v); }

/* bf16 pairs packed in 32 bits (element 0 in the low half, as in memory), converted without
 * type punning (no reinterpret_cast between unsigned and __nv_bfloat162: alias-safe) */
__device__ __forceinline__ float mt_bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float mt_bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ unsigned mt_pack_bf16x2(float lo, float hi) {
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

/* 16-byte vectorised access: 8 bf16 (or 8 f32 in) per step, p 16-byte aligned (mt_cuda_aligned16) */
struct mt_vec8 { float v[8]; };

__device__ __forceinline__ mt_vec8 mt_ld8(const bf16 *p) { /* p 16-byte aligned */
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
    mt_vec8 r;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        r.v[2 * i] = mt_bf16_lo(w[i]);
        r.v[2 * i + 1] = mt_bf16_hi(w[i]);
    }
    return r;
}

__device__ __forceinline__ mt_vec8 mt_ld8(const float *p) { /* p 16-byte aligned */
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    mt_vec8 r = {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
    return r;
}

__device__ __forceinline__ void mt_st8(bf16 *p, const mt_vec8 &x) { /* round to nearest even, p 16-byte aligned */
    *reinterpret_cast<uint4 *>(p) = make_uint4(mt_pack_bf16x2(x.v[0], x.v[1]), mt_pack_bf16x2(x.v[2], x.v[3]),
                                               mt_pack_bf16x2(x.v[4], x.v[5]), mt_pack_bf16x2(x.v[6], x.v[7]));
}

__device__ __forceinline__ float mt_warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Block-wide sum / max for blockDim.x a multiple of 32 (<= 1024): every thread gets the
 * result. Fixed reduction tree, so deterministic. `sh` holds >= 32 floats; the call ends
 * with a __syncthreads, so sh may be reused at once. All threads of the block must call. */
template <bool MAX>
__device__ __forceinline__ float mt_block_reduce(float v, float *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = MAX ? mt_warp_max(v) : mt_warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = lane < n_warps ? sh[lane] : (MAX ? -INFINITY : 0.0f);
    r = MAX ? mt_warp_max(r) : mt_warp_sum(r);
    __syncthreads();
    return r;
}
__device__ __forceinline__ float mt_block_sum(float v, float *sh) { return mt_block_reduce<false>(v, sh); }
__device__ __forceinline__ float mt_block_max(float v, float *sh) { return mt_block_reduce<true>(v, sh); }

/* ---- op entry points (each .cu file exports its family to cuda_backend.cu) ---- */

/* cuda_matmul.cu */
mt_status mt_cuda_matmul_fwd(mt_backend *be, const mt_matmul_fwd_args *a);
mt_status mt_cuda_matmul_bwd(mt_backend *be, const mt_matmul_bwd_args *a);
void mt_cuda_matmul_cache_free(mt_cuda_ctx *ctx);
mt_status mt_cuda_matmul_gelu_fwd(mt_backend *be, const mt_matmul_gelu_fwd_args *a);
mt_status mt_cuda_matmul_dgelu_bwd(mt_backend *be, const mt_matmul_dgelu_bwd_args *a);

/* cuda_init.cu */
mt_status mt_cuda_init_normal(mt_backend *be, const mt_init_normal_args *a);

/* cuda_layernorm.cu */
mt_status mt_cuda_layernorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cuda_layernorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);
mt_status mt_cuda_rmsnorm_fwd(mt_backend *be, const mt_norm_fwd_args *a);
mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, const mt_norm_bwd_args *a);
mt_status mt_cuda_add_layernorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a);
mt_status mt_cuda_add_rmsnorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a);

/* cuda_act.cu */
mt_status mt_cuda_gelu_fwd(mt_backend *be, const mt_gelu_fwd_args *a);
mt_status mt_cuda_gelu_bwd(mt_backend *be, const mt_gelu_bwd_args *a);
mt_status mt_cuda_swiglu_fwd(mt_backend *be, const mt_swiglu_fwd_args *a);
mt_status mt_cuda_swiglu_bwd(mt_backend *be, const mt_swiglu_bwd_args *a);
mt_status mt_cuda_squared_relu_fwd(mt_backend *be, const mt_squared_relu_fwd_args *a);
mt_status mt_cuda_squared_relu_bwd(mt_backend *be, const mt_squared_relu_bwd_args *a);
mt_status mt_cuda_add(mt_backend *be, const mt_add_args *a);
mt_status mt_cuda_scale(mt_backend *be, const mt_scale_args *a);
mt_status mt_cuda_cast_f32_to_act(mt_backend *be, const mt_cast_args *a);

/* cuda_sum.cu */
mt_status mt_cuda_sum(mt_backend *be, const mt_sum_args *a);

/* cuda_rope.cu */
mt_status mt_cuda_rope(mt_backend *be, const mt_rope_args *a);

/* cuda_attention.cu */
mt_status mt_cuda_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a);
mt_status mt_cuda_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a);
/* cuda_attention_mma.cu: the tensor-core kernels for D in {32, 64, 96, 128} with 16-byte aligned
 * tensors; *done = 0 (and MT_OK) when they do not apply, then the caller runs the fp32 kernels.
 * The backward expects delta computed and writes all of dqkv. */
mt_status mt_cuda_attention_mma_fwd(mt_backend *be, const mt_attention_fwd_args *a, int *done);
mt_status mt_cuda_attention_mma_bwd(mt_backend *be, const mt_attention_bwd_args *a, int *done);

/* cuda_attention_block.cu */
mt_status mt_cuda_attention_block_fwd(mt_backend *be, const mt_attention_block_fwd_args *a);
mt_status mt_cuda_attention_block_bwd(mt_backend *be, const mt_attention_block_bwd_args *a);
mt_status mt_cuda_copy_rows(mt_backend *be, const mt_copy_rows_args *a);

/* cuda_embed.cu */
mt_status mt_cuda_embedding_fwd(mt_backend *be, const mt_embedding_fwd_args *a);
mt_status mt_cuda_embedding_bwd(mt_backend *be, const mt_embedding_bwd_args *a);

/* cuda_xent.cu */
mt_status mt_cuda_xent_fwd_bwd(mt_backend *be, const mt_xent_args *a);
mt_status mt_cuda_xent_vp_max(mt_backend *be, const mt_xent_vp_args *a);
mt_status mt_cuda_xent_vp_sumexp(mt_backend *be, const mt_xent_vp_args *a);
mt_status mt_cuda_xent_vp_finish(mt_backend *be, const mt_xent_vp_args *a);

/* cuda_moe.cu */
mt_status mt_cuda_moe_route(mt_backend *be, const mt_moe_route_args *a);
mt_status mt_cuda_moe_route_bwd(mt_backend *be, const mt_moe_route_bwd_args *a);
mt_status mt_cuda_moe_permute(mt_backend *be, const mt_moe_permute_args *a);
mt_status mt_cuda_moe_unpermute(mt_backend *be, const mt_moe_unpermute_args *a);
mt_status mt_cuda_moe_unpermute_bwd(mt_backend *be, const mt_moe_unpermute_bwd_args *a);

/* cuda_gate.cu */
mt_status mt_cuda_moe_gate_fwd(mt_backend *be, const mt_moe_gate_fwd_args *a);
mt_status mt_cuda_moe_gate_bwd(mt_backend *be, const mt_moe_gate_bwd_args *a);
mt_status mt_cuda_moe_gate_logit_bwd(mt_backend *be, const mt_moe_gate_logit_bwd_args *a);

/* cuda_optim.cu */
mt_status mt_cuda_adamw(mt_backend *be, const mt_adamw_args *a);

#endif
