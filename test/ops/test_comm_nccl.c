/* test_comm_nccl.c — the NCCL communicator (parallel/comm_nccl.c, inside the CUDA module) on real
 * GPUs; skips (exit 77) where there is none, as on the CI machine. With one GPU it runs every call
 * on a one-rank world made by the module directly (the factory makes no communicator for one
 * rank); with P >= 2 GPUs (at most 4) it starts P ranks of itself (fork + exec, env:// bootstrap
 * on 127.0.0.1, one GPU per local rank) through the factory, as training does. Checked, with
 * values exact in fp32 / bf16 so every comparison is equality:
 *   allreduce (f32 sum, bf16 max), reduce-scatter, allgather, broadcast from the last rank, a ring
 *   of grouped send/recv, alltoallv with uneven counts, split (reversed keys; a rank with no
 *   colour gets NULL), barrier;
 *   failure (P >= 2): the last rank aborts its communicator and leaves; every other rank's next
 *   allreduce returns an error naming NCCL within parallel.timeout_s (5 s here) + 10 s, no hang. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend_cuda_module.h"
#include "core/clock.h"
#include "parallel/bootstrap.h"
#include "parallel/comm_factory.h"
#include "test/test.h"

#define N_ELEMS 1000
#define TIMEOUT_S 5

static void *dev_alloc(mt_backend *be, size_t n_bytes) {
    void *p = NULL;
    return be->i->alloc(be, n_bytes, &p) == MT_OK ? p : NULL;
}

static int h2d(mt_backend *be, void *d, const void *h, size_t n_bytes) { return be->i->copy_h2d(be, d, h, n_bytes) == MT_OK; }
static int d2h(mt_backend *be, void *h, const void *d, size_t n_bytes) { return be->i->copy_d2h(be, h, d, n_bytes) == MT_OK; }

#define CALL(x) CHECKF((x) == MT_OK, "%s: %s", #x, mt_last_error())

static void run_checks(mt_comm *w, mt_backend *be) {
    const int R = w->rank, S = w->size;
    const size_t n = N_ELEMS;
    float *h = calloc((size_t)S * n, sizeof *h), *g = calloc((size_t)S * n, sizeof *g);
    float *d = dev_alloc(be, (size_t)S * n * sizeof *d), *d2 = dev_alloc(be, (size_t)S * n * sizeof *d2);
    CHECK(h && g && d && d2);
    if (!h || !g || !d || !d2) return;
    int bad;

    /* allreduce, f32 sum, in place */
    for (size_t i = 0; i < n; i++) h[i] = 0.25f * (float)(R + 1) + (float)i;
    CHECK(h2d(be, d, h, n * 4));
    CALL(w->i->allreduce(w, d, d, n, MT_F32, MT_RED_SUM));
    CHECK(d2h(be, g, d, n * 4));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += g[i] != (float)S * (float)i + 0.25f * (float)(S * (S + 1) / 2);
    CHECKF(bad == 0, "allreduce sum: %d wrong of %zu", bad, n);

    /* allreduce, bf16 max */
    uint16_t *hb = (uint16_t *)h, *gb = (uint16_t *)g;
    for (size_t i = 0; i < n; i++) hb[i] = mt_f32_to_bf16((float)(R + 1) + (float)(i % 4));
    CHECK(h2d(be, d, hb, n * 2));
    CALL(w->i->allreduce(w, d, d2, n, MT_BF16, MT_RED_MAX));
    CHECK(d2h(be, gb, d2, n * 2));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += mt_bf16_to_f32(gb[i]) != (float)S + (float)(i % 4);
    CHECKF(bad == 0, "allreduce bf16 max: %d wrong", bad);

    /* reduce-scatter: block r of rank q holds q + r; rank R gets sum_q (q + R) */
    for (int r = 0; r < S; r++)
        for (size_t i = 0; i < n; i++) h[(size_t)r * n + i] = (float)(R + r);
    CHECK(h2d(be, d, h, (size_t)S * n * 4));
    CALL(w->i->reduce_scatter(w, d, d2, n, MT_F32, MT_RED_SUM));
    CHECK(d2h(be, g, d2, n * 4));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += g[i] != (float)(S * R + S * (S - 1) / 2);
    CHECKF(bad == 0, "reduce-scatter: %d wrong", bad);

    /* allgather, in place (send = recv + R * n) */
    for (size_t i = 0; i < n; i++) h[i] = (float)(R * 1000) + (float)i;
    CHECK(h2d(be, d + (size_t)R * n, h, n * 4));
    CALL(w->i->allgather(w, d + (size_t)R * n, d, n, MT_F32));
    CHECK(d2h(be, g, d, (size_t)S * n * 4));
    bad = 0;
    for (int r = 0; r < S; r++)
        for (size_t i = 0; i < n; i++) bad += g[(size_t)r * n + i] != (float)(r * 1000) + (float)i;
    CHECKF(bad == 0, "allgather: %d wrong", bad);

    /* broadcast from the last rank */
    for (size_t i = 0; i < n; i++) h[i] = R == S - 1 ? 7.0f + (float)i : -1.0f;
    CHECK(h2d(be, d, h, n * 4));
    CALL(w->i->broadcast(w, d, n, MT_F32, S - 1));
    CHECK(d2h(be, g, d, n * 4));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += g[i] != 7.0f + (float)i;
    CHECKF(bad == 0, "broadcast: %d wrong", bad);

    /* a ring of grouped send/recv (with one rank: to itself) */
    const int next = (R + 1) % S, prev = (R + S - 1) % S;
    for (size_t i = 0; i < n; i++) h[i] = (float)R;
    CHECK(h2d(be, d, h, n * 4));
    CALL(w->i->group_start(w));
    CALL(w->i->send(w, d, n, MT_F32, next));
    CALL(w->i->recv(w, d2, n, MT_F32, prev));
    CALL(w->i->group_end(w));
    CHECK(d2h(be, g, d2, n * 4));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += g[i] != (float)prev;
    CHECKF(bad == 0, "ring send/recv: %d wrong", bad);

    /* alltoallv: rank s sends d + 1 + s elements to rank d, values s*1000 + d*100 + k */
    size_t sc[4], sd[4], rc[4], rd[4], so = 0, ro = 0;
    for (int p = 0; p < S; p++) {
        sc[p] = (size_t)(p + 1 + R), sd[p] = so, so += sc[p];
        rc[p] = (size_t)(R + 1 + p), rd[p] = ro, ro += rc[p];
        for (size_t k = 0; k < sc[p]; k++) h[sd[p] + k] = (float)(R * 1000 + p * 100) + (float)k;
    }
    CHECK(h2d(be, d, h, so * 4));
    CALL(w->i->alltoallv(w, d, sc, sd, d2, rc, rd, MT_F32));
    CHECK(d2h(be, g, d2, ro * 4));
    bad = 0;
    for (int p = 0; p < S; p++)
        for (size_t k = 0; k < rc[p]; k++) bad += g[rd[p] + k] != (float)(p * 1000 + R * 100) + (float)k;
    CHECKF(bad == 0, "alltoallv: %d wrong", bad);

    /* split: reversed keys; then a split that leaves rank 0 out */
    mt_comm *rev = NULL, *rest = (mt_comm *)w;
    CALL(mt_comm_group_create(w, 0, -R, &rev));
    CHECK(rev && rev->size == S && rev->rank == S - 1 - R);
    if (rev) {
        for (size_t i = 0; i < n; i++) h[i] = (float)rev->rank;
        CHECK(h2d(be, d, h, n * 4));
        CALL(rev->i->allreduce(rev, d, d, n, MT_F32, MT_RED_SUM));
        CHECK(d2h(be, g, d, 4));
        CHECK(g[0] == (float)(S * (S - 1) / 2));
    }
    CALL(mt_comm_group_create(w, R == 0 ? -1 : 0, R, &rest));
    CHECK(R == 0 ? rest == NULL : (rest && rest->size == S - 1 && rest->rank == R - 1));
    CALL(w->i->barrier(w));
    if (rest) rest->i->destroy(rest);
    if (rev) rev->i->destroy(rev);
    be->i->free(be, d);
    be->i->free(be, d2);
    free(h);
    free(g);
}

/* One rank of a P-rank job (environment set by the parent). */
static int child_main(void) {
    mt_bootstrap bs;
    mt_backend be;
    mt_comm *w = NULL;
    if (mt_bootstrap_init(&bs, 60) != MT_OK) {
        fprintf(stderr, "child: bootstrap: %s\n", mt_last_error());
        return 1;
    }
    if (mt_backend_cuda_create(&be, bs.local_rank) != MT_OK) {
        fprintf(stderr, "rank %d: %s\n", bs.rank, mt_last_error());
        return 1;
    }
    mt_status st = mt_comm_world_create(MT_COMM_NCCL, &bs, &be, TIMEOUT_S, &w);
    CHECKF(st == MT_OK && w && w->size == bs.size && w->rank == bs.rank, "world: %s", mt_last_error());
    if (!w) return 1;
    if (!getenv("MT_TEST_NCCL_ABORT")) {
        run_checks(w, &be);
        printf("rank %d of %d: %d checks, %d failed\n", w->rank, w->size, mt_test_checks, mt_test_failures);
        w->i->destroy(w);
        mt_backend_destroy(&be);
        bs.finalize(&bs);
        return mt_test_failures ? 1 : 0;
    }
    float *d = dev_alloc(&be, 4096);
    CALL(w->i->allreduce(w, d, d, 1024, MT_F32, MT_RED_SUM));
    if (w->rank == w->size - 1) { /* the failing rank: abort and leave without a word to anyone */
        w->i->abort(w);
        _exit(0);
    }
    const double t0 = mt_clock_s();
    st = MT_OK;
    for (int k = 0; k < 3 && st == MT_OK; k++) st = w->i->allreduce(w, d, d, 1024, MT_F32, MT_RED_SUM);
    const double dt = mt_clock_s() - t0;
    CHECKF(st != MT_OK, "rank %d: allreduce after a peer's abort succeeded", w->rank);
    CHECKF(dt < TIMEOUT_S + 10, "rank %d: noticed only after %.1f s", w->rank, dt);
    CHECK_STR_CONTAINS(mt_last_error(), "NCCL");
    printf("rank %d: after the peer's abort, %.1f s: %s: %s\n", w->rank, dt, mt_status_name(st), mt_last_error());
    w->i->destroy(w);
    _exit(mt_test_failures ? 1 : 0); /* the bootstrap's finalize would wait for the rank that left */
}

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = 29500 + (int)(getpid() % 1000);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0) close(s);
    return port;
}

/* P ranks of this program; 1 if every one exited 0. */
static int run_job(int P, int abort_case) {
    char port[16], world[16];
    snprintf(port, sizeof port, "%d", free_port());
    snprintf(world, sizeof world, "%d", P);
    pid_t pids[4];
    for (int r = 0; r < P; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char rank[16];
            snprintf(rank, sizeof rank, "%d", r);
            unsetenv("PMIX_NAMESPACE");
            setenv("RANK", rank, 1);
            setenv("LOCAL_RANK", rank, 1);
            setenv("WORLD_SIZE", world, 1);
            setenv("LOCAL_WORLD_SIZE", world, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", port, 1);
            if (abort_case) setenv("MT_TEST_NCCL_ABORT", "1", 1);
            execl("/proc/self/exe", "test_comm_nccl", "--rank-child", (char *)NULL);
            _exit(127);
        }
    }
    int ok = 1;
    for (int r = 0; r < P; r++) {
        int status = 0;
        if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "%s: rank %d ended with status 0x%x\n", abort_case ? "abort case" : "collectives", r, status);
            ok = 0;
        }
    }
    return ok;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--rank-child")) return child_main();
    char why[512] = "";
    if (!mt_cuda_available(why, sizeof why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    const int n = mt_cuda_device_count();
    const int P = n >= 4 ? 4 : n;
    printf("CUDA: %s; %d rank(s)\n", why, P);
    if (P == 1) {
        mt_bootstrap bs = {.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .kind = "single"};
        mt_bootstrap real;
        unsetenv("PMIX_NAMESPACE");
        unsetenv("RANK");
        unsetenv("WORLD_SIZE");
        if (mt_bootstrap_init(&real, 10) == MT_OK) bs = real; /* one rank: "single" */
        mt_backend be;
        if (mt_backend_cuda_create(&be, 0) != MT_OK) {
            fprintf(stderr, "%s\n", mt_last_error());
            return 1;
        }
        const mt_cuda_module *m = mt_cuda_module_get(why, sizeof why);
        mt_comm *w = NULL;
        CHECKF(m && m->nccl_world_create(&bs, &be, TIMEOUT_S, &w) == MT_OK, "world of one: %s", mt_last_error());
        if (w) {
            CHECK(w->rank == 0 && w->size == 1);
            run_checks(w, &be);
            w->i->destroy(w);
        }
        mt_backend_destroy(&be);
        if (bs.finalize) bs.finalize(&bs);
    } else {
        CHECKF(run_job(P, 0), "%d-rank collectives failed (see above)", P);
        CHECKF(run_job(P, 1), "%d-rank abort case failed (see above)", P);
    }
    char version[32] = "?";
    const mt_cuda_module *m = mt_cuda_module_get(NULL, 0);
    if (m) m->nccl_version(version, sizeof version);
    printf("NCCL %s\n", version);
    TEST_MAIN_END();
}
