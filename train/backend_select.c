/* backend_select.c — picks the backend for a recipe: training.backend cpu | cuda | auto
 * (auto = CUDA when a GPU is present AND the CUDA backend has every op the model needs,
 * else CPU, saying why). Selecting cuda where there is none is an error, never a crash. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train/backend_select.h"
#include "train/model.h"

mt_status mt_backend_select(const mt_recipe *r, int local_ranks, mt_backend *be, char *note, size_t note_bytes) {
    char why[512] = "";
    mt_status st;
    note[0] = 0;
    int threads = r->training.threads;
    if (threads <= 0) {
        int cores = 0;
#ifdef _SC_NPROCESSORS_ONLN
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
        if (cores < 1) cores = 1;
        threads = cores / (local_ranks > 0 ? local_ranks : 1);
        if (threads < 1) threads = 1;
    }
    switch (r->training.backend) {
    case MT_BACKEND_CPU:
        return mt_backend_cpu_create(be, threads);
    case MT_BACKEND_CUDA:
        st = mt_backend_cuda_create(be, 0);
        if (st != MT_OK) return mt_error_context(st, "training.backend=cuda: ");
        return MT_OK;
    case MT_BACKEND_AUTO:
        if (mt_cuda_available(why, sizeof why)) {
            st = mt_backend_cuda_create(be, 0);
            if (st == MT_OK) {
                char missing[512];
                if (mt_model_check_backend(r, be, missing, sizeof missing) == MT_OK) return MT_OK;
                snprintf(note, note_bytes, "note: a GPU is present but the CUDA backend lacks ops this model needs (%s); "
                         "training on the CPU backend", missing);
                mt_backend_destroy(be);
            }
        }
        st = mt_backend_cpu_create(be, threads);
        return st;
    }
    return mt_errorf(MT_ERR_CONFIG, "training.backend: unknown value %d", (int)r->training.backend);
}
