/* recipe_moe_layers.c — which transformer layers are MoE layers (Megatron's --moe-layer-freq):
 * model.moe.layer_pattern when set (one 0 / 1 per layer, 1 = MoE, written as a plain string
 * "0111" or as Megatron's Python list expression "([0]+[1]*26)"), else model.moe.layer_freq N:
 * layer i (0-based) is a MoE layer iff i % N == 0 (Megatron's transformer_config / gpt_layer_specs).
 * The one rule of the layer kinds: the validator, the layouts (core/model/model_layout.c), the
 * planner and the Megatron flag rules (recipe_megatron.c) all call these. */
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"

/* Megatron's expression: terms joined by '+', each a list of 0 / 1 literals optionally repeated
 * '* N', the whole optionally in parentheses ("([0]+[1]*26)", "[0]*3+[1]*58", "([0,1]*24)"). */
static int parse_expr(const char *t, size_t k, unsigned char *bits, int max) {
    const char *p = t, *end = t + k;
    if (k >= 2 && *p == '(' && end[-1] == ')') p++, end--;
    int n = 0;
    while (p < end) {
        if (*p != '[') return -1;
        const char *list = ++p;
        int len = 0;
        for (;;) {
            if (p >= end || (*p != '0' && *p != '1')) return -1;
            p++, len++;
            if (p < end && *p == ',') { p++; continue; }
            if (p < end && *p == ']') { p++; break; }
            return -1;
        }
        long rep = 1;
        if (p < end && *p == '*') {
            char *e;
            rep = strtol(p + 1, &e, 10);
            if (e == p + 1 || e > end || rep < 0 || rep > 1000000) return -1;
            p = e;
        }
        for (long r = 0; r < rep; r++)
            for (int i = 0; i < len; i++) {
                if (n >= max) return -2;
                bits[n++] = list[2 * i] == '1';
            }
        if (p < end && *p == '+') p++;
        else if (p != end) return -1;
    }
    return n;
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
