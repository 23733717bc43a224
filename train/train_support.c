/* train_support.c — what the trainer can do today, checked before anything is allocated, so a
 * recipe asking for a feature that is not built yet fails at once with a message naming the
 * key, instead of silently training something else. `mtrain plan` and `mtrain check` accept
 * every key; only training refuses. */
#include <stdio.h>

#include "core/recipe/recipe.h"
#include "train/train.h"

mt_status mt_train_check_supported(const mt_recipe *r, char *note, size_t note_bytes) {
    char where[256];
    note[0] = 0;
#define REFUSE(key, cond, what)                                                                             \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            mt_recipe_where(r, key, where, sizeof where);                                                   \
            return mt_errorf(MT_ERR_UNSUPPORTED, "%s: %s (%s): %s is not implemented in the trainer yet; "    \
                             "`mtrain plan` models it, training needs it removed", where, key, what, what); \
        }                                                                                                   \
    } while (0)
    REFUSE("parallel.context", r->parallel.context > 1, "context parallelism");
    REFUSE("parallel.expert", r->parallel.expert > 1, "expert parallelism");
    REFUSE("model.moe.experts", r->model.moe.experts > 0, "mixture of experts");
#undef REFUSE
    if (r->training.recompute != MT_RECOMPUTE_NONE)
        snprintf(note, note_bytes, "note: training.recompute is modelled by `mtrain plan`; the trainer keeps all "
                                   "activations for now (same results, more memory)");
    return MT_OK;
}
