/* cpu_ops_xent.c — the vocab-parallel softmax cross-entropy phases of backend.h
 * (xent_vp_max, xent_vp_sumexp, xent_vp_finish) on the CPU: the tensor-parallel twin of
 * xent_fwd_bwd in cpu_ops_embed.c, with the same arithmetic (fp32 exp, row sums in double,
 * loss log(sum) - (x_t - max) in double) except that the per-rank row sums pass through fp32
 * (the dtype they are allreduced in): one rank matches the fused op to ~1 ulp.
 * Rules: rows are independent (parallel over rows, deterministic); padding columns (global
 * index >= V) never enter the max or the sum and get gradient 0; targets < 0 are ignored; a
 * target >= V is a data error naming the row. */
#include "core/cpu/cpu_backend.h"

mt_status mt_cpu_xent_vp_max(mt_backend *be, const mt_xent_vp_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_xent_vp("cpu", "xent_vp_max", a);
    if (st != MT_OK) return st;
    const int N = a->N, nc = a->n_cols, nv = mt_xent_vp_valid_cols(a);
    const int32_t *tgt = a->targets;
    for (int r = 0; r < N; r++)
        if (tgt[r] >= a->V)
            return mt_errorf(MT_ERR_DATA,
                             "cpu xent: target %d of row %d is outside the vocabulary of %d tokens; the data was "
                             "tokenised with a larger vocabulary than the model's",
                             (int)tgt[r], r, a->V);
    const float *logits = a->logits;
    float *mx = a->stats;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * nc >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++)
        mx[r] = tgt[r] < 0 ? 0.0f : nv > 0 ? mt_cpu_max_f(logits + (size_t)r * nc, (size_t)nv) : -INFINITY;
    return MT_OK;
}

mt_status mt_cpu_xent_vp_sumexp(mt_backend *be, const mt_xent_vp_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_xent_vp("cpu", "xent_vp_sumexp", a);
    if (st != MT_OK) return st;
    const int N = a->N, nc = a->n_cols, nv = mt_xent_vp_valid_cols(a), vs = a->vocab_start;
    const int32_t *tgt = a->targets;
    float *logits = a->logits, *mx = a->stats, *sum = mx + N, *xt = mx + 2 * (size_t)N;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * nc >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        float *x = logits + (size_t)r * nc;
        const int t = tgt[r];
        sum[r] = 0.0f;
        xt[r] = 0.0f;
        if (t < 0) continue;
        const float m = mx[r];
        if (t >= vs && t - vs < nv) xt[r] = x[t - vs] - m;
        for (int j = 0; j < nv; j++) x[j] = mt_cpu_expf(x[j] - m);
        sum[r] = (float)mt_cpu_sum_d(x, (size_t)nv);
    }
    return MT_OK;
}

mt_status mt_cpu_xent_vp_finish(mt_backend *be, const mt_xent_vp_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_xent_vp("cpu", "xent_vp_finish", a);
    if (st != MT_OK) return st;
    if (a->N > 0 && !a->losses) return mt_errorf(MT_ERR_INTERNAL, "cpu xent_vp_finish: NULL losses");
    const int N = a->N, nc = a->n_cols, nv = mt_xent_vp_valid_cols(a), vs = a->vocab_start;
    const int32_t *tgt = a->targets;
    const float *sum = (const float *)a->stats + N, *xt = (const float *)a->stats + 2 * (size_t)N;
    float *logits = a->logits, *losses = a->losses;
    const float dloss = a->dloss;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * nc >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        float *x = logits + (size_t)r * nc;
        const int t = tgt[r];
        if (t < 0) { /* ignored row */
            memset(x, 0, (size_t)nc * sizeof *x);
            losses[r] = 0.0f;
            continue;
        }
        losses[r] = (float)(log((double)sum[r]) - (double)xt[r]);
        const float s = (float)(1.0 / (double)sum[r]) * dloss;
        for (int j = 0; j < nv; j++) x[j] *= s;
        if (t >= vs && t - vs < nv) x[t - vs] -= dloss;
        for (int j = nv; j < nc; j++) x[j] = 0.0f;
    }
    return MT_OK;
}
