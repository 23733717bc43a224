/* test_grad_overlap_plan.c — the buckets of overlapped gradient reduction (mt_go_plan_build), for
 * GPT (tied, learned positions) and Llama (untied) at pp 1 and every stage of pp 2 x vpp 2, a MoE
 * model (expert buffer; one shard: its sharded layout is the model's), bucket sizes 1, 700 and 1e9
 * elements, 1..3 optimizer shards, with and
 * without tensors marked pre-reduced:
 *  - every element of every tensor is in exactly one bucket range, and no range leaves a tensor;
 *  - a bucket's ranges are in its own buffer; its n is their sum; pre-reduced tensors (and only
 *    they, here) are in tail buckets, one per buffer at most;
 *  - a non-tail bucket's event range holds the event that finishes each of its elements (a layer's
 *    slice: that layer; lnf / lm_head: the head; wte / wpe on stage 0: the embedding), so it is never
 *    queued before its gradients are final;
 *  - with a huge bucket size each buffer has one non-tail bucket; with size 1 a bucket per piece;
 *  - per bucket the owner ranges lie in their owner's shard, add up to the bucket, and n_per is the
 *    largest owner's total. */
#include <stdlib.h>
#include <string.h>

#include "core/model/opt_layout.h"
#include "core/recipe/recipe.h"
#include "parallel/grad_overlap.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"

static void recipe(mt_recipe *r, const char *arch, int pp, int vpp, int experts) {
    tiny_recipe(r, arch, 6);
    set_recipe_int(r, "model.layers", 8);
    if (!strcmp(arch, "gpt")) CHECK(mt_recipe_set(r, "model.tie_embeddings", "true", "test") == MT_OK);
    set_recipe_int(r, "parallel.pipeline", pp);
    set_recipe_int(r, "parallel.virtual_pipeline", vpp);
    if (experts) {
        set_recipe_int(r, "model.moe.experts", experts);
        CHECK(mt_recipe_set(r, "model.moe.top_k", "2", "test") == MT_OK);
    }
}

/* the event that finishes element i of tensor ti (-1: none / tail) */
static int element_event(const mt_param_layout *pl, int ti, size_t i) {
    const mt_param_tensor *t = &pl->t[ti];
    const mt_param_index *ix = &pl->idx;
    if (t->stacked) return mt_go_event(pl->L, (int)((i - t->offset) / (t->n / (size_t)pl->L)));
    if (ti == ix->lnf_w || ti == ix->lnf_b || ti == ix->lm_head) return mt_go_event(pl->L, MT_GO_HEAD);
    if (ti == ix->wpe) return mt_go_event(pl->L, MT_GO_EMBED);
    if (ti == ix->wte) return mt_go_event(pl->L, pl->has_embed ? MT_GO_EMBED : MT_GO_HEAD);
    return -1;
}

static void check_plan(const char *what, const mt_param_layout *pl, int shards, size_t size, int pre_norms) {
    int sh[MT_GBUFS], sd[MT_GBUFS];
    for (int b = 0; b < MT_GBUFS; b++) sh[b] = shards, sd[b] = 0;
    mt_opt_layout ol;
    const mt_status ost = mt_opt_layout_build(pl, sh, sd, &ol);
    CHECKF(ost == MT_OK, "%s: %s", what, mt_last_error());
    if (ost != MT_OK) return;
    unsigned char pre[MT_MAX_PARAM_TENSORS] = {0};
    for (int ti = 0; ti < pl->n_tensors; ti++) /* the norm weights, as sequence parallelism marks them */
        pre[ti] = pre_norms && (ti == pl->idx.ln1_w || ti == pl->idx.ln2_w || ti == pl->idx.lnf_w);
    const size_t elems[MT_GBUFS] = {size, size};
    mt_go_plan p;
    const mt_status st = mt_go_plan_build(&p, pl, &ol, elems, pre);
    CHECKF(st == MT_OK, "%s: %s", what, mt_last_error());
    if (st != MT_OK) return;
    int *owner = malloc(ol.n_flat * sizeof *owner); /* which bucket holds each element (-1: none) */
    int *tensor = malloc(ol.n_flat * sizeof *tensor);
    for (size_t i = 0; i < ol.n_flat; i++) owner[i] = -1, tensor[i] = -1;
    for (int ti = 0; ti < pl->n_tensors; ti++)
        for (size_t i = pl->t[ti].offset; i < pl->t[ti].offset + pl->t[ti].n; i++) tensor[i] = ti;
    int bad_cover = 0, bad_owner = 0, bad_event = 0, bad_buffer = 0, bad_tail = 0, n_tail[MT_GBUFS] = {0}, n_main[MT_GBUFS] = {0};
    for (int k = 0; k < p.n_b; k++) {
        const mt_go_bucket *bk = &p.b[k];
        size_t n = 0;
        if (bk->tail) n_tail[bk->buffer]++;
        else n_main[bk->buffer]++;
        for (int j = 0; j < bk->n_r; j++) {
            const mt_go_range *r = &p.ranges[bk->r0 + j];
            n += r->n;
            for (size_t i = r->lo; i < r->lo + r->n; i++) {
                if (i >= ol.n_flat || tensor[i] < 0 || owner[i] >= 0) { bad_cover++; continue; }
                owner[i] = k;
                const int ti = tensor[i];
                if ((int)mt_grad_class_buffer(pl->t[ti].gclass) != bk->buffer) bad_buffer++;
                if (bk->tail != (pre[ti] || element_event(pl, ti, i) < 0)) bad_tail++;
                const int e = element_event(pl, ti, i);
                if (!bk->tail && (e < bk->ev_lo || e > bk->ev_hi)) bad_event++;
            }
        }
        CHECKF(n == bk->n, "%s: bucket %d holds %zu elements, says %zu", what, k, n, bk->n);
        if (size == 1 && !bk->tail) CHECKF(bk->n_r == 1, "%s: size-1 bucket %d has %d ranges", what, k, bk->n_r);
        /* owners */
        const mt_grad_region *g = &ol.reg[bk->buffer];
        size_t tot = 0, big = 0;
        for (int r = 0; r < g->shards; r++) {
            size_t mine = 0;
            for (int j = p.own_off[bk->o0 + r]; j < p.own_off[bk->o0 + r + 1]; j++) {
                const mt_go_range *o = &p.own[j];
                const size_t lo = g->begin + (size_t)r * g->shard_n;
                CHECKF(o->lo >= lo && o->lo + o->n <= lo + g->shard_n, "%s: bucket %d owner %d range outside its shard",
                       what, k, r);
                for (size_t i = o->lo; i < o->lo + o->n; i++) bad_owner += owner[i] != k;
                mine += o->n;
            }
            tot += mine;
            if (mine > big) big = mine;
        }
        CHECKF(tot == bk->n && big == bk->n_per, "%s: bucket %d owners hold %zu (largest %zu), bucket %zu (n_per %zu)",
               what, k, tot, big, bk->n, bk->n_per);
    }
    for (int ti = 0; ti < pl->n_tensors; ti++)
        for (size_t i = pl->t[ti].offset; i < pl->t[ti].offset + pl->t[ti].n; i++)
            if (owner[i] < 0) bad_cover++;
    CHECKF(!bad_owner, "%s: %d owner-range elements outside their bucket", what, bad_owner);
    CHECKF(!bad_cover && !bad_buffer && !bad_tail && !bad_event,
           "%s: %d elements covered 0 or 2 times, %d in another buffer's bucket, %d tail mistakes, %d outside the "
           "bucket's events", what, bad_cover, bad_buffer, bad_tail, bad_event);
    for (int b = 0; b < MT_GBUFS; b++) {
        CHECKF(n_tail[b] <= 1, "%s: buffer %d has %d tail buckets", what, b, n_tail[b]);
        if (size >= 1000000000 && ol.reg[b].n > 0) CHECKF(n_main[b] == 1, "%s: %d buckets at a huge size", what, n_main[b]);
    }
    free(owner);
    free(tensor);
    mt_go_plan_free(&p);
}

static void check_recipe(const char *arch, int pp, int vpp, int experts) {
    static mt_recipe r;
    recipe(&r, arch, pp, vpp, experts);
    const size_t sizes[] = {1, 700, 1000000000};
    for (int s = 0; s < pp; s++) {
        mt_param_layout pl;
        const mt_status st = pp > 1 ? mt_param_layout_build_stage(&r, s, &pl) : mt_param_layout_build(&r, &pl);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st != MT_OK) return;
        for (int shards = 1; shards <= (experts ? 1 : 3); shards++) /* the model pads MoE regions itself */
            for (int si = 0; si < 3; si++)
                for (int pre = 0; pre < 2; pre++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s pp %d vpp %d experts %d stage %d shards %d size %zu pre %d", arch,
                             pp, vpp, experts, s, shards, sizes[si], pre);
                    check_plan(what, &pl, shards, sizes[si], pre);
                }
    }
}

int main(void) {
    check_recipe("gpt", 1, 1, 0);
    check_recipe("llama", 1, 1, 0);
    check_recipe("gpt", 2, 2, 0);
    check_recipe("llama", 2, 2, 0);
    check_recipe("llama", 1, 1, 4);
    TEST_MAIN_END();
}
