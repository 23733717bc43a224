/* topk.h — the MoE router's top-k choice, shared by the CPU backend and the CUDA kernels (a
 * static inline function, compiled as host code in C and as device code under nvcc), so that
 * both pick the same experts: the k largest of p[0 .. E), ties to the lower index, in
 * descending order, into idx[0 .. k). */
#ifndef MT_TOPK_H
#define MT_TOPK_H

#include <stdint.h>

#ifdef __CUDACC__
#define MT_HOST_DEVICE __host__ __device__
#else
#define MT_HOST_DEVICE
#endif

static inline MT_HOST_DEVICE void mt_topk_desc(const float *p, int E, int k, int32_t *idx) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int used = 0;
            for (int m = 0; m < j; m++) used |= idx[m] == e;
            if (!used && (best < 0 || p[e] > p[best])) best = e;
        }
        idx[j] = best;
    }
}

#endif
