/* test/cuda_emu/inc/cuda_runtime.h — stands in for the CUDA runtime's header when
 * test/cuda_emu/run.sh compiles cuda/ kernels for the host, so that they include the real
 * cuda/cuda_common.cuh: the CUDA qualifiers as plain C++, dim3 / vector types, and a block as
 * blockDim.x real threads (std::thread) where __syncthreads / __syncwarp are std::barrier waits
 * and warp shuffles go through a per-warp exchange array. A launch (rewritten by run.sh into
 * emu_launch) runs the blocks one after another, each with freshly garbage-filled dynamic shared
 * memory (static __shared__ arrays become function statics). The emulation's globals
 * (threadIdx, emu, emu_max_smem, ...) are defined by each *_emu.cpp. Only what the kernels run by
 * test/cuda_emu use (tensor-core attention, cross-entropy, GeLU/add/cast, norms and the fused
 * add + norm, init_normal, the embedding). Test harness only: never part of the build. */
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
struct float4 { float x, y, z, w; };
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
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
/* mma.sync.m16n8k16 (bf16 in, fp32 accumulate), warp-collective: every lane's fragment registers
 * are gathered through the exchange array into the whole A (16 x 16) and B (16 x 8), decoded with
 * the PTX ISA's fragment layouts (g = lane / 4, t = lane % 4), and each lane adds its own four
 * products in fp32. cuda/ kernels call it in place of the instruction when MT_CUDA_EMU is set. */
#define MT_CUDA_EMU 1
static inline float emu_bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
static inline float emu_bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
/* ldmatrix.sync.m8n8.x4[.trans].b16, warp-collective: every lane's row address is gathered, then each
 * lane reads its four registers as the PTX ISA gives them (plain: row l/4, columns 2(l%4), +1 of
 * matrix m, whose rows lanes 8m..8m+7 address; trans: column l/4 of rows 2(l%4), +1). Addresses must
 * be 16-byte aligned, as on the device. */
static inline void mt_emu_ldmatrix_x4(unsigned (&r)[4], const void *row, bool trans) {
    assert((((uintptr_t)row) & 15u) == 0 && "ldmatrix row address not 16-byte aligned");
    const uintptr_t mine = (uintptr_t)row;
    uintptr_t all[32];
    for (int half = 0; half < 2; half++) {
        const unsigned part = (unsigned)(half ? (uint64_t)mine >> 32 : mine & 0xffffffffu);
        emu.warp->arrive_and_wait();
        memcpy(&emu.xch[emu.lane], &part, 4);
        emu.warp->arrive_and_wait();
        for (int L = 0; L < 32; L++) {
            unsigned v; memcpy(&v, &emu.xch[L], 4);
            all[L] = half ? all[L] | ((uintptr_t)v << 32) : (uintptr_t)v;
        }
    }
    emu.warp->arrive_and_wait();
    const int l = emu.lane;
    for (int m = 0; m < 4; m++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *p = (const uint16_t *)all[8 * m + l / 4];
            lo = p[2 * (l % 4)], hi = p[2 * (l % 4) + 1];
        } else {
            lo = ((const uint16_t *)all[8 * m + 2 * (l % 4)])[l / 4];
            hi = ((const uint16_t *)all[8 * m + 2 * (l % 4) + 1])[l / 4];
        }
        r[m] = (unsigned)lo | ((unsigned)hi << 16);
    }
}
static inline void mt_emu_mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const unsigned mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
    unsigned all[6][32];
    for (int r = 0; r < 6; r++) {
        emu.warp->arrive_and_wait();
        memcpy(&emu.xch[emu.lane], &mine[r], 4);
        emu.warp->arrive_and_wait();
        memcpy(all[r], emu.xch, sizeof all[r]);
    }
    emu.warp->arrive_and_wait();
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
        for (int r = 0; r < 4; r++) A[ar[r]][ac[r]] = emu_bf16_lo(all[r][L]), A[ar[r]][ac[r] + 1] = emu_bf16_hi(all[r][L]);
        B[2 * t][g] = emu_bf16_lo(all[4][L]), B[2 * t + 1][g] = emu_bf16_hi(all[4][L]);
        B[2 * t + 8][g] = emu_bf16_lo(all[5][L]), B[2 * t + 9][g] = emu_bf16_hi(all[5][L]);
    }
    const int g = emu.lane >> 2, t = emu.lane & 3;
    for (int e = 0; e < 4; e++) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float s = d[e];
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        d[e] = s;
    }
}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); } /* the device's is approximate (2 ulp) */
typedef int cudaError_t; typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaDevAttrMaxSharedMemoryPerBlockOptin = 1, cudaFuncAttributeMaxDynamicSharedMemorySize = 2 };
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
static inline const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
extern int emu_max_smem;
static inline cudaError_t cudaDeviceGetAttribute(int *v, int, int) { *v = emu_max_smem; return 0; }
template <class K> static cudaError_t cudaFuncSetAttribute(K, int, int) { return 0; }
static inline cudaError_t cudaGetLastError() { return 0; }
static inline cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) { /* garbage, as cudaMalloc's */
    *p = aligned_alloc(256, (bytes + 255) & ~(size_t)255); if (*p) memset(*p, 0xA5, bytes); return *p ? 0 : 2;
}
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) { free(p); return 0; }
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
            const unsigned nt = b.x * b.y; /* 2-D blocks: x fastest, warps by linear index */
            std::barrier<> blk(nt);
            const int nw = nt / 32;
            std::vector<std::barrier<> *> wb; std::vector<std::vector<float>> xch(nw, std::vector<float>(32));
            for (int w = 0; w < nw; w++) wb.push_back(new std::barrier<>(32));
            std::vector<std::thread> th;
            for (unsigned t = 0; t < nt; t++)
                th.emplace_back([&, t] {
                    threadIdx = dim3(t % b.x, t / b.x); blockIdx = dim3(bx, by);
                    emu = emu_ctx{&blk, wb[t / 32], xch[t / 32].data(), (int)(t % 32)};
                    kernel(args...);
                });
            for (auto &x : th) x.join();
            for (auto *p : wb) delete p;
        }
}
