/* opt_layout.c — the optimizer-state layout of opt_layout.h. Pure: no allocation, no I/O.
 * Regions follow each other in buffer order; region b starts at the padded end of region b-1 or
 * at its first tensor's offset, whichever is later, so a layout that keeps each buffer's tensors
 * together gives regions that hold exactly their tensors (and the padding, zeros). */
#include "core/model/opt_layout.h"

#include <string.h>

mt_status mt_opt_layout_build(const mt_param_layout *pl, const int shards[MT_GBUFS], const int shard[MT_GBUFS],
                              mt_opt_layout *ol) {
    memset(ol, 0, sizeof *ol);
    size_t cursor = 0;
    for (int b = 0; b < MT_GBUFS; b++) {
        mt_grad_region *g = &ol->reg[b];
        if (shards[b] < 1 || shard[b] < 0 || shard[b] >= shards[b])
            return mt_errorf(MT_ERR_INTERNAL, "optimizer layout: shard %d of %d for gradient buffer %d", shard[b],
                             shards[b], b);
        g->shards = shards[b];
        g->shard = shard[b];
        size_t lo = (size_t)-1, hi = 0;
        for (int ti = 0; ti < pl->n_tensors; ti++) {
            const mt_param_tensor *t = &pl->t[ti];
            if ((int)mt_grad_class_buffer(t->gclass) != b) continue;
            if (t->offset < lo) lo = t->offset;
            if (t->offset + t->n > hi) hi = t->offset + t->n;
        }
        if (hi == 0) { /* no tensor of this buffer */
            g->begin = cursor;
            continue;
        }
        if (b == 0) lo = 0;
        if (lo < cursor)
            return mt_errorf(MT_ERR_INTERNAL, "optimizer layout: gradient buffer %d starts at element %zu, inside "
                             "the previous one (ends at %zu): the layout must keep each buffer's tensors together",
                             b, lo, cursor);
        for (int ti = 0; ti < pl->n_tensors; ti++) { /* no other buffer's tensor inside [lo, hi) */
            const mt_param_tensor *t = &pl->t[ti];
            if ((int)mt_grad_class_buffer(t->gclass) != b && t->offset < hi && t->offset + t->n > lo)
                return mt_errorf(MT_ERR_INTERNAL, "optimizer layout: tensor %s lies inside gradient buffer %d",
                                 t->name, b);
        }
        const size_t unit = (size_t)shards[b] * MT_PARAM_ALIGN;
        g->begin = lo;
        g->n = (hi - lo + unit - 1) / unit * unit;
        g->shard_n = g->n / (size_t)shards[b];
        g->opt_begin = ol->n_opt;
        ol->n_opt += g->shard_n;
        cursor = g->begin + g->n;
    }
    ol->n_flat = cursor;
    return MT_OK;
}

int mt_opt_piece_in(const mt_param_layout *pl, const mt_opt_layout *ol, int ti, size_t lo, size_t hi, mt_opt_piece *p) {
    const mt_param_tensor *t = &pl->t[ti];
    const mt_grad_buffer_id b = mt_grad_class_buffer(t->gclass);
    const mt_grad_region *g = &ol->reg[b];
    const size_t s_lo = mt_opt_shard_lo(ol, b), s_hi = s_lo + g->shard_n;
    if (lo < t->offset) lo = t->offset;
    if (hi > t->offset + t->n) hi = t->offset + t->n;
    if (lo < s_lo) lo = s_lo;
    if (hi > s_hi) hi = s_hi;
    if (hi <= lo) return 0;
    p->lo = lo;
    p->hi = hi;
    p->opt = g->opt_begin + (lo - s_lo);
    return 1;
}

int mt_opt_piece_of(const mt_param_layout *pl, const mt_opt_layout *ol, int ti, mt_opt_piece *p) {
    return mt_opt_piece_in(pl, ol, ti, 0, (size_t)-1, p);
}
