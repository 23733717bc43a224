/* op_check.h — the argument checks that every backend applies to the ops of backend.h before
 * running them: the same shape and NULL-tensor rules on the CPU and on CUDA, one wording, the
 * message starting with the backend's name ("cpu rope: ...", "cuda rope: ..."). Each returns
 * MT_OK or the error (MT_ERR_CONFIG for a bad shape, MT_ERR_INTERNAL for a missing tensor). */
#ifndef MT_OP_CHECK_H
#define MT_OP_CHECK_H

#include "core/backend.h"

#define MT_ROPE_MAX_HALF 1024 /* D / 2 limit of rope: the frequency table sits on the stack */

/* rope: even head size D <= 2 * MT_ROPE_MAX_HALF, heads inside the row stride, pos_offset >= 0,
 * theta > 0; *empty is set when there is nothing to rotate (then a NULL x is fine). */
mt_status mt_op_check_rope(const char *be, const mt_rope_args *a, int *empty);
/* rope's frequencies of its R / 2 pairs: theta^(-2i/R), or YaRN's blend (yarn_factor > 1), then Llama 3.x's
 * scaling and position interpolation (core/rope_scale.h) */
void mt_rope_inv_freq(const mt_rope_args *a, int R, double *inv_freq);
/* attention's (B, T, H, KV, D): non-negative B, T; positive heads and head size; H % KV == 0 */
mt_status mt_op_check_attention(const char *be, const char *op, int B, int T, int H, int KV, int D);
/* embedding_fwd / _bwd: the shape, and the three tensors present when there are rows */
mt_status mt_op_check_embedding(const char *be, const char *op, int B, int T, int C, int n_vocab, int pos_offset,
                                const void *a, const void *b, const void *c);
/* swiglu_fwd / _bwd: non-negative (N, F); all_set says whether every tensor is non-NULL */
mt_status mt_op_check_swiglu(const char *be, const char *op, int N, int F, int all_set);
/* the vocab-parallel cross-entropy phases: the shape, and stats / targets / logits present */
mt_status mt_op_check_xent_vp(const char *be, const char *op, const mt_xent_vp_args *a);
/* columns of a vocab-parallel shard that are real vocabulary entries: [0, n_valid) */
int mt_xent_vp_valid_cols(const mt_xent_vp_args *a);
/* adamw: the four tensors present (n > 0), bias corrections > 0 */
mt_status mt_op_check_adamw(const char *be, const mt_adamw_args *a);

#endif
