/* tp.h — Megatron tensor-parallel (and sequence-parallel) layers on the backend and the
 * communicator: each forward collective paired with its backward dual.
 *
 *   two primitives (f and its dual g, Megatron-Core's mappings):
 *     mt_tp_gather:  no SP: identity               SP: allgather of the token rows
 *     mt_tp_reduce:  no SP: allreduce (in place)   SP: reduce-scatter of the token rows
 *   column-parallel input  = gather forward, reduce backward
 *   row-parallel output    = reduce forward, gather backward
 *
 * Activations outside tensor-parallel regions (the residual stream, norms) hold N_r token
 * rows: all N = B*T, or with sequence parallelism a 1/tp slice. The slice is of the FLATTENED
 * rows b*T+t (rank k holds rows [k*N/tp, (k+1)*N/tp)): everything done on the slice (norms,
 * residual adds, dropout) is per token, so any partition of the tokens gives the same result,
 * and this one makes the gathers plain contiguous allgathers.
 * With tp = 1 (comm NULL or of size 1) nothing is communicated and nothing copied.
 * Rule: backward follows backend.h (dW/db +=, activation gradients =). Every tp collective's
 * wall time and count go to *clock (the tp group's, parallel/comm_clock.h; NULL: untimed). */
#ifndef MT_TP_H
#define MT_TP_H

#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm.h"
#include "parallel/comm_clock.h"

typedef struct {
    mt_backend *be;
    mt_comm *comm;      /* the tensor-parallel group; NULL when tp = 1 */
    int tp, rank;       /* group size and this rank's index in it (= its vocabulary / head slice) */
    int sp;             /* sequence parallelism */
    int N, C;           /* token rows of a micro-batch (B*T), hidden size */
    int N_r;            /* rows outside tp regions: N / tp with SP, else N */
    void *full;         /* (N, C) act scratch: gathered rows (SP only) */
    void *slice;        /* (N_r, C) act scratch: reduce-scattered rows (SP only) */
    mt_comm_clock *clock; /* the tp group's clock (NULL after mt_tp_init: untimed) */
    /* context parallelism: each sequence's T rows are n_chunks chunks of chunk_len tokens at global
       positions chunk_pos[] (the embedding's position rows); 0 chunks (mt_tp_init's default): one
       chunk at position 0 */
    int n_chunks, chunk_len, chunk_pos[2];
} mt_tp;

/* Fills t; comm may be NULL (tp = 1). Errors name sizes that do not fit (N % tp with SP). */
mt_status mt_tp_init(mt_tp *t, mt_backend *be, mt_comm *comm, int sp, int N, int C, void *full, void *slice);

/* *out = x (N rows) without SP; with SP allgather of x (N_r, C) into t->full, *out = t->full. */
mt_status mt_tp_gather(mt_tp *t, const void *x, const void **out);
/* part (N, C) holds this rank's partial sums: without SP allreduced in place (*out = part),
 * with SP reduce-scattered into dst (N_r, C) (t->slice when dst is NULL; *out = that). */
mt_status mt_tp_reduce(mt_tp *t, void *part, void *dst, void **out);
/* allreduce (sum) of n f32 elements in place over the group (gradients of replicated tensors) */
mt_status mt_tp_allreduce_f32(mt_tp *t, void *buf, size_t n);

/* Column-parallel linear: out (N, n_out) = gather(x) W^T + b; W = this rank's (n_out, K) rows
 * of the full weight, b its n_out bias entries (NULL: none). x is (N_r, K), K = C with SP. */
mt_status mt_tp_column_fwd(mt_tp *t, void *out, const void *x, const void *w, const void *b, int n_out, int K);
/* dW += dout^T gather(x); db += column sums of dout; dx_part (N, K) = dout W (this rank's
 * partial input gradient); *dx = reduce(dx_part) (N_r rows: dx_part itself, or t->slice).
 * Under SP x is gathered again (only the slice is kept, as Megatron does). */
mt_status mt_tp_column_bwd(mt_tp *t, void *dx_part, void **dx, void *dw, void *db, const void *dout,
                           const void *x, const void *w, int n_out, int K);
/* mt_tp_column_fwd followed by GeLU: pre = gather(x) W^T + b, out = gelu(pre), by the backend's
 * fused matmul_gelu_fwd when it has one, else matmul_fwd then gelu_fwd (the same values on the
 * CPU reference either way). */
mt_status mt_tp_column_gelu_fwd(mt_tp *t, void *out, void *pre, const void *x, const void *w, const void *b, int n_out,
                                int K);
/* Row-parallel linear: part (N, n_out) = x W^T with W this rank's (n_out, K) input columns;
 * the replicated bias b is added once (by tp rank 0, so the sum holds it once: "added after
 * the reduction"); *out = reduce(part) (N_r rows). n_out = C with SP. */
mt_status mt_tp_row_fwd(mt_tp *t, void *part, void **out, const void *x, const void *w, const void *b, int n_out,
                        int K);
/* g = gather(dout) (dout: (N_r, n_out)); dx (N, K) = g W; dW += g^T x; db += column sums of g:
 * the bias gradient is complete on every rank (g covers all N rows), no reduction needed. */
mt_status mt_tp_row_bwd(mt_tp *t, void *dx, void *dw, void *db, const void *dout, const void *x, const void *w,
                        int n_out, int K);

/* mt_tp_row_bwd of a layer whose input was gelu(pre), with the GeLU backward folded in:
 * dpre (N, K) = (gather(dout) W) * gelu'(pre); dW, db as mt_tp_row_bwd. Fused matmul_dgelu_bwd
 * when the backend has it, else matmul_bwd into dpre then gelu_bwd in place (elementwise). */
mt_status mt_tp_row_dgelu_bwd(mt_tp *t, void *dpre, void *dw, void *db, const void *dout,
                              const void *x, const void *pre, const void *w, int n_out, int K);

/* Vocab-parallel input embedding: each rank embeds the tokens of its vocabulary rows
 * [vocab_start, vocab_start + n_vocab) (zeros elsewhere), tp rank 0 adds the replicated
 * position table wpe (NULL: none); out (N_r, C) = reduce over the group. */
mt_status mt_tp_embedding_fwd(mt_tp *t, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B,
                              int T, int vocab_start, int n_vocab);
/* dwte (this rank's rows) += , dwpe += (complete on every rank) from gather(dout). */
mt_status mt_tp_embedding_bwd(mt_tp *t, void *dwte, void *dwpe, const void *dout, const int32_t *tokens, int B,
                              int T, int vocab_start, int n_vocab);

/* Vocab-parallel cross-entropy on this rank's logits columns [vocab_start, vocab_start +
 * n_cols) of all N rows (the xent_vp_* ops around an allreduce MAX and an allreduce SUM; with
 * tp = 1 the fused xent op). losses (N) are the full per-token losses on every rank; logits
 * are overwritten by their gradient times dloss. stats: (3, N) f32 scratch (unused at tp = 1). */
mt_status mt_tp_xent(mt_tp *t, void *logits, void *losses, void *stats, const int32_t *targets, int N, int V,
                     int Vp, int vocab_start, int n_cols, float dloss);

#endif
