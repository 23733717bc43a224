/* test_moe_router.c — the router rules Megatron-Core's TopKRouter has beyond softmax top-k (core/moe_rule.h,
 * the CPU op moe_route / moe_route_bwd) against a double-precision reference written here from
 * Megatron's moe_utils.py (topk_routing_with_score_function, group_limited_topk,
 * compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func, the router's seq_aux_loss):
 *   1. the choice: sigmoid scores plus the expert bias, group-limited (the groups with the largest sum of
 *      their top k / group_topk values, then the top k among their experts), softmax ranked by the logits;
 *   2. the weights: the chosen sigmoids over their sum (+1e-20; k = 1: the sigmoid), times the scaling
 *      factor, and the softmax ones scaled;
 *   3. the load-balancing loss's own routing (plain top k of the aux scores: no bias, no groups), per
 *      micro-batch and per sequence (seq_aux_loss: the mean over sequences of each one's loss, T tokens);
 *   4. the backward of every path (sigmoid k > 1 and k = 1, softmax renormalised / pre_softmax, with scale,
 *      aux_loss and seq_aux_loss, the z-loss) against central differences of the reference objective
 *      sum dw * w + a * aux + b * z in double, the routing held fixed (choices are piecewise constant);
 *   5. the expert bias's update rule (train/moe_bias.c's formula, Megatron's get_updated_expert_bias).
 * Tolerances: the op computes in fp32 against double: weights and losses 1e-5 relative (+1e-7 absolute);
 * gradients: central differences with h = 1e-5 in double have truncation error ~h^2 * f''' ~ 1e-10 and the
 * op's fp32 rounding of O(1) sums is ~1e-7, so 1e-4 relative + 1e-6 absolute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/moe_rule.h"
#include "core/rng.h"
#include "test/test.h"

enum { N = 16, T = 8, E = 8, MAXK = 4 };

typedef struct {
    int score, pre, k, groups, gtopk, seq_aux, use_bias;
    float scale;
    const char *name;
} router_case;

/* the k largest of v[0 .. n) among allowed (NULL: all), descending, ties to the lower index */
static void ref_topk(const double *v, const int *allowed, int n, int k, int *idx) {
    int used[E] = {0};
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int e = 0; e < n; e++)
            if (!used[e] && (!allowed || allowed[e]) && (b < 0 || v[e] > v[b])) b = e;
        used[b] = 1;
        idx[j] = b;
    }
}

/* reference choice of token row z (group-limited as Megatron's group_limited_topk) */
static void ref_choice(const router_case *rc, const float *z, const float *bias, int *idx) {
    double v[E];
    for (int e = 0; e < E; e++) {
        if (rc->score == MT_MOE_SCORE_SIGMOID) v[e] = 1.0 / (1.0 + exp(-(double)z[e])) + (bias ? bias[e] : 0.0);
        else if (rc->pre) { /* softmax probabilities */
            double s = 0;
            for (int f = 0; f < E; f++) s += exp((double)z[f]);
            v[e] = exp((double)z[e]) / s;
        } else v[e] = z[e]; /* Megatron ranks the logits */
    }
    if (rc->groups <= 1) {
        ref_topk(v, NULL, E, rc->k, idx);
        return;
    }
    const int gs = E / rc->groups, m = rc->k / rc->gtopk;
    double gscore[E];
    for (int g = 0; g < rc->groups; g++) {
        int top[E];
        ref_topk(v + g * gs, NULL, gs, m, top);
        gscore[g] = 0;
        for (int j = 0; j < m; j++) gscore[g] += v[g * gs + top[j]];
    }
    int gsel[E], allowed[E] = {0};
    ref_topk(gscore, NULL, rc->groups, rc->gtopk, gsel);
    for (int j = 0; j < rc->gtopk; j++)
        for (int e = gsel[j] * gs; e < (gsel[j] + 1) * gs; e++) allowed[e] = 1;
    ref_topk(v, allowed, E, rc->k, idx);
}

/* the reference objective J(z) = sum dw * w + a * aux + b * zloss with the choices (topi) and the aux
 * routing counts (cnt, per sequence or per micro-batch) held fixed */
static double objective(const router_case *rc, const double *z, const int *topi, const int *cnt, const double *dw,
                        double a, double b, double *aux_out, double *zl_out) {
    const int k = rc->k, n_seq = N / T;
    double J = 0, zl = 0, aux = 0, psum[N / T][E];
    memset(psum, 0, sizeof psum);
    for (int t = 0; t < N; t++) {
        const double *zt = z + t * E;
        double mx = zt[0], s = 0, p[E], q[E], S = 0;
        for (int e = 1; e < E; e++) mx = fmax(mx, zt[e]);
        for (int e = 0; e < E; e++) s += exp(zt[e] - mx);
        zl += (mx + log(s)) * (mx + log(s));
        for (int e = 0; e < E; e++) {
            p[e] = rc->score == MT_MOE_SCORE_SIGMOID ? 1.0 / (1.0 + exp(-zt[e])) : exp(zt[e] - mx) / s;
            S += p[e];
        }
        for (int e = 0; e < E; e++) q[e] = rc->score == MT_MOE_SCORE_SIGMOID ? p[e] / (S + 1e-20) : p[e];
        for (int e = 0; e < E; e++) psum[rc->seq_aux ? t / T : 0][e] += q[e];
        const int *it = topi + t * k;
        double w[MAXK], ws = 0;
        if (rc->score == MT_MOE_SCORE_SIGMOID) {
            for (int j = 0; j < k; j++) ws += p[it[j]];
            for (int j = 0; j < k; j++) w[j] = k > 1 ? p[it[j]] / (ws + 1e-20) : p[it[j]];
        } else if (rc->pre) {
            for (int j = 0; j < k; j++) w[j] = p[it[j]];
        } else {
            for (int j = 0; j < k; j++) ws += exp(zt[it[j]]);
            for (int j = 0; j < k; j++) w[j] = exp(zt[it[j]]) / ws;
        }
        for (int j = 0; j < k; j++) J += dw[t * k + j] * rc->scale * w[j];
    }
    if (rc->seq_aux) {
        for (int sq = 0; sq < n_seq; sq++) {
            double sb = 0;
            for (int e = 0; e < E; e++) sb += psum[sq][e] * cnt[sq * E + e];
            aux += sb * E / ((double)T * T * k) / n_seq;
        }
    } else {
        for (int e = 0; e < E; e++) aux += psum[0][e] * cnt[e];
        aux *= E / ((double)N * N * k);
    }
    zl /= N;
    if (aux_out) *aux_out = aux;
    if (zl_out) *zl_out = zl;
    return J + a * aux + b * zl;
}

static void check_case(mt_backend *be, const router_case *rc, int seed) {
    const int k = rc->k, n_seq = N / T;
    float z[N * E], probs[N * E], topw[N * MAXK], stats[MT_MOE_STATS + 2 * E] = {0}, dz[N * E], dw[N * MAXK];
    float bias[E], bias_cnt[E] = {0};
    int32_t topi[N * MAXK], pos[N * MAXK], counts[2 * E], auxcnt[N / T * E];
    for (int i = 0; i < N * E; i++) z[i] = (float)(1.5 * mt_rng_normal(11, (uint64_t)seed, (uint64_t)i));
    for (int e = 0; e < E; e++) bias[e] = (float)(0.3 * mt_rng_normal(12, (uint64_t)seed, (uint64_t)e));
    mt_moe_route_args a = {.logits = z, .probs = probs, .topi = topi, .topw = topw, .pos = pos, .counts = counts,
                           .auxcnt = auxcnt, .stats = stats, .bias = rc->use_bias ? bias : NULL, .bias_cnt = bias_cnt,
                           .N = N, .E = E, .k = k, .T = T, .pre_softmax = rc->pre, .score = rc->score,
                           .n_groups = rc->groups, .group_topk = rc->gtopk, .seq_aux = rc->seq_aux, .scale = rc->scale};
    CHECK(be->i->moe_route(be, &a) == MT_OK);
    /* 1. the choice, 2. the weights */
    int ref_topi[N * MAXK], ref_cnt[N / T * E], bias_moved = 0;
    memset(ref_cnt, 0, sizeof ref_cnt);
    for (int t = 0; t < N; t++) {
        int plain[MAXK];
        ref_choice(rc, z + t * E, rc->use_bias ? bias : NULL, ref_topi + t * k);
        const router_case aux_rc = {.score = rc->score, .pre = 1, .k = k}; /* aux: plain top k of the scores */
        ref_choice(&aux_rc, z + t * E, NULL, plain);
        for (int j = 0; j < k; j++) ref_cnt[(rc->seq_aux ? t / T : 0) * E + plain[j]]++;
        for (int j = 0; j < k; j++) {
            CHECKF(topi[t * k + j] == ref_topi[t * k + j], "%s token %d choice %d: %d, reference %d", rc->name, t, j,
                   topi[t * k + j], ref_topi[t * k + j]);
            bias_moved |= plain[j] != ref_topi[t * k + j];
        }
        if (rc->groups > 1) { /* every choice lies in the kept groups: at most gtopk distinct groups */
            int seen[E] = {0}, n_g = 0;
            for (int j = 0; j < k; j++) n_g += !seen[topi[t * k + j] / (E / rc->groups)]++;
            CHECK(n_g <= rc->gtopk);
        }
    }
    for (int i = 0; i < (rc->seq_aux ? n_seq : 1) * E; i++)
        CHECKF(auxcnt[i] == ref_cnt[i], "%s aux count %d: %d, reference %d", rc->name, i, auxcnt[i], ref_cnt[i]);
    if (rc->use_bias || rc->groups > 1) CHECKF(bias_moved, "%s: the bias / groups changed no choice", rc->name);
    for (int e = 0; e < E; e++) CHECK(bias_cnt[e] == (float)counts[e]);
    double zdbl[N * E], c[N * MAXK];
    for (int i = 0; i < N * E; i++) zdbl[i] = z[i];
    for (int i = 0; i < N * k; i++) c[i] = mt_rng_normal(13, (uint64_t)seed, (uint64_t)i), dw[i] = (float)c[i];
    /* reference weights: the objective's per-choice derivative wrt dw is scale * w */
    for (int i = 0; i < N * k; i++) {
        double e1[N * MAXK] = {0};
        e1[i] = 1;
        const double w_ref = objective(rc, zdbl, topi, auxcnt, e1, 0, 0, NULL, NULL);
        CHECK_NEAR(topw[i], w_ref, 1e-7, 1e-5);
    }
    /* 3. the losses */
    double aux, zl;
    (void)objective(rc, zdbl, topi, auxcnt, c, 0, 0, &aux, &zl);
    CHECK_NEAR(stats[0], aux, 1e-7, 1e-5);
    CHECK_NEAR(stats[1], zl, 1e-7, 1e-5);
    /* 4. the backward against central differences */
    const double ca = 0.7, cz = 0.3;
    mt_moe_route_bwd_args b = {.dlogits = dz, .logits = z, .probs = probs, .topi = topi, .auxcnt = auxcnt, .dw = dw,
                               .N = N, .E = E, .k = k, .T = T, .pre_softmax = rc->pre, .score = rc->score,
                               .seq_aux = rc->seq_aux, .scale = rc->scale, .aux_scale = (float)ca, .z_scale = (float)cz};
    CHECK(be->i->moe_route_bwd(be, &b) == MT_OK);
    double worst = 0;
    for (int i = 0; i < N * E; i++) {
        const double h = 1e-5, z0 = zdbl[i];
        zdbl[i] = z0 + h;
        const double jp = objective(rc, zdbl, topi, auxcnt, c, ca, cz, NULL, NULL);
        zdbl[i] = z0 - h;
        const double jm = objective(rc, zdbl, topi, auxcnt, c, ca, cz, NULL, NULL);
        zdbl[i] = z0;
        const double fd = (jp - jm) / (2 * h);
        CHECKF(fabs(dz[i] - fd) <= 1e-6 + 1e-4 * fabs(fd), "%s dlogits[%d] = %.9g, finite difference %.9g", rc->name,
               i, dz[i], fd);
        if (fabs(dz[i] - fd) > worst) worst = fabs(dz[i] - fd);
    }
    printf("%-44s aux %.6f (reference %.6f); worst |dlogits - finite difference| %.2e\n", rc->name, stats[0], aux,
           worst);
}

/* 5. the bias update (mt_moe_bias_step): counts 10, 2, 6, 6 have mean 6, so the overloaded expert 0 moves
 * down by the rate, the underloaded expert 1 up, the two at the mean stay (sign 0) */
static void check_bias_rule(void) {
    const float cnt[4] = {10, 2, 6, 6};
    float bias[4] = {0.5f, -0.25f, 0.125f, 0};
    mt_moe_bias_step(cnt, bias, 4, 1e-3f);
    CHECK(bias[0] == 0.5f - 1e-3f && bias[1] == -0.25f + 1e-3f && bias[2] == 0.125f && bias[3] == 0.0f);
}

int main(void) {
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    const router_case cases[] = {
        {MT_MOE_SCORE_SIGMOID, 0, 2, 0, 0, 0, 0, 1.0f, "sigmoid top-2, aux_loss"},
        {MT_MOE_SCORE_SIGMOID, 0, 4, 4, 2, 1, 1, 2.5f, "sigmoid top-4, bias, 2 of 4 groups, seq_aux, x2.5"},
        {MT_MOE_SCORE_SIGMOID, 0, 1, 0, 0, 1, 1, 1.5f, "sigmoid top-1 (weight = score), bias, seq_aux"},
        {MT_MOE_SCORE_SOFTMAX, 0, 3, 4, 2, 1, 0, 2.0f, "softmax renormalised top-3, 2 of 4 groups, seq_aux, x2"},
        {MT_MOE_SCORE_SOFTMAX, 1, 3, 2, 1, 0, 0, 0.5f, "softmax pre_softmax top-3, 1 of 2 groups, x0.5"},
        {MT_MOE_SCORE_SOFTMAX, 0, 2, 0, 0, 1, 0, 1.0f, "softmax renormalised, seq_aux"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&be, &cases[i], (int)i);
    check_bias_rule();
    mt_backend_destroy(&be);
    TEST_MAIN_END();
}
