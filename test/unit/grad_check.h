/* grad_check.h — the finite-difference gradient check of the whole-model tests
 * (test_model_grad.c, test_moe.c): a tiny model (tiny_model.h) on one micro-batch of 3 x 6
 * tokens, its parameters p0 and their gradient g from one backward at dloss = 1 / n_tok, and
 * grad_check_direction: the central difference of the loss along a random unit direction
 * against g . d. The loss is the test's own (the MoE test adds its auxiliary losses). */
#ifndef MT_TEST_GRAD_CHECK_H
#define MT_TEST_GRAD_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "test/unit/tiny_model.h"

#define GRAD_CHECK_B 3
#define GRAD_CHECK_T 6

/* the loss of one micro-batch (its backward too when `backward`), per token */
typedef double (*grad_check_loss)(mt_model *m, const int32_t *tokens, float dloss, int backward, int n_tok);

typedef struct {
    mt_backend be;
    mt_model m;
    int32_t tokens[GRAD_CHECK_B * (GRAD_CHECK_T + 1)];
    int n_tok;
    float dloss;
    grad_check_loss loss;
    size_t n;              /* parameter elements */
    float *p0, *g;         /* parameters and their gradient at the base point */
    float *p, *d;          /* scratch: perturbed parameters, direction */
} grad_check;

/* The model of r (batch validated, opened: both checked) and its tokens (ids < 37, the tiny
 * vocabulary); its status. */
static inline mt_status grad_check_open(grad_check *c, mt_recipe *r, grad_check_loss loss) {
    memset(c, 0, sizeof *c);
    tiny_batch_validate(r, GRAD_CHECK_B);
    mt_status st = tiny_model_open(&c->m, &c->be, r, GRAD_CHECK_B);
    c->n_tok = GRAD_CHECK_B * GRAD_CHECK_T;
    c->dloss = 1.0f / c->n_tok;
    c->loss = loss;
    for (int i = 0; i < GRAD_CHECK_B * (GRAD_CHECK_T + 1); i++)
        c->tokens[i] = (int32_t)(mt_rng_u64(7, 1, (uint64_t)i) % 37);
    return st;
}

/* The base point over the first n parameter elements: p0, and g from one backward. */
static inline void grad_check_base(grad_check *c, size_t n) {
    c->n = n;
    c->p0 = malloc(4 * n * sizeof(float)); /* one block: p0 | g | p | d */
    c->g = c->p0 + n;
    c->p = c->g + n;
    c->d = c->p + n;
    c->be.i->copy_d2h(&c->be, c->p0, c->m.params, n * 4);
    c->loss(&c->m, c->tokens, c->dloss, 1, c->n_tok);
    c->be.i->copy_d2h(&c->be, c->g, c->m.grads, n * 4);
}

/* A random unit direction d over parameter elements [lo, hi) (zero elsewhere, seeded by
 * (seed, stream)): *fd = central difference of the loss along d with step h, *gd = g . d. The
 * parameters are back at p0 after. */
static inline void grad_check_direction(grad_check *c, size_t lo, size_t hi, uint64_t seed, uint64_t stream,
                                        double h, double *fd, double *gd) {
    double norm = 0, dot = 0;
    memset(c->d, 0, c->n * 4);
    for (size_t i = lo; i < hi; i++) {
        c->d[i] = (float)mt_rng_normal(seed, stream, i);
        norm += (double)c->d[i] * c->d[i];
    }
    norm = sqrt(norm);
    for (size_t i = lo; i < hi; i++) {
        c->d[i] = (float)(c->d[i] / norm);
        dot += (double)c->g[i] * c->d[i];
    }
    double l[2];
    for (int k = 0; k < 2; k++) {
        const float sign = k == 0 ? 1.0f : -1.0f;
        for (size_t i = 0; i < c->n; i++) c->p[i] = c->p0[i] + sign * (float)h * c->d[i];
        c->be.i->copy_h2d(&c->be, c->m.params, c->p, c->n * 4);
        l[k] = c->loss(&c->m, c->tokens, c->dloss, 0, c->n_tok);
    }
    c->be.i->copy_h2d(&c->be, c->m.params, c->p0, c->n * 4);
    *fd = (l[0] - l[1]) / (2 * h);
    *gd = dot;
}

static inline void grad_check_close(grad_check *c) {
    free(c->p0);
    mt_model_free(&c->m);
    mt_backend_destroy(&c->be);
}

#endif
