/* recipe_no_rope.c — which transformer layers attend without rotary position embeddings
 * (model.no_rope_layers; Megatron's --no-rope-freq, the NoPE layers of Llama 4). Megatron's
 * no_rope_freq_type reads the flag as an integer N unless it holds '[': N is the pattern
 * [0]*(N-1)+[1] repeated (every N-th layer, the last of each group of N, skips RoPE;
 * transformer_config.py asserts num_layers % N == 0), a list expression gives one 0 / 1 per layer
 * (1 = no RoPE), and Attention.forward drops rotary_pos_emb on those layers, nothing else.
 * The one rule: the validator, the layout (core/model/model_layout.c) and the flag rule call it. */
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"

int mt_recipe_no_rope_parse(const char *text, int n_layers, unsigned char *bits, int max) {
    if (n_layers < 0 || n_layers > max) return -2;
    const char *t = text;
    while (*t == ' ' || *t == '\t' || *t == '\'' || *t == '"') t++;
    if (!*t) {
        memset(bits, 0, (size_t)n_layers);
        return n_layers;
    }
    if (strchr(text, '[')) return mt_recipe_moe_pattern_parse(text, bits, max);
    char *e;
    const long n = strtol(t, &e, 10);
    while (*e == ' ' || *e == '\t' || *e == '\'' || *e == '"') e++;
    if (e == t || *e || n < 1 || n > 1024 || *t == '-' || *t == '+') return -1;
    for (int i = 0; i < n_layers; i++) bits[i] = (i + 1) % n == 0;
    return n_layers;
}

int mt_recipe_no_rope_layer(const mt_recipe *r, int layer) {
    const int L = r->model.layers;
    if (!r->model.no_rope_layers[0] || layer < 0 || layer >= L || L > 1024) return 0;
    unsigned char bits[1024];
    return mt_recipe_no_rope_parse(r->model.no_rope_layers, L, bits, (int)sizeof bits) == L ? bits[layer] : 0;
}
