/* recipe_stages.c — uneven pipeline stages: how many transformer layers each pipeline stage holds
 * under parallel.first_stage_layers / last_stage_layers (Megatron's --decoder-first/last-pipeline-
 * num-layers: the rest split evenly over the middle stages) or parallel.embedding_in_split /
 * loss_in_split (Megatron's --account-for-embedding/loss-in-pipeline-split: the input embedding
 * and the loss each count as one layer, so the first / last stage holds one transformer layer
 * fewer). With the interleaved schedule (parallel.virtual_pipeline = v > 1) only the embedding / loss
 * rule applies, as Megatron-Core's get_num_layers_to_build and get_transformer_layer_offset have it:
 * layers + 1 (+ 1) split into pp * v model chunks of c each, chunk k of stage s is virtual stage
 * k * pp + s, the embedding takes one place in virtual stage 0 (chunk 0 of stage 0) and the loss one
 * in the last (chunk v - 1 of the last stage), so those two hold c - 1 transformer layers (none when
 * c = 1). The one rule of which layers a stage holds: the validator (recipe_validate.c) checks the
 * split, the trainer's layouts (core/model/model_layout.c: the local layers, their global indices in
 * init streams and checkpoints) and `mtrain plan` use it. */
#include "core/recipe/recipe.h"

int mt_recipe_uneven_stages(const mt_recipe *r) {
    const mt_parallel_cfg *p = &r->parallel;
    return p->first_stage_layers > 0 || p->last_stage_layers > 0 || p->embedding_in_split || p->loss_in_split;
}

int mt_recipe_stage_layers(const mt_recipe *r, int stage) {
    const mt_parallel_cfg *p = &r->parallel;
    const int pp = p->pipeline > 0 ? p->pipeline : 1, L = r->model.layers;
    if (pp <= 1) return L;
    if (p->embedding_in_split || p->loss_in_split) {
        const int per = (L + (p->embedding_in_split ? 1 : 0) + (p->loss_in_split ? 1 : 0)) / pp;
        if (stage == 0 && p->embedding_in_split) return per - 1;
        if (stage == pp - 1 && p->loss_in_split) return per - 1;
        return per;
    }
    const int first = p->first_stage_layers, last = p->last_stage_layers;
    if (stage == 0 && first > 0) return first;
    if (stage == pp - 1 && last > 0) return last;
    const int n_mid = pp - (first > 0) - (last > 0);
    return n_mid > 0 ? (L - first - last) / n_mid : 0;
}

int mt_recipe_stage_first_layer(const mt_recipe *r, int stage) {
    int l0 = 0;
    for (int s = 0; s < stage; s++) l0 += mt_recipe_stage_layers(r, s);
    return l0;
}

/* virtual pipeline size of the split (1 without pipeline parallelism) */
static int split_v(const mt_parallel_cfg *p) {
    return p->pipeline > 1 && p->virtual_pipeline > 1 ? p->virtual_pipeline : 1;
}

int mt_recipe_chunk_layers(const mt_recipe *r, int stage, int chunk) {
    const mt_parallel_cfg *p = &r->parallel;
    const int pp = p->pipeline > 0 ? p->pipeline : 1, v = split_v(p), L = r->model.layers;
    if (pp <= 1) return L;
    if (!mt_recipe_uneven_stages(r)) return L / (pp * v);
    if (v == 1) return mt_recipe_stage_layers(r, stage);
    const int e = p->embedding_in_split ? 1 : 0, lo = p->loss_in_split ? 1 : 0, c = (L + e + lo) / (pp * v);
    return c - (e && stage == 0 && chunk == 0) - (lo && stage == pp - 1 && chunk == v - 1);
}

int mt_recipe_chunk_first_layer(const mt_recipe *r, int stage, int chunk) {
    const mt_parallel_cfg *p = &r->parallel;
    const int pp = p->pipeline > 0 ? p->pipeline : 1, v = split_v(p), L = r->model.layers;
    if (pp <= 1) return 0;
    if (v == 1) return mt_recipe_stage_first_layer(r, stage);
    const int e = p->embedding_in_split ? 1 : 0, n = L + e + (p->loss_in_split ? 1 : 0), c = n / (pp * v);
    /* place of the chunk among the virtual stages' c places each, less the embedding's place before it */
    return chunk * (n / v) + stage * c - (e && (stage > 0 || chunk > 0));
}
