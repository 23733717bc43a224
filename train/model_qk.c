/* model_qk.c — what happens to the queries and keys of a layer between the qkv projection and the
 * attention core, as the layer spec (pl.spec) says: RoPE at the tokens' positions (model_cp.c's
 * mt_model_rope: global positions under context parallelism). Forward in place on the layer's qkv
 * activation; backward in place on dqkv (the gradient of the attention core's input becomes the
 * gradient of the projection's output). */
#include "train/model_internal.h"

mt_status mt_model_qk_fwd(mt_model *m, const mt_acts *A, int l, void *qkv) {
    (void)A, (void)l;
    if (m->pl.spec.rope) return mt_model_rope(m, qkv, 0);
    return MT_OK;
}

mt_status mt_model_qk_bwd(mt_model *m, const mt_acts *A, int l, void *dqkv) {
    (void)A, (void)l;
    if (m->pl.spec.rope) return mt_model_rope(m, dqkv, 1);
    return MT_OK;
}
