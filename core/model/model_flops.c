/* model_flops.c — the model's training FLOPs from its layout (pure): Megatron's formula
 * (Narayanan et al. 2021, appendix: 72 B s l h^2 (1 + s/6h + V/12hl) for GPT) generalised to GQA,
 * SwiGLU and MoE by counting every GEMM's weights. The trainer's MFU and `mtrain plan` both call
 * it: the per-token pieces (mt_model_fwd_flops_per_token) are the one count; the trainer's
 * per-sequence total and the planner's recompute variants are sums of them. */
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

double mt_model_flops_per_seq(const mt_param_layout *pl, int recompute_full) {
    mt_model_fwd_flops f;
    mt_model_fwd_flops_per_token(pl, pl->moe ? pl->E : 0, pl->moe ? pl->top_k : 1, &f);
    const double fwd = pl->T * (pl->L_global * f.layer + f.head); /* the whole model, on any stage */
    return fwd * (recompute_full ? 4.0 : 3.0);
}

void mt_model_flops_per_iter(const mt_param_layout *pl, double n_seqs, double *model_flops, double *hardware_flops) {
    const double f0 = mt_model_flops_per_seq(pl, 0), f1 = mt_model_flops_per_seq(pl, 1);
    /* full recompute reruns the forward of the recomputed share of each model chunk's layers;
     * the head (output layer, loss) is never recomputed, so this slightly overstates it */
    const double frac = pl->Lc > 0 ? (double)pl->recompute / pl->Lc : 0.0;
    if (model_flops) *model_flops = f0 * n_seqs;
    if (hardware_flops) *hardware_flops = (f0 + frac * (f1 - f0)) * n_seqs;
}
