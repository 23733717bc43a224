/* backend_select.c — picks the backend, device and communicator kind for a recipe
 * (training.backend cpu | cuda | auto) as a pure function of the facts (mt_placement_decide), then
 * gathers those facts and creates the backend (mt_backend_select). Selecting cuda where there is
 * none is an error naming the reason, never a crash; auto says why it took the CPU.
 * GPU placement: one GPU per local rank (device = local_rank, as torchrun / Megatron-LM do); more
 * local ranks than visible GPUs is an error for cuda and the CPU for auto (decided on local_size,
 * so every rank of a node decides the same way: never a mix of GPU and CPU ranks), unless
 * CUDA_VISIBLE_DEVICES binds each rank to its own GPUs (then local_rank mod the visible count).
 * The CUDA module is loaded only when CUDA is wanted and not already ruled out (the CPU path loads
 * no CUDA library). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend_cuda_module.h"
#include "train/backend_select.h"
#include "train/model.h"

/* one CUDA_VISIBLE_DEVICES entry [b, e): 1 = a valid index or UUID, with the index in *index (-1 for a UUID) */
static int visible_entry(const char *b, const char *e, long *index) {
    while (b < e && (*b == ' ' || *b == '\t')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if (e - b >= 4 && (!strncmp(b, "GPU-", 4) || !strncmp(b, "MIG-", 4))) {
        *index = -1;
        return 1;
    }
    if (b == e) return 0;
    long v = 0;
    for (const char *p = b; p < e; p++) {
        if (*p < '0' || *p > '9' || v > 1000000) return 0;
        v = v * 10 + (*p - '0');
    }
    *index = v;
    return 1;
}

int mt_cuda_visible_count(const char *value) {
    if (!value) return -1;
    int n = 0;
    long seen[64];
    int n_seen = 0;
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        long index;
        if (!visible_entry(p, end, &index)) break;
        int dup = 0;
        for (int k = 0; k < n_seen && index >= 0; k++) dup |= seen[k] == index;
        if (dup) break;
        if (index >= 0 && n_seen < 64) seen[n_seen++] = index;
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* Can this rank use CUDA? 1 with *device, else 0 with why. */
static int cuda_usable(const mt_placement_facts *f, int *device, char *why, size_t why_bytes) {
    const int visible = mt_cuda_visible_count(f->cuda_visible_devices);
    if (visible == 0) {
        snprintf(why, why_bytes, "CUDA_VISIBLE_DEVICES='%.64s' hides every GPU", f->cuda_visible_devices);
        return 0;
    }
    if (!f->cuda_built) {
        snprintf(why, why_bytes, "this mtrain was built without the CUDA backend (nvcc not found or CUDA=0; rebuild "
                 "with make CUDA=1 on a machine with the CUDA toolkit)");
        return 0;
    }
    if (!f->cuda_loaded) {
        snprintf(why, why_bytes, "%.500s", f->cuda_why ? f->cuda_why : "the CUDA module was not loaded");
        return 0;
    }
    const int n = f->n_gpus;
    if (n <= 0) {
        snprintf(why, why_bytes, "%.500s", f->gpus_why ? f->gpus_why : "no CUDA GPU visible");
        return 0;
    }
    if (f->local_size <= n) {
        *device = f->local_rank;
    } else if (visible > 0) {
        /* each rank sees its own n GPUs (Slurm --gpus-per-task, --gpu-bind): any of them is its own */
        *device = f->local_rank % n;
    } else {
        snprintf(why, why_bytes,
                 "%d ranks on this node but only %d CUDA device(s) visible (this is local rank %d, which would use "
                 "device %d); one GPU per local rank: launch at most %d rank(s) per node (torchrun --nproc-per-node "
                 "/ mtrain launch -n), or bind one GPU to each rank (CUDA_VISIBLE_DEVICES, Slurm --gpus-per-task=1)",
                 f->local_size, n, f->local_rank, f->local_rank, n);
        return 0;
    }
    if (f->world_size > 1 && !f->nccl_available) {
        snprintf(why, why_bytes, "%d ranks on the CUDA backend need the NCCL communicator, which this CUDA module "
                 "lacks (the shared-memory communicator cannot carry GPU buffers)", f->world_size);
        return 0;
    }
    return 1;
}

void mt_placement_decide(const mt_placement_facts *f, mt_placement *o) {
    memset(o, 0, sizeof *o);
    o->ok = 1;
    o->backend = MT_BACKEND_CPU;
    o->device = -1;
    o->comm = MT_COMM_SHM;
    if (f->local_size < 1 || f->local_rank < 0 || f->local_rank >= f->local_size || f->world_size < f->local_size) {
        o->ok = 0;
        snprintf(o->reason, sizeof o->reason, "local rank %d of local size %d (world %d) is not a valid placement",
                 f->local_rank, f->local_size, f->world_size);
        return;
    }
    if (f->requested == MT_BACKEND_CPU) {
        snprintf(o->reason, sizeof o->reason, "backend cpu: requested (training.backend: cpu)");
        return;
    }
    const int want_cuda = f->requested == MT_BACKEND_CUDA;
    char why[600];
    int device = -1;
    if (!cuda_usable(f, &device, why, sizeof why)) {
        if (want_cuda) {
            o->ok = 0;
            snprintf(o->reason, sizeof o->reason,
                     "training.backend=cuda (local rank %d): %s; run with --backend cpu (or training.backend: cpu)",
                     f->local_rank, why);
        } else {
            o->fell_back = f->cuda_built;
            snprintf(o->reason, sizeof o->reason, "backend auto: %s: using the CPU backend", why);
        }
        return;
    }
    o->backend = MT_BACKEND_CUDA;
    o->device = device;
    o->comm = MT_COMM_NCCL;
    snprintf(o->reason, sizeof o->reason, "backend %s: CUDA device %d of %d for local rank %d of %d%s",
             want_cuda ? "cuda" : "auto", device, f->n_gpus, f->local_rank, f->local_size,
             f->world_size > 1 ? ", NCCL communicators" : "");
}

static int cpu_threads(const mt_recipe *r, int local_size) {
    int threads = r->training.threads;
    if (threads > 0) return threads;
    int cores = 0;
#ifdef _SC_NPROCESSORS_ONLN
    cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
    if (cores < 1) cores = 1;
    threads = cores / local_size;
    return threads < 1 ? 1 : threads;
}

mt_status mt_backend_select(const mt_recipe *r, int world_size, int local_rank, int local_size, mt_backend *be,
                            char *note, size_t note_bytes) {
    char cuda_why[1024] = "", gpus_why[512] = "";
    mt_placement_facts f = {
        .requested = r->training.backend,
        .world_size = world_size,
        .local_rank = local_rank,
        .local_size = local_size,
        .cuda_visible_devices = getenv("CUDA_VISIBLE_DEVICES"),
    };
    note[0] = 0;
    if (r->training.backend != MT_BACKEND_CPU && r->training.backend != MT_BACKEND_CUDA &&
        r->training.backend != MT_BACKEND_AUTO)
        return mt_errorf(MT_ERR_CONFIG, "training.backend: unknown value %d", (int)r->training.backend);
#ifdef MT_HAVE_CUDA
    f.cuda_built = 1;
#endif
    /* the facts that cost something (opening the driver and the module) only when they can matter */
    if (f.requested != MT_BACKEND_CPU && f.cuda_built && mt_cuda_visible_count(f.cuda_visible_devices) != 0 &&
        local_size >= 1) {
        const mt_cuda_module *m = NULL;
        if (mt_cuda_driver_present(cuda_why, sizeof cuda_why)) m = mt_cuda_module_get(cuda_why, sizeof cuda_why);
        if (m) {
            f.cuda_loaded = 1;
            f.n_gpus = m->device_count(gpus_why, sizeof gpus_why);
            f.gpus_why = gpus_why;
            f.nccl_available = m->nccl_world_create != NULL;
        } else {
            f.cuda_why = cuda_why;
        }
    }
    mt_placement p;
    mt_placement_decide(&f, &p);
    if (!p.ok) {
        if (f.local_size < 1 || f.local_rank < 0 || f.local_rank >= f.local_size || f.world_size < f.local_size)
            return mt_errorf(MT_ERR_INTERNAL, "mt_backend_select: %s", p.reason);
        return mt_errorf(f.cuda_built ? MT_ERR_CUDA : MT_ERR_UNSUPPORTED, "%s", p.reason);
    }
    const int threads = cpu_threads(r, local_size);
    if (p.backend == MT_BACKEND_CPU) {
        if (p.fell_back) snprintf(note, note_bytes, "note: %s", p.reason);
        return mt_backend_cpu_create(be, threads);
    }
    mt_status st = mt_backend_cuda_create(be, p.device);
    if (st != MT_OK && f.requested == MT_BACKEND_CUDA)
        return mt_error_context(st, "training.backend=cuda (local rank %d): ", local_rank);
    if (st != MT_OK) {
        snprintf(note, note_bytes, "note: backend auto: creating the CUDA backend on device %d failed (%.600s): "
                 "using the CPU backend", p.device, mt_last_error());
        return mt_backend_cpu_create(be, threads);
    }
    if (f.requested == MT_BACKEND_AUTO) {
        char missing[512];
        if (mt_model_check_backend(r, be, missing, sizeof missing) != MT_OK) {
            snprintf(note, note_bytes, "note: backend auto: a GPU is present but the CUDA backend lacks ops this model "
                     "needs (%s): using the CPU backend", missing);
            mt_backend_destroy(be);
            return mt_backend_cpu_create(be, threads);
        }
    }
    return MT_OK;
}
