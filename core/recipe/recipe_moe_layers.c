/* recipe_moe_layers.c — which transformer layers are MoE layers (Megatron's --moe-layer-freq):
 * model.moe.layer_pattern when set (one 0 / 1 per layer, 1 = MoE, written as a plain string
 * "0111" or as Megatron's Python list expression "([0]+[1]*26)"), else model.moe.layer_freq N:
 * layer i (0-based) is a MoE layer iff i % N == 0 (Megatron's transformer_config / gpt_layer_specs).
 * The one rule of the layer kinds: the validator, the layouts (core/model/model_layout.c), the
 * planner and the Megatron flag rules (recipe_megatron.c) all call these. */
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"

/* Megatron's expression (moe_freq_type: a Python list expression of the characters , digits [ ] ( ) + *,
 * evaluated by eval): a sum of terms, each a list of 0 / 1 literals or a parenthesised expression, repeated
 * by '* N' (or 'N *') any number of times: "([0]+[1]*26)", "[0]*3+[1]*58", "([1]*3+[0]*1)*3". A small
 * recursive-descent parser that writes the layers into bits as it reads them. */
typedef struct {
    const char *s, *end;
    unsigned char *bits;
    int max, n, err; /* err: -1 not of that form, -2 more than max layers */
} pattern;

static void expr(pattern *p);

static void push(pattern *p, int bit) {
    if (p->n >= p->max) p->err = -2;
    else p->bits[p->n++] = (unsigned char)bit;
}

static long number(pattern *p) {
    long v = -1;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (*p->s++ - '0');
        if (v > 1000000) return -1;
    }
    return v;
}

static void atom(pattern *p) {
    if (p->s < p->end && *p->s == '[') {
        for (p->s++;;) {
            if (p->s >= p->end || (*p->s != '0' && *p->s != '1')) {
                p->err = -1;
                return;
            }
            push(p, *p->s++ == '1');
            if (p->s < p->end && *p->s == ',') p->s++;
            else break;
        }
        if (p->s < p->end && *p->s == ']') p->s++;
        else p->err = -1;
    } else if (p->s < p->end && *p->s == '(') {
        p->s++;
        expr(p);
        if (!p->err && p->s < p->end && *p->s == ')') p->s++;
        else if (!p->err) p->err = -1;
    } else {
        p->err = -1;
    }
}

/* an atom and its repeats: the layers it wrote copied rep - 1 more times (none when rep is 0) */
static void term(pattern *p) {
    long rep = 1;
    if (p->s < p->end && *p->s >= '0' && *p->s <= '9') { /* N * [..] */
        rep = number(p);
        if (rep < 0 || p->s >= p->end || *p->s != '*') {
            p->err = -1;
            return;
        }
        p->s++;
    }
    const int start = p->n;
    atom(p);
    while (!p->err && p->s < p->end && *p->s == '*') {
        p->s++;
        const long k = number(p);
        if (k < 0 || rep * k > 1000000) p->err = -1;
        else rep *= k;
    }
    if (p->err) return;
    const int len = p->n - start;
    if (rep == 0) p->n = start;
    for (long r = 1; r < rep && !p->err; r++)
        for (int i = 0; i < len && !p->err; i++) push(p, p->bits[start + i]);
}

static void expr(pattern *p) {
    term(p);
    while (!p->err && p->s < p->end && *p->s == '+') {
        p->s++;
        term(p);
    }
}

static int parse_expr(const char *t, size_t k, unsigned char *bits, int max) {
    pattern p = {.s = t, .end = t + k, .bits = bits, .max = max};
    expr(&p);
    if (!p.err && p.s != p.end) p.err = -1;
    return p.err ? p.err : p.n;
}

int mt_recipe_moe_pattern_parse(const char *text, unsigned char *bits, int max) {
    char t[MT_MOE_PATTERN_MAX];
    size_t k = 0;
    for (const char *c = text; *c; c++) {
        if (*c == ' ' || *c == '\t') continue;
        if (k + 1 >= sizeof t) return -1;
        t[k++] = *c;
    }
    t[k] = 0;
    if (k >= 2 && (t[0] == '\'' || t[0] == '"') && t[k - 1] == t[0]) { /* the quotes a launch script's shell passed on */
        memmove(t, t + 1, k - 2);
        t[k -= 2] = 0;
    }
    if (k == 0) return -1;
    if (strspn(t, "01") == k) { /* the plain form: one character per layer */
        if ((int)k > max) return -2;
        for (size_t i = 0; i < k; i++) bits[i] = t[i] == '1';
        return (int)k;
    }
    return parse_expr(t, k, bits, max);
}

int mt_recipe_moe_layer(const mt_recipe *r, int layer) {
    const int L = r->model.layers;
    if (r->model.moe.experts <= 0 || layer < 0 || layer >= L) return 0;
    if (r->model.moe.layer_pattern[0]) {
        unsigned char bits[1024];
        const int n = mt_recipe_moe_pattern_parse(r->model.moe.layer_pattern, bits, (int)sizeof bits);
        return n == L ? bits[layer] : 1; /* a pattern the validator refuses: all MoE, as before */
    }
    const int f = r->model.moe.layer_freq > 0 ? r->model.moe.layer_freq : 1;
    return layer % f == 0;
}

int mt_recipe_moe_layers(const mt_recipe *r, int l0, int n_layers) {
    int n = 0;
    for (int l = l0; l < l0 + n_layers; l++) n += mt_recipe_moe_layer(r, l);
    return n;
}

int mt_recipe_moe_ffn_hidden(const mt_recipe *r) {
    return r->model.moe.ffn_hidden > 0 ? r->model.moe.ffn_hidden : r->model.ffn_hidden;
}
