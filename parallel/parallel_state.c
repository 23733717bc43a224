/* parallel_state.c — builds a rank's parallel state (see parallel_state.h): the grids from the
 * validated recipe, then one communicator per distinct group, split from the world communicator
 * by the grid's (color, key) — Megatron's groups in Megatron's rank order. */
#include "parallel/parallel_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_factory.h"

/* Each group: which grid and which axes vary inside it. MT_PG_EMB is the embedding rule. */
static const struct {
    const char *name;
    int expert_grid;
    unsigned mask;
} k_groups[MT_PG_COUNT] = {
    [MT_PG_WORLD] = {"world", 0, MT_GRID_ALL},
    [MT_PG_TP] = {"tp", 0, MT_GRID_TP},
    [MT_PG_CP] = {"cp", 0, MT_GRID_CP},
    [MT_PG_DP] = {"dp", 0, MT_GRID_DP},
    [MT_PG_DP_CP] = {"dp-cp", 0, MT_GRID_DP | MT_GRID_CP},
    [MT_PG_PP] = {"pp", 0, MT_GRID_PP},
    [MT_PG_EMB] = {"embedding", 0, 0},
    [MT_PG_EP] = {"ep", 1, MT_GRID_EP},
    [MT_PG_ETP] = {"expert-tp", 1, MT_GRID_TP},
    [MT_PG_EDP] = {"expert-dp", 1, MT_GRID_DP},
};

static void groups_trivial(mt_parallel_state *ps) {
    for (int i = 0; i < MT_PG_COUNT; i++) ps->g[i] = (mt_group){.size = 1, .rank = 0, .member = 1};
    ps->g[MT_PG_EMB].member = 0;
}

mt_status mt_pstate_bootstrap(mt_parallel_state *ps, int timeout_s) {
    memset(ps, 0, sizeof *ps);
    groups_trivial(ps);
    mt_status st = mt_bootstrap_init(&ps->bs, timeout_s);
    if (st != MT_OK) return st;
    ps->have_bs = 1;
    ps->rank = ps->bs.rank;
    ps->size = ps->bs.size;
    ps->local_rank = ps->bs.local_rank;
    ps->local_size = ps->bs.local_size;
    snprintf(ps->prefix, sizeof ps->prefix, "[r%d]", ps->rank);
    return MT_OK;
}

void mt_pstate_single(mt_parallel_state *ps) {
    memset(ps, 0, sizeof *ps);
    groups_trivial(ps);
    ps->size = ps->local_size = 1;
    mt_grid_init(&ps->grid, 1, 1, 1, 1, 1, 1);
    mt_grid_init(&ps->egrid, 1, 1, 1, 1, 1, 1);
    ps->logger = 1;
    snprintf(ps->prefix, sizeof ps->prefix, "[r0]");
}

/* Ranks of group id containing this rank, in key order; *n = 0 when not a member. */
static mt_status group_ranks(const mt_parallel_state *ps, mt_pgroup id, int *ranks, int *n) {
    if (id == MT_PG_EMB) {
        int color, key;
        mt_status st = mt_grid_embedding_color_key(&ps->grid, ps->rank, &color, &key);
        if (st != MT_OK) return st;
        if (color < 0) {
            *n = 0;
            return MT_OK;
        }
        return mt_grid_embedding_ranks(&ps->grid, ps->rank, ranks, n);
    }
    const mt_grid *g = k_groups[id].expert_grid ? &ps->egrid : &ps->grid;
    return mt_grid_group_ranks(g, k_groups[id].mask, ps->rank, ranks, n);
}

mt_status mt_pstate_setup(mt_parallel_state *ps, const mt_recipe *r, mt_backend *be) {
    mt_comm *world = NULL;
    mt_status st = mt_comm_world_create(mt_comm_kind_for(be->host_memory), &ps->bs, be, r->parallel.timeout_s, &world);
    if (st != MT_OK) return st;
    return mt_pstate_setup_world(ps, r, world);
}

mt_status mt_pstate_setup_world(mt_parallel_state *ps, const mt_recipe *r, mt_comm *world) {
    mt_status st = MT_OK;
    const mt_parallel_cfg *p = &r->parallel;
    int *ranks = NULL;
    if (world) {
        ps->rank = world->rank;
        ps->size = world->size;
    } else if (ps->size <= 0) {
        ps->size = 1;
    }
    ps->g[MT_PG_WORLD] = (mt_group){.size = ps->size, .rank = ps->rank, .member = 1, .comm = world, .owner = 1};
    /* the recipe is validated for this world size (mt_recipe_validate: tp*pp*cp*dp = world) */
    MT_CHECK(mt_grid_dense(&ps->grid, ps->size, p->tensor, p->context, p->pipeline));
    MT_CHECK(mt_grid_expert(&ps->egrid, ps->size, p->tensor, p->expert > 0 ? p->expert : 1, p->pipeline));
    MT_CHECK(mt_grid_coords(&ps->grid, ps->rank, ps->coord));
    MT_CHECK(mt_grid_coords(&ps->egrid, ps->rank, ps->ecoord));
    mt_grid_prefix(&ps->grid, ps->rank, ps->prefix, sizeof ps->prefix);
    ps->logger = ps->coord[MT_AX_TP] == 0 && ps->coord[MT_AX_CP] == 0 && ps->coord[MT_AX_DP] == 0 &&
                 ps->coord[MT_AX_PP] == ps->grid.pp - 1;

    /* member lists of every group, to share one communicator between groups with the same ranks
     * (a property of the grid sizes, so every rank makes the same decision and the same splits) */
    const int W = ps->size;
    ranks = calloc((size_t)MT_PG_COUNT * W, sizeof *ranks);
    int n_of[MT_PG_COUNT] = {0};
    if (!ranks) {
        st = mt_errorf(MT_ERR_OOM, "parallel state: group tables for %d ranks", W);
        goto out;
    }
    for (int id = 0; id < MT_PG_COUNT; id++) MT_CHECK(group_ranks(ps, (mt_pgroup)id, ranks + (size_t)id * W, &n_of[id]));
    for (int id = MT_PG_WORLD + 1; id < MT_PG_COUNT; id++) {
        mt_group *g = &ps->g[id];
        const int *mine = ranks + (size_t)id * W;
        const int n = n_of[id];
        g->member = n > 0;
        g->size = n > 0 ? n : 1;
        g->rank = 0;
        for (int k = 0; k < n; k++)
            if (mine[k] == ps->rank) g->rank = k;
        g->comm = NULL;
        g->owner = 0;
        /* the split is collective over the world: decided from the group's size on ANY rank,
         * so a non-member of the embedding group still takes part (with color -1) */
        int global_size = id == MT_PG_EMB ? (ps->grid.pp > 1 ? 2 : 1) : n;
        if (global_size <= 1) continue;
        /* an embedding group is another group's ranks only when it is the whole pipeline (pp = 2);
         * for pp > 2 a member's list could match nothing on one rank and something on another */
        int same = -1;
        for (int j = MT_PG_WORLD; j < id && same < 0 && (id != MT_PG_EMB || ps->grid.pp == 2); j++)
            if (n_of[j] == n && !memcmp(ranks + (size_t)j * W, mine, (size_t)n * sizeof *mine)) same = j;
        if (same >= 0) {
            g->comm = ps->g[same].comm;
            continue;
        }
        int color = 0, key = 0;
        if (id == MT_PG_EMB) {
            MT_CHECK(mt_grid_embedding_color_key(&ps->grid, ps->rank, &color, &key));
        } else {
            MT_CHECK(mt_grid_color_key(k_groups[id].expert_grid ? &ps->egrid : &ps->grid, k_groups[id].mask,
                                       ps->rank, &color, &key));
        }
        MT_CHECK(mt_comm_group_create(world, color, key, &g->comm));
        g->owner = g->comm != NULL;
        if (g->member && (!g->comm || g->comm->size != g->size || g->comm->rank != g->rank)) {
            st = mt_errorf(MT_ERR_INTERNAL, "parallel state: %s group of %d ranks got a communicator of %d (rank %d)",
                           k_groups[id].name, g->size, g->comm ? g->comm->size : 0, g->comm ? g->comm->rank : -1);
            goto out;
        }
    }
out:
    free(ranks);
    return st;
}

/* The world first, then every group this state made: a shared-memory or NCCL world's abort
 * reaches its groups anyway (one family; a second abort is a no-op), but a Gloo world's reaches
 * only its Gloo groups, while its node-local groups are shared-memory families of their own.
 * Aborting them here records this rank's error (mt_last_error, e.g. "lost node mtnode1") as the
 * reason their members report ("rank R (pid P) aborted: ..."), before this rank exits; without
 * it a tp peer on this node would see only "rank R died" and never the cause. */
void mt_pstate_abort(mt_parallel_state *ps) {
    for (int id = MT_PG_WORLD; id < MT_PG_COUNT; id++)
        if (ps->g[id].owner && ps->g[id].comm) ps->g[id].comm->i->abort(ps->g[id].comm);
}

static void free_state(mt_parallel_state *ps, int finalize) {
    for (int id = MT_PG_COUNT - 1; id >= 0; id--)
        if (ps->g[id].owner && ps->g[id].comm) ps->g[id].comm->i->destroy(ps->g[id].comm);
    if (finalize && ps->have_bs && ps->bs.finalize) ps->bs.finalize(&ps->bs);
    memset(ps, 0, sizeof *ps);
    groups_trivial(ps);
}

void mt_pstate_free(mt_parallel_state *ps) { free_state(ps, 1); }
void mt_pstate_free_without_finalize(mt_parallel_state *ps) { free_state(ps, 0); }
