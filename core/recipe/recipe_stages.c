/* recipe_stages.c — uneven pipeline stages: how many transformer layers each pipeline stage holds
 * under parallel.first_stage_layers / last_stage_layers (Megatron's --decoder-first/last-pipeline-
 * num-layers: the rest split evenly over the middle stages) or parallel.embedding_in_split /
 * loss_in_split (Megatron's --account-for-embedding/loss-in-pipeline-split: the input embedding
 * and the loss each count as one layer, so the first / last stage holds one transformer layer
 * fewer). The one rule of which layers a stage holds: the validator (recipe_validate.c) checks the
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
