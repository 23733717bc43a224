/* ep_dispatch.c — expert parallelism's token dispatch and combine (ep_dispatch.h). */
#include "parallel/ep_dispatch.h"

#include <stdlib.h>
#include <string.h>

/* host view of one layer's counts: kept per expert (E), rows received per (source, local expert) */
#define KEPT(e) ((e)->host)
#define RECV(e, i, le) ((e)->host[2 * (e)->E + (i) * (e)->E_r + (le)])
/* all-to-all tables (elements): to / from each ep rank */
#define SEND_N(e) ((e)->tab)
#define SEND_D(e) ((e)->tab + (e)->ep)
#define RECV_N(e) ((e)->tab + 2 * (e)->ep)
#define RECV_D(e) ((e)->tab + 3 * (e)->ep)

mt_status mt_ep_init(mt_ep *e, mt_backend *be, mt_dtype act, const mt_group *g, int ep, int E, int C, int max_recv,
                     int max_send) {
    memset(e, 0, sizeof *e);
    if (g->size > 1 && g->size != ep)
        return mt_errorf(MT_ERR_INTERNAL, "model init: ep group of %d ranks for parallel.expert = %d", g->size, ep);
    e->be = be;
    e->act = act;
    e->ep = ep;
    e->rank = g->size > 1 ? g->rank : 0;
    e->comm = ep > 1 ? g->comm : NULL;
    e->E = E;
    e->E_r = E / ep;
    e->C = C;
    e->max_recv = max_recv;
    e->max_send = max_send;
    e->host = malloc((size_t)(2 * E + ep * e->E_r) * sizeof *e->host);
    e->tab = malloc((size_t)4 * ep * sizeof *e->tab);
    if (!e->host || !e->tab) {
        mt_ep_free(e);
        return mt_errorf(MT_ERR_OOM, "model init: MoE count tables for %d experts", E);
    }
    return MT_OK;
}

void mt_ep_free(mt_ep *e) {
    free(e->host);
    free(e->tab);
    e->host = NULL;
    e->tab = NULL;
}

mt_status mt_ep_read_counts(mt_ep *e, const int32_t *counts) {
    const int ep = e->ep, Er = e->E_r, E = e->E;
    mt_status st = e->be->i->copy_d2h(e->be, e->host, counts, (size_t)(2 * E + ep * Er) * 4);
    if (st != MT_OK) return st;
    size_t sd = 0, rd = 0;
    for (int j = 0; j < ep; j++) {
        size_t s = 0, r = 0;
        for (int le = 0; le < Er; le++) {
            s += (size_t)KEPT(e)[j * Er + le];
            r += (size_t)RECV(e, j, le);
        }
        SEND_N(e)[j] = s * e->C, SEND_D(e)[j] = sd, sd += s * e->C;
        RECV_N(e)[j] = r * e->C, RECV_D(e)[j] = rd, rd += r * e->C;
    }
    if (rd / e->C > (size_t)e->max_recv || sd / e->C > (size_t)e->max_send)
        return mt_errorf(MT_ERR_INTERNAL, "moe: %zu rows received / %zu sent exceed the layout's %d / %d", rd / e->C,
                         sd / e->C, e->max_recv, e->max_send);
    return MT_OK;
}

mt_status mt_ep_exchange_counts(mt_ep *e, int32_t *counts) {
    const int ep = e->ep, Er = e->E_r, E = e->E;
    mt_status st = MT_OK;
    if (ep == 1) {
        MT_CHECK(e->be->i->copy_d2d(e->be, counts + 2 * E, counts, (size_t)E * 4));
    } else {
        size_t *n = e->tab, *d = e->tab + ep; /* element tables of Er counts each (reused below) */
        for (int j = 0; j < ep; j++) n[j] = (size_t)Er, d[j] = (size_t)j * Er;
        const double t0 = mt_clock_ms();
        st = e->comm->i->alltoallv(e->comm, counts, n, d, counts + 2 * E, n, d, MT_F32); /* i32 words moved as 4-byte elements */
        mt_comm_clock_stop(e->clock, t0);
        if (st != MT_OK) goto out;
    }
    MT_CHECK(mt_ep_read_counts(e, counts));
out:
    return st;
}

/* rows all-to-all: forward direction (dispatch layout -> received layout) or back */
static mt_status a2a(mt_ep *e, const void *send, void *recv, int back) {
    const double t0 = mt_clock_ms();
    mt_status st = back ? e->comm->i->alltoallv(e->comm, send, RECV_N(e), RECV_D(e), recv, SEND_N(e), SEND_D(e), e->act)
                        : e->comm->i->alltoallv(e->comm, send, SEND_N(e), SEND_D(e), recv, RECV_N(e), RECV_D(e), e->act);
    mt_comm_clock_stop(e->clock, t0);
    return st;
}

size_t mt_ep_expert_rows(const mt_ep *e, int le, size_t *r0) {
    size_t off = 0, n = 0;
    for (int x = 0; x <= le; x++) {
        size_t ne = 0;
        for (int i = 0; i < e->ep; i++) ne += (size_t)RECV(e, i, x);
        if (x < le) off += ne;
        else n = ne;
    }
    *r0 = off;
    return n;
}

/* received layout [source][expert] <-> expert-major [expert][source] */
static mt_status reorder(mt_ep *e, void *src_major, void *exp_major, int to_expert) {
    const size_t rb = (size_t)e->C * mt_dtype_bytes(e->act);
    mt_status st = MT_OK;
    size_t eoff = 0;
    for (int le = 0; le < e->E_r; le++)
        for (int i = 0; i < e->ep; i++) {
            size_t soff = RECV_D(e)[i] / e->C;
            for (int x = 0; x < le; x++) soff += (size_t)RECV(e, i, x);
            const size_t n = (size_t)RECV(e, i, le);
            if (n) {
                char *s = (char *)src_major + soff * rb, *xm = (char *)exp_major + eoff * rb;
                MT_CHECK(to_expert ? e->be->i->copy_d2d(e->be, xm, s, n * rb) : e->be->i->copy_d2d(e->be, s, xm, n * rb));
            }
            eoff += n;
        }
out:
    return st;
}

mt_status mt_ep_dispatch(mt_ep *e, const void *send, void *recv, void *dst) {
    mt_status st = MT_OK;
    MT_CHECK(a2a(e, send, recv, 0));
    MT_CHECK(reorder(e, recv, dst, 1));
out:
    return st;
}

mt_status mt_ep_combine(mt_ep *e, const void *src, void *recv, void *dst) {
    mt_status st = MT_OK;
    MT_CHECK(reorder(e, recv, (void *)src, 0));
    MT_CHECK(a2a(e, recv, dst, 1));
out:
    return st;
}
