/* test_cpu_ops.c — every op of the CPU backend against a naive double-precision reference
 * written here, independently of core/cpu/cpu_ops_*.c.
 *
 * Forward: the backend's fp32 output vs the double reference evaluated on the very same
 * (fp32-representable) inputs, so the only error measured is the backend's own rounding.
 * Backward: the backend's fp32 gradients vs central finite differences, in double, of the
 * DOUBLE reference of L = sum(g * f(x)) with a random g; with h = 1e-6 the FD error is
 * ~h^2 |f'''| + 1e-16 |L| / h ~ 1e-9, so any mismatch above that is the backend's.
 * Tolerances (|got - want| <= rtol |want| + atol_frac * max|want|):
 *  - reductions / GEMMs of K <= 300 fp32 terms: rtol 1e-5 (fp32 unit roundoff 6e-8 times a
 *    worst-case growth of ~sqrt(K)..K, with margin), atol_frac 1e-5 for entries that cancel;
 *  - elementwise ops built on the backend's polynomial expf (~2 ulp) and a handful of
 *    roundings: rtol 2e-6;
 *  - gradients (fp32 analytic vs double FD): rtol 1e-4, atol_frac 1e-5 — a backward chains
 *    two or three fp32 reductions (e.g. norm: two row means, then a difference of terms of
 *    similar size) each ~1e-6 relative, and the difference of nearly equal terms amplifies
 *    that by up to ~10-50x for individual entries.
 * Also checked: the accumulate rules (+= on weight grads and norm dinp, = on activation grads
 * unless accumulate_dinp), vocab shards, padding columns and ignored targets, GQA, RoPE
 * inverse = identity, AdamW over 3 steps, argument errors, and bitwise run-to-run determinism.
 * Every op test runs twice: on a backend with all cores and on one with 3 threads (uneven GEMM
 * slices and work splits on any machine). MT_TEST_VERBOSE=1 prints each comparison's worst
 * err/tol. Exit code 0 when all checks hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/test.h"
#include "core/backend.h"
#include "core/cpu/cpu_backend.h" /* mt_cpu_expf, the exp every softmax / sigmoid of the backend uses */

static mt_backend be;
static int verbose; /* MT_TEST_VERBOSE=1: print each comparison's worst err / tol */

/* ---------------- helpers ---------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* uniform in [lo, hi), with 24 random bits so the value is exact in fp32 for |lo|,|hi| <= 1 */
static float rng_uniform(float lo, float hi) {
    float u = (float)(rng_next() >> 40) / 16777216.0f;
    return lo + (hi - lo) * u;
}

static float *frand(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = rng_uniform(lo, hi);
    return p;
}

static float *fconst(size_t n, float v) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static float *fcopy(const float *src, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static double *dcopy(const float *src, size_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (double)src[i];
    return p;
}

static double *dzeros(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static double maxabs_d(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Forward check: got (fp32, backend) vs want (double reference). */
static void check_close(const char *what, const float *got, const double *want, size_t n, double rtol,
                        double atol_frac) {
    const double atol = atol_frac * maxabs_d(want, n) + 1e-30;
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]);
        const double tol = atol + rtol * fabs(want[i]);
        if (!(err <= tol)) bad++;
        const double excess = err / tol;
        if (!(excess <= worst_excess)) worst_excess = excess, worst = i;
    }
    CHECKF(bad == 0, "%s: %zu of %zu entries off; worst [%zu] got %.9g want %.9g (err/tol %.3g)", what, bad, n,
           worst, (double)got[worst], want[worst], worst_excess);
    if (verbose) printf("  %-60s worst err/tol %.3g\n", what, worst_excess);
}

/* Loss closure for finite differences: returns L = sum(g * f(x)) in double. */
typedef double (*loss_fn)(void *ctx);

/* Backward check: analytic (fp32 from the backend, with `offset` subtracted logically: the
 * expected value is offset[i] + dL/dx[i]) vs central differences of L with respect to x[i]
 * (a double input of the reference). At most max_n indices are checked, chosen at random. */
static void fd_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const float *analytic,
                     const float *offset, size_t max_n, double rtol, double atol_frac) {
    const double h = 1e-6;
    size_t m = n < max_n ? n : max_n;
    size_t *idx = malloc((m ? m : 1) * sizeof *idx);
    double *fd = malloc((m ? m : 1) * sizeof *fd);
    for (size_t s = 0; s < m; s++) idx[s] = n <= max_n ? s : (size_t)(rng_next() % n);
    for (size_t s = 0; s < m; s++) {
        const double x0 = x[idx[s]];
        x[idx[s]] = x0 + h;
        const double lp = L(ctx);
        x[idx[s]] = x0 - h;
        const double lm = L(ctx);
        x[idx[s]] = x0;
        fd[s] = (lp - lm) / (2.0 * h);
    }
    const double atol = atol_frac * maxabs_d(fd, m) + 1e-9;
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t s = 0; s < m; s++) {
        const size_t i = idx[s];
        const double off = offset ? (double)offset[i] : 0.0;
        const double err = fabs((double)analytic[i] - off - fd[s]);
        /* the backend adds its gradient to an fp32 offset: allow that one rounding too */
        const double tol = atol + rtol * fabs(fd[s]) + 1.2e-7 * fabs(off + fd[s]);
        if (!(err <= tol)) bad++;
        const double excess = err / tol;
        if (!(excess <= worst_excess)) worst_excess = excess, worst = s;
    }
    if (m > 0)
        CHECKF(bad == 0, "%s: %zu of %zu gradient entries off; worst [%zu] got %.9g want %.9g (err/tol %.3g)", what,
               bad, m, idx[worst], (double)analytic[idx[worst]] - (offset ? (double)offset[idx[worst]] : 0.0),
               fd[worst], worst_excess);
    if (verbose) printf("  %-60s worst err/tol %.3g (%zu FD points)\n", what, worst_excess, m);
    free(idx);
    free(fd);
}

static double dot_gd(const double *g, const double *f, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += g[i] * f[i];
    return s;
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        mt_status st_ = (call);                                                                    \
        CHECKF(st_ == MT_OK, "%s -> %s: %s", #call, mt_status_name(st_), mt_last_error());         \
    } while (0)

/* ---------------- the backend's vectorisable expf ---------------- */

static void test_expf(void) {
    /* documented: ~2 ulp over [-87.3, 88]; measured in relative terms (1 ulp <= 1.2e-7) */
    double worst = 0.0, worst_x = 0.0;
    for (int i = 0; i <= 2000000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        const double want = exp((double)x);
        const double rel = fabs((double)mt_cpu_expf(x) - want) / want;
        if (rel > worst) worst = rel, worst_x = x;
    }
    CHECKF(worst <= 3.0 * 1.1920929e-7, "mt_cpu_expf: worst relative error %.3g at x = %.9g", worst, worst_x);
    if (verbose) printf("  %-60s worst rel err %.3g (%.2f ulp)\n", "mt_cpu_expf on [-87, 88]", worst, worst / 1.1920929e-7);
    CHECK(mt_cpu_expf(0.0f) == 1.0f);
    CHECK(mt_cpu_expf(-1000.0f) >= 0.0f && mt_cpu_expf(-1000.0f) < 1.2e-38f); /* clamped, finite */
    CHECK(isfinite(mt_cpu_expf(1000.0f)) && mt_cpu_expf(1000.0f) > 1e38f);
    CHECK(isnan(mt_cpu_expf(NAN)));
}

/* ---------------- matmul ---------------- */

static void ref_matmul(double *out, const double *inp, const double *w, const double *b, int M, int N, int K) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = b ? b[n] : 0.0;
            for (int k = 0; k < K; k++) s += inp[(size_t)m * K + k] * w[(size_t)n * K + k];
            out[(size_t)m * N + n] = s;
        }
}

typedef struct {
    double *inp, *w, *b, *g, *out;
    int M, N, K;
} mm_ctx;

static double mm_loss(void *p) {
    mm_ctx *c = p;
    ref_matmul(c->out, c->inp, c->w, c->b, c->M, c->N, c->K);
    return dot_gd(c->g, c->out, (size_t)c->M * c->N);
}

static void test_matmul(int M, int N, int K, int with_bias) {
    char what[128];
    const size_t nI = (size_t)M * K, nW = (size_t)N * K, nO = (size_t)M * N;
    float *inp = frand(nI, -1, 1), *w = frand(nW, -1, 1), *b = with_bias ? frand((size_t)N, -1, 1) : NULL;
    float *out = fconst(nO, 777.0f);
    mt_matmul_fwd_args fa = {out, inp, w, b, M, N, K};
    OK(MT_BE_CALL(&be, matmul_fwd, &fa));
    mm_ctx c = {dcopy(inp, nI), dcopy(w, nW), b ? dcopy(b, (size_t)N) : NULL, NULL, dzeros(nO), M, N, K};
    double *want = dzeros(nO);
    ref_matmul(want, c.inp, c.w, c.b, M, N, K);
    snprintf(what, sizeof what, "matmul_fwd M=%d N=%d K=%d bias=%d", M, N, K, with_bias);
    check_close(what, out, want, nO, 1e-5, 1e-5);

    /* backward: dweight/dbias pre-filled (must accumulate), dinp pre-filled (must be
     * overwritten), then a second call with accumulate_dinp on top of a random dinp */
    float *g = frand(nO, -1, 1);
    c.g = dcopy(g, nO);
    float *dw0 = frand(nW, -1, 1), *db0 = frand((size_t)N, -1, 1);
    float *dw = fcopy(dw0, nW), *db = with_bias ? fcopy(db0, (size_t)N) : NULL;
    float *dinp = fconst(nI, 777.0f);
    mt_matmul_bwd_args ba = {dinp, dw, db, g, inp, w, M, N, K, 0};
    OK(MT_BE_CALL(&be, matmul_bwd, &ba));
    const size_t S = 400;
    snprintf(what, sizeof what, "matmul_bwd dinp(=) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.inp, nI, dinp, NULL, S, 1e-4, 1e-5);
    snprintf(what, sizeof what, "matmul_bwd dweight(+=) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.w, nW, dw, dw0, S, 1e-4, 1e-5);
    if (with_bias) {
        snprintf(what, sizeof what, "matmul_bwd dbias(+=) M=%d N=%d K=%d", M, N, K);
        fd_check(what, mm_loss, &c, c.b, (size_t)N, db, db0, S, 1e-4, 1e-5);
    }
    float *dinp0 = frand(nI, -1, 1), *dinp2 = fcopy(dinp0, nI);
    mt_matmul_bwd_args bb = {dinp2, NULL, NULL, g, inp, w, M, N, K, 1};
    OK(MT_BE_CALL(&be, matmul_bwd, &bb));
    snprintf(what, sizeof what, "matmul_bwd dinp(+= accumulate_dinp) M=%d N=%d K=%d", M, N, K);
    fd_check(what, mm_loss, &c, c.inp, nI, dinp2, dinp0, S, 1e-4, 1e-5);

    free(inp), free(w), free(b), free(out), free(g), free(dw0), free(db0), free(dw), free(db), free(dinp);
    free(dinp0), free(dinp2), free(want);
    free(c.inp), free(c.w), free(c.b), free(c.g), free(c.out);
}

/* ---------------- layernorm / rmsnorm ---------------- */

static void ref_norm(double *out, double *mean, double *rstd, const double *inp, const double *w, const double *b,
                     int N, int C, double eps, int centered) {
    for (int r = 0; r < N; r++) {
        const double *x = inp + (size_t)r * C;
        double mu = 0.0, var = 0.0;
        if (centered) {
            for (int j = 0; j < C; j++) mu += x[j];
            mu /= C;
        }
        for (int j = 0; j < C; j++) var += (x[j] - mu) * (x[j] - mu);
        var /= C;
        const double s = 1.0 / sqrt(var + eps);
        for (int j = 0; j < C; j++) out[(size_t)r * C + j] = (x[j] - mu) * s * w[j] + (b ? b[j] : 0.0);
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = s;
    }
}

typedef struct {
    double *inp, *w, *b, *g, *out;
    int N, C, centered;
    double eps;
} norm_ctx;

static double norm_loss(void *p) {
    norm_ctx *c = p;
    ref_norm(c->out, NULL, NULL, c->inp, c->w, c->b, c->N, c->C, c->eps, c->centered);
    return dot_gd(c->g, c->out, (size_t)c->N * c->C);
}

static void test_norm(int N, int C, int centered) {
    char what[128];
    const char *name = centered ? "layernorm" : "rmsnorm";
    const size_t n = (size_t)N * C;
    const float eps = 1e-5f;
    /* an offset of 0.5 so the mean is not ~0 and centring matters */
    float *inp = frand(n, -0.5f, 1.5f), *w = frand((size_t)C, 0.5f, 1.5f);
    float *b = centered ? frand((size_t)C, -1, 1) : NULL;
    float *out = fconst(n, 777.0f), *mean = fconst((size_t)N, 777.0f), *rstd = fconst((size_t)N, 777.0f);
    mt_norm_fwd_args fa = {out, centered ? mean : NULL, rstd, inp, w, b, N, C, eps};
    if (centered)
        OK(MT_BE_CALL(&be, layernorm_fwd, &fa));
    else
        OK(MT_BE_CALL(&be, rmsnorm_fwd, &fa));
    norm_ctx c = {dcopy(inp, n), dcopy(w, (size_t)C), b ? dcopy(b, (size_t)C) : NULL, NULL, dzeros(n), N, C,
                  centered, (double)eps};
    double *want = dzeros(n), *wmean = dzeros((size_t)N), *wrstd = dzeros((size_t)N);
    ref_norm(want, wmean, wrstd, c.inp, c.w, c.b, N, C, c.eps, centered);
    /* C <= 300 terms per row statistic, accumulated in double by the backend: rel 1e-5 is
     * loose; the outputs are O(1) products of three fp32 roundings */
    snprintf(what, sizeof what, "%s_fwd out N=%d C=%d", name, N, C);
    check_close(what, out, want, n, 1e-5, 1e-6);
    snprintf(what, sizeof what, "%s_fwd rstd N=%d C=%d", name, N, C);
    check_close(what, rstd, wrstd, (size_t)N, 1e-6, 0);
    if (centered) {
        snprintf(what, sizeof what, "%s_fwd mean N=%d C=%d", name, N, C);
        check_close(what, mean, wmean, (size_t)N, 1e-6, 1e-6);
    }

    float *g = frand(n, -1, 1);
    c.g = dcopy(g, n);
    float *dinp0 = frand(n, -1, 1), *dw0 = frand((size_t)C, -1, 1), *db0 = frand((size_t)C, -1, 1);
    float *dinp = fcopy(dinp0, n), *dw = fcopy(dw0, (size_t)C), *db = fcopy(db0, (size_t)C);
    mt_norm_bwd_args ba = {dinp, dw, centered ? db : NULL, g, inp, w, centered ? mean : NULL, rstd, N, C};
    if (centered)
        OK(MT_BE_CALL(&be, layernorm_bwd, &ba));
    else
        OK(MT_BE_CALL(&be, rmsnorm_bwd, &ba));
    snprintf(what, sizeof what, "%s_bwd dinp(+=) N=%d C=%d", name, N, C);
    fd_check(what, norm_loss, &c, c.inp, n, dinp, dinp0, 400, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s_bwd dweight(+=) N=%d C=%d", name, N, C);
    fd_check(what, norm_loss, &c, c.w, (size_t)C, dw, dw0, 400, 1e-4, 1e-5);
    if (centered) {
        snprintf(what, sizeof what, "%s_bwd dbias(+=) N=%d C=%d", name, N, C);
        fd_check(what, norm_loss, &c, c.b, (size_t)C, db, db0, 400, 1e-4, 1e-5);
    } else {
        CHECK(memcmp(db, db0, (size_t)C * sizeof *db) == 0); /* rmsnorm: no bias, untouched */
    }
    free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(g), free(dinp0), free(dw0), free(db0);
    free(dinp), free(dw), free(db), free(want), free(wmean), free(wrstd);
    free(c.inp), free(c.w), free(c.b), free(c.g), free(c.out);
}

/* ---------------- gelu / swiglu ---------------- */

static double ref_gelu(double x) {
    const double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double ref_silu(double x) { return x / (1.0 + exp(-x)); }

typedef struct {
    double *x, *g, *out;
    size_t n;
    int F; /* swiglu: rows of 2F inputs; 0 = gelu */
} ew_ctx;

static double ew_loss(void *p) {
    ew_ctx *c = p;
    if (c->F == 0) {
        for (size_t i = 0; i < c->n; i++) c->out[i] = ref_gelu(c->x[i]);
        return dot_gd(c->g, c->out, c->n);
    }
    const size_t N = c->n / (size_t)c->F;
    for (size_t r = 0; r < N; r++)
        for (int j = 0; j < c->F; j++)
            c->out[r * c->F + j] = ref_silu(c->x[r * 2 * c->F + j]) * c->x[r * 2 * c->F + c->F + j];
    return dot_gd(c->g, c->out, c->n);
}

static void test_gelu(void) {
    const size_t n = 1003;
    float *x = frand(n, -6, 6);
    x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f, x[3] = 1e-4f, x[4] = -1e-4f, x[5] = -3.0f;
    float *out = fconst(n, 777.0f);
    mt_gelu_fwd_args fa = {out, x, n};
    OK(MT_BE_CALL(&be, gelu_fwd, &fa));
    ew_ctx c = {dcopy(x, n), NULL, dzeros(n), n, 0};
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++) want[i] = ref_gelu(c.x[i]);
    /* elementwise: one polynomial expf (~2 ulp) and ~8 roundings; atol for the tiny negative
     * tail (x=-12: gelu ~ -1e-30 level) */
    check_close("gelu_fwd", out, want, n, 2e-6, 1e-7);
    float *g = frand(n, -1, 1), *dinp = fconst(n, 777.0f);
    c.g = dcopy(g, n);
    mt_gelu_bwd_args ba = {dinp, g, x, n};
    OK(MT_BE_CALL(&be, gelu_bwd, &ba));
    fd_check("gelu_bwd dinp(=)", ew_loss, &c, c.x, n, dinp, NULL, n, 1e-4, 1e-6);
    free(x), free(out), free(g), free(dinp), free(want), free(c.x), free(c.g), free(c.out);
}

static void test_swiglu(int N, int F) {
    char what[96];
    const size_t nI = (size_t)N * 2 * F, nO = (size_t)N * F;
    float *x = frand(nI, -4, 4), *out = fconst(nO, 777.0f);
    mt_swiglu_fwd_args fa = {out, x, N, F};
    OK(MT_BE_CALL(&be, swiglu_fwd, &fa));
    ew_ctx c = {dcopy(x, nI), NULL, dzeros(nO), nO, F};
    double *want = dzeros(nO);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < F; j++)
            want[(size_t)r * F + j] = ref_silu(c.x[(size_t)r * 2 * F + j]) * c.x[(size_t)r * 2 * F + F + j];
    snprintf(what, sizeof what, "swiglu_fwd N=%d F=%d", N, F);
    check_close(what, out, want, nO, 2e-6, 1e-7);
    float *g = frand(nO, -1, 1), *dinp = fconst(nI, 777.0f);
    c.g = dcopy(g, nO);
    mt_swiglu_bwd_args ba = {dinp, g, x, N, F};
    OK(MT_BE_CALL(&be, swiglu_bwd, &ba));
    snprintf(what, sizeof what, "swiglu_bwd dinp(=) N=%d F=%d", N, F);
    fd_check(what, ew_loss, &c, c.x, nI, dinp, NULL, 600, 1e-4, 1e-6);
    free(x), free(out), free(g), free(dinp), free(want), free(c.x), free(c.g), free(c.out);
}

/* ---------------- add / sum / cast ---------------- */

static void test_add_sum_cast(void) {
    const size_t n = 70001; /* > the parallel threshold, odd */
    float *a = frand(n, -1, 1), *b = frand(n, -1, 1), *out = fconst(n, 777.0f);
    mt_add_args aa = {out, a, b, n};
    OK(MT_BE_CALL(&be, add, &aa));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != a[i] + b[i]; /* one fp32 rounding: exact */
    CHECKF(bad == 0, "add: %zu entries differ from a + b", bad);

    const size_t sizes[] = {5, 100003};
    for (int si = 0; si < 2; si++)
        for (int sq = 0; sq < 2; sq++) {
            const size_t m = sizes[si];
            float *x = frand(m, -1, 1);
            double want = 1.5; /* the op accumulates into *out */
            for (size_t i = 0; i < m; i++) want += sq ? (double)x[i] * x[i] : (double)x[i];
            float acc = 1.5f;
            mt_sum_args sa = {&acc, x, m, sq};
            OK(MT_BE_CALL(&be, sum, &sa));
            /* accumulated in double by the backend, one final fp32 rounding: 1e-6 relative,
             * plus an absolute 1e-6 * n^0.5 for the signed sum that cancels */
            CHECK_NEAR(acc, want, 1e-6 * sqrt((double)m), 1e-6);
            free(x);
        }

    float *src = frand(n, -1, 1), *dst = fconst(n, 777.0f);
    mt_cast_args ca = {dst, src, n};
    OK(MT_BE_CALL(&be, cast_f32_to_act, &ca));
    CHECK(memcmp(dst, src, n * sizeof *dst) == 0);
    free(a), free(b), free(out), free(src), free(dst);
}

/* ---------------- rope ---------------- */

static void ref_rope(double *x, int B, int T, int H, int D, int stride, int pos_offset, double theta, int inverse) {
    const int half = D / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                double *v = x + ((size_t)b * T + t) * stride + (size_t)h * D;
                for (int i = 0; i < half; i++) {
                    double ang = (double)(pos_offset + t) * pow(theta, -2.0 * i / D);
                    if (inverse) ang = -ang;
                    const double c = cos(ang), s = sin(ang), a0 = v[i], a1 = v[i + half];
                    v[i] = a0 * c - a1 * s;
                    v[i + half] = a1 * c + a0 * s;
                }
            }
}

typedef struct {
    double *x, *work, *g;
    size_t n;
    int B, T, H, D, stride, pos_offset;
    double theta;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    memcpy(c->work, c->x, c->n * sizeof *c->work);
    ref_rope(c->work, c->B, c->T, c->H, c->D, c->stride, c->pos_offset, c->theta, 0);
    return dot_gd(c->g, c->work, c->n);
}

static void test_rope(int B, int T, int H, int D, int extra, int pos_offset) {
    char what[128];
    const int stride = H * D + extra;
    const size_t n = (size_t)B * T * stride;
    const float theta = 10000.0f;
    float *x0 = frand(n, -1, 1), *x = fcopy(x0, n);
    mt_rope_args ra = {x, B, T, H, D, stride, pos_offset, theta, 0};
    OK(MT_BE_CALL(&be, rope, &ra));
    double *want = dcopy(x0, n);
    ref_rope(want, B, T, H, D, stride, pos_offset, theta, 0);
    /* a rotation: two products and a sum per entry, angle computed in double: ~2 ulp */
    snprintf(what, sizeof what, "rope fwd B=%d T=%d H=%d D=%d pos_offset=%d", B, T, H, D, pos_offset);
    check_close(what, x, want, n, 1e-6, 1e-6);
    size_t untouched_bad = 0; /* columns past H*D must be left alone */
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = H * D; j < stride; j++) untouched_bad += x[r * stride + j] != x0[r * stride + j];
    CHECKF(untouched_bad == 0, "rope touched %zu entries beyond n_heads * D", untouched_bad);
    /* inverse after forward = identity, up to fp32 rotation rounding */
    ra.inverse = 1;
    OK(MT_BE_CALL(&be, rope, &ra));
    double *orig = dcopy(x0, n);
    snprintf(what, sizeof what, "rope fwd then inverse = identity B=%d T=%d H=%d D=%d", B, T, H, D);
    check_close(what, x, orig, n, 1e-6, 1e-6);
    /* backward (inverse applied to g) = d/dx sum(g * rope(x)) */
    float *g = frand(n, -1, 1), *dx = fcopy(g, n);
    mt_rope_args rb = {dx, B, T, H, D, stride, pos_offset, theta, 1};
    OK(MT_BE_CALL(&be, rope, &rb));
    rope_ctx c = {dcopy(x0, n), dzeros(n), dcopy(g, n), n, B, T, H, D, stride, pos_offset, (double)theta};
    /* the extra columns of g pass through unchanged; rope_loss has identity there too */
    snprintf(what, sizeof what, "rope bwd (inverse) B=%d T=%d H=%d D=%d", B, T, H, D);
    fd_check(what, rope_loss, &c, c.x, n, dx, NULL, 400, 1e-4, 1e-5);
    free(x0), free(x), free(want), free(orig), free(g), free(dx), free(c.x), free(c.work), free(c.g);
}

/* ---------------- attention ---------------- */

/* Naive causal softmax attention in double: the full score row per query, no tiling. lse (B, H, T)
 * gets log sum_j exp(s_j) of the scaled scores (the flash kernel's saved statistic). */
static void ref_attention(double *out, double *lse, const double *qkv, int B, int T, int H, int KV, int D) {
    const int S3 = (H + 2 * KV) * D, group = H / KV;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * sizeof *p);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                double mx = -1e300;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + kvh) * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    p[j] = s * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                if (lse) lse[((size_t)b * H + h) * T + i] = mx + log(sum);
                double *o = out + ((size_t)b * T + i) * H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0;
                for (int j = 0; j <= i; j++) {
                    p[j] /= sum;
                    const double *v = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + KV + kvh) * D;
                    for (int d = 0; d < D; d++) o[d] += p[j] * v[d];
                }
            }
        }
    free(p);
}

/* Naive backward in double (the old kernel's algorithm: a full probability row per query):
 * dp_j = dO . v_j, ds_j = p_j (dp_j - sum_l p_l dp_l) scale, dq = sum ds_j k_j,
 * dk_j += ds_j q, dv_j += p_j dO. dqkv (B, T, (H + 2KV) D) is overwritten. */
static void ref_attention_bwd(double *dqkv, const double *qkv, const double *dout, int B, int T, int H, int KV,
                              int D) {
    const int S3 = (H + 2 * KV) * D, group = H / KV;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    memset(dqkv, 0, (size_t)B * T * S3 * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                const double *dO = dout + ((size_t)b * T + i) * H * D + (size_t)h * D;
                double mx = -1e300, sum = 0.0, dot = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * S3 + (size_t)(H + kvh) * D;
                    const double *v = k + (size_t)KV * D;
                    double s = 0.0, e = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d], e += dO[d] * v[d];
                    p[j] = s * scale;
                    dp[j] = e;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j <= i; j++) p[j] /= sum, dot += p[j] * dp[j];
                double *dq = dqkv + ((size_t)b * T + i) * S3 + (size_t)h * D;
                for (int j = 0; j <= i; j++) {
                    const double ds = p[j] * (dp[j] - dot) * scale;
                    const size_t kr = ((size_t)b * T + j) * S3;
                    const double *k = qkv + kr + (size_t)(H + kvh) * D;
                    double *dk = dqkv + kr + (size_t)(H + kvh) * D, *dv = dk + (size_t)KV * D;
                    for (int d = 0; d < D; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += p[j] * dO[d];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

typedef struct {
    double *qkv, *g, *out;
    int B, T, H, KV, D;
} att_ctx;

static double att_loss(void *p) {
    att_ctx *c = p;
    ref_attention(c->out, NULL, c->qkv, c->B, c->T, c->H, c->KV, c->D);
    return dot_gd(c->g, c->out, (size_t)c->B * c->T * c->H * c->D);
}

/* worst |got - want| / max|want| over n entries (printed with MT_TEST_VERBOSE=1) */
static double worst_rel(const float *got, const double *want, size_t n) {
    double e = 0.0, mx = 1e-300;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        e = d > e ? d : e;
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    }
    return e / mx;
}

/* Flash attention forward against the naive double reference (out and lse), backward against
 * the naive double backward (every entry) and central finite differences of the double forward
 * (fd_samples entries). Tiles: 64 query x 128 key rows, so T = 1, 7, 64, 65, 130, 300 cover a
 * single partial tile, an exact query tile, a one-row tail, query rows that see none of a key
 * tile, and several partial diagonals. */
static void test_attention(int B, int T, int H, int KV, int D, size_t fd_samples) {
    char what[128];
    const size_t nQKV = (size_t)B * T * (H + 2 * KV) * D, nO = (size_t)B * T * H * D, nL = (size_t)B * H * T;
    /* scale 2 so the softmax is far from uniform */
    float *qkv = frand(nQKV, -2, 2), *out = fconst(nO, 777.0f), *lse = fconst(nL, 777.0f);
    mt_attention_fwd_args fa = {out, lse, qkv, B, T, H, KV, D};
    OK(MT_BE_CALL(&be, attention_fwd, &fa));
    att_ctx c = {dcopy(qkv, nQKV), NULL, dzeros(nO), B, T, H, KV, D};
    double *want = dzeros(nO), *wlse = dzeros(nL);
    ref_attention(want, wlse, c.qkv, B, T, H, KV, D);
    /* scores: D-term dot products; exp (~2 ulp), a T-term sum and the online rescaling
     * (one extra rounding per key tile); out: T-term sum */
    snprintf(what, sizeof what, "attention_fwd out B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, out, want, nO, 1e-5, 1e-5);
    snprintf(what, sizeof what, "attention_fwd lse B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, lse, wlse, nL, 1e-5, 1e-6);
    const double e_out = worst_rel(out, want, nO), e_lse = worst_rel(lse, wlse, nL);

    float *g = frand(nO, -1, 1), *dqkv = fconst(nQKV, 777.0f), *delta = fconst(nL, 777.0f);
    c.g = dcopy(g, nO);
    mt_attention_bwd_args ba = {dqkv, delta, g, qkv, out, lse, B, T, H, KV, D};
    OK(MT_BE_CALL(&be, attention_bwd, &ba));
    double *wd = dzeros(nQKV);
    ref_attention_bwd(wd, c.qkv, c.g, B, T, H, KV, D);
    snprintf(what, sizeof what, "attention_bwd dqkv vs naive B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    check_close(what, dqkv, wd, nQKV, 1e-4, 1e-5);
    snprintf(what, sizeof what, "attention_bwd dqkv(=) vs FD B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    fd_check(what, att_loss, &c, c.qkv, nQKV, dqkv, NULL, fd_samples, 1e-4, 1e-5);
    if (verbose)
        printf("  attention B=%d T=%d H=%d KV=%d D=%d: worst |diff|/max vs double: out %.2e lse %.2e dqkv %.2e\n", B,
               T, H, KV, D, e_out, e_lse, worst_rel(dqkv, wd, nQKV));
    free(qkv), free(out), free(lse), free(g), free(dqkv), free(delta), free(want), free(wlse), free(wd);
    free(c.qkv), free(c.g), free(c.out);
}

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
    mt_norm_fwd_args n1 = {lo1, mean, rstd, o1, bias, bias, M, N, 1e-5f}, n2 = {lo2, mean, rstd, o1, bias, bias, M, N, 1e-5f};
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
    mt_attention_fwd_args a1 = {ao1, p1, qkv, B, T, H, KV, D}, a2 = {ao2, p2, qkv, B, T, H, KV, D};
    OK(MT_BE_CALL(&be, attention_fwd, &a1));
    OK(MT_BE_CALL(&be, attention_fwd, &a2));
    CHECK(memcmp(ao1, ao2, nO * sizeof *ao1) == 0 && memcmp(p1, p2, nP * sizeof *p1) == 0);
    mt_attention_bwd_args ab1 = {dq1, dp, g, qkv, ao1, p1, B, T, H, KV, D},
                          ab2 = {dq2, dp, g, qkv, ao1, p1, B, T, H, KV, D};
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

    free(inp), free(w), free(bias), free(o1), free(o2), free(dw1), free(dw2), free(db1), free(db2), free(di1), free(di2);
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
    mt_rope_args ra = {x, 1, 2, 1, 7, 8, 0, 10000.0f, 0}; /* odd D */
    CHECK(MT_BE_CALL(&be, rope, &ra) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "D=7");
    float lse[16];
    mt_attention_fwd_args aa = {x, lse, x, 1, 2, 3, 2, 2}; /* H % KV != 0 */
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

/* Every op test, on the backend `be` currently holds. */
static void test_all_ops(void) {
    test_matmul(7, 5, 3, 1);
    test_matmul(7, 5, 3, 0);
    test_matmul(1, 1, 1, 1);
    test_matmul(33, 20, 17, 1);
    test_matmul(64, 48, 256, 1); /* large enough to be sliced over the threads */
    test_matmul(130, 70, 40, 0);

    test_norm(7, 5, 1);
    test_norm(16, 77, 1);
    test_norm(3, 300, 1);
    test_norm(7, 5, 0);
    test_norm(16, 77, 0);
    test_norm(3, 300, 0);

    test_gelu();
    test_swiglu(7, 5);
    test_swiglu(9, 33);
    test_add_sum_cast();

    test_rope(2, 5, 3, 8, 4, 3);
    test_rope(1, 3, 2, 64, 0, 5000); /* long-context positions: angles ~5e3 rad */
    test_rope(3, 4, 1, 2, 2, 0);

    test_attention(2, 7, 4, 2, 8, 600);   /* GQA, 2 query heads per kv head */
    test_attention(2, 7, 4, 1, 8, 600);   /* multi-query */
    test_attention(1, 9, 3, 3, 5, 600);   /* MHA, odd D */
    test_attention(1, 1, 2, 1, 4, 600);   /* T = 1 */
    test_attention(1, 64, 2, 2, 8, 200);  /* exactly one 64-row query tile */
    test_attention(1, 65, 4, 2, 8, 200);  /* one-row tail tile, GQA */
    test_attention(2, 130, 4, 2, 8, 150); /* three tiles, partial last one, GQA */
    test_attention(1, 300, 2, 1, 16, 60); /* five tiles, multi-query */

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
    verbose = getenv("MT_TEST_VERBOSE") && atoi(getenv("MT_TEST_VERBOSE")) > 0;
    /* all cores, then 3 threads: uneven GEMM slices and work splits whatever the machine */
    const int thread_counts[2] = {0, 3};
    for (int pass = 0; pass < 2; pass++) {
        mt_status st = mt_backend_cpu_create(&be, thread_counts[pass]);
        if (st != MT_OK) {
            fprintf(stderr, "cannot create the cpu backend: %s\n", mt_last_error());
            return 1;
        }
        printf("backend: %s\n", be.device_name);
        if (pass == 0) {
            test_backend_basics();
            test_expf();
        }
        test_all_ops();
        mt_backend_destroy(&be);
    }
    TEST_MAIN_END();
}
