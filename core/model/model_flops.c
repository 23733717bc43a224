/* model_flops.c — the model's training FLOPs from its layout (pure): Megatron's formula
 * (Narayanan et al. 2021, appendix: 72 B s l h^2 (1 + s/6h + V/12hl) for GPT) generalised to GQA,
 * SwiGLU and MoE by counting every GEMM's weights. The trainer's MFU / HFU and `mtrain plan`
 * both call it: the per-token pieces (mt_model_fwd_flops_per_token) are the one count; the
 * per-sequence and per-iteration totals, with or without recomputation, are sums of them.
 * Recomputation reruns forward work only, never the output layer's: full reruns each
 * recomputed layer's forward (Narayanan et al. 2021: 96 B s l h^2 (1 + s/6h + V/16lh), the
 * logits still 3 passes); selective reruns the attention core's forward, the QK^T and
 * attention-over-V products (Korthikanti et al. 2022, appendix A: the s^2 terms are the
 * recomputed FLOPs; 4 B s^2 h per layer). */
#include "core/model/model_layout.h"

void mt_model_fwd_flops_per_token(const mt_param_layout *pl, int moe_experts, int moe_top_k,
                                  mt_model_fwd_flops *f) {
    const double T = pl->T, C = pl->C;
    /* weights touched per token by matmuls: qkv, proj (attention), fc, fcproj (MLP) */
    const double attn_lin = 2.0 * ((double)pl->qkv_rows * C + C * pl->H * pl->D);
    const double mlp_one = 2.0 * ((double)pl->fc_rows * C + C * pl->F);
    /* a MoE layer runs top_k experts' MLPs and the router (C x E) */
    const double mlp = moe_experts > 0 ? moe_top_k * mlp_one + 2.0 * C * moe_experts : mlp_one;
    /* attention scores and weighted sum, counted over the full T x T square as Megatron does */
    f->attn_core = 2.0 * 2.0 * T * pl->H * pl->D;
    f->layer = attn_lin + f->attn_core + mlp;
    f->head = 2.0 * C * pl->Vp;
}

double mt_model_recompute_fwd_flops(const mt_model_fwd_flops *f, mt_recompute rc) {
    if (rc == MT_RECOMPUTE_FULL) return f->layer;
    if (rc == MT_RECOMPUTE_SELECTIVE) return f->attn_core;
    return 0.0;
}

double mt_model_flops_per_seq(const mt_param_layout *pl, mt_recompute rc) {
    mt_model_fwd_flops f;
    mt_model_fwd_flops_per_token(pl, pl->moe ? pl->E : 0, pl->moe ? pl->top_k : 1, &f);
    const double L = pl->L_global; /* the whole model, on any stage */
    return pl->T * (3.0 * (L * f.layer + f.head) + L * mt_model_recompute_fwd_flops(&f, rc));
}

void mt_model_flops_per_iter(const mt_param_layout *pl, double n_seqs, double *model_flops, double *hardware_flops) {
    const double f0 = mt_model_flops_per_seq(pl, MT_RECOMPUTE_NONE);
    double hw = f0;
    if (pl->recompute > 0) { /* full: the first pl->recompute of each chunk's Lc layers rerun their forward */
        const double frac = pl->Lc > 0 ? (double)pl->recompute / pl->Lc : 0.0;
        hw = f0 + frac * (mt_model_flops_per_seq(pl, MT_RECOMPUTE_FULL) - f0);
    } else if (pl->recompute_attn) {
        hw = mt_model_flops_per_seq(pl, MT_RECOMPUTE_SELECTIVE);
    }
    if (model_flops) *model_flops = f0 * n_seqs;
    if (hardware_flops) *hardware_flops = hw * n_seqs;
}
