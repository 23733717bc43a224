/* test_comm_gloo.c — the Gloo communicator with real processes on this machine: 4 forked ranks
 * that the test declares to be on two nodes (ranks 0,1 on "n0", 2,3 on "n1": the node ids are
 * mt_comm_gloo_init's argument), talking over loopback TCP (GLOO_SOCKET_IFNAME=lo). The
 * bootstrap's allgather is a shared-memory world of the same ranks. Checked: every collective of
 * comm.h on values whose sums are exact in fp32 and bf16 (small integers), grouped send/recv,
 * alltoallv with uneven counts, split into node-local groups (shared memory) and cross-node ones
 * (Gloo), color < 0, and abort (the peers' next call fails with MT_ERR_PEER, no hang). Then a
 * parallel state over a fresh Gloo world with tp = 2 (tp groups node-local, on shared memory):
 * rank 1's mt_pstate_abort with a "lost node" error must reach its tp peer rank 0, blocked in a tp
 * allreduce, at once and with that cause (a Gloo world's abort alone does not reach its
 * shared-memory groups; rank 0 would wait out the 5 s timeout). Skipped (77) when this mtrain is
 * built without Gloo. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/recipe/recipe.h"
#include "parallel/comm_gloo.h"
#include "parallel/comm_shm.h"
#include "parallel/parallel_state.h"
#include "test/test.h"

#define N 4

static mt_status shm_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    mt_comm *w = bs->ctx;
    size_t n_f = (n_bytes + 3) / 4;
    float *in = calloc(n_f, 4), *out = calloc(n_f * N, 4);
    memcpy(in, mine, n_bytes);
    mt_status st = w->i->allgather(w, in, out, n_f, MT_F32);
    for (int r = 0; r < N; r++) memcpy((char *)all + (size_t)r * n_bytes, out + (size_t)r * n_f, n_bytes);
    free(in);
    free(out);
    return st;
}

static void collectives(mt_comm *g, int me) {
    float x[8], y[32];
    for (int i = 0; i < 8; i++) x[i] = (float)(me + 1 + i);
    CHECK(g->i->allreduce(g, x, y, 8, MT_F32, MT_RED_SUM) == MT_OK);
    for (int i = 0; i < 8; i++) CHECK(y[i] == (float)(10 + 4 * i));
    CHECK(g->i->allreduce(g, x, x, 8, MT_F32, MT_RED_MAX) == MT_OK);
    for (int i = 0; i < 8; i++) CHECK(x[i] == (float)(4 + i));
    uint16_t b[4];
    for (int i = 0; i < 4; i++) b[i] = mt_f32_to_bf16((float)(me + i));
    CHECK(g->i->allreduce(g, b, b, 4, MT_BF16, MT_RED_SUM) == MT_OK);
    for (int i = 0; i < 4; i++) CHECK(mt_bf16_to_f32(b[i]) == (float)(6 + 4 * i));
    /* reduce_scatter: rank r gets the sum over ranks of send[2r .. 2r+2) */
    for (int i = 0; i < 8; i++) x[i] = (float)(i * 10 + me);
    CHECK(g->i->reduce_scatter(g, x, y, 2, MT_F32, MT_RED_SUM) == MT_OK);
    CHECK(y[0] == (float)(2 * me * 10 * 4 + 6) && y[1] == (float)((2 * me + 1) * 10 * 4 + 6));
    /* allgather, in place */
    y[me * 2] = (float)me;
    y[me * 2 + 1] = (float)(me * 100);
    CHECK(g->i->allgather(g, y + me * 2, y, 2, MT_F32) == MT_OK);
    for (int r = 0; r < N; r++) CHECK(y[2 * r] == (float)r && y[2 * r + 1] == (float)(r * 100));
    /* broadcast from rank 2 */
    for (int i = 0; i < 3; i++) x[i] = me == 2 ? (float)(7 + i) : -1.0f;
    CHECK(g->i->broadcast(g, x, 3, MT_F32, 2) == MT_OK);
    CHECK(x[0] == 7.0f && x[1] == 8.0f && x[2] == 9.0f);
    /* a ring of grouped send/recv, receives posted first on odd ranks */
    int next = (me + 1) % N, prev = (me + N - 1) % N;
    x[0] = (float)me;
    y[0] = -1;
    CHECK(g->i->group_start(g) == MT_OK);
    if (me % 2) CHECK(g->i->recv(g, y, 1, MT_F32, prev) == MT_OK);
    CHECK(g->i->send(g, x, 1, MT_F32, next) == MT_OK);
    if (me % 2 == 0) CHECK(g->i->recv(g, y, 1, MT_F32, prev) == MT_OK);
    CHECK(g->i->group_end(g) == MT_OK);
    CHECK(y[0] == (float)prev);
    /* alltoallv: rank s sends s + d + 1... no: (d + 1) elements valued 100 s + d to rank d */
    size_t sc[N], sd[N], rc[N], rd[N], off = 0, roff = 0;
    float s_buf[16], r_buf[16];
    for (int d = 0; d < N; d++) {
        sc[d] = (size_t)d + 1;
        sd[d] = off;
        for (size_t k = 0; k < sc[d]; k++) s_buf[off + k] = (float)(100 * me + d);
        off += sc[d];
        rc[d] = (size_t)me + 1;
        rd[d] = roff;
        roff += rc[d];
    }
    CHECK(g->i->alltoallv(g, s_buf, sc, sd, r_buf, rc, rd, MT_F32) == MT_OK);
    for (int s = 0; s < N; s++)
        for (size_t k = 0; k < rc[s]; k++) CHECK(r_buf[rd[s] + k] == (float)(100 * s + me));
    CHECK(g->i->barrier(g) == MT_OK);
}

static void splits(mt_comm *g, int me) {
    mt_comm *local = NULL, *cross = NULL, *none = NULL;
    CHECK(g->i->split(g, me / 2, me, &local) == MT_OK && local);
    CHECK(g->i->split(g, me % 2, me, &cross) == MT_OK && cross);
    CHECK(g->i->split(g, me == 3 ? -1 : 0, -me, &none) == MT_OK);
    if (local) {
        CHECKF(!strcmp(local->i->name, "shm"), "a node-local group runs on %s", local->i->name);
        float v = (float)me;
        CHECK(local->size == 2 && local->rank == me % 2);
        CHECK(local->i->allreduce(local, &v, &v, 1, MT_F32, MT_RED_SUM) == MT_OK && v == (float)(me / 2 * 4 + 1));
        local->i->destroy(local);
    }
    if (cross) {
        CHECKF(!strcmp(cross->i->name, "gloo"), "a cross-node group runs on %s", cross->i->name);
        float v = (float)me;
        CHECK(cross->size == 2 && cross->rank == me / 2);
        CHECK(cross->i->allreduce(cross, &v, &v, 1, MT_F32, MT_RED_SUM) == MT_OK && v == (float)(2 * (me % 2) + 2));
        cross->i->destroy(cross);
    }
    CHECK((me == 3) == (none == NULL));
    if (none) { /* ordered by key = -rank: rank 2 first */
        CHECK(none->size == 3 && none->rank == 2 - me);
        none->i->destroy(none);
    }
}

/* a failure's cause crosses from the Gloo world to the node-local tp group (see the top) */
static void pstate_abort_cause(mt_bootstrap *bs, const char (*nodes)[MT_NODE_ID_BYTES], mt_comm *shm, int me) {
    mt_comm *w = NULL;
    mt_status st = mt_comm_gloo_init(bs, nodes, 5, &w);
    CHECKF(st == MT_OK && w, "%s", mt_last_error());
    static mt_recipe r;
    static mt_parallel_state ps;
    mt_recipe_defaults(&r);
    r.parallel.tensor = 2;
    mt_pstate_single(&ps);
    st = w ? mt_pstate_setup_world(&ps, &r, w) : MT_ERR_INTERNAL;
    CHECKF(st == MT_OK, "%s", mt_last_error());
    mt_comm *tp = mt_pstate_group(&ps, MT_PG_TP)->comm;
    CHECKF(tp && !strcmp(tp->i->name, "shm"), "the node-local tp group runs on %s", tp ? tp->i->name : "nothing");
    if (st != MT_OK || !tp) _exit(1);
    if (me == 1) {
        mt_errorf(MT_ERR_PEER, "rank 1: allreduce: lost node n1 (test)");
        mt_pstate_abort(&ps);
    } else if (me == 0) {
        float v = 1;
        st = tp->i->allreduce(tp, &v, &v, 1, MT_F32, MT_RED_SUM);
        CHECKF(st == MT_ERR_PEER && strstr(mt_last_error(), "aborted: rank 1: allreduce: lost node n1 (test)"),
               "rank 0's tp allreduce after rank 1's abort: %s: %s", mt_status_name(st), mt_last_error());
    }
    st = shm->i->barrier(shm);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    mt_pstate_free(&ps);
}

static void rank_main(mt_comm_shm_local *shm_local, int me) {
    mt_comm *shm = NULL;
    if (mt_comm_shm_create_local(shm_local, me, 20, &shm) != MT_OK) _exit(2);
    mt_bootstrap bs = {.rank = me, .size = N, .local_rank = me % 2, .local_size = 2, .kind = "test",
                       .allgather = shm_allgather, .ctx = shm};
    char nodes[N][MT_NODE_ID_BYTES];
    for (int r = 0; r < N; r++) snprintf(nodes[r], sizeof nodes[r], "n%d/test", r / 2);
    mt_comm *g = NULL;
    mt_status st = mt_comm_gloo_init(&bs, (const char (*)[MT_NODE_ID_BYTES])nodes, 20, &g);
    CHECKF(st == MT_OK && g, "%s", mt_last_error());
    if (!g) _exit(1);
    CHECK(g->rank == me && g->size == N && !strcmp(g->i->name, "gloo"));
    collectives(g, me);
    splits(g, me);
    /* abort: rank 0 aborts, the others' next call fails promptly with MT_ERR_PEER */
    CHECK(shm->i->barrier(shm) == MT_OK);
    if (me == 0) g->i->abort(g);
    else {
        float v = 1;
        mt_status a = g->i->allreduce(g, &v, &v, 1, MT_F32, MT_RED_SUM);
        CHECKF(a == MT_ERR_PEER, "after rank 0's abort: %s", mt_status_name(a));
    }
    st = shm->i->barrier(shm);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    g->i->destroy(g);
    pstate_abort_cause(&bs, (const char (*)[MT_NODE_ID_BYTES])nodes, shm, me);
    shm->i->destroy(shm);
    _exit(mt_test_failures ? 1 : 0);
}

int main(void) {
    if (!mt_comm_gloo_available()) {
        printf("skipped: this mtrain is built without Gloo (libgloo-dev)\n");
        return 77;
    }
    setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    mt_comm_shm_local *shm_local = NULL;
    CHECK(mt_comm_shm_local_create(N, &shm_local) == MT_OK);
    if (!shm_local) TEST_MAIN_END();
    pid_t pids[N];
    for (int r = 0; r < N; r++) {
        fflush(stdout);
        pids[r] = fork();
        if (pids[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            mt_test_failures = 0;
            rank_main(shm_local, r);
        }
    }
    for (int r = 0; r < N; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d failed (status 0x%x)", r, status);
    }
    mt_comm_shm_local_free(shm_local);
    TEST_MAIN_END();
}
