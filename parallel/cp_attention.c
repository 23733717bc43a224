/* cp_attention.c — context parallelism's ring attention and chunked RoPE (cp_attention.h).
 * Query chunk gq sees key chunk gk fully when gk < gq, diagonally when gk == gq, not at all
 * when gk > gq (Megatron-LM / TransformerEngine get_batch_on_this_cp_rank's causal load balance).
 * Forward, step s = 0 .. cp - 1: the K / V block held is rank (r - s) mod cp's (its k | v
 * columns packed into (B, T/cp, 2 KV D) rows; step 0 this rank's own); each visible (query chunk, key
 * chunk) pair runs attention_block_fwd, the first pair of a query chunk writing, later ones
 * merging by logsumexp; between steps the block moves one rank on (send to r + 1, receive from
 * r - 1, in one p2p group so no order can deadlock).
 * Backward: the same ring with the final out / lse; dQ accumulates in dqkv, the dK / dV of the
 * block held accumulate in a partial buffer that travels with the block (this rank's own block's
 * in a buffer that stays), and after the last step one more shift brings every partial home,
 * where it is added to the own one and copied into dqkv's k / v columns.
 * Rules: nothing allocated (the ring buffers are the caller's); the merge order is fixed, so
 * results do not depend on timing. */
#include "parallel/cp_attention.h"

#include <string.h>

mt_status mt_cp_init(mt_cp *c, mt_backend *be, mt_dtype act, const mt_group *g, int cp, int T_global) {
    memset(c, 0, sizeof *c);
    c->be = be;
    c->act = act;
    c->cp = cp;
    c->rank = g->size > 1 ? g->rank : 0;
    c->comm = cp > 1 ? g->comm : NULL;
    if (cp > 1 && (!g->comm || g->size != cp))
        return mt_errorf(MT_ERR_INTERNAL, "model init: parallel.context = %d needs a cp group of that size (got %d)",
                         cp, g->comm ? g->size : 0);
    if (cp > 1 && T_global % (2 * cp))
        return mt_errorf(MT_ERR_CONFIG, "model init: model.seq_length %d does not split into 2 x parallel.context = %d "
                         "chunks", T_global, 2 * cp);
    c->n_chunks = cp > 1 ? 2 : 1;
    c->chunk_len = T_global / (cp > 1 ? 2 * cp : 1);
    for (int k = 0; k < c->n_chunks; k++) c->chunk_pos[k] = cp > 1 ? mt_cp_chunk(cp, c->rank, k) * c->chunk_len : 0;
    return MT_OK;
}

mt_status mt_cp_rope(const mt_cp *c, const mt_cp_shape *s, void *x, const mt_rope_args *how) {
    mt_status st = MT_OK;
    const int B = s->B, T = s->T;
    mt_rope_args ra = *how; /* theta, direction, rotated channels, YaRN */
    ra.x = x, ra.B = B, ra.T = T, ra.n_heads = s->H + s->KV, ra.D = s->D, ra.row_stride = s->qkv_rows;
    ra.pos_offset = c->chunk_pos[0];
    if (c->n_chunks <= 1) return MT_BE_CALL(c->be, rope, &ra);
    const size_t es = mt_dtype_bytes(c->act);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < c->n_chunks; k++) {
            ra.x = (char *)x + ((size_t)b * T + (size_t)k * c->chunk_len) * s->qkv_rows * es;
            ra.B = 1, ra.T = c->chunk_len, ra.pos_offset = c->chunk_pos[k];
            MT_CHECK(MT_BE_CALL(c->be, rope, &ra));
        }
out:
    return st;
}

/* sends n elements of `send` to the next cp rank and receives the previous one's into `recv` */
static mt_status ring_shift(mt_cp *c, const void *send, void *recv, size_t n) {
    mt_status st = MT_OK;
    mt_comm *cm = c->comm;
    const int next = (c->rank + 1) % c->cp, prev = (c->rank + c->cp - 1) % c->cp;
    const double t0 = mt_clock_ms();
    MT_CHECK(cm->i->group_start(cm));
    MT_CHECK(cm->i->send(cm, send, n, c->act, next));
    MT_CHECK(cm->i->recv(cm, recv, n, c->act, prev));
    MT_CHECK(cm->i->group_end(cm));
out:
    mt_comm_clock_stop(c->clock, t0);
    return st;
}

/* packed K / V rows [k heads | v heads] (N, 2 KV D) <-> their columns of a (N, qkv_rows) qkv */
static mt_status kv_columns(const mt_cp *c, const mt_cp_shape *s, void *dst, const void *src, int to_qkv) {
    const int kvw = 2 * s->KV * s->D, q_cols = s->H * s->D;
    const size_t es = mt_dtype_bytes(c->act);
    mt_copy_rows_args a = {.dst = to_qkv ? (char *)dst + q_cols * es : dst,
                           .src = to_qkv ? src : (const char *)src + q_cols * es, .rows = s->B * s->T, .cols = kvw,
                           .dst_stride = to_qkv ? s->qkv_rows : kvw, .src_stride = to_qkv ? kvw : s->qkv_rows};
    return MT_BE_CALL(c->be, copy_rows, &a);
}

mt_status mt_cp_attention_fwd(mt_cp *c, const mt_cp_shape *s, void *kv_ring, const void *qkv, void *out, void *lse) {
    mt_status st = MT_OK;
    if (c->cp <= 1) {
        mt_attention_fwd_args at = {.out = out, .lse = lse, .qkv = qkv, .B = s->B, .T = s->T,
                                    .H = s->H, .KV = s->KV, .D = s->D, .scale = s->scale};
        return MT_BE_CALL(c->be, attention_fwd, &at);
    }
    const int cp = c->cp, r = c->rank, Tc = c->chunk_len;
    const size_t n = (size_t)s->B * s->T * 2 * s->KV * s->D, nb = n * mt_dtype_bytes(c->act);
    char *buf[2] = {kv_ring, (char *)kv_ring + nb};
    MT_CHECK(kv_columns(c, s, buf[0], qkv, 0)); /* this rank's own block */
    const void *kv = buf[0];
    int started[2] = {0, 0}; /* query chunk qc's out / lse hold a partial softmax */
    for (int step = 0; step < cp; step++) {
        if (step > 0) {
            MT_CHECK(ring_shift(c, kv, buf[step & 1], n));
            kv = buf[step & 1];
        }
        const int owner = (r - step + cp) % cp;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                const int gq = mt_cp_chunk(cp, r, qc), gk = mt_cp_chunk(cp, owner, kc);
                if (gk > gq) continue; /* a later chunk: invisible */
                mt_attention_block_fwd_args a = {.out = out, .lse = lse, .qkv = qkv, .kv = kv, .B = s->B,
                                                 .T = s->T, .H = s->H, .KV = s->KV, .D = s->D,
                                                 .q0 = qc * Tc, .Tq = Tc, .q_pos = gq * Tc, .k0 = kc * Tc, .Tk = Tc,
                                                 .k_pos = gk * Tc, .merge = started[qc], .scale = s->scale};
                MT_CHECK(MT_BE_CALL(c->be, attention_block_fwd, &a));
                started[qc] = 1;
            }
    }
out:
    return st;
}

mt_status mt_cp_attention_bwd(mt_cp *c, const mt_cp_shape *s, void *kv_ring, void *dkv_ring, void *delta,
                              const void *qkv, const void *out, const void *lse, const void *dout, void *dqkv) {
    mt_status st = MT_OK;
    if (c->cp <= 1) {
        mt_attention_bwd_args ab = {.dqkv = dqkv, .delta = delta, .dout = dout, .qkv = qkv, .out = out, .lse = lse,
                                    .B = s->B, .T = s->T, .H = s->H, .KV = s->KV, .D = s->D, .scale = s->scale};
        return MT_BE_CALL(c->be, attention_bwd, &ab);
    }
    const int cp = c->cp, r = c->rank, Tc = c->chunk_len;
    const size_t N = (size_t)s->B * s->T, n = N * 2 * s->KV * s->D, nb = n * mt_dtype_bytes(c->act);
    char *kbuf[2] = {kv_ring, (char *)kv_ring + nb};
    char *own = dkv_ring, *trav[2] = {own + nb, own + 2 * nb};
    MT_CHECK(kv_columns(c, s, kbuf[0], qkv, 0));
    const void *kv = kbuf[0];
    void *dacc = own; /* the dK / dV partial of the block held (step 0: this rank's own) */
    MT_CHECK(c->be->i->memset_zero(c->be, dqkv, N * s->qkv_rows * mt_dtype_bytes(c->act)));
    MT_CHECK(c->be->i->memset_zero(c->be, own, nb));
    for (int step = 0; step < cp; step++) {
        if (step > 0) {
            MT_CHECK(ring_shift(c, kv, kbuf[step & 1], n));
            kv = kbuf[step & 1];
            if (step == 1) MT_CHECK(c->be->i->memset_zero(c->be, trav[1], nb)); /* the first travelling partial */
            else MT_CHECK(ring_shift(c, dacc, trav[step & 1], n));
            dacc = trav[step & 1];
        }
        const int owner = (r - step + cp) % cp;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                const int gq = mt_cp_chunk(cp, r, qc), gk = mt_cp_chunk(cp, owner, kc);
                if (gk > gq) continue;
                mt_attention_block_bwd_args a = {.dqkv = dqkv, .dkv = dacc, .delta = delta, .dout = dout,
                                                 .qkv = qkv, .kv = kv, .out = out, .lse = lse, .B = s->B,
                                                 .T = s->T, .H = s->H, .KV = s->KV, .D = s->D,
                                                 .q0 = qc * Tc, .Tq = Tc, .q_pos = gq * Tc, .k0 = kc * Tc, .Tk = Tc,
                                                 .k_pos = gk * Tc, .scale = s->scale};
                MT_CHECK(MT_BE_CALL(c->be, attention_block_bwd, &a));
            }
    }
    /* the partial of block (r + 1) goes home; ours arrives with every other rank's contribution */
    void *home = trav[cp & 1];
    MT_CHECK(ring_shift(c, dacc, home, n));
    mt_add_args ad = {.out = own, .a = own, .b = home, .n = n};
    MT_CHECK(MT_BE_CALL(c->be, add, &ad));
    MT_CHECK(kv_columns(c, s, dqkv, own, 1)); /* dK / dV into dqkv's k / v columns (=) */
out:
    return st;
}
