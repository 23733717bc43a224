/* test_pp_layout.c — the per-stage parameter layout of pipeline parallelism
 * (mt_param_layout_build_stage) and the stage model's init, for GPT (tied embeddings) and
 * Llama (untied), 8 layers, pp in {2, 4, 8}, vpp in {1, 2, 4} where they split:
 *  - chunk k of stage s holds the layers of virtual stage k*pp + s, and every global layer is on
 *    exactly one (stage, local layer);
 *  - the embedding on stage 0 only, the final norm and lm_head on the last stage only, a copy of
 *    wte there (marked pp_copy) when tied; the stages' parameters add up to the model's plus
 *    that copy;
 *  - every stage's weights equal the serial model's (layer l = global layer), bitwise, the wte
 *    copy included;
 *  - uneven stages (first / last stage counts, the embedding / loss counted as layers): stage s holds
 *    the next layers after stage s - 1's, Megatron's counts, the weights as above; with interleaving
 *    (the embedding / loss counted) the chunks' layers as Megatron places them, chunks without layers;
 *  - layers % (pp * vpp) != 0 is MT_ERR_CONFIG, and so are layers + counted ends that do not
 *    split into pp * vpp chunks. */
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "train/model.h"
#include "core/recipe/recipe.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"

static void recipe(mt_recipe *r, const char *arch, int pp, int vpp) {
    tiny_recipe(r, arch, 6);
    set_recipe_int(r, "model.layers", 8);
    if (!strcmp(arch, "gpt")) CHECK(mt_recipe_set(r, "model.tie_embeddings", "true", "test") == MT_OK);
    set_recipe_int(r, "parallel.pipeline", pp);
    set_recipe_int(r, "parallel.virtual_pipeline", vpp);
}

/* counts: NULL for the even split, else each stage's layers under `sets` (uneven stages, "key=value");
 * globals: NULL for stages holding consecutive layers, else every stage's global layers in local order,
 * one stage after the other (written out by hand from Megatron's rule) */
static void check(const char *arch, int pp, int vpp, const char *const *sets, const int *counts, const int *globals,
                  mt_backend *be) {
    static mt_recipe r;
    recipe(&r, arch, pp, vpp);
    for (int i = 0; sets && sets[i]; i++) {
        char key[64];
        const char *eq = strchr(sets[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
        CHECK(mt_recipe_set(&r, key, eq + 1, "test") == MT_OK);
    }
    mt_model full;
    CHECK(mt_model_init(&full, &r, be, 1, 1, 0) == MT_OK);
    const int tied = r.model.tie_embeddings, L = r.model.layers;
    int seen[64] = {0};
    size_t sum = 0, wte_n = 0;
    for (int s = 0, start = 0; s < pp; start += counts ? counts[s] : 0, s++) {
        mt_model m;
        mt_status st = mt_model_init_stage(&m, &r, be, 1, 1, 0, s);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st != MT_OK) return;
        const mt_param_layout *pl = &m.pl;
        CHECK(pl->L == (counts ? counts[s] : L / pp) && pl->Lc * vpp - pl->lack_first - pl->lack_last == pl->L &&
              pl->L_global == L);
        for (int l = 0; l < pl->L; l++) {
            const int g = mt_param_global_layer(pl, l), k = l / pl->Lc;
            CHECKF(globals ? g == globals[start + l] : counts ? g == start + l : g / pl->Lc == k * pp + s,
                   "%s pp %d vpp %d stage %d layer %d -> %d", arch, pp, vpp, s, l, g);
            if (g >= 0 && g < 64) seen[g]++;
        }
        CHECK((pl->idx.wpe >= 0) == (s == 0 && r.model.position == MT_POS_LEARNED));
        CHECK((pl->idx.lnf_w >= 0) == (s == pp - 1));
        CHECK((pl->idx.lm_head >= 0) == (s == pp - 1 && !tied));
        CHECK((pl->idx.wte >= 0) == (s == 0 || (tied && s == pp - 1)));
        if (pl->idx.wte >= 0) {
            CHECK(pl->t[pl->idx.wte].pp_copy == (s != 0));
            if (s != 0) wte_n = pl->t[pl->idx.wte].n;
        }
        sum += pl->n_params;
        /* weights: every tensor of the stage equals the serial one (layer-mapped), bitwise */
        for (int ti = 0; ti < pl->n_tensors; ti++) {
            const mt_param_tensor *t = &pl->t[ti];
            int fi = -1;
            for (int u = 0; u < full.pl.n_tensors; u++)
                if (!strcmp(full.pl.t[u].name, t->name)) fi = u;
            CHECKF(fi >= 0, "tensor %s not in the full model", t->name);
            if (fi < 0) continue;
            const size_t per = (size_t)t->rows * t->cols;
            for (int l = 0; l < t->n_layers; l++) {
                const int g = t->stacked ? mt_param_global_layer(pl, l) : 0;
                const float *a = (const float *)m.params + mt_param_offset(pl, ti, l);
                const float *b = (const float *)full.params + mt_param_offset(&full.pl, fi, g);
                CHECKF(memcmp(a, b, per * 4) == 0, "%s pp %d vpp %d stage %d tensor %s layer %d != serial layer %d",
                       arch, pp, vpp, s, t->name, l, g);
            }
        }
        mt_model_free(&m);
    }
    for (int g = 0; g < L; g++) CHECKF(seen[g] == 1, "%s pp %d vpp %d: global layer %d held %d times", arch, pp, vpp, g, seen[g]);
    CHECKF(sum == full.pl.n_params + wte_n, "%s pp %d vpp %d: %zu parameters over the stages, %zu + copy %zu", arch, pp,
           vpp, sum, full.pl.n_params, wte_n);
    mt_model_free(&full);
}

int main(void) {
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    const char *archs[] = {"gpt", "llama"};
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int pp = 2; pp <= 8; pp *= 2)
            for (int vpp = 1; vpp <= 4; vpp *= 2)
                if (8 % (pp * vpp) == 0) {
                    check(archs[a], pp, vpp, NULL, NULL, NULL, &be);
                    n++;
                }
    printf("%d (arch, pp, vpp) layouts checked against the serial model\n", n);
    /* uneven stages (Megatron's rules, mt_recipe_stage_layers): each stage the next layers in order */
    static const char *const f3[] = {"parallel.first_stage_layers=3", NULL};
    static const char *const f1l1[] = {"parallel.first_stage_layers=1", "parallel.last_stage_layers=1", NULL};
    static const char *const f3l1[] = {"parallel.first_stage_layers=3", "parallel.last_stage_layers=1", NULL};
    static const char *const emb[] = {"parallel.embedding_in_split=true", NULL};
    static const char *const loss[] = {"parallel.loss_in_split=true", NULL};
    static const char *const both[] = {"parallel.embedding_in_split=true", "parallel.loss_in_split=true", NULL};
    check("gpt", 2, 1, f3, (const int[]){3, 5}, NULL, &be);
    check("gpt", 4, 1, f1l1, (const int[]){1, 3, 3, 1}, NULL, &be);
    check("llama", 4, 1, f3l1, (const int[]){3, 2, 2, 1}, NULL, &be);
    check("gpt", 3, 1, emb, (const int[]){2, 3, 3}, NULL, &be);
    check("llama", 3, 1, loss, (const int[]){3, 3, 2}, NULL, &be);
    check("gpt", 2, 1, both, (const int[]){4, 4}, NULL, &be);
    printf("6 uneven layouts checked against the serial model\n");
    /* the embedding / loss counted with interleaving (Megatron-Core's get_num_layers_to_build and
     * get_transformer_layer_offset): layers + counted ends in pp * vpp chunks of c places, virtual stage
     * k * pp + s = chunk k of stage s, the embedding's place first, the loss's last */
    static const char *const l6both[] = {"model.layers=6", "parallel.embedding_in_split=true",
                                         "parallel.loss_in_split=true", NULL};
    static const char *const l7emb[] = {"model.layers=7", "parallel.embedding_in_split=true", NULL};
    static const char *const l10both[] = {"model.layers=10", "parallel.embedding_in_split=true",
                                          "parallel.loss_in_split=true", NULL};
    static const char *const l7loss[] = {"model.layers=7", "parallel.loss_in_split=true", NULL};
    /* 6 + 2 = 8 chunks of 1: (emb) 0 1 2 | 3 4 5 (loss); stage 0's chunk 0 and stage 3's chunk 1 empty */
    check("gpt", 4, 2, l6both, (const int[]){1, 2, 2, 1}, (const int[]){3, 0, 4, 1, 5, 2}, &be);
    check("llama", 4, 2, l6both, (const int[]){1, 2, 2, 1}, (const int[]){3, 0, 4, 1, 5, 2}, &be);
    /* 7 + 1 = 8 chunks of 1: (emb) 0 1 2 | 3 4 5 6 */
    check("gpt", 4, 2, l7emb, (const int[]){1, 2, 2, 2}, (const int[]){3, 0, 4, 1, 5, 2, 6}, &be);
    /* 10 + 2 = 4 chunks of 3: (emb) 0 1 | 2 3 4 | 5 6 7 | 8 9 (loss) */
    check("gpt", 2, 2, l10both, (const int[]){5, 5}, (const int[]){0, 1, 5, 6, 7, 2, 3, 4, 8, 9}, &be);
    /* 7 + 1 = 4 chunks of 2: 0 1 | 2 3 | 4 5 | 6 (loss) */
    check("llama", 2, 2, l7loss, (const int[]){4, 3}, (const int[]){0, 1, 4, 5, 2, 3, 6}, &be);
    printf("5 interleaved layouts with the embedding / loss counted checked against the serial model\n");
    /* layers that do not split */
    static mt_recipe r;
    mt_param_layout pl;
    recipe(&r, "gpt", 2, 3);
    mt_status st = mt_param_layout_build_stage(&r, 0, &pl);
    CHECK(st == MT_ERR_CONFIG);
    CHECK(strstr(mt_last_error(), "parallel.virtual_pipeline") != NULL);
    printf("8 layers over pp 2 x vpp 3: %s\n", mt_last_error());
    recipe(&r, "gpt", 2, 2); /* 8 + the embedding = 9 places over 4 chunks */
    CHECK(mt_recipe_set(&r, "parallel.embedding_in_split", "true", "test") == MT_OK);
    st = mt_param_layout_build_stage(&r, 0, &pl);
    CHECK(st == MT_ERR_CONFIG);
    CHECK(strstr(mt_last_error(), "= 9") != NULL && strstr(mt_last_error(), "parallel.virtual_pipeline") != NULL);
    printf("8 layers + the embedding over pp 2 x vpp 2: %s\n", mt_last_error());
    mt_backend_destroy(&be);
    TEST_MAIN_END();
}
