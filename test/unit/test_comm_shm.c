/* test_comm_shm.c — the shared-memory communicator with real processes: for 1..8 ranks (forked
 * from this test) every collective against a serial reference computed in rank order (bitwise:
 * the fixed reduction order makes the result exact), odd sizes (1, 7, 1000003), sizes far beyond
 * the segment's slots (and a run with tiny slots and rings, so everything wraps many times),
 * in-place variants, MAX, bf16, alltoallv with uneven counts and gaps, barriers, grouped
 * send/recv rings larger than the ring buffer, split (even/odd, reversed keys, no-color ranks,
 * nested, tp/dp groups from the grid) with collectives inside the groups, and the world created
 * through a bootstrap. Then failures: a peer that _exit()s or is SIGKILLed mid-collective (the
 * others must name it within 10 s), a SIGSTOPped peer (timeout after 2 s naming it), abort on
 * the world and on a sub-communicator (every rank learns the reason at once); misuse (collective
 * in a group, bad root/peer, mismatched alltoallv counts or send/recv sizes) is an error, not a
 * hang. Allreduce results are compared across ranks bit for bit. At the end /dev/shm must hold
 * no mtrain-* entry made by this test's ranks (names carry the creator's pid). ~15-20 s on 2 cores.
 * Usage: test_comm_shm [quick]   (quick: ranks 1..4, fewer sizes; for valgrind) */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parallel/comm_shm.h"
#include "parallel/grid.h"
#include "test/test.h"

/* ---------------- shared scratch between the parent and its children ---------------- */

#define MAX_RANKS 8
#define MAX_CASES 64

typedef struct {
    uint64_t hash[MAX_CASES][MAX_RANKS]; /* allreduce result hashes, compared across ranks */
    int n_cases;
    /* failure tests: what each survivor saw */
    int status[MAX_RANKS];
    double elapsed[MAX_RANKS];
    char msg[MAX_RANKS][512];
    _Atomic int ready;
    _Atomic int recorded; /* failure tests: survivors that have recorded what they saw */
} shared_t;

static shared_t *g_sh;
static int g_quick;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------- data and serial references ---------------- */

static float gen(uint32_t seed, int rank, size_t i) {
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 1) * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)i * 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    float mant = (float)((x >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
    return ldexpf(mant, (int)((x >> 8) % 16) - 8); /* magnitudes 2^-8..2^7: order matters */
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static size_t esz(mt_dtype dt) { return mt_dtype_bytes(dt); }

/* buf[i] = value of rank for element base + i */
static void fill(void *buf, mt_dtype dt, uint32_t seed, int rank, size_t n, size_t base) {
    for (size_t i = 0; i < n; i++) {
        float v = gen(seed, rank, base + i);
        if (dt == MT_F32)
            ((float *)buf)[i] = v;
        else
            ((uint16_t *)buf)[i] = to_bf16(v);
    }
}

static float maxf_nan(float a, float b) { return (b > a || b != b) ? b : a; }

/* out[i] = op over ranks[0], ranks[1], ... (in that order) of element base + i; bf16 via fp32 */
static void ref_reduce(void *out, mt_dtype dt, mt_redop op, uint32_t seed, const int *ranks, int n_ranks, size_t n,
                       size_t base) {
    for (size_t i = 0; i < n; i++) {
        float acc = 0;
        for (int k = 0; k < n_ranks; k++) {
            float v = gen(seed, ranks[k], base + i);
            if (dt == MT_BF16) v = from_bf16(to_bf16(v));
            acc = k == 0 ? v : (op == MT_RED_SUM ? acc + v : maxf_nan(acc, v));
        }
        if (dt == MT_F32)
            ((float *)out)[i] = acc;
        else
            ((uint16_t *)out)[i] = to_bf16(acc);
    }
}

static uint64_t fnv(const void *p, size_t n_bytes) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n_bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* first differing element, or -1 */
static long first_diff(const void *a, const void *b, size_t n, mt_dtype dt) {
    size_t s = esz(dt);
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * s, (const char *)b + i * s, s)) return (long)i;
    return -1;
}

#define CHECK_ST(call)                                                                        \
    do {                                                                                      \
        mt_status st_ = (call);                                                               \
        CHECKF(st_ == MT_OK, "%s -> %s: %s", #call, mt_status_name(st_), mt_last_error());   \
    } while (0)

/* ---------------- the cases (run on every rank of a communicator) ---------------- */

/* a case's three buffers */
static void free3(void *send, void *recv, void *ref) {
    free(send);
    free(recv);
    free(ref);
}

/* reduce_scatter / allgather: the n elements of got are those of ref (n_per per rank) */
static void check_per_rank(const char *op, const void *got, const void *ref, size_t n, size_t n_per, mt_dtype dt,
                           int in_place, int n_ranks) {
    long d = first_diff(got, ref, n, dt);
    CHECKF(d < 0, "%s n_per_rank=%zu %s%s on %d ranks: element %ld differs", op, n_per, mt_dtype_name(dt),
           in_place ? " in place" : "", n_ranks, d);
}

/* ids: world ranks of this communicator's members in its rank order (for references) */
static void case_allreduce(mt_comm *c, const int *ids, size_t n, mt_dtype dt, mt_redop op, int in_place,
                           uint32_t seed, int hash_slot) {
    int me = c->rank;
    void *send = malloc(n * esz(dt) + 1), *recv = malloc(n * esz(dt) + 1), *ref = malloc(n * esz(dt) + 1);
    fill(send, dt, seed, ids[me], n, 0);
    ref_reduce(ref, dt, op, seed, ids, c->size, n, 0);
    memset(recv, 0x5a, n * esz(dt));
    CHECK_ST(c->i->allreduce(c, send, in_place ? send : recv, n, dt, op));
    void *got = in_place ? send : recv;
    long d = first_diff(got, ref, n, dt);
    CHECKF(d < 0, "allreduce n=%zu %s %s%s on %d ranks: element %ld differs from the serial sum", n,
           mt_dtype_name(dt), op == MT_RED_SUM ? "sum" : "max", in_place ? " in place" : "", c->size, d);
    if (hash_slot >= 0) g_sh->hash[hash_slot][ids[me]] = fnv(got, n * esz(dt));
    free3(send, recv, ref);
}

static void case_reduce_scatter(mt_comm *c, const int *ids, size_t n_per, mt_dtype dt, mt_redop op, int in_place,
                                uint32_t seed) {
    int me = c->rank, n = c->size;
    size_t total = n_per * (size_t)n;
    void *send = malloc(total * esz(dt) + 1), *recv = malloc(n_per * esz(dt) + 1), *ref = malloc(n_per * esz(dt) + 1);
    fill(send, dt, seed, ids[me], total, 0);
    ref_reduce(ref, dt, op, seed, ids, n, n_per, (size_t)me * n_per);
    void *out = in_place ? (char *)send + (size_t)me * n_per * esz(dt) : recv;
    CHECK_ST(c->i->reduce_scatter(c, send, out, n_per, dt, op));
    check_per_rank("reduce_scatter", out, ref, n_per, n_per, dt, in_place, n);
    free3(send, recv, ref);
}

static void case_allgather(mt_comm *c, const int *ids, size_t n_per, mt_dtype dt, int in_place, uint32_t seed) {
    int me = c->rank, n = c->size;
    size_t total = n_per * (size_t)n, s = esz(dt);
    void *send = malloc(n_per * s + 1), *recv = malloc(total * s + 1), *ref = malloc(total * s + 1);
    for (int r = 0; r < n; r++) fill((char *)ref + (size_t)r * n_per * s, dt, seed, ids[r], n_per, 0);
    memset(recv, 0x77, total * s);
    fill(send, dt, seed, ids[me], n_per, 0);
    if (in_place) memcpy((char *)recv + (size_t)me * n_per * s, send, n_per * s);
    CHECK_ST(c->i->allgather(c, in_place ? (char *)recv + (size_t)me * n_per * s : send, recv, n_per, dt));
    check_per_rank("allgather", recv, ref, total, n_per, dt, in_place, n);
    free3(send, recv, ref);
}

static void case_broadcast(mt_comm *c, const int *ids, size_t n, mt_dtype dt, int root, uint32_t seed) {
    size_t s = esz(dt);
    void *buf = malloc(n * s + 1), *ref = malloc(n * s + 1);
    fill(ref, dt, seed, ids[root], n, 0);
    if (c->rank == root)
        memcpy(buf, ref, n * s);
    else
        memset(buf, 0x33, n * s);
    CHECK_ST(c->i->broadcast(c, buf, n, dt, root));
    long d = first_diff(buf, ref, n, dt);
    CHECKF(d < 0, "broadcast n=%zu root %d on %d ranks: element %ld differs", n, root, c->size, d);
    free(buf);
    free(ref);
}

static size_t a2a_count(int s, int d, uint32_t seed, size_t unit) {
    return ((size_t)(s * 7 + d * 3) + seed) % 5 * unit + (size_t)(s + d) % 3; /* zeros included */
}

static void case_alltoallv(mt_comm *c, const int *ids, size_t unit, mt_dtype dt, uint32_t seed) {
    int me = c->rank, n = c->size;
    size_t s = esz(dt), sc[MAX_RANKS], sd[MAX_RANKS], rc[MAX_RANKS], rd[MAX_RANKS], st_total = 0, rt_total = 0;
    for (int d = 0; d < n; d++) { /* send blocks with 3-element gaps between them */
        sc[d] = a2a_count(ids[me], ids[d], seed, unit);
        sd[d] = st_total;
        st_total += sc[d] + 3;
    }
    for (int r = 0; r < n; r++) {
        rc[r] = a2a_count(ids[r], ids[me], seed, unit);
        rd[r] = rt_total;
        rt_total += rc[r] + 5;
    }
    char *send = malloc(st_total * s + 1), *recv = malloc(rt_total * s + 1), *ref = malloc(rt_total * s + 1);
    memset(send, 0, st_total * s);
    for (int d = 0; d < n; d++) fill(send + sd[d] * s, dt, seed, ids[me], sc[d], (size_t)ids[d] * 10000019u);
    memset(recv, 0x11, rt_total * s);
    memset(ref, 0x11, rt_total * s);
    for (int r = 0; r < n; r++) fill(ref + rd[r] * s, dt, seed, ids[r], rc[r], (size_t)ids[me] * 10000019u);
    CHECK_ST(c->i->alltoallv(c, send, sc, sd, recv, rc, rd, dt));
    long d = first_diff(recv, ref, rt_total, dt);
    CHECKF(d < 0, "alltoallv unit %zu on %d ranks: element %ld differs (gaps must stay untouched)", unit, n, d);
    free(send);
    free(recv);
    free(ref);
}

/* a ring: send to rank+1, receive from rank-1, grouped (odd ranks post the receive first), two
 * messages per direction to check ordering; larger than the ring buffer */
static void case_ring(mt_comm *c, const int *ids, size_t n, uint32_t seed) {
    int me = c->rank, size = c->size, next = (me + 1) % size, prev = (me + size - 1) % size;
    float *a = malloc(n * 4 + 4), *b = malloc(7 * 4), *ra = malloc(n * 4 + 4), *rb = malloc(7 * 4);
    fill(a, MT_F32, seed, ids[me], n, 0);
    fill(b, MT_F32, seed + 1, ids[me], 7, 0);
    CHECK_ST(c->i->group_start(c));
    if (me % 2) {
        CHECK_ST(c->i->recv(c, ra, n, MT_F32, prev));
        CHECK_ST(c->i->recv(c, rb, 7, MT_F32, prev));
    }
    CHECK_ST(c->i->send(c, a, n, MT_F32, next));
    CHECK_ST(c->i->send(c, b, 7, MT_F32, next));
    if (me % 2 == 0) {
        CHECK_ST(c->i->recv(c, ra, n, MT_F32, prev));
        CHECK_ST(c->i->recv(c, rb, 7, MT_F32, prev));
    }
    CHECK_ST(c->i->group_end(c));
    fill(a, MT_F32, seed, ids[prev], n, 0);
    fill(b, MT_F32, seed + 1, ids[prev], 7, 0);
    CHECKF(memcmp(a, ra, n * 4) == 0 && memcmp(b, rb, 7 * 4) == 0, "ring send/recv of %zu floats on %d ranks", n,
           size);
    /* plain (ungrouped) pairs: even sends a small message to odd */
    if (size >= 2 && !(size % 2)) {
        float x[3] = {1.5f, (float)me, -2.0f}, y[3] = {0};
        if (me % 2 == 0) {
            CHECK_ST(c->i->send(c, x, 3, MT_F32, me + 1));
        } else {
            CHECK_ST(c->i->recv(c, y, 3, MT_F32, me - 1));
            CHECK(y[0] == 1.5f && y[1] == (float)(me - 1) && y[2] == -2.0f);
        }
    }
    free(a);
    free(b);
    free(ra);
    free(rb);
}

static void case_barrier(mt_comm *c, _Atomic int *counter, int rounds) {
    for (int k = 0; k < rounds; k++) {
        atomic_fetch_add(counter, 1);
        CHECK_ST(c->i->barrier(c));
        int v = atomic_load(counter);
        CHECKF(v >= c->size * (k + 1), "barrier round %d: only %d arrivals seen", k, v);
        CHECK_ST(c->i->barrier(c)); /* nobody starts the next round before all have checked */
    }
}

static int g_hash_slot; /* < 0: do not record (sub-communicators hold different data) */
static int next_hash(void) { return g_hash_slot < 0 ? -1 : g_hash_slot++; }

/* the whole collective suite on communicator c whose members are world ranks ids[] */
static void suite(mt_comm *c, const int *ids, uint32_t seed, int big) {
    size_t sizes[] = {1, 7, 1000, big ? 1000003 : 20011};
    for (int k = 0; k < 4; k++) {
        case_allreduce(c, ids, sizes[k], MT_F32, MT_RED_SUM, 0, seed + (uint32_t)k, next_hash());
        case_allgather(c, ids, sizes[k] / 3 + 1, MT_F32, k == 2, seed + 10 + (uint32_t)k);
        case_broadcast(c, ids, sizes[k], k % 2 ? MT_BF16 : MT_F32, k % c->size == 0 ? c->size - 1 : k % c->size,
                       seed + 20 + (uint32_t)k);
        case_reduce_scatter(c, ids, sizes[k] / 4 + 1, MT_F32, MT_RED_SUM, k == 1, seed + 30 + (uint32_t)k);
    }
    case_allreduce(c, ids, big ? 1000003 : 20011, MT_F32, MT_RED_SUM, 1, seed + 40, next_hash());
    case_allreduce(c, ids, 1001, MT_F32, MT_RED_MAX, 0, seed + 41, next_hash());
    case_allreduce(c, ids, 7, MT_F32, MT_RED_MAX, 1, seed + 42, -1);
    case_allreduce(c, ids, big ? 300007 : 5003, MT_BF16, MT_RED_SUM, 0, seed + 43, next_hash());
    case_allreduce(c, ids, 333, MT_BF16, MT_RED_MAX, 1, seed + 44, -1);
    case_allreduce(c, ids, 0, MT_F32, MT_RED_SUM, 0, seed + 45, -1);
    case_reduce_scatter(c, ids, 777, MT_BF16, MT_RED_SUM, 0, seed + 46);
    case_reduce_scatter(c, ids, 99, MT_F32, MT_RED_MAX, 0, seed + 47);
    case_allgather(c, ids, 1234, MT_BF16, 1, seed + 48);
    case_alltoallv(c, ids, 1, MT_F32, seed + 50);
    case_alltoallv(c, ids, big ? 40000 : 900, MT_F32, seed + 51);
    case_alltoallv(c, ids, 333, MT_BF16, seed + 52);
    case_ring(c, ids, big ? 1000003 : 20011, seed + 60);
}

/* split tests on the world w of n ranks (world ranks 0..n-1) */
static void split_suite(mt_comm *w, uint32_t seed, int big) {
    int n = w->size, me = w->rank, ids[MAX_RANKS];
    /* even / odd, keys reversed: new rank order is descending world rank */
    mt_comm *half = NULL;
    CHECK_ST(w->i->split(w, me % 2, -me, &half));
    if (half) {
        int m = 0;
        for (int r = n - 1; r >= 0; r--)
            if (r % 2 == me % 2) ids[m++] = r;
        CHECK(half->size == m);
        CHECK(ids[half->rank] == me);
        suite(half, ids, seed + 100, 0);
        /* nested: split the half into singletons and pairs */
        mt_comm *sub = NULL;
        CHECK_ST(half->i->split(half, half->rank / 2, half->rank, &sub));
        if (sub) {
            int sids[2], k = 0;
            for (int r = 0; r < half->size; r++)
                if (r / 2 == half->rank / 2) sids[k++] = ids[r];
            CHECK(sub->size == k);
            case_allreduce(sub, sids, 10007, MT_F32, MT_RED_SUM, 0, seed + 150, -1);
            case_ring(sub, sids, 5000, seed + 151);
            sub->i->destroy(sub);
        }
        half->i->destroy(half);
    }
    /* rank 0 takes no part (color -1) when there are other ranks */
    mt_comm *rest = NULL;
    CHECK_ST(w->i->split(w, (n > 1 && me == 0) ? -1 : 7, 0, &rest));
    if (n > 1 && me == 0) {
        CHECK(rest == NULL);
    } else if (rest) {
        for (int r = (n > 1); r < n; r++) ids[r - (n > 1)] = r;
        CHECK(rest->size == n - (n > 1));
        case_allreduce(rest, ids, 30011, MT_F32, MT_RED_SUM, 0, seed + 200, -1);
        case_broadcast(rest, ids, 1000, MT_F32, rest->size - 1, seed + 201);
        rest->i->destroy(rest);
    }
    /* tp / dp groups of a dense grid (tp 2 when n is even), split with the grid's color/key;
     * the world is destroyed last, after its sub-communicators, in the caller */
    mt_grid g;
    if (mt_grid_dense(&g, n, n % 2 ? 1 : 2, 1, n % 4 ? 1 : 2) == MT_OK) {
        unsigned masks[2] = {MT_GRID_TP, MT_GRID_DP};
        for (int k = 0; k < 2; k++) {
            int color, key, n_group;
            mt_grid_color_key(&g, masks[k], me, &color, &key);
            mt_grid_group_ranks(&g, masks[k], me, ids, &n_group);
            mt_comm *grp = NULL;
            CHECK_ST(w->i->split(w, color, key, &grp));
            if (!grp) continue;
            CHECK(grp->size == n_group && grp->rank == key);
            case_allreduce(grp, ids, big ? 200003 : 5003, MT_F32, MT_RED_SUM, 0, seed + 300 + (uint32_t)k, -1);
            case_allgather(grp, ids, 1001, MT_F32, 0, seed + 310 + (uint32_t)k);
            case_reduce_scatter(grp, ids, 1001, MT_F32, MT_RED_SUM, 0, seed + 320 + (uint32_t)k);
            grp->i->destroy(grp);
        }
    }
}

/* ---------------- running n forked ranks ---------------- */

typedef void (*rank_fn)(mt_comm *world, void *arg);

/* every rank this test forked: segment names carry their creator's pid */
static pid_t g_children[1024];
static int g_n_children;
static void note_child(pid_t p) {
    if (p > 0 && g_n_children < 1024) g_children[g_n_children++] = p;
}

/* fork() for one rank, noted as this test's child; in the child the failure count starts at 0 */
static pid_t fork_rank(void) {
    fflush(stdout);
    pid_t p = fork();
    note_child(p);
    if (p == 0) mt_test_failures = 0;
    return p;
}

static _Atomic int *g_counter;

/* Forks n ranks that each create the world (timeout_s) and run fn; returns the child pids in
 * pids[] when `keep` (the caller reaps them) or waits for them (<= 120 s) and counts failures. */
static void run_ranks(int n, int timeout_s, rank_fn fn, void *arg, const char *what, pid_t *pids_out) {
    mt_comm_shm_local *local = NULL;
    CHECK_ST(mt_comm_shm_local_create(n, &local));
    if (!local) return;
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        pids[r] = fork_rank();
        if (pids[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
            mt_comm *w = NULL;
            mt_status st = mt_comm_shm_create_local(local, r, timeout_s, &w);
            if (st != MT_OK) {
                fprintf(stderr, "rank %d: create_local: %s\n", r, mt_last_error());
                _exit(2);
            }
            fn(w, arg);
            w->i->destroy(w);
            _exit(mt_test_failures ? 1 : 0);
        }
    }
    if (pids_out) {
        memcpy(pids_out, pids, sizeof(pid_t) * (size_t)n);
        mt_comm_shm_local_free(local);
        return;
    }
    double deadline = now_s() + 120;
    int n_left = n;
    while (n_left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            n_left--;
            int r = 0;
            while (r < n && pids[r] != p) r++;
            CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %d ranks: rank %d failed (status 0x%x)", what,
                   n, r, status);
            continue;
        }
        if (now_s() > deadline) {
            CHECKF(0, "%s: %d ranks: still running after 120 s; killing them", what, n);
            for (int r = 0; r < n; r++) kill(pids[r], SIGKILL);
            deadline = 1e300;
        }
        usleep(2000);
    }
    mt_comm_shm_local_free(local);
}

static void rank_all(mt_comm *w, void *arg) {
    int big = *(int *)arg, ids[MAX_RANKS];
    for (int r = 0; r < w->size; r++) ids[r] = r;
    g_hash_slot = 0;
    suite(w, ids, 1000u + (uint32_t)w->size, big);
    if (w->rank == 0) g_sh->n_cases = g_hash_slot;
    g_hash_slot = -1;
    case_barrier(w, g_counter, 30);
    split_suite(w, 2000u + (uint32_t)w->size, big);
}

static void test_collectives(int n, int big) {
    memset(g_sh, 0, sizeof *g_sh);
    atomic_store(g_counter, 0);
    double t0 = now_s();
    run_ranks(n, 30, rank_all, &big, "collectives", NULL);
    int same = 1;
    for (int k = 0; k < g_sh->n_cases; k++)
        for (int r = 1; r < n; r++)
            if (g_sh->hash[k][r] != g_sh->hash[k][0]) same = 0;
    CHECKF(same && g_sh->n_cases > 0, "allreduce results differ across %d ranks", n);
    printf("  %d rank%s: all collectives%s ok in %.2f s\n", n, n > 1 ? "s" : "", big ? " (big sizes)" : "",
           now_s() - t0);
    fflush(stdout);
}

/* ---------------- misuse is reported, not hung ---------------- */

static void rank_misuse(mt_comm *w, void *arg) {
    (void)arg;
    int me = w->rank, n = w->size;
    float x[16] = {0};
    /* a collective inside a group, a bad root, a bad peer */
    CHECK_ST(w->i->group_start(w));
    CHECK(w->i->allreduce(w, x, x, 4, MT_F32, MT_RED_SUM) == MT_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(mt_last_error(), "inside group_start/group_end");
    CHECK_ST(w->i->group_end(w));
    CHECK(w->i->broadcast(w, x, 4, MT_F32, n) == MT_ERR_INTERNAL);
    CHECK(w->i->send(w, x, 4, MT_F32, -1) == MT_ERR_INTERNAL);
    /* alltoallv where rank 1 expects one element too many from rank 0: only rank 1 fails,
     * nobody hangs, and the communicator keeps working */
    size_t sc[MAX_RANKS], sd[MAX_RANKS], rc[MAX_RANKS], rd[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        sc[r] = rc[r] = 1;
        sd[r] = rd[r] = (size_t)r;
    }
    if (me == 1) rc[0] = 2;
    mt_status st = w->i->alltoallv(w, x, sc, sd, x + 8, rc, rd, MT_F32);
    if (me == 1) {
        CHECK(st == MT_ERR_INTERNAL);
        CHECK_STR_CONTAINS(mt_last_error(), "rank 0 sends 1 elements to rank 1, which expects 2");
    } else {
        CHECK(st == MT_OK);
    }
    CHECK_ST(w->i->barrier(w));
    /* recv of another size than was sent: the receiver gets both sizes */
    float y[12];
    if (me == 0) CHECK_ST(w->i->send(w, x, 10, MT_F32, 1));
    if (me == 1) {
        CHECK(w->i->recv(w, y, 12, MT_F32, 0) == MT_ERR_INTERNAL);
        CHECK_STR_CONTAINS(mt_last_error(), "sent a message of 40 bytes but rank 1 called recv for 48 bytes");
    }
}

/* ---------------- the world through an mt_bootstrap ---------------- */

typedef struct {
    pthread_barrier_t bar;
    char blobs[MAX_RANKS][1024];
} test_bs_shared;

static test_bs_shared *g_bs;

static mt_status tbs_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    memcpy(g_bs->blobs[bs->rank], mine, n_bytes);
    pthread_barrier_wait(&g_bs->bar);
    for (int r = 0; r < bs->size; r++) memcpy((char *)all + (size_t)r * n_bytes, g_bs->blobs[r], n_bytes);
    pthread_barrier_wait(&g_bs->bar);
    return MT_OK;
}

static void test_bootstrap_init(int n) {
    g_bs = mmap(NULL, sizeof *g_bs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&g_bs->bar, &a, (unsigned)n);
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        pids[r] = fork_rank();
        if (pids[r] == 0) {
            mt_bootstrap bs = {.rank = r, .size = n, .local_rank = r, .local_size = n, .kind = "test",
                               .allgather = tbs_allgather};
            mt_comm *w = NULL;
            CHECK_ST(mt_comm_shm_init(&bs, 10, &w));
            g_hash_slot = -1;
            if (w) {
                int ids[MAX_RANKS];
                for (int k = 0; k < n; k++) ids[k] = k;
                CHECK(w->rank == r && w->size == n && strcmp(w->i->name, "shm") == 0);
                case_allreduce(w, ids, 100003, MT_F32, MT_RED_SUM, 0, 77, -1);
                split_suite(w, 78, 0);
                w->i->destroy(w);
            }
            _exit(mt_test_failures ? 1 : 0);
        }
    }
    for (int r = 0; r < n; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bootstrap init: rank %d failed", r);
    }
    /* several nodes are refused with a clear message */
    mt_bootstrap bs = {.rank = 0, .size = 4, .local_rank = 0, .local_size = 2, .kind = "test"};
    mt_comm *w = NULL;
    CHECK(mt_comm_shm_init(&bs, 10, &w) == MT_ERR_UNSUPPORTED && w == NULL);
    CHECK_STR_CONTAINS(mt_last_error(), "one node");
    pthread_barrier_destroy(&g_bs->bar);
    munmap(g_bs, sizeof *g_bs);
    printf("  world via mt_bootstrap (%d ranks), multi-node refusal: ok\n", n);
}

/* ---------------- failures ---------------- */

enum { F_EXIT, F_KILL, F_STOP, F_ABORT, F_ABORT_SUB, F_LATE_ABORT };
static const char *const g_fail_names[] = {"peer _exit()s", "peer SIGKILLed mid-collective", "peer SIGSTOPped",
                                           "abort on the world", "abort on a sub-communicator",
                                           "abort just after the timeout"};
typedef struct {
    int kind, victim;
} fail_arg;

static void record(mt_comm *w, mt_status st, double t0) {
    g_sh->status[w->rank] = st;
    g_sh->elapsed[w->rank] = now_s() - t0;
    snprintf(g_sh->msg[w->rank], sizeof g_sh->msg[0], "%s", st == MT_OK ? "ok" : mt_last_error());
}

static void rank_fail(mt_comm *w, void *arg) {
    fail_arg *f = arg;
    int me = w->rank, n = w->size;
    size_t count = 1000003;
    float *buf = malloc(count * 4);
    fill(buf, MT_F32, 5, me, count, 0);
    mt_status st = w->i->allreduce(w, buf, buf, count, MT_F32, MT_RED_SUM); /* one that works */
    CHECK(st == MT_OK);
    mt_comm *sub = NULL;
    if (f->kind == F_ABORT_SUB) CHECK_ST(w->i->split(w, me % 2, me, &sub));
    if (me == f->victim) {
        switch (f->kind) {
        case F_EXIT: free(buf); _exit(0);
        case F_KILL: /* block inside the communicator until the parent kills us */
            atomic_fetch_add(&g_sh->ready, 1);
            w->i->recv(w, buf, 1, MT_F32, (me + 1) % n);
            _exit(3);
        case F_STOP: raise(SIGSTOP); _exit(4);
        case F_ABORT:
        case F_ABORT_SUB:
        case F_LATE_ABORT:
            /* let the others block first; the late abort comes 0.4 s after their 2 s timeout, as from a
               peer that was itself waiting with the same timeout in another communicator (a lost node) */
            usleep(f->kind == F_LATE_ABORT ? 2400000 : 300000);
            if (f->kind == F_LATE_ABORT) mt_errorf(MT_ERR_PEER, "test reason: lost node mtnode1");
            else mt_errorf(MT_ERR_DATA, "test reason: loss is NaN at iteration 17");
            (f->kind == F_ABORT_SUB ? sub : w)->i->abort(f->kind == F_ABORT_SUB ? sub : w);
            st = w->i->barrier(w); /* the aborting rank's own calls fail too */
            CHECK(st == MT_ERR_PEER);
            if (sub) sub->i->destroy(sub);
            free(buf);
            return;
        }
    }
    double t0 = now_s();
    for (int it = 0; it < 50 && st == MT_OK; it++) {
        if (f->kind == F_ABORT_SUB && it == 5) st = w->i->barrier(w);
        if (st == MT_OK) st = w->i->allreduce(w, buf, buf, count, MT_F32, MT_RED_SUM);
        if (st == MT_OK && f->kind == F_ABORT_SUB) st = sub->i->barrier(sub);
        if (st == MT_OK) t0 = now_s();
    }
    record(w, st, t0);
    /* sticky: the next call fails at once, the same way */
    if (st != MT_OK) {
        double t1 = now_s();
        CHECK(w->i->barrier(w) == MT_ERR_PEER && now_s() - t1 < 0.5);
    }
    /* no survivor exits before every survivor has recorded: an exited survivor is a dead peer too, and a
     * slower one could name it instead of the victim (seen once in a CI run: "rank 1 died" for victim 2) */
    atomic_fetch_add(&g_sh->recorded, 1);
    for (double t2 = now_s(); atomic_load(&g_sh->recorded) < n - 1 && now_s() - t2 < 20;) usleep(1000);
    if (sub) sub->i->destroy(sub);
    free(buf);
}

static void test_failure(int kind, int n, int victim) {
    memset(g_sh, 0, sizeof *g_sh);
    fail_arg f = {kind, victim};
    int timeout_s = kind == F_STOP || kind == F_LATE_ABORT ? 2 : 30;
    pid_t pids[MAX_RANKS];
    double t0 = now_s();
    run_ranks(n, timeout_s, rank_fail, &f, g_fail_names[kind], pids);
    if (kind == F_KILL) {
        while (atomic_load(&g_sh->ready) < 1 && now_s() - t0 < 20) usleep(1000);
        usleep(200000);
        kill(pids[victim], SIGKILL);
    }
    /* survivors first (the victim stays a zombie or stopped meanwhile), with a deadline */
    for (int r = 0; r < n; r++) {
        if (r == victim && kind != F_ABORT && kind != F_ABORT_SUB && kind != F_LATE_ABORT) continue;
        int status = 0;
        double deadline = now_s() + 60;
        pid_t p;
        while ((p = waitpid(pids[r], &status, WNOHANG)) == 0 && now_s() < deadline) usleep(2000);
        if (p == 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status, 0);
        }
        CHECKF(p > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank %d exit status 0x%x",
               g_fail_names[kind], r, status);
    }
    if (kind != F_ABORT && kind != F_ABORT_SUB && kind != F_LATE_ABORT) {
        kill(pids[victim], SIGKILL);
        waitpid(pids[victim], NULL, 0);
    }
    char want[64];
    snprintf(want, sizeof want, "rank %d (pid %d)", victim, (int)pids[victim]);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        if (r == victim) continue;
        const char *m = g_sh->msg[r];
        CHECKF(g_sh->status[r] == MT_ERR_PEER, "%s: rank %d got %s (%s)", g_fail_names[kind], r,
               mt_status_name((mt_status)g_sh->status[r]), m);
        CHECKF(strstr(m, want) != NULL, "%s: rank %d's message does not name %s: %s", g_fail_names[kind], r, want, m);
        switch (kind) {
        case F_EXIT:
        case F_KILL:
            CHECK_STR_CONTAINS(m, "died");
            CHECKF(g_sh->elapsed[r] < 10, "rank %d noticed after %.2f s", r, g_sh->elapsed[r]);
            break;
        case F_STOP:
            CHECK_STR_CONTAINS(m, "timed out after 2 s waiting for rank");
            CHECK_STR_CONTAINS(m, "is it stopped or hung?");
            CHECK_STR_CONTAINS(m, "stopped (SIGSTOP?)");
            CHECKF(g_sh->elapsed[r] >= 1.9 && g_sh->elapsed[r] < 6, "rank %d timed out after %.2f s", r,
                   g_sh->elapsed[r]);
            break;
        case F_LATE_ABORT: /* the peer's own error, reported in the grace after the timeout, not "timed out" */
            CHECK_STR_CONTAINS(m, "aborted: test reason: lost node mtnode1");
            CHECKF(g_sh->elapsed[r] >= 1.9 && g_sh->elapsed[r] < 6, "rank %d noticed the late abort after %.2f s", r,
                   g_sh->elapsed[r]);
            break;
        default:
            CHECK_STR_CONTAINS(m, "aborted: test reason: loss is NaN at iteration 17");
            CHECKF(g_sh->elapsed[r] < 3, "rank %d noticed the abort after %.2f s", r, g_sh->elapsed[r]);
            break;
        }
        if (g_sh->elapsed[r] > worst) worst = g_sh->elapsed[r];
    }
    printf("  %-32s %d ranks: survivors failed with MT_ERR_PEER within %.2f s; e.g. \"%s\"\n", g_fail_names[kind], n,
           worst, g_sh->msg[victim == 0 ? 1 : 0]);
    fflush(stdout);
}

/* ---------------- /dev/shm ---------------- */

/* entries "mtrain-<pid>-..." created by this test's ranks (other programs may run meanwhile) */
static int count_ours(int print) {
    DIR *d = opendir("/dev/shm");
    int n = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = 0;
        if (sscanf(e->d_name, "mtrain-%d-", &pid) != 1) continue;
        for (int i = 0; i < g_n_children; i++)
            if (g_children[i] == pid) {
                n++;
                if (print) fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            }
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    g_quick = argc > 1 && !strcmp(argv[1], "quick");
    g_sh = mmap(NULL, sizeof *g_sh + 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_counter = (_Atomic int *)((char *)g_sh + sizeof *g_sh);
    double t0 = now_s();
    int max_n = g_quick ? 4 : MAX_RANKS;

    printf("collectives, default slots (1 MiB) and rings (256 KiB):\n");
    for (int n = 1; n <= max_n; n++) test_collectives(n, !g_quick && (n <= 4 || n == MAX_RANKS));

    printf("collectives, tiny slots (1 KiB) and rings (320 B): every op wraps many times:\n");
    setenv("MT_COMM_SHM_SLOT_BYTES", "1024", 1);
    setenv("MT_COMM_SHM_RING_BYTES", "320", 1);
    test_collectives(3, 0);
    if (!g_quick) test_collectives(8, 0);
    unsetenv("MT_COMM_SHM_SLOT_BYTES");
    unsetenv("MT_COMM_SHM_RING_BYTES");

    printf("misuse:\n");
    run_ranks(3, 10, rank_misuse, NULL, "misuse", NULL);
    printf("  collective in a group, bad root / peer, alltoallv count and send/recv size mismatches: "
           "errors, no hang\n");

    printf("creation through mt_bootstrap:\n");
    test_bootstrap_init(3);

    printf("failures:\n");
    test_failure(F_EXIT, 4, 2);
    test_failure(F_KILL, 3, 1);
    test_failure(F_STOP, 4, 3);
    test_failure(F_ABORT, 4, 1);
    test_failure(F_ABORT_SUB, 4, 1);
    test_failure(F_LATE_ABORT, 3, 2);

    int n_left = count_ours(1);
    CHECKF(n_left == 0, "%d mtrain-* entries of this test's ranks left in /dev/shm", n_left);
    printf("/dev/shm: %d entries left by this test's %d processes; total %.1f s\n", n_left, g_n_children,
           now_s() - t0);
    munmap(g_sh, sizeof *g_sh + 64);
    TEST_MAIN_END();
}
