/* op_check.c — the backend ops' shared argument checks (see op_check.h). */
#include "core/op_check.h"

#include <math.h>

#include "core/rope_scale.h"

mt_status mt_op_check_rope(const char *be, const mt_rope_args *a, int *empty) {
    *empty = 1;
    if (a->B < 0 || a->T < 0 || a->n_heads < 0 || a->D <= 0 || a->D % 2 != 0 || a->D / 2 > MT_ROPE_MAX_HALF)
        return mt_errorf(MT_ERR_CONFIG, "%s rope: bad shape B=%d T=%d heads=%d D=%d (D must be even and <= %d)", be,
                         a->B, a->T, a->n_heads, a->D, 2 * MT_ROPE_MAX_HALF);
    if ((long)a->n_heads * a->D > a->row_stride)
        return mt_errorf(MT_ERR_CONFIG, "%s rope: %d heads of %d exceed the row stride %d", be, a->n_heads, a->D,
                         a->row_stride);
    if (a->pos_offset < 0 || !(a->theta > 0.0f))
        return mt_errorf(MT_ERR_CONFIG, "%s rope: pos_offset %d / theta %g invalid", be, a->pos_offset,
                         (double)a->theta);
    if (a->rot_dim < 0 || a->rot_dim > a->D || a->rot_dim % 2)
        return mt_errorf(MT_ERR_CONFIG, "%s rope: %d rotary channels of a head of %d (even, at most the head)", be,
                         a->rot_dim, a->D);
    if ((long)a->B * a->T == 0 || a->n_heads == 0) return MT_OK;
    *empty = 0;
    if (!a->x) return mt_errorf(MT_ERR_INTERNAL, "%s rope: NULL tensor", be);
    return MT_OK;
}

/* Megatron's _yarn_find_correction_dim (yarn_rotary_pos_embedding.py) */
static double yarn_correction_dim(double rot, int dim, double base, int max_pos) {
    return dim * log(max_pos / (rot * 2.0 * M_PI)) / (2.0 * log(base));
}

/* YaRN's blend of the frequencies (Megatron's YarnRotaryEmbedding) */
static void yarn_inv_freq(const mt_rope_args *a, int R, double *inv_freq) {
    const int half = R / 2;
    /* _yarn_find_correction_range (rounded to int, clamped to [0, R - 1]) and _yarn_linear_ramp_mask */
    double lo = floor(yarn_correction_dim(a->yarn_beta_fast, R, a->theta, a->yarn_orig_max));
    double hi = ceil(yarn_correction_dim(a->yarn_beta_slow, R, a->theta, a->yarn_orig_max));
    if (lo < 0) lo = 0;
    if (hi > R - 1) hi = R - 1;
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < half; i++) {
        double ramp = (i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        const double mask = 1.0 - ramp; /* 1: keep the extrapolated frequency, 0: the interpolated one */
        inv_freq[i] = inv_freq[i] / a->yarn_factor * (1.0 - mask) + inv_freq[i] * mask;
    }
}

void mt_rope_inv_freq(const mt_rope_args *a, int R, double *inv_freq) {
    const int half = R / 2;
    for (int i = 0; i < half; i++) inv_freq[i] = pow((double)a->theta, -2.0 * i / R);
    if (a->yarn_factor > 1.0f) yarn_inv_freq(a, R, inv_freq);
    for (int i = 0; i < half; i++)
        inv_freq[i] = mt_rope_scale_freq(inv_freq[i], a->llama3_factor, a->llama3_low, a->llama3_high,
                                         a->llama3_orig_max, a->pos_interp);
}

mt_status mt_op_check_attention(const char *be, const char *op, int B, int T, int H, int KV, int D) {
    if (B < 0 || T < 0 || H <= 0 || KV <= 0 || D <= 0)
        return mt_errorf(MT_ERR_CONFIG, "%s %s: bad shape B=%d T=%d H=%d KV=%d D=%d", be, op, B, T, H, KV, D);
    if (H % KV != 0)
        return mt_errorf(MT_ERR_CONFIG,
                         "%s %s: %d query heads are not a multiple of %d kv heads (grouped-query attention "
                         "needs H %% KV == 0)",
                         be, op, H, KV);
    return MT_OK;
}

mt_status mt_op_check_embedding(const char *be, const char *op, int B, int T, int C, int n_vocab, int pos_offset,
                                const void *a, const void *b, const void *c) {
    if (B < 0 || T < 0 || C <= 0 || n_vocab < 0 || pos_offset < 0)
        return mt_errorf(MT_ERR_CONFIG, "%s %s: bad shape B=%d T=%d C=%d n_vocab=%d pos_offset=%d", be, op, B, T, C,
                         n_vocab, pos_offset);
    if ((long)B * T > 0 && (!a || !b || !c)) return mt_errorf(MT_ERR_INTERNAL, "%s %s: NULL tensor", be, op);
    return MT_OK;
}

mt_status mt_op_check_swiglu(const char *be, const char *op, int N, int F, int all_set) {
    if (N < 0 || F < 0) return mt_errorf(MT_ERR_CONFIG, "%s %s: negative shape N=%d F=%d", be, op, N, F);
    if ((size_t)N * F > 0 && !all_set)
        return mt_errorf(MT_ERR_INTERNAL, "%s %s: NULL tensor (N=%d F=%d)", be, op, N, F);
    return MT_OK;
}

mt_status mt_op_check_xent_vp(const char *be, const char *op, const mt_xent_vp_args *a) {
    if (a->N < 0 || a->V <= 0 || a->n_cols < 0 || a->vocab_start < 0)
        return mt_errorf(MT_ERR_CONFIG, "%s %s: bad shape N=%d V=%d vocab_start=%d n_cols=%d", be, op, a->N, a->V,
                         a->vocab_start, a->n_cols);
    if (a->N > 0 && (!a->stats || !a->targets || (a->n_cols > 0 && !a->logits)))
        return mt_errorf(MT_ERR_INTERNAL, "%s %s: NULL tensor", be, op);
    return MT_OK;
}

int mt_xent_vp_valid_cols(const mt_xent_vp_args *a) {
    long v = (long)a->V - a->vocab_start;
    if (v < 0) v = 0;
    return v < a->n_cols ? (int)v : a->n_cols;
}

mt_status mt_op_check_adamw(const char *be, const mt_adamw_args *a) {
    if (a->n == 0) return MT_OK;
    if (!a->master || !a->grad || !a->m || !a->v)
        return mt_errorf(MT_ERR_INTERNAL, "%s adamw: NULL tensor (n=%zu)", be, a->n);
    if (!(a->bias_correction1 > 0.0f) || !(a->bias_correction2 > 0.0f))
        return mt_errorf(MT_ERR_CONFIG, "%s adamw: bias corrections %g, %g must be > 0 (1 - beta^t with t >= 1)", be,
                         (double)a->bias_correction1, (double)a->bias_correction2);
    return MT_OK;
}
