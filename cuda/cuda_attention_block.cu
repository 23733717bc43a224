/* cuda_attention_block.cu — one block of context-parallel (ring) attention on the GPU (backend.h:
 * attention_block_fwd / _bwd): query rows [q0, q0 + Tq) of this rank's qkv against key / value
 * rows [k0, k0 + Tk) of a packed (B, T, 2 KV D) [k | v] buffer, causal by global position (key j visible to
 * query i when k_pos + j <= q_pos + i); the forward writes or merges (out, lse) by logsumexp, the
 * backward accumulates dQ, dK, dV (+=) from the final out and lse.
 * A straightforward port of the CPU reference (core/cpu/cpu_ops_attention.c), written for
 * correctness, not speed: one thread per (batch, head, query row) for the forward, delta and dQ,
 * one per (batch, kv head, key row) for dK / dV (no atomics: every output element has one
 * writer), fp32 arithmetic with per-thread accumulators of the head size, bf16 tensors.
 * Also copy_rows (a column block of a row-major bf16 matrix: cudaMemcpy2DAsync), which packs the
 * blocks out of qkv and puts their gradients back. */
#include "cuda/cuda_common.cuh"

#define BLK_THREADS 128
#define BLK_MAX_D 256 /* per-thread accumulators of the head size */

__device__ __forceinline__ float blk_dot(const bf16 *a, const bf16 *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s += __bfloat162float(a[d]) * __bfloat162float(b[d]);
    return s;
}

/* thread per (b*H + h, query row i) */
__global__ void att_blk_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, const bf16 *kv, int B, int T, int H,
                                   int KV, int D, int q0, int Tq, int q_pos, int k0, int Tk, int k_pos, int merge,
                                   float scale) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * H * Tq) return;
    const int i = (int)(idx % Tq), bh = (int)(idx / Tq), b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SK = 2 * KV * D, SO = H * D;
    const bf16 *q = qkv + ((size_t)b * T + q0 + i) * S3 + (size_t)h * D;
    const bf16 *kb = kv + ((size_t)b * T + k0) * SK;
    int nk = q_pos + i - k_pos + 1; /* keys [0, nk) of the block are visible */
    nk = nk < 0 ? 0 : nk > Tk ? Tk : nk;
    float acc[BLK_MAX_D];
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j = 0; j < nk; j++) {
        const bf16 *k = kb + (size_t)j * SK + (size_t)g * D, *v = kb + (size_t)j * SK + (size_t)(KV + g) * D;
        const float s = scale * blk_dot(q, k, D), mn = s > m ? s : m;
        const float alpha = m == -INFINITY ? 0.0f : __expf(m - mn), p = __expf(s - mn);
        l = l * alpha + p;
        for (int d = 0; d < D; d++) acc[d] = acc[d] * alpha + p * __bfloat162float(v[d]);
        m = mn;
    }
    const float lb = l > 0.0f ? m + logf(l) : -INFINITY, inv = l > 0.0f ? 1.0f / l : 0.0f;
    bf16 *o = out + ((size_t)b * T + q0 + i) * SO + (size_t)h * D;
    float *lr = lse + (size_t)bh * T + q0 + i;
    if (!merge) {
        for (int d = 0; d < D; d++) o[d] = __float2bfloat16(acc[d] * inv);
        *lr = lb;
        return;
    }
    const float la = *lr, mx = la > lb ? la : lb;
    if (mx == -INFINITY) return;
    const float wa = __expf(la - mx), wb = __expf(lb - mx), sum = wa + wb, ca = wa / sum, cb = wb / sum;
    for (int d = 0; d < D; d++) o[d] = __float2bfloat16(ca * __bfloat162float(o[d]) + cb * acc[d] * inv);
    *lr = mx + logf(sum);
}

/* thread per (b*H + h, query row i): delta = dO . O, then dQ += sum_j dS_ij K_j */
__global__ void att_blk_dq_kernel(bf16 *dqkv, float *delta, const bf16 *dout, const bf16 *qkv, const bf16 *kv,
                                  const bf16 *out, const float *lse, int B, int T, int H, int KV, int D, int q0,
                                  int Tq, int q_pos, int k0, int Tk, int k_pos, float scale) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * H * Tq) return;
    const int i = (int)(idx % Tq), bh = (int)(idx / Tq), b = bh / H, h = bh % H, g = h / (H / KV);
    const int S3 = (H + 2 * KV) * D, SK = 2 * KV * D, SO = H * D;
    const size_t qr = ((size_t)b * T + q0 + i);
    const bf16 *q = qkv + qr * S3 + (size_t)h * D, *dO = dout + qr * SO + (size_t)h * D, *O = out + qr * SO + (size_t)h * D;
    const bf16 *kb = kv + ((size_t)b * T + k0) * SK;
    const float dl = blk_dot(dO, O, D), lr = lse[(size_t)bh * T + q0 + i];
    delta[(size_t)bh * T + q0 + i] = dl;
    int nk = q_pos + i - k_pos + 1;
    nk = nk < 0 ? 0 : nk > Tk ? Tk : nk;
    float acc[BLK_MAX_D];
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    for (int j = 0; j < nk; j++) {
        const bf16 *k = kb + (size_t)j * SK + (size_t)g * D, *v = kb + (size_t)j * SK + (size_t)(KV + g) * D;
        const float p = __expf(scale * blk_dot(q, k, D) - lr), ds = p * (blk_dot(dO, v, D) - dl) * scale;
        for (int d = 0; d < D; d++) acc[d] += ds * __bfloat162float(k[d]);
    }
    bf16 *dq = dqkv + qr * S3 + (size_t)h * D;
    for (int d = 0; d < D; d++) dq[d] = __float2bfloat16(__bfloat162float(dq[d]) + acc[d]);
}

/* thread per (b*KV + g, key row j): dV_j += sum_i P_ij dO_i, dK_j += sum_i dS_ij Q_i over the group's
 * query heads (delta from att_blk_dq_kernel) */
__global__ void att_blk_dkv_kernel(bf16 *dkv, const float *delta, const bf16 *dout, const bf16 *qkv, const bf16 *kv,
                                   const float *lse, int B, int T, int H, int KV, int D, int q0, int Tq, int q_pos,
                                   int k0, int Tk, int k_pos, float scale) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * KV * Tk) return;
    const int j = (int)(idx % Tk), bg = (int)(idx / Tk), b = bg / KV, g = bg % KV, group = H / KV;
    const int S3 = (H + 2 * KV) * D, SK = 2 * KV * D, SO = H * D;
    const size_t kr = (size_t)b * T + k0 + j;
    const bf16 *k = kv + kr * SK + (size_t)g * D, *v = kv + kr * SK + (size_t)(KV + g) * D;
    int i0 = k_pos + j - q_pos; /* the first query row that sees key j */
    i0 = i0 < 0 ? 0 : i0;
    float ak[BLK_MAX_D], av[BLK_MAX_D];
    for (int d = 0; d < D; d++) ak[d] = av[d] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++) {
        for (int i = i0; i < Tq; i++) {
            const size_t qr = (size_t)b * T + q0 + i, li = ((size_t)b * H + h) * T + q0 + i;
            const bf16 *q = qkv + qr * S3 + (size_t)h * D, *dO = dout + qr * SO + (size_t)h * D;
            const float p = __expf(scale * blk_dot(q, k, D) - lse[li]);
            const float ds = p * (blk_dot(dO, v, D) - delta[li]) * scale;
            for (int d = 0; d < D; d++) {
                av[d] += p * __bfloat162float(dO[d]);
                ak[d] += ds * __bfloat162float(q[d]);
            }
        }
    }
    bf16 *dk = dkv + kr * SK + (size_t)g * D, *dv = dkv + kr * SK + (size_t)(KV + g) * D;
    for (int d = 0; d < D; d++) {
        dk[d] = __float2bfloat16(__bfloat162float(dk[d]) + ak[d]);
        dv[d] = __float2bfloat16(__bfloat162float(dv[d]) + av[d]);
    }
}

static mt_status blk_check(const char *op, int B, int T, int H, int KV, int D, int q0, int Tq, int k0, int Tk,
                           int q_pos, int k_pos) {
    if (B < 0 || T < 0 || H <= 0 || KV <= 0 || D <= 0 || H % KV != 0 || D > BLK_MAX_D)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: bad shape B=%d T=%d H=%d KV=%d D=%d (H %% KV == 0, D <= %d)", op, B,
                         T, H, KV, D, BLK_MAX_D);
    if (q0 < 0 || Tq < 0 || q0 + Tq > T || k0 < 0 || Tk < 0 || k0 + Tk > T || q_pos < 0 || k_pos < 0)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: query rows [%d, %d) / key rows [%d, %d) outside the %d rows, or "
                         "negative positions %d / %d", op, q0, q0 + Tq, k0, k0 + Tk, T, q_pos, k_pos);
    return MT_OK;
}

mt_status mt_cuda_attention_block_fwd(mt_backend *be, const mt_attention_block_fwd_args *a) {
    mt_status st = blk_check("attention_block_fwd", a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->k0, a->Tk,
                             a->q_pos, a->k_pos);
    if (st != MT_OK) return st;
    const long n = (long)a->B * a->H * a->Tq;
    if (n == 0) return MT_OK;
    if (!a->out || !a->lse || !a->qkv || !a->kv) return mt_errorf(MT_ERR_INTERNAL, "cuda attention_block_fwd: NULL tensor");
    const float scale = mt_attn_scale(a->scale, a->D);
    att_blk_fwd_kernel<<<mt_cuda_ceil_div((size_t)n, BLK_THREADS), BLK_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, (float *)a->lse, (const bf16 *)a->qkv, (const bf16 *)a->kv, a->B, a->T, a->H, a->KV, a->D,
        a->q0, a->Tq, a->q_pos, a->k0, a->Tk, a->k_pos, a->merge, scale);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_attention_block_bwd(mt_backend *be, const mt_attention_block_bwd_args *a) {
    mt_status st = blk_check("attention_block_bwd", a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->k0, a->Tk,
                             a->q_pos, a->k_pos);
    if (st != MT_OK) return st;
    const long nq = (long)a->B * a->H * a->Tq, nk = (long)a->B * a->KV * a->Tk;
    if (nq == 0 || nk == 0) return MT_OK;
    if (!a->dqkv || !a->dkv || !a->delta || !a->dout || !a->qkv || !a->kv || !a->out || !a->lse)
        return mt_errorf(MT_ERR_INTERNAL, "cuda attention_block_bwd: NULL tensor");
    cudaStream_t s = mt_cuda_ctx_of(be)->stream;
    const float scale = mt_attn_scale(a->scale, a->D);
    att_blk_dq_kernel<<<mt_cuda_ceil_div((size_t)nq, BLK_THREADS), BLK_THREADS, 0, s>>>(
        (bf16 *)a->dqkv, (float *)a->delta, (const bf16 *)a->dout, (const bf16 *)a->qkv, (const bf16 *)a->kv,
        (const bf16 *)a->out, (const float *)a->lse, a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->q_pos, a->k0,
        a->Tk, a->k_pos, scale);
    CUDA_CHECK_LAUNCH();
    att_blk_dkv_kernel<<<mt_cuda_ceil_div((size_t)nk, BLK_THREADS), BLK_THREADS, 0, s>>>(
        (bf16 *)a->dkv, (const float *)a->delta, (const bf16 *)a->dout, (const bf16 *)a->qkv, (const bf16 *)a->kv,
        (const float *)a->lse, a->B, a->T, a->H, a->KV, a->D, a->q0, a->Tq, a->q_pos, a->k0, a->Tk, a->k_pos, scale);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_copy_rows(mt_backend *be, const mt_copy_rows_args *a) {
    if (a->rows < 0 || a->cols < 0 || a->dst_stride < a->cols || a->src_stride < a->cols)
        return mt_errorf(MT_ERR_CONFIG, "cuda copy_rows: %d rows of %d with strides %d / %d", a->rows, a->cols,
                         a->dst_stride, a->src_stride);
    if ((long)a->rows * a->cols == 0) return MT_OK;
    if (!a->dst || !a->src) return mt_errorf(MT_ERR_INTERNAL, "cuda copy_rows: NULL tensor");
    const size_t es = sizeof(bf16);
    CUDA_CHECK(cudaMemcpy2DAsync(a->dst, (size_t)a->dst_stride * es, a->src, (size_t)a->src_stride * es,
                                 (size_t)a->cols * es, (size_t)a->rows, cudaMemcpyDeviceToDevice,
                                 mt_cuda_ctx_of(be)->stream));
    return MT_OK;
}
