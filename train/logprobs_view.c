/* logprobs_view.c — `mtrain logprobs` without padding every prompt to model.seq_length: scoring
 * views of the model at shorter lengths (64, 128, 256, ... below model.seq_length), each a copy of
 * the model's struct pointing at the same weights with an activation layout for its own length
 * (mt_model_view_open, as generate_kv.c's decode view for one token), made when a sequence first needs it. A
 * sequence of n tokens runs through the shortest view with T >= n - 1; its positions are
 * 0 .. T-1 as in the full model, and causal attention makes what follows a position irrelevant
 * to it, so the log-probabilities are the full-length ones (the GEMMs see fewer rows: the same
 * sums per row). Only where the whole model is on the rank (tp = pp = cp = 1) and nothing depends
 * on the length beyond the rows: the scorer's mixture of experts routes dropless
 * (mt_model_create_for_use), so no capacity per sequence depends on the length (the check below
 * keeps a model built otherwise at full length). */
#include <string.h>

#include "train/logprobs.h"

#define VIEW_MIN_T 64

int mt_logprobs_views_usable(const mt_model *m) {
    const mt_param_layout *pl = &m->pl;
    return pl->tp == 1 && pl->pp == 1 && pl->cp == 1 && pl->has_embed && pl->has_head &&
           (!pl->moe || (pl->ep == 1 && pl->moe_cap == 0)) && pl->T > VIEW_MIN_T;
}

mt_model *mt_logprobs_view_for(mt_logprobs *lp, int n_ids, mt_status *st) {
    *st = MT_OK;
    if (!lp->views_usable) return NULL;
    int k = 0;
    for (int T = VIEW_MIN_T; T < lp->model.pl.T; T *= 2, k++) {
        if (n_ids > T + 1) continue;
        if (k >= MT_LOGPROBS_MAX_VIEWS) return NULL;
        if (!lp->view_T[k]) {
            *st = mt_model_view_open(&lp->views[k], &lp->model, T);
            if (*st != MT_OK) {
                mt_model_view_free(&lp->views[k]);
                memset(&lp->views[k], 0, sizeof lp->views[k]);
                return NULL;
            }
            lp->view_T[k] = T;
        }
        return &lp->views[k];
    }
    return NULL;
}

void mt_logprobs_views_close(mt_logprobs *lp) {
    for (int k = 0; k < MT_LOGPROBS_MAX_VIEWS; k++) {
        if (lp->view_T[k]) mt_model_view_free(&lp->views[k]);
        lp->view_T[k] = 0;
    }
}
