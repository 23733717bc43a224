/* cpu_ops_gate.c — the MoE shared experts' sigmoid gate on the CPU (backend.h: moe_gate_fwd, moe_gate_bwd,
 * moe_gate_logit_bwd): gate = sigmoid(x . w) per token row scaling the shared experts' output, and its
 * backward through the product and through the logit.
 * Rules: fp32 maths with double dot products; parallel over token rows, each output row (and each gate)
 * written by one thread; the weight gradient's column sums run over the rows in order on the thread that
 * owns the column, so the result never depends on the thread count. */
#include <math.h>

#include "core/cpu/cpu_backend.h"

mt_status mt_cpu_moe_gate_fwd(mt_backend *be, const mt_moe_gate_fwd_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, C = a->C;
    const float *y = a->y, *x = a->x, *w = a->w;
    float *out = a->out, *gate = a->gate;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++) {
        const float *xr = x + (size_t)t * C, *yr = y + (size_t)t * C;
        float *o = out + (size_t)t * C;
        double z = 0;
        for (int c = 0; c < C; c++) z += (double)xr[c] * w[c];
        const float g = (float)(1.0 / (1.0 + exp(-z)));
        gate[t] = g;
        for (int c = 0; c < C; c++) o[c] += g * yr[c];
    }
    return MT_OK;
}

mt_status mt_cpu_moe_gate_bwd(mt_backend *be, const mt_moe_gate_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, C = a->C;
    const float *dout = a->dout, *y = a->y, *gate = a->gate;
    float *dy = a->dy, *dz = a->dz;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++) {
        const float *g = dout + (size_t)t * C, *yr = y + (size_t)t * C;
        float *d = dy + (size_t)t * C;
        const float s = gate[t];
        double dot = 0;
        for (int c = 0; c < C; c++) {
            dot += (double)g[c] * yr[c];
            d[c] = s * g[c];
        }
        dz[t] = (float)(dot * s * (1.0 - s));
    }
    return MT_OK;
}

mt_status mt_cpu_moe_gate_logit_bwd(mt_backend *be, const mt_moe_gate_logit_bwd_args *a) {
    const int nt = mt_cpu_nt(be);
    const int N = a->N, C = a->C;
    const float *dz = a->dz, *x = a->x, *w = a->w;
    float *dw = a->dw, *dx = a->dx;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int c = 0; c < C; c++) {
        double s = 0;
        for (int t = 0; t < N; t++) s += (double)dz[t] * x[(size_t)t * C + c];
        dw[c] += (float)s;
    }
    if (!dx) return MT_OK;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)N * C >= MT_CPU_PAR_MIN)
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) dx[(size_t)t * C + c] += dz[t] * w[c];
    return MT_OK;
}
