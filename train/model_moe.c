/* model_moe.c — the mixture-of-experts layer of one rank (Megatron-Core's MoELayer with the
 * alltoall token dispatcher), in place of the MLP in the MoE layers (model.moe.layer_freq / layer_pattern;
 * the router and experts are stacked over the stage's MoE layers: slot mt_param_layer_slot):
 *   x = gather_sp(norm2 out) (N, C);  logits = x Wr^T (router, replicated);  route: scores (softmax or
 *   sigmoid), top-k (groups, expert bias: train/moe_bias.c), weights, capacity (moe_route: the drop rule
 *   of docs/moe.md);  dispatch rows to the dispatch
 *   layout (expert-major);  ep > 1: the expert-parallel layer (parallel/ep_dispatch.c) moves the rows
 *   to their experts' ranks, expert-major / source-minor;  per local expert ONE GEMM pair over its rows (fc, act,
 *   fcproj; experts split over tp like the dense MLP: expert tensor parallelism = tp);  rows back
 *   by the reverse all-to-all;  combine out[t] = sum_j w[t, j] y[t, j] (partial over tp);  plus the
 *   shared experts' output (model_moe_shared.c, partial over tp too);  reduce over tp (allreduce,
 *   reduce-scatter under SP);  residual add.
 * Backward is the reverse, with the duals: the output gradient gathered under SP, the combine
 * weights' gradient summed over tp (the expert outputs are tp-partial), the same all-to-alls in
 * reverse, the router's gradient (softmax / top-k / renormalisation, load-balancing and z-loss)
 * added to the input gradient on tp rank 0 only (the router runs on every tp rank on the same
 * tokens), then the tp reduction of the input gradient.
 * Rules: counts come to the host (the ep layer's copy_d2h: the one per-layer synchronisation MoE
 * needs, as Megatron's .cpu() of tokens_per_expert); no allocation; with ep = 1 nothing is
 * communicated over the expert group. */
#include "train/model_internal.h"

typedef struct {
    void *logits;   /* (N, E) act */
    void *probs;    /* (N, E) f32 */
    void *topi, *topw, *pos; /* (N, k) */
    int32_t *counts;/* (2E + ep*E_r) i32 */
    void *auxcnt;   /* (B, E) i32 */
    void *xin, *h, *g, *ysend;
} moe_layer;

/* MoE layer l's activations: slice act_slot[l] of the MoE arrays (only the chunk's MoE layers have one; under
 * full recompute the recompute slice, the rerun layers sharing one) */
static moe_layer layer_of(const mt_model *m, const mt_acts *A, int l) {
    const mt_param_layout *pl = &m->pl;
    const size_t N = (size_t)m->al.N, E = pl->E, k = pl->top_k, R = m->al.moe_R, S = m->al.moe_S, C = pl->C;
    const size_t a = mt_dtype_bytes(m->act);
    const int j = A->l0 + pl->act_slot[l]; /* ACT_L counts from A->l0 */
    moe_layer L;
    L.logits = ACT_L(m, A, moe_logits, j, N * E, a);
    L.probs = ACT_L(m, A, moe_probs, j, N * E, 4);
    L.topi = ACT_L(m, A, moe_topi, j, N * k, 4);
    L.topw = ACT_L(m, A, moe_topw, j, N * k, 4);
    L.pos = ACT_L(m, A, moe_pos, j, N * k, 4);
    L.counts = (int32_t *)ACT_L(m, A, moe_counts, j, 2 * E + (size_t)pl->ep * pl->E_r, 4);
    L.auxcnt = ACT_L(m, A, moe_auxcnt, j, (size_t)m->al.N / m->al.T * E, 4);
    L.xin = ACT_L(m, A, moe_xin, j, R * C, a);
    L.h = ACT_L(m, A, moe_h, j, R * pl->efc_rows_r, a);
    L.g = ACT_L(m, A, moe_g, j, R * pl->Fe_r, a);
    L.ysend = ACT_L(m, A, moe_ysend, j, S * C, a);
    return L;
}

mt_status mt_moe_forward(mt_model *m, const mt_acts *A, int l, const void *x2, const void *xm, void *xo) {
    mt_status st = MT_OK;
    mt_tp *tp = &m->par.tp;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int N = m->al.N, C = pl->C, E = pl->E, k = pl->top_k, ep = pl->ep;
    const size_t a = mt_dtype_bytes(m->act);
    const moe_layer L = layer_of(m, A, l);
    const void *xf = NULL;
    MT_CHECK(mt_tp_gather(tp, x2, &xf));
    const int ms = mt_param_layer_slot(pl, l); /* the layer's slot in the MoE stacks */
    mt_matmul_fwd_args ra = {.out = L.logits, .inp = xf, .weight = P(m, ix->router_w, ms), .M = N, .N = E, .K = C};
    MT_CHECK(MT_BE_CALL(m->be, matmul_fwd, &ra));
    /* a full-recompute rerun routes the same tokens again: its statistics are not counted twice */
    mt_moe_route_args rt = {.logits = L.logits, .probs = L.probs, .topi = L.topi, .topw = L.topw, .pos = L.pos,
                            .counts = L.counts, .auxcnt = L.auxcnt, .stats = m->recomputing ? NULL : m->moe_stats,
                            .bias = m->moe_bias ? (char *)m->moe_bias + (size_t)l * E * 4 : NULL,
                            .bias_cnt = m->moe_bias_cnt && !m->recomputing ? (char *)m->moe_bias_cnt + (size_t)l * E * 4
                                                                            : NULL,
                            .N = N, .E = E, .k = k, .T = m->al.T, .cap = pl->moe_cap,
                            .pre_softmax = m->moe_pre_softmax, .score = m->moe_score, .n_groups = m->moe_groups,
                            .group_topk = m->moe_group_topk, .seq_aux = m->moe_seq_aux, .scale = m->moe_scale};
    MT_CHECK(MT_BE_CALL(m->be, moe_route, &rt));
    MT_CHECK(mt_ep_exchange_counts(&m->par.ep, L.counts));
    void *disp = ep > 1 ? ACT(m, A, moe_send) : L.xin;
    if (m->moe_probs_on_input) { /* disp[pos[t]] = w[t] x[t]: the combine's backward with x as its gradient, its
                                    weights' gradient not computed */
        mt_moe_unpermute_bwd_args sp = {.dy = disp, .dw = NULL, .dout = xf, .y = NULL, .pos = L.pos, .w = L.topw,
                                        .N = N, .k = k, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_unpermute_bwd, &sp));
    } else {
        mt_moe_permute_args pa = {.out = disp, .x = xf, .pos = L.pos, .N = N, .k = k, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_permute, &pa));
    }
    if (ep > 1) MT_CHECK(mt_ep_dispatch(&m->par.ep, disp, ACT(m, A, moe_recv), L.xin));
    void *ye = ep > 1 ? ACT(m, A, moe_ye) : L.ysend;
    for (int le = 0; le < pl->E_r; le++) {
        size_t r0;
        const int M = (int)mt_ep_expert_rows(&m->par.ep, le, &r0);
        if (M == 0) continue;
        const int s = ms * pl->E_r + le;
        void *h = (char *)L.h + r0 * pl->efc_rows_r * a, *g = (char *)L.g + r0 * pl->Fe_r * a;
        mt_matmul_fwd_args f1 = {.out = h, .inp = (char *)L.xin + r0 * C * a, .weight = P(m, ix->efc_w, s),
                                 .bias = P(m, ix->efc_b, s), .M = M, .N = pl->efc_rows_r, .K = C};
        MT_CHECK(MT_BE_CALL(m->be, matmul_fwd, &f1));
        MT_CHECK(mt_model_mlp_act_fwd(m, g, h, M, pl->Fe_r));
        /* the replicated output bias once over tp (tp rank 0), as the row-parallel layer adds it */
        mt_matmul_fwd_args f2 = {.out = (char *)ye + r0 * C * a, .inp = g, .weight = P(m, ix->efcproj_w, s),
                                 .bias = tp->rank == 0 ? P(m, ix->efcproj_b, s) : NULL, .M = M, .N = C, .K = pl->Fe_r};
        MT_CHECK(MT_BE_CALL(m->be, matmul_fwd, &f2));
    }
    if (ep > 1) MT_CHECK(mt_ep_combine(&m->par.ep, ye, ACT(m, A, moe_recv), L.ysend));
    mt_moe_unpermute_args ua = {.out = ACT(m, A, dtmp), .y = L.ysend, .pos = L.pos,
                                .w = m->moe_probs_on_input ? NULL : L.topw, .N = N, .k = k, .C = C};
    MT_CHECK(MT_BE_CALL(m->be, moe_unpermute, &ua));
    if (pl->Fs) MT_CHECK(mt_moe_shared_forward(m, A, l, xf, ACT(m, A, dtmp))); /* partial over tp, as the combine */
    void *y = NULL;
    MT_CHECK(mt_tp_reduce(tp, ACT(m, A, dtmp), NULL, &y));
    mt_add_args ad = {.out = xo, .a = xm, .b = y, .n = (size_t)m->al.N_r * C};
    MT_CHECK(MT_BE_CALL(m->be, add, &ad));
out:
    return st;
}

mt_status mt_moe_backward(mt_model *m, const mt_acts *A, int l, const void *x2, void **dx) {
    mt_status st = MT_OK;
    mt_tp *tp = &m->par.tp;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int N = m->al.N, C = pl->C, E = pl->E, k = pl->top_k, ep = pl->ep;
    const size_t a = mt_dtype_bytes(m->act);
    const moe_layer L = layer_of(m, A, l);
    const int ms = mt_param_layer_slot(pl, l); /* the layer's slot in the MoE stacks */
    MT_CHECK(mt_ep_read_counts(&m->par.ep, L.counts));
    const void *dY = NULL;
    MT_CHECK(mt_tp_gather(tp, ACT(m, A, dresid), &dY));
    void *dys = ep > 1 ? ACT(m, A, moe_send) : ACT(m, A, moe_ye), *dye = ACT(m, A, moe_ye);
    if (m->moe_probs_on_input) { /* combined with weight 1: the dispatch of dY (the weights' gradient below) */
        mt_moe_permute_args pa = {.out = dys, .x = dY, .pos = L.pos, .N = N, .k = k, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_permute, &pa));
    } else {
        mt_moe_unpermute_bwd_args ub = {.dy = dys, .dw = ACT(m, A, moe_dw), .dout = dY, .y = L.ysend, .pos = L.pos,
                                        .w = L.topw, .N = N, .k = k, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_unpermute_bwd, &ub));
        MT_CHECK(mt_tp_allreduce_f32(tp, ACT(m, A, moe_dw), (size_t)N * k)); /* expert outputs are tp-partial */
    }
    if (pl->Fs) MT_CHECK(mt_moe_shared_backward_out(m, A, l, dY)); /* before dY's buffer takes x2 (SP) */
    if (ep > 1) MT_CHECK(mt_ep_dispatch(&m->par.ep, dys, ACT(m, A, moe_recv), dye));
    for (int le = 0; le < pl->E_r; le++) {
        size_t r0;
        const int M = (int)mt_ep_expert_rows(&m->par.ep, le, &r0);
        if (M == 0) continue;
        const int s = ms * pl->E_r + le;
        void *dyl = (char *)dye + r0 * C * a;
        void *dg = (char *)ACT(m, A, moe_dg) + r0 * pl->Fe_r * a, *dh = (char *)ACT(m, A, moe_dh) + r0 * pl->efc_rows_r * a;
        const void *h = (char *)L.h + r0 * pl->efc_rows_r * a, *g = (char *)L.g + r0 * pl->Fe_r * a;
        mt_matmul_bwd_args b2 = {.dinp = dg, .dweight = G(m, ix->efcproj_w, s), .dbias = G(m, ix->efcproj_b, s),
                                 .dout = dyl, .inp = g, .weight = P(m, ix->efcproj_w, s), .M = M, .N = C, .K = pl->Fe_r};
        MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &b2));
        MT_CHECK(mt_model_mlp_act_bwd(m, dh, dg, h, M, pl->Fe_r));
        /* the input gradient overwrites this expert's output-gradient rows (consumed above) */
        mt_matmul_bwd_args b1 = {.dinp = dyl, .dweight = G(m, ix->efc_w, s), .dbias = G(m, ix->efc_b, s), .dout = dh,
                                 .inp = (char *)L.xin + r0 * C * a, .weight = P(m, ix->efc_w, s), .M = M,
                                 .N = pl->efc_rows_r, .K = C};
        MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &b1));
    }
    const void *dxs = dye;
    if (ep > 1) {
        MT_CHECK(mt_ep_combine(&m->par.ep, dye, ACT(m, A, moe_recv), ACT(m, A, moe_send)));
        dxs = ACT(m, A, moe_send);
    }
    void *dln = ACT(m, A, dln);
    /* the dispatch's backward: dln[t] = dxs[pos[t]], times w[t] when the weight scaled the input */
    mt_moe_unpermute_args pb = {.out = dln, .y = dxs, .pos = L.pos, .w = m->moe_probs_on_input ? L.topw : NULL, .N = N,
                                .k = k, .C = C};
    MT_CHECK(MT_BE_CALL(m->be, moe_unpermute, &pb));
    const void *xf = NULL;
    MT_CHECK(mt_tp_gather(tp, x2, &xf));
    if (m->moe_probs_on_input) { /* dw[t] = <dxs[pos[t]], x[t]> (dxs tp-partial: summed over tp): the combine
                                    backward's weights' gradient alone */
        mt_moe_unpermute_bwd_args wb = {.dy = NULL, .dw = ACT(m, A, moe_dw), .dout = xf, .y = dxs, .pos = L.pos,
                                        .w = L.topw, .N = N, .k = k, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_unpermute_bwd, &wb));
        MT_CHECK(mt_tp_allreduce_f32(tp, ACT(m, A, moe_dw), (size_t)N * k));
    }
    /* the router: every tp rank computes the same gradient; its input part counts once (tp rank 0) */
    const float scale = (float)N * m->moe_dloss;
    mt_moe_route_bwd_args rb = {.dlogits = ACT(m, A, moe_dlogits), .logits = L.logits, .probs = L.probs,
                                .topi = L.topi, .auxcnt = L.auxcnt, .dw = ACT(m, A, moe_dw), .N = N, .E = E, .k = k,
                                .T = m->al.T, .pre_softmax = m->moe_pre_softmax, .score = m->moe_score,
                                .seq_aux = m->moe_seq_aux, .scale = m->moe_scale, .aux_scale = m->moe_aux_coeff * scale,
                                .z_scale = m->moe_z_coeff * scale};
    MT_CHECK(MT_BE_CALL(m->be, moe_route_bwd, &rb));
    mt_matmul_bwd_args rw = {.dinp = tp->rank == 0 ? dln : NULL, .dweight = G(m, ix->router_w, ms),
                             .dout = ACT(m, A, moe_dlogits), .inp = xf, .weight = P(m, ix->router_w, ms), .M = N,
                             .N = E, .K = C, .accumulate_dinp = 1};
    MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &rw));
    if (pl->Fs) MT_CHECK(mt_moe_shared_backward_in(m, A, l, xf, dln));
    MT_CHECK(mt_tp_reduce(tp, dln, NULL, dx));
out:
    return st;
}
