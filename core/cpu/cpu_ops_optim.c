/* cpu_ops_optim.c — AdamW on one contiguous fp32 tensor, on the CPU, exactly as backend.h
 * states it (PyTorch / Megatron formulation, decoupled weight decay applied to the master).
 * Rules: elementwise and independent, so parallel and deterministic; the compute copy
 * `param` is written from the updated master and may alias it (act = f32 here). The AVX path
 * performs the same IEEE operations in the same order as the scalar tail (no FMA), so every
 * element gets the same bits whichever path computes it. */
#include "core/cpu/cpu_backend.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

#define ADAMW_BLOCK 8192 /* elements per parallel work item */

typedef struct {
    float lr, b1, b2, eps, wd, gs, bc1, bc2;
} adamw_hp;

/* One span [i0, i1). The AVX path exists because sqrtf's errno handling keeps GCC from
 * vectorising the scalar loop without -fno-math-errno, and AdamW runs over every parameter. */
static void adamw_span(const adamw_hp *h, float *master, float *param, const float *grad, float *m, float *v,
                       int zero, long i0, long i1) {
    long i = i0;
#if defined(__AVX__)
    const __m256 lr = _mm256_set1_ps(h->lr), b1 = _mm256_set1_ps(h->b1), b2 = _mm256_set1_ps(h->b2);
    const __m256 c1 = _mm256_set1_ps(1.0f - h->b1), c2 = _mm256_set1_ps(1.0f - h->b2);
    const __m256 eps = _mm256_set1_ps(h->eps), wd = _mm256_set1_ps(h->wd), gs = _mm256_set1_ps(h->gs);
    const __m256 bc1 = _mm256_set1_ps(h->bc1), bc2 = _mm256_set1_ps(h->bc2);
    for (; i + 8 <= i1; i += 8) {
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), gs);
        const __m256 m0 = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(m + i);
        const __m256 v0 = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(v + i);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, m0), _mm256_mul_ps(c1, g));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, v0), _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 w = _mm256_loadu_ps(master + i);
        const __m256 upd = _mm256_add_ps(
            _mm256_div_ps(_mm256_div_ps(mi, bc1), _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, bc2)), eps)),
            _mm256_mul_ps(wd, w));
        const __m256 nw = _mm256_sub_ps(w, _mm256_mul_ps(lr, upd));
        _mm256_storeu_ps(master + i, nw);
        if (param) _mm256_storeu_ps(param + i, nw);
    }
#endif
    for (; i < i1; i++) {
        const float g = grad[i] * h->gs;
        const float mi = h->b1 * (zero ? 0.0f : m[i]) + (1.0f - h->b1) * g;
        const float vi = h->b2 * (zero ? 0.0f : v[i]) + (1.0f - h->b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float w = master[i];
        const float nw = w - h->lr * ((mi / h->bc1) / (sqrtf(vi / h->bc2) + h->eps) + h->wd * w);
        master[i] = nw;
        if (param) param[i] = nw;
    }
}

mt_status mt_cpu_adamw(mt_backend *be, const mt_adamw_args *a) {
    const int nt = mt_cpu_nt(be);
    mt_status st = mt_op_check_adamw("cpu", a);
    if (st != MT_OK || a->n == 0) return st;
    const adamw_hp h = {a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_scale, a->bias_correction1,
                        a->bias_correction2};
    float *master = a->master, *m = a->m, *v = a->v;
    float *param = a->param == a->master ? NULL : a->param; /* aliased: master already is param */
    const float *grad = a->grad;
    const long n = (long)a->n;
    const long n_blocks = (n + ADAMW_BLOCK - 1) / ADAMW_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= MT_CPU_PAR_MIN)
    for (long blk = 0; blk < n_blocks; blk++) {
        const long i0 = blk * ADAMW_BLOCK;
        const long i1 = i0 + ADAMW_BLOCK < n ? i0 + ADAMW_BLOCK : n;
        adamw_span(&h, master, param, grad, m, v, a->moments_zero, i0, i1);
    }
    return MT_OK;
}
