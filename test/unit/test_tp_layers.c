/* test_tp_layers.c — every tensor-parallel layer of parallel/tp.h against the unsharded layer,
 * with real ranks: for tp = 2 and 4, with and without sequence parallelism, the test forks tp
 * processes joined by the shared-memory communicator; each runs its shard of
 *   - the SP primitives: gather (allgather of token rows) and reduce (allreduce / reduce-scatter),
 *   - a column-parallel linear, a row-parallel linear (forward output, dX, dW, db),
 *   - the vocab-parallel embedding (output, dwte shard, dwpe) and cross-entropy (losses and
 *     dlogits shard; a vocabulary with padding columns, one rank holding only padding, one
 *     ignored row),
 *   - the whole model (GPT with biases and tied embeddings; Llama with GQA, SwiGLU, RoPE): the
 *     shard each rank initialises equals the serial weights at mt_param_full_index, and after one
 *     micro-batch its loss equals the serial loss and every gradient element equals the serial
 *     gradient there (norm gradients after the SP reduction),
 * and compares with the serial result the parent computed before forking (the backend ops on
 * full tensors). Also: the xent_vp_* phases on one rank equal xent_fwd_bwd, and token rows that
 * do not split over tp under SP are a config error naming micro_batch and seq_length. Tolerance: max |a - b| <= 2e-5 * max |b| (+1e-7 absolute) per tensor: the
 * sharded results differ from the serial ones only by the order of fp32 sums (a K-split GEMM
 * adds two or four partial dot products, ~1e-7 relative); a wrong shard, a missing or doubled
 * reduction is off by O(1). The worst difference per check over all ranks is printed. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "train/model.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "parallel/comm_shm.h"
#include "parallel/grad_sync.h"
#include "parallel/tp.h"
#include "test/test.h"

#define MAXR 4
#define MAXC 64
typedef struct {
    char name[MAXC][64];
    double worst[MAXC][MAXR];
    int n_cases;
} shared_t;
static shared_t *g_sh;

/* ---- sizes of the layer tests ---- */
enum { B = 2, T = 8, N = B * T, C = 16, OUT = 24, KIN = 24, V = 29, VP = 48 };

/* ---- serial references (computed in the parent before forking) ---- */
static float X[N * C], Wc[OUT * C], bc[OUT], dYc[N * OUT];          /* column: Y = X Wc^T + bc */
static float Yc[N * OUT], dXc[N * C], dWc[OUT * C], dbc[OUT];
static float Xr[N * KIN], Wr[C * KIN], br[C], dYr[N * C];           /* row: Y = Xr Wr^T + br */
static float Yr[N * C], dXr[N * KIN], dWr[C * KIN], dbr[C];
static int32_t tok[N], tgt[N];
static float wte[VP * C], wpe[T * C], dE[N * C];                    /* embedding */
static float E[N * C], dwte[VP * C], dwpe[T * C];
static float logits[N * VP], dlogits[N * VP], losses[N];            /* cross-entropy */
static float parts[MAXR][N * C];                                    /* per-rank partial sums */

static void fill(float *x, size_t n, uint64_t stream, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * mt_rng_normal(42, stream, i));
}

static void serial_refs(mt_backend *be) {
    fill(X, sizeof X / 4, 1, 1), fill(Wc, sizeof Wc / 4, 2, 0.3f), fill(bc, OUT, 3, 0.1f), fill(dYc, sizeof dYc / 4, 4, 1);
    fill(Xr, sizeof Xr / 4, 5, 1), fill(Wr, sizeof Wr / 4, 6, 0.3f), fill(br, C, 7, 0.1f), fill(dYr, sizeof dYr / 4, 8, 1);
    fill(wte, sizeof wte / 4, 9, 1), fill(wpe, sizeof wpe / 4, 10, 1), fill(dE, sizeof dE / 4, 11, 1);
    fill(logits, sizeof logits / 4, 12, 2);
    for (int r = 0; r < MAXR; r++) fill(parts[r], N * C, 20 + r, 1);
    for (int i = 0; i < N; i++) {
        tok[i] = (int32_t)(mt_rng_u64(3, 1, i) % V);
        tgt[i] = i == 5 ? -1 : (int32_t)(mt_rng_u64(3, 2, i) % V);
    }
    tgt[3] = V - 1; /* a target in the last shard holding real columns */
    mt_matmul_fwd_args cf = {.out = Yc, .inp = X, .weight = Wc, .bias = bc, .M = N, .N = OUT, .K = C};
    mt_matmul_bwd_args cb = {.dinp = dXc, .dweight = dWc, .dbias = dbc, .dout = dYc, .inp = X, .weight = Wc,
                             .M = N, .N = OUT, .K = C};
    mt_matmul_fwd_args rf = {.out = Yr, .inp = Xr, .weight = Wr, .bias = br, .M = N, .N = C, .K = KIN};
    mt_matmul_bwd_args rb = {.dinp = dXr, .dweight = dWr, .dbias = dbr, .dout = dYr, .inp = Xr, .weight = Wr,
                             .M = N, .N = C, .K = KIN};
    mt_embedding_fwd_args ef = {.out = E, .tokens = tok, .wte = wte, .wpe = wpe, .B = B, .T = T, .C = C,
                                .vocab_start = 0, .n_vocab = VP};
    mt_embedding_bwd_args eb = {.dwte = dwte, .dwpe = dwpe, .dout = dE, .tokens = tok, .B = B, .T = T, .C = C,
                                .vocab_start = 0, .n_vocab = VP};
    memcpy(dlogits, logits, sizeof logits);
    mt_xent_args xa = {.logits = dlogits, .losses = losses, .targets = tgt, .N = N, .V = V, .Vp = VP,
                       .dloss = 1.0f / N};
    CHECK(be->i->matmul_fwd(be, &cf) == MT_OK && be->i->matmul_bwd(be, &cb) == MT_OK);
    CHECK(be->i->matmul_fwd(be, &rf) == MT_OK && be->i->matmul_bwd(be, &rb) == MT_OK);
    CHECK(be->i->embedding_fwd(be, &ef) == MT_OK && be->i->embedding_bwd(be, &eb) == MT_OK);
    CHECK(be->i->xent_fwd_bwd(be, &xa) == MT_OK);
    /* the three vocab-parallel phases on one rank (all columns) equal the fused op */
    static float lg[N * VP], st[3 * N], ls[N];
    memcpy(lg, logits, sizeof lg);
    mt_xent_vp_args va = {.logits = lg, .stats = st, .losses = ls, .targets = tgt, .N = N, .V = V,
                          .vocab_start = 0, .n_cols = VP, .dloss = 1.0f / N};
    CHECK(be->i->xent_vp_max(be, &va) == MT_OK && be->i->xent_vp_sumexp(be, &va) == MT_OK &&
          be->i->xent_vp_finish(be, &va) == MT_OK);
    double dl = 0, dg = 0;
    for (int i = 0; i < N; i++) dl = fmax(dl, fabs((double)ls[i] - losses[i]));
    for (int i = 0; i < N * VP; i++) dg = fmax(dg, fabs((double)lg[i] - dlogits[i]));
    printf("xent_vp phases on one rank vs xent_fwd_bwd: max loss diff %.2e, max dlogits diff %.2e\n", dl, dg);
    CHECK(dl <= 1e-6 && dg <= 1e-8);
}

/* ---- comparisons (in the children) ---- */
static int g_case, g_rank;

/* records max|a-b| / max|b| for the named check and fails it above the tolerance */
static void cmp(const char *name, const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d || e != e) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    double rel = d / (m > 0 ? m : 1);
    if (g_case < MAXC) {
        snprintf(g_sh->name[g_case], sizeof g_sh->name[0], "%s", name);
        g_sh->worst[g_case][g_rank] = rel;
        g_case++;
    }
    CHECKF(d <= 1e-7 + 2e-5 * m, "rank %d %s: max diff %.3g (max |ref| %.3g)", g_rank, name, d, m);
}

/* rows [r0, r0+nr) of a (rows, cols) matrix / columns [c0, c0+nc) */
static float *rows_of(const float *a, int cols, int r0, int nr) {
    float *o = malloc((size_t)nr * cols * 4);
    memcpy(o, a + (size_t)r0 * cols, (size_t)nr * cols * 4);
    return o;
}
static float *cols_of(const float *a, int rows, int cols, int c0, int nc) {
    float *o = malloc((size_t)rows * nc * 4);
    for (int i = 0; i < rows; i++) memcpy(o + (size_t)i * nc, a + (size_t)i * cols + c0, (size_t)nc * 4);
    return o;
}

static void rank_layers(mt_backend *be, mt_comm *w, int sp, const char *tag) {
    const int tp = w->size, r = w->rank;
    const int Nr = sp ? N / tp : N, r0 = sp ? r * Nr : 0;
    static float full[N * C], slice[N * C], out[N * VP], dx[N * KIN], buf[N * C], stats[3 * N], ls[N];
    static float dw[OUT * KIN], db[OUT], dwt[VP * C], dwp[T * C];
    mt_tp t;
    char nm[64];
    if (sp) { /* token rows that do not split over tp: a config error naming the keys */
        CHECK(mt_tp_init(&t, be, w, sp, N + 1, C, full, slice) == MT_ERR_CONFIG);
        CHECK_STR_CONTAINS(mt_last_error(), "training.micro_batch x model.seq_length");
    }
    CHECK(mt_tp_init(&t, be, w, sp, N, C, full, slice) == MT_OK);
    CHECK(t.N_r == Nr);
    mt_comm_clock clock = {0}; /* every collective below is timed and counted here */
    t.clock = &clock;
    void *res = NULL;
    const void *cres = NULL;
    float *e, *e2;
#define NAME(what) (snprintf(nm, sizeof nm, "%s %s", tag, what), nm)
    /* gather: the slice of X -> all of X */
    e = rows_of(X, C, r0, Nr);
    CHECK(mt_tp_gather(&t, e, &cres) == MT_OK);
    cmp(NAME("gather"), cres, X, (size_t)N * C);
    free(e);
    /* reduce: sum of the ranks' partials (serial order), this rank's rows */
    for (int i = 0; i < N * C; i++) {
        float s = 0;
        for (int k = 0; k < tp; k++) s += parts[k][i];
        buf[i] = s;
    }
    static float mine[N * C];
    memcpy(mine, parts[r], sizeof mine);
    CHECK(mt_tp_reduce(&t, mine, NULL, &res) == MT_OK);
    cmp(NAME("reduce"), res, buf + (size_t)r0 * C, (size_t)Nr * C);

    /* column-parallel: shard = rows [r*OUT/tp, ...) of Wc and bc */
    const int no = OUT / tp;
    float *xs = rows_of(X, C, r0, Nr), *ws = rows_of(Wc, C, r * no, no), *dys = cols_of(dYc, N, OUT, r * no, no);
    CHECK(mt_tp_column_fwd(&t, out, xs, ws, bc + r * no, no, C) == MT_OK);
    e = cols_of(Yc, N, OUT, r * no, no);
    cmp(NAME("column fwd Y"), out, e, (size_t)N * no);
    free(e);
    memset(dw, 0, sizeof dw), memset(db, 0, sizeof db);
    CHECK(mt_tp_column_bwd(&t, buf, &res, dw, db, dys, xs, ws, no, C) == MT_OK);
    cmp(NAME("column bwd dX"), res, dXc + (size_t)r0 * C, (size_t)Nr * C);
    cmp(NAME("column bwd dW"), dw, dWc + (size_t)r * no * C, (size_t)no * C);
    cmp(NAME("column bwd db"), db, dbc + r * no, (size_t)no);
    free(xs), free(ws), free(dys);

    /* row-parallel: shard = columns [r*KIN/tp, ...) of Wr and of the input; bias replicated */
    const int ki = KIN / tp;
    xs = cols_of(Xr, N, KIN, r * ki, ki), ws = cols_of(Wr, C, KIN, r * ki, ki);
    CHECK(mt_tp_row_fwd(&t, buf, &res, xs, ws, br, C, ki) == MT_OK);
    cmp(NAME("row fwd Y"), res, Yr + (size_t)r0 * C, (size_t)Nr * C);
    memset(dw, 0, sizeof dw), memset(db, 0, sizeof db);
    CHECK(mt_tp_row_bwd(&t, dx, dw, db, dYr + (size_t)r0 * C, xs, ws, C, ki) == MT_OK);
    e = cols_of(dXr, N, KIN, r * ki, ki), e2 = cols_of(dWr, C, KIN, r * ki, ki);
    cmp(NAME("row bwd dX"), dx, e, (size_t)N * ki);
    cmp(NAME("row bwd dW"), dw, e2, (size_t)C * ki);
    cmp(NAME("row bwd db"), db, dbr, C);
    free(e), free(e2), free(xs), free(ws);

    /* vocab-parallel embedding: rows [r*VP/tp, ...) of wte */
    const int nv = VP / tp;
    CHECK(mt_tp_embedding_fwd(&t, buf, tok, wte + (size_t)r * nv * C, wpe, B, T, r * nv, nv) == MT_OK);
    cmp(NAME("embedding fwd"), buf, E + (size_t)r0 * C, (size_t)Nr * C);
    memset(dwt, 0, sizeof dwt), memset(dwp, 0, sizeof dwp);
    CHECK(mt_tp_embedding_bwd(&t, dwt, dwp, dE + (size_t)r0 * C, tok, B, T, r * nv, nv) == MT_OK);
    cmp(NAME("embedding bwd dwte"), dwt, dwte + (size_t)r * nv * C, (size_t)nv * C);
    cmp(NAME("embedding bwd dwpe"), dwp, dwpe, (size_t)T * C);

    /* vocab-parallel cross-entropy: columns [r*VP/tp, ...) of the logits */
    e = cols_of(logits, N, VP, r * nv, nv);
    CHECK(mt_tp_xent(&t, e, ls, stats, tgt, N, V, VP, r * nv, nv, 1.0f / N) == MT_OK);
    cmp(NAME("xent losses"), ls, losses, N);
    e2 = cols_of(dlogits, N, VP, r * nv, nv);
    cmp(NAME("xent dlogits"), e, e2, (size_t)N * nv);
    free(e), free(e2);
    CHECK(clock.n_calls > 0 && clock.ms >= 0);
#undef NAME
}

/* ---- whole model ---- */

static void model_recipe(mt_recipe *r, const char *arch, int tp, int sp) {
    char v[16];
    mt_recipe_defaults(r);
    CHECK(mt_recipe_set(r, "model.arch", arch, "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.layers", "2", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.hidden", "32", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.heads", "4", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.vocab", "37", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.seq_length", "8", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "model.init_std", "0.2", "test") == MT_OK);
    if (!strcmp(arch, "llama")) {
        CHECK(mt_recipe_set(r, "model.kv_heads", tp == 4 ? "4" : "2", "test") == MT_OK);
        CHECK(mt_recipe_set(r, "model.ffn_hidden", "24", "test") == MT_OK);
    } else {
        CHECK(mt_recipe_set(r, "model.tie_embeddings", "true", "test") == MT_OK);
        CHECK(mt_recipe_set(r, "model.bias", "true", "test") == MT_OK);
    }
    snprintf(v, sizeof v, "%d", tp);
    CHECK(mt_recipe_set(r, "parallel.tensor", v, "test") == MT_OK);
    CHECK(mt_recipe_set(r, "parallel.sequence_parallel", sp ? "true" : "false", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "training.micro_batch", "2", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "training.global_batch", "2", "test") == MT_OK);
    CHECK(mt_recipe_set(r, "training.iters", "1", "test") == MT_OK);
    mt_status st = mt_recipe_validate(r, tp);
    CHECKF(st == MT_OK, "%s", mt_last_error());
}

typedef struct {
    mt_param_layout pl;
    float *params, *grads;
    float loss;
} serial_model;
static serial_model g_ser[2][2]; /* [arch gpt/llama][kv heads 2 / 4 (llama at tp 4)] */
static int32_t g_mtok[2 * 9];

/* one micro-batch, then the gradient classes' tp pre-reduction (norm weights under SP) through
 * the trainer's gradient sync on a state whose only group is tp */
static void model_step(mt_model *m, float *loss) {
    float gsq = 0;
    mt_parallel_state ps;
    mt_grad_sync gs;
    mt_pstate_single(&ps);
    if (m->par.tp.comm) ps.g[MT_PG_TP] = (mt_group){.size = m->par.tp.comm->size, .rank = m->par.tp.comm->rank,
                                                    .member = 1, .comm = m->par.tp.comm};
    mt_grad_sync_init(&gs, &m->pl, &m->ol, &ps, m->be, 0);
    CHECK(mt_model_zero_grads(m) == MT_OK);
    mt_status st = mt_model_step_micro(m, g_mtok, 1.0f / 16, 1);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    CHECK(mt_grad_sync_classes(&gs, m->grads) == MT_OK);
    CHECK(mt_model_read_scalars(m, loss, &gsq) == MT_OK);
}

static void serial_model_run(mt_backend *be, int arch, int kv4) {
    static mt_recipe r;
    mt_model m;
    model_recipe(&r, arch ? "llama" : "gpt", kv4 ? 4 : 1, 0);
    CHECK(mt_recipe_set(&r, "parallel.tensor", "1", "test") == MT_OK);
    CHECK(mt_recipe_validate(&r, 1) == MT_OK);
    mt_status st = mt_model_init(&m, &r, be, 2, 1, 0);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    serial_model *s = &g_ser[arch][kv4];
    s->pl = m.pl;
    model_step(&m, &s->loss);
    s->params = malloc(m.pl.n_elems * 4);
    s->grads = malloc(m.pl.n_elems * 4);
    memcpy(s->params, m.params, m.pl.n_elems * 4);
    memcpy(s->grads, m.grads, m.pl.n_elems * 4);
    mt_model_free(&m);
}

static void rank_model(mt_backend *be, mt_comm *w, int sp, int arch, const char *tag) {
    static mt_recipe r;
    mt_model m;
    char nm[96];
    const int tp = w->size;
    model_recipe(&r, arch ? "llama" : "gpt", tp, sp);
    mt_parallel_state ps; /* one rank whose only group is tp: the world of this test */
    mt_pstate_single(&ps);
    ps.g[MT_PG_TP] = (mt_group){.size = w->size, .rank = w->rank, .member = 1, .comm = w};
    mt_status st = mt_model_init_ps(&m, &r, be, 2, 1, 0, &ps);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    const serial_model *s = &g_ser[arch][arch && tp == 4];
    float loss = 0;
    model_step(&m, &loss);
    snprintf(nm, sizeof nm, "%s %s loss", tag, arch ? "llama" : "gpt");
    cmp(nm, &loss, &s->loss, 1);
    /* every element of every shard: weights exactly the serial ones, gradients close */
    int bad_init = 0;
    for (int ti = 0; ti < m.pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m.pl.t[ti], *ts = &s->pl.t[ti];
        const int vocab = !strcmp(t->name, "wte") || !strcmp(t->name, "lm_head");
        size_t n = 0;
        float *g = malloc(t->n * 4), *gs = malloc(t->n * 4);
        for (int l = 0; l < t->n_layers; l++)
            for (int i = 0; i < t->rows; i++)
                for (int j = 0; j < t->cols; j++) {
                    size_t fe = mt_param_full_index(&m.pl, ti, m.par.tp.rank, i, j);
                    if (vocab && fe / (size_t)t->full_cols >= (size_t)s->pl.V) continue; /* padding rows */
                    size_t se = mt_param_offset(&s->pl, ti, l) + fe;
                    size_t me = mt_param_offset(&m.pl, ti, l) + (size_t)i * t->cols + j;
                    if (((float *)m.params)[me] != s->params[se]) bad_init++;
                    g[n] = ((float *)m.grads)[me];
                    gs[n++] = s->grads[se];
                }
        CHECKF(ts->full_rows * ts->full_cols == t->full_rows * t->full_cols || vocab, "%s: full shapes differ",
               t->name);
        snprintf(nm, sizeof nm, "%s %s grad %s", tag, arch ? "llama" : "gpt", t->name);
        cmp(nm, g, gs, n);
        free(g), free(gs);
    }
    CHECKF(bad_init == 0, "%s: %d shard weights differ from the serial weights", tag, bad_init);
    mt_model_free(&m);
}

static void run(int tp, int sp) {
    mt_comm_shm_local *local = NULL;
    pid_t pids[MAXR];
    char tag[32];
    snprintf(tag, sizeof tag, "tp=%d%s", tp, sp ? " sp" : "");
    CHECK(mt_comm_shm_local_create(tp, &local) == MT_OK);
    if (!local) return;
    memset(g_sh, 0, sizeof *g_sh);
    for (int r = 0; r < tp; r++) {
        fflush(stdout);
        pids[r] = fork();
        if (pids[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            mt_test_failures = 0;
            mt_comm *w = NULL;
            mt_backend be;
            if (mt_comm_shm_create_local(local, r, 60, &w) != MT_OK || mt_backend_cpu_create(&be, 1) != MT_OK) {
                fprintf(stderr, "rank %d: %s\n", r, mt_last_error());
                _exit(2);
            }
            g_rank = r;
            g_case = 0;
            rank_layers(&be, w, sp, tag);
            rank_model(&be, w, sp, 0, tag);
            rank_model(&be, w, sp, 1, tag);
            w->i->destroy(w);
            mt_backend_destroy(&be);
            _exit(mt_test_failures ? 1 : 0);
        }
    }
    for (int r = 0; r < tp; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank %d failed (status 0x%x)", tag, r, status);
    }
    mt_comm_shm_local_free(local);
    for (int c = 0; c < MAXC && g_sh->name[c][0]; c++) {
        double w = 0;
        for (int r = 0; r < tp; r++) w = g_sh->worst[c][r] > w ? g_sh->worst[c][r] : w;
        printf("%-40s worst relative difference over ranks %.2e\n", g_sh->name[c], w);
    }
}

int main(void) {
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) return 1;
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    serial_refs(&be);
    for (int i = 0; i < 2 * 9; i++) g_mtok[i] = (int32_t)(mt_rng_u64(11, 1, i) % 37);
    serial_model_run(&be, 0, 0);
    serial_model_run(&be, 1, 0);
    serial_model_run(&be, 1, 1);
    mt_backend_destroy(&be);
    for (int tp = 2; tp <= 4; tp += 2)
        for (int sp = 0; sp <= 1; sp++) run(tp, sp);
    TEST_MAIN_END();
}
