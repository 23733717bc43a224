/* model_moe_shared.c — the MoE layer's shared experts on one rank (Megatron-Core's SharedExpertMLP,
 * megatron/core/transformer/moe/shared_experts.py), beside the routed experts of model_moe.c:
 *   h = xf Ws_fc^T;  g = act(h) (the experts' activation);  y = g Ws_fcproj^T;  no biases;
 *   out += y, or with the gate (Qwen2-MoE's shared_expert_gate) out += sigmoid(xf . w_gate) * y.
 * xf is the norm2 output of all N tokens (gathered under SP); Ws_fc is split by rows and Ws_fcproj by
 * columns over tp, as the dense MLP's (column- then row-parallel), so y is a partial sum over tp, added
 * to the routed experts' partial combine before the layer's one tp reduction (model_moe.c). The gate is
 * a per-token scalar computed by every tp rank from the same xf and w_gate, so scaling each rank's
 * partial y by it scales the sum. Backward: dy = gate * dY; the gate logit's gradient gate (1 - gate)
 * <dY, y> is a sum over tp of the ranks' partial dot products (one allreduce of N floats, as the
 * routed combine weights' gradient); w_gate's gradient is then the same on every rank (replicated, as
 * the router's), its input gradient counted once (tp rank 0); the fc's input gradient is partial over
 * tp and joins the routed experts' in dln before the one reduction.
 * Activations: per layer h, g (and with the gate y and the gate values, which its backward reads); one
 * layer's scratch for y without the gate and for the gradients. */
#include "train/model_internal.h"

typedef struct {
    void *h, *g, *y, *gate;
} shared_acts;

static shared_acts acts_of(const mt_model *m, const mt_acts *A, int l) {
    const mt_param_layout *pl = &m->pl;
    const size_t N = (size_t)m->al.N, a = mt_dtype_bytes(m->act);
    const int ls = A->l0 + pl->act_slot[l], gated = pl->spec.moe_shared_gate; /* the MoE arrays' slice */
    shared_acts s;
    s.h = ACT_L(m, A, moe_sh, ls, N * pl->fcs_rows_r, a);
    s.g = ACT_L(m, A, moe_sg, ls, N * pl->Fs_r, a);
    s.y = gated ? ACT_L(m, A, moe_sy, ls, N * pl->C, a) : ACT(m, A, moe_sy);
    s.gate = gated ? ACT_L(m, A, moe_sgate, ls, N, 4) : NULL;
    return s;
}

mt_status mt_moe_shared_forward(mt_model *m, const mt_acts *A, int l, const void *xf, void *out) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int ms = mt_param_layer_slot(pl, l); /* the layer's slot in the MoE stacks */
    const int N = m->al.N, C = pl->C;
    const shared_acts s = acts_of(m, A, l);
    mt_matmul_fwd_args f1 = {.out = s.h, .inp = xf, .weight = P(m, ix->sfc_w, ms), .M = N, .N = pl->fcs_rows_r, .K = C};
    MT_CHECK(MT_BE_CALL(m->be, matmul_fwd, &f1));
    MT_CHECK(mt_model_mlp_act_fwd(m, s.g, s.h, N, pl->Fs_r));
    mt_matmul_fwd_args f2 = {.out = s.y, .inp = s.g, .weight = P(m, ix->sfcproj_w, ms), .M = N, .N = C, .K = pl->Fs_r};
    MT_CHECK(MT_BE_CALL(m->be, matmul_fwd, &f2));
    if (pl->spec.moe_shared_gate) {
        mt_moe_gate_fwd_args ga = {.out = out, .gate = s.gate, .y = s.y, .x = xf, .w = P(m, ix->sgate_w, ms), .N = N,
                                   .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_gate_fwd, &ga));
    } else {
        mt_add_args ad = {.out = out, .a = out, .b = s.y, .n = (size_t)N * C};
        MT_CHECK(MT_BE_CALL(m->be, add, &ad));
    }
out:
    return st;
}

mt_status mt_moe_shared_backward_out(mt_model *m, const mt_acts *A, int l, const void *dY) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int ms = mt_param_layer_slot(pl, l); /* the layer's slot in the MoE stacks */
    const int N = m->al.N, C = pl->C;
    const shared_acts s = acts_of(m, A, l);
    const void *dy = dY;
    if (pl->spec.moe_shared_gate) { /* dy = gate * dY into the free (N, C) scratch; the logit's gradient */
        mt_moe_gate_bwd_args gb = {.dy = ACT(m, A, dtmp), .dz = ACT(m, A, moe_sdz), .dout = dY, .y = s.y,
                                   .gate = s.gate, .N = N, .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_gate_bwd, &gb));
        MT_CHECK(mt_tp_allreduce_f32(&m->par.tp, ACT(m, A, moe_sdz), (size_t)N)); /* y is tp-partial */
        dy = ACT(m, A, dtmp);
    }
    void *dg = ACT(m, A, moe_sdg);
    mt_matmul_bwd_args b2 = {.dinp = dg, .dweight = G(m, ix->sfcproj_w, ms), .dout = dy, .inp = s.g,
                             .weight = P(m, ix->sfcproj_w, ms), .M = N, .N = C, .K = pl->Fs_r};
    MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &b2));
    MT_CHECK(mt_model_mlp_act_bwd(m, ACT(m, A, moe_sdh), dg, s.h, N, pl->Fs_r));
out:
    return st;
}

mt_status mt_moe_shared_backward_in(mt_model *m, const mt_acts *A, int l, const void *xf, void *dln) {
    mt_status st = MT_OK;
    const mt_param_layout *pl = &m->pl;
    const mt_param_index *ix = &pl->idx;
    const int ms = mt_param_layer_slot(pl, l); /* the layer's slot in the MoE stacks */
    const int N = m->al.N, C = pl->C;
    mt_matmul_bwd_args b1 = {.dinp = dln, .dweight = G(m, ix->sfc_w, ms), .dout = ACT(m, A, moe_sdh), .inp = xf,
                             .weight = P(m, ix->sfc_w, ms), .M = N, .N = pl->fcs_rows_r, .K = C, .accumulate_dinp = 1};
    MT_CHECK(MT_BE_CALL(m->be, matmul_bwd, &b1));
    if (pl->spec.moe_shared_gate) { /* the gate's input gradient once over tp, as the router's */
        mt_moe_gate_logit_bwd_args lb = {.dw = G(m, ix->sgate_w, ms), .dx = m->par.tp.rank == 0 ? dln : NULL,
                                         .dz = ACT(m, A, moe_sdz), .x = xf, .w = P(m, ix->sgate_w, ms), .N = N,
                                         .C = C};
        MT_CHECK(MT_BE_CALL(m->be, moe_gate_logit_bwd, &lb));
    }
out:
    return st;
}
