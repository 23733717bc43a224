/* cuda_embed.cu — token (+ position) embedding forward and backward with vocab-parallel
 * shards, bf16 activations / weights, f32 weight gradients.
 * Rules kept (backend.h): tokens outside [vocab_start, vocab_start + n_vocab) read zeros and
 * get no gradient; dwte and dwpe accumulate (+=).
 * Determinism without float atomics:
 *  - dwte: the tokens are bucketed by id once, then each vocabulary row sums its own tokens in
 *    token order. A key per token row r, (id << 32) | r for a token of this shard (all ones for
 *    another shard's), is sorted by cub's radix sort; as keys are unique, the sorted order is the
 *    same whatever the sort does with ties, so it is (id, r) ascending. Then one thread block per
 *    vocabulary row finds its run of keys by binary search and thread c adds dout[r, c] for the
 *    run's rows in increasing r into dwte[v, c] (thread c owns its columns): every element is
 *    summed in token order, the CPU reference's order, bit-exact for the same inputs and the same
 *    on every run. Each token row of dout is read once in all (O(B*T*C)), against once per
 *    vocabulary row for a scan of all tokens per row (O(V*B*T)); rows with no token cost a
 *    binary search. Scratch: 2 keys of 8 bytes per token and the sort's temporary storage,
 *    stream-ordered (cudaMallocAsync / cudaFreeAsync).
 *  - dwpe: one thread per (position t, column c), summing over b in order. */
#include "cuda/cuda_common.cuh"

#include <cub/device/device_radix_sort.cuh>

#define EMB_THREADS 256
#define EMB_NO_KEY (~(uint64_t)0) /* another shard's token: sorts after every key of this shard */

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

/* keys[r] = (shard-local id << 32) | r, or EMB_NO_KEY for a token outside the shard */
__global__ void embedding_bwd_keys_kernel(uint64_t *keys, const int32_t *tokens, long rows, int vs, int nv) {
    for (long r = (long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (long)gridDim.x * blockDim.x) {
        const long id = (long)tokens[r] - vs;
        keys[r] = (id >= 0 && id < nv) ? ((uint64_t)id << 32) | (uint64_t)r : EMB_NO_KEY;
    }
}

/* grid.x = n_vocab (one block per shard vocabulary row); keys sorted ascending */
__global__ void embedding_bwd_dwte_kernel(float *dwte, const bf16 *dout, const uint64_t *keys, long rows, int C) {
    __shared__ long run[2]; /* [first, end) of this row's keys */
    const uint64_t v = blockIdx.x;
    if (threadIdx.x < 2) { /* lower bound of (v + threadIdx.x) << 32 */
        const uint64_t want = (v + threadIdx.x) << 32;
        long lo = 0, hi = rows;
        while (lo < hi) {
            const long mid = lo + (hi - lo) / 2;
            if (keys[mid] < want) lo = mid + 1;
            else hi = mid;
        }
        run[threadIdx.x] = lo;
    }
    __syncthreads();
    const long first = run[0], end = run[1];
    if (first == end) return;
    float *g = dwte + (size_t)v * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = g[c];
        for (long k = first; k < end; k++) acc += __bfloat162float(dout[(size_t)(keys[k] & 0xffffffffu) * C + c]);
        g[c] = acc;
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

static unsigned grid_for(size_t n) {
    size_t b = (n + EMB_THREADS - 1) / EMB_THREADS;
    if (b > 65535) b = 65535;
    return b ? (unsigned)b : 1u;
}

mt_status mt_cuda_embedding_fwd(mt_backend *be, const mt_embedding_fwd_args *a) {
    mt_status st = mt_op_check_embedding("cuda", "embedding_fwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset,
                                         a->out, a->tokens, a->n_vocab > 0 ? a->wte : (const void *)a->tokens);
    if (st != MT_OK) return st;
    const size_t n = (size_t)a->B * a->T * a->C;
    if (n == 0) return MT_OK;
    embedding_fwd_kernel<<<grid_for(n), EMB_THREADS, 0, mt_cuda_ctx_of(be)->stream>>>(
        (bf16 *)a->out, a->tokens, (const bf16 *)a->wte, (const bf16 *)a->wpe, a->T, a->C, a->vocab_start,
        a->n_vocab, a->pos_offset, n);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

/* dwte += the bucketed sums (see the top of the file) */
static mt_status embedding_bwd_dwte(mt_cuda_ctx *ctx, const mt_embedding_bwd_args *a, long rows) {
    if (rows >= (long)0xffffffffL || a->n_vocab > (1 << 30))
        return mt_errorf(MT_ERR_CONFIG, "cuda embedding_bwd: %ld token rows or %d vocabulary rows: over the "
                         "32-bit row keys (split the micro-batch)", rows, a->n_vocab);
    int id_bits = 1;
    while (id_bits < 31 && (1L << id_bits) < a->n_vocab) id_bits++;
    const int end_bit = 32 + id_bits; /* keys of this shard are below 2^end_bit; EMB_NO_KEY's low bits are all ones */
    size_t sort_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, (const uint64_t *)NULL, (uint64_t *)NULL, (int)rows,
                                              0, end_bit, ctx->stream));
    const size_t key_bytes = (size_t)rows * sizeof(uint64_t);
    unsigned char *buf = NULL;
    CUDA_CHECK(cudaMallocAsync((void **)&buf, 2 * key_bytes + sort_bytes, ctx->stream));
    uint64_t *keys = (uint64_t *)buf, *sorted = (uint64_t *)(buf + key_bytes);
    embedding_bwd_keys_kernel<<<grid_for((size_t)rows), EMB_THREADS, 0, ctx->stream>>>(keys, a->tokens, rows,
                                                                                      a->vocab_start, a->n_vocab);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortKeys(buf + 2 * key_bytes, sort_bytes, (const uint64_t *)keys, sorted, (int)rows,
                                           0, end_bit, ctx->stream);
    if (e == cudaSuccess) {
        embedding_bwd_dwte_kernel<<<(unsigned)a->n_vocab, EMB_THREADS, 0, ctx->stream>>>(
            (float *)a->dwte, (const bf16 *)a->dout, sorted, rows, a->C);
        e = cudaGetLastError();
    }
    const cudaError_t ef = cudaFreeAsync(buf, ctx->stream);
    CUDA_CHECK(e);
    CUDA_CHECK(ef);
    return MT_OK;
}

mt_status mt_cuda_embedding_bwd(mt_backend *be, const mt_embedding_bwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mt_status st = mt_op_check_embedding("cuda", "embedding_bwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset,
                                         a->dout, a->tokens, a->tokens);
    if (st != MT_OK) return st;
    const long rows = (long)a->B * a->T;
    if (rows == 0) return MT_OK;
    if (a->dwte && a->n_vocab > 0) {
        st = embedding_bwd_dwte(ctx, a, rows);
        if (st != MT_OK) return st;
    }
    if (a->dwpe && a->T > 0) {
        embedding_bwd_dwpe_kernel<<<grid_for((size_t)a->T * a->C), EMB_THREADS, 0, ctx->stream>>>(
            (float *)a->dwpe, (const bf16 *)a->dout, a->B, a->T, a->C, a->pos_offset);
        CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}
