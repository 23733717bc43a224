/* cpu_ops_fused.c — the fused ops of backend.h on the CPU: residual add + norm, matmul + bias
 * + GeLU, matmul backward + dGeLU, and the counter-based normal init.
 * This backend is the reference: each fused op runs the unfused ops' own code in the unfused
 * order (add then norm; GEMM with the bias seeded then GeLU; dinp GEMM then gelu_bwd in place),
 * so a model that calls the fused ops gets the same bits as one that calls the parts. The
 * device backends fuse for memory traffic; on this backend the point is the identical result. */
#include "core/cpu/cpu_backend.h"
#include "core/rng.h"

static mt_status add_norm(mt_backend *be, const mt_add_norm_fwd_args *a, int layernorm) {
    mt_status st = MT_OK;
    if (a->N < 0 || a->C <= 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu add_%s_fwd: bad shape N=%d C=%d (need N >= 0, C > 0)",
                         layernorm ? "layernorm" : "rmsnorm", a->N, a->C);
    mt_add_args ad = {.out = a->out_resid, .a = a->a, .b = a->b, .n = (size_t)a->N * a->C};
    if ((st = mt_cpu_add(be, &ad)) != MT_OK) return st;
    mt_norm_fwd_args na = {.out = a->out, .mean = layernorm ? a->mean : NULL, .rstd = a->rstd,
                           .inp = a->out_resid, .weight = a->weight, .bias = layernorm ? a->bias : NULL,
                           .N = a->N, .C = a->C, .eps = a->eps};
    return layernorm ? mt_cpu_layernorm_fwd(be, &na) : mt_cpu_rmsnorm_fwd(be, &na);
}

mt_status mt_cpu_add_layernorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a) { return add_norm(be, a, 1); }

mt_status mt_cpu_add_rmsnorm_fwd(mt_backend *be, const mt_add_norm_fwd_args *a) { return add_norm(be, a, 0); }

mt_status mt_cpu_matmul_gelu_fwd(mt_backend *be, const mt_matmul_gelu_fwd_args *a) {
    mt_status st = MT_OK;
    if (a->M < 0 || a->N < 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu matmul_gelu_fwd: negative shape M=%d N=%d", a->M, a->N);
    mt_matmul_fwd_args mm = {.out = a->pre, .inp = a->inp, .weight = a->weight, .bias = a->bias,
                             .M = a->M, .N = a->N, .K = a->K};
    if ((st = mt_cpu_matmul_fwd(be, &mm)) != MT_OK) return st;
    mt_gelu_fwd_args ga = {.out = a->out, .inp = a->pre, .n = (size_t)a->M * a->N};
    return mt_cpu_gelu_fwd(be, &ga);
}

mt_status mt_cpu_matmul_dgelu_bwd(mt_backend *be, const mt_matmul_dgelu_bwd_args *a) {
    mt_status st = MT_OK;
    if (a->M < 0 || a->K < 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu matmul_dgelu_bwd: negative shape M=%d K=%d", a->M, a->K);
    if ((size_t)a->M * a->K > 0 && (!a->dinp || !a->pre))
        return mt_errorf(MT_ERR_INTERNAL, "cpu matmul_dgelu_bwd: NULL dinp or pre (M=%d K=%d)", a->M, a->K);
    mt_matmul_bwd_args mb = {.dinp = a->dinp, .dweight = a->dweight, .dbias = a->dbias, .dout = a->dout,
                             .inp = a->inp, .weight = a->weight, .M = a->M, .N = a->N, .K = a->K,
                             .accumulate_dinp = 0};
    if ((st = mt_cpu_matmul_bwd(be, &mb)) != MT_OK) return st;
    /* in place: element i of the gradient depends only on element i of dinp and pre */
    mt_gelu_bwd_args ga = {.dinp = a->dinp, .dout = a->dinp, .inp = a->pre, .n = (size_t)a->M * a->K};
    return mt_cpu_gelu_bwd(be, &ga);
}

mt_status mt_cpu_init_normal(mt_backend *be, const mt_init_normal_args *a) {
    const int nt = mt_cpu_nt(be);
    if (a->n == 0) return MT_OK;
    if (!a->out) return mt_errorf(MT_ERR_INTERNAL, "cpu init_normal: NULL tensor (n=%zu)", a->n);
    float *out = a->out;
    const uint64_t seed = a->seed, stream = a->stream, off = a->offset;
    const double sd = a->std;
    const long n = (long)a->n;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= 65536)
    for (long e = 0; e < n; e++) out[e] = (float)(sd * mt_rng_normal(seed, stream, off + (uint64_t)e));
    return MT_OK;
}
