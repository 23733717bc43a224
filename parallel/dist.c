/* dist.c — builds a rank's communicators from the bootstrap and the recipe's layout:
 * world (shared memory on the CPU backend) and the dp, tp, pp and embedding groups split from it by the
 * grid's (color, key), in Megatron's order (tp fastest: a tp group is consecutive ranks). */
#include "parallel/dist.h"

#include <stdio.h>
#include <string.h>

#include "parallel/comm_shm.h"

mt_status mt_dist_bootstrap(mt_dist *d, int timeout_s) {
    memset(d, 0, sizeof *d);
    mt_status st = mt_bootstrap_init(&d->bs, timeout_s);
    if (st != MT_OK) return st;
    d->have_bs = 1;
    d->rank = d->bs.rank;
    d->size = d->bs.size;
    d->local_rank = d->bs.local_rank;
    d->local_size = d->bs.local_size;
    snprintf(d->prefix, sizeof d->prefix, "[r%d]", d->rank);
    return MT_OK;
}

mt_status mt_dist_setup(mt_dist *d, const mt_recipe *r) {
    mt_status st = MT_OK;
    const mt_parallel_cfg *p = &r->parallel;
    int color, key;
    MT_CHECK(mt_grid_init(&d->grid, d->size, p->tensor, p->context, 1, p->data, p->pipeline));
    MT_CHECK(mt_grid_coords(&d->grid, d->rank, d->coord));
    mt_grid_prefix(&d->grid, d->rank, d->prefix, sizeof d->prefix);
    MT_CHECK(mt_comm_shm_init(&d->bs, p->timeout_s, &d->world));
    MT_CHECK(mt_grid_color_key(&d->grid, MT_GRID_DP, d->rank, &color, &key));
    MT_CHECK(d->world->i->split(d->world, color, key, &d->dp));
    MT_CHECK(mt_grid_color_key(&d->grid, MT_GRID_TP, d->rank, &color, &key));
    MT_CHECK(d->world->i->split(d->world, color, key, &d->tp));
    if (d->grid.pp > 1) { /* every rank agrees on pp, so every rank makes these splits */
        MT_CHECK(mt_grid_color_key(&d->grid, MT_GRID_PP, d->rank, &color, &key));
        MT_CHECK(d->world->i->split(d->world, color, key, &d->pp));
        MT_CHECK(mt_grid_embedding_color_key(&d->grid, d->rank, &color, &key));
        MT_CHECK(d->world->i->split(d->world, color, key, &d->emb));
    }
out:
    return st;
}

void mt_dist_abort(mt_dist *d) {
    if (d->world) d->world->i->abort(d->world);
}

void mt_dist_free(mt_dist *d) {
    if (d->emb) d->emb->i->destroy(d->emb);
    if (d->pp) d->pp->i->destroy(d->pp);
    if (d->tp) d->tp->i->destroy(d->tp);
    if (d->dp) d->dp->i->destroy(d->dp);
    if (d->world) d->world->i->destroy(d->world);
    if (d->have_bs && d->bs.finalize) d->bs.finalize(&d->bs);
    memset(d, 0, sizeof *d);
}
