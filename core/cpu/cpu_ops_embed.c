/* cpu_ops_embed.c — token (+ position) embedding forward/backward with vocab-parallel shards,
 * and softmax cross-entropy fused with its backward, on the CPU.
 * Rules: weight gradients accumulate (+=) and the logits are overwritten by their gradient;
 * tokens outside the shard [vocab_start, vocab_start + n_vocab) read zeros and get no
 * gradient; vocabulary padding columns (>= V) are excluded and get gradient 0; targets < 0
 * are ignored. Gradient scatters run over fixed column blocks (dwte) or positions (dwpe) with
 * tokens in order, so they are race-free and deterministic without atomics. */
#include "core/cpu/cpu_backend.h"

#define EMB_COLBLOCK 64 /* columns per dwte block: the parallel unit of the scatter */

mt_status mt_cpu_embedding_fwd(mt_backend *be, const mt_embedding_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_embedding("cpu", "embedding_fwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset,
                                         a->out, a->tokens, a->n_vocab > 0 ? a->wte : (const void *)a->tokens);
    if (st != MT_OK) return st;
    const int T = a->T, C = a->C, vs = a->vocab_start, nv = a->n_vocab, po = a->pos_offset;
    const long rows = (long)a->B * T;
    float *out = a->out;
    const float *wte = a->wte, *wpe = a->wpe;
    const int32_t *tok = a->tokens;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * C >= MT_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *o = out + r * C;
        const long id = (long)tok[r] - vs;
        if (id >= 0 && id < nv)
            memcpy(o, wte + id * C, (size_t)C * sizeof *o);
        else
            memset(o, 0, (size_t)C * sizeof *o);
        if (wpe) {
            const float *p = wpe + (size_t)(po + r % T) * C;
            for (int j = 0; j < C; j++) o[j] += p[j];
        }
    }
    return MT_OK;
}

mt_status mt_cpu_embedding_bwd(mt_backend *be, const mt_embedding_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_embedding("cpu", "embedding_bwd", a->B, a->T, a->C, a->n_vocab, a->pos_offset,
                                         a->dout, a->tokens, a->tokens);
    if (st != MT_OK) return st;
    const int B = a->B, T = a->T, C = a->C, vs = a->vocab_start, nv = a->n_vocab, po = a->pos_offset;
    const long rows = (long)B * T;
    if (rows == 0) return MT_OK;
    const float *dout = a->dout;
    const int32_t *tok = a->tokens;
    if (a->dwte && nv > 0) {
        float *dwte = a->dwte;
        const int n_blocks = (C + EMB_COLBLOCK - 1) / EMB_COLBLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * C >= MT_CPU_PAR_MIN)
        for (int blk = 0; blk < n_blocks; blk++) {
            const int c0 = blk * EMB_COLBLOCK;
            const int nc = C - c0 < EMB_COLBLOCK ? C - c0 : EMB_COLBLOCK;
            for (long r = 0; r < rows; r++) {
                const long id = (long)tok[r] - vs;
                if (id < 0 || id >= nv) continue; /* another shard's token */
                float *g = dwte + id * C + c0;
                const float *d = dout + r * C + c0;
                for (int j = 0; j < nc; j++) g[j] += d[j];
            }
        }
    }
    if (a->dwpe) {
        float *dwpe = a->dwpe;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * C >= MT_CPU_PAR_MIN)
        for (int t = 0; t < T; t++) {
            float *g = dwpe + (size_t)(po + t) * C;
            for (int b = 0; b < B; b++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                for (int j = 0; j < C; j++) g[j] += d[j];
            }
        }
    }
    return MT_OK;
}

mt_status mt_cpu_xent_fwd_bwd(mt_backend *be, const mt_xent_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, V = a->V, Vp = a->Vp;
    if (N < 0 || V <= 0 || Vp < V)
        return mt_errorf(MT_ERR_CONFIG, "cpu xent: bad shape N=%d V=%d Vp=%d (need V > 0, Vp >= V)", N, V, Vp);
    if (N == 0) return MT_OK;
    if (!a->logits || !a->losses || !a->targets) return mt_errorf(MT_ERR_INTERNAL, "cpu xent: NULL tensor");
    const int32_t *tgt = a->targets;
    for (int r = 0; r < N; r++)
        if (tgt[r] >= V)
            return mt_errorf(MT_ERR_DATA,
                             "cpu xent: target %d of row %d is outside the vocabulary of %d tokens; the data was "
                             "tokenised with a larger vocabulary than the model's",
                             (int)tgt[r], r, V);
    float *logits = a->logits, *losses = a->losses;
    const float dloss = a->dloss;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * Vp >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        float *x = logits + (size_t)r * Vp;
        const int t = tgt[r];
        if (t < 0) { /* ignored row */
            memset(x, 0, (size_t)Vp * sizeof *x);
            losses[r] = 0.0f;
            continue;
        }
        const float mx = mt_cpu_max_f(x, (size_t)V);
        const float xt = x[t] - mx;
        for (int j = 0; j < V; j++) x[j] = mt_cpu_expf(x[j] - mx);
        const double sum = mt_cpu_sum_d(x, (size_t)V);
        losses[r] = (float)(log(sum) - (double)xt);
        const float s = (float)(1.0 / sum) * dloss;
        for (int j = 0; j < V; j++) x[j] *= s;
        x[t] -= dloss;
        for (int j = V; j < Vp; j++) x[j] = 0.0f;
    }
    return MT_OK;
}
