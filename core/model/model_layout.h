/* model_layout.h — where every parameter lives: a pure function from the recipe to a table
 * of tensors with element offsets into ONE parameter buffer (compute dtype) and ONE
 * gradient buffer (fp32, same offsets). Per-layer tensors are stacked (L, rows, cols), as in
 * llm.c. Offsets are aligned to MT_PARAM_ALIGN elements (>= 256 bytes in any dtype).
 * With tensor parallelism (parallel.tensor = tp > 1) the table describes ONE tp rank's shards
 * (every rank has the same shapes; which slice of the full tensor a rank holds is
 * mt_param_full_index): Megatron's column-parallel weights (qkv, fc, wte / lm_head by vocab
 * rows) split their output rows, row-parallel weights (proj, fcproj) their input columns;
 * norms and row-parallel biases are replicated.
 * Also the activation layout (byte offsets into one activation buffer) for a micro-batch. */
#ifndef MT_MODEL_LAYOUT_H
#define MT_MODEL_LAYOUT_H

#include <stddef.h>

#include "core/backend.h"
#include "core/model/layer_spec.h"
#include "core/recipe/recipe.h"

#define MT_PARAM_ALIGN 128
#define MT_MAX_PARAM_TENSORS 40
#define MT_LAYERS_MAX 1024 /* model.layers at most (the key's range) */

/* Which layers a stacked tensor is stacked over: every layer of the stage, or only its dense (MLP)
 * or only its MoE layers (model.moe.layer_freq / layer_pattern mix them: mt_recipe_moe_layer). A
 * kind's stack holds the stage's layers of that kind in order: local layer l is slot pl->slot[l]. */
typedef enum { MT_LAYERS_EVERY = 0, MT_LAYERS_DENSE, MT_LAYERS_MOE } mt_layers_of;

typedef enum {
    MT_INIT_ZERO = 0,
    MT_INIT_ONE,
    MT_INIT_NORMAL,        /* normal(0, init_std) */
    MT_INIT_NORMAL_OUTPUT  /* normal(0, init_std / sqrt(2 * layers)): output projections */
} mt_init_kind;

typedef enum {
    MT_SHARD_NONE = 0,     /* replicated on every tp rank */
    MT_SHARD_ROWS,         /* rows split over tp (column-parallel weights, vocabulary rows) */
    MT_SHARD_COLS          /* columns split over tp (row-parallel weights, column-parallel biases) */
} mt_shard_kind;

/* Gradient class of a tensor: over which groups its gradient is summed and over which its
 * optimizer state is sharded (parallel/grad_sync.h runs them; Megatron-Core's grad buffers):
 *   DENSE        summed over data x context parallel; optimizer sharded over dp x cp
 *   TP_PARTIAL   first summed over tp (a replicated norm weight / bias under sequence parallelism
 *                sees 1/tp of the tokens on each rank), then as DENSE
 *   EMBEDDING    first summed over the embedding group (the tied word embedding on the first
 *                stage and its copy on the last), then as DENSE
 *   EXPERT       summed over expert-data-parallel; optimizer sharded over it (MoE experts) */
typedef enum { MT_GRAD_DENSE = 0, MT_GRAD_TP_PARTIAL, MT_GRAD_EMBEDDING, MT_GRAD_EXPERT, MT_GRAD_CLASSES } mt_grad_class;

/* The flat buffers a class lives in: one per reduce group (dense classes share one). */
typedef enum { MT_GBUF_DENSE = 0, MT_GBUF_EXPERT, MT_GBUFS } mt_grad_buffer_id;
static inline mt_grad_buffer_id mt_grad_class_buffer(mt_grad_class c) {
    return c == MT_GRAD_EXPERT ? MT_GBUF_EXPERT : MT_GBUF_DENSE;
}

typedef struct {
    const char *name;      /* "wte", "qkv_w", ... (stable: used for init streams and files) */
    int n_layers;          /* 1 for global tensors, L for stacked per-layer tensors */
    int rows, cols;        /* shape of one layer's slice ON THIS RANK (rows = 1 for vectors) */
    int full_rows, full_cols; /* shape of the full (unsharded) slice */
    mt_shard_kind shard;
    /* the sharded axis is n_blocks consecutive blocks of the full tensor (qkv: Q, K, V; swiglu
     * fc: gate, up), each split into tp equal parts: a rank's shard is [part of block 0; part
     * of block 1; ...], so a SwiGLU rank holds [gate_r; up_r] and attention heads stay whole */
    int n_blocks;
    int block[3];          /* full sizes of the blocks along the sharded axis */
    int sp_partial;        /* replicated, and its gradient is a partial sum over the tp group: under
                              sequence parallelism (norm weights / biases see 1/tp of the tokens), and
                              the per-head qk norms whenever tp > 1 (each rank norms its own heads) */
    int stacked;           /* per-layer tensor (L, rows, cols): layer l is global layer
                              mt_param_global_layer(pl, l) (init streams) */
    mt_layers_of layers;   /* a stacked tensor's layers: every one, or one kind's (n_layers = the stage's
                              layers of that kind; slice s is the kind's global slot mt_param_global_slice) */
    int pp_copy;           /* a copy of a tensor another pipeline stage owns (the last stage's wte
                              under tied embeddings): its gradient is summed over the embedding
                              group, the grad norm counts it on the owner only */
    mt_grad_class gclass;  /* how its gradient is reduced and its optimizer state sharded */
    int experts_r;         /* MoE expert tensor: each local layer holds experts_r consecutive expert
                              slices (this ep rank's E / ep experts), so n_layers = L * experts_r and
                              (rows, cols) is ONE expert's shard; 0 for any other tensor. Local slice s
                              is expert ep_rank * experts_r + s % experts_r of local layer s / experts_r
                              (mt_param_global_slice) */
    size_t offset;         /* element offset of the first layer's slice */
    size_t n;              /* n_layers * rows * cols */
    int decay;             /* weight decay applies (matrices and embeddings, not biases/norms) */
    mt_init_kind init;
} mt_param_tensor;

/* Indices into the table; -1 when the architecture has no such tensor. */
typedef struct {
    int wte, wpe, lm_head;
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    int q_norm_w, q_norm_b, k_norm_w, k_norm_b; /* spec.qk_norm: (L, 1, D) replicated, partial over tp */
    /* spec.mla (then no qkv_w / qkv_b): q_w (H (qk + pos), C) split by heads when q_lora = 0, else
       q_down_w (q_lora, C) replicated, its norm q_ln_w / _b (q_lora) and q_up_w (H (qk + pos), q_lora)
       split by heads; kv_down_w (kv_lora + pos, C) replicated, kv_ln_w / _b (kv_lora), kv_up_w
       (H (qk + v), kv_lora) split by heads. The replicated ones see every rank's heads' gradients:
       partial over tp */
    int q_w, q_down_w, q_ln_w, q_ln_b, q_up_w, kv_down_w, kv_ln_w, kv_ln_b, kv_up_w;
    int ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b; /* the dense MLP: every layer of a dense model, the dense
                                                        layers only (MT_LAYERS_DENSE) of a MoE model */
    int lnf_w, lnf_b;
    int router_w;                           /* MoE: (L_moe, E, C) replicated router, MoE layers only */
    int efc_w, efc_b, efcproj_w, efcproj_b; /* MoE experts: (L_moe * E/ep, ...) one expert's fc / fcproj shard */
    /* MoE shared experts (spec.moe_shared): a tensor-parallel MLP of width Fs in each MoE layer (stacked over
       the MoE layers, MT_LAYERS_MOE), sharded as fc_w / fcproj_w: shared_fc_w (L_moe, fcs_rows, C) split by
       rows ([gate; up] blocks under SwiGLU), shared_fcproj_w (L_moe, C, Fs) by columns; spec.moe_shared_gate:
       shared_gate_w (L_moe, 1, C) replicated (every tp rank computes the gate of all N tokens: a complete
       gradient, as the router's) */
    int sfc_w, sfcproj_w, sgate_w;
} mt_param_index;

typedef struct {
    mt_layer_spec spec;    /* what the layer is made of (layer_spec.h): the tensors below follow from it */
    mt_param_tensor t[MT_MAX_PARAM_TENSORS];
    int n_tensors;
    mt_param_index idx;
    size_t n_elems;        /* buffer length in elements, alignment padding included */
    size_t n_params;       /* real parameters (no padding) */
    /* model dims used by the layout */
    int L, C, H, KV, D, F, V, Vp, T, max_pos;
    int qkv_rows;          /* (H + 2*KV) * D */
    int o_cols;            /* the output projection's input: H * D (H * v_dim under MLA) */
    int fc_rows;           /* F for gelu, 2F for swiglu ([gate; up]) */
    /* tensor parallelism: the same dims on one tp rank ("_r"), = the full ones when tp = 1 */
    int tp;                /* parallel.tensor */
    int sp;                /* sequence parallelism (tp > 1 and parallel.sequence_parallel) */
    int cp;                /* parallel.context: each rank's activations hold T / cp tokens per sequence
                              (two chunks of T / (2 cp): train/model.h, context parallelism) */
    int H_r, KV_r, F_r;    /* H/tp, KV/tp, F/tp */
    int Vp_r;              /* Vp/tp vocabulary rows (Vp is a multiple of 128*tp) */
    int qkv_rows_r;        /* (H_r + 2*KV_r) * D */
    int o_cols_r;          /* o_cols / tp */
    int fc_rows_r;         /* F_r or 2*F_r */
    /* pipeline parallelism (mt_param_layout_build_stage): L above is the stage's local layer
       count; the full-model build has pp = vpp = 1, stage 0, both ends */
    int L_global;          /* model.layers */
    int pp, vpp, stage;    /* parallel.pipeline, parallel.virtual_pipeline, this stage */
    int Lc;                /* layers per model chunk: L / vpp (L_global / (pp * vpp) when even); L = vpp * Lc
                              less the lacks below; a chunk's activation slot holds Lc layers */
    int lack_first;        /* places of chunk 0 that hold no layer: 1 on stage 0 when the embedding counts as
                              a layer with interleaving (parallel.embedding_in_split, virtual_pipeline > 1) */
    int lack_last;         /* the same for chunk vpp - 1 on the last stage and the loss (loss_in_split) */
    int layer0;            /* global index of the first layer of this stage's first chunk: the layers of the
                              stages before it (mt_recipe_chunk_first_layer; stage * Lc when even) */
    int round;             /* places of one round of virtual stages (all stages' chunk k): pp * Lc, which is
                              L_global / vpp when even */
    int has_embed;         /* stage 0: wte (+ wpe) and the embedding */
    int has_head;          /* last stage: final norm, output layer (lm_head, or a copy of wte), loss */
    /* mixture of experts (model.moe.experts > 0): a MoE layer's MLP (every layer's, or those of
       model.moe.layer_freq / layer_pattern) is E experts of the dense MLP's kind, Fe wide (expert tensor
       parallelism = tp: each expert split over tp as the dense MLP is), E / ep of them on this rank
       (parallel.expert = ep), and a router (E, C) */
    int moe;               /* 1: MoE layers in the model (model.moe.experts > 0; a stage may hold none) */
    /* the layer kinds (mt_recipe_moe_layer): kind 0 dense MLP, kind 1 MoE. A dense model's layers are all
       kind 0 and its MLP tensors MT_LAYERS_EVERY */
    int n_kind[2];         /* the stage's dense / MoE layers */
    int n_kind_global[2];  /* the model's */
    int act_kind[2];       /* MoE models: activation slices of each kind's MLP arrays, the most any model
                              chunk of the stage holds */
    unsigned char layer_moe[MT_LAYERS_MAX]; /* global layer g is a MoE layer */
    unsigned char layer_no_rope[MT_LAYERS_MAX]; /* global layer g attends without RoPE (mt_recipe_no_rope_layer) */
    short slot[MT_LAYERS_MAX];              /* local layer l's slot in its kind's parameter stacks */
    short act_slot[MT_LAYERS_MAX];          /* ... and in its kind's activation arrays (chunk-relative) */
    short slot_layer[2][MT_LAYERS_MAX];     /* kind k's local slot s -> local layer */
    int Fe, Fe_r;          /* the experts' width (model.moe.ffn_hidden, or F) and its tp shard */
    int efc_rows, efc_rows_r; /* Fe or 2 Fe (SwiGLU), and per tp rank */
    int E, E_r, ep, top_k; /* experts, experts on this rank (E / ep), ep, experts per token */
    int Fs, Fs_r;          /* shared experts' width (model.moe.shared_ffn; 0 = none) and its tp share */
    int fcs_rows, fcs_rows_r; /* their fc rows: Fs (2 Fs under SwiGLU), and per tp rank */
    int moe_expert_bias;   /* model.moe.expert_bias: the router's per-layer expert bias (state, not a parameter) */
    int moe_cap;           /* capacity per expert per SEQUENCE: ceil(capacity_factor * T * top_k / E),
                              0 = dropless (docs/moe.md: the drop rule) */
    int ep_rank;           /* which experts this rank holds (set by the model / checkpoint code; 0 in
                              the pure build: shapes never depend on it) */
    int recompute;         /* training.recompute = full: how many layers of each model chunk (Lc layers)
                              are recomputed, the first ones (all of them for the uniform method; the
                              block method's training.recompute_num_layers); 0 = none. The activation
                              layout keeps every layer's input (resid), ONE shared slice of the other
                              activations for the recomputed layers, and its own slice for each
                              of the others (mt_act_slice) */
    int recompute_attn;    /* training.recompute = selective: the attention core's outputs (atty, the
                              logsumexp) live in ONE shared slice; backward reruns the core from the
                              layer's saved qkv just before the layer's attention backward */
} mt_param_layout;

/* Slice of the per-layer activation arrays (all but resid) of chunk-relative layer j. */
static inline int mt_act_slice(const mt_param_layout *pl, int j) {
    return pl->recompute ? (j < pl->recompute ? 0 : 1 + j - pl->recompute) : j;
}
static inline int mt_act_slices(const mt_param_layout *pl) {
    return pl->recompute ? 1 + pl->Lc - pl->recompute : pl->Lc;
}
/* Slice of the attention core's outputs (atty, lse) of chunk-relative layer j, and their count. */
static inline int mt_act_attn_slice(const mt_param_layout *pl, int j) {
    return pl->recompute_attn ? 0 : mt_act_slice(pl, j);
}
static inline int mt_act_attn_slices(const mt_param_layout *pl) {
    return pl->recompute_attn ? 1 : mt_act_slices(pl);
}

/* Global slice index of local slice s of stacked tensor ti: the global layer for ordinary tensors
 * (MT_LAYERS_DENSE / _MOE: the kind's global slot, the count of the model's layers of that kind before
 * it); for expert tensors global_slot * E + (global expert index), so the global tensor is
 * (MoE layers * E, rows, cols) in checkpoints and init streams. */
int mt_param_global_slice(const mt_param_layout *pl, int ti, int s);
/* Global slice count of stacked tensor ti's layers: model.layers, or its kind's layers in the model. */
int mt_param_global_layers(const mt_param_layout *pl, int ti);

/* Model chunk k of the stage: its first local layer and its layer count (Lc, less the lacks of
 * chunk 0 and chunk vpp - 1; possibly 0). */
static inline int mt_param_chunk_l0(const mt_param_layout *pl, int k) {
    return k > 0 ? k * pl->Lc - pl->lack_first : 0;
}
static inline int mt_param_chunk_layers(const mt_param_layout *pl, int k) {
    return pl->Lc - (k == 0 ? pl->lack_first : 0) - (k == pl->vpp - 1 ? pl->lack_last : 0);
}
/* Global layer index of local layer l: chunk k of stage s holds the layers of virtual stage k*pp + s
 * (Megatron's interleaved layout): its place q = l + lack_first among the stage's vpp * Lc places is
 * place q % Lc of chunk k = q / Lc, round k's places from the stage's layer0 on, less the embedding's
 * place on stage 0 (lack_first); with uneven stages without interleaving (one chunk) layer0 + l; l
 * itself when pp = 1. */
static inline int mt_param_global_layer(const mt_param_layout *pl, int l) {
    if (pl->pp <= 1) return l;
    const int q = l + pl->lack_first;
    return (q / pl->Lc) * pl->round + pl->layer0 + q % pl->Lc - pl->lack_first;
}

/* Local layer l: a MoE layer?, and its slot in its kind's stacks (mt_param_offset of a MT_LAYERS_DENSE /
 * _MOE tensor takes the slot; expert tensors slot * E_r + local expert). */
static inline int mt_param_layer_is_moe(const mt_param_layout *pl, int l) {
    return pl->layer_moe[mt_param_global_layer(pl, l)];
}
static inline int mt_param_layer_slot(const mt_param_layout *pl, int l) { return pl->slot[l]; }

/* Local layer l attends without RoPE (model.no_rope_layers, by its global index) */
static inline int mt_param_layer_no_rope(const mt_param_layout *pl, int l) {
    return pl->layer_no_rope[mt_param_global_layer(pl, l)];
}

/* The layout of one tp rank (all ranks have the same shapes); errors name the dimension that
 * does not split over parallel.tensor. */
mt_status mt_param_layout_build(const mt_recipe *r, mt_param_layout *pl);
/* The layout of pipeline stage `stage` of parallel.pipeline (with parallel.virtual_pipeline
 * chunks): its layers (L_global / pp, or the uneven split's mt_recipe_stage_layers), wte (+ wpe)
 * on stage 0, the final norm and lm_head on the last stage, and a copy of wte there when
 * embeddings are tied. Errors: layers % (pp * vpp); an uneven split that does not add up or leaves
 * a stage empty; with interleaving, the layers and the counted embedding / loss % (pp * vpp), and
 * first / last stage counts. */
mt_status mt_param_layout_build_stage(const mt_recipe *r, int stage, mt_param_layout *pl);
/* The distributed optimizer pads the dense gradient buffer to a multiple of shards[0] *
 * MT_PARAM_ALIGN elements: moves the expert tensors (which follow it) past that padding, so the
 * expert buffer starts where the dense one ends (core/model/opt_layout.h). Call before
 * mt_opt_layout_build with the same shards; a no-op for dense models. */
void mt_param_layout_place_buffers(mt_param_layout *pl, const int shards[2]);
/* Element index in the FULL one-layer slice of tensor ti of element (i, j) of tp rank
 * `tp_rank`'s shard: what weight init draws, so a tp run starts from the serial weights. */
size_t mt_param_full_index(const mt_param_layout *pl, int ti, int tp_rank, int i, int j);
/* Element offset of layer l's slice of tensor ti. */
static inline size_t mt_param_offset(const mt_param_layout *pl, int ti, int l) {
    const mt_param_tensor *t = &pl->t[ti];
    return t->offset + (size_t)l * t->rows * t->cols;
}

/* Activations of one micro-batch of B sequences of T tokens (T / cp local tokens under context
 * parallelism: T below is then the local length), as byte offsets into one buffer. Per-layer arrays hold L consecutive slices (a pipeline stage: Lc, one model chunk,
 * and no head buffers except on the last stage). "act" = compute dtype. Shapes are one tp
 * rank's ("_r" dims of mt_param_layout): tensor-parallel regions (qkv .. fch_act, logits)
 * hold all N tokens and 1/tp of the features; the residual stream and the norms hold N_r rows:
 * all N, or 1/tp of the flattened token rows b*T+t under sequence parallelism. */
typedef struct {
    size_t tokens, targets;        /* (B*T) i32 */
    size_t resid;                  /* (L+1, N_r, C) act: residual stream entering each layer, and the last output */
    size_t ln1, ln1_mean, ln1_rstd;/* (L, N_r, C) act; (L, N_r) f32 x2 */
    size_t qkv;                    /* (L, N, qkv_rows_r) act (q, k normed and rotated, as the spec says) */
    size_t qk_in;                  /* spec.qk_norm: (L, N (H_r + KV_r), D) act, the q rows (N H_r of them)
                                      then the k rows before their norm; else 0 bytes */
    size_t qk_mean, qk_rstd;       /* (L, N (H_r + KV_r)) f32 each */
    size_t lse;                    /* (L, B, H_r, T) f32: attention logsumexp per query row */
    size_t atty;                   /* (L, N, H_r*D) act */
    size_t resid_mid;              /* (L, N_r, C) act */
    size_t ln2, ln2_mean, ln2_rstd;
    size_t fch;                    /* (L, N, fc_rows_r) act; a MoE model: (act_kind[0], ...), its dense layers'
                                      slices (act_slot) */
    size_t fch_act;                /* (L, N, F_r) act; likewise */
    size_t lnf, lnf_mean, lnf_rstd;/* (N_r, C) act; (N_r) f32 x2 */
    size_t logits;                 /* (N, Vp_r) act; overwritten by dlogits */
    size_t losses;                 /* (N) f32 */
    size_t xent_stats;             /* (3, N) f32 vocab-parallel softmax statistics (tp > 1 only) */
    size_t scalars;                /* (2) f32: [0] sum of token losses over the step's micro-batches,
                                      [1] sum of squared gradients (this rank's part) */
    /* backward scratch, one layer's worth, reused */
    size_t dresid;                 /* (N_r, C) act */
    size_t dln;                    /* (N, C) act: input gradient of a column-parallel layer (partial over tp) */
    size_t dtmp;                   /* (N, C) act: attention / mlp output projection (partial over tp) */
    size_t dqkv;                   /* (N, qkv_rows_r) act */
    size_t datty;                  /* (N, H_r*D) act */
    size_t delta;                  /* (B, H_r, T) f32: attention rowsum(datty * atty) */
    size_t dfch;                   /* (N, fc_rows_r) act */
    size_t dfch_act;               /* (N, F_r) act */
    /* context-parallel ring scratch (cp > 1 only, else 0 bytes) */
    size_t cp_kv;                  /* (2, N, 2 KV_r D) act: packed K / V blocks in flight */
    size_t cp_dkv;                 /* (3, N, 2 KV_r D) act: this rank's own dK / dV, and two partials travelling back */
    /* sequence-parallel scratch (SP only, else 0 bytes) */
    size_t sp_full;                /* (N, C) act: allgathered activations / gradients */
    size_t sp_slice;               /* (N_r, C) act: reduce-scattered partial sums */
    /* mixture of experts (pl->moe; else 0 bytes). S = dispatch rows of this rank (its N tokens'
       kept assignments, at most N * top_k), R = expert rows it computes (at most ep * E_r * rows
       any one source can send one expert: N, or B * moe_cap). The per-layer arrays ("L" below) hold
       act_kind[1] slices, one per MoE layer of the chunk (act_slot); h / g are Fe_r wide (efc_rows_r) */
    size_t moe_logits;             /* (L, N, E) act router logits */
    size_t moe_probs;              /* (L, N, E) f32 softmax */
    size_t moe_topi;               /* (L, N, k) i32 chosen experts */
    size_t moe_topw;               /* (L, N, k) f32 their weights (0 when dropped) */
    size_t moe_pos;                /* (L, N, k) i32 row in the dispatch layout, -1 dropped */
    size_t moe_counts;             /* (L, 2E + ep*E_r) i32: kept per expert, routed per expert, and
                                      the rows received from each ep rank per local expert */
    size_t moe_xin;                /* (L, R, C) act expert inputs (expert-major, source-minor) */
    size_t moe_h;                  /* (L, R, fc_rows_r) act */
    size_t moe_g;                  /* (L, R, F_r) act */
    size_t moe_ysend;              /* (L, S, C) act expert outputs back in dispatch layout (partial over tp) */
    size_t moe_send;               /* (S, C) act scratch: dispatch buffer */
    size_t moe_recv;               /* (R, C) act scratch: received rows (ep > 1) */
    size_t moe_ye;                 /* (R, C) act scratch: expert outputs / their gradients */
    size_t moe_dh;                 /* (R, fc_rows_r) act scratch */
    size_t moe_dg;                 /* (R, F_r) act scratch */
    size_t moe_dlogits;            /* (N, E) act scratch */
    size_t moe_dw;                 /* (N, k) f32 scratch: gradient of the combine weights */
    size_t moe_stats;              /* (MT_MOE_STATS + 2E) f32: the step's MoE sums (model_moe.h) */
    /* MoE shared experts (spec.moe_shared; else 0 bytes): per layer the fc output and its activation (all N
       tokens, this rank's Fs_r units), with the gate its output before the gate (partial over tp) and the
       gate; one layer's scratch for their gradients */
    size_t moe_sh;                 /* (L, N, fcs_rows_r) act */
    size_t moe_sg;                 /* (L, N, Fs_r) act */
    size_t moe_sy;                 /* (L, N, C) act with the gate; without it one layer's scratch (N, C) */
    size_t moe_sgate;              /* (L, N) f32 sigmoid(x . w_gate) (gate only) */
    size_t moe_sdh;                /* (N, fcs_rows_r) act scratch */
    size_t moe_sdg;                /* (N, Fs_r) act scratch */
    size_t moe_sdz;                /* (N) f32 scratch: the gate logits' gradient (gate only) */
    size_t moe_auxcnt;             /* (L_moe slices, B, E) i32: the load-balancing loss's routing counts (per sequence) */
    size_t moe_bias;               /* (L, E) f32: the expert bias (model.moe.expert_bias) */
    size_t moe_bias_cnt;           /* (L, E) f32: its step's token counts */
    /* multi-latent attention (spec.mla; else 0 bytes): per layer the latents before and after
       their norms and the norms' statistics (q's only with q_lora; the normed ones only with
       spec.mla_norm); one layer's scratch for the up projections' outputs (and their gradients),
       the shared rotated key part, the compacted attention output and the latents' gradients */
    size_t mla_qc, mla_qcn, mla_qc_mean, mla_qc_rstd;     /* (L, N, q_lora) act x2; (L, N) f32 x2; without a
                                                             q latent, mla_qcn / _mean / _rstd: the norm fused
                                                             into linear_q_proj, (L, N_r, C) and (L, N_r) */
    size_t mla_kvc, mla_kvcn, mla_kvc_mean, mla_kvc_rstd; /* (L, N, kv_lora) act x2; (L, N) f32 x2 */
    size_t mla_q;                  /* (N, H_r (qk + pos)) act */
    size_t mla_kv;                 /* (N, H_r (qk + v)) act */
    size_t mla_kpe;                /* (N, pos) act */
    size_t mla_o;                  /* (N, H_r v) act: the attention output without its padding */
    size_t mla_dlat, mla_dc;       /* (N, max(q_lora, kv_lora)) act each */
    size_t mla_dxq;                /* (N_r, C) act: the fused q norm's input gradient (no q latent) */
    /* zero-centred gamma (spec.norm.one_plus; else 0 bytes): ones, and the 1 + w a norm applies */
    size_t norm_ones, norm_w1;     /* (max(C, D)) act each; norm_w1 under zero-centred gamma only */
    int moe_S, moe_R;
    size_t n_bytes;                /* total */
    int B, T, N;
    int N_r;                       /* rows of the residual stream on this rank: N, or N/tp with SP */
} mt_act_layout;

/* Forward FLOPs per token of the model's pieces (2 per multiply-add), from the layout's
 * shapes (full, not per rank). moe_experts > 0: a MoE layer's MLP is top_k experts' MLPs (width Fe)
 * plus the router; dense_layer the same layer with the dense MLP (width F). */
typedef struct {
    double layer;     /* one transformer layer: qkv, proj, MLP and the attention core (a MoE layer's when
                         moe_experts > 0) */
    double dense_layer; /* one layer with the layout's dense MLP (= layer for a dense model) */
    double attn_core; /* of which the attention scores and weighted sum (full T x T square) */
    double head;      /* the output layer: logits over the padded vocabulary */
} mt_model_fwd_flops;
void mt_model_fwd_flops_per_token(const mt_param_layout *pl, int moe_experts, int moe_top_k,
                                  mt_model_fwd_flops *f);

/* Forward FLOPs per token per layer a recompute kind reruns: full the whole layer (f->layer),
 * selective the attention core (f->attn_core), none 0. */
double mt_model_recompute_fwd_flops(const mt_model_fwd_flops *f, mt_recompute rc);
/* Training FLOPs of one sequence of T tokens (forward + backward) of the WHOLE model (any stage's
 * layout gives the same number): Megatron's formula generalised to GQA / SwiGLU; recompute rc of
 * every layer adds its rerun forward work (mt_model_recompute_fwd_flops; the output layer is
 * never recomputed) (model_flops.c). */
double mt_model_flops_per_seq(const mt_param_layout *pl, mt_recompute rc);
/* FLOPs of n_seqs sequences: model_flops without recomputation (the numerator of MFU), and
 * hardware_flops with the recomputation training.recompute does (full: pl->recompute of each
 * chunk's Lc layers rerun their forward; selective, pl->recompute_attn: every layer's attention
 * core): Megatron's TFLOP/s and HFU. Either pointer may be NULL. */
void mt_model_flops_per_iter(const mt_param_layout *pl, double n_seqs, double *model_flops, double *hardware_flops);

/* Width of the model's ones (mt_layer_spec_norm_ones): the widest norm, max(C, D, MLA's latents). */
static inline int mt_norm_ones_width(const mt_param_layout *pl) {
    int w = pl->C > pl->D ? pl->C : pl->D;
    if (pl->spec.q_lora > w) w = pl->spec.q_lora;
    if (pl->spec.kv_lora > w) w = pl->spec.kv_lora;
    return w;
}

void mt_act_layout_build(const mt_param_layout *pl, int B, mt_dtype act, mt_act_layout *al);

#endif
