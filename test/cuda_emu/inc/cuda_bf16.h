/* test/cuda_emu/inc/cuda_bf16.h — stands in for CUDA's bf16 header in test/cuda_emu/run.sh's host
 * builds (see cuda_runtime.h next to it): __nv_bfloat16 is its bit pattern, converted with
 * round-to-nearest-even (NaN stays a quiet NaN), as __float2bfloat16_rn does on the device. Only
 * the conversions the emulated kernels and cuda/cuda_common.cuh use. Test harness only. */
#pragma once
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.x << 16; float f; memcpy(&f, &u, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(uint16_t)(u >> 16)};
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
