/* comm_shm_coll.c — the collectives of comm_shm, chunked through the per-rank slots of the
 * segment. A "unit" writes this rank's slot in half (unit & 1), crosses a barrier, then reads
 * the slots; with two halves, the next unit's barrier is what makes reuse safe, so most units
 * cost one barrier (allreduce two: reduce its share in place, barrier, copy out).
 * Rule kept: reductions run element by element in rank order 0, 1, ..., n-1 (bf16 in fp32,
 * rounded once), whichever rank computes them, so every rank gets the bitwise-same result,
 * equal to the serial sum in that order; counts are elements, sizes *_bytes. */
#include "parallel/comm_shm_internal.h"

#include <stdio.h>
#include <string.h>

static inline float max_nan(float a, float b) { return (b > a || b != b) ? b : a; }

/* dst[0..count) = op over k = 0..n-1 (in order) of slot(half, k)[off_bytes ..] */
static void reduce_slots(shm_ctx *c, int half, size_t off_bytes, void *dst, size_t count, mt_dtype dt,
                         mt_redop op) {
    int n = c->n;
    if (dt == MT_F32) {
        float *restrict d = dst;
        const float *s0 = (const float *)(shm_slot(c, half, 0) + off_bytes);
        if ((const float *)d != s0) memcpy(d, s0, count * sizeof(float));
        for (int k = 1; k < n; k++) {
            const float *restrict s = (const float *)(shm_slot(c, half, k) + off_bytes);
            if (op == MT_RED_SUM)
                for (size_t i = 0; i < count; i++) d[i] += s[i];
            else
                for (size_t i = 0; i < count; i++) d[i] = max_nan(d[i], s[i]);
        }
        return;
    }
    uint16_t *d = dst;
    float acc[1024];
    for (size_t base = 0; base < count; base += 1024) {
        size_t m = count - base < 1024 ? count - base : 1024;
        const uint16_t *s0 = (const uint16_t *)(shm_slot(c, half, 0) + off_bytes) + base;
        for (size_t i = 0; i < m; i++) acc[i] = mt_bf16_to_f32(s0[i]);
        for (int k = 1; k < n; k++) {
            const uint16_t *s = (const uint16_t *)(shm_slot(c, half, k) + off_bytes) + base;
            if (op == MT_RED_SUM)
                for (size_t i = 0; i < m; i++) acc[i] += mt_bf16_to_f32(s[i]);
            else
                for (size_t i = 0; i < m; i++) acc[i] = max_nan(acc[i], mt_bf16_to_f32(s[i]));
        }
        for (size_t i = 0; i < m; i++) d[base + i] = mt_f32_to_bf16(acc[i]);
    }
}

static mt_status check_args(shm_ctx *c, const char *what, mt_dtype dt, mt_redop op, int has_op) {
    mt_status st = shm_check(c, what, 0);
    if (st != MT_OK) return st;
    if (dt != MT_F32 && dt != MT_BF16) return mt_errorf(MT_ERR_UNSUPPORTED, "comm_shm %s: dtype %d", what, (int)dt);
    if (has_op && op != MT_RED_SUM && op != MT_RED_MAX)
        return mt_errorf(MT_ERR_UNSUPPORTED, "comm_shm %s: reduction op %d", what, (int)op);
    return MT_OK;
}

/* elements per share, a multiple of 64 bytes when there is room */
static size_t share_elems(size_t n_elems, int n_parts, size_t esz) {
    size_t align = 64 / esz, per = (n_elems + (size_t)n_parts - 1) / (size_t)n_parts;
    return (per + align - 1) / align * align;
}

/* One rank alone (returns 1): the result is its own input, copied into dst unless already there. */
static int alone(const shm_ctx *c, void *dst, const void *src, size_t n_bytes) {
    if (c->n != 1) return 0;
    if (dst != src && n_bytes) memmove(dst, src, n_bytes);
    return 1;
}

/* the next unit: this rank's n_bytes from src into its slot of the unit's half (*half), then
 * the barrier after which every rank's slot is readable */
static mt_status publish(shm_ctx *c, const char *what, const void *src, size_t n_bytes, int *half) {
    *half = (int)(c->unit++ & 1);
    memcpy(shm_slot(c, *half, c->rank), src, n_bytes);
    return shm_barrier(c, what);
}

/* what a collective does with a published unit: elements [off, off + m) of every rank's input */
typedef mt_status (*unit_step)(shm_ctx *c, int half, size_t off, size_t m, void *arg);

/* Every rank publishes its n elements (esz bytes each) of send in slot-sized units; after each
 * unit's barrier, `after` reads them. */
static mt_status publish_units(shm_ctx *c, const char *what, const void *send, size_t n, size_t esz, unit_step after,
                               void *arg) {
    const size_t per_unit = c->hdr->slot_bytes / esz;
    for (size_t off = 0; off < n; off += per_unit) {
        const size_t m = n - off < per_unit ? n - off : per_unit;
        int half;
        mt_status st = publish(c, what, (const char *)send + off * esz, m * esz, &half);
        if (st == MT_OK) st = after(c, half, off, m, arg);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

typedef struct {
    void *recv;
    size_t esz;
    mt_dtype dt;
    mt_redop op;
} allreduce_arg;

/* allreduce's unit: each rank reduces its share into slot 0, then all copy slot 0 out */
static mt_status allreduce_unit(shm_ctx *c, int half, size_t off, size_t m, void *arg) {
    const allreduce_arg *a = arg;
    const size_t esz = a->esz, share = share_elems(m, c->n, esz), lo = (size_t)c->rank * share;
    if (lo < m) {
        size_t cnt = m - lo < share ? m - lo : share;
        reduce_slots(c, half, lo * esz, shm_slot(c, half, 0) + lo * esz, cnt, a->dt, a->op);
    }
    mt_status st = shm_barrier(c, "allreduce");
    if (st != MT_OK) return st;
    memcpy((char *)a->recv + off * esz, shm_slot(c, half, 0), m * esz);
    return MT_OK;
}

mt_status shm_allreduce(mt_comm *comm, const void *send, void *recv, size_t n, mt_dtype dt, mt_redop op) {
    shm_ctx *c = shm_of(comm);
    mt_status st = check_args(c, "allreduce", dt, op, 1);
    if (st != MT_OK) return st;
    const size_t esz = mt_dtype_bytes(dt);
    if (alone(c, recv, send, n * esz)) return MT_OK;
    allreduce_arg a = {recv, esz, dt, op};
    return publish_units(c, "allreduce", send, n, esz, allreduce_unit, &a);
}

mt_status shm_reduce_scatter(mt_comm *comm, const void *send, void *recv, size_t n_per_rank, mt_dtype dt,
                             mt_redop op) {
    shm_ctx *c = shm_of(comm);
    mt_status st = check_args(c, "reduce_scatter", dt, op, 1);
    if (st != MT_OK) return st;
    size_t esz = mt_dtype_bytes(dt);
    if (alone(c, recv, send, n_per_rank * esz)) return MT_OK;
    size_t piece = c->hdr->slot_bytes / (size_t)c->n / esz, align = 64 / esz;
    if (piece >= align) piece = piece / align * align;
    for (size_t off = 0; off < n_per_rank; off += piece) {
        size_t m = n_per_rank - off < piece ? n_per_rank - off : piece;
        int half = (int)(c->unit++ & 1);
        char *mine = shm_slot(c, half, c->rank);
        for (int r = 0; r < c->n; r++)
            memcpy(mine + (size_t)r * piece * esz, (const char *)send + ((size_t)r * n_per_rank + off) * esz, m * esz);
        st = shm_barrier(c, "reduce_scatter");
        if (st != MT_OK) return st;
        reduce_slots(c, half, (size_t)c->rank * piece * esz, (char *)recv + off * esz, m, dt, op);
    }
    return MT_OK;
}

typedef struct {
    char *recv;
    size_t esz, n_per_rank;
    int in_place; /* this rank's part is in recv already */
} allgather_arg;

/* allgather's unit: every rank's slot into its part of recv */
static mt_status allgather_unit(shm_ctx *c, int half, size_t off, size_t m, void *arg) {
    const allgather_arg *a = arg;
    for (int r = 0; r < c->n; r++) {
        if (r == c->rank && a->in_place) continue;
        memcpy(a->recv + ((size_t)r * a->n_per_rank + off) * a->esz, shm_slot(c, half, r), m * a->esz);
    }
    return MT_OK;
}

mt_status shm_allgather(mt_comm *comm, const void *send, void *recv, size_t n_per_rank, mt_dtype dt) {
    shm_ctx *c = shm_of(comm);
    mt_status st = check_args(c, "allgather", dt, MT_RED_SUM, 0);
    if (st != MT_OK) return st;
    const size_t esz = mt_dtype_bytes(dt);
    char *own = (char *)recv + (size_t)c->rank * n_per_rank * esz;
    if (alone(c, own, send, n_per_rank * esz)) return MT_OK;
    allgather_arg a = {recv, esz, n_per_rank, send == own};
    return publish_units(c, "allgather", send, n_per_rank, esz, allgather_unit, &a);
}

mt_status shm_broadcast(mt_comm *comm, void *buf, size_t n, mt_dtype dt, int root) {
    shm_ctx *c = shm_of(comm);
    mt_status st = check_args(c, "broadcast", dt, MT_RED_SUM, 0);
    if (st != MT_OK) return st;
    if (root < 0 || root >= c->n)
        return mt_errorf(MT_ERR_INTERNAL, "comm_shm broadcast: root %d is not a rank of this %d-rank communicator",
                         root, c->n);
    if (c->n == 1) return MT_OK;
    size_t esz = mt_dtype_bytes(dt), per_unit = c->hdr->slot_bytes * (size_t)c->n / esz; /* a whole half */
    for (size_t off = 0; off < n; off += per_unit) {
        size_t m = n - off < per_unit ? n - off : per_unit;
        int half = (int)(c->unit++ & 1);
        if (c->rank == root) memcpy(shm_slot(c, half, 0), (const char *)buf + off * esz, m * esz);
        st = shm_barrier(c, "broadcast");
        if (st != MT_OK) return st;
        if (c->rank != root) memcpy((char *)buf + off * esz, shm_slot(c, half, 0), m * esz);
    }
    return MT_OK;
}

mt_status shm_alltoallv(mt_comm *comm, const void *send, const size_t *send_counts, const size_t *send_displs,
                        void *recv, const size_t *recv_counts, const size_t *recv_displs, mt_dtype dt) {
    shm_ctx *c = shm_of(comm);
    mt_status st = check_args(c, "alltoallv", dt, MT_RED_SUM, 0);
    if (st != MT_OK) return st;
    int n = c->n, me = c->rank;
    size_t esz = mt_dtype_bytes(dt);
    /* unit 0: every rank publishes its send counts; all read the whole matrix */
    int half = (int)(c->unit++ & 1);
    uint64_t *mine = (uint64_t *)shm_slot(c, half, me);
    for (int d = 0; d < n; d++) mine[d] = send_counts[d];
    st = shm_barrier(c, "alltoallv");
    if (st != MT_OK) return st;
    size_t piece = c->hdr->slot_bytes / (size_t)n / esz, align = 64 / esz;
    if (piece >= align) piece = piece / align * align;
    uint64_t n_rounds = 0;
    int bad_src = -1;
    for (int s = 0; s < n; s++) {
        const uint64_t *row = (const uint64_t *)shm_slot(c, half, s);
        for (int d = 0; d < n; d++) {
            c->counts[(size_t)s * n + d] = row[d];
            uint64_t r = (row[d] + piece - 1) / piece;
            if (r > n_rounds) n_rounds = r;
        }
        if (bad_src < 0 && row[me] != recv_counts[s]) bad_src = s;
    }
    char msg[256] = "";
    if (bad_src >= 0) /* keep going (the others would hang), copy what fits, report at the end */
        snprintf(msg, sizeof msg, "comm_shm alltoallv: rank %d sends %llu elements to rank %d, which expects %zu",
                 bad_src, (unsigned long long)c->counts[(size_t)bad_src * n + me], me, recv_counts[bad_src]);
    for (uint64_t round = 0; round < n_rounds; round++) {
        uint64_t lo = round * piece;
        half = (int)(c->unit++ & 1);
        char *slot = shm_slot(c, half, me);
        for (int d = 0; d < n; d++) {
            uint64_t cnt = c->counts[(size_t)me * n + d];
            if (lo >= cnt) continue;
            uint64_t m = cnt - lo < piece ? cnt - lo : piece;
            memcpy(slot + (size_t)d * piece * esz, (const char *)send + (send_displs[d] + lo) * esz, m * esz);
        }
        st = shm_barrier(c, "alltoallv");
        if (st != MT_OK) return st;
        for (int s = 0; s < n; s++) {
            uint64_t cnt = c->counts[(size_t)s * n + me];
            if (cnt > recv_counts[s]) cnt = recv_counts[s];
            if (lo >= cnt) continue;
            uint64_t m = cnt - lo < piece ? cnt - lo : piece;
            memcpy((char *)recv + (recv_displs[s] + lo) * esz, shm_slot(c, half, s) + (size_t)me * piece * esz,
                   m * esz);
        }
    }
    if (bad_src >= 0) return mt_errorf(MT_ERR_INTERNAL, "%s", msg);
    return MT_OK;
}
