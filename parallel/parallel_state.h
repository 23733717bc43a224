/* parallel_state.h — one rank's place in the job, in one struct (Megatron-Core's parallel_state in
 * spirit): the bootstrap, both grids (dense {tp, cp, dp, pp} and expert {etp, ep, edp, pp}), and
 * for every process group this rank's index in it, the group's size and its communicator.
 * Built once by mt_pstate_setup from the grid; every communicator comes from the factory
 * (parallel/comm_factory.h). Code that needs a group asks for it by id (mt_pstate_group), never by
 * a field of its own: adding an axis is a new id here, its mask in parallel_state.c, and its users.
 * Conventions:
 *   - a group of size 1 has comm == NULL (nothing to communicate; callers test size, not comm);
 *   - a rank outside a group (the embedding group on a middle pipeline stage) has member == 0,
 *     size 1 and comm == NULL;
 *   - groups with the same ranks share one communicator (dp and dp x cp while cp = 1, expert-tp
 *     and tp while ep = 1, ...): one set of shared-memory segments, one NCCL communicator.
 * Who logs: Megatron's rule, one rank per job: the last pipeline stage with tp, cp and dp
 * coordinates 0 (that rank holds the loss); `logger` says whether it is this one. */
#ifndef MT_PARALLEL_STATE_H
#define MT_PARALLEL_STATE_H

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/grid.h"

typedef enum {
    MT_PG_WORLD = 0,
    MT_PG_TP,    /* tensor parallel: ranks sharing one replica's tensors (tp fastest: consecutive ranks) */
    MT_PG_CP,    /* context parallel */
    MT_PG_DP,    /* data parallel: replicas of the same shard */
    MT_PG_DP_CP, /* data x context parallel: dense gradients are summed and the distributed
                    optimizer shards over it */
    MT_PG_PP,    /* pipeline: rank in the group = stage */
    MT_PG_EMB,   /* embedding group: first and last stage (tied embeddings); pp > 1 only */
    MT_PG_EP,    /* expert parallel (expert grid) */
    MT_PG_ETP,   /* expert tensor parallel (expert grid) */
    MT_PG_EDP,   /* expert data parallel (expert grid): expert gradients are summed and their
                    optimizer state sharded over it */
    MT_PG_COUNT
} mt_pgroup;

typedef struct {
    int size;     /* ranks in the group (1 when trivial or when this rank is not a member) */
    int rank;     /* this rank's index in it (Megatron's order) */
    int member;   /* 0: this rank belongs to no group of this kind (embedding group, middle stage) */
    mt_comm *comm;/* NULL when size == 1 */
    int owner;    /* 1: this entry created comm (others alias it) */
} mt_group;

typedef struct {
    mt_bootstrap bs;
    int have_bs;
    int rank, size, local_rank, local_size;
    mt_grid grid;            /* dense grid (ep = 1) */
    mt_grid egrid;           /* expert grid: tp field = etp, dp field = edp, cp = 1 */
    int coord[MT_AXES];      /* dense coordinates of this rank */
    int ecoord[MT_AXES];     /* expert-grid coordinates */
    mt_group g[MT_PG_COUNT];
    int logger;              /* this rank prints the job's log lines */
    char prefix[64];         /* "[r3 tp1 pp0 dp1]" for log lines ("[r3]" before setup) */
} mt_parallel_state;

/* Finds the launcher (PMIx, env://, or none) and fills rank, size, local rank / size. */
mt_status mt_pstate_bootstrap(mt_parallel_state *ps, int timeout_s);
/* A one-rank state without a bootstrap (tests, tools): every group of size 1, this rank logs. */
void mt_pstate_single(mt_parallel_state *ps);
/* With the validated recipe and the backend chosen: both grids, and the world and group
 * communicators from the factory. The backend's memory decides the kind: host memory -> shared
 * memory, device memory -> NCCL on the backend's device and stream. Collective over all ranks. */
mt_status mt_pstate_setup(mt_parallel_state *ps, const mt_recipe *r, mt_backend *be);
/* The same over a world communicator made elsewhere (tests that fork their ranks: the state takes
 * ownership of world; rank and size come from it; NULL: one rank). */
mt_status mt_pstate_setup_world(mt_parallel_state *ps, const mt_recipe *r, mt_comm *world);
/* The group `id` of this rank. */
static inline const mt_group *mt_pstate_group(const mt_parallel_state *ps, mt_pgroup id) { return &ps->g[id]; }
/* On a failure path: makes every peer's pending and future collectives fail promptly, in every
 * group, with this rank's error (mt_last_error) as the reason the peers on shared memory report. */
void mt_pstate_abort(mt_parallel_state *ps);
void mt_pstate_free(mt_parallel_state *ps);
/* The same without the bootstrap's finalize handshake, for a job its launcher is tearing down
 * (OpenMPI's mpirun answers SIGTERM by aborting: it stops serving PMIx and later SIGKILLs ranks
 * still waiting in PMIx_Finalize). The caller exits at once afterwards. */
void mt_pstate_free_without_finalize(mt_parallel_state *ps);

#endif
