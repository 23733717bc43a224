/* backend_select.h — choose and create the backend a recipe asks for, and with it the device and
 * the communicator kind. The choice is a pure function (mt_placement_decide) of what is known about
 * the job and the machine (mt_placement_facts); mt_backend_select gathers those facts (loading the
 * CUDA module only when CUDA is wanted and not already ruled out), decides, and creates the backend.
 * The backend is chosen before the communicators: where its buffers live decides which
 * communicator carries them (parallel/comm_factory.h). */
#ifndef MT_BACKEND_SELECT_H
#define MT_BACKEND_SELECT_H

#include <stddef.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "parallel/comm_factory.h"

/* Everything the choice depends on (mt_backend_select fills it; tests write it by hand). */
typedef struct {
    mt_backend_kind requested;        /* training.backend: cpu | cuda | auto */
    int world_size;                   /* ranks in the job */
    int local_rank, local_size;       /* this rank on its node (LOCAL_RANK / LOCAL_WORLD_SIZE) */
    const char *cuda_visible_devices; /* $CUDA_VISIBLE_DEVICES; NULL = unset */
    int cuda_built;                   /* this build has the CUDA module */
    int cuda_loaded;                  /* the CUDA driver and the module loaded (asked only when needed) */
    const char *cuda_why;             /* why not, when built but not loaded */
    int n_gpus;                       /* devices the CUDA runtime counts (when loaded) */
    const char *gpus_why;             /* why none, when loaded and n_gpus == 0 */
    int nccl_available;               /* the module carries the NCCL communicator */
} mt_placement_facts;

typedef struct {
    int ok;                    /* 0: refused, `reason` says why and what to do */
    mt_backend_kind backend;   /* MT_BACKEND_CPU or MT_BACKEND_CUDA (when ok) */
    int device;                /* CUDA device index as CUDA_VISIBLE_DEVICES numbers them; -1 on the CPU */
    mt_comm_kind comm;         /* the communicator for this backend's buffers (used when world > 1) */
    int fell_back;             /* auto took the CPU although this build has CUDA: `reason` is worth printing */
    char reason[768];          /* "backend auto: no CUDA driver (...): using the CPU backend", ... */
} mt_placement;

/* How many devices CUDA_VISIBLE_DEVICES lets the runtime see at most: -1 when unset (no limit);
 * else the entries before the first invalid one, as the CUDA runtime reads it (a decimal index >= 0
 * not seen before, or a GPU-/MIG- UUID; "" or "-1" hide every device). */
int mt_cuda_visible_count(const char *value);

/* The choice, a pure function of the facts:
 *   cpu  -> the CPU backend;
 *   cuda -> CUDA on device local_rank (or local_rank mod the visible count when CUDA_VISIBLE_DEVICES
 *           binds each rank to its own GPU(s), as Slurm's --gpus-per-task does; NCCL then refuses two
 *           ranks on one device), else refused naming the reason: no CUDA in this build, no driver,
 *           no GPU visible, more local ranks than GPUs, or several ranks without NCCL;
 *   auto -> what cuda would give when that is not refused, else the CPU with the reason.
 * Communicator kind: shared memory for the CPU, NCCL for CUDA. */
void mt_placement_decide(const mt_placement_facts *f, mt_placement *out);

/* Gathers the facts for recipe r and this rank, decides, and creates the backend (CPU threads =
 * training.threads or cores / local_size). auto also falls back to the CPU when the CUDA backend
 * lacks an op the model needs. `note` receives a line worth printing (why auto took the CPU), ""
 * otherwise. A refusal is MT_ERR_CUDA (MT_ERR_UNSUPPORTED without CUDA in the build) with the
 * reason; an invalid placement MT_ERR_INTERNAL. */
mt_status mt_backend_select(const mt_recipe *r, int world_size, int local_rank, int local_size, mt_backend *be,
                            char *note, size_t note_bytes);

#endif
