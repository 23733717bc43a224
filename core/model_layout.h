/* model_layout.h — where every parameter lives: a pure function from the recipe to a table
 * of tensors with element offsets into ONE parameter buffer (compute dtype) and ONE
 * gradient buffer (fp32, same offsets). Per-layer tensors are stacked (L, rows, cols), as in
 * llm.c. Offsets are aligned to MT_PARAM_ALIGN elements (>= 256 bytes in any dtype).
 * Also the activation layout (byte offsets into one activation buffer) for a micro-batch. */
#ifndef MT_MODEL_LAYOUT_H
#define MT_MODEL_LAYOUT_H

#include <stddef.h>

#include "backend.h"
#include "recipe.h"

#define MT_PARAM_ALIGN 128
#define MT_MAX_PARAM_TENSORS 32

typedef enum {
    MT_INIT_ZERO = 0,
    MT_INIT_ONE,
    MT_INIT_NORMAL,        /* normal(0, init_std) */
    MT_INIT_NORMAL_OUTPUT  /* normal(0, init_std / sqrt(2 * layers)): output projections */
} mt_init_kind;

typedef struct {
    const char *name;      /* "wte", "qkv_w", ... (stable: used for init streams and files) */
    int n_layers;          /* 1 for global tensors, L for stacked per-layer tensors */
    int rows, cols;        /* shape of one layer's slice (rows = 1 for vectors) */
    size_t offset;         /* element offset of the first layer's slice */
    size_t n;              /* n_layers * rows * cols */
    int decay;             /* weight decay applies (matrices and embeddings, not biases/norms) */
    mt_init_kind init;
} mt_param_tensor;

/* Indices into the table; -1 when the architecture has no such tensor. */
typedef struct {
    int wte, wpe, lm_head;
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    int ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
    int lnf_w, lnf_b;
} mt_param_index;

typedef struct {
    mt_param_tensor t[MT_MAX_PARAM_TENSORS];
    int n_tensors;
    mt_param_index idx;
    size_t n_elems;        /* buffer length in elements, alignment padding included */
    size_t n_params;       /* real parameters (no padding) */
    /* model dims used by the layout */
    int L, C, H, KV, D, F, V, Vp, T, max_pos;
    int qkv_rows;          /* (H + 2*KV) * D */
    int fc_rows;           /* F for gelu, 2F for swiglu ([gate; up]) */
} mt_param_layout;

mt_status mt_param_layout_build(const mt_recipe *r, mt_param_layout *pl);
/* Element offset of layer l's slice of tensor ti. */
static inline size_t mt_param_offset(const mt_param_layout *pl, int ti, int l) {
    const mt_param_tensor *t = &pl->t[ti];
    return t->offset + (size_t)l * t->rows * t->cols;
}

/* Activations of one micro-batch of B sequences of T tokens, as byte offsets into one
 * buffer. Per-layer arrays hold L consecutive slices. "act" = compute dtype. */
typedef struct {
    size_t tokens, targets;        /* (B*T) i32 */
    size_t resid;                  /* (L+1, N, C) act: residual stream entering each layer, and the last output */
    size_t ln1, ln1_mean, ln1_rstd;/* (L, N, C) act; (L, N) f32 x2 */
    size_t qkv;                    /* (L, N, qkv_rows) act (q, k rotated when rope) */
    size_t probs;                  /* (L, B, H, T, T) f32 */
    size_t atty;                   /* (L, N, C) act */
    size_t resid_mid;              /* (L, N, C) act */
    size_t ln2, ln2_mean, ln2_rstd;
    size_t fch;                    /* (L, N, fc_rows) act */
    size_t fch_act;                /* (L, N, F) act */
    size_t lnf, lnf_mean, lnf_rstd;/* (N, C) act; (N) f32 x2 */
    size_t logits;                 /* (N, Vp) act; overwritten by dlogits */
    size_t losses;                 /* (N) f32 */
    size_t scalars;                /* (2) f32: [0] sum of token losses over the step's micro-batches,
                                      [1] sum of squared gradients (this rank's part) */
    /* backward scratch, one layer's worth, reused */
    size_t dresid;                 /* (N, C) act */
    size_t dln;                    /* (N, C) act */
    size_t dtmp;                   /* (N, C) act: attention / mlp output projection */
    size_t dqkv;                   /* (N, qkv_rows) act */
    size_t datty;                  /* (N, C) act */
    size_t dprobs;                 /* (B, H, T, T) f32 */
    size_t dfch;                   /* (N, fc_rows) act */
    size_t dfch_act;               /* (N, F) act */
    size_t n_bytes;                /* total */
    int B, T, N;
} mt_act_layout;

void mt_act_layout_build(const mt_param_layout *pl, int B, mt_dtype act, mt_act_layout *al);

#endif
