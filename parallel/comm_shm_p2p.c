/* comm_shm_p2p.c — send/recv of comm_shm through one ring buffer per ordered pair (src, dst):
 * the sender advances `head`, the receiver `tail`, both monotonic byte counters. Each message is
 * an 8-byte length header and its payload, so a receiver expecting another size gets an error
 * naming both sizes instead of silently mixing messages. Between group_start and group_end the
 * operations are queued and group_end moves bytes for all of them round-robin (messages between
 * one pair keep their order), so any ring of sends and receives completes like ncclGroupEnd.
 * A send outside a group returns once its bytes are in the ring (or delivered).
 * Waits sleep on this rank's doorbell, which peers ring whenever they add data for it or free
 * space it waits for. Rule: no allocation once the op queue has grown to its working size. */
#include "parallel/comm_shm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *ring_data(shm_ring *r) { return (char *)r + sizeof(shm_ring); }

/* copy n_bytes into the ring at stream position pos (wrapping) */
static void ring_put(shm_ctx *c, shm_ring *r, uint64_t pos, const char *src, uint64_t n_bytes) {
    uint64_t cap = c->hdr->ring_bytes, at = pos % cap, first = cap - at < n_bytes ? cap - at : n_bytes;
    memcpy(ring_data(r) + at, src, first);
    if (first < n_bytes) memcpy(ring_data(r), src + first, n_bytes - first);
}

static void ring_get(shm_ctx *c, shm_ring *r, uint64_t pos, char *dst, uint64_t n_bytes) {
    uint64_t cap = c->hdr->ring_bytes, at = pos % cap, first = cap - at < n_bytes ? cap - at : n_bytes;
    memcpy(dst, ring_data(r) + at, first);
    if (first < n_bytes) memcpy(dst + first, ring_data(r), n_bytes - first);
}

static void ring_bell(shm_ctx *c, int k) { shm_wake(&c->members[k].bell, &c->members[k].bell_sleepers); }

/* Moves what fits now; returns bytes moved, or sets *st on a size mismatch. */
static uint64_t progress_send(shm_ctx *c, shm_p2p_op *op) {
    shm_ring *r = shm_ring_at(c, c->rank, op->peer);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t space = c->hdr->ring_bytes - (head - tail), moved = 0;
    if (op->done < 8 && space > 0) { /* the length header, possibly in pieces */
        uint64_t k = 8 - op->done < space ? 8 - op->done : space;
        ring_put(c, r, head, (const char *)&op->n_bytes + op->done, k);
        op->done += k;
        head += k;
        space -= k;
        moved += k;
    }
    if (op->done >= 8 && space > 0) {
        uint64_t left = op->n_bytes - (op->done - 8), k = left < space ? left : space;
        if (k) ring_put(c, r, head, op->buf + (op->done - 8), k);
        op->done += k;
        head += k;
        moved += k;
    }
    if (moved) {
        atomic_store_explicit(&r->head, head, memory_order_release);
        ring_bell(c, op->peer);
    }
    if (op->done == 8 + op->n_bytes) op->complete = 1;
    return moved;
}

static uint64_t progress_recv(shm_ctx *c, shm_p2p_op *op, mt_status *st) {
    shm_ring *r = shm_ring_at(c, op->peer, c->rank);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t avail = head - tail, moved = 0;
    if (op->done < 8 && avail > 0) {
        uint64_t k = 8 - op->done < avail ? 8 - op->done : avail;
        ring_get(c, r, tail, (char *)&op->header + op->done, k);
        op->done += k;
        tail += k;
        avail -= k;
        moved += k;
        if (op->done == 8 && op->header != op->n_bytes) {
            *st = shm_fail(c, mt_errorf(MT_ERR_INTERNAL,
                                        "comm_shm: rank %d sent a message of %llu bytes but rank %d called recv "
                                        "for %llu bytes; sends and receives between two ranks must match in order "
                                        "and size",
                                        c->members[op->peer].world_rank, (unsigned long long)op->header,
                                        c->world_rank, (unsigned long long)op->n_bytes));
            return moved;
        }
    }
    if (op->done >= 8 && avail > 0) {
        uint64_t left = op->n_bytes - (op->done - 8), k = left < avail ? left : avail;
        if (k) ring_get(c, r, tail, op->buf + (op->done - 8), k);
        op->done += k;
        tail += k;
        moved += k;
    }
    if (moved) {
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        ring_bell(c, op->peer);
    }
    if (op->done == 8 + op->n_bytes) op->complete = 1;
    return moved;
}

typedef struct {
    uint32_t bell_seen;
} bell_arg;

static int bell_cond(shm_ctx *c, void *arg, int *blocker) {
    bell_arg *a = arg;
    for (int i = 0; i < c->n_ops; i++)
        if (!c->ops[i].complete) {
            *blocker = c->ops[i].peer;
            break;
        }
    return atomic_load(&c->members[c->rank].bell) != a->bell_seen;
}

/* Runs the queue to completion. */
static mt_status run_queue(shm_ctx *c) {
    mt_status st = MT_OK;
    int n_left = c->n_ops;
    const char *what = c->n_ops == 1 ? (c->ops[0].kind == 0 ? "send" : "recv") : "grouped send/recv";
    while (n_left > 0) {
        bell_arg a = {atomic_load(&c->members[c->rank].bell)};
        uint64_t moved = 0;
        memset(c->busy, 0, 2 * (size_t)c->n);
        for (int i = 0; i < c->n_ops && st == MT_OK; i++) {
            shm_p2p_op *op = &c->ops[i];
            if (op->complete) continue;
            unsigned char *busy = &c->busy[2 * op->peer + op->kind];
            if (*busy) continue; /* an earlier message to / from this peer goes first */
            moved += op->kind == 0 ? progress_send(c, op) : progress_recv(c, op, &st);
            if (op->complete)
                n_left--;
            else
                *busy = 1;
        }
        if (st != MT_OK) break;
        if (n_left > 0 && moved == 0) {
            st = shm_wait(c, &c->members[c->rank].bell, &c->members[c->rank].bell_sleepers, bell_cond, &a, what);
            if (st != MT_OK) break;
        }
    }
    c->n_ops = 0;
    return st;
}

static mt_status enqueue(shm_ctx *c, int kind, const void *buf, size_t n, mt_dtype dt, int peer) {
    const char *what = kind == 0 ? "send" : "recv";
    mt_status st = shm_check(c, what, 1);
    if (st != MT_OK) return st;
    if (peer < 0 || peer >= c->n)
        return mt_errorf(MT_ERR_INTERNAL, "comm_shm %s: peer %d is not a rank of this %d-rank communicator", what,
                         peer, c->n);
    if (dt != MT_F32 && dt != MT_BF16) return mt_errorf(MT_ERR_UNSUPPORTED, "comm_shm %s: dtype %d", what, (int)dt);
    if (c->n_ops == c->cap_ops) {
        int cap = c->cap_ops * 2;
        shm_p2p_op *ops = realloc(c->ops, sizeof *ops * (size_t)cap);
        if (!ops) return mt_errorf(MT_ERR_OOM, "comm_shm: out of memory queueing %d send/recv operations", cap);
        c->ops = ops;
        c->cap_ops = cap;
    }
    shm_p2p_op *op = &c->ops[c->n_ops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->peer = peer;
    op->buf = (char *)buf;
    op->n_bytes = (uint64_t)n * mt_dtype_bytes(dt);
    if (c->group_depth > 0) return MT_OK;
    return run_queue(c);
}

mt_status shm_send(mt_comm *comm, const void *buf, size_t n, mt_dtype dt, int peer) {
    return enqueue(shm_of(comm), 0, buf, n, dt, peer);
}

mt_status shm_recv(mt_comm *comm, void *buf, size_t n, mt_dtype dt, int peer) {
    return enqueue(shm_of(comm), 1, buf, n, dt, peer);
}

mt_status shm_group_start(mt_comm *comm) {
    shm_ctx *c = shm_of(comm);
    mt_status st = shm_check(c, "group", 1);
    if (st != MT_OK) return st;
    c->group_depth++;
    return MT_OK;
}

mt_status shm_group_end(mt_comm *comm) {
    shm_ctx *c = shm_of(comm);
    if (c->group_depth <= 0) return mt_errorf(MT_ERR_INTERNAL, "comm_shm: group_end without group_start");
    if (--c->group_depth > 0) return MT_OK;
    mt_status st = shm_check(c, "group", 1);
    if (st != MT_OK) {
        c->n_ops = 0;
        return st;
    }
    return run_queue(c);
}
