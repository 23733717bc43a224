#pragma once
/* test/cuda_emu/inc/mma.h — a host stand-in for nvcuda::wmma (16x16x16, bf16 in, fp32
 * accumulate) for test/cuda_emu/run.sh: every lane's fragment is the whole 16 x 16 tile (lane 0
 * computes the products and stores; the real fragment layout is opaque and never used by the
 * kernels), loads and stores are warp-collective (barriers before and after, so no lane can
 * overwrite a tile another lane has not read yet), and every pointer and leading dimension is
 * checked against WMMA's rules (32-byte aligned pointers, ldm a multiple of 16 bytes, tiles
 * inside the block's shared memory). Test harness only. */
namespace nvcuda { namespace wmma {
struct row_major {}; struct col_major {}; struct matrix_a {}; struct matrix_b {}; struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment { float x[16][16]; };
static inline void emu_check(const void *p, unsigned ldm, size_t esz) {
    assert((((uintptr_t)p) & 31u) == 0 && "wmma pointer not 32-byte aligned");
    assert((ldm * esz) % 16 == 0 && "wmma ldm not a multiple of 16 bytes");
    if ((const unsigned char *)p >= emu_smem_base && (const unsigned char *)p < emu_smem_base + emu_smem_bytes)
        assert((const unsigned char *)p + 15 * ldm * esz + 16 * esz <= emu_smem_base + emu_smem_bytes && "wmma tile outside shared memory");
}
template <class Use, class L> static inline void load_matrix_sync(fragment<Use, 16, 16, 16, bf16, L> &f, const bf16 *p, unsigned ldm) {
    emu_check(p, ldm, 2);
    __syncwarp();
    const bool rm = std::is_same<L, row_major>::value;
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) f.x[i][j] = __bfloat162float(rm ? p[i * ldm + j] : p[j * ldm + i]);
    __syncwarp();
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t l) {
    emu_check(p, ldm, 4); assert(l == mem_row_major);
    __syncwarp();
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) f.x[i][j] = p[i * ldm + j];
    __syncwarp();
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
    emu_check(p, ldm, 4); assert(l == mem_row_major);
    __syncwarp();
    if (emu.lane == 0) for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) p[i * ldm + j] = f.x[i][j];
    __syncwarp();
}
template <class F> static inline void fill_fragment(F &f, float v) { for (auto &r : f.x) for (auto &e : r) e = v; }
template <class LA, class LB> static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, bf16, LA> &a,
                                                          const fragment<matrix_b, 16, 16, 16, bf16, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
    if (emu.lane != 0) return; /* only lane 0 stores in this emulation */
    float r[16][16];
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) { float s = c.x[i][j]; for (int k = 0; k < 16; k++) s += a.x[i][k] * b.x[k][j]; r[i][j] = s; }
    memcpy(d.x, r, sizeof r);
}
} }
