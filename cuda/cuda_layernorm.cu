/* cuda_layernorm.cu — layernorm_fwd/_bwd and rmsnorm_fwd/_bwd kernels: bf16 activations and
 * weights, f32 mean/rstd, all arithmetic in fp32.
 * Rules kept (backend.h): backward ADDS into dinp (it is the residual stream's gradient) and
 * accumulates (+=) into the f32 dweight / dbias.
 * Shape of the work: one warp per row (8 rows per 256-thread block) with warp-shuffle
 * reductions (16-byte loads and stores, 8 elements a lane, where C % 8 == 0 and the rows are
 * 16-byte aligned: the forward, the fused forward and the backward's dinp), two passes over the
 * row for the statistics (mean, then centred variance, as the CPU reference does). The weight gradients are a column reduction over rows, done in
 * two deterministic passes: per-slab partial sums into ctx->scratch, then a fixed-order sum
 * added into dweight/dbias (no float atomics, so a run repeats bit for bit on one GPU).
 * Also the fused residual add + norm forward (add_layernorm_fwd / add_rmsnorm_fwd). */
#include "cuda/cuda_common.cuh"

#define ROWS_PER_BLOCK 8 /* warps per block, one row each */

/* ---- forward ---- */

/* The rest of one row's norm forward once its mean is known (0 for rmsnorm), by the row's warp:
 * the centred variance (rmsnorm: the mean of squares), rstd, y = norm * w (+ b), the statistics.
 * Shared by norm_fwd_kernel and add_norm_fwd_kernel, so both compute the same bits. */
template <bool RMS>
__device__ __forceinline__ void norm_row_fwd(bf16 *y, float *mean_out, float *rstd_out, const bf16 *x, float mean,
                                             const bf16 *weight, const bf16 *bias, int row, int C, float eps,
                                             int lane) {
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = __bfloat162float(x[i]) - mean;
        v += d * d;
    }
    float var = mt_warp_sum(v) / (float)C; /* rmsnorm: mean of squares */
    float rstd = rsqrtf(var + eps);
    for (int i = lane; i < C; i += 32) {
        float n = (__bfloat162float(x[i]) - mean) * rstd;
        float o = n * __bfloat162float(weight[i]);
        if (!RMS && bias) o += __bfloat162float(bias[i]); /* bias NULL: bias-free LayerNorm */
        y[i] = __float2bfloat16_rn(o);
    }
    if (lane == 0) {
        if (!RMS && mean_out) mean_out[row] = mean;
        if (rstd_out) rstd_out[row] = rstd;
    }
}

/* norm_row_fwd with 16-byte loads and stores: lane l handles elements 8 (l + 32 k) .. + 7 (C % 8 == 0,
 * x, y, weight, bias 16-byte aligned). The same arithmetic per element; the sums run in another order,
 * so norm_fwd_vec_kernel and add_norm_fwd_vec_kernel agree bit for bit with each other, not with the
 * scalar kernels. */
template <bool RMS>
__device__ __forceinline__ void norm_row_fwd_vec(bf16 *y, float *mean_out, float *rstd_out, const bf16 *x, float mean,
                                                 const bf16 *weight, const bf16 *bias, int row, int C, float eps,
                                                 int lane) {
    float v = 0.0f;
    for (int i = lane * 8; i < C; i += 256) {
        const mt_vec8 xv = mt_ld8(x + i);
        for (int j = 0; j < 8; j++) {
            const float d = xv.v[j] - mean;
            v += d * d;
        }
    }
    const float var = mt_warp_sum(v) / (float)C; /* rmsnorm: mean of squares */
    const float rstd = rsqrtf(var + eps);
    for (int i = lane * 8; i < C; i += 256) {
        const mt_vec8 xv = mt_ld8(x + i), wv = mt_ld8(weight + i);
        mt_vec8 bv = {}, o;
        if (!RMS && bias) bv = mt_ld8(bias + i);
        for (int j = 0; j < 8; j++) {
            float t = (xv.v[j] - mean) * rstd * wv.v[j];
            if (!RMS && bias) t += bv.v[j];
            o.v[j] = t;
        }
        mt_st8(y + i, o);
    }
    if (lane == 0) {
        if (!RMS && mean_out) mean_out[row] = mean;
        if (rstd_out) rstd_out[row] = rstd;
    }
}

template <bool RMS>
__global__ void norm_fwd_kernel(bf16 *out, float *mean_out, float *rstd_out, const bf16 *inp,
                                const bf16 *weight, const bf16 *bias, int N, int C, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    bf16 *y = out + (size_t)row * C;

    float mean = 0.0f;
    if (!RMS) {
        float s = 0.0f;
        for (int i = lane; i < C; i += 32) s += __bfloat162float(x[i]);
        mean = mt_warp_sum(s) / (float)C;
    }
    norm_row_fwd<RMS>(y, mean_out, rstd_out, x, mean, weight, bias, row, C, eps, lane);
}

/* ---- fused residual add + norm forward ----
 * resid = bf16(a + b) (the add kernel's rounding), written once; the statistics and the output
 * then come from those rounded values, exactly as add followed by norm_fwd_kernel computes them.
 * Each lane reads back only the elements it wrote (same i = lane + 32 k), so no barrier is
 * needed, and resid may alias a. Saves one read of the row (norm_fwd's first pass reads resid
 * from memory) and one kernel launch per layer. */
template <bool RMS>
__global__ void add_norm_fwd_kernel(bf16 *resid, bf16 *out, float *mean_out, float *rstd_out, const bf16 *a,
                                    const bf16 *b, const bf16 *weight, const bf16 *bias, int N, int C, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const size_t off = (size_t)row * C;
    bf16 *x = resid + off;
    bf16 *y = out + off;

    float s = 0.0f;
    for (int i = lane; i < C; i += 32) {
        bf16 r = __float2bfloat16_rn(__bfloat162float(a[off + i]) + __bfloat162float(b[off + i]));
        x[i] = r;
        s += __bfloat162float(r);
    }
    const float mean = RMS ? 0.0f : mt_warp_sum(s) / (float)C;
    norm_row_fwd<RMS>(y, mean_out, rstd_out, x, mean, weight, bias, row, C, eps, lane);
}

/* The two forward kernels with 16-byte loads and stores (norm_row_fwd_vec). */
template <bool RMS>
__global__ void norm_fwd_vec_kernel(bf16 *out, float *mean_out, float *rstd_out, const bf16 *inp,
                                    const bf16 *weight, const bf16 *bias, int N, int C, float eps) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    float mean = 0.0f;
    if (!RMS) {
        float s = 0.0f;
        for (int i = lane * 8; i < C; i += 256) {
            const mt_vec8 xv = mt_ld8(x + i);
            for (int j = 0; j < 8; j++) s += xv.v[j];
        }
        mean = mt_warp_sum(s) / (float)C;
    }
    norm_row_fwd_vec<RMS>(out + (size_t)row * C, mean_out, rstd_out, x, mean, weight, bias, row, C, eps, lane);
}

/* Each lane reads back only the 8-element groups it wrote: no barrier, resid may alias a. */
template <bool RMS>
__global__ void add_norm_fwd_vec_kernel(bf16 *resid, bf16 *out, float *mean_out, float *rstd_out, const bf16 *a,
                                        const bf16 *b, const bf16 *weight, const bf16 *bias, int N, int C, float eps) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const size_t off = (size_t)row * C;
    float s = 0.0f;
    for (int i = lane * 8; i < C; i += 256) {
        const mt_vec8 av = mt_ld8(a + off + i), bv = mt_ld8(b + off + i);
        mt_vec8 r;
        for (int j = 0; j < 8; j++) r.v[j] = av.v[j] + bv.v[j];
        mt_st8(resid + off + i, r);         /* rounds r to bf16, as the add kernel does */
        const mt_vec8 rv = mt_ld8(resid + off + i); /* the rounded values the statistics use */
        for (int j = 0; j < 8; j++) s += rv.v[j];
    }
    const float mean = RMS ? 0.0f : mt_warp_sum(s) / (float)C;
    norm_row_fwd_vec<RMS>(out + off, mean_out, rstd_out, resid + off, mean, weight, bias, row, C, eps, lane);
}

/* ---- backward: dinp (one warp per row) ---- */

/* norm = (x - mean) * rstd; dnorm = dout * w;
 * dinp += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))     (layernorm)
 * dinp += rstd * (dnorm - norm * mean(dnorm * norm))                   (rmsnorm, mean = 0) */
template <bool RMS>
__global__ void norm_bwd_dinp_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp,
                                     const bf16 *weight, const float *mean_in,
                                     const float *rstd_in, int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    const bf16 *dy = dout + (size_t)row * C;
    bf16 *dx = dinp + (size_t)row * C;
    float mean = RMS ? 0.0f : mean_in[row];
    float rstd = rstd_in[row];

    float s_dn = 0.0f, s_dnn = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float n = (__bfloat162float(x[i]) - mean) * rstd;
        float dn = __bfloat162float(dy[i]) * __bfloat162float(weight[i]);
        s_dn += dn;
        s_dnn += dn * n;
    }
    float m_dn = RMS ? 0.0f : mt_warp_sum(s_dn) / (float)C;
    float m_dnn = mt_warp_sum(s_dnn) / (float)C;
    for (int i = lane; i < C; i += 32) {
        float n = (__bfloat162float(x[i]) - mean) * rstd;
        float dn = __bfloat162float(dy[i]) * __bfloat162float(weight[i]);
        float g = (dn - m_dn - n * m_dnn) * rstd;
        dx[i] = __float2bfloat16_rn(__bfloat162float(dx[i]) + g);
    }
}

/* The same, 8 columns per lane and step through 16-byte loads (C % 8 == 0, 16-byte aligned rows):
 * a row of C = 2048 is 8 steps per lane instead of 64, so the loads of a row are in flight
 * together rather than one latency each. Sums in another order than the scalar kernel (fp32). */
template <bool RMS>
__global__ void norm_bwd_dinp_vec_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp,
                                         const bf16 *weight, const float *mean_in,
                                         const float *rstd_in, int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    bf16 *dx = dinp + (size_t)row * C;
    const int nv = C / 8;
    float mean = RMS ? 0.0f : mean_in[row];
    float rstd = rstd_in[row];

    float s_dn = 0.0f, s_dnn = 0.0f;
    for (int v = lane; v < nv; v += 32) {
        const mt_vec8 xf = mt_ld8(x + 8 * v), df = mt_ld8(dy + 8 * v), wf = mt_ld8(weight + 8 * v);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float dn = df.v[k] * wf.v[k];
            s_dn += dn;
            s_dnn += dn * ((xf.v[k] - mean) * rstd);
        }
    }
    float m_dn = RMS ? 0.0f : mt_warp_sum(s_dn) / (float)C;
    float m_dnn = mt_warp_sum(s_dnn) / (float)C;
    for (int v = lane; v < nv; v += 32) {
        const mt_vec8 xf = mt_ld8(x + 8 * v), df = mt_ld8(dy + 8 * v), wf = mt_ld8(weight + 8 * v);
        mt_vec8 o = mt_ld8(dx + 8 * v);
#pragma unroll
        for (int k = 0; k < 8; k++)
            o.v[k] += (df.v[k] * wf.v[k] - m_dn - (xf.v[k] - mean) * rstd * m_dnn) * rstd;
        mt_st8(dx + 8 * v, o);
    }
}

/* ---- backward: dweight / dbias column sums ---- */

#define WG_TX 32 /* columns per block */
#define WG_TY 8  /* row lanes per block */

/* partial[(2*slab + 0) * C + c] = sum over the slab's rows of dout * norm  (dweight)
 * partial[(2*slab + 1) * C + c] = sum over the slab's rows of dout         (dbias; layernorm) */
template <bool RMS>
__global__ void norm_bwd_wgrad_partial_kernel(float *partial, const bf16 *dout, const bf16 *inp,
                                              const float *mean_in, const float *rstd_in, int N,
                                              int C) {
    __shared__ float sw[WG_TY][WG_TX + 1];
    __shared__ float sb[WG_TY][WG_TX + 1];
    int c = blockIdx.x * WG_TX + threadIdx.x;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
#pragma unroll 4
        for (int r = blockIdx.y * WG_TY + threadIdx.y; r < N; r += gridDim.y * WG_TY) {
            size_t idx = (size_t)r * C + c;
            float mean = RMS ? 0.0f : mean_in[r];
            float n = (__bfloat162float(inp[idx]) - mean) * rstd_in[r];
            float d = __bfloat162float(dout[idx]);
            aw += d * n;
            ab += d;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float w = 0.0f, b = 0.0f;
#pragma unroll
        for (int y = 0; y < WG_TY; y++) {
            w += sw[y][threadIdx.x];
            b += sb[y][threadIdx.x];
        }
        partial[(size_t)(2 * blockIdx.y) * C + c] = w;
        partial[(size_t)(2 * blockIdx.y + 1) * C + c] = b;
    }
}

__global__ void norm_bwd_wgrad_finish_kernel(float *dweight, float *dbias, const float *partial,
                                             int n_slabs, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float w = 0.0f, b = 0.0f;
    for (int y = 0; y < n_slabs; y++) {
        w += partial[(size_t)(2 * y) * C + c];
        b += partial[(size_t)(2 * y + 1) * C + c];
    }
    if (dweight) dweight[c] += w;
    if (dbias) dbias[c] += b;
}

/* ---- host side ---- */

/* N = 0 is a valid no-op (callers then return before launching anything) */
static mt_status norm_check(const char *op, int N, int C, const void *a, const void *b) {
    if (N < 0 || C <= 0)
        return mt_errorf(MT_ERR_CONFIG, "CUDA %s: bad shape N=%d C=%d (need N >= 0, C > 0)", op, N, C);
    if (N == 0) return MT_OK;
    if (!a || !b)
        return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: a required buffer is NULL", op);
    return MT_OK;
}

template <bool RMS>
static mt_status norm_fwd(mt_backend *be, const mt_norm_fwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    const char *op = RMS ? "rmsnorm_fwd" : "layernorm_fwd";
    mt_status st = norm_check(op, a->N, a->C, a->out, a->inp);
    if (st != MT_OK || a->N == 0) return st;
    if (!a->weight || !a->rstd || (!RMS && !a->mean))
        return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: weight, rstd%s is NULL", op, RMS ? "" : " or mean");
    unsigned grid = mt_cuda_ceil_div((size_t)a->N, ROWS_PER_BLOCK);
    const bool vec = a->C % 8 == 0 && mt_cuda_aligned16(a->out) && mt_cuda_aligned16(a->inp) &&
                     mt_cuda_aligned16(a->weight) && (RMS || !a->bias || mt_cuda_aligned16(a->bias));
    void (*kernel)(bf16 *, float *, float *, const bf16 *, const bf16 *, const bf16 *, int, int, float) =
        vec ? norm_fwd_vec_kernel<RMS> : norm_fwd_kernel<RMS>;
    kernel<<<grid, ROWS_PER_BLOCK * 32, 0, ctx->stream>>>(
        (bf16 *)a->out, (float *)a->mean, (float *)a->rstd, (const bf16 *)a->inp,
        (const bf16 *)a->weight, (const bf16 *)a->bias, a->N, a->C, a->eps);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

template <bool RMS>
static mt_status add_norm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    const char *op = RMS ? "add_rmsnorm_fwd" : "add_layernorm_fwd";
    mt_status st = norm_check(op, a->N, a->C, a->out, a->a);
    if (st != MT_OK || a->N == 0) return st;
    if (!a->out_resid || !a->b || !a->weight || !a->rstd || (!RMS && !a->mean))
        return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: out_resid, b, weight, rstd%s is NULL", op, RMS ? "" : " or mean");
    unsigned grid = mt_cuda_ceil_div((size_t)a->N, ROWS_PER_BLOCK);
    const bool vec = a->C % 8 == 0 && mt_cuda_aligned16(a->out_resid) && mt_cuda_aligned16(a->out) &&
                     mt_cuda_aligned16(a->a) && mt_cuda_aligned16(a->b) && mt_cuda_aligned16(a->weight) &&
                     (RMS || !a->bias || mt_cuda_aligned16(a->bias));
    void (*kernel)(bf16 *, bf16 *, float *, float *, const bf16 *, const bf16 *, const bf16 *, const bf16 *, int, int,
                   float) = vec ? add_norm_fwd_vec_kernel<RMS> : add_norm_fwd_kernel<RMS>;
    kernel<<<grid, ROWS_PER_BLOCK * 32, 0, ctx->stream>>>(
        (bf16 *)a->out_resid, (bf16 *)a->out, (float *)a->mean, (float *)a->rstd, (const bf16 *)a->a,
        (const bf16 *)a->b, (const bf16 *)a->weight, (const bf16 *)a->bias, a->N, a->C, a->eps);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

template <bool RMS>
static mt_status norm_bwd(mt_backend *be, const mt_norm_bwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    const char *op = RMS ? "rmsnorm_bwd" : "layernorm_bwd";
    mt_status st = norm_check(op, a->N, a->C, a->dout, a->inp);
    if (st != MT_OK || a->N == 0) return st;
    if (!a->rstd || (!RMS && !a->mean))
        return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: saved rstd%s is NULL", op, RMS ? "" : "/mean");
    int N = a->N, C = a->C;

    if (a->dinp) {
        if (!a->weight) return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: weight is NULL", op);
        unsigned grid = mt_cuda_ceil_div((size_t)N, ROWS_PER_BLOCK);
        const bool vec = C % 8 == 0 && mt_cuda_aligned16(a->dinp) && mt_cuda_aligned16(a->dout) &&
                         mt_cuda_aligned16(a->inp) && mt_cuda_aligned16(a->weight);
        void (*dinp_kernel)(bf16 *, const bf16 *, const bf16 *, const bf16 *, const float *, const float *, int,
                            int) = vec ? norm_bwd_dinp_vec_kernel<RMS> : norm_bwd_dinp_kernel<RMS>;
        dinp_kernel<<<grid, ROWS_PER_BLOCK * 32, 0, ctx->stream>>>(
            (bf16 *)a->dinp, (const bf16 *)a->dout, (const bf16 *)a->inp, (const bf16 *)a->weight,
            (const float *)a->mean, (const float *)a->rstd, N, C);
        CUDA_CHECK_LAUNCH();
    }

    float *dbias = RMS ? NULL : (float *)a->dbias;
    if (a->dweight || dbias) {
        unsigned gx = mt_cuda_ceil_div((size_t)C, WG_TX);
        const size_t slabs = mt_cuda_reduce_slabs(ctx, gx, N, WG_TY, (size_t)2 * C * sizeof(float));
        if (slabs < 1)
            return mt_errorf(MT_ERR_INTERNAL, "CUDA %s: C=%d exceeds the %zu-byte scratch", op, C, ctx->scratch_bytes);
        dim3 grid(gx, (unsigned)slabs), block(WG_TX, WG_TY);
        norm_bwd_wgrad_partial_kernel<RMS><<<grid, block, 0, ctx->stream>>>(
            ctx->scratch, (const bf16 *)a->dout, (const bf16 *)a->inp, (const float *)a->mean,
            (const float *)a->rstd, N, C);
        CUDA_CHECK_LAUNCH();
        norm_bwd_wgrad_finish_kernel<<<mt_cuda_ceil_div((size_t)C, 256), 256, 0, ctx->stream>>>(
            (float *)a->dweight, dbias, ctx->scratch, (int)slabs, C);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}

mt_status mt_cuda_layernorm_fwd(mt_backend *be, const mt_norm_fwd_args *a) { return norm_fwd<false>(be, a); }
mt_status mt_cuda_layernorm_bwd(mt_backend *be, const mt_norm_bwd_args *a) { return norm_bwd<false>(be, a); }
mt_status mt_cuda_rmsnorm_fwd(mt_backend *be, const mt_norm_fwd_args *a) { return norm_fwd<true>(be, a); }
mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, const mt_norm_bwd_args *a) { return norm_bwd<true>(be, a); }
mt_status mt_cuda_add_layernorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a) { return add_norm_fwd<false>(be, a); }
mt_status mt_cuda_add_rmsnorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a) { return add_norm_fwd<true>(be, a); }
