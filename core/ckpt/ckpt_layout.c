/* ckpt_layout.c — the pure checkpoint geometry of ckpt_layout.h: boxes of a local tensor,
 * the pieces a rank writes, and the intersection of a piece with a box. No allocation, no I/O:
 * the writer, the manifest (every rank's pieces, computed on rank 0) and the loader all call
 * these, so what is written and what is described cannot disagree. */
#include "core/ckpt/ckpt_layout.h"

#include <string.h>

static const char *const kind_names[MT_CK_KINDS] = {"weight", "master", "exp_avg", "exp_avg_sq"};

const char *mt_ckpt_kind_name(mt_ckpt_kind k) { return k >= 0 && k < MT_CK_KINDS ? kind_names[k] : "?"; }

int mt_ckpt_kind_find(const char *name) {
    for (int k = 0; k < MT_CK_KINDS; k++)
        if (!strcmp(name, kind_names[k])) return k;
    return -1;
}

void mt_ckpt_global_shape(const mt_param_layout *pl, int ti, int64_t shape[3]) {
    const mt_param_tensor *t = &pl->t[ti];
    const int64_t n = mt_param_global_layers(pl, ti); /* every layer, or the layers of its kind */
    shape[0] = t->stacked ? (t->experts_r ? n * pl->E : n) : 1;
    shape[1] = t->full_rows;
    shape[2] = t->full_cols;
}

/* one block of the sharded axis: global start, local start, length */
typedef struct {
    int g0, loc0, n;
} axis_block;

static int axis_blocks(const mt_param_tensor *t, int tp, int tp_rank, axis_block *ab) {
    if (t->shard == MT_SHARD_NONE) { /* one box of the whole slice (mt_ckpt_boxes) */
        ab[0] = (axis_block){0, 0, 0};
        return 1;
    }
    int full_base = 0, loc = 0;
    for (int b = 0; b < t->n_blocks; b++) {
        const int part = t->block[b] / tp;
        ab[b] = (axis_block){full_base + tp_rank * part, loc, part};
        loc += part;
        full_base += t->block[b];
    }
    return t->n_blocks;
}

#define MAX_RUNS 1024 /* model chunks per stage (parallel.virtual_pipeline <= 1024), or MoE layers per stage */

/* layer runs of the local tensor: local first layer, global first layer, count */
static int layer_runs(const mt_param_layout *pl, const mt_param_tensor *t, int runs[][3]) {
    if (!t->stacked) {
        runs[0][0] = 0, runs[0][1] = 0, runs[0][2] = 1;
        return 1;
    }
    if (t->experts_r) { /* one run per local layer: its experts_r experts (global slices, ckpt_global_shape) */
        const int n = t->n_layers / t->experts_r;
        for (int l = 0; l < n && l < MAX_RUNS; l++) {
            runs[l][0] = l * t->experts_r;
            runs[l][1] = mt_param_global_slice(pl, (int)(t - pl->t), l * t->experts_r);
            runs[l][2] = t->experts_r;
        }
        return n < MAX_RUNS ? n : MAX_RUNS;
    }
    if (pl->pp <= 1) {
        runs[0][0] = 0, runs[0][1] = 0, runs[0][2] = t->n_layers;
        return 1;
    }
    if (t->layers != MT_LAYERS_EVERY) { /* one kind's layers: one run per local slot (its global slot) */
        for (int l = 0; l < t->n_layers && l < MAX_RUNS; l++) {
            runs[l][0] = l;
            runs[l][1] = mt_param_global_slice(pl, (int)(t - pl->t), l);
            runs[l][2] = 1;
        }
        return t->n_layers < MAX_RUNS ? t->n_layers : MAX_RUNS;
    }
    const int vpp = pl->vpp > 0 ? pl->vpp : 1;
    int n = 0;
    for (int k = 0; k < vpp; k++) { /* a chunk without layers (the embedding's or the loss's alone) has no run */
        if (mt_param_chunk_layers(pl, k) < 1) continue;
        runs[n][0] = mt_param_chunk_l0(pl, k);
        runs[n][1] = mt_param_global_layer(pl, runs[n][0]);
        runs[n][2] = mt_param_chunk_layers(pl, k);
        n++;
    }
    return n;
}

#define MAX_BOXES 4096 /* 3 blocks x model.layers (at most 1024) */

int mt_ckpt_boxes(const mt_param_layout *pl, int ti, int tp_rank, mt_ckpt_box *boxes, int max) {
    const mt_param_tensor *t = &pl->t[ti];
    axis_block ab[3];
    int runs[MAX_RUNS][3];
    const int nb = axis_blocks(t, pl->tp, tp_rank, ab);
    const int nr = layer_runs(pl, t, runs);
    const int rows_axis = t->shard != MT_SHARD_COLS; /* NONE: the "block" is all rows */
    const size_t slice = (size_t)t->rows * t->cols;
    /* several blocks: a block is contiguous within one layer (rows) or one row (columns) only */
    const int per_layer = nb > 1, per_row = nb > 1 && !rows_axis;
    int n = 0;
    for (int k = 0; k < nr; k++) {
        const int n_l = per_layer ? runs[k][2] : 1;
        for (int li = 0; li < n_l; li++) {
            const int n_rows = per_row ? t->rows : 1;
            for (int ri = 0; ri < n_rows; ri++) {
                for (int b = 0; b < nb; b++) {
                    mt_ckpt_box x;
                    x.l0 = runs[k][1] + li;
                    x.nl = per_layer ? 1 : runs[k][2];
                    size_t off = (size_t)(runs[k][0] + li) * slice;
                    if (t->shard == MT_SHARD_NONE) {
                        x.r0 = 0, x.nr = t->full_rows, x.c0 = 0, x.nc = t->full_cols;
                    } else if (rows_axis) {
                        x.r0 = ab[b].g0, x.nr = ab[b].n, x.c0 = 0, x.nc = t->full_cols;
                        off += (size_t)ab[b].loc0 * t->cols;
                    } else {
                        x.r0 = per_row ? ri : 0, x.nr = per_row ? 1 : t->full_rows;
                        x.c0 = ab[b].g0, x.nc = ab[b].n;
                        off += (size_t)(per_row ? ri : 0) * t->cols + (size_t)ab[b].loc0;
                    }
                    x.local_off = off;
                    x.n = (size_t)x.nl * x.nr * x.nc;
                    if (boxes && n < max) boxes[n] = x;
                    n++;
                }
            }
        }
    }
    return n;
}

size_t mt_ckpt_rank_pieces(const mt_param_layout *pl, const mt_opt_layout *ol, const mt_ckpt_rank *rk,
                           mt_dtype act, mt_ckpt_piece *out, size_t max) {
    size_t n = 0;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_param_tensor *t = &pl->t[ti];
        if (t->pp_copy || (t->shard == MT_SHARD_NONE && rk->tp_rank != 0)) continue;
        const mt_grad_buffer_id b = mt_grad_class_buffer(t->gclass);
        const mt_grad_region *g = &ol->reg[b];
        size_t w0, w1; /* the flat range this rank writes */
        if (g->shards > 1) {
            w0 = mt_opt_shard_lo(ol, b);
            w1 = w0 + g->shard_n;
        } else {
            const size_t dps = rk->dp_size[b] > 0 ? (size_t)rk->dp_size[b] : 1;
            const size_t part = (g->n + dps - 1) / dps;
            w0 = g->begin + (size_t)rk->dp_rank[b] * part;
            w1 = w0 + part;
            if (w1 > g->begin + g->n) w1 = g->begin + g->n;
        }
        mt_ckpt_box boxes[MAX_BOXES];
        const int nbox = mt_ckpt_boxes(pl, ti, rk->tp_rank, boxes, MAX_BOXES);
        if (nbox > MAX_BOXES) return (size_t)-1;
        for (int kind = 0; kind < MT_CK_KINDS; kind++) {
            if (kind == MT_CK_MASTER && act == MT_F32) continue;
            for (int bi = 0; bi < nbox; bi++) {
                const size_t lo = t->offset + boxes[bi].local_off, hi = lo + boxes[bi].n;
                const size_t a = lo > w0 ? lo : w0, e = hi < w1 ? hi : w1;
                if (a >= e) continue;
                mt_ckpt_piece p = {.ti = ti, .kind = (mt_ckpt_kind)kind, .box = boxes[bi], .f0 = a - lo,
                                   .f1 = e - lo, .flat = a, .opt = 0};
                mt_opt_piece pc;
                if (kind != MT_CK_WEIGHT && mt_opt_piece_in(pl, ol, ti, a, e, &pc)) p.opt = pc.opt;
                p.n_bytes = (uint64_t)(e - a) * (kind == MT_CK_WEIGHT ? mt_dtype_bytes(act) : 4);
                if (out && n < max) out[n] = p;
                n++;
            }
        }
    }
    return n;
}

size_t mt_ckpt_intersect(const mt_ckpt_box *s, size_t f0, size_t f1, const mt_ckpt_box *d, mt_ckpt_run_fn fn,
                         void *ctx) {
#define LO(a, b) ((a) > (b) ? (a) : (b))
#define HI(a, b) ((a) < (b) ? (a) : (b))
    const int la = LO(s->l0, d->l0), lb = HI(s->l0 + s->nl, d->l0 + d->nl);
    const int ra = LO(s->r0, d->r0), rb = HI(s->r0 + s->nr, d->r0 + d->nr);
    const int ca = LO(s->c0, d->c0), cb = HI(s->c0 + s->nc, d->c0 + d->nc);
    if (la >= lb || ra >= rb || ca >= cb) return 0;
    size_t total = 0;
    for (int l = la; l < lb; l++) {
        const size_t sl = (size_t)(l - s->l0) * s->nr, dl = (size_t)(l - d->l0) * d->nr;
        for (int r = ra; r < rb; r++) {
            const size_t srow = (sl + (size_t)(r - s->r0)) * s->nc;
            const size_t sa = srow + (size_t)(ca - s->c0), sb = srow + (size_t)(cb - s->c0);
            if (sb <= f0) continue;
            if (sa >= f1) return total; /* rows only move further along the piece */
            const size_t a = LO(sa, f0), b = HI(sb, f1);
            const size_t c = (size_t)ca + (a - sa);
            const size_t de = (dl + (size_t)(r - d->r0)) * d->nc + (c - (size_t)d->c0);
            fn(ctx, a - f0, de, b - a);
            total += b - a;
        }
    }
    return total;
#undef LO
#undef HI
}
