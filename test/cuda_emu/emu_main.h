/* emu_main.h — what every emulation test of test/cuda_emu defines once: the globals of the
 * host stand-ins (inc/cuda_runtime.h: thread and block indices, the emulated shared memory), a
 * xorshift random source (seed EMU_SEED, set before including), bf16 rounding, the normalised
 * MSE check and the bit-identity check (names padded to EMU_NAME_WIDTH), the CPU backend and
 * emulated CUDA context some tests run against, and bf16 staging. Include it after the rewritten
 * cuda/ files (NAME_host.cpp). */
#ifndef MT_EMU_MAIN_H
#define MT_EMU_MAIN_H

#ifndef EMU_SEED
#define EMU_SEED 0x2545F4914F6CDD1Dull
#endif
#ifndef EMU_NAME_WIDTH
#define EMU_NAME_WIDTH 28
#endif

thread_local dim3 threadIdx, blockIdx; dim3 blockDim, gridDim; thread_local emu_ctx emu;
int emu_max_smem = 227 * 1024; unsigned char *emu_smem_base; size_t emu_smem_bytes;
static uint64_t rs = EMU_SEED;
static uint64_t next() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
/* uniform in [-1, 1) */
static float frand() { return (float)((next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }
static float rb(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }
static double nmse(const float *a, const float *b, size_t n) {
    double x = 0, y = 0;
    for (size_t i = 0; i < n; i++) { double d = (double)a[i] - b[i]; x += d * d; y += (double)b[i] * b[i]; }
    return x != x ? 1e30 : (y > 0 ? x / y : x);
}
static int fails = 0;
[[maybe_unused]] static void cmp(const char *w, const float *a, const float *b, size_t n, double tol) {
    double e = nmse(a, b, n);
    printf("    %-*s nmse %.3e %s\n", EMU_NAME_WIDTH, w, e, e < tol ? "ok" : "FAIL");
    if (!(e < tol)) fails++;
}
[[maybe_unused]] static void same_bits(const char *w, const void *a, const void *b, size_t bytes) {
    int ok = memcmp(a, b, bytes) == 0;
    printf("    %-*s %s\n", EMU_NAME_WIDTH, w, ok ? "same bits ok" : "FAIL (bits differ)");
    if (!ok) fails++;
}
[[maybe_unused]] static mt_backend g_cpu, g_be;
[[maybe_unused]] static mt_cuda_ctx g_ctx;
[[maybe_unused]] static bf16 *to_bf16(const std::vector<float> &x) {
    bf16 *p = (bf16 *)aligned_alloc(256, x.size() * 2 + 256);
    for (size_t i = 0; i < x.size(); i++) p[i] = __float2bfloat16_rn(x[i]);
    return p;
}
[[maybe_unused]] static std::vector<float> from_bf16(const bf16 *p, size_t n) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = __bfloat162float(p[i]);
    return x;
}

#endif
