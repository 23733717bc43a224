/* cuda_rope.cu — rotary position embedding, in place, on bf16 activations, as the CPU op
 * (core/backend.h, mt_rope_args): the first R = rot_dim channels of every head rotate, pair i by
 * angle = pos * theta^(-2i/R) (with Llama 3.x's scaling and position interpolation: core/rope_scale.h,
 * the function the CPU uses), pos = pos_offset + t: channels (i, i + R/2), or (2i, 2i + 1)
 * interleaved; the other D - R pass through; inverse rotates by -angle (the transpose, used on
 * gradients).
 * Shape of the work: one block per (b, t) row. The block first computes the row's cos/sin
 * table in shared memory, in double as the CPU reference does (exact enough for long
 * contexts), then rotates every (head, i) pair of the row. */
#include "cuda/cuda_common.cuh"
#include "core/rope_scale.h"

#define ROPE_THREADS 256

/* the frequency transforms of core/rope_scale.h, as the CPU applies them */
typedef struct {
    double factor, low, high, orig_max, interp;
} rope_scale;

__global__ void rope_kernel(bf16 *x, int T, int H, int D, int R, int interleaved, int stride, int pos_offset,
                            double theta, rope_scale sc, float sign) {
    __shared__ float cs[MT_ROPE_MAX_HALF], sn[MT_ROPE_MAX_HALF];
    const int half = R / 2, step = interleaved ? 2 : 1, pair = interleaved ? 1 : half;
    const size_t r = blockIdx.x;
    const double pos = (double)pos_offset + (double)(r % (size_t)T);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const double inv_freq =
            mt_rope_scale_freq(pow(theta, -2.0 * i / R), sc.factor, sc.low, sc.high, sc.orig_max, sc.interp);
        double s, c;
        sincos(pos * inv_freq, &s, &c);
        cs[i] = (float)c;
        sn[i] = sign * (float)s;
    }
    __syncthreads();
    bf16 *row = x + r * (size_t)stride;
    for (int k = threadIdx.x; k < H * half; k += blockDim.x) {
        const int h = k / half, i = k % half;
        bf16 *x0 = row + (size_t)h * D + (size_t)step * i, *x1 = x0 + pair;
        const float a0 = __bfloat162float(*x0), a1 = __bfloat162float(*x1);
        *x0 = __float2bfloat16_rn(a0 * cs[i] - a1 * sn[i]);
        *x1 = __float2bfloat16_rn(a1 * cs[i] + a0 * sn[i]);
    }
}

mt_status mt_cuda_rope(mt_backend *be, const mt_rope_args *a) {
    int empty = 1;
    mt_status st = mt_op_check_rope("cuda", a, &empty);
    if (st != MT_OK || empty) return st;
    if (a->yarn_factor > 1.0f || (a->yarn_mscale > 0.0f && a->yarn_mscale != 1.0f))
        return mt_errorf(MT_ERR_UNSUPPORTED, "cuda rope: YaRN frequencies / mscale (multi-latent attention with "
                         "model.mla.rotary_scaling_factor > 1) are not implemented on CUDA; train on the CPU "
                         "backend or use model.mla.rope_yarn: false");
    const rope_scale sc = {a->llama3_factor, a->llama3_low, a->llama3_high, (double)a->llama3_orig_max, a->pos_interp};
    const long rows = (long)a->B * a->T;
    if (rows > 0x7fffffffL) return mt_errorf(MT_ERR_CONFIG, "cuda rope: %ld rows exceed the grid limit", rows);
    rope_kernel<<<(unsigned)rows, ROPE_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->x, a->T, a->n_heads, a->D, a->rot_dim > 0 ? a->rot_dim : a->D, a->interleaved, a->row_stride,
        a->pos_offset, (double)a->theta, sc, a->inverse ? -1.0f : 1.0f);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
