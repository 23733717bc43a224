/* test/cuda_emu/inc/cuda/cuda_common.cuh — stands in for cuda/cuda_common.cuh when
 * test/cuda_emu/run.sh compiles cuda/cuda_attention_tc.cu for the host: a block is blockDim.x
 * real threads (std::thread), __syncthreads / __syncwarp are std::barrier waits, warp shuffles go
 * through a per-warp exchange array, bf16 is its bit pattern with round-to-nearest-even, and a
 * launch (rewritten by run.sh into emu_launch) runs the blocks one after another, each with
 * freshly garbage-filled dynamic shared memory (static __shared__ arrays become function statics).
 * Only what the kernels run by test/cuda_emu use (tensor-core attention, cross-entropy, GeLU/add/cast,
 * norms and the fused add + norm, init_normal).
 * Test harness only: never part of the build. */
#pragma once
#include <barrier>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <thread>
#include <vector>
#include <cstdio>
extern "C" {
#include "core/backend.h"
#include "core/status.h"
}
using std::min;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __align__(x)
#define __shared__ static /* blocks run one after another: a function's static is its block's shared memory */
struct dim3 { unsigned x = 1, y = 1, z = 1; dim3() {} dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
struct float2 { float x, y; };
extern thread_local dim3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
struct emu_ctx { std::barrier<> *block, *warp; float *xch; int lane; };
extern thread_local emu_ctx emu;
static inline void __syncthreads() { emu.block->arrive_and_wait(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu.warp->arrive_and_wait(); }
static inline float __shfl_xor_sync(unsigned, float v, int off) {
    emu.warp->arrive_and_wait();
    emu.xch[emu.lane] = v;
    emu.warp->arrive_and_wait();
    float r = emu.xch[emu.lane ^ off];
    emu.warp->arrive_and_wait();
    return r;
}
struct bf16 { uint16_t x; };
struct __nv_bfloat162 { bf16 a, b; };
static inline float __bfloat162float(bf16 h) { uint32_t u = (uint32_t)h.x << 16; float f; memcpy(&f, &u, 4); return f; }
static inline bf16 __float2bfloat16_rn(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{(uint16_t)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{(uint16_t)(u >> 16)};
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.a), __bfloat162float(h.b)}; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short __bfloat16_as_ushort(bf16 h) { return h.x; }
static inline float mt_bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
static inline float mt_bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
static inline unsigned mt_pack_bf16x2(float lo, float hi) {
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) | ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
static inline float mt_warp_sum(float v) { for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off); return v; }
static inline float mt_warp_max(float v) { for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off)); return v; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
struct float4 { float x, y, z, w; };
/* block-wide sum / max as cuda/cuda_common.cuh's (fixed tree, every thread gets the result) */
static inline float mt_block_sum(float v, float *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = mt_warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = lane < n_warps ? sh[lane] : 0.0f;
    r = mt_warp_sum(r);
    __syncthreads();
    return r;
}
static inline float mt_block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = mt_warp_max(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = lane < n_warps ? sh[lane] : -INFINITY;
    r = mt_warp_max(r);
    __syncthreads();
    return r;
}
typedef int cudaError_t; typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaDevAttrMaxSharedMemoryPerBlockOptin = 1, cudaFuncAttributeMaxDynamicSharedMemorySize = 2 };
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
extern int emu_max_smem;
static inline cudaError_t cudaDeviceGetAttribute(int *v, int, int) { *v = emu_max_smem; return 0; }
template <class K> static cudaError_t cudaFuncSetAttribute(K, int, int) { return 0; }
static inline cudaError_t cudaGetLastError() { return 0; }
#define CUDA_CHECK_LAUNCH() do {} while (0)
typedef struct { cudaStream_t stream; int n_sm; float *scratch; size_t scratch_bytes; } mt_cuda_ctx;
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); } /* the device's is approximate (2 ulp) */
static inline mt_cuda_ctx *mt_cuda_ctx_of(mt_backend *be) { return (mt_cuda_ctx *)be->ctx; }
static inline unsigned mt_cuda_ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
extern unsigned char *emu_smem_base; extern size_t emu_smem_bytes;
static inline unsigned char *emu_dyn_smem() { return emu_smem_base; }
template <class K, class... A> void emu_launch(dim3 g, dim3 b, size_t smem, cudaStream_t, K kernel, A... args) {
    gridDim = g; blockDim = b;
    assert(smem <= (size_t)emu_max_smem);
    for (unsigned by = 0; by < g.y; by++)
        for (unsigned bx = 0; bx < g.x; bx++) {
            std::vector<unsigned char> buf(smem + 256);
            unsigned char *base = (unsigned char *)(((uintptr_t)buf.data() + 127) & ~(uintptr_t)127);
            for (size_t i = 0; i < smem; i++) base[i] = 0xA5; /* garbage, as real shared memory */
            emu_smem_base = base; emu_smem_bytes = smem;
            std::barrier<> blk(b.x);
            const int nw = b.x / 32;
            std::vector<std::barrier<> *> wb; std::vector<std::vector<float>> xch(nw, std::vector<float>(32));
            for (int w = 0; w < nw; w++) wb.push_back(new std::barrier<>(32));
            std::vector<std::thread> th;
            for (unsigned t = 0; t < b.x; t++)
                th.emplace_back([&, t] {
                    threadIdx = dim3(t); blockIdx = dim3(bx, by);
                    emu = emu_ctx{&blk, wb[t / 32], xch[t / 32].data(), (int)(t % 32)};
                    kernel(args...);
                });
            for (auto &x : th) x.join();
            for (auto *p : wb) delete p;
        }
}
