/* checkpoint_use.c — see checkpoint_use.h. */
#include "train/checkpoint_use.h"

#include <stdlib.h>

#include "core/ckpt/manifest.h"

mt_status mt_ckpt_open_for_use(const mt_recipe *r, const char *tool, const char *verb, const char *purpose,
                               FILE *log, char *path, size_t path_bytes, int64_t *iteration, mt_tokenizer **tok) {
    char note[4600];
    int found = 0;
    mt_status st = mt_ckpt_resolve(r, path, path_bytes, &found, note, sizeof note);
    if (st != MT_OK) return st;
    if (!found)
        return mt_errorf(MT_ERR_IO, "checkpoint.load: %s holds no checkpoint yet (no %s, no iter_* save): nothing to "
                         "%s", r->checkpoint.load, MT_CKPT_TRACKER, purpose);
    st = mt_ckpt_check_tokenizer(path, r, tool, verb, log, iteration);
    if (st != MT_OK) return st;
    if (log && r->model.moe.experts > 0 && r->model.moe.capacity_factor > 0)
        fprintf(log, "%s: the experts take every token routed to them (dropless, as MixtralForCausalLM): "
                "model.moe.capacity_factor %g is a training rule\n", tool, (double)r->model.moe.capacity_factor);
    return mt_recipe_tokenizer_open(r, tok);
}

mt_status mt_model_create_for_use(mt_model *m, const mt_recipe *r, mt_backend *be, const mt_model_shape *s) {
    mt_recipe *ri = malloc(sizeof *ri); /* a copy: the recipe is large */
    if (!ri) return mt_errorf(MT_ERR_OOM, "model: recipe copy");
    *ri = *r;
    ri->model.moe.capacity_factor = 0.0f; /* dropless */
    const mt_status st = mt_model_create(m, ri, be, s);
    free(ri);
    return st;
}

mt_status mt_ckpt_load_weights(const mt_recipe *r, mt_model *m, const mt_parallel_state *ps, const char *path) {
    mt_recipe *rl = malloc(sizeof *rl); /* a copy: the recipe is large */
    if (!rl) return mt_errorf(MT_ERR_OOM, "checkpoint: recipe copy");
    *rl = *r;
    rl->checkpoint.no_load_optim = 1;
    mt_ckpt_state cs;
    const mt_status st = mt_ckpt_load(rl, m, ps, path, &cs, NULL);
    free(rl);
    return st;
}
