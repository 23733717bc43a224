/* cpu_ops_moe.c — the mixture-of-experts ops on the CPU (backend.h: moe_route, moe_route_bwd,
 * moe_permute, moe_unpermute, moe_unpermute_bwd): the router (softmax or sigmoid scores, the top-k
 * choice with its groups and expert bias and the weights: core/moe_rule.h's per-token rules), the
 * capacity rule, and its backward through the combine weights, the load-balancing loss (per
 * micro-batch or per sequence) and the z-loss; the row
 * gathers and scatters between token order and the expert-major dispatch layout.
 * Rules: fp32 maths; the routing pass runs in token order on one thread (it defines which
 * assignments are dropped: a property of the tokens, never of the thread count); the row copies
 * are parallel over tokens, each output row written by one thread. */
#include "core/cpu/cpu_backend.h"
#include "core/moe_rule.h"

#define MOE_MAX_E 4096

/* softmax of row z (E) into p, returns logsumexp */
static double row_softmax(const float *z, float *p, int E) {
    float mx = z[0];
    for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
    double s = 0;
    for (int e = 0; e < E; e++) s += exp((double)z[e] - mx);
    for (int e = 0; e < E; e++) p[e] = (float)(exp((double)z[e] - mx) / s);
    return mx + log(s);
}

static double row_lse(const float *z, int E) {
    double mx = z[0], s = 0;
    for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
    for (int e = 0; e < E; e++) s += exp((double)z[e] - mx);
    return mx + log(s);
}

/* the aux loss's divisor of row p: 1 (softmax) or sum + 1e-20 (sigmoid scores normalised) */
static float aux_div(const float *p, int E, int score) {
    if (score != MT_MOE_SCORE_SIGMOID) return 1.0f;
    float s = 0;
    for (int e = 0; e < E; e++) s += p[e];
    return s + MT_MOE_SIGMOID_EPS;
}

mt_status mt_cpu_moe_route(mt_backend *be, const mt_moe_route_args *a) {
    (void)be;
    const int N = a->N, E = a->E, k = a->k, T = a->T > 0 ? a->T : a->N;
    if (E <= 0 || E > MOE_MAX_E || k < 1 || k > E || k > MT_MOE_MAX_K || N < 0 || a->n_groups > MT_MOE_MAX_GROUPS)
        return mt_errorf(MT_ERR_INTERNAL, "cpu moe_route: %d experts, top %d, %d tokens, %d groups", E, k, N,
                         a->n_groups);
    if (N == 0) return MT_OK;
    const float *z = a->logits, *bias = a->bias;
    float *probs = a->probs, *topw = a->topw, *stats = a->stats;
    int32_t *topi = a->topi, *pos = a->pos, *counts = a->counts, *auxcnt = a->auxcnt;
    const int sig = a->score == MT_MOE_SCORE_SIGMOID, use_log = !sig && !a->pre_softmax;
    const int n_seq = (N + T - 1) / T;
    int32_t seq_cnt[MOE_MAX_E], run[MOE_MAX_E], ai[MT_MOE_MAX_K];
    double psum[MOE_MAX_E], zsum = 0, aux = 0;
    memset(counts, 0, (size_t)2 * E * sizeof *counts);
    memset(auxcnt, 0, (size_t)(a->seq_aux ? n_seq : 1) * E * sizeof *auxcnt);
    for (int e = 0; e < E; e++) psum[e] = 0;
    for (int t = 0; t < N; t++) {
        if (t % T == 0) memset(seq_cnt, 0, (size_t)E * sizeof *seq_cnt); /* a new sequence */
        const float *zt = z + (size_t)t * E;
        float *pt = probs + (size_t)t * E;
        double lse;
        if (sig) {
            lse = row_lse(zt, E);
            for (int e = 0; e < E; e++) pt[e] = mt_moe_sigmoid(zt[e]);
        } else {
            lse = row_softmax(zt, pt, E);
        }
        zsum += lse * lse;
        /* the load-balancing loss's scores and routing: plain top k, no bias, no groups */
        const float div = aux_div(pt, E, a->score);
        for (int e = 0; e < E; e++) psum[e] += div != 1.0f ? pt[e] / div : pt[e];
        mt_moe_select(pt, NULL, E, k, 1, 0, 0, div, ai);
        int32_t *ac = auxcnt + (a->seq_aux ? (size_t)(t / T) * E : 0);
        for (int j = 0; j < k; j++) ac[ai[j]]++;
        if (a->seq_aux && (t + 1) % T == 0) { /* the end of a sequence: its aux */
            double sb = 0;
            for (int e = 0; e < E; e++) sb += psum[e] * ac[e];
            aux += sb * E / ((double)T * T * k) / n_seq;
            for (int e = 0; e < E; e++) psum[e] = 0;
        }
        int32_t *it = topi + (size_t)t * k;
        float *wt = topw + (size_t)t * k;
        mt_moe_select(pt, bias, E, k, a->n_groups, a->group_topk, use_log && a->n_groups > 1, 1.0f, it);
        mt_moe_weights(pt, zt, it, k, a->score, a->pre_softmax, a->scale, wt);
        for (int j = 0; j < k; j++) {
            const int e = it[j];
            counts[E + e]++;
            if (a->cap > 0 && seq_cnt[e] >= a->cap) { /* over capacity: dropped */
                pos[(size_t)t * k + j] = -1;
                wt[j] = 0.0f;
                continue;
            }
            seq_cnt[e]++;
            counts[e]++;
            pos[(size_t)t * k + j] = 0; /* kept: its row is assigned below */
        }
    }
    if (!a->seq_aux) {
        for (int e = 0; e < E; e++) aux += psum[e] * auxcnt[e];
        aux *= E / ((double)N * N * k);
    }
    int32_t off = 0;
    for (int e = 0; e < E; e++) {
        run[e] = off;
        off += counts[e];
    }
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            int32_t *p = pos + (size_t)t * k + j;
            if (*p >= 0) *p = run[topi[(size_t)t * k + j]]++;
        }
    if (a->bias_cnt)
        for (int e = 0; e < E; e++) ((float *)a->bias_cnt)[e] += (float)counts[e];
    if (stats) {
        int64_t routed = 0, kept = 0;
        for (int e = 0; e < E; e++) {
            routed += counts[E + e];
            kept += counts[e];
        }
        stats[0] += (float)aux;
        stats[1] += (float)(zsum / N);
        stats[2] += (float)(routed - kept);
        stats[3] += (float)routed;
        for (int e = 0; e < E; e++) {
            stats[MT_MOE_STATS + e] += (float)counts[E + e];
            stats[MT_MOE_STATS + E + e] += (float)counts[e];
        }
    }
    return MT_OK;
}

mt_status mt_cpu_moe_route_bwd(mt_backend *be, const mt_moe_route_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, E = a->E, k = a->k, T = a->T > 0 ? a->T : a->N;
    if (E <= 0 || E > MOE_MAX_E || k < 1 || k > E || k > MT_MOE_MAX_K)
        return mt_errorf(MT_ERR_INTERNAL, "cpu moe_route_bwd: %d experts, top %d", E, k);
    if (N == 0) return MT_OK;
    const float *z = a->logits, *probs = a->probs, *dw = a->dw;
    const int32_t *topi = a->topi, *auxcnt = a->auxcnt;
    const int sig = a->score == MT_MOE_SCORE_SIGMOID, n_seq = (N + T - 1) / T;
    const double scale = mt_moe_scale(a->scale);
    float *dz = a->dlogits;
    const double z_c = 2.0 * a->z_scale / N;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * E >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++) {
        const float *zt = z + (size_t)t * E, *pt = probs + (size_t)t * E, *dwt = dw + (size_t)t * k;
        const int32_t *it = topi + (size_t)t * k, *ac = auxcnt + (a->seq_aux ? (size_t)(t / T) * E : 0);
        float *dzt = dz + (size_t)t * E;
        /* the aux loss's coefficient of q[t, e] * count_e */
        double aux_c;
        if (a->seq_aux) { /* (1 / sequences) sum_b E / (T^2 k) sum_e (sum_t q) count_be */
            aux_c = (double)a->aux_scale * E / ((double)T * T * k) / n_seq;
        } else {
            aux_c = (double)a->aux_scale * E / ((double)N * N * k);
        }
        const double lse = row_lse(zt, E);
        if (sig) {
            /* q = s / D (aux), w from the chosen s; dL/ds then times s (1 - s); z-loss on the logits */
            double gq = 0, ds[MT_MOE_MAX_K];
            const double D = aux_div(pt, E, a->score);
            for (int e = 0; e < E; e++) gq += aux_c * ac[e] * pt[e] / D;
            mt_moe_sigmoid_weights_bwd(pt, it, k, a->scale, dwt, ds);
            for (int e = 0; e < E; e++) {
                double g = (aux_c * ac[e] - gq) / D;
                for (int j = 0; j < k; j++) g += it[j] == e ? ds[j] : 0.0;
                dzt[e] = (float)(g * pt[e] * (1.0 - pt[e]) + z_c * lse * exp((double)zt[e] - lse));
            }
            continue;
        }
        /* g = d/dprobs: the balancing loss on every expert; the weights when they are the probabilities */
        double dot = 0;
        for (int e = 0; e < E; e++) {
            double g = aux_c * ac[e];
            if (a->pre_softmax)
                for (int j = 0; j < k; j++) g += it[j] == e ? scale * dwt[j] : 0.0;
            dot += pt[e] * g;
        }
        for (int e = 0; e < E; e++) {
            double g = aux_c * ac[e];
            if (a->pre_softmax)
                for (int j = 0; j < k; j++) g += it[j] == e ? scale * dwt[j] : 0.0;
            dzt[e] = (float)(pt[e] * (g - dot) + z_c * lse * pt[e]);
        }
        if (!a->pre_softmax) { /* w = scale * softmax over the selected logits */
            float w[MT_MOE_MAX_K];
            double wd = 0;
            mt_moe_weights(pt, zt, it, k, MT_MOE_SCORE_SOFTMAX, 0, 1.0f, w);
            for (int j = 0; j < k; j++) wd += (double)w[j] * dwt[j];
            for (int j = 0; j < k; j++) dzt[it[j]] += (float)(scale * w[j] * (dwt[j] - wd));
        }
    }
    return MT_OK;
}

mt_status mt_cpu_moe_permute(mt_backend *be, const mt_moe_permute_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, k = a->k, C = a->C;
    const float *x = a->x;
    const int32_t *pos = a->pos;
    float *out = a->out;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            const int32_t p = pos[(size_t)t * k + j];
            if (p >= 0) memcpy(out + (size_t)p * C, x + (size_t)t * C, (size_t)C * sizeof *out);
        }
    return MT_OK;
}

mt_status mt_cpu_moe_unpermute(mt_backend *be, const mt_moe_unpermute_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, k = a->k, C = a->C;
    const float *y = a->y, *w = a->w;
    const int32_t *pos = a->pos;
    float *out = a->out;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++) {
        float *o = out + (size_t)t * C;
        for (int c = 0; c < C; c++) o[c] = 0.0f;
        for (int j = 0; j < k; j++) {
            const int32_t p = pos[(size_t)t * k + j];
            if (p < 0) continue;
            const float wj = w ? w[(size_t)t * k + j] : 1.0f;
            const float *yr = y + (size_t)p * C;
            for (int c = 0; c < C; c++) o[c] += wj * yr[c];
        }
    }
    return MT_OK;
}

mt_status mt_cpu_moe_unpermute_bwd(mt_backend *be, const mt_moe_unpermute_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, k = a->k, C = a->C;
    const float *dout = a->dout, *y = a->y, *w = a->w;
    const int32_t *pos = a->pos;
    float *dy = a->dy, *dw = a->dw;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++) {
        const float *g = dout + (size_t)t * C;
        for (int j = 0; j < k; j++) {
            const size_t tj = (size_t)t * k + j;
            const int32_t p = pos[tj];
            if (p < 0) {
                if (dw) dw[tj] = 0.0f;
                continue;
            }
            if (dy) {
                float *d = dy + (size_t)p * C;
                for (int c = 0; c < C; c++) d[c] = w[tj] * g[c];
            }
            if (dw) {
                const float *yr = y + (size_t)p * C;
                double s = 0;
                for (int c = 0; c < C; c++) s += (double)g[c] * yr[c];
                dw[tj] = (float)s;
            }
        }
    }
    return MT_OK;
}
