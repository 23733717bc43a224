/* test_cpu_ops_train.c — the CPU backend's ops at the ends of a training step against a naive
 * double-precision reference written here, independently of core/cpu/cpu_ops_*.c: the embedding
 * (a vocab shard, learned positions), the fused cross-entropy and AdamW; then bitwise run-to-run
 * determinism of the threaded ops (GEMM, layernorm, attention, cross-entropy, sum) and the
 * backend object itself (memory, thread counts, argument errors as statuses). The dense ops are
 * in test_cpu_ops.c; the comparisons (forward vs the double reference on the same inputs,
 * backward vs double central finite differences) are in cpu_op_check.h.
 * Tolerances (|got - want| <= rtol |want| + atol_frac * max|want|), each stated with its reason
 * at the check: the embedding forward is a copy plus at most one fp32 add (rtol 1.2e-7); the
 * cross-entropy loss a double sum of ~2-ulp exps (rtol 1e-5); AdamW's state after 3 steps
 * rtol 1e-6 .. 1e-5; gradients (fp32 analytic vs double FD) rtol 1e-4, the budget test_cpu_ops.c
 * derives for a backward that chains fp32 reductions. Also checked: the accumulate rules (+= on
 * dwte / dwpe), out-of-shard tokens, unused vocab rows and positions left alone, padding columns
 * and ignored targets. Every op test runs twice: on a backend with all cores and on one with 3
 * threads. Exit code 0 when all checks hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/op_check.h"
#include "test/ops/cpu_op_check.h"

/* ---------------- embedding ---------------- */

typedef struct {
    double *wte, *wpe, *g, *out;
    const int32_t *tok;
    int B, T, C, vs, nv, po;
} emb_ctx;

static void ref_embedding(double *out, const int32_t *tok, const double *wte, const double *wpe, int B, int T, int C,
                          int vs, int nv, int po) {
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < C; j++) {
            const int id = tok[r] - vs;
            double v = (id >= 0 && id < nv) ? wte[(size_t)id * C + j] : 0.0;
            if (wpe) v += wpe[(size_t)(po + r % T) * C + j];
            out[(size_t)r * C + j] = v;
        }
}

static double emb_loss(void *p) {
    emb_ctx *c = p;
    ref_embedding(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C, c->vs, c->nv, c->po);
    return dot_gd(c->g, c->out, (size_t)c->B * c->T * c->C);
}

static void test_embedding(int with_wpe) {
    char what[96];
    const int B = 2, T = 5, C = 7, vs = 10, nv = 8, po = 2, max_pos = 12;
    /* shard [10, 18): 3, 9, 18, 25 are other shards' tokens; 12 repeats (accumulation) */
    const int32_t tok[10] = {12, 3, 10, 17, 12, 9, 18, 12, 25, 15};
    const size_t nO = (size_t)B * T * C, nE = (size_t)nv * C, nP = (size_t)max_pos * C;
    float *wte = frand(nE, -1, 1), *wpe = with_wpe ? frand(nP, -1, 1) : NULL, *out = fconst(nO, 777.0f);
    mt_embedding_fwd_args fa = {out, tok, wte, wpe, B, T, C, vs, nv, po};
    OK(MT_BE_CALL(&be, embedding_fwd, &fa));
    emb_ctx c = {dcopy(wte, nE), wpe ? dcopy(wpe, nP) : NULL, NULL, dzeros(nO), tok, B, T, C, vs, nv, po};
    double *want = dzeros(nO);
    ref_embedding(want, tok, c.wte, c.wpe, B, T, C, vs, nv, po);
    snprintf(what, sizeof what, "embedding_fwd wpe=%d", with_wpe);
    check_close(what, out, want, nO, 1.2e-7, 0); /* a copy plus at most one fp32 add */
    if (!with_wpe) { /* out-of-shard tokens read exact zeros */
        size_t nz = 0;
        for (int r = 0; r < B * T; r++)
            if (tok[r] < vs || tok[r] >= vs + nv)
                for (int j = 0; j < C; j++) nz += out[(size_t)r * C + j] != 0.0f;
        CHECKF(nz == 0, "embedding_fwd: %zu nonzero entries in rows of out-of-shard tokens", nz);
    }
    float *g = frand(nO, -1, 1);
    c.g = dcopy(g, nO);
    float *dwte0 = frand(nE, -1, 1), *dwpe0 = frand(nP, -1, 1);
    float *dwte = fcopy(dwte0, nE), *dwpe = with_wpe ? fcopy(dwpe0, nP) : NULL;
    mt_embedding_bwd_args ba = {dwte, dwpe, g, tok, B, T, C, vs, nv, po};
    OK(MT_BE_CALL(&be, embedding_bwd, &ba));
    snprintf(what, sizeof what, "embedding_bwd dwte(+=) wpe=%d", with_wpe);
    fd_check(what, emb_loss, &c, c.wte, nE, dwte, dwte0, nE, 1e-4, 1e-6);
    if (with_wpe) {
        fd_check("embedding_bwd dwpe(+=)", emb_loss, &c, c.wpe, nP, dwpe, dwpe0, nP, 1e-4, 1e-6);
        /* positions outside [po, po + T) get no gradient at all */
        size_t touched = 0;
        for (int p = 0; p < max_pos; p++)
            if (p < po || p >= po + T)
                for (int j = 0; j < C; j++) touched += dwpe[(size_t)p * C + j] != dwpe0[(size_t)p * C + j];
        CHECKF(touched == 0, "embedding_bwd touched %zu dwpe entries outside the positions used", touched);
    }
    /* vocab rows no token of this shard used stay bit-identical: rows 1 (11), 3 (13), 4, 6 */
    const int unused[4] = {1, 3, 4, 6};
    size_t changed = 0;
    for (int u = 0; u < 4; u++)
        for (int j = 0; j < C; j++) changed += dwte[(size_t)unused[u] * C + j] != dwte0[(size_t)unused[u] * C + j];
    CHECKF(changed == 0, "embedding_bwd changed %zu entries of unused vocab rows", changed);
    free(wte), free(wpe), free(out), free(g), free(dwte0), free(dwpe0), free(dwte), free(dwpe), free(want);
    free(c.wte), free(c.wpe), free(c.g), free(c.out);
}

/* ---------------- cross-entropy ---------------- */

typedef struct {
    double *logits;
    const int32_t *tgt;
    int N, V, Vp;
    double dloss;
} xent_ctx;

static void ref_xent(double *losses, const double *logits, const int32_t *tgt, int N, int V, int Vp) {
    for (int r = 0; r < N; r++) {
        const double *x = logits + (size_t)r * Vp;
        if (tgt[r] < 0) {
            losses[r] = 0.0;
            continue;
        }
        double mx = x[0], s = 0.0;
        for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < V; j++) s += exp(x[j] - mx);
        losses[r] = log(s) + mx - x[tgt[r]];
    }
}

static double xent_loss(void *p) {
    xent_ctx *c = p;
    double *l = dzeros((size_t)c->N);
    ref_xent(l, c->logits, c->tgt, c->N, c->V, c->Vp);
    double s = 0.0;
    for (int r = 0; r < c->N; r++) s += l[r];
    free(l);
    return c->dloss * s;
}

static void test_xent(int N, int V, int Vp, const int32_t *tgt, float spread) {
    char what[96];
    const size_t n = (size_t)N * Vp;
    float *logits0 = frand(n, -spread, spread), *logits = fcopy(logits0, n), *losses = fconst((size_t)N, 777.0f);
    const float dloss = 0.2f;
    mt_xent_args xa = {logits, losses, tgt, N, V, Vp, dloss};
    OK(MT_BE_CALL(&be, xent_fwd_bwd, &xa));
    xent_ctx c = {dcopy(logits0, n), tgt, N, V, Vp, (double)dloss};
    double *want = dzeros((size_t)N);
    ref_xent(want, c.logits, tgt, N, V, Vp);
    /* loss = log(sum of V exps) - x_t: sum in double of ~2-ulp exps, O(1) result */
    snprintf(what, sizeof what, "xent losses N=%d V=%d Vp=%d", N, V, Vp);
    check_close(what, losses, want, (size_t)N, 1e-5, 1e-6);
    snprintf(what, sizeof what, "xent dlogits N=%d V=%d Vp=%d", N, V, Vp);
    fd_check(what, xent_loss, &c, c.logits, n, logits, NULL, 500, 1e-4, 1e-5);
    size_t pad = 0, ign = 0;
    for (int r = 0; r < N; r++) {
        for (int j = V; j < Vp; j++) pad += logits[(size_t)r * Vp + j] != 0.0f;
        if (tgt[r] < 0) {
            ign += losses[r] != 0.0f;
            for (int j = 0; j < Vp; j++) ign += logits[(size_t)r * Vp + j] != 0.0f;
        }
    }
    CHECKF(pad == 0, "xent: %zu padding columns have a nonzero gradient", pad);
    CHECKF(ign == 0, "xent: %zu nonzero loss / gradient entries on ignored rows", ign);
    free(logits0), free(logits), free(losses), free(want), free(c.logits);
}

/* ---------------- adamw ---------------- */

static void test_adamw(size_t n) {
    char what[96];
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    float *master = frand(n, -1, 1), *m = fconst(n, 0), *v = fconst(n, 0), *param = fconst(n, 777.0f);
    float *master_a = fcopy(master, n), *m_a = fconst(n, 0), *v_a = fconst(n, 0); /* aliased run */
    /* moments_zero run: its moments hold NaN before step 1, which must read them as 0 and only write */
    float *master_z = fcopy(master, n), *m_z = fconst(n, NAN), *v_z = fconst(n, NAN);
    double *wm = dcopy(master, n), *wmm = dzeros(n), *wv = dzeros(n);
    for (int step = 1; step <= 3; step++) {
        float *grad = frand(n, -2, 2);
        const float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
        mt_adamw_args aa = {master, param, grad, m, v, n, lr, b1, b2, eps, wd, gs, bc1, bc2, 0};
        OK(MT_BE_CALL(&be, adamw, &aa));
        mt_adamw_args ab = {master_a, master_a, grad, m_a, v_a, n, lr, b1, b2, eps, wd, gs, bc1, bc2, 0};
        OK(MT_BE_CALL(&be, adamw, &ab));
        mt_adamw_args az = {master_z, master_z, grad, m_z, v_z, n, lr, b1, b2, eps, wd, gs, bc1, bc2, step == 1};
        OK(MT_BE_CALL(&be, adamw, &az));
        /* double scalar reference, with the same fp32 hyper-parameters */
        for (size_t i = 0; i < n; i++) {
            const double g = (double)grad[i] * gs;
            wmm[i] = (double)b1 * wmm[i] + (1.0 - (double)b1) * g;
            wv[i] = (double)b2 * wv[i] + (1.0 - (double)b2) * g * g;
            const double mh = wmm[i] / (double)bc1, vh = wv[i] / (double)bc2;
            wm[i] -= (double)lr * (mh / (sqrt(vh) + (double)eps) + (double)wd * wm[i]);
        }
        free(grad);
    }
    /* master ~O(1) changed by 3 updates of ~lr: each update is computed to ~1e-6 relative, so
     * the master carries ~lr * 1e-6 absolute error plus its own fp32 rounding per step */
    snprintf(what, sizeof what, "adamw master after 3 steps n=%zu", n);
    check_close(what, master, wm, n, 1e-6, 1e-6);
    snprintf(what, sizeof what, "adamw m after 3 steps n=%zu", n);
    check_close(what, m, wmm, n, 1e-5, 1e-6);
    snprintf(what, sizeof what, "adamw v after 3 steps n=%zu", n);
    check_close(what, v, wv, n, 1e-5, 1e-6);
    CHECK(memcmp(param, master, n * sizeof *param) == 0);    /* param written from master */
    CHECK(memcmp(master_a, master, n * sizeof *param) == 0); /* aliasing changes nothing */
    /* moments known zero: the same bits as moments that are zero (the same arithmetic, b1 * 0 + ...) */
    CHECK(memcmp(master_z, master, n * sizeof *param) == 0);
    CHECK(memcmp(m_z, m, n * sizeof *m) == 0 && memcmp(v_z, v, n * sizeof *v) == 0);
    free(master), free(m), free(v), free(param), free(master_a), free(m_a), free(v_a), free(wm), free(wmm), free(wv);
    free(master_z), free(m_z), free(v_z);
}

/* ---------------- determinism ---------------- */

static void test_determinism(void) {
    /* shapes large enough that every op runs threaded */
    const int M = 160, N = 192, K = 96;
    float *inp = frand((size_t)M * K, -1, 1), *w = frand((size_t)N * K, -1, 1), *bias = frand((size_t)N, -1, 1);
    float *o1 = fconst((size_t)M * N, 0), *o2 = fconst((size_t)M * N, 0);
    mt_matmul_fwd_args f1 = {o1, inp, w, bias, M, N, K}, f2 = {o2, inp, w, bias, M, N, K};
    OK(MT_BE_CALL(&be, matmul_fwd, &f1));
    OK(MT_BE_CALL(&be, matmul_fwd, &f2));
    CHECK(memcmp(o1, o2, (size_t)M * N * sizeof *o1) == 0);
    float *dw1 = fconst((size_t)N * K, 0), *dw2 = fconst((size_t)N * K, 0), *db1 = fconst((size_t)N, 0),
          *db2 = fconst((size_t)N, 0), *di1 = fconst((size_t)M * K, 0), *di2 = fconst((size_t)M * K, 0);
    mt_matmul_bwd_args b1 = {di1, dw1, db1, o1, inp, w, M, N, K, 0}, b2 = {di2, dw2, db2, o1, inp, w, M, N, K, 0};
    OK(MT_BE_CALL(&be, matmul_bwd, &b1));
    OK(MT_BE_CALL(&be, matmul_bwd, &b2));
    CHECK(memcmp(di1, di2, (size_t)M * K * sizeof *di1) == 0 && memcmp(dw1, dw2, (size_t)N * K * sizeof *dw1) == 0 &&
          memcmp(db1, db2, (size_t)N * sizeof *db1) == 0);

    /* layernorm fwd + bwd on (M, N) */
    float *mean = fconst((size_t)M, 0), *rstd = fconst((size_t)M, 0), *lo1 = fconst((size_t)M * N, 0),
          *lo2 = fconst((size_t)M * N, 0);
    mt_norm_fwd_args n1 = {lo1, mean, rstd, o1, bias, bias, M, N, 1e-5f},
                     n2 = {lo2, mean, rstd, o1, bias, bias, M, N, 1e-5f};
    OK(MT_BE_CALL(&be, layernorm_fwd, &n1));
    OK(MT_BE_CALL(&be, layernorm_fwd, &n2));
    CHECK(memcmp(lo1, lo2, (size_t)M * N * sizeof *lo1) == 0);
    float *ld1 = fconst((size_t)M * N, 0), *ld2 = fconst((size_t)M * N, 0), *lw1 = fconst((size_t)N, 0),
          *lw2 = fconst((size_t)N, 0), *lb1 = fconst((size_t)N, 0), *lb2 = fconst((size_t)N, 0);
    mt_norm_bwd_args nb1 = {ld1, lw1, lb1, lo1, o1, bias, mean, rstd, M, N},
                     nb2 = {ld2, lw2, lb2, lo1, o1, bias, mean, rstd, M, N};
    OK(MT_BE_CALL(&be, layernorm_bwd, &nb1));
    OK(MT_BE_CALL(&be, layernorm_bwd, &nb2));
    CHECK(memcmp(ld1, ld2, (size_t)M * N * sizeof *ld1) == 0 && memcmp(lw1, lw2, (size_t)N * sizeof *lw1) == 0 &&
          memcmp(lb1, lb2, (size_t)N * sizeof *lb1) == 0);

    /* attention fwd + bwd, five query / key tiles, the last partial (T = 260) */
    const int B = 2, T = 260, H = 4, KV = 2, D = 16;
    const size_t nQ = (size_t)B * T * (H + 2 * KV) * D, nO = (size_t)B * T * H * D, nP = (size_t)B * H * T;
    float *qkv = frand(nQ, -1, 1), *g = frand(nO, -1, 1);
    float *ao1 = fconst(nO, 0), *ao2 = fconst(nO, 0), *p1 = fconst(nP, 0), *p2 = fconst(nP, 0);
    float *dq1 = fconst(nQ, 0), *dq2 = fconst(nQ, 0), *dp = fconst(nP, 0);
    mt_attention_fwd_args a1 = {ao1, p1, qkv, B, T, H, KV, D, 0}, a2 = {ao2, p2, qkv, B, T, H, KV, D, 0};
    OK(MT_BE_CALL(&be, attention_fwd, &a1));
    OK(MT_BE_CALL(&be, attention_fwd, &a2));
    CHECK(memcmp(ao1, ao2, nO * sizeof *ao1) == 0 && memcmp(p1, p2, nP * sizeof *p1) == 0);
    mt_attention_bwd_args ab1 = {dq1, dp, g, qkv, ao1, p1, B, T, H, KV, D, 0},
                          ab2 = {dq2, dp, g, qkv, ao1, p1, B, T, H, KV, D, 0};
    OK(MT_BE_CALL(&be, attention_bwd, &ab1));
    OK(MT_BE_CALL(&be, attention_bwd, &ab2));
    CHECK(memcmp(dq1, dq2, nQ * sizeof *dq1) == 0);
    { /* and the same bits on one thread: work items never depend on the thread count */
        mt_backend one_t;
        OK(mt_backend_cpu_create(&one_t, 1));
        memset(ao2, 0, nO * sizeof *ao2), memset(p2, 0, nP * sizeof *p2), memset(dq2, 0, nQ * sizeof *dq2);
        OK(MT_BE_CALL(&one_t, attention_fwd, &a2));
        CHECK(memcmp(ao1, ao2, nO * sizeof *ao1) == 0 && memcmp(p1, p2, nP * sizeof *p1) == 0);
        OK(MT_BE_CALL(&one_t, attention_bwd, &ab2));
        CHECK(memcmp(dq1, dq2, nQ * sizeof *dq1) == 0);
        mt_backend_destroy(&one_t);
    }

    /* cross-entropy and sum */
    const int XN = 64, XV = 1000, XVp = 1024;
    int32_t tgt[64];
    for (int r = 0; r < XN; r++) tgt[r] = r % 7 == 3 ? -1 : (int32_t)(rng_next() % XV);
    float *lg = frand((size_t)XN * XVp, -3, 3), *lg1 = fcopy(lg, (size_t)XN * XVp), *lg2 = fcopy(lg, (size_t)XN * XVp);
    float *ls1 = fconst((size_t)XN, 0), *ls2 = fconst((size_t)XN, 0);
    mt_xent_args x1 = {lg1, ls1, tgt, XN, XV, XVp, 0.01f}, x2 = {lg2, ls2, tgt, XN, XV, XVp, 0.01f};
    OK(MT_BE_CALL(&be, xent_fwd_bwd, &x1));
    OK(MT_BE_CALL(&be, xent_fwd_bwd, &x2));
    CHECK(memcmp(lg1, lg2, (size_t)XN * XVp * sizeof *lg1) == 0 && memcmp(ls1, ls2, (size_t)XN * sizeof *ls1) == 0);
    float s1 = 0, s2 = 0;
    mt_sum_args sa1 = {&s1, lg, (size_t)XN * XVp, 1}, sa2 = {&s2, lg, (size_t)XN * XVp, 1};
    OK(MT_BE_CALL(&be, sum, &sa1));
    OK(MT_BE_CALL(&be, sum, &sa2));
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0);

    free(inp), free(w), free(bias), free(o1), free(o2), free(dw1), free(dw2), free(db1), free(db2);
    free(di1), free(di2);
    free(mean), free(rstd), free(lo1), free(lo2), free(ld1), free(ld2), free(lw1), free(lw2), free(lb1), free(lb2);
    free(qkv), free(g), free(ao1), free(ao2), free(p1), free(p2), free(dq1), free(dq2), free(dp);
    free(lg), free(lg1), free(lg2), free(ls1), free(ls2);
}

/* ---------------- backend object, memory, argument errors ---------------- */

static void test_backend_basics(void) {
    CHECK(be.act == MT_F32);
    CHECK(be.i != NULL && strcmp(be.i->name, "cpu") == 0);
    CHECK_STR_CONTAINS(be.device_name, "cpu (");
    CHECK_STR_CONTAINS(be.device_name, "thread");
    CHECK(be.peak_tflops == 0.0);
    CHECK(strcmp(mt_dtype_name(MT_F32), "f32") == 0 && strcmp(mt_dtype_name(MT_BF16), "bf16") == 0);

    void *p = NULL;
    OK(be.i->alloc(&be, 1000, &p));
    CHECK(p != NULL && ((uintptr_t)p % 256) == 0);
    size_t nz = 0;
    for (size_t i = 0; i < 1000; i++) nz += ((unsigned char *)p)[i] != 0;
    CHECK(nz == 0);
    float host[250], back[250];
    for (int i = 0; i < 250; i++) host[i] = (float)i;
    OK(be.i->copy_h2d(&be, p, host, sizeof host));
    OK(be.i->copy_d2h(&be, back, p, sizeof back));
    CHECK(memcmp(host, back, sizeof host) == 0);
    OK(be.i->memset_zero(&be, p, sizeof host));
    OK(be.i->copy_d2h(&be, back, p, sizeof back));
    CHECK(back[0] == 0.0f && back[249] == 0.0f);
    OK(be.i->sync(&be));
    be.i->free(&be, p);

    void *huge = NULL;
    mt_status st = be.i->alloc(&be, SIZE_MAX / 2, &huge);
    CHECK(st == MT_ERR_OOM && huge == NULL);
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%zu", SIZE_MAX / 2);
    CHECK_STR_CONTAINS(mt_last_error(), bytes);

    mt_backend one;
    OK(mt_backend_cpu_create(&one, 1));
    CHECK_STR_CONTAINS(one.device_name, "cpu (1 thread");
    mt_backend_destroy(&one);
    CHECK(one.ctx == NULL && one.i == NULL);
    CHECK(mt_backend_cpu_create(&one, -1) == MT_ERR_CONFIG);

    /* argument errors are statuses with a message, never crashes */
    float x[64] = {0};
    mt_rope_args ra = {x, 1, 2, 1, 7, 8, 0, 10000.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* odd D */
    CHECK(MT_BE_CALL(&be, rope, &ra) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "D=7");
    /* YaRN frequencies (multi-latent attention): rotary dim 8, base 1e4, factor 4, original 4096
       positions, beta 32 / 1; expected from Megatron's YarnRotaryEmbedding.get_emb formulas evaluated
       in Python: correction range [1, 3], ramp 0, 0, 0.5, 1 -> 1, 0.1, 0.1^2 (1 + 1/4) / 2, 0.1^3 / 4 */
    const mt_rope_args ya = {.theta = 10000.0f, .yarn_factor = 4.0f, .yarn_beta_fast = 32.0f, .yarn_beta_slow = 1.0f,
                             .yarn_orig_max = 4096};
    double inv[4];
    const double want[4] = {1.0, 0.1, 0.00625, 0.00025};
    mt_rope_inv_freq(&ya, 8, inv);
    for (int i = 0; i < 4; i++) CHECK_NEAR(inv[i], want[i], 1e-12, 1e-9);
    /* Llama 3.x's scaling (--use-rope-scaling) on Llama 3.1 8B's rotary embedding: 128 channels, base
       5e5, factor 8, low / high frequency factors 1 / 4, original context 8192. Expected values:
       transformers' _compute_llama3_parameters (modeling_rope_utils.py) written out in Python floats
       (wavelength w = 2 pi / f; w < 2048: f; w > 8192: f / 8; else s = (8192 / w - 1) / 3, (1 - s) f / 8 +
       s f): pairs 0 and 20 kept, 29..34 blended, 38 and 63 divided. The same frequencies must reach the
       op: a unit vector in pair i at position p comes out as (cos, sin)(p f_i). */
    {
        const mt_rope_args l3 = {.theta = 500000.0f, .llama3_factor = 8.0f, .llama3_low = 1.0f, .llama3_high = 4.0f,
                                 .llama3_orig_max = 8192};
        static const struct { int i; double f; } w3[] = {
            {0, 1.0}, {20, 0.016560440080994446}, {29, 0.002166570763503359}, {30, 0.0013718935677611381},
            {31, 0.0008567514129196321}, {32, 0.0005248461609929547}, {33, 0.00031269375038406517},
            {34, 0.0001785078127679964}, {38, 5.165906874818956e-05}, {63, 3.068925988914511e-07}};
        double inv3[64];
        /* theta is a float in the args (5e5 is exact), the frequencies double: agreement to ~1e-15 relative */
        mt_rope_inv_freq(&l3, 128, inv3);
        for (size_t k = 0; k < sizeof w3 / sizeof w3[0]; k++) CHECK_NEAR(inv3[w3[k].i], w3[k].f, 0.0, 1e-12);
        float v[128];
        for (size_t k = 0; k < sizeof w3 / sizeof w3[0]; k++) {
            const int i = w3[k].i, p = 100000; /* a long-context position, where the scaling matters */
            memset(v, 0, sizeof v);
            v[i] = 1.0f;
            mt_rope_args op = l3;
            op.x = v, op.B = 1, op.T = 1, op.n_heads = 1, op.D = 128, op.row_stride = 128, op.pos_offset = p;
            OK(MT_BE_CALL(&be, rope, &op));
            /* fp32 cos / sin of an angle computed in double: 1e-6 absolute */
            CHECK_NEAR(v[i], cos(p * w3[k].f), 1e-6, 0.0);
            CHECK_NEAR(v[i + 64], sin(p * w3[k].f), 1e-6, 0.0);
        }
        /* position interpolation (--rotary-seq-len-interpolation-factor 2): position 2p rotates exactly as
           p without it (p f / 1 and 2p (f / 2) are the same double), on top of the Llama 3.x scaling */
        float a[2 * 128], b[2 * 128];
        for (int k = 0; k < 2 * 128; k++) a[k] = b[k] = (float)sin(0.37 * k + 0.1);
        mt_rope_args half = l3, full = l3;
        half.x = a, full.x = b;
        half.B = full.B = 1, half.T = full.T = 1, half.n_heads = full.n_heads = 2, half.D = full.D = 128;
        half.row_stride = full.row_stride = 2 * 128;
        half.pos_interp = 2.0f, half.pos_offset = 2 * 77777, full.pos_offset = 77777;
        OK(MT_BE_CALL(&be, rope, &half));
        OK(MT_BE_CALL(&be, rope, &full));
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    float lse[16];
    mt_attention_fwd_args aa = {x, lse, x, 1, 2, 3, 2, 2, 0}; /* H % KV != 0 */
    CHECK(MT_BE_CALL(&be, attention_fwd, &aa) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "kv heads");
    int32_t bad_tgt[1] = {5};
    float lg[8] = {0}, ls[1];
    mt_xent_args xa = {lg, ls, bad_tgt, 1, 5, 8, 1.0f}; /* target >= V */
    CHECK(MT_BE_CALL(&be, xent_fwd_bwd, &xa) == MT_ERR_DATA);
    mt_matmul_fwd_args ma = {x, x, x, NULL, -1, 2, 2};
    CHECK(MT_BE_CALL(&be, matmul_fwd, &ma) == MT_ERR_CONFIG);
    mt_matmul_fwd_args m0 = {x, x, x, NULL, 0, 2, 2}; /* empty is fine */
    OK(MT_BE_CALL(&be, matmul_fwd, &m0));
}

/* Every op test of this file, on the backend `be` currently holds. */
static void test_all_ops(void) {
    test_embedding(1);
    test_embedding(0);

    const int32_t t1[6] = {0, 10, -1, 4, 7, 3}; /* V - 1 = 10, one ignored row */
    test_xent(6, 11, 16, t1, 3.0f);
    const int32_t t2[4] = {999, -5, 0, 512};
    test_xent(4, 1000, 1024, t2, 4.0f);

    test_adamw(1003);
    test_adamw(20011);

    test_determinism();
}

int main(void) {
    /* all cores, then 3 threads: uneven work splits whatever the machine */
    CPU_OP_CHECK_MAIN(test_backend_basics, test_all_ops);
}
