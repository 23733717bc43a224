/* comm_gloo.c — the Gloo communicator's collectives over the shim (parallel/comm_gloo_shim.h),
 * its errors that name the lost node, abort over the family and destroy (see comm_gloo.h; the
 * world and split are in comm_gloo_make.c). Without Gloo (MT_HAVE_GLOO unset) only the refusal. */
#include "parallel/comm_gloo.h"
#include "core/free_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_gloo_internal.h"

#ifndef MT_HAVE_GLOO
int mt_comm_gloo_available(void) { return 0; }
mt_status mt_comm_gloo_init(mt_bootstrap *bs, const char (*nodes)[MT_NODE_ID_BYTES], int timeout_s, mt_comm **world) {
    (void)timeout_s;
    *world = NULL;
    int other = 1;
    while (other < bs->size && !strcmp(nodes[other], nodes[0])) other++;
    return mt_errorf(MT_ERR_UNSUPPORTED,
                     "rank %d of %d: ranks run on several nodes (rank 0 on %s, rank %d on %s) and this mtrain was "
                     "built without Gloo, the network communicator for CPU ranks: install libgloo-dev "
                     "(scripts/install-deps.sh) and rebuild, or run every rank on one node",
                     bs->rank, bs->size, nodes[0], other, other < bs->size ? nodes[other] : "?");
}
#else


int mt_comm_gloo_available(void) { return 1; }

static gloo_ctx *ctx_of(mt_comm *c) { return c->ctx; }

/* ---- errors naming the node ---- */

static mt_status fail(mt_comm *c, const char *op, const char *gloo_msg) {
    gloo_ctx *x = ctx_of(c);
    if (x->failed != MT_OK) return mt_errorf(x->failed, "%s", x->why);
    /* the lost node: the other node whose address Gloo's message holds (it may also hold this
     * node's own address: "Read error [own address]"), else the only other node of the group */
    const member_info *lost = NULL, *other = NULL, *me = &x->members[c->rank];
    int n_other_nodes = 0;
    for (int k = 0; k < c->size; k++) {
        const member_info *m = &x->members[k];
        if (!strcmp(m->node, me->node)) continue;
        int seen = 0;
        for (int j = 0; j < k && !seen; j++) seen = !strcmp(x->members[j].node, m->node);
        n_other_nodes += !seen;
        if (!other) other = m;
        if (!lost && m->addr[0] && strstr(gloo_msg, m->addr)) lost = m;
    }
    if (!lost && n_other_nodes == 1) lost = other;
    char ranks[160] = "";
    if (lost) {
        size_t used = 0;
        for (int k = 0; k < c->size && used + 12 < sizeof ranks; k++)
            if (!strcmp(x->members[k].node, lost->node))
                used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", used ? "," : "",
                                         x->members[k].world_rank);
        char host[MT_NODE_ID_BYTES];
        snprintf(host, sizeof host, "%s", lost->node);
        host[strcspn(host, "/")] = 0;
        snprintf(x->why, sizeof x->why,
                 "rank %d: %s: lost node %s (%s, ranks %s): its connection closed or did not answer within %d s "
                 "(gloo: %.300s)",
                 x->members[c->rank].world_rank, op, host, lost->addr, ranks, x->timeout_s, gloo_msg);
    } else {
        snprintf(x->why, sizeof x->why,
                 "rank %d: %s: a rank on another node was lost or did not answer within %d s (gloo: %.400s)",
                 x->members[c->rank].world_rank, op, x->timeout_s, gloo_msg);
    }
    x->failed = MT_ERR_PEER;
    /* close this communicator's connections: the members that do not talk to the lost one
     * directly (a ring's far side) fail at once too, instead of at their timeout */
    if (!atomic_exchange(&x->aborted, 1)) mt_gloo_close(x->g);
    return mt_errorf(MT_ERR_PEER, "%s", x->why);
}

static mt_status check(mt_comm *c, const char *op) {
    gloo_ctx *x = ctx_of(c);
    if (x->failed != MT_OK) return mt_errorf(x->failed, "%s", x->why);
    if (atomic_load(&x->aborted)) {
        snprintf(x->why, sizeof x->why, "rank %d: %s: the communicator was aborted on this rank (after an earlier error)",
                 x->members[c->rank].world_rank, op);
        x->failed = MT_ERR_PEER;
        return mt_errorf(MT_ERR_PEER, "%s", x->why);
    }
    return MT_OK;
}

#define RETURN_IF(call)                                                                                           \
    do {                                                                                                          \
        mt_status st_ = (call);                                                                                   \
        if (st_ != MT_OK) return st_;                                                                             \
    } while (0)

#define GLOO_CALL(c, op, call)                                                                                    \
    do {                                                                                                          \
        char err_[512] = "";                                                                                      \
        if ((call) != 0) return fail((c), (op), err_);                                                            \
    } while (0)

/* ---- collectives ---- */

static mt_status reserve_tmp(gloo_ctx *x, size_t n) {
    if (n <= x->tmp_n) return MT_OK;
    float *t = realloc(x->tmp, n * sizeof *t);
    if (!t) return mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory for %zu floats", n);
    x->tmp = t;
    x->tmp_n = n;
    return MT_OK;
}

/* fp32 in place; bf16 through x->tmp */
static mt_status reduce_inplace(mt_comm *c, void *buf, size_t n, mt_dtype dt, mt_redop op, const char *what) {
    gloo_ctx *x = ctx_of(c);
    int gop = op == MT_RED_MAX ? MT_GLOO_MAX : MT_GLOO_SUM;
    if (dt == MT_F32) {
        GLOO_CALL(c, what, mt_gloo_allreduce_f32(x->g, buf, n, gop, err_, sizeof err_));
        return MT_OK;
    }
    RETURN_IF(reserve_tmp(x, n));
    uint16_t *b = buf;
    for (size_t i = 0; i < n; i++) x->tmp[i] = mt_bf16_to_f32(b[i]);
    GLOO_CALL(c, what, mt_gloo_allreduce_f32(x->g, x->tmp, n, gop, err_, sizeof err_));
    for (size_t i = 0; i < n; i++) b[i] = mt_f32_to_bf16(x->tmp[i]);
    return MT_OK;
}

static mt_status g_allreduce(mt_comm *c, const void *send, void *recv, size_t n, mt_dtype dt, mt_redop op) {
    RETURN_IF(check(c, "allreduce"));
    if (send != recv) memmove(recv, send, n * mt_dtype_bytes(dt));
    return reduce_inplace(c, recv, n, dt, op, "allreduce");
}

/* the full allreduce, then this rank's slice: the same bits as the allreduce would give */
static mt_status g_reduce_scatter(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt,
                                  mt_redop op) {
    RETURN_IF(check(c, "reduce_scatter"));
    gloo_ctx *x = ctx_of(c);
    size_t n = n_per_rank * (size_t)c->size, es = mt_dtype_bytes(dt);
    RETURN_IF(reserve_tmp(x, n));
    int gop = op == MT_RED_MAX ? MT_GLOO_MAX : MT_GLOO_SUM;
    if (dt == MT_F32) memcpy(x->tmp, send, n * es);
    else
        for (size_t i = 0; i < n; i++) x->tmp[i] = mt_bf16_to_f32(((const uint16_t *)send)[i]);
    GLOO_CALL(c, "reduce_scatter", mt_gloo_allreduce_f32(x->g, x->tmp, n, gop, err_, sizeof err_));
    const float *mine = x->tmp + (size_t)c->rank * n_per_rank;
    if (dt == MT_F32) memcpy(recv, mine, n_per_rank * es);
    else
        for (size_t i = 0; i < n_per_rank; i++) ((uint16_t *)recv)[i] = mt_f32_to_bf16(mine[i]);
    return MT_OK;
}

static mt_status g_allgather(mt_comm *c, const void *send, void *recv, size_t n_per_rank, mt_dtype dt) {
    RETURN_IF(check(c, "allgather"));
    size_t b = n_per_rank * mt_dtype_bytes(dt);
    GLOO_CALL(c, "allgather", mt_gloo_allgather(ctx_of(c)->g, send, recv, b, err_, sizeof err_));
    return MT_OK;
}

static mt_status g_broadcast(mt_comm *c, void *buf, size_t n, mt_dtype dt, int root) {
    RETURN_IF(check(c, "broadcast"));
    GLOO_CALL(c, "broadcast",
              mt_gloo_broadcast(ctx_of(c)->g, buf, n * mt_dtype_bytes(dt), root, err_, sizeof err_));
    return MT_OK;
}

static mt_status g_barrier(mt_comm *c) {
    RETURN_IF(check(c, "barrier"));
    GLOO_CALL(c, "barrier", mt_gloo_barrier(ctx_of(c)->g, err_, sizeof err_));
    return MT_OK;
}

static mt_status queue_p2p(mt_comm *c, int is_send, void *buf, size_t n_bytes, int peer) {
    gloo_ctx *x = ctx_of(c);
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return mt_errorf(MT_ERR_INTERNAL, "comm_gloo: %s peer %d of %d (rank %d)", is_send ? "send to" : "recv from",
                         peer, c->size, c->rank);
    if (x->n_q == x->cap_q) {
        int cap = x->cap_q ? 2 * x->cap_q : 16;
        mt_gloo_p2p *q = realloc(x->q, (size_t)cap * sizeof *q);
        if (!q) return mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory queueing send/recv");
        x->q = q;
        x->cap_q = cap;
    }
    x->q[x->n_q++] = (mt_gloo_p2p){is_send, peer, buf, n_bytes};
    return MT_OK;
}

static mt_status flush_p2p(mt_comm *c) {
    gloo_ctx *x = ctx_of(c);
    int n = x->n_q;
    x->n_q = 0;
    if (!n) return MT_OK;
    GLOO_CALL(c, "send/recv", mt_gloo_p2p_batch(x->g, x->q, n, err_, sizeof err_));
    return MT_OK;
}

static mt_status g_send(mt_comm *c, const void *buf, size_t n, mt_dtype dt, int peer) {
    RETURN_IF(check(c, "send"));
    RETURN_IF(queue_p2p(c, 1, (void *)buf, n * mt_dtype_bytes(dt), peer));
    return ctx_of(c)->in_group ? MT_OK : flush_p2p(c);
}

static mt_status g_recv(mt_comm *c, void *buf, size_t n, mt_dtype dt, int peer) {
    RETURN_IF(check(c, "recv"));
    RETURN_IF(queue_p2p(c, 0, buf, n * mt_dtype_bytes(dt), peer));
    return ctx_of(c)->in_group ? MT_OK : flush_p2p(c);
}

static mt_status g_group_start(mt_comm *c) {
    ctx_of(c)->in_group++;
    return MT_OK;
}

static mt_status g_group_end(mt_comm *c) {
    gloo_ctx *x = ctx_of(c);
    if (x->in_group > 0 && --x->in_group > 0) return MT_OK;
    RETURN_IF(check(c, "send/recv"));
    return flush_p2p(c);
}

static mt_status g_alltoallv(mt_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                             void *recv, const size_t *recv_counts, const size_t *recv_displs, mt_dtype dt) {
    RETURN_IF(check(c, "alltoallv"));
    size_t es = mt_dtype_bytes(dt);
    memcpy((char *)recv + recv_displs[c->rank] * es, (const char *)send + send_displs[c->rank] * es,
           send_counts[c->rank] * es);
    RETURN_IF(g_group_start(c));
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        if (send_counts[p]) RETURN_IF(queue_p2p(c, 1, (char *)send + send_displs[p] * es, send_counts[p] * es, p));
        if (recv_counts[p]) RETURN_IF(queue_p2p(c, 0, (char *)recv + recv_displs[p] * es, recv_counts[p] * es, p));
    }
    return g_group_end(c);
}

/* ---- family, abort, destroy ---- */

void mt_gloo_fam_add(family *f, mt_comm *c) {
    pthread_mutex_lock(&f->mu);
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        mt_comm **v = realloc(f->comms, (size_t)cap * sizeof *v);
        if (v) {
            f->comms = v;
            f->cap = cap;
        }
    }
    if (f->n < f->cap) f->comms[f->n++] = c;
    f->refs++;
    pthread_mutex_unlock(&f->mu);
}

static void fam_remove(family *f, mt_comm *c) {
    pthread_mutex_lock(&f->mu);
    for (int k = 0; k < f->n; k++)
        if (f->comms[k] == c) f->comms[k] = f->comms[--f->n];
    int left = --f->refs;
    pthread_mutex_unlock(&f->mu);
    if (left) return;
    pthread_mutex_destroy(&f->mu);
    free(f->comms);
    free(f);
}

static void g_abort(mt_comm *c) {
    family *f = ctx_of(c)->fam;
    pthread_mutex_lock(&f->mu);
    for (int k = 0; k < f->n; k++) {
        gloo_ctx *x = ctx_of(f->comms[k]);
        if (!atomic_exchange(&x->aborted, 1) && x->g) mt_gloo_close(x->g);
    }
    pthread_mutex_unlock(&f->mu);
}

static void g_destroy(mt_comm *c) {
    if (!c) return;
    gloo_ctx *x = ctx_of(c);
    fam_remove(x->fam, c);
    mt_gloo_free(x->g);
    MT_FREE_ALL(x->members, x->q, x->tmp, x, c);
}

const struct mt_comm_i mt_gloo_impl = MT_COMM_TABLE("gloo", g_, g_barrier, mt_gloo_split);

#endif
