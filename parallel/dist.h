/* dist.h — a rank's place in the job: the bootstrap, the world communicator, the layout grid
 * (tp-cp-ep-dp-pp) and the communicators of its groups. One per process; cmd/ creates it
 * before validating the recipe (the world size comes from the launcher). */
#ifndef MT_DIST_H
#define MT_DIST_H

#include "core/recipe/recipe.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/grid.h"

typedef struct {
    mt_bootstrap bs;
    int have_bs;
    int rank, size, local_rank, local_size;
    mt_grid grid;
    int coord[MT_AXES];
    mt_comm *world;  /* all ranks */
    mt_comm *dp;     /* ranks holding the same model shard (data-parallel replicas) */
    mt_comm *tp;     /* ranks sharing one model replica's tensors (tensor-parallel group; tp fastest) */
    mt_comm *pp;     /* the pipeline group (rank = stage); NULL when pp = 1 */
    mt_comm *emb;    /* embedding group: first and last stage (tied embeddings); NULL on middle
                        stages and when pp = 1 */
    char prefix[64]; /* "[r3 tp1 pp0 dp1]" for log lines */
} mt_dist;

/* Finds the launcher (PMIx, env://, or none) and fills rank / size. */
mt_status mt_dist_bootstrap(mt_dist *d, int timeout_s);
/* With the validated recipe: the grid, the world communicator and the group communicators. */
mt_status mt_dist_setup(mt_dist *d, const mt_recipe *r);
/* On a failure path: makes every peer's pending and future collectives fail promptly. */
void mt_dist_abort(mt_dist *d);
void mt_dist_free(mt_dist *d);

#endif
