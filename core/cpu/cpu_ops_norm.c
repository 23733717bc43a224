/* cpu_ops_norm.c — LayerNorm and RMSNorm, forward and backward, on the CPU (fp32 tensors,
 * row statistics accumulated in double).
 * Rules: the residual-stream rule of backend.h — backward ADDS into dinp; dweight / dbias
 * accumulate (+=). Rows are independent (parallel over rows); the weight gradients are summed
 * over rows by fixed column blocks in row order, so every result is deterministic for any
 * thread count. No allocation: column-block accumulators live on the stack. */
#include "core/cpu/cpu_backend.h"

#define MT_NORM_COLBLOCK 128 /* columns per weight-gradient block (2 KiB of double accumulators) */

static mt_status norm_check(const char *op, int N, int C, const void *out, const void *inp, const void *weight,
                            const void *rstd) {
    if (N < 0 || C <= 0) return mt_errorf(MT_ERR_CONFIG, "cpu %s: bad shape N=%d C=%d (need N >= 0, C > 0)", op, N, C);
    if (N > 0 && (!out || !inp || !weight || !rstd))
        return mt_errorf(MT_ERR_INTERNAL, "cpu %s: NULL tensor (N=%d C=%d)", op, N, C);
    return MT_OK;
}

/* ---- forward ---- */

mt_status mt_cpu_layernorm_fwd(mt_backend *be, const mt_norm_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = norm_check("layernorm_fwd", a->N, a->C, a->out, a->inp, a->weight, a->rstd);
    if (st != MT_OK) return st;
    if (a->N > 0 && !a->mean)
        return mt_errorf(MT_ERR_INTERNAL, "cpu layernorm_fwd: NULL mean (N=%d C=%d)", a->N, a->C);
    const int N = a->N, C = a->C;
    float *out = a->out, *mean = a->mean, *rstd = a->rstd;
    const float *inp = a->inp, *w = a->weight, *b = a->bias;
    const float eps = a->eps;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * C >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *o = out + (size_t)r * C;
        const double mu = mt_cpu_sum_d(x, (size_t)C) / C;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int i = 0;
        for (; i + 8 <= C; i += 8)
            for (int l = 0; l < 8; l++) {
                double d = (double)x[i + l] - mu;
                acc[l] += d * d;
            }
        for (; i < C; i++) {
            double d = (double)x[i] - mu;
            acc[i & 7] += d * d;
        }
        const double var = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / C;
        const float s = (float)(1.0 / sqrt(var + (double)eps));
        const float m = (float)mu;
        if (b)
            for (int j = 0; j < C; j++) o[j] = (x[j] - m) * s * w[j] + b[j];
        else /* bias-free LayerNorm */
            for (int j = 0; j < C; j++) o[j] = (x[j] - m) * s * w[j];
        mean[r] = m;
        rstd[r] = s;
    }
    return MT_OK;
}

mt_status mt_cpu_rmsnorm_fwd(mt_backend *be, const mt_norm_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = norm_check("rmsnorm_fwd", a->N, a->C, a->out, a->inp, a->weight, a->rstd);
    if (st != MT_OK) return st;
    const int N = a->N, C = a->C;
    float *out = a->out, *rstd = a->rstd;
    const float *inp = a->inp, *w = a->weight;
    const float eps = a->eps;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * C >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *o = out + (size_t)r * C;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int i = 0;
        for (; i + 8 <= C; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += (double)x[i + l] * x[i + l];
        for (; i < C; i++) acc[i & 7] += (double)x[i] * x[i];
        const double ms = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / C;
        const float s = (float)(1.0 / sqrt(ms + (double)eps));
        for (int j = 0; j < C; j++) o[j] = x[j] * s * w[j];
        rstd[r] = s;
    }
    return MT_OK;
}

/* ---- backward ----
 * With xhat = (x - mean) * rstd (layernorm) or x * rstd (rmsnorm) and g = dout * w:
 *   layernorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   rmsnorm:   dx = rstd * (g - xhat * mean(g * xhat))
 *   dw += sum_rows dout * xhat;  db += sum_rows dout */

static void norm_bwd_rows(const mt_norm_bwd_args *a, int centered, int nt) {
    const int N = a->N, C = a->C;
    float *dinp = a->dinp;
    const float *dout = a->dout, *inp = a->inp, *w = a->weight, *mean = a->mean, *rstd = a->rstd;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * C >= MT_CPU_PAR_MIN)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C;
        const float m = centered ? mean[r] : 0.0f, s = rstd[r];
        double sg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sgx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int i = 0;
        for (; i + 8 <= C; i += 8)
            for (int l = 0; l < 8; l++) {
                const float g = dy[i + l] * w[i + l];
                const float xh = (x[i + l] - m) * s;
                sg[l] += (double)g;
                sgx[l] += (double)g * xh;
            }
        for (; i < C; i++) {
            const float g = dy[i] * w[i];
            const float xh = (x[i] - m) * s;
            sg[i & 7] += (double)g;
            sgx[i & 7] += (double)g * xh;
        }
        const double tg = ((sg[0] + sg[4]) + (sg[1] + sg[5])) + ((sg[2] + sg[6]) + (sg[3] + sg[7]));
        const double tgx = ((sgx[0] + sgx[4]) + (sgx[1] + sgx[5])) + ((sgx[2] + sgx[6]) + (sgx[3] + sgx[7]));
        const float mg = centered ? (float)(tg / C) : 0.0f;
        const float mgx = (float)(tgx / C);
        for (int j = 0; j < C; j++) {
            const float xh = (x[j] - m) * s;
            dx[j] += s * (dy[j] * w[j] - mg - xh * mgx);
        }
    }
}

static void norm_bwd_weights(const mt_norm_bwd_args *a, int centered, int nt) {
    const int N = a->N, C = a->C;
    float *dw = a->dweight, *db = centered ? a->dbias : NULL;
    const float *dout = a->dout, *inp = a->inp, *mean = a->mean, *rstd = a->rstd;
    const int n_blocks = (C + MT_NORM_COLBLOCK - 1) / MT_NORM_COLBLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if ((size_t)N * C >= MT_CPU_PAR_MIN)
    for (int blk = 0; blk < n_blocks; blk++) {
        const int c0 = blk * MT_NORM_COLBLOCK;
        const int nc = C - c0 < MT_NORM_COLBLOCK ? C - c0 : MT_NORM_COLBLOCK;
        double aw[MT_NORM_COLBLOCK], ab[MT_NORM_COLBLOCK];
        for (int j = 0; j < nc; j++) aw[j] = ab[j] = 0.0;
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
            const float m = centered ? mean[r] : 0.0f, s = rstd[r];
            for (int j = 0; j < nc; j++) {
                aw[j] += (double)(dy[j] * ((x[j] - m) * s));
                ab[j] += (double)dy[j];
            }
        }
        if (dw)
            for (int j = 0; j < nc; j++) dw[c0 + j] = (float)((double)dw[c0 + j] + aw[j]);
        if (db)
            for (int j = 0; j < nc; j++) db[c0 + j] = (float)((double)db[c0 + j] + ab[j]);
    }
}

static mt_status norm_bwd(const char *op, const mt_norm_bwd_args *a, int centered, int nt) {
    if (a->N < 0 || a->C <= 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu %s: bad shape N=%d C=%d (need N >= 0, C > 0)", op, a->N, a->C);
    if (a->N == 0) return MT_OK;
    if (!a->dout || !a->inp || !a->weight || !a->rstd || (centered && !a->mean))
        return mt_errorf(MT_ERR_INTERNAL, "cpu %s: NULL input tensor (N=%d C=%d)", op, a->N, a->C);
    if (a->dinp) norm_bwd_rows(a, centered, nt);
    if (a->dweight || (centered && a->dbias)) norm_bwd_weights(a, centered, nt);
    return MT_OK;
}

mt_status mt_cpu_layernorm_bwd(mt_backend *be, const mt_norm_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    return norm_bwd("layernorm_bwd", a, 1, nt);
}

mt_status mt_cpu_rmsnorm_bwd(mt_backend *be, const mt_norm_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    return norm_bwd("rmsnorm_bwd", a, 0, nt);
}
