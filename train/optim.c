/* optim.c — LR schedule, clipping factor, AdamW over the parameter table (muP's lr and eps of the
 * hidden matrices). The update runs on the device through the backend's adamw op, one call per
 * (stacked) tensor. */
#include "train/optim.h"

#include <math.h>
#include <string.h>

#include "core/model/mup.h"

double mt_lr_at(const mt_optimizer_cfg *o, int64_t it, int64_t train_iters) {
    return mt_lr_at_step(o, (double)it, train_iters);
}

double mt_lr_at_step(const mt_optimizer_cfg *o, double it, int64_t train_iters) {
    const double max_lr = o->lr, min_lr = o->min_lr;
    const int64_t warmup = o->warmup_iters;
    const int64_t decay_iters = o->decay_iters > 0 ? o->decay_iters : train_iters;
    if (warmup > 0 && it <= (double)warmup) return max_lr * it / (double)warmup;
    if (o->decay == MT_DECAY_CONSTANT) return max_lr;
    if (it > decay_iters) return min_lr;
    if (o->decay == MT_DECAY_INV_SQRT) { /* Megatron: max_lr * sqrt(max(warmup, 1) / max(step, 1)) */
        const double w = warmup > 1 ? (double)warmup : 1.0, s = it > 1 ? it : 1.0;
        const double lr = max_lr * sqrt(w) / sqrt(s);
        return lr > min_lr ? lr : min_lr;
    }
    if (o->decay == MT_DECAY_WSD) { /* warmup, stable at max_lr, then the last wsd_decay_iters anneal */
        const int64_t anneal_start = decay_iters - o->wsd_decay_iters;
        if (it <= anneal_start || o->wsd_decay_iters <= 0) return max_lr;
        const double r = (it - (double)anneal_start) / (double)o->wsd_decay_iters;
        double c;
        switch (o->wsd_decay) {
        case MT_WSD_LINEAR: c = 1.0 - r; break;
        case MT_WSD_COSINE: c = 0.5 * (cos(M_PI * r) + 1.0); break;
        case MT_WSD_MINUS_SQRT: c = 1.0 - sqrt(r); break;
        default: c = 2.0 * pow(0.5, r) - 1.0; break; /* exponential */
        }
        return min_lr + c * (max_lr - min_lr);
    }
    if (it == decay_iters) return min_lr;
    const double span = (double)(decay_iters - warmup);
    const double ratio = span > 0 ? (it - (double)warmup) / span : 1.0;
    if (o->decay == MT_DECAY_LINEAR) return max_lr - (max_lr - min_lr) * ratio;
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + cos(M_PI * ratio));
}

double mt_clip_factor(double grad_norm, double clip) {
    if (clip <= 0 || !(grad_norm > clip)) return 1.0;
    return clip / (grad_norm + 1e-6);
}

double mt_lr_decoupled_at(const mt_optimizer_cfg *o, double it, int64_t train_iters) {
    if (!(o->decoupled_lr > 0)) return mt_lr_at_step(o, it, train_iters);
    mt_optimizer_cfg d = *o;
    d.lr = o->decoupled_lr;
    d.min_lr = o->decoupled_min_lr;
    return mt_lr_at_step(&d, it, train_iters);
}

int mt_optim_is_embedding_or_output(const mt_param_tensor *t) {
    return !strcmp(t->name, "wte") || !strcmp(t->name, "lm_head");
}

mt_status mt_optim_step(mt_model *m, const mt_optimizer_cfg *o, int64_t step, double lr, double lr_embed,
                        double grad_scale) {
    mt_status st = MT_OK;
    const size_t ab = mt_dtype_bytes(m->act);
    const float bc1 = (float)(1.0 - pow(o->beta1, (double)step));
    const float bc2 = (float)(1.0 - pow(o->beta2, (double)step));
    for (int ti = 0; ti < m->pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m->pl.t[ti];
        mt_opt_piece pc; /* the part of this tensor inside this rank's optimizer shards */
        if (!mt_opt_piece_of(&m->pl, &m->ol, ti, &pc)) continue;
        /* muP (core/model/mup.h): a hidden matrix's max_lr, min_lr and eps times 1 / m. The schedule
         * is linear in (max_lr, min_lr) (warmup from 0), so its lr is the base lr times 1 / m */
        const double mup = m->mup_width_mult != 1.0 && mt_mup_is_hidden(t) ? 1.0 / m->mup_width_mult : 1.0;
        mt_adamw_args a = {
            .master = (char *)m->master + pc.opt * 4,
            .param = (char *)m->params + pc.lo * ab,
            .grad = (char *)m->grads + pc.lo * 4,
            .m = (char *)m->adam_m + pc.opt * 4,
            .v = (char *)m->adam_v + pc.opt * 4,
            .n = pc.hi - pc.lo,
            .lr = (float)(mt_optim_is_embedding_or_output(t) ? lr_embed : lr * mup),
            .beta1 = o->beta1,
            .beta2 = o->beta2,
            .eps = mup == 1.0 ? o->eps : (float)(o->eps * mup),
            .weight_decay = t->decay ? o->weight_decay : 0.0f,
            .grad_scale = (float)grad_scale,
            .bias_correction1 = bc1,
            .bias_correction2 = bc2,
            .moments_zero = m->moments_zero,
        };
        MT_CHECK(MT_BE_CALL(m->be, adamw, &a));
    }
    m->moments_zero = 0;
out:
    return st;
}
