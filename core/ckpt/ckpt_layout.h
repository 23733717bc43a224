/* ckpt_layout.h — where each piece of a checkpoint comes from and goes to (pure: no I/O).
 * A checkpoint stores every logical tensor in global coordinates: a stacked per-layer tensor
 * has the global shape (model.layers, full_rows, full_cols), any other (1, full_rows, full_cols);
 * an MoE expert tensor (model.layers * experts, full_rows, full_cols): slice l * E + e is expert e of
 * layer l, so a save at one expert-parallel size loads at any other.
 * A rank's local copy of a tensor (model_layout.h: a tp shard of a pipeline stage's layers) is a
 * list of boxes: hyper-rectangles of the global tensor, each of which is one contiguous run of
 * the local storage in row-major order (a model chunk's layers x one sharded block, or one layer
 * x one block when a tensor has several blocks, e.g. qkv's Q, K, V).
 * A piece is a box and a flat range [f0, f1) of its elements in row-major order (Megatron-Core's
 * ShardedTensor with a flattened_range): the distributed optimizer's shards cut tensors at any
 * element, and a piece still says exactly which global elements it holds.
 * Who writes what (each element of each kind exactly once in the whole job): tensors replicated
 * over tp are written by tp rank 0 only, the last stage's copy of a tied embedding never; every
 * gradient buffer's flat range is split over its data-parallel group (the distributed
 * optimizer's own shards, or equal parts of the buffer without it), so the dp ranks share the
 * writing. Rank files are "rank_%05d.safetensors" by world rank. */
#ifndef MT_CKPT_LAYOUT_H
#define MT_CKPT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/model/model_layout.h"
#include "core/model/opt_layout.h"

/* What a piece holds: weights in the compute dtype, and the optimizer's fp32 state (master
 * weights are saved only when the compute dtype is not fp32: otherwise the weights are them). */
typedef enum { MT_CK_WEIGHT = 0, MT_CK_MASTER, MT_CK_EXP_AVG, MT_CK_EXP_AVG_SQ, MT_CK_KINDS } mt_ckpt_kind;
const char *mt_ckpt_kind_name(mt_ckpt_kind k); /* "weight", "master", "exp_avg", "exp_avg_sq" */
int mt_ckpt_kind_find(const char *name);       /* -1 when unknown */

typedef struct {
    size_t local_off;   /* element offset of the box's first element in the local tensor */
    size_t n;           /* elements: nl * nr * nc */
    int l0, nl;         /* global layers */
    int r0, nr;         /* full rows */
    int c0, nc;         /* full columns */
} mt_ckpt_box;

/* Global shape of tensor ti: layers (model.layers when stacked, else 1), full rows and cols. */
void mt_ckpt_global_shape(const mt_param_layout *pl, int ti, int64_t shape[3]);
/* The boxes of tensor ti on tp rank tp_rank of the layout's stage: up to max written to boxes
 * (may be NULL), the count returned. They cover the local tensor exactly, in local order. */
int mt_ckpt_boxes(const mt_param_layout *pl, int ti, int tp_rank, mt_ckpt_box *boxes, int max);

/* One rank's coordinates, as far as checkpoints care. */
typedef struct {
    int rank;                 /* world rank (its file) */
    int tp_rank, stage;
    int shards[MT_GBUFS];     /* distributed optimizer shards per gradient buffer (1 without) */
    int shard[MT_GBUFS];
    int dp_size[MT_GBUFS];    /* the buffer's reduce group (dense: dp x cp, expert: expert-dp) */
    int dp_rank[MT_GBUFS];
} mt_ckpt_rank;

/* A piece one rank writes. */
typedef struct {
    int ti;                   /* tensor index in the rank's layout */
    mt_ckpt_kind kind;
    mt_ckpt_box box;
    size_t f0, f1;            /* flat range within the box */
    size_t flat;              /* flat-buffer element index of the piece's first element */
    size_t opt;               /* optimizer-array index of it (optimizer kinds) */
    uint64_t n_bytes;
} mt_ckpt_piece;

/* The pieces rank `rk` writes, in file order (by tensor, then kind, then box): up to max into
 * out (may be NULL); the count is returned. act: the compute dtype (weights' bytes, and whether
 * master pieces exist). pl / ol: that rank's layouts. (size_t)-1 when a tensor has more boxes than
 * the writer handles (4096: more than 3 x 1024 layers). */
size_t mt_ckpt_rank_pieces(const mt_param_layout *pl, const mt_opt_layout *ol, const mt_ckpt_rank *rk,
                           mt_dtype act, mt_ckpt_piece *out, size_t max);

/* Intersection of a source piece with a destination box, as runs of consecutive elements along
 * the columns: calls fn(ctx, src_elem, dst_elem, n) for each run, src_elem counted from the
 * piece's first element (f0), dst_elem from the box's first element. Returns the elements covered. */
typedef void (*mt_ckpt_run_fn)(void *ctx, size_t src_elem, size_t dst_elem, size_t n);
size_t mt_ckpt_intersect(const mt_ckpt_box *src, size_t f0, size_t f1, const mt_ckpt_box *dst, mt_ckpt_run_fn fn,
                         void *ctx);

#endif
