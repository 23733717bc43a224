/* cuda_embed.cu — token (+ position) embedding forward and backward with vocab-parallel
 * shards, bf16 activations / weights, f32 weight gradients.
 * Rules kept (backend.h): tokens outside [vocab_start, vocab_start + n_vocab) read zeros and
 * get no gradient; dwte and dwpe accumulate (+=).
 * Determinism without float atomics:
 *  - dwte: one thread block per vocabulary row of the shard. The block scans all B*T tokens
 *    in order, 1024 at a time (a coalesced read of the i32 token array, L2-resident); a chunk
 *    with no match costs one __syncthreads_count. For each matching token, in increasing row
 *    order, thread c adds dout[row, c] into dwte[v, c] (thread c owns its columns), so every
 *    element is summed in token order: the CPU reference's order, bit-exact for the same
 *    inputs and the same on every run. Cost ~ n_vocab * B*T token compares from L2 (GPT-2:
 *    50k rows * 16k tokens = 8e8 compares, 800k block-steps): an estimate of a few ms per
 *    step, not measured; a sort-based (cub radix sort by token, stable) scatter is the
 *    faster deterministic alternative if it shows in a profile.
 *  - dwpe: one thread per (position t, column c), summing over b in order. */
#include "cuda/cuda_common.cuh"

#define EMB_THREADS 256
#define EMB_PER_THREAD 4
#define EMB_CHUNK (EMB_THREADS * EMB_PER_THREAD) /* tokens scanned per step */

__global__ void embedding_fwd_kernel(bf16 *out, const int32_t *tokens, const bf16 *wte, const bf16 *wpe, int T,
                                     int C, int vs, int nv, int po, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)C, c = i % (size_t)C;
        const long id = (long)tokens[r] - vs;
        float v = (id >= 0 && id < nv) ? __bfloat162float(wte[(size_t)id * C + c]) : 0.0f;
        if (wpe) v += __bfloat162float(wpe[(size_t)(po + (int)(r % (size_t)T)) * C + c]);
        out[i] = __float2bfloat16_rn(v);
    }
}

/* grid.x = n_vocab (one block per shard vocabulary row). Tokens are scanned in chunks of
 * EMB_CHUNK (EMB_PER_THREAD per thread); matches are then applied in increasing row order. */
__global__ void embedding_bwd_dwte_kernel(float *dwte, const bf16 *dout, const int32_t *tokens, long rows, int C,
                                          int vs) {
    __shared__ unsigned char match[EMB_CHUNK];
    const int v = (int)blockIdx.x + vs; /* the global token id this block owns */
    float *g = dwte + (size_t)blockIdx.x * C;
    for (long r0 = 0; r0 < rows; r0 += EMB_CHUNK) {
        int hits = 0;
#pragma unroll
        for (int k = 0; k < EMB_PER_THREAD; k++) {
            const int i = k * EMB_THREADS + (int)threadIdx.x;
            const int hit = r0 + i < rows && tokens[r0 + i] == v;
            match[i] = (unsigned char)hit;
            hits += hit;
        }
        if (__syncthreads_count(hits) != 0) { /* uniform branch: the count is block-wide */
            const int n_here = rows - r0 < EMB_CHUNK ? (int)(rows - r0) : EMB_CHUNK;
            for (int k = 0; k < n_here; k++) {
                if (!match[k]) continue;
                const bf16 *d = dout + (size_t)(r0 + k) * C;
                for (int c = threadIdx.x; c < C; c += blockDim.x) g[c] += __bfloat162float(d[c]);
            }
        }
        __syncthreads(); /* match[] is rewritten for the next chunk */
    }
}

__global__ void embedding_bwd_dwpe_kernel(float *dwpe, const bf16 *dout, int B, int T, int C, int po) {
    const size_t n = (size_t)T * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (size_t)C, c = i % (size_t)C;
        float acc = dwpe[(size_t)po * C + i];
        for (int b = 0; b < B; b++) acc += __bfloat162float(dout[((size_t)b * T + t) * C + c]);
        dwpe[(size_t)po * C + i] = acc;
    }
}

static mt_status emb_check(const char *op, int B, int T, int C, int n_vocab, int pos_offset, const void *a,
                           const void *b, const void *c) {
    if (B < 0 || T < 0 || C <= 0 || n_vocab < 0 || pos_offset < 0)
        return mt_errorf(MT_ERR_CONFIG, "cuda %s: bad shape B=%d T=%d C=%d n_vocab=%d pos_offset=%d", op, B, T, C,
                         n_vocab, pos_offset);
    if ((long)B * T > 0 && (!a || !b || !c)) return mt_errorf(MT_ERR_INTERNAL, "cuda %s: NULL tensor", op);
    return MT_OK;
}

static unsigned grid_for(size_t n) {
    size_t b = (n + EMB_THREADS - 1) / EMB_THREADS;
    if (b > 65535) b = 65535;
    return b ? (unsigned)b : 1u;
}

mt_status mt_cuda_embedding_fwd(mt_backend *be, const mt_embedding_fwd_args *a) {
    mt_status st = emb_check("embedding_fwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset, a->out, a->tokens,
                             a->n_vocab > 0 ? a->wte : (const void *)a->tokens);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->B * a->T * a->C;
    if (n == 0) return MT_OK;
    embedding_fwd_kernel<<<grid_for(n), EMB_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, a->tokens, (const bf16 *)a->wte, (const bf16 *)a->wpe, a->T, a->C, a->vocab_start,
        a->n_vocab, a->pos_offset, n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_embedding_bwd(mt_backend *be, const mt_embedding_bwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mt_status st = emb_check("embedding_bwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset, a->dout, a->tokens,
                             a->tokens);
    if (st != MT_OK) return st;
    const long rows = (long)a->B * a->T;
    if (rows == 0) return MT_OK;
    if (a->dwte && a->n_vocab > 0) {
        embedding_bwd_dwte_kernel<<<(unsigned)a->n_vocab, EMB_THREADS, 0, ctx->stream>>>(
            (float *)a->dwte, (const bf16 *)a->dout, a->tokens, rows, a->C, a->vocab_start);
        CUDA_CHECK_LAUNCH();
    }
    if (a->dwpe && a->T > 0) {
        embedding_bwd_dwpe_kernel<<<grid_for((size_t)a->T * a->C), EMB_THREADS, 0, ctx->stream>>>(
            (float *)a->dwpe, (const bf16 *)a->dout, a->B, a->T, a->C, a->pos_offset);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}
