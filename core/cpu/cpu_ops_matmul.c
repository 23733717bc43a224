/* cpu_ops_matmul.c — the linear layer on the CPU: out = inp @ W^T + bias and its backward,
 * through OpenBLAS sgemm (row-major, W is (N, K) like torch.nn.Linear).
 * GEMMs are sliced over the OpenMP team (mt_cpu_sgemm), OpenBLAS itself runs one thread.
 * Rules: llm.c backward rule — dweight and dbias accumulate (+=), dinp is overwritten (=)
 * unless accumulate_dinp; the bias column sums run over fixed column blocks in row order, in
 * double; every result is bitwise reproducible for a fixed thread count; no allocation. */
#include "core/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#define MT_MM_COLBLOCK 256 /* columns per dbias block: a stack accumulator of 2 KiB */
#define MT_MM_SPLIT_MIN (1 << 18) /* M*N*K below which one thread does the whole GEMM */
#define MT_MM_ALIGN 32           /* slice boundaries, in rows / columns of C */

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, with the OpenMP threads each running a
 * single-threaded OpenBLAS sgemm on a slice of C: columns when N >= M, else rows. The slices
 * depend only on the shape and the thread count, so the result is bitwise reproducible for a
 * fixed thread count (not across thread counts: OpenBLAS picks its blocking per slice). */
void mt_cpu_sgemm(int n_threads, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    const enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    const int split_n = N >= M;
    const int extent = split_n ? N : M;
    int n_slices = n_threads;
    if ((double)M * N * K < MT_MM_SPLIT_MIN || omp_in_parallel()) n_slices = 1;
    if (n_slices > (extent + MT_MM_ALIGN - 1) / MT_MM_ALIGN) n_slices = (extent + MT_MM_ALIGN - 1) / MT_MM_ALIGN;
    if (n_slices <= 1) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(n_slices)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int per = ((extent + nt - 1) / nt + MT_MM_ALIGN - 1) / MT_MM_ALIGN * MT_MM_ALIGN;
        const int s0 = t * per < extent ? t * per : extent;
        const int s1 = s0 + per < extent ? s0 + per : extent;
        if (s1 > s0) {
            if (split_n) /* columns [s0, s1) of C: columns of op(B) */
                cblas_sgemm(CblasRowMajor, ta, tb, M, s1 - s0, K, alpha, A, lda,
                            trans_b ? B + (size_t)s0 * ldb : B + s0, ldb, beta, C + s0, ldc);
            else /* rows [s0, s1) of C: rows of op(A) */
                cblas_sgemm(CblasRowMajor, ta, tb, s1 - s0, N, K, alpha, trans_a ? A + s0 : A + (size_t)s0 * lda,
                            lda, B, ldb, beta, C + (size_t)s0 * ldc, ldc);
        }
    }
}

static mt_status mm_check(const char *op, int M, int N, int K) {
    if (M < 0 || N < 0 || K < 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu %s: negative shape M=%d N=%d K=%d", op, M, N, K);
    return MT_OK;
}

mt_status mt_cpu_matmul_fwd(mt_backend *be, const mt_matmul_fwd_args *a) {
    mt_status st = mm_check("matmul_fwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    const int M = a->M, N = a->N, K = a->K;
    if ((size_t)M * N == 0) return MT_OK;
    if (!a->out || (K > 0 && (!a->inp || !a->weight)))
        return mt_errorf(MT_ERR_INTERNAL, "cpu matmul_fwd: NULL tensor (M=%d N=%d K=%d)", M, N, K);
    const int nt = mt_cpu_nt(be);
    float *out = a->out;
    const float *bias = a->bias;
    float beta = 0.0f;
    if (bias || K == 0) {
        /* seed out with the bias rows (or zeros) and let sgemm add inp @ W^T on top */
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)M * N >= MT_CPU_PAR_MIN)
        for (int r = 0; r < M; r++) {
            float *o = out + (size_t)r * N;
            if (bias)
                memcpy(o, bias, (size_t)N * sizeof *o);
            else
                memset(o, 0, (size_t)N * sizeof *o);
        }
        beta = 1.0f;
    }
    if (K > 0)
        mt_cpu_sgemm(nt, 0, 1, M, N, K, 1.0f, a->inp, K, a->weight, K, beta, out, N);
    return MT_OK;
}

mt_status mt_cpu_matmul_bwd(mt_backend *be, const mt_matmul_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mm_check("matmul_bwd", a->M, a->N, a->K);
    if (st != MT_OK) return st;
    const int M = a->M, N = a->N, K = a->K;
    if (!a->dout && M > 0 && N > 0)
        return mt_errorf(MT_ERR_INTERNAL, "cpu matmul_bwd: NULL dout (M=%d N=%d K=%d)", M, N, K);

    /* dinp (M, K) = dout (M, N) @ W (N, K) */
    if (a->dinp && (size_t)M * K > 0) {
        if (!a->weight) return mt_errorf(MT_ERR_INTERNAL, "cpu matmul_bwd: dinp requested but weight is NULL");
        if (N == 0) {
            if (!a->accumulate_dinp) memset(a->dinp, 0, (size_t)M * K * sizeof(float));
        } else {
            mt_cpu_sgemm(nt, 0, 0, M, K, N, 1.0f, a->dout, N, a->weight, K, a->accumulate_dinp ? 1.0f : 0.0f, a->dinp, K);
        }
    }
    /* dweight (N, K) += dout^T (N, M) @ inp (M, K) */
    if (a->dweight && (size_t)N * K > 0 && M > 0) {
        if (!a->inp) return mt_errorf(MT_ERR_INTERNAL, "cpu matmul_bwd: dweight requested but inp is NULL");
        mt_cpu_sgemm(nt, 1, 0, N, K, M, 1.0f, a->dout, N, a->inp, K, 1.0f, a->dweight, K);
    }
    /* dbias (N) += column sums of dout: each column block sums its rows in order */
    if (a->dbias && N > 0 && M > 0) {
        float *dbias = a->dbias;
        const float *dout = a->dout;
        const int n_blocks = (N + MT_MM_COLBLOCK - 1) / MT_MM_COLBLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)M * N >= MT_CPU_PAR_MIN)
        for (int blk = 0; blk < n_blocks; blk++) {
            const int c0 = blk * MT_MM_COLBLOCK;
            const int nc = N - c0 < MT_MM_COLBLOCK ? N - c0 : MT_MM_COLBLOCK;
            double acc[MT_MM_COLBLOCK];
            for (int j = 0; j < nc; j++) acc[j] = 0.0;
            for (int r = 0; r < M; r++) {
                const float *d = dout + (size_t)r * N + c0;
                for (int j = 0; j < nc; j++) acc[j] += (double)d[j];
            }
            for (int j = 0; j < nc; j++) dbias[c0 + j] = (float)((double)dbias[c0 + j] + acc[j]);
        }
    }
    return MT_OK;
}
