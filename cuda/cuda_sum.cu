/* cuda_sum.cu — sum / sum of squares of n f32 elements added into an f32 scalar (+=), used
 * for gradient norms and loss totals.
 * Deterministic two-pass reduction, no float atomics: pass 1 runs a grid whose size depends
 * only on n (at most SUM_MAX_BLOCKS blocks); each thread accumulates its grid-stride share in
 * double, each block reduces its threads in a fixed tree and writes one double partial into
 * ctx->scratch; pass 2 is one block that sums the partials in a fixed tree and does
 * *out = (float)((double)*out + total), as the CPU reference does. Same bits on every run
 * (and on every GPU model, since the grid does not depend on the device). */
#include "cuda/cuda_common.cuh"

#define SUM_THREADS 256
#define SUM_MAX_BLOCKS 1024
#define SUM_MIN_PER_BLOCK 4096 /* elements per block below which fewer blocks are used */

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* blockDim.x == SUM_THREADS; thread 0 gets the block's sum */
__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double sh[SUM_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum_d(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double r = 0.0;
    if (warp == 0) {
        r = lane < SUM_THREADS / 32 ? sh[lane] : 0.0;
        r = warp_sum_d(r);
    }
    return r;
}

template <bool SQUARES>
__global__ void sum_partial_kernel(double *partial, const float *x, size_t n) {
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double v = (double)x[i];
        acc += SQUARES ? v * v : v;
    }
    const double s = block_sum_d(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_final_kernel(float *out, const double *partial, int n_partial) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) acc += partial[i];
    const double s = block_sum_d(acc);
    if (threadIdx.x == 0) *out = (float)((double)*out + s);
}

mt_status mt_cuda_sum(mt_backend *be, const mt_sum_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (!a->out) return mt_errorf(MT_ERR_INTERNAL, "cuda sum: NULL output");
    if (a->n == 0) return MT_OK;
    if (!a->x) return mt_errorf(MT_ERR_INTERNAL, "cuda sum: NULL input (n=%zu)", a->n);
    size_t nb = (a->n + SUM_MIN_PER_BLOCK - 1) / SUM_MIN_PER_BLOCK;
    if (nb > SUM_MAX_BLOCKS) nb = SUM_MAX_BLOCKS;
    if (nb < 1) nb = 1;
    if (nb * sizeof(double) > ctx->scratch_bytes)
        return mt_errorf(MT_ERR_INTERNAL, "cuda sum: scratch of %zu bytes too small", ctx->scratch_bytes);
    double *partial = (double *)ctx->scratch; /* cudaMalloc'd: 256-byte aligned */
    if (a->squares)
        sum_partial_kernel<true><<<(unsigned)nb, SUM_THREADS, 0, ctx->stream>>>(partial, (const float *)a->x, a->n);
    else
        sum_partial_kernel<false><<<(unsigned)nb, SUM_THREADS, 0, ctx->stream>>>(partial, (const float *)a->x, a->n);
    CUDA_CHECK_LAUNCH();
    sum_final_kernel<<<1, SUM_THREADS, 0, ctx->stream>>>((float *)a->out, partial, (int)nb);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
