/* model_cp.c — context parallelism (parallel.context = cp > 1) inside one layer: RoPE at the
 * global positions of the local chunks, and ring attention over the cp group.
 * Layout (model.h): cp rank r holds global chunks r and 2 cp - 1 - r of T / (2 cp) tokens of
 * every sequence, as its local rows [0, Tc) and [Tc, 2 Tc) (Megatron-LM / TransformerEngine
 * get_batch_on_this_cp_rank's causal load balance). Query chunk gq sees key chunk gk fully when
 * gk < gq, diagonally when gk == gq, not at all when gk > gq.
 * Forward, step s = 0 .. cp - 1: the K / V block held is rank (r - s) mod cp's (its k | v
 * columns packed into (B, T/cp, 2 KV_r D) rows; step 0 this rank's own); each visible (query chunk, key
 * chunk) pair runs attention_block_fwd, the first pair of a query chunk writing, later ones
 * merging by logsumexp; between steps the block moves one rank on (send to r + 1, receive from
 * r - 1, in one p2p group so no order can deadlock).
 * Backward: the same ring with the final out / lse; dQ accumulates in dqkv, the dK / dV of the
 * block held accumulate in a partial buffer that travels with the block (this rank's own block's
 * in a buffer that stays), and after the last step one more shift brings every partial home,
 * where it is added to the own one and copied into dqkv's k / v columns.
 * Rules: nothing allocated (the two ring buffers of each kind are in the activation buffer);
 * the merge order is fixed, so results do not depend on timing. */
#include "core/clock.h"
#include "train/model_internal.h"

mt_status mt_model_rope(mt_model *m, void *x, int inverse) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const int B = m->al.B, T = m->al.T;
    mt_rope_args ra = {.x = x, .B = B, .T = T, .n_heads = pl->H_r + pl->KV_r, .D = pl->D,
                       .row_stride = pl->qkv_rows_r, .pos_offset = m->chunk_pos[0], /* 0 but when decoding */
                       .theta = m->pl.spec.rope_theta, .inverse = inverse};
    if (m->n_chunks <= 1) return MT_BE_CALL(m->be, rope, &ra);
    const size_t es = mt_dtype_bytes(m->act);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < m->n_chunks; c++) {
            ra.x = (char *)x + ((size_t)b * T + (size_t)c * m->chunk_len) * pl->qkv_rows_r * es;
            ra.B = 1, ra.T = m->chunk_len, ra.pos_offset = m->chunk_pos[c];
            MT_CHECK(MT_BE_CALL(m->be, rope, &ra));
        }
out:
    return st;
}

/* sends n elements of `send` to the next cp rank and receives the previous one's into `recv` */
static mt_status ring_shift(mt_model *m, const void *send, void *recv, size_t n) {
    mt_status st = MT_OK;
    mt_comm *c = m->cp_comm;
    const int next = (m->cp_rank + 1) % m->cp, prev = (m->cp_rank + m->cp - 1) % m->cp;
    const double t0 = mt_clock_ms();
    MT_CHECK(c->i->group_start(c));
    MT_CHECK(c->i->send(c, send, n, m->act, next));
    MT_CHECK(c->i->recv(c, recv, n, m->act, prev));
    MT_CHECK(c->i->group_end(c));
out:
    m->cp_comm_ms += mt_clock_ms() - t0;
    return st;
}

/* the global chunk of local chunk c of cp rank `owner` */
static int chunk_of(const mt_model *m, int owner, int c) { return mt_cp_chunk(m->cp, owner, c); }

/* packed K / V rows [k heads | v heads] (N, 2 KV_r D) <-> their columns of a (N, qkv_rows_r) qkv */
static mt_status kv_columns(mt_model *m, void *dst, const void *src, int to_qkv) {
    const mt_param_layout *pl = &m->pl;
    const int kvw = 2 * pl->KV_r * pl->D, q_cols = pl->H_r * pl->D;
    const size_t es = mt_dtype_bytes(m->act);
    mt_copy_rows_args c = {.dst = to_qkv ? (char *)dst + q_cols * es : dst,
                           .src = to_qkv ? src : (const char *)src + q_cols * es, .rows = m->al.N, .cols = kvw,
                           .dst_stride = to_qkv ? pl->qkv_rows_r : kvw, .src_stride = to_qkv ? kvw : pl->qkv_rows_r};
    return MT_BE_CALL(m->be, copy_rows, &c);
}

mt_status mt_cp_attention_fwd(mt_model *m, const mt_acts *A, const void *qkv, void *out, void *lse) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const int cp = m->cp, r = m->cp_rank, Tc = m->chunk_len;
    const size_t n = (size_t)m->al.N * 2 * pl->KV_r * pl->D, nb = n * mt_dtype_bytes(m->act);
    char *buf[2] = {ACT(m, A, cp_kv), ACT(m, A, cp_kv) + nb};
    MT_CHECK(kv_columns(m, buf[0], qkv, 0)); /* this rank's own block */
    const void *kv = buf[0];
    int started[2] = {0, 0}; /* query chunk c's out / lse hold a partial softmax */
    for (int s = 0; s < cp; s++) {
        if (s > 0) {
            MT_CHECK(ring_shift(m, kv, buf[s & 1], n));
            kv = buf[s & 1];
        }
        const int owner = (r - s + cp) % cp;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                const int gq = chunk_of(m, r, qc), gk = chunk_of(m, owner, kc);
                if (gk > gq) continue; /* a later chunk: invisible */
                mt_attention_block_fwd_args a = {.out = out, .lse = lse, .qkv = qkv, .kv = kv, .B = m->al.B,
                                                 .T = m->al.T, .H = pl->H_r, .KV = pl->KV_r, .D = pl->D,
                                                 .q0 = qc * Tc, .Tq = Tc, .q_pos = gq * Tc, .k0 = kc * Tc, .Tk = Tc,
                                                 .k_pos = gk * Tc, .merge = started[qc]};
                MT_CHECK(MT_BE_CALL(m->be, attention_block_fwd, &a));
                started[qc] = 1;
            }
    }
out:
    return st;
}

mt_status mt_cp_attention_bwd(mt_model *m, const mt_acts *A, const void *qkv, const void *out, const void *lse,
                              const void *dout, void *dqkv) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const int cp = m->cp, r = m->cp_rank, Tc = m->chunk_len;
    const size_t n = (size_t)m->al.N * 2 * pl->KV_r * pl->D, nb = n * mt_dtype_bytes(m->act);
    char *kbuf[2] = {ACT(m, A, cp_kv), ACT(m, A, cp_kv) + nb};
    char *own = ACT(m, A, cp_dkv), *trav[2] = {own + nb, own + 2 * nb};
    MT_CHECK(kv_columns(m, kbuf[0], qkv, 0));
    const void *kv = kbuf[0];
    void *dacc = own; /* the dK / dV partial of the block held (step 0: this rank's own) */
    MT_CHECK(m->be->i->memset_zero(m->be, dqkv, (size_t)m->al.N * pl->qkv_rows_r * mt_dtype_bytes(m->act)));
    MT_CHECK(m->be->i->memset_zero(m->be, own, nb));
    for (int s = 0; s < cp; s++) {
        if (s > 0) {
            MT_CHECK(ring_shift(m, kv, kbuf[s & 1], n));
            kv = kbuf[s & 1];
            if (s == 1) MT_CHECK(m->be->i->memset_zero(m->be, trav[1], nb)); /* the first travelling partial */
            else MT_CHECK(ring_shift(m, dacc, trav[s & 1], n));
            dacc = trav[s & 1];
        }
        const int owner = (r - s + cp) % cp;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                const int gq = chunk_of(m, r, qc), gk = chunk_of(m, owner, kc);
                if (gk > gq) continue;
                mt_attention_block_bwd_args a = {.dqkv = dqkv, .dkv = dacc, .delta = ACT(m, A, delta), .dout = dout,
                                                 .qkv = qkv, .kv = kv, .out = out, .lse = lse, .B = m->al.B,
                                                 .T = m->al.T, .H = pl->H_r, .KV = pl->KV_r, .D = pl->D,
                                                 .q0 = qc * Tc, .Tq = Tc, .q_pos = gq * Tc, .k0 = kc * Tc, .Tk = Tc,
                                                 .k_pos = gk * Tc};
                MT_CHECK(MT_BE_CALL(m->be, attention_block_bwd, &a));
            }
    }
    /* the partial of block (r + 1) goes home; ours arrives with every other rank's contribution */
    void *home = trav[cp & 1];
    MT_CHECK(ring_shift(m, dacc, home, n));
    mt_add_args ad = {.out = own, .a = own, .b = home, .n = n};
    MT_CHECK(MT_BE_CALL(m->be, add, &ad));
    MT_CHECK(kv_columns(m, dqkv, own, 1)); /* dK / dV into dqkv's k / v columns (=) */
out:
    return st;
}
