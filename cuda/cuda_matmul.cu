/* cuda_matmul.cu — matmul_fwd / matmul_bwd on cuBLASLt: bf16 A and B, fp32 accumulation
 * (CUBLAS_COMPUTE_32F, fp32 alpha/beta), bf16 activations out, fp32 weight gradients.
 * Rules kept (backend.h): weights are (N, K) row-major, y = x W^T + b; dweight and dbias
 * accumulate (+=) in fp32; dinp is overwritten unless accumulate_dinp.
 *
 * Row-major vs column-major. cuBLASLt is column-major: a row-major (r, c) array with row
 * stride c is, read column-major, the (c x r) matrix X^T with leading dimension c. So every
 * row-major product is computed as its transpose, C^T = op(B)^T op(A)^T, and no data moves:
 *
 *   forward   out(M,N) = inp(M,K) W(N,K)^T + b      ->  out^T (N x M, ld N) = W * inp^T
 *             cuBLAS m=N n=M k=K; A = W memory, stored (K x N, ld K), transa = T;
 *             B = inp memory, stored (K x M, ld K), transb = N; D bf16 (N x M, ld N).
 *             Bias (length N = rows of D^T) by the BIAS epilogue: one value per output feature.
 *   dinp      dinp(M,K) = dout(M,N) W(N,K)          ->  dinp^T (K x M, ld K) = W^T * dout^T
 *             m=K n=M k=N; A = W memory (K x N, ld K), transa = N;
 *             B = dout memory (N x M, ld N), transb = N; C = D = dinp bf16, beta 0 or 1.
 *   dweight   dW(N,K) += dout(M,N)^T inp(M,K)       ->  dW^T (K x N, ld K) += inp^T * dout
 *             m=K n=N k=M; A = inp memory (K x M, ld K), transa = N;
 *             B = dout memory (N x M, ld N), transb = T; C = D = dweight fp32, beta 1.
 *   dbias     dbias(N) += column sums of dout(M,N): own two-pass kernel (deterministic:
 *             partial sums per row-slab into ctx->scratch, then a fixed-order sum that is
 *             added into dbias; cuBLASLt's BGRADB epilogue would overwrite, not add).
 *
 * Fused GeLU (matmul_gelu_fwd / matmul_dgelu_bwd, backend.h):
 *   forward   the forward GEMM with epilogue GELU_AUX_BIAS (GELU_AUX without bias): D = gelu(AB
 *             + bias) in bf16, and the pre-activation AB + bias written to the aux matrix (bf16,
 *             ld = m, the same (N x M) layout as D) for the backward.
 *   backward  the dinp GEMM with epilogue DGELU: D = (W^T dout^T) * gelu'(aux), aux = the saved
 *             pre-activation. The bias gradient of the GEMM that produced pre is NOT taken from
 *             DGELU_BGRAD: that epilogue overwrites the bias buffer, while backend.h accumulates
 *             (+=) into fp32 dbias across micro-batches; the caller's next matmul_bwd adds it
 *             with the deterministic column-sum kernel below, reading the dinp this op wrote.
 *   cuBLASLt's GELU is the tanh approximation, the same formula as the CPU reference's gelu_fwd
 *   (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))): the cuBLASLt docs do not print the
 *   formula, but its GELU epilogue gives gelu(-1) = -0.158806, gelu(1) = 0.841194 (the expected
 *   values of the cuBLASLt epilogue test in oneapi-src/SYCLomatic, .../cublasLt/matmul_2.cu),
 *   which are the tanh form's -0.158808 / 0.841192 to fp32 accuracy, not erf's -0.158655 /
 *   0.841345; llm.c (karpathy/llm.c, llmc/matmul.cuh) uses this epilogue in place of its tanh
 *   GeLU kernel. test/ops/test_cuda_parity.c checks it against the CPU on a GPU. The epilogue
 *   applies GeLU to the fp32 accumulator before the bf16 rounding of pre, so on the GPU the
 *   fused result differs from the unfused (gelu of the bf16-rounded pre) within bf16 rounding.
 *   The aux leading dimension must be a multiple of 8 (cublasLt.h, EPILOGUE_AUX_LD); other
 *   shapes, and a heuristic that finds no algorithm, run the unfused ops instead.
 *
 * Descriptors, layouts and the heuristic's chosen algorithm are cached per (kind, m, n, k,
 * pointer-alignment class) in a small table, so steady-state calls query no heuristic. */
#include "cuda/cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

enum { MM_FWD = 0, MM_FWD_BIAS = 1, MM_DINP = 2, MM_DWEIGHT = 3, MM_FWD_GELU = 4, MM_FWD_GELU_BIAS = 5,
       MM_DINP_DGELU = 6 };

typedef struct {
    int used;
    int kind, m, n, k;
    unsigned align[5]; /* A, B, C, D, bias / aux: largest power of two (<= 256) dividing the address */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* C and D share one layout */
    cublasLtMatmulAlgo_t algo;
    size_t ws_bytes;
} mm_plan;

#define MM_CACHE_N 64

struct mt_cuda_matmul_cache {
    mm_plan plans[MM_CACHE_N];
    int next_evict;
};

static void mm_plan_release(mm_plan *p) {
    if (!p->used) return;
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void mt_cuda_matmul_cache_free(mt_cuda_ctx *ctx) {
    if (!ctx || !ctx->mm_cache) return;
    for (int i = 0; i < MM_CACHE_N; i++) mm_plan_release(&ctx->mm_cache->plans[i]);
    free(ctx->mm_cache);
    ctx->mm_cache = NULL;
}

static unsigned ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (a == 0) return 256;
    unsigned al = 1;
    while (al < 256 && (a & (2u * al - 1)) == 0) al *= 2;
    return al;
}

static const char *mm_kind_name(int kind) {
    switch (kind) {
    case MM_FWD: return "forward";
    case MM_FWD_BIAS: return "forward+bias";
    case MM_DINP: return "backward dinp";
    case MM_FWD_GELU: return "forward+gelu";
    case MM_FWD_GELU_BIAS: return "forward+bias+gelu";
    case MM_DINP_DGELU: return "backward dinp+dgelu";
    default: return "backward dweight";
    }
}

/* Builds a plan (descriptors + heuristic algorithm) into p. On failure p is released. */
static mt_status mm_plan_build(mt_cuda_ctx *ctx, mm_plan *p, int kind, int m, int n, int k,
                               const unsigned align[5], const void *bias, const void *aux) {
    mt_status st = MT_OK;
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int n_found = 0;
    const char *what = "";
    cublasOperation_t ta, tb;
    uint64_t a_rows, a_cols, a_ld, b_rows, b_cols, b_ld;
    cudaDataType_t c_type = kind == MM_DWEIGHT ? CUDA_R_32F : CUDA_R_16BF;
    uint32_t a32;
    uint64_t ws = ctx->workspace_bytes;

    memset(p, 0, sizeof *p);
    p->used = 1;
    p->kind = kind;
    p->m = m;
    p->n = n;
    p->k = k;
    memcpy(p->align, align, sizeof p->align);

    /* stored (column-major) shapes of A and B, see the table at the top of this file */
    switch (kind) {
    case MM_FWD:
    case MM_FWD_BIAS:
    case MM_FWD_GELU:
    case MM_FWD_GELU_BIAS: /* A = W (K x N, ld K) ^T ; B = inp (K x M, ld K) */
        ta = CUBLAS_OP_T; a_rows = k; a_cols = m; a_ld = k;
        tb = CUBLAS_OP_N; b_rows = k; b_cols = n; b_ld = k;
        break;
    case MM_DINP:
    case MM_DINP_DGELU: /* A = W (K x N, ld K) ; B = dout (N x M, ld N) */
        ta = CUBLAS_OP_N; a_rows = m; a_cols = k; a_ld = m;
        tb = CUBLAS_OP_N; b_rows = k; b_cols = n; b_ld = k;
        break;
    default:          /* MM_DWEIGHT: A = inp (K x M, ld K) ; B = dout (N x M, ld N) ^T */
        ta = CUBLAS_OP_N; a_rows = m; a_cols = k; a_ld = m;
        tb = CUBLAS_OP_T; b_rows = n; b_cols = k; b_ld = n;
        break;
    }

#define MMB(call)                                                                            \
    do {                                                                                     \
        what = #call;                                                                        \
        cs = (call);                                                                         \
        if (cs != CUBLAS_STATUS_SUCCESS) goto fail;                                          \
    } while (0)

    MMB(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (kind == MM_FWD_BIAS) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bias_type = CUDA_R_16BF;
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof bias_type));
        /* the heuristic reads the bias pointer's alignment; later calls reset the pointer */
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof bias));
    }
    if (kind == MM_FWD_GELU || kind == MM_FWD_GELU_BIAS || kind == MM_DINP_DGELU) {
        cublasLtEpilogue_t epi = kind == MM_FWD_GELU        ? CUBLASLT_EPILOGUE_GELU_AUX
                                 : kind == MM_FWD_GELU_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                            : CUBLASLT_EPILOGUE_DGELU;
        cudaDataType_t aux_type = CUDA_R_16BF;
        int64_t aux_ld = m; /* the aux matrix has D's shape and layout */
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                           sizeof aux_type));
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
        MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        if (kind == MM_FWD_GELU_BIAS) {
            cudaDataType_t bias_type = CUDA_R_16BF;
            MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                               sizeof bias_type));
            MMB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        }
    }
    MMB(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, a_rows, a_cols, (int64_t)a_ld));
    MMB(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, b_rows, b_cols, (int64_t)b_ld));
    MMB(cublasLtMatrixLayoutCreate(&p->lc, c_type, (uint64_t)m, (uint64_t)n, (int64_t)m));

    MMB(cublasLtMatmulPreferenceCreate(&pref));
    MMB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws));
    a32 = align[0];
    MMB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof a32));
    a32 = align[1];
    MMB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &a32, sizeof a32));
    a32 = align[2];
    MMB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &a32, sizeof a32));
    a32 = align[3];
    MMB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &a32, sizeof a32));

    MMB(cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &heur,
                                       &n_found));
#undef MMB
    cublasLtMatmulPreferenceDestroy(pref);
    if (n_found < 1 || heur.state != CUBLAS_STATUS_SUCCESS) {
        st = mt_errorf(MT_ERR_CUDA,
                       "cuBLASLt has no bf16 algorithm for matmul %s (cuBLAS m=%d n=%d k=%d, "
                       "pointer alignments A %u B %u C %u D %u bytes) on %s",
                       mm_kind_name(kind), m, n, k, align[0], align[1], align[2], align[3],
                       ctx->device_name);
        mm_plan_release(p);
        return st;
    }
    p->algo = heur.algo;
    p->ws_bytes = heur.workspaceSize;
    return MT_OK;

fail:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    mm_plan_release(p);
    return mt_errorf(MT_ERR_CUDA, "%s:%d: matmul %s (cuBLAS m=%d n=%d k=%d): %s: %s", __FILE__,
                     __LINE__, mm_kind_name(kind), m, n, k, what, cublasLtGetStatusString(cs));
}

/* Finds or builds the plan for this call. */
static mt_status mm_plan_get(mt_cuda_ctx *ctx, int kind, int m, int n, int k, const void *A,
                             const void *B, const void *C, const void *bias, const void *aux, mm_plan **out) {
    if (!ctx->mm_cache) {
        ctx->mm_cache = (struct mt_cuda_matmul_cache *)calloc(1, sizeof *ctx->mm_cache);
        if (!ctx->mm_cache) return mt_errorf(MT_ERR_OOM, "CUDA matmul: out of host memory");
    }
    unsigned align[5] = {ptr_align(A), ptr_align(B), ptr_align(C), ptr_align(C),
                         bias ? ptr_align(bias) : 256};
    if (aux && ptr_align(aux) < align[4]) align[4] = ptr_align(aux); /* one class for bias and aux */
    struct mt_cuda_matmul_cache *cache = ctx->mm_cache;
    mm_plan *free_slot = NULL;
    for (int i = 0; i < MM_CACHE_N; i++) {
        mm_plan *p = &cache->plans[i];
        if (!p->used) {
            if (!free_slot) free_slot = p;
            continue;
        }
        if (p->kind == kind && p->m == m && p->n == n && p->k == k &&
            memcmp(p->align, align, sizeof align) == 0) {
            *out = p;
            return MT_OK;
        }
    }
    if (!free_slot) { /* table full: evict round-robin (a model has far fewer shapes) */
        free_slot = &cache->plans[cache->next_evict];
        cache->next_evict = (cache->next_evict + 1) % MM_CACHE_N;
        mm_plan_release(free_slot);
    }
    mt_status st = mm_plan_build(ctx, free_slot, kind, m, n, k, align, bias, aux);
    if (st != MT_OK) return st;
    *out = free_slot;
    return MT_OK;
}

static mt_status mm_run(mt_cuda_ctx *ctx, mm_plan *p, const void *A, const void *B, float beta,
                        void *CD, const void *bias, const void *aux) {
    const float alpha = 1.0f;
    if (p->kind == MM_FWD_GELU || p->kind == MM_FWD_GELU_BIAS || p->kind == MM_DINP_DGELU)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                    &aux, sizeof aux));
    if (p->kind == MM_FWD_BIAS || p->kind == MM_FWD_GELU_BIAS)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof bias));
    CUBLAS_CHECK(cublasLtMatmul(ctx->lt, p->op, &alpha, A, p->la, B, p->lb, &beta, CD, p->lc, CD,
                                p->lc, &p->algo, ctx->workspace, p->ws_bytes, ctx->stream));
    return MT_OK;
}

/* ---- dbias: deterministic column sums of a bf16 (rows, cols) matrix, added into f32 ---- */

#define COLSUM_TX 32 /* columns per block */
#define COLSUM_TY 8  /* row lanes per block */

/* partial[y * cols + c] = sum of x[r, c] over the rows r of slab y (grid.y slabs) */
__global__ void colsum_partial_kernel(float *partial, const bf16 *x, int rows, int cols) {
    __shared__ float sh[COLSUM_TY][COLSUM_TX + 1];
    int c = blockIdx.x * COLSUM_TX + threadIdx.x;
    float acc = 0.0f;
    if (c < cols)
        for (int r = blockIdx.y * COLSUM_TY + threadIdx.y; r < rows; r += gridDim.y * COLSUM_TY)
            acc += __bfloat162float(x[(size_t)r * cols + c]);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float s = 0.0f;
#pragma unroll
        for (int y = 0; y < COLSUM_TY; y++) s += sh[y][threadIdx.x];
        partial[(size_t)blockIdx.y * cols + c] = s;
    }
}

/* out[c] += sum over y of partial[y * cols + c], in order y = 0, 1, ... */
__global__ void colsum_finish_kernel(float *out, const float *partial, int n_slabs, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int y = 0; y < n_slabs; y++) s += partial[(size_t)y * cols + c];
    out[c] += s;
}

static mt_status dbias_accumulate(mt_cuda_ctx *ctx, float *dbias, const bf16 *dout, int rows,
                                  int cols) {
    unsigned gx = mt_cuda_ceil_div((size_t)cols, COLSUM_TX);
    const size_t slabs = mt_cuda_reduce_slabs(ctx, gx, rows, COLSUM_TY, (size_t)cols * sizeof(float));
    if (slabs < 1)
        return mt_errorf(MT_ERR_INTERNAL, "CUDA dbias: %d columns exceed the %zu-byte scratch", cols,
                         ctx->scratch_bytes);
    dim3 grid(gx, (unsigned)slabs), block(COLSUM_TX, COLSUM_TY);
    colsum_partial_kernel<<<grid, block, 0, ctx->stream>>>(ctx->scratch, dout, rows, cols);
    CUDA_CHECK_LAUNCH();
    colsum_finish_kernel<<<mt_cuda_ceil_div((size_t)cols, 256), 256, 0, ctx->stream>>>(
        dbias, ctx->scratch, (int)slabs, cols);
    CUDA_CHECK_LAUNCH();
    return MT_OK;
}

/* ---- the ops ---- */

static mt_status mm_check_dims(const char *op, int M, int N, int K) {
    if (M < 0 || N < 0 || K < 0)
        return mt_errorf(MT_ERR_CONFIG, "CUDA %s: negative shape M=%d N=%d K=%d", op, M, N, K);
    return MT_OK;
}

/* out(M, N) = bias broadcast over rows, or 0: the K = 0 forward (cuBLASLt wants k >= 1) */
__global__ void fill_rows_kernel(bf16 *out, const bf16 *bias, size_t n, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = bias ? bias[i % N] : __float2bfloat16_rn(0.0f);
}

mt_status mt_cuda_matmul_fwd(mt_backend *be, const mt_matmul_fwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mm_plan *p = NULL;
    mt_status st = mm_check_dims("matmul_fwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    if ((size_t)a->M * a->N == 0) return MT_OK;
    if (a->K == 0) { /* empty sum: out = bias (or 0), as the CPU reference does */
        size_t n = (size_t)a->M * a->N;
        fill_rows_kernel<<<mt_cuda_ceil_div(n, 256), 256, 0, ctx->stream>>>(
            (bf16 *)a->out, (const bf16 *)a->bias, n, a->N);
        CUDA_CHECK_LAUNCH();
        return MT_OK;
    }
    int kind = a->bias ? MM_FWD_BIAS : MM_FWD;
    /* cuBLAS m = N, n = M, k = K; A = weight, B = inp, D = out */
    st = mm_plan_get(ctx, kind, a->N, a->M, a->K, a->weight, a->inp, a->out, a->bias, NULL, &p);
    if (st != MT_OK) return st;
    return mm_run(ctx, p, a->weight, a->inp, 0.0f, a->out, a->bias, NULL);
}

mt_status mt_cuda_matmul_bwd(mt_backend *be, const mt_matmul_bwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mm_plan *p = NULL;
    mt_status st = mm_check_dims("matmul_bwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    if (a->M == 0) return MT_OK; /* no rows: every gradient increment is 0 */
    if (a->N == 0) { /* dinp = dout @ W is an empty sum: 0 (or unchanged when accumulating) */
        if (a->dinp && !a->accumulate_dinp && a->K > 0)
            CUDA_CHECK(cudaMemsetAsync(a->dinp, 0, (size_t)a->M * a->K * sizeof(bf16), ctx->stream));
        return MT_OK;
    }
    if (a->K == 0) { /* dinp and dweight are empty; only dbias gets a contribution */
        if (a->dbias)
            return dbias_accumulate(ctx, (float *)a->dbias, (const bf16 *)a->dout, a->M, a->N);
        return MT_OK;
    }
    if (a->dinp) { /* cuBLAS m = K, n = M, k = N; A = weight, B = dout, C = D = dinp */
        st = mm_plan_get(ctx, MM_DINP, a->K, a->M, a->N, a->weight, a->dout, a->dinp, NULL, NULL, &p);
        if (st != MT_OK) return st;
        st = mm_run(ctx, p, a->weight, a->dout, a->accumulate_dinp ? 1.0f : 0.0f, a->dinp, NULL, NULL);
        if (st != MT_OK) return st;
    }
    if (a->dweight) { /* cuBLAS m = K, n = N, k = M; A = inp, B = dout^T, C = D = dweight */
        st = mm_plan_get(ctx, MM_DWEIGHT, a->K, a->N, a->M, a->inp, a->dout, a->dweight, NULL, NULL, &p);
        if (st != MT_OK) return st;
        st = mm_run(ctx, p, a->inp, a->dout, 1.0f, a->dweight, NULL, NULL);
        if (st != MT_OK) return st;
    }
    if (a->dbias) {
        st = dbias_accumulate(ctx, (float *)a->dbias, (const bf16 *)a->dout, a->M, a->N);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

/* ---- fused GeLU (see the top of this file) ---- */

mt_status mt_cuda_matmul_gelu_fwd(mt_backend *be, const mt_matmul_gelu_fwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mm_plan *p = NULL;
    mt_status st = mm_check_dims("matmul_gelu_fwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    if ((size_t)a->M * a->N == 0) return MT_OK;
    if (!a->out || !a->pre) return mt_errorf(MT_ERR_INTERNAL, "CUDA matmul_gelu_fwd: NULL out or pre");
    /* cuBLAS m = N (the aux leading dimension, a multiple of 8), n = M, k = K */
    if (a->K > 0 && a->N % 8 == 0) {
        const int kind = a->bias ? MM_FWD_GELU_BIAS : MM_FWD_GELU;
        if (mm_plan_get(ctx, kind, a->N, a->M, a->K, a->weight, a->inp, a->out, a->bias, a->pre, &p) == MT_OK)
            return mm_run(ctx, p, a->weight, a->inp, 0.0f, a->out, a->bias, a->pre);
    }
    /* unfused: pre = matmul (+ bias), out = gelu(pre) */
    mt_matmul_fwd_args mf = {a->pre, a->inp, a->weight, a->bias, a->M, a->N, a->K};
    if ((st = mt_cuda_matmul_fwd(be, &mf)) != MT_OK) return st;
    mt_gelu_fwd_args gf = {a->out, a->pre, (size_t)a->M * a->N};
    return mt_cuda_gelu_fwd(be, &gf);
}

mt_status mt_cuda_matmul_dgelu_bwd(mt_backend *be, const mt_matmul_dgelu_bwd_args *a) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    mm_plan *p = NULL;
    mt_status st = mm_check_dims("matmul_dgelu_bwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    if (a->M == 0 || a->K == 0) { /* no dinp; the weight and bias gradients as matmul_bwd */
        mt_matmul_bwd_args mb = {NULL, a->dweight, a->dbias, a->dout, a->inp, a->weight, a->M, a->N, a->K, 0};
        return mt_cuda_matmul_bwd(be, &mb);
    }
    if (!a->dinp || !a->pre) return mt_errorf(MT_ERR_INTERNAL, "CUDA matmul_dgelu_bwd: NULL dinp or pre");
    int fused = 0;
    /* dinp: cuBLAS m = K (the aux leading dimension, a multiple of 8), n = M, k = N */
    if (a->N > 0 && a->K % 8 == 0 &&
        mm_plan_get(ctx, MM_DINP_DGELU, a->K, a->M, a->N, a->weight, a->dout, a->dinp, NULL, a->pre, &p) == MT_OK) {
        if ((st = mm_run(ctx, p, a->weight, a->dout, 0.0f, a->dinp, NULL, a->pre)) != MT_OK) return st;
        fused = 1;
    }
    /* the rest as matmul_bwd; unfused, its dinp then gelu_bwd in place (elementwise, same index) */
    mt_matmul_bwd_args mb = {fused ? NULL : a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->weight,
                             a->M, a->N, a->K, 0};
    if ((st = mt_cuda_matmul_bwd(be, &mb)) != MT_OK) return st;
    if (fused) return MT_OK;
    mt_gelu_bwd_args gb = {a->dinp, a->dinp, a->pre, (size_t)a->M * a->K};
    return mt_cuda_gelu_bwd(be, &gb);
}
