/* test_generate.c — the samplers of train/generate.h, as pure functions: argmax (first on ties,
 * NaN never wins); the distribution of mt_sample_probs against a softmax computed here in double
 * (temperature, top-k, top-p each on its own and together, the kept set the smallest one of mass
 * >= top_p); and mt_sample_token: a pure function of (seed, step), only kept tokens drawn, the
 * drawn frequencies those of the distribution, another seed another sequence. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/test.h"
#include "train/generate.h"

enum { V = 50 };

/* softmax(l / t) over [0, V) in double: the reference the sampler's float distribution is held to */
static void softmax_ref(const float *l, int n, double t, double *p) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++) s += p[i] = exp((l[i] - mx) / t);
    for (int i = 0; i < n; i++) p[i] /= s;
}

/* logits with distinct values in a shuffled order: token i has rank perm[i] */
static void make_logits(float *l) {
    for (int i = 0; i < V; i++) l[i] = (float)((i * 17) % V) * 0.11f - 2.0f;
}

/* the test logits and their softmax at temperature 1 (the reference of the filters) */
static void make_logits_and_probs(float *l, double *ref) {
    make_logits(l);
    softmax_ref(l, V, 1.0, ref);
}

static int count_kept(const float *p) {
    int n = 0;
    for (int i = 0; i < V; i++) n += p[i] > 0.0f;
    return n;
}

static double sum(const float *p) {
    double s = 0;
    for (int i = 0; i < V; i++) s += p[i];
    return s;
}

static void check_argmax(void) {
    const float a[] = {1, 3, 2, 3};
    CHECK(mt_sample_argmax(a, 4) == 1); /* first of the ties */
    const float b[] = {NAN, -5, NAN, -1};
    CHECK(mt_sample_argmax(b, 4) == 3); /* NaN never wins, even in first place */
    const float c[] = {-INFINITY, -INFINITY, -2};
    CHECK(mt_sample_argmax(c, 3) == 2);
}

static void check_greedy(void) {
    float l[V], p[V];
    int order[V];
    make_logits(l);
    const int best = mt_sample_argmax(l, V);
    mt_sample_cfg c = {.temperature = 0.0f, .top_k = 5, .top_p = 0.5f, .seed = 7};
    CHECK(mt_sample_probs(l, V, &c, p, order) == 1);
    CHECK(order[0] == best && p[best] == 1.0f && count_kept(p) == 1);
    for (uint64_t s = 0; s < 20; s++) CHECK(mt_sample_token(l, V, &c, s, p, order) == best);
}

/* temperature alone: the full softmax of logits / t (float against double: 1e-6 relative, a
 * few float roundings of values in (0, 1]); a higher temperature is flatter (entropy grows) */
static void check_temperature(void) {
    float l[V], p[V];
    double ref[V];
    int order[V];
    make_logits(l);
    double prev_entropy = -1;
    const float temps[] = {0.25f, 0.7f, 1.0f, 2.5f};
    for (int k = 0; k < 4; k++) {
        mt_sample_cfg c = {.temperature = temps[k], .top_k = 0, .top_p = 1.0f, .seed = 1};
        CHECK(mt_sample_probs(l, V, &c, p, order) == V);
        softmax_ref(l, V, temps[k], ref);
        double worst = 0, h = 0;
        for (int i = 0; i < V; i++) {
            const double d = fabs(p[i] - ref[i]) / ref[i];
            worst = d > worst ? d : worst;
            h -= ref[i] * log(ref[i]);
        }
        CHECKF(worst < 1e-6, "t=%g: worst relative difference %.3g", temps[k], worst);
        CHECK(h > prev_entropy);
        prev_entropy = h;
        for (int i = 1; i < V; i++) CHECK(p[order[i - 1]] >= p[order[i]]); /* order: most likely first */
    }
}

/* top-k: exactly the k most likely tokens keep their softmax ratios, renormalised */
static void check_top_k(void) {
    float l[V], p[V];
    double ref[V];
    int order[V];
    make_logits_and_probs(l, ref);
    const int ks[] = {1, 3, 10, V, V + 7};
    for (int j = 0; j < 5; j++) {
        const int k = ks[j], want = k < V ? k : V;
        mt_sample_cfg c = {.temperature = 1.0f, .top_k = k, .top_p = 1.0f, .seed = 1};
        CHECK(mt_sample_probs(l, V, &c, p, order) == want);
        CHECK(count_kept(p) == want);
        CHECK_NEAR(sum(p), 1.0, 1e-6, 0);
        double kept_mass = 0;
        for (int i = 0; i < V; i++) {
            int rank = 0; /* how many tokens are more likely than i */
            for (int m = 0; m < V; m++) rank += l[m] > l[i];
            CHECK((rank < want) == (p[i] > 0.0f));
            if (p[i] > 0.0f) kept_mass += ref[i];
        }
        for (int i = 0; i < V; i++)
            if (p[i] > 0.0f) CHECK_NEAR(p[i], ref[i] / kept_mass, 0, 1e-5);
    }
}

/* top-p: the smallest most-likely set of mass >= p (without its least likely member the mass is
 * < p), never empty */
static void check_top_p(void) {
    float l[V], p[V];
    double ref[V];
    int order[V];
    make_logits_and_probs(l, ref);
    const float ps[] = {1e-6f, 0.1f, 0.5f, 0.9f, 0.999f};
    for (int j = 0; j < 5; j++) {
        mt_sample_cfg c = {.temperature = 1.0f, .top_k = 0, .top_p = ps[j], .seed = 1};
        const int n = mt_sample_probs(l, V, &c, p, order);
        CHECK(n >= 1 && count_kept(p) == n);
        CHECK_NEAR(sum(p), 1.0, 1e-6, 0);
        double mass = 0, least = 1;
        for (int i = 0; i < V; i++)
            if (p[i] > 0.0f) {
                mass += ref[i];
                least = ref[i] < least ? ref[i] : least;
            }
        CHECKF(mass >= ps[j] - 1e-6, "top_p %g: kept mass %.6f", ps[j], mass);
        CHECKF(mass - least < ps[j] + 1e-6, "top_p %g: not the smallest set (%.6f without its last)", ps[j], mass - least);
    }
    CHECK(mt_sample_probs(l, V, &(mt_sample_cfg){.temperature = 1.0f, .top_p = 1e-6f}, p, order) == 1);
    CHECK(p[mt_sample_argmax(l, V)] == 1.0f);
    /* top-k then top-p: the nucleus is taken inside the k kept */
    mt_sample_cfg c = {.temperature = 1.0f, .top_k = 4, .top_p = 0.999f, .seed = 1};
    CHECK(mt_sample_probs(l, V, &c, p, order) == 4);
}

/* degenerate rows: every logit -inf or NaN falls back to argmax; one +inf wins outright */
static void check_degenerate(void) {
    float l[V], p[V];
    int order[V];
    for (int i = 0; i < V; i++) l[i] = -INFINITY;
    l[9] = NAN;
    mt_sample_cfg c = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 3};
    CHECK(mt_sample_probs(l, V, &c, p, order) == 1);
    make_logits(l);
    l[13] = INFINITY;
    CHECK(mt_sample_token(l, V, &c, 0, p, order) == 13);
}

/* drawing: deterministic in (seed, step); only kept tokens; frequencies match the distribution
 * (40000 draws: each token's count within 5 standard deviations of the binomial mean, a bound a
 * correct sampler misses with probability < 1e-5 over all tokens); another seed differs */
static void check_draws(void) {
    float l[V], p[V], q[V];
    int order[V];
    make_logits(l);
    mt_sample_cfg c = {.temperature = 0.9f, .top_k = 12, .top_p = 0.95f, .seed = 42};
    const int n_keep = mt_sample_probs(l, V, &c, q, order);
    CHECK(n_keep > 2);
    enum { N = 40000 };
    static int count[V];
    memset(count, 0, sizeof count);
    int same = 1, differ = 0;
    for (uint64_t s = 0; s < N; s++) {
        const int t = mt_sample_token(l, V, &c, s, p, order);
        CHECK(t >= 0 && t < V);
        if (t < 0 || t >= V) continue;
        count[t]++;
        if (s < 200) {
            same &= mt_sample_token(l, V, &c, s, p, order) == t;
            mt_sample_cfg o = c;
            o.seed = 43;
            differ += mt_sample_token(l, V, &o, s, p, order) != t;
        }
    }
    CHECK(same);
    CHECKF(differ > 20, "seed 43 differs from seed 42 in only %d of 200 draws", differ);
    for (int i = 0; i < V; i++) {
        if (q[i] == 0.0f) {
            CHECKF(count[i] == 0, "token %d drawn %d times outside the kept set", i, count[i]);
            continue;
        }
        const double mean = N * (double)q[i], sd = sqrt(N * (double)q[i] * (1 - q[i]));
        CHECKF(fabs(count[i] - mean) <= 5 * sd + 1, "token %d: %d draws, expected %.1f +- %.1f", i, count[i], mean, sd);
    }
}

int main(void) {
    check_argmax();
    check_greedy();
    check_temperature();
    check_top_k();
    check_top_p();
    check_degenerate();
    check_draws();
    TEST_MAIN_END();
}
