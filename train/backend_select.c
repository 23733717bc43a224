/* backend_select.c — picks the backend for a recipe: training.backend cpu | cuda | auto
 * (auto = CUDA when a GPU is present AND the CUDA backend has every op the model needs,
 * else CPU, saying why). Selecting cuda where there is none is an error, never a crash.
 * GPU placement: one GPU per local rank (device = local_rank, as torchrun / Megatron-LM do);
 * more local ranks than visible GPUs is an error for cuda and the CPU (with a note) for auto,
 * never two ranks sharing a device. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train/backend_select.h"
#include "train/model.h"

/* Every local rank gets its own GPU: 0 when the node shows fewer GPUs than it has ranks
 * (tested on local_size, not local_rank, so every rank of the node decides the same way and
 * none is left waiting for a peer that failed); then `msg` says so. n == 0 (no GPU) passes:
 * mt_backend_cuda_create reports it. */
static int enough_gpus(int local_rank, int local_size, const char *key, char *msg, size_t msg_bytes) {
    const int n = mt_cuda_device_count();
    if (n == 0 || local_size <= n) return 1;
    snprintf(msg, msg_bytes,
             "%s: %d ranks on this node but only %d CUDA device(s) visible (this is local rank %d, which would "
             "use device %d); one GPU per local rank: launch at most %d rank(s) per node (torchrun "
             "--nproc-per-node / mtrain --world), check CUDA_VISIBLE_DEVICES, or use --backend cpu",
             key, local_size, n, local_rank, local_rank, n);
    return 0;
}

mt_status mt_backend_select(const mt_recipe *r, int local_rank, int local_size, mt_backend *be, char *note,
                            size_t note_bytes) {
    char why[512] = "", msg[768];
    mt_status st;
    note[0] = 0;
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return mt_errorf(MT_ERR_INTERNAL, "mt_backend_select: local rank %d of local size %d is not a valid placement",
                         local_rank, local_size);
    int threads = r->training.threads;
    if (threads <= 0) {
        int cores = 0;
#ifdef _SC_NPROCESSORS_ONLN
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
        if (cores < 1) cores = 1;
        threads = cores / local_size;
        if (threads < 1) threads = 1;
    }
    switch (r->training.backend) {
    case MT_BACKEND_CPU:
        return mt_backend_cpu_create(be, threads);
    case MT_BACKEND_CUDA:
        if (!enough_gpus(local_rank, local_size, "training.backend=cuda", msg, sizeof msg))
            return mt_errorf(MT_ERR_CUDA, "%s", msg);
        st = mt_backend_cuda_create(be, local_rank);
        if (st != MT_OK) return mt_error_context(st, "training.backend=cuda (local rank %d): ", local_rank);
        return MT_OK;
    case MT_BACKEND_AUTO:
        if (mt_cuda_available(why, sizeof why)) {
            if (!enough_gpus(local_rank, local_size, "training.backend=auto", msg, sizeof msg)) {
                /* every rank of the node takes the CPU: no mix of GPU and CPU ranks */
                snprintf(note, note_bytes, "note: %s; training on the CPU backend", msg);
                return mt_backend_cpu_create(be, threads);
            }
            st = mt_backend_cuda_create(be, local_rank);
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
