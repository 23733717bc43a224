/* cuda_init.cu — init_normal on the device: core/rng.c's counter-based normal, drawn where the
 * weights live instead of on the host and copied.
 * The kernel repeats core/rng.c operation for operation: splitmix64 mixing of (seed, stream,
 * index) in 64-bit integers (exact), a 53-bit uniform in double, Box-Muller in double
 * (sqrt(-2 log u1) cos(2 pi u2)), times std in double, rounded once to fp32. None of these
 * expressions has an a * b + c shape, so nvcc's fused multiply-add contraction cannot change
 * them, and sqrt is correctly rounded on both sides.
 * Bit-equality with the host is very likely but not guaranteed: CUDA's double log has a
 * documented maximum error of 1 ulp and cos of 2 ulp (CUDA C++ Programming Guide, "Mathematical
 * Functions", double precision), glibc's log / cos are within 1 ulp and almost always
 * correctly rounded. A last-bit difference in the double survives the fp32 rounding only when
 * the value sits within a few double ulps of an fp32 rounding boundary, about 1 in 10^8
 * elements, and then the fp32 weight differs by 1 ulp. test/ops/test_cuda_parity.c compares
 * the op with the CPU's bit for bit on a GPU and reports the count of differing elements. */
#include "cuda/cuda_common.cuh"

__device__ __forceinline__ uint64_t rng_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    const uint64_t u = rng_mix64(rng_mix64(rng_mix64(seed) ^ stream) ^ index);
    return ((double)(u >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

__global__ void init_normal_kernel(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                                   double sd) {
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const uint64_t index = offset + (uint64_t)e;
        const double u1 = rng_uniform(seed, stream, 2 * index);
        const double u2 = rng_uniform(seed, stream, 2 * index + 1);
        const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        out[e] = (float)(sd * z);
    }
}

mt_status mt_cuda_init_normal(mt_backend *be, const mt_init_normal_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->out) return mt_errorf(MT_ERR_INTERNAL, "CUDA init_normal: NULL tensor (n=%zu)", a->n);
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    size_t blocks = mt_cuda_ceil_div(a->n, 256);
    if (blocks > (size_t)ctx->n_sm * 32) blocks = (size_t)ctx->n_sm * 32;
    if (blocks < 1) blocks = 1;
    init_normal_kernel<<<(unsigned)blocks, 256, 0, ctx->stream>>>((float *)a->out, a->n, a->seed, a->stream,
                                                                  a->offset, a->std);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
