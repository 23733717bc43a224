/* cpu_op_check.h — what test_cpu_ops.c and test_cpu_ops_train.c share: the backend under test, a
 * seeded generator of fp32-exact inputs, and the two comparisons every op check is made of.
 *
 * check_close (forward): the backend's fp32 output vs a naive double-precision reference written
 * in the test, evaluated on the very same (fp32-representable) inputs, so the only error measured
 * is the backend's own rounding.
 * fd_check (backward): the backend's fp32 gradients vs central finite differences, in double, of
 * the DOUBLE reference of L = sum(g * f(x)) with a random g; with h = 1e-6 the FD error is
 * ~h^2 |f'''| + 1e-16 |L| / h ~ 1e-9, so any mismatch above that is the backend's.
 * Both pass when |got - want| <= rtol |want| + atol_frac * max|want| for every entry; the tests
 * choose rtol / atol_frac and say why next to each call.
 * Each test runs its op checks twice (cpu_op_check_open): on a backend with all cores and on one
 * with 3 threads (uneven GEMM slices and work splits on any machine). MT_TEST_VERBOSE=1 prints
 * each comparison's worst err/tol. Header-only: every function is static inline, so a test that
 * uses only some of them compiles without unused-function warnings. */
#ifndef MT_TEST_CPU_OP_CHECK_H
#define MT_TEST_CPU_OP_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "test/test.h"

static mt_backend be;
static int verbose; /* MT_TEST_VERBOSE=1: print each comparison's worst err / tol */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static inline uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* uniform in [lo, hi), with 24 random bits so the value is exact in fp32 for |lo|,|hi| <= 1 */
static inline float rng_uniform(float lo, float hi) {
    float u = (float)(rng_next() >> 40) / 16777216.0f;
    return lo + (hi - lo) * u;
}

static inline float *frand(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = rng_uniform(lo, hi);
    return p;
}

static inline float *fconst(size_t n, float v) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static inline float *fcopy(const float *src, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static inline double *dcopy(const float *src, size_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (double)src[i];
    return p;
}

static inline double *dzeros(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static inline double maxabs_d(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Forward check: got (fp32, backend) vs want (double reference). */
static inline void check_close(const char *what, const float *got, const double *want, size_t n, double rtol,
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
static inline void fd_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const float *analytic,
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

static inline double dot_gd(const double *g, const double *f, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += g[i] * f[i];
    return s;
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        mt_status st_ = (call);                                                                    \
        CHECKF(st_ == MT_OK, "%s -> %s: %s", #call, mt_status_name(st_), mt_last_error());         \
    } while (0)

/* Pass 0: `be` on all cores, pass 1: on 3 threads. Prints the backend; returns 0 when it could
 * not be created (the message is printed). */
#define CPU_OP_CHECK_PASSES 2
static inline int cpu_op_check_open(int pass) {
    verbose = getenv("MT_TEST_VERBOSE") && atoi(getenv("MT_TEST_VERBOSE")) > 0;
    const int thread_counts[CPU_OP_CHECK_PASSES] = {0, 3};
    mt_status st = mt_backend_cpu_create(&be, thread_counts[pass]);
    if (st != MT_OK) {
        fprintf(stderr, "cannot create the cpu backend: %s\n", mt_last_error());
        return 0;
    }
    printf("backend: %s\n", be.device_name);
    return 1;
}

/* The body of a test's main: `once` (a function, or NULL) on the first pass, `all` on every
 * pass, the backend destroyed after each; returns the exit status (TEST_MAIN_END, naming the
 * test's file). */
#define CPU_OP_CHECK_MAIN(once, all)                                      \
    do {                                                                  \
        void (*once_)(void) = (once);                                     \
        for (int pass = 0; pass < CPU_OP_CHECK_PASSES; pass++) {          \
            if (!cpu_op_check_open(pass)) return 1;                       \
            if (pass == 0 && once_) once_();                              \
            all();                                                        \
            mt_backend_destroy(&be);                                      \
        }                                                                 \
        TEST_MAIN_END();                                                  \
    } while (0)

#endif
