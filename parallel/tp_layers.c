/* tp_layers.c — the tensor- / sequence-parallel layers of tp.h: column- and row-parallel
 * linears, vocab-parallel embedding and cross-entropy, built from two primitives (gather and
 * reduce) whose roles swap between forward and backward. Rules: with tp = 1 every function is
 * the plain backend op (no collective, no copy); collectives are timed into *t->clock;
 * every status is propagated (a failed peer surfaces as MT_ERR_PEER from the communicator). */
#include "parallel/tp.h"

#include <string.h>

#include "core/clock.h"

/* times one collective call: st = (call) */
#define TIMED(t, st, call)                     \
    do {                                       \
        double t0_ = mt_clock_ms();                 \
        (st) = (call);                         \
        mt_comm_clock_stop((t)->clock, t0_);   \
    } while (0)

mt_status mt_tp_init(mt_tp *t, mt_backend *be, mt_comm *comm, int sp, int N, int C, void *full, void *slice) {
    memset(t, 0, sizeof *t);
    t->be = be;
    t->tp = comm ? comm->size : 1;
    t->rank = comm ? comm->rank : 0;
    t->comm = t->tp > 1 ? comm : NULL;
    t->sp = t->tp > 1 && sp;
    t->N = N;
    t->C = C;
    if (t->sp && N % t->tp)
        return mt_errorf(MT_ERR_CONFIG,
                         "sequence parallelism splits the %d token rows of a micro-batch (training.micro_batch x "
                         "model.seq_length) over parallel.tensor = %d ranks, and %d %% %d != 0; change the micro "
                         "batch or the sequence length",
                         N, t->tp, N, t->tp);
    t->N_r = t->sp ? N / t->tp : N;
    if (t->sp && (!full || !slice)) return mt_errorf(MT_ERR_INTERNAL, "tp init: sequence parallelism without scratch");
    t->full = full;
    t->slice = slice;
    return MT_OK;
}

mt_status mt_tp_gather(mt_tp *t, const void *x, const void **out) {
    mt_status st = MT_OK;
    if (!t->sp) {
        *out = x;
        return MT_OK;
    }
    TIMED(t, st, t->comm->i->allgather(t->comm, x, t->full, (size_t)t->N_r * t->C, t->be->act));
    *out = t->full;
    return st;
}

mt_status mt_tp_reduce(mt_tp *t, void *part, void *dst, void **out) {
    mt_status st = MT_OK;
    if (!t->comm) {
        *out = part;
    } else if (!t->sp) {
        TIMED(t, st, t->comm->i->allreduce(t->comm, part, part, (size_t)t->N * t->C, t->be->act, MT_RED_SUM));
        *out = part;
    } else {
        void *d = dst ? dst : t->slice;
        TIMED(t, st, t->comm->i->reduce_scatter(t->comm, part, d, (size_t)t->N_r * t->C, t->be->act, MT_RED_SUM));
        *out = d;
    }
    return st;
}

mt_status mt_tp_allreduce_f32(mt_tp *t, void *buf, size_t n) {
    mt_status st = MT_OK;
    if (!t->comm || n == 0) return MT_OK;
    TIMED(t, st, t->comm->i->allreduce(t->comm, buf, buf, n, MT_F32, MT_RED_SUM));
    return st;
}

static mt_status sp_width_check(const mt_tp *t, const char *layer, int width) {
    if (t->sp && width != t->C)
        return mt_errorf(MT_ERR_INTERNAL, "tp %s: sequence-parallel rows must be %d wide (hidden), got %d", layer,
                         t->C, width);
    return MT_OK;
}

mt_status mt_tp_column_fwd(mt_tp *t, void *out, const void *x, const void *w, const void *b, int n_out, int K) {
    mt_status st = MT_OK;
    const void *xf = NULL;
    MT_CHECK(sp_width_check(t, "column-parallel input", K));
    MT_CHECK(mt_tp_gather(t, x, &xf));
    mt_matmul_fwd_args a = {.out = out, .inp = xf, .weight = w, .bias = b, .M = t->N, .N = n_out, .K = K};
    MT_CHECK(MT_BE_CALL(t->be, matmul_fwd, &a));
out:
    return st;
}

mt_status mt_tp_column_bwd(mt_tp *t, void *dx_part, void **dx, void *dw, void *db, const void *dout,
                           const void *x, const void *w, int n_out, int K) {
    mt_status st = MT_OK;
    const void *xf = NULL;
    MT_CHECK(sp_width_check(t, "column-parallel input", K));
    MT_CHECK(mt_tp_gather(t, x, &xf));
    mt_matmul_bwd_args a = {.dinp = dx_part, .dweight = dw, .dbias = db, .dout = dout, .inp = xf, .weight = w,
                            .M = t->N, .N = n_out, .K = K, .accumulate_dinp = 0};
    MT_CHECK(MT_BE_CALL(t->be, matmul_bwd, &a));
    MT_CHECK(mt_tp_reduce(t, dx_part, NULL, dx));
out:
    return st;
}

mt_status mt_tp_row_fwd(mt_tp *t, void *part, void **out, const void *x, const void *w, const void *b, int n_out,
                        int K) {
    mt_status st = MT_OK;
    MT_CHECK(sp_width_check(t, "row-parallel output", n_out));
    mt_matmul_fwd_args a = {.out = part, .inp = x, .weight = w, .bias = t->rank == 0 ? b : NULL, .M = t->N,
                            .N = n_out, .K = K};
    MT_CHECK(MT_BE_CALL(t->be, matmul_fwd, &a));
    MT_CHECK(mt_tp_reduce(t, part, NULL, out));
out:
    return st;
}

mt_status mt_tp_row_bwd(mt_tp *t, void *dx, void *dw, void *db, const void *dout, const void *x, const void *w,
                        int n_out, int K) {
    mt_status st = MT_OK;
    const void *g = NULL;
    MT_CHECK(sp_width_check(t, "row-parallel output", n_out));
    MT_CHECK(mt_tp_gather(t, dout, &g));
    mt_matmul_bwd_args a = {.dinp = dx, .dweight = dw, .dbias = db, .dout = g, .inp = x, .weight = w, .M = t->N,
                            .N = n_out, .K = K, .accumulate_dinp = 0};
    MT_CHECK(MT_BE_CALL(t->be, matmul_bwd, &a));
out:
    return st;
}

mt_status mt_tp_column_gelu_fwd(mt_tp *t, void *out, void *pre, const void *x, const void *w, const void *b, int n_out,
                                int K) {
    mt_status st = MT_OK;
    if (!t->be->i->matmul_gelu_fwd) {
        MT_CHECK(mt_tp_column_fwd(t, pre, x, w, b, n_out, K));
        mt_gelu_fwd_args ga = {.out = out, .inp = pre, .n = (size_t)t->N * n_out};
        return MT_BE_CALL(t->be, gelu_fwd, &ga);
    }
    const void *xf = NULL;
    MT_CHECK(sp_width_check(t, "column-parallel input", K));
    MT_CHECK(mt_tp_gather(t, x, &xf));
    mt_matmul_gelu_fwd_args a = {.out = out, .pre = pre, .inp = xf, .weight = w, .bias = b, .M = t->N, .N = n_out,
                                 .K = K};
    MT_CHECK(t->be->i->matmul_gelu_fwd(t->be, &a));
out:
    return st;
}

mt_status mt_tp_row_dgelu_bwd(mt_tp *t, void *dpre, void *dw, void *db, const void *dout,
                              const void *x, const void *pre, const void *w, int n_out, int K) {
    mt_status st = MT_OK;
    if (!t->be->i->matmul_dgelu_bwd) { /* unfused: into dpre, then dGeLU in place (elementwise) */
        MT_CHECK(mt_tp_row_bwd(t, dpre, dw, db, dout, x, w, n_out, K));
        mt_gelu_bwd_args ga = {.dinp = dpre, .dout = dpre, .inp = pre, .n = (size_t)t->N * K};
        return MT_BE_CALL(t->be, gelu_bwd, &ga);
    }
    const void *g = NULL;
    MT_CHECK(sp_width_check(t, "row-parallel output", n_out));
    MT_CHECK(mt_tp_gather(t, dout, &g));
    mt_matmul_dgelu_bwd_args a = {.dinp = dpre, .dweight = dw, .dbias = db, .dout = g, .inp = x, .weight = w,
                                  .pre = pre, .M = t->N, .N = n_out, .K = K};
    MT_CHECK(t->be->i->matmul_dgelu_bwd(t->be, &a));
out:
    return st;
}

mt_status mt_tp_embedding_fwd(mt_tp *t, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B,
                              int T, int vocab_start, int n_vocab) {
    mt_status st = MT_OK;
    void *res = NULL;
    /* SP: embed all N rows into the scratch, then reduce-scatter the slice into out */
    mt_embedding_fwd_args a = {.out = t->sp ? t->full : out, .tokens = tokens, .wte = wte,
                               .wpe = t->rank == 0 ? wpe : NULL, .B = B, .T = T, .C = t->C,
                               .vocab_start = vocab_start, .n_vocab = n_vocab,
                               .pos_offset = t->chunk_pos[0]}; /* 0 but when decoding one token (generate_kv.c) */
    if (B * T != t->N) return mt_errorf(MT_ERR_INTERNAL, "tp embedding: B*T = %d*%d, expected %d rows", B, T, t->N);
    if (t->n_chunks > 1) { /* context parallelism: each chunk at its global positions */
        void *dst = a.out;
        for (int b = 0; b < B; b++)
            for (int c = 0; c < t->n_chunks; c++) {
                const size_t row = (size_t)b * T + (size_t)c * t->chunk_len;
                a.out = (char *)dst + row * t->C * mt_dtype_bytes(t->be->act);
                a.tokens = tokens + row;
                a.B = 1, a.T = t->chunk_len, a.pos_offset = t->chunk_pos[c];
                MT_CHECK(MT_BE_CALL(t->be, embedding_fwd, &a));
            }
        a.out = dst;
    } else {
        MT_CHECK(MT_BE_CALL(t->be, embedding_fwd, &a));
    }
    MT_CHECK(mt_tp_reduce(t, a.out, out, &res));
out:
    return st;
}

mt_status mt_tp_embedding_bwd(mt_tp *t, void *dwte, void *dwpe, const void *dout, const int32_t *tokens, int B,
                              int T, int vocab_start, int n_vocab) {
    mt_status st = MT_OK;
    const void *g = NULL;
    MT_CHECK(mt_tp_gather(t, dout, &g));
    mt_embedding_bwd_args a = {.dwte = dwte, .dwpe = dwpe, .dout = g, .tokens = tokens, .B = B, .T = T, .C = t->C,
                               .vocab_start = vocab_start, .n_vocab = n_vocab, .pos_offset = 0};
    if (t->n_chunks <= 1) return MT_BE_CALL(t->be, embedding_bwd, &a);
    for (int b = 0; b < B; b++) /* context parallelism: each chunk at its global positions */
        for (int c = 0; c < t->n_chunks; c++) {
            const size_t row = (size_t)b * T + (size_t)c * t->chunk_len;
            a.dout = (const char *)g + row * t->C * mt_dtype_bytes(t->be->act);
            a.tokens = tokens + row;
            a.B = 1, a.T = t->chunk_len, a.pos_offset = t->chunk_pos[c];
            MT_CHECK(MT_BE_CALL(t->be, embedding_bwd, &a));
        }
out:
    return st;
}

mt_status mt_tp_xent(mt_tp *t, void *logits, void *losses, void *stats, const int32_t *targets, int N, int V,
                     int Vp, int vocab_start, int n_cols, float dloss) {
    mt_status st = MT_OK;
    if (!t->comm) {
        mt_xent_args a = {.logits = logits, .losses = losses, .targets = targets, .N = N, .V = V, .Vp = Vp,
                          .dloss = dloss};
        return MT_BE_CALL(t->be, xent_fwd_bwd, &a);
    }
    mt_xent_vp_args a = {.logits = logits, .stats = stats, .losses = losses, .targets = targets, .N = N, .V = V,
                         .vocab_start = vocab_start, .n_cols = n_cols, .dloss = dloss};
    MT_CHECK(MT_BE_CALL(t->be, xent_vp_max, &a));
    TIMED(t, st, t->comm->i->allreduce(t->comm, stats, stats, (size_t)N, MT_F32, MT_RED_MAX));
    MT_CHECK(st);
    MT_CHECK(MT_BE_CALL(t->be, xent_vp_sumexp, &a));
    float *sums = (float *)stats + N;
    TIMED(t, st, t->comm->i->allreduce(t->comm, sums, sums, 2 * (size_t)N, MT_F32, MT_RED_SUM));
    MT_CHECK(st);
    MT_CHECK(MT_BE_CALL(t->be, xent_vp_finish, &a));
out:
    return st;
}
