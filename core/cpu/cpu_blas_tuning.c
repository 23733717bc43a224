/* cpu_blas_tuning.c — picks OpenBLAS's GEMM kernel for CPUs it under-detects. Debian's
 * OpenBLAS 0.3.21 runs AMD Zen 4 (AVX-512) with its Haswell (AVX2) kernels; its SkylakeX
 * kernels are ~1.5x faster there (gpt125m 4x64 step: 1.18 s -> 0.79 s on this machine, see
 * `make bench`). The kernel is chosen when the library loads, from OPENBLAS_CORETYPE, so cmd/
 * sets that variable and re-executes itself (or the launcher sets it for its ranks). */
#include "core/backend.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

const char *mt_cpu_blas_better_coretype(void) {
    if (getenv("OPENBLAS_CORETYPE")) return NULL; /* the user chose */
    const char *core = openblas_get_corename();
    if (!core) return NULL;
    int weak = !strcasecmp(core, "haswell") || !strcasecmp(core, "zen");
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return weak && avx512 ? "SKYLAKEX" : NULL;
}
