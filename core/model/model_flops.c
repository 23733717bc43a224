/* model_flops.c — the model's training FLOPs from its layout (pure): Megatron's formula
 * (Narayanan et al. 2021, appendix: 72 B s l h^2 (1 + s/6h + V/12hl) for GPT) generalised to GQA
 * and SwiGLU by counting every GEMM's weights. The trainer's MFU and `mtrain plan` both call it. */
#include "core/model/model_layout.h"

double mt_model_flops_per_seq(const mt_param_layout *pl, int recompute_full) {
    const double T = pl->T, C = pl->C, L = pl->L_global; /* the whole model, on any stage */
    /* weights touched per token by matmuls: qkv, proj, fc, fcproj per layer + output layer */
    const double per_layer = (double)pl->qkv_rows * C + C * pl->H * pl->D + (double)pl->fc_rows * C + C * pl->F;
    const double matmul = 2.0 * T * (L * per_layer + (double)pl->Vp * C);
    /* attention scores and weighted sum, counted over the full T x T square as Megatron does */
    const double attn = L * 2.0 * 2.0 * T * T * pl->H * pl->D;
    const double fwd = matmul + attn;
    return fwd * (recompute_full ? 4.0 : 3.0);
}
