/* cuda_attention.cu — causal softmax attention with grouped-query heads, forward and
 * backward, on bf16 qkv / out / dout with the softmax saved in f32 probs (B, H, T, T), as
 * backend.h states it. qkv rows are [q heads (H*D) | k heads (KV*D) | v heads (KV*D)]; query
 * head h reads kv head h / (H / KV); scale 1/sqrt(D).
 * A straightforward, correct kernel set (not a flash kernel; it materialises the (T, T)
 * matrices the contract asks for):
 *  forward, one block per (query row t, batch*head):
 *    scores P[t, j] = scale * q_t . k_j for j <= t (one warp per key, lanes over D,
 *    coalesced), softmax over the row in place (block max, exp, block sum, times 1/sum; zeros
 *    above the diagonal, as the CPU writes them), then out_t = sum_j P[t, j] v_j (threads
 *    over D).
 *  backward:
 *    1. per (t, b*h): dP[t, j] = dO_t . v_j into dprobs, then
 *       dS = P * (dP - rowsum(P * dP)) * scale in place (zeros above the diagonal);
 *    2. per (t, b*h): dQ_t = sum_{j <= t} dS[t, j] k_j;
 *    3. per (key row j, b*kv head): dK_j = sum over the query heads of the group, and over
 *       t >= j, of dS[t, j] q_t; dV_j = the same sum of P[t, j] dO_t.
 *  Every output element is written by exactly one thread, summing in a fixed order: no
 *  atomics, deterministic; dqkv is overwritten (=) entirely (its q, k and v parts).
 * All arithmetic in fp32. Costs O(B H T^2 D) like the CPU reference but without tensor
 * cores: fine for the small models and parity checks; a flash-attention path (cuDNN SDPA)
 * is the next step for speed. */
#include "cuda/cuda_common.cuh"

#define ATT_THREADS 256 /* 8 warps */

/* grid (T, B*H); dynamic shared memory: D floats */
__global__ void att_fwd_kernel(bf16 *out, float *probs, const bf16 *qkv, int T, int H, int KV, int D, float scale) {
    extern __shared__ float qs[];
    __shared__ float sh[32];
    const int t = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    const bf16 *base = qkv + (size_t)b * T * S3;
    const bf16 *q = base + (size_t)t * S3 + (size_t)h * D;
    const bf16 *k = base + (size_t)(H + g) * D, *v = base + (size_t)(H + KV + g) * D;
    float *P = probs + ((size_t)bh * T + t) * T;

    for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = __bfloat162float(q[d]);
    __syncthreads();
    for (int j = warp; j <= t; j += n_warps) {
        const bf16 *kj = k + (size_t)j * S3;
        float acc = 0.0f;
        for (int d = lane; d < D; d += 32) acc += qs[d] * __bfloat162float(kj[d]);
        acc = mt_warp_sum(acc);
        if (lane == 0) P[j] = acc * scale;
    }
    __syncthreads(); /* the row's scores (global memory) are visible to the whole block */
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, P[j]);
    mx = mt_block_max(mx, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        const float e = expf(P[j] - mx);
        P[j] = e;
        s += e;
    }
    const float inv = 1.0f / mt_block_sum(s, sh);
    for (int j = threadIdx.x; j < T; j += blockDim.x) P[j] = j <= t ? P[j] * inv : 0.0f;
    __syncthreads();
    bf16 *o = out + ((size_t)b * T + t) * SO + (size_t)h * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j <= t; j++) acc += P[j] * __bfloat162float(v[(size_t)j * S3 + d]);
        o[d] = __float2bfloat16_rn(acc);
    }
}

/* backward 1: dS into dprobs. grid (T, B*H); dynamic shared memory: D floats */
__global__ void att_bwd_ds_kernel(float *dprobs, const float *probs, const bf16 *dout, const bf16 *qkv, int T, int H,
                                  int KV, int D, float scale) {
    extern __shared__ float dos[];
    __shared__ float sh[32];
    const int t = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    const bf16 *v = qkv + (size_t)b * T * S3 + (size_t)(H + KV + g) * D;
    const bf16 *dO = dout + ((size_t)b * T + t) * SO + (size_t)h * D;
    const float *P = probs + ((size_t)bh * T + t) * T;
    float *dS = dprobs + ((size_t)bh * T + t) * T;

    for (int d = threadIdx.x; d < D; d += blockDim.x) dos[d] = __bfloat162float(dO[d]);
    __syncthreads();
    for (int j = warp; j <= t; j += n_warps) {
        const bf16 *vj = v + (size_t)j * S3;
        float acc = 0.0f;
        for (int d = lane; d < D; d += 32) acc += dos[d] * __bfloat162float(vj[d]);
        acc = mt_warp_sum(acc);
        if (lane == 0) dS[j] = acc;
    }
    __syncthreads();
    float dot = 0.0f;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) dot += P[j] * dS[j];
    dot = mt_block_sum(dot, sh);
    for (int j = threadIdx.x; j < T; j += blockDim.x) dS[j] = j <= t ? P[j] * (dS[j] - dot) * scale : 0.0f;
}

/* backward 2: dQ. grid (T, B*H) */
__global__ void att_bwd_dq_kernel(bf16 *dqkv, const float *dprobs, const bf16 *qkv, int T, int H, int KV, int D) {
    const int t = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D;
    const bf16 *k = qkv + (size_t)b * T * S3 + (size_t)(H + g) * D;
    const float *dS = dprobs + ((size_t)bh * T + t) * T;
    bf16 *dq = dqkv + ((size_t)b * T + t) * S3 + (size_t)h * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j <= t; j++) acc += dS[j] * __bfloat162float(k[(size_t)j * S3 + d]);
        dq[d] = __float2bfloat16_rn(acc);
    }
}

/* backward 3: dK and dV of kv head g at key row j. grid (T, B*KV) */
__global__ void att_bwd_dkv_kernel(bf16 *dqkv, const float *dprobs, const float *probs, const bf16 *dout,
                                   const bf16 *qkv, int T, int H, int KV, int D) {
    const int j = blockIdx.x, bg = blockIdx.y, b = bg / KV, g = bg % KV, group = H / KV;
    const int S3 = (H + 2 * KV) * D, SO = H * D;
    const bf16 *qb = qkv + (size_t)b * T * S3;
    const bf16 *dOb = dout + (size_t)b * T * SO;
    bf16 *drow = dqkv + ((size_t)b * T + j) * S3;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float dk = 0.0f, dv = 0.0f;
        for (int h = g * group; h < (g + 1) * group; h++) {
            const size_t pb = ((size_t)b * H + h) * T * T;
            const bf16 *q = qb + (size_t)h * D + d;
            const bf16 *dO = dOb + (size_t)h * D + d;
            for (int t = j; t < T; t++) {
                const size_t pi = pb + (size_t)t * T + j;
                dk += dprobs[pi] * __bfloat162float(q[(size_t)t * S3]);
                dv += probs[pi] * __bfloat162float(dO[(size_t)t * SO]);
            }
        }
        drow[(size_t)(H + g) * D + d] = __float2bfloat16_rn(dk);
        drow[(size_t)(H + KV + g) * D + d] = __float2bfloat16_rn(dv);
    }
}

static mt_status att_check(const char *op, int B, int T, int H, int KV, int D) {
    if (B < 0 || T < 0 || H <= 0 || KV <= 0 || D <= 0)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: bad shape B=%d T=%d H=%d KV=%d D=%d", op, B, T, H, KV, D);
    if (H % KV != 0)
        return mt_errorf(MT_ERR_CONFIG,
                         "cuda %s: %d query heads are not a multiple of %d kv heads (grouped-query attention "
                         "needs H %% KV == 0)",
                         op, H, KV);
    if ((long)B * H > 65535)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: B*H = %ld exceeds the grid's y limit 65535", op, (long)B * H);
    if ((size_t)D * sizeof(float) > 48 * 1024)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: head size %d too large for this kernel", op, D);
    return MT_OK;
}

mt_status mt_cuda_attention_fwd(mt_backend *be, const mt_attention_fwd_args *a) {
    mt_status st = att_check("attention_fwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->out || !a->probs || !a->qkv) return mt_errorf(MT_ERR_INTERNAL, "cuda attention_fwd: NULL tensor");
    const float scale = 1.0f / sqrtf((float)D);
    dim3 grid((unsigned)T, (unsigned)(B * H));
    att_fwd_kernel<<<grid, ATT_THREADS, (size_t)D * sizeof(float), mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (float *)a->probs, (const bf16 *)a->qkv, T, H, KV, D, scale);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_attention_bwd(mt_backend *be, const mt_attention_bwd_args *a) {
    mt_status st = att_check("attention_bwd", a->B, a->T, a->H, a->KV, a->D);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, H = a->H, KV = a->KV, D = a->D;
    if ((long)B * T == 0) return MT_OK;
    if (!a->dqkv || !a->dprobs || !a->dout || !a->qkv || !a->probs)
        return mt_errorf(MT_ERR_INTERNAL, "cuda attention_bwd: NULL tensor");
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const float scale = 1.0f / sqrtf((float)D);
    const int d_threads = D < 32 ? 32 : D > 256 ? 256 : (D + 31) / 32 * 32;
    dim3 grid_q((unsigned)T, (unsigned)(B * H)), grid_kv((unsigned)T, (unsigned)(B * KV));
    att_bwd_ds_kernel<<<grid_q, ATT_THREADS, (size_t)D * sizeof(float), s>>>(
        (float *)a->dprobs, (const float *)a->probs, (const bf16 *)a->dout, (const bf16 *)a->qkv, T, H, KV, D, scale);
    CUDA_CHECK_LAUNCH();
    att_bwd_dq_kernel<<<grid_q, d_threads, 0, s>>>((bf16 *)a->dqkv, (const float *)a->dprobs, (const bf16 *)a->qkv,
                                                   T, H, KV, D);
    CUDA_CHECK_LAUNCH();
    att_bwd_dkv_kernel<<<grid_kv, d_threads, 0, s>>>((bf16 *)a->dqkv, (const float *)a->dprobs,
                                                     (const float *)a->probs, (const bf16 *)a->dout,
                                                     (const bf16 *)a->qkv, T, H, KV, D);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}
