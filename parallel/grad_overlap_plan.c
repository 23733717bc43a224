/* grad_overlap_plan.c — the buckets of overlapped gradient reduction (mt_go_plan, see
 * grad_overlap.h): which flat ranges each bucket holds, which backward events make it final, and,
 * with the distributed optimizer, how its ranges fall into the ranks' optimizer shards. Pure: built
 * once from the layouts, no device access, no communication. */
#include <stdlib.h>
#include <string.h>

#include "parallel/grad_overlap.h"

typedef struct {
    mt_go_plan *p;
    int cap_b, cap_r, cap_o, cap_own;
    mt_status st;
} builder;

static int grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return 1;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *n = realloc(*arr, (size_t)c * elem);
    if (!n) return 0;
    *arr = n;
    *cap = c;
    return 1;
}

/* the event that makes global (unstacked) tensor ti final on this stage; -1: none (tail) */
static int global_event(const mt_param_layout *pl, int ti) {
    const mt_param_index *ix = &pl->idx;
    if (ti == ix->lm_head || ti == ix->lnf_w || ti == ix->lnf_b) return pl->has_head ? mt_go_event(pl->L, MT_GO_HEAD) : -1;
    if (ti == ix->wpe) return pl->has_embed ? mt_go_event(pl->L, MT_GO_EMBED) : -1;
    if (ti == ix->wte) {
        if (pl->has_embed) return mt_go_event(pl->L, MT_GO_EMBED); /* also written by a tied head: the later one */
        return pl->has_head ? mt_go_event(pl->L, MT_GO_HEAD) : -1;    /* the last stage's copy */
    }
    return -1;
}

/* appends [lo, lo + n) to the open bucket, merging with the range already holding tensor ti */
static void add_range(builder *B, int *range_of, int ti, size_t lo, size_t n) {
    mt_go_plan *p = B->p;
    mt_go_bucket *bk = &p->b[p->n_b - 1];
    bk->n += n;
    const int ri = range_of[ti];
    if (ri >= 0) {
        mt_go_range *r = &p->ranges[ri];
        if (r->lo == lo + n) { r->lo = lo; r->n += n; return; } /* layers walk downwards */
        if (r->lo + r->n == lo) { r->n += n; return; }
    }
    if (!grow((void **)&p->ranges, &B->cap_r, p->n_ranges + 1, sizeof *p->ranges)) {
        B->st = mt_errorf(MT_ERR_OOM, "gradient buckets: %d ranges", p->n_ranges + 1);
        return;
    }
    p->ranges[p->n_ranges] = (mt_go_range){.lo = lo, .n = n};
    range_of[ti] = p->n_ranges++;
    bk->n_r++;
}

static int open_bucket(builder *B, int buffer, int tail, int ev, int *range_of, int n_tensors) {
    mt_go_plan *p = B->p;
    if (!grow((void **)&p->b, &B->cap_b, p->n_b + 1, sizeof *p->b)) {
        B->st = mt_errorf(MT_ERR_OOM, "gradient buckets: %d buckets", p->n_b + 1);
        return 0;
    }
    p->b[p->n_b++] = (mt_go_bucket){.buffer = buffer, .tail = tail, .ev_lo = ev, .ev_hi = ev, .r0 = p->n_ranges};
    for (int i = 0; i < n_tensors; i++) range_of[i] = -1;
    return 1;
}

/* one piece of tensor ti, produced at event ev, into buffer b's open bucket (opening one first) */
static void add_piece(builder *B, int b, int ev, int ti, size_t lo, size_t n, size_t limit, int *open, int *range_of,
                      int n_tensors) {
    mt_go_plan *p = B->p;
    if (!*open) {
        if (!open_bucket(B, b, 0, ev, range_of, n_tensors)) return;
        *open = 1;
    }
    mt_go_bucket *bk = &p->b[p->n_b - 1];
    if (ev < bk->ev_lo) bk->ev_lo = ev;
    if (ev > bk->ev_hi) bk->ev_hi = ev;
    add_range(B, range_of, ti, lo, n);
    if (p->b[p->n_b - 1].n >= limit) *open = 0; /* Megatron: a bucket closes once it reaches the size */
}

mt_status mt_go_plan_build(mt_go_plan *p, const mt_param_layout *pl, const mt_opt_layout *ol,
                           const size_t bucket_elems[MT_GBUFS], const unsigned char *pre_reduced) {
    memset(p, 0, sizeof *p);
    builder B = {.p = p, .st = MT_OK};
    const int L = pl->L, NT = pl->n_tensors;
    int range_of[MT_MAX_PARAM_TENSORS];
    p->L = L;
    p->n_events = L + 2;
    for (int b = 0; b < MT_GBUFS; b++) {
        p->shards[b] = ol->reg[b].shards;
        const size_t limit = bucket_elems[b] > 0 ? bucket_elems[b] : 1;
        int open = 0;
        for (int ev = 0; ev < p->n_events && B.st == MT_OK; ev++) {
            /* tensors in reverse table order, as Megatron walks parameters in reverse */
            for (int ti = NT - 1; ti >= 0 && B.st == MT_OK; ti--) {
                const mt_param_tensor *t = &pl->t[ti];
                if ((int)mt_grad_class_buffer(t->gclass) != b || t->n == 0 || pre_reduced[ti]) continue;
                if (t->stacked) {
                    if (ev == 0 || ev == L + 1) continue;
                    const int l = L - ev; /* event 1 + (L-1-l) */
                    const size_t per = t->n / (size_t)L;
                    add_piece(&B, b, ev, ti, t->offset + (size_t)l * per, per, limit, &open, range_of, NT);
                } else if (global_event(pl, ti) == ev) {
                    add_piece(&B, b, ev, ti, t->offset, t->n, limit, &open, range_of, NT);
                }
            }
        }
        /* the tail: pre-reduced tensors and globals no event finishes, after everything else */
        int tail_open = 0;
        for (int ti = NT - 1; ti >= 0 && B.st == MT_OK; ti--) {
            const mt_param_tensor *t = &pl->t[ti];
            if ((int)mt_grad_class_buffer(t->gclass) != b || t->n == 0) continue;
            if (!pre_reduced[ti] && (t->stacked || global_event(pl, ti) >= 0)) continue;
            if (!tail_open) {
                if (!open_bucket(&B, b, 1, 0, range_of, NT)) break;
                p->b[p->n_b - 1].ev_hi = p->n_events - 1;
                tail_open = 1;
            }
            add_range(&B, range_of, ti, t->offset, t->n);
        }
    }
    /* owners: each bucket's ranges cut at its buffer's shard boundaries */
    for (int k = 0; k < p->n_b && B.st == MT_OK; k++) {
        mt_go_bucket *bk = &p->b[k];
        const mt_grad_region *g = &ol->reg[bk->buffer];
        const int S = g->shards;
        bk->o0 = k == 0 ? 0 : p->b[k - 1].o0 + p->shards[p->b[k - 1].buffer] + 1;
        if (!grow((void **)&p->own_off, &B.cap_o, bk->o0 + S + 1, sizeof *p->own_off)) {
            B.st = mt_errorf(MT_ERR_OOM, "gradient buckets: shard table");
            break;
        }
        bk->n_per = 0;
        for (int r = 0; r < S && B.st == MT_OK; r++) {
            p->own_off[bk->o0 + r] = p->n_own;
            const size_t s_lo = g->begin + (size_t)r * g->shard_n, s_hi = s_lo + g->shard_n;
            size_t tot = 0;
            for (int i = 0; i < bk->n_r; i++) {
                const mt_go_range *rg = &p->ranges[bk->r0 + i];
                const size_t lo = rg->lo > s_lo ? rg->lo : s_lo, hi = rg->lo + rg->n < s_hi ? rg->lo + rg->n : s_hi;
                if (hi <= lo) continue;
                if (!grow((void **)&p->own, &B.cap_own, p->n_own + 1, sizeof *p->own)) {
                    B.st = mt_errorf(MT_ERR_OOM, "gradient buckets: shard ranges");
                    break;
                }
                p->own[p->n_own++] = (mt_go_range){.lo = lo, .n = hi - lo};
                tot += hi - lo;
            }
            if (tot > bk->n_per) bk->n_per = tot;
        }
        p->own_off[bk->o0 + S] = p->n_own;
        if (bk->n_per > p->max_n_per) p->max_n_per = bk->n_per;
    }
    if (B.st != MT_OK) mt_go_plan_free(p);
    return B.st;
}

void mt_go_plan_free(mt_go_plan *p) {
    free(p->b);
    free(p->ranges);
    free(p->own);
    free(p->own_off);
    memset(p, 0, sizeof *p);
}
