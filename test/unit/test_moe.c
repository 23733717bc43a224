/* test_moe.c — the mixture-of-experts pieces against a double-precision reference written here
 * (MoE's first acceptance test):
 *   1. moe_route: softmax, top-k, weights (renormalised and pre-softmax), the capacity rule (which
 *      assignments are dropped: per sequence, in token order), dispatch rows, counts, and the
 *      load-balancing loss E/(N^2 k) sum_e P_e routed_e and z-loss mean lse^2 values;
 *   2. moe_route_bwd: the router gradient (through the weights, the load-balancing loss and the
 *      z-loss) against central differences of the reference objective in double, the routing held
 *      fixed (top-k choices are piecewise constant);
 *   3. moe_permute / unpermute / unpermute_bwd against plain loops; the shared experts' gate ops (moe_gate_fwd,
 *      moe_gate_bwd, moe_gate_logit_bwd) against a double reference, bitwise the same on 1 and 3 threads;
 *   4. a whole MoE model (dropless, swiglu or squared-ReLU experts, GQA; also with dense layers mixed in,
 *      model.moe.layer_pattern; and DeepSeek-V3's router: sigmoid, expert bias, groups, scaling,
 *      seq_aux_loss) against finite differences of its full
 *      objective lm_loss + aux_coeff * sum aux + z_coeff * sum z, all parameters and per tensor
 *      (router and experts included), as test_model_grad does for dense models; with shared experts (gated
 *      or not, selective and full recompute), full recompute bitwise equal to the run without.
 * Tolerances: ops in fp32 vs double: 1e-5 relative; finite differences as test_model_grad (h = 1e-3
 * here so that no token's top-k choice flips inside the step: 2% relative + 2e-4 absolute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "test/test.h"
#include "test/unit/grad_check.h"
#include "test/unit/tiny_model.h"
#include "train/model.h"

enum { N = 12, T = 6, E = 4, K = 2 };

/* reference routing of logits z: probs, top-k, weights, pos, counts, aux, zloss */
typedef struct {
    double p[N][E], w[N][K], aux, zl, lse[N];
    int topi[N][K], pos[N][K], kept[E], routed[E];
} ref_route;

static void reference(const float *z, int cap, int pre, ref_route *R) {
    memset(R, 0, sizeof *R);
    double psum[E] = {0};
    for (int t = 0; t < N; t++) {
        double mx = z[t * E], s = 0;
        for (int e = 1; e < E; e++) mx = fmax(mx, z[t * E + e]);
        for (int e = 0; e < E; e++) s += exp(z[t * E + e] - mx);
        R->lse[t] = mx + log(s);
        for (int e = 0; e < E; e++) R->p[t][e] = exp(z[t * E + e] - mx) / s, psum[e] += R->p[t][e];
        int used[E] = {0};
        for (int j = 0; j < K; j++) {
            int b = -1;
            for (int e = 0; e < E; e++)
                if (!used[e] && (b < 0 || R->p[t][e] > R->p[t][b])) b = e;
            used[b] = 1;
            R->topi[t][j] = b;
        }
        double s2 = 0;
        for (int j = 0; j < K; j++) s2 += exp(z[t * E + R->topi[t][j]]);
        for (int j = 0; j < K; j++)
            R->w[t][j] = pre ? R->p[t][R->topi[t][j]] : exp(z[t * E + R->topi[t][j]]) / s2;
    }
    int seq[E];
    for (int t = 0; t < N; t++) {
        if (t % T == 0) memset(seq, 0, sizeof seq);
        for (int j = 0; j < K; j++) {
            const int e = R->topi[t][j];
            R->routed[e]++;
            if (cap > 0 && seq[e] >= cap) {
                R->pos[t][j] = -1;
                R->w[t][j] = 0;
            } else {
                seq[e]++;
                R->kept[e]++;
                R->pos[t][j] = 0;
            }
        }
    }
    int off[E], o = 0;
    for (int e = 0; e < E; e++) off[e] = o, o += R->kept[e];
    for (int t = 0; t < N; t++)
        for (int j = 0; j < K; j++)
            if (R->pos[t][j] >= 0) R->pos[t][j] = off[R->topi[t][j]]++;
    for (int e = 0; e < E; e++) R->aux += psum[e] * R->routed[e];
    R->aux *= (double)E / ((double)N * N * K);
    for (int t = 0; t < N; t++) R->zl += R->lse[t] * R->lse[t] / N;
}

/* the objective whose logits gradient moe_route_bwd computes, with the routing of R held fixed:
 * sum c * w (dropped weights 0 but still normalised with the others) + a * aux + b * zloss */
static double objective(const float *zf, const double *z_pert, const ref_route *R, const double *c, int pre, double a,
                        double b) {
    (void)zf;
    double J = 0, psum[E] = {0};
    for (int t = 0; t < N; t++) {
        const double *z = z_pert + t * E;
        double mx = z[0], s = 0;
        for (int e = 1; e < E; e++) mx = fmax(mx, z[e]);
        for (int e = 0; e < E; e++) s += exp(z[e] - mx);
        const double lse = mx + log(s);
        J += b * lse * lse / N;
        for (int e = 0; e < E; e++) psum[e] += exp(z[e] - lse);
        double s2 = 0;
        for (int j = 0; j < K; j++) s2 += exp(z[R->topi[t][j]] - mx);
        for (int j = 0; j < K; j++) {
            if (R->pos[t][j] < 0) continue;
            const double w = pre ? exp(z[R->topi[t][j]] - lse) : exp(z[R->topi[t][j]] - mx) / s2;
            J += c[t * K + j] * w;
        }
    }
    double aux = 0;
    for (int e = 0; e < E; e++) aux += psum[e] * R->routed[e];
    return J + a * aux * E / ((double)N * N * K);
}

static void check_route(mt_backend *be, int cap, int pre) {
    float z[N * E], probs[N * E], topw[N * K], stats[4 + 2 * E] = {0}, dz[N * E], dw[N * K];
    int32_t topi[N * K], pos[N * K], counts[2 * E], auxcnt[N / T * E];
    for (int i = 0; i < N * E; i++) z[i] = (float)(1.5 * mt_rng_normal(3, (uint64_t)cap, (uint64_t)i));
    mt_moe_route_args a = {.logits = z, .probs = probs, .topi = topi, .topw = topw, .pos = pos, .counts = counts,
                           .auxcnt = auxcnt, .stats = stats, .N = N, .E = E, .k = K, .T = T, .cap = cap, .pre_softmax = pre};
    CHECK(be->i->moe_route(be, &a) == MT_OK);
    ref_route R;
    reference(z, cap, pre, &R);
    int dropped = 0;
    for (int t = 0; t < N; t++)
        for (int j = 0; j < K; j++) {
            CHECKF(topi[t * K + j] == R.topi[t][j], "cap %d token %d choice %d", cap, t, j);
            CHECKF(pos[t * K + j] == R.pos[t][j], "cap %d token %d choice %d: row %d, reference %d", cap, t, j,
                   pos[t * K + j], R.pos[t][j]);
            CHECK_NEAR(topw[t * K + j], R.w[t][j], 1e-6, 1e-5);
            dropped += R.pos[t][j] < 0;
        }
    for (int e = 0; e < E; e++) CHECK(counts[e] == R.kept[e] && counts[E + e] == R.routed[e]);
    CHECK_NEAR(stats[0], R.aux, 1e-7, 1e-5);
    CHECK_NEAR(stats[1], R.zl, 1e-7, 1e-5);
    CHECK(stats[2] == dropped && stats[3] == N * K);
    printf("route cap %d pre_softmax %d: aux %.6f (reference %.6f), z %.6f (%.6f), %d of %d dropped\n", cap, pre,
           stats[0], R.aux, stats[1], R.zl, dropped, N * K);
    if (cap > 0) CHECK(dropped > 0); /* the case exercises dropping */
    /* backward against central differences of the reference objective (routing fixed) */
    double c[N * K];
    for (int i = 0; i < N * K; i++) c[i] = mt_rng_normal(4, 1, (uint64_t)i), dw[i] = (float)c[i];
    for (int i = 0; i < N * K; i++)
        if (pos[i] < 0) dw[i] = 0; /* the combine gives dropped assignments no gradient */
    const double ca = 0.7, cz = 0.3;
    mt_moe_route_bwd_args b = {.dlogits = dz, .logits = z, .probs = probs, .topi = topi, .auxcnt = auxcnt, .dw = dw,
                               .N = N, .E = E, .k = K, .T = T, .pre_softmax = pre, .aux_scale = (float)ca, .z_scale = (float)cz};
    CHECK(be->i->moe_route_bwd(be, &b) == MT_OK);
    double zd[N * E], worst = 0;
    for (int i = 0; i < N * E; i++) zd[i] = z[i];
    for (int i = 0; i < N * E; i++) {
        const double h = 1e-5, z0 = zd[i];
        zd[i] = z0 + h;
        const double jp = objective(z, zd, &R, c, pre, ca, cz);
        zd[i] = z0 - h;
        const double jm = objective(z, zd, &R, c, pre, ca, cz);
        zd[i] = z0;
        const double fd = (jp - jm) / (2 * h);
        CHECK_NEAR(dz[i], fd, 1e-6, 1e-4);
        if (fabs(dz[i] - fd) > worst) worst = fabs(dz[i] - fd);
    }
    printf("route_bwd cap %d pre_softmax %d: worst |analytic - finite difference| %.2e\n", cap, pre, worst);
}

static void check_permute(mt_backend *be) {
    enum { C = 5 };
    int32_t pos[N * K];
    float x[N * C], w[N * K], y[N * K * C], out[N * C], dy[N * K * C], dw[N * K];
    int rows = 0;
    for (int i = 0; i < N * K; i++) pos[i] = i % 5 == 3 ? -1 : rows++;
    for (int i = 0; i < N * C; i++) x[i] = (float)mt_rng_normal(5, 1, (uint64_t)i);
    for (int i = 0; i < N * K; i++) w[i] = (float)mt_rng_normal(5, 2, (uint64_t)i);
    mt_moe_permute_args pa = {.out = y, .x = x, .pos = pos, .N = N, .k = K, .C = C};
    CHECK(be->i->moe_permute(be, &pa) == MT_OK);
    for (int i = 0; i < N * K; i++)
        if (pos[i] >= 0)
            for (int c = 0; c < C; c++) CHECK(y[pos[i] * C + c] == x[(i / K) * C + c]);
    mt_moe_unpermute_args ua = {.out = out, .y = y, .pos = pos, .w = w, .N = N, .k = K, .C = C};
    CHECK(be->i->moe_unpermute(be, &ua) == MT_OK);
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) {
            double r = 0;
            for (int j = 0; j < K; j++)
                if (pos[t * K + j] >= 0) r += (double)w[t * K + j] * y[pos[t * K + j] * C + c];
            CHECK_NEAR(out[t * C + c], r, 1e-6, 1e-5);
        }
    mt_moe_unpermute_bwd_args ub = {.dy = dy, .dw = dw, .dout = x, .y = y, .pos = pos, .w = w, .N = N, .k = K, .C = C};
    CHECK(be->i->moe_unpermute_bwd(be, &ub) == MT_OK);
    for (int i = 0; i < N * K; i++) {
        double r = 0;
        if (pos[i] >= 0)
            for (int c = 0; c < C; c++) {
                r += (double)x[(i / K) * C + c] * y[pos[i] * C + c];
                CHECK_NEAR(dy[pos[i] * C + c], w[i] * x[(i / K) * C + c], 1e-7, 1e-6);
            }
        CHECK_NEAR(dw[i], r, 1e-6, 1e-5);
    }
    /* each half alone (the other output NULL; y unread without dw): bitwise the full call's */
    static float dy1[N * K * C], dw1[N * K];
    memset(dy1, 0, sizeof dy1);
    mt_moe_unpermute_bwd_args u1 = {.dy = dy1, .dw = NULL, .dout = x, .y = NULL, .pos = pos, .w = w, .N = N, .k = K,
                                    .C = C};
    CHECK(be->i->moe_unpermute_bwd(be, &u1) == MT_OK);
    mt_moe_unpermute_bwd_args u2 = {.dy = NULL, .dw = dw1, .dout = x, .y = y, .pos = pos, .w = w, .N = N, .k = K, .C = C};
    CHECK(be->i->moe_unpermute_bwd(be, &u2) == MT_OK);
    for (int i = 0; i < N * K; i++) {
        CHECK(dw1[i] == dw[i]);
        for (int c = 0; pos[i] >= 0 && c < C; c++) CHECK(dy1[pos[i] * C + c] == dy[pos[i] * C + c]);
    }
}

/* The shared experts' gate ops against a double reference (gate = sigmoid(x . w), out += gate y; dy = gate dout,
 * dz = gate (1 - gate) <dout, y>; dw += sum dz x, dx += dz w), on a one-thread backend and, bitwise the same, on
 * a three-thread one (rows and columns split over threads, each output written by one). */
static void check_gate(mt_backend *be1) {
    enum { R = 131, C = 300 }; /* R * C above the CPU backend's threading threshold (MT_CPU_PAR_MIN) */
    static float x[R * C], y[R * C], out[2][R * C], w[C], gate[2][R], dy[2][R * C], dz[2][R], dw[2][C], dx[2][R * C];
    for (int i = 0; i < R * C; i++) {
        x[i] = (float)mt_rng_normal(6, 1, (uint64_t)i);
        y[i] = (float)mt_rng_normal(6, 2, (uint64_t)i);
    }
    for (int c = 0; c < C; c++) w[c] = 0.1f * (float)mt_rng_normal(6, 3, (uint64_t)c);
    mt_backend be3;
    CHECK(mt_backend_cpu_create(&be3, 3) == MT_OK);
    mt_backend *bes[2] = {be1, &be3};
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < R * C; i++) out[b][i] = dx[b][i] = 0.5f;
        for (int c = 0; c < C; c++) dw[b][c] = 0.25f;
        mt_moe_gate_fwd_args fa = {.out = out[b], .gate = gate[b], .y = y, .x = x, .w = w, .N = R, .C = C};
        CHECK(MT_BE_CALL(bes[b], moe_gate_fwd, &fa) == MT_OK);
        mt_moe_gate_bwd_args ba = {.dy = dy[b], .dz = dz[b], .dout = x, .y = y, .gate = gate[b], .N = R, .C = C};
        CHECK(MT_BE_CALL(bes[b], moe_gate_bwd, &ba) == MT_OK);
        mt_moe_gate_logit_bwd_args la = {.dw = dw[b], .dx = dx[b], .dz = dz[b], .x = x, .w = w, .N = R, .C = C};
        CHECK(MT_BE_CALL(bes[b], moe_gate_logit_bwd, &la) == MT_OK);
    }
    double worst = 0;
    for (int t = 0; t < R; t++) {
        double z = 0, dot = 0;
        for (int c = 0; c < C; c++) z += (double)x[t * C + c] * w[c], dot += (double)x[t * C + c] * y[t * C + c];
        const double g = 1 / (1 + exp(-z)), d = g * (1 - g) * dot;
        CHECK_NEAR(gate[0][t], g, 1e-7, 1e-6);
        CHECK_NEAR(dz[0][t], d, 1e-6, 1e-5);
        for (int c = 0; c < C; c++) {
            CHECK_NEAR(out[0][t * C + c], 0.5 + g * y[t * C + c], 1e-6, 1e-6);
            CHECK_NEAR(dy[0][t * C + c], g * x[t * C + c], 1e-7, 1e-6);
            CHECK_NEAR(dx[0][t * C + c], 0.5 + (double)dz[0][t] * w[c], 1e-6, 1e-6);
        }
        if (fabs(gate[0][t] - g) > worst) worst = fabs(gate[0][t] - g);
    }
    for (int c = 0; c < C; c++) {
        double r = 0.25;
        for (int t = 0; t < R; t++) r += (double)dz[0][t] * x[t * C + c];
        CHECK_NEAR(dw[0][c], r, 1e-6, 1e-5);
    }
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0 && memcmp(gate[0], gate[1], sizeof gate[0]) == 0 &&
          memcmp(dy[0], dy[1], sizeof dy[0]) == 0 && memcmp(dz[0], dz[1], sizeof dz[0]) == 0 &&
          memcmp(dw[0], dw[1], sizeof dw[0]) == 0 && memcmp(dx[0], dx[1], sizeof dx[0]) == 0);
    printf("moe_gate ops (%d x %d): worst |gate - reference| %.2e; 1 and 3 threads bitwise equal\n", R, C, worst);
    mt_backend_destroy(&be3);
}

/* ---- 4. a whole MoE model against finite differences ---- */
static double objective_of(mt_model *m, const int32_t *tokens, float dloss, int backward, int n_tok) {
    float loss = 0, gsq = 0;
    if (mt_model_zero_grads(m) != MT_OK || mt_model_step_micro(m, tokens, dloss, backward) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        return NAN;
    }
    mt_model_read_scalars(m, &loss, &gsq);
    float st[2];
    m->be->i->copy_d2h(m->be, st, m->moe_stats, 8);
    /* one micro-batch with dloss = 1 / n_tok: the aux and z gradient scale is coeff * n_tok * dloss = coeff */
    return (double)loss / n_tok + m->moe_aux_coeff * st[0] + m->moe_z_coeff * st[1];
}

/* act: the experts' activation (model.activation: swiglu, or squared_relu, not gated); keys: NULL, or more keys
 * "key=value[,key=value]": the shared experts' (model.moe.shared_ffn, shared_gate), training.recompute,
 * model.moe.layer_pattern with dense layers (one dense and one MoE layer; give model.moe.ffn_hidden 8 to make
 * the experts narrower than the dense MLP's 12), the router's (DEEPSEEK: DeepSeek-V3's sigmoid scores, an
 * expert bias set to fixed nonzero values, 1 of 2 groups, weights x 2.5, seq_aux_loss) */
#define DEEPSEEK                                                                                              \
    "model.moe.score_function=sigmoid,model.moe.expert_bias=true,model.moe.num_groups=2,model.moe.group_topk=1," \
    "model.moe.topk_scaling_factor=2.5,model.moe.load_balancing=seq_aux_loss"
#define LLAMA4_OUT "model.moe.score_function=sigmoid,model.moe.top_k=1,model.moe.capacity_factor=0"
#define LLAMA4 LLAMA4_OUT ",model.moe.apply_probs_on_input=true"
static double g_last_obj; /* the objective of the last check_model's model at its initial parameters */
static void check_model(const char *act, const char *shared) {
    static mt_recipe r;
    tiny_recipe(&r, "llama", 6);
    CHECK(mt_recipe_set(&r, "model.activation", act, "test") == MT_OK);
    char what[600];
    snprintf(what, sizeof what, "%s%s%s", act, shared ? " " : "", shared ? shared : "");
    const char *const kv[][2] = {{"model.kv_heads", "2"},           {"model.ffn_hidden", "12"},
                                 {"model.init_std", "0.2"},         {"model.moe.experts", "4"},
                                 {"model.moe.top_k", "2"},          {"model.moe.capacity_factor", "0"},
                                 {"model.moe.aux_loss_coeff", "0.1"}, {"model.moe.z_loss_coeff", "0.01"}};
    set_recipe_keys(&r, kv, sizeof kv / sizeof kv[0]);
    if (!set_recipe_csv(&r, shared)) return;
    static grad_check c;
    if (grad_check_open(&c, &r, objective_of) != MT_OK) return;
    if (shared && strstr(shared, "layer_pattern")) /* the dense MLP over the dense layer, the router, experts
                                                      (and shared experts) over the MoE layer */
        CHECK(c.m.pl.n_kind[0] == 1 && c.m.pl.n_kind[1] == 1 && c.m.pl.t[c.m.pl.idx.fc_w].n_layers == 1 &&
              c.m.pl.t[c.m.pl.idx.router_w].n_layers == 1 && c.m.pl.t[c.m.pl.idx.efc_w].n_layers == 4 &&
              c.m.pl.t[c.m.pl.idx.efcproj_w].cols == 8 && c.m.pl.t[c.m.pl.idx.fcproj_w].cols == 12);
    if (c.m.moe_bias) { /* the CPU backend's memory is the host's: a bias that moves choices, fixed for the check */
        CHECK(shared && strstr(shared, "model.moe.expert_bias=true"));
        for (int i = 0; i < c.m.pl.L * c.m.pl.E; i++) ((float *)c.m.moe_bias)[i] = 0.05f * (float)((i * 7) % 5 - 2);
    }
    const size_t n = c.m.ol.n_flat;
    grad_check_base(&c, n);
    /* full recompute reruns each MoE layer's forward before its backward: the same routing, so the gradient and
       the objective (its MoE statistics counted once) are bitwise those of the run before without it */
    static float *prev_g;
    static size_t prev_n;
    static double prev_obj;
    const double obj = objective_of(&c.m, c.tokens, c.dloss, 1, c.n_tok);
    if (shared && strstr(shared, "training.recompute=full")) {
        CHECKF(prev_g && prev_n == n && memcmp(prev_g, c.g, n * 4) == 0 && prev_obj == obj,
               "%s: gradient or objective differs from the run without recompute", what);
        printf("moe model %s: gradient and objective (%.9g) bitwise equal to the run without recompute\n", what, obj);
    }
    free(prev_g);
    prev_g = malloc(n * 4);
    memcpy(prev_g, c.g, n * 4);
    prev_n = n;
    prev_obj = obj;
    g_last_obj = obj;
    for (int trial = -1; trial < c.m.pl.n_tensors; trial++) { /* -1: all parameters, then one tensor at a time */
        const size_t lo = trial < 0 ? 0 : c.m.pl.t[trial].offset, hi = trial < 0 ? n : lo + c.m.pl.t[trial].n;
        double fd, gd;
        grad_check_direction(&c, lo, hi, 9, (uint64_t)(trial + 1), 1e-3, &fd, &gd);
        const char *name = trial < 0 ? "(all)" : c.m.pl.t[trial].name;
        printf("moe model %s %-16s: finite difference %.6f, analytic %.6f\n", what, name, fd, gd);
        CHECKF(fabs(gd - fd) <= 2e-4 + 2e-2 * fabs(fd), "%s: fd %.6g analytic %.6g", trial < 0 ? "all" : name, fd,
               gd);
    }
    grad_check_close(&c);
}

int main(void) {
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    for (int pre = 0; pre < 2; pre++) {
        check_route(&be, 0, pre); /* dropless */
        check_route(&be, 2, pre); /* 2 per expert per sequence of 6 tokens: some dropped */
    }
    check_permute(&be);
    check_gate(&be);
    mt_backend_destroy(&be);
    check_model("swiglu", NULL);
    check_model("squared_relu", NULL);
    /* shared experts (model_moe_shared.c): SwiGLU, with the sigmoid gate under selective recompute, and a
       gated squared-ReLU one (then under full recompute) */
    check_model("swiglu", "model.moe.shared_ffn=8");
    check_model("swiglu", "model.moe.shared_ffn=8,model.moe.shared_gate=true,training.recompute=selective");
    check_model("squared_relu", "model.moe.shared_ffn=6,model.moe.shared_gate=true");
    /* full recompute of MoE layers (uniform: both layers; block: the first), after the same model without */
    check_model("squared_relu", "model.moe.shared_ffn=6,model.moe.shared_gate=true,training.recompute=full");
    check_model("swiglu", NULL);
    check_model("swiglu", "training.recompute=full,training.recompute_method=block,training.recompute_num_layers=1");
    /* mixed dense and MoE layers: a dense first layer (DeepSeek's) then a MoE one, a MoE then a dense one
       (layer_freq 2's order); with gated shared experts, then the same under full recompute (the MoE arrays in
       the recompute slices) */
    check_model("swiglu", "model.moe.layer_pattern=01,model.moe.ffn_hidden=8");
    check_model("squared_relu", "model.moe.layer_pattern=10,model.moe.ffn_hidden=8");
    check_model("swiglu", "model.moe.layer_pattern=01,model.moe.ffn_hidden=8,model.moe.shared_ffn=6,"
                "model.moe.shared_gate=true");
    check_model("swiglu", "model.moe.layer_pattern=01,model.moe.ffn_hidden=8,model.moe.shared_ffn=6,"
                "model.moe.shared_gate=true,training.recompute=full");
    /* DeepSeek-V3's router; then with DeepSeek's layer kinds (a dense first layer) and gated shared experts, and
       the same under full recompute (bitwise: the rerun routes with the same bias and counts nothing twice) */
    check_model("swiglu", DEEPSEEK);
    /* Llama 4's routing: sigmoid top-1, the weight on the expert's input (apply_probs_on_input), against finite
       differences; its loss differs from the same weights' output-weighted model (expert(w x) != w expert(x)) */
    check_model("swiglu", LLAMA4);
    const double l4 = g_last_obj;
    check_model("swiglu", LLAMA4_OUT);
    printf("llama 4 routing: objective %.9g, with the weight on the output instead %.9g\n", l4, g_last_obj);
    CHECKF(fabs(l4 - g_last_obj) > 1e-4, "apply_probs_on_input changed the objective by only %.3g", fabs(l4 - g_last_obj));
    check_model("swiglu", DEEPSEEK ",model.moe.layer_pattern=01,model.moe.ffn_hidden=8,model.moe.shared_ffn=6,"
                "model.moe.shared_gate=true");
    check_model("swiglu", DEEPSEEK ",model.moe.layer_pattern=01,model.moe.ffn_hidden=8,model.moe.shared_ffn=6,"
                "model.moe.shared_gate=true,training.recompute=full");
    TEST_MAIN_END();
}
