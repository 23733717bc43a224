/* moe_rule.h — the MoE router's per-token rules, shared by the CPU backend and the CUDA kernels
 * (static inline, host code in C and device code under nvcc) so both route alike: the score
 * function, the (group-limited, expert-biased) top-k choice, the routing weights and their
 * backward, as Megatron-Core's topk_routing_with_score_function / group_limited_topk /
 * compute_routing_scores_for_aux_loss (megatron/core/transformer/moe/moe_utils.py) compute them.
 * Rule: every choice is a strict ">" scan, so ties go to the lower index (expert or group). */
#ifndef MT_MOE_RULE_H
#define MT_MOE_RULE_H

#include <math.h>
#include <stdint.h>

#include "core/topk.h"

#define MT_MOE_MAX_K 64      /* model.moe.top_k (recipe validation) */
#define MT_MOE_MAX_GROUPS 64 /* model.moe.num_groups (recipe validation) */
#define MT_MOE_SIGMOID_EPS 1e-20f /* Megatron's scores / (sum + 1e-20) */

enum { MT_MOE_SCORE_SOFTMAX = 0, MT_MOE_SCORE_SIGMOID = 1 };

static inline MT_HOST_DEVICE float mt_moe_sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

/* The weights' factor: 0 means none, as Megatron's `if scaling_factor:` (None or 0 scales nothing). */
static inline MT_HOST_DEVICE float mt_moe_scale(float s) { return s != 0.0f ? s : 1.0f; }

/* The value the top-k choice ranks expert e by: the router score p[e] (softmax probability or
 * sigmoid), as its log when use_log (softmax without pre_softmax: Megatron ranks the logits, and
 * log p = logit - logsumexp ranks and sums alike within a row), divided by div (the aux loss's
 * normalised sigmoid), plus bias[e] (the expert bias; NULL: none). */
static inline MT_HOST_DEVICE float mt_moe_rank_value(const float *p, const float *bias, int e, int use_log, float div) {
    float v = use_log ? logf(p[e]) : (div != 1.0f ? p[e] / div : p[e]);
    return bias ? v + bias[e] : v;
}

/* Top k experts of one token row by mt_moe_rank_value, descending, into idx[0 .. k). G > 1 and
 * Kg > 0: group-limited (Megatron's group_limited_topk): the E experts form G groups of E/G
 * consecutive experts; a group's score is the sum of its top (k / Kg) values; the Kg best groups
 * are kept and the k experts chosen among their experts only. */
static inline MT_HOST_DEVICE void mt_moe_select(const float *p, const float *bias, int E, int k, int G, int Kg,
                                                int use_log, float div, int32_t *idx) {
    int keep[MT_MOE_MAX_GROUPS];
    const int grouped = G > 1 && Kg > 0;
    const int gsz = grouped ? E / G : E;
    if (grouped) {
        float gs[MT_MOE_MAX_GROUPS];
        const int m = k / Kg;
        for (int g = 0; g < G; g++) { /* sum of the group's top m values (repeated arg-max) */
            double s = 0;
            for (int r = 0; r < m; r++) {
                int best = -1;
                float bv = 0;
                for (int e = g * gsz; e < (g + 1) * gsz; e++) {
                    int used = 0;
                    for (int q = 0; q < r; q++) used |= idx[q] == e;
                    const float v = mt_moe_rank_value(p, bias, e, use_log, div);
                    if (!used && (best < 0 || v > bv)) best = e, bv = v;
                }
                idx[r] = best; /* idx as scratch: m <= k */
                s += bv;
            }
            gs[g] = (float)s;
            keep[g] = 0;
        }
        for (int r = 0; r < Kg; r++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best] = 1;
        }
    }
    for (int j = 0; j < k; j++) {
        int best = -1;
        float bv = 0;
        for (int e = 0; e < E; e++) {
            if (grouped && !keep[e / gsz]) continue;
            int used = 0;
            for (int q = 0; q < j; q++) used |= idx[q] == e;
            const float v = mt_moe_rank_value(p, bias, e, use_log, div);
            if (!used && (best < 0 || v > bv)) best = e, bv = v;
        }
        idx[j] = best;
    }
}

/* The routing weights of the chosen experts (before the capacity rule), times scale:
 *   softmax, pre_softmax: p[idx[j]];  softmax: the softmax over the chosen logits z (renormalised);
 *   sigmoid: s[idx[j]] / (sum_j s[idx[j]] + 1e-20) when k > 1, s itself when k = 1.
 * z: the logits row (softmax without pre_softmax only; may be NULL otherwise). */
static inline MT_HOST_DEVICE void mt_moe_weights(const float *p, const float *z, const int32_t *idx, int k, int score,
                                                 int pre_softmax, float scale, float *w) {
    if (score == MT_MOE_SCORE_SIGMOID) {
        float s = 0;
        for (int j = 0; j < k; j++) s += p[idx[j]];
        for (int j = 0; j < k; j++) w[j] = k > 1 ? p[idx[j]] / (s + MT_MOE_SIGMOID_EPS) : p[idx[j]];
    } else if (pre_softmax) {
        for (int j = 0; j < k; j++) w[j] = p[idx[j]];
    } else {
        float mx = z[idx[0]];
        for (int j = 1; j < k; j++) mx = z[idx[j]] > mx ? z[idx[j]] : mx;
        double s = 0;
        for (int j = 0; j < k; j++) s += exp((double)z[idx[j]] - mx);
        for (int j = 0; j < k; j++) w[j] = (float)(exp((double)z[idx[j]] - mx) / s);
    }
    scale = mt_moe_scale(scale);
    if (scale != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= scale;
}

/* Backward of the sigmoid weights: given dw (the gradient of the scaled weights), ds[j] = dL/ds of
 * the chosen expert j's sigmoid score: scale * (dw_j - sum_i dw_i w0_i) / (S + 1e-20), w0 the
 * unscaled weights, S the chosen scores' sum (k = 1: scale * dw_0). */
static inline MT_HOST_DEVICE void mt_moe_sigmoid_weights_bwd(const float *p, const int32_t *idx, int k, float scale,
                                                             const float *dw, double *ds) {
    scale = mt_moe_scale(scale);
    if (k == 1) {
        ds[0] = (double)scale * dw[0];
        return;
    }
    double s = 0, dot = 0;
    for (int j = 0; j < k; j++) s += p[idx[j]];
    const double D = s + MT_MOE_SIGMOID_EPS;
    for (int j = 0; j < k; j++) dot += (double)dw[j] * p[idx[j]] / D;
    for (int j = 0; j < k; j++) ds[j] = scale * (dw[j] - dot) / D;
}

/* The expert bias's step for one layer (Megatron's get_updated_expert_bias): with count[e] the
 * kept assignments of expert e over the global batch, bias[e] += rate * sign(mean - count[e]),
 * mean = sum_e count / E, in fp32 (counts are integers below 2^24: the sum is exact in any order). */
static inline MT_HOST_DEVICE void mt_moe_bias_step(const float *count, float *bias, int E, float rate) {
    float sum = 0;
    for (int e = 0; e < E; e++) sum += count[e];
    const float mean = sum / (float)E;
    for (int e = 0; e < E; e++) {
        const float off = mean - count[e];
        bias[e] += (off > 0 ? 1.0f : off < 0 ? -1.0f : 0.0f) * rate;
    }
}

#endif
