/* dtype.h — the element types mtrain moves around (fp32, bf16), their sizes and names, and the one
 * fp32 <-> bf16 conversion every host-side user shares (weight init, the shared-memory
 * communicator's bf16 reductions, tests). bf16 is the top half of an IEEE-754 float; the
 * conversion rounds to nearest even and keeps NaN a (quiet) NaN, as CUDA's __float2bfloat16 does.
 * Rule: no dependencies beyond the C library, so every layer can include it. */
#ifndef MT_DTYPE_H
#define MT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { MT_F32 = 0, MT_BF16 = 1 } mt_dtype;

static inline size_t mt_dtype_bytes(mt_dtype dt) { return dt == MT_F32 ? 4 : 2; }
const char *mt_dtype_name(mt_dtype dt);

static inline float mt_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* round to nearest even; NaN stays NaN (the quiet bit is set so truncation cannot make it Inf) */
static inline uint16_t mt_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
