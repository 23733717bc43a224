/* opt_layout.h — where the optimizer state of one rank lives (pure): the flat parameter and
 * gradient buffers are cut into one region per gradient buffer (dense, expert: see
 * mt_grad_class), each padded so it splits into equal shards over its reduce group; with the
 * distributed optimizer (ZeRO-1) a rank owns one shard of each region, and its optimizer arrays
 * (fp32 master weights, Adam m and v) hold those shards back to back.
 * mt_opt_piece is the per-tensor view: the piece of a tensor this rank's optimizer owns. The
 * optimizer step, the master-weight init, the gradient norm and checkpoints all walk tensors
 * through it; nothing else intersects tensor ranges with shards. */
#ifndef MT_OPT_LAYOUT_H
#define MT_OPT_LAYOUT_H

#include <stddef.h>

#include "core/model/model_layout.h"

typedef struct {
    size_t begin, n;      /* elements [begin, begin + n) of the flat params / grads; n is a multiple of
                             shards * MT_PARAM_ALIGN (0: no tensor of this buffer on this rank) */
    int shards, shard;    /* optimizer shards of the region and the one this rank owns (1, 0: all) */
    size_t shard_n;       /* n / shards */
    size_t opt_begin;     /* where this rank's shard starts in the optimizer arrays */
} mt_grad_region;

typedef struct {
    mt_grad_region reg[MT_GBUFS];
    size_t n_flat;        /* length of the flat params / grads buffers */
    size_t n_opt;         /* length of the optimizer arrays (sum of the owned shards) */
} mt_opt_layout;

/* One piece of a tensor: flat elements [lo, hi) (within the tensor, all layers), at optimizer
 * index opt for lo. */
typedef struct {
    size_t lo, hi;
    size_t opt;
} mt_opt_piece;

/* shards[b] / shard[b]: the distributed optimizer's split of buffer b over its reduce group
 * (dense: dp x cp, expert: expert-dp), 1 / 0 without it. Errors: a buffer's tensors are not
 * contiguous in the layout, a shard index out of range. */
mt_status mt_opt_layout_build(const mt_param_layout *pl, const int shards[MT_GBUFS], const int shard[MT_GBUFS],
                              mt_opt_layout *ol);
/* The shard this rank owns of region b: flat [lo, lo + shard_n). */
static inline size_t mt_opt_shard_lo(const mt_opt_layout *ol, mt_grad_buffer_id b) {
    return ol->reg[b].begin + (size_t)ol->reg[b].shard * ol->reg[b].shard_n;
}
/* The piece of tensor ti this rank's optimizer owns; 0 when it owns none of it. */
int mt_opt_piece_of(const mt_param_layout *pl, const mt_opt_layout *ol, int ti, mt_opt_piece *p);
/* The same restricted to flat elements [lo, hi) (one layer's slice, for example). */
int mt_opt_piece_in(const mt_param_layout *pl, const mt_opt_layout *ol, int ti, size_t lo, size_t hi, mt_opt_piece *p);

#endif
