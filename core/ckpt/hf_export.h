/* hf_export.h — a save as a Hugging Face transformers model folder: GPT2LMHeadModel for arch gpt,
 * LlamaForCausalLM for arch llama, MixtralForCausalLM for llama with experts (model.moe.experts > 0),
 * Qwen2MoeForCausalLM for experts with gated shared experts.
 * `mtrain export --format hf` (cmd/cmd_export.c) calls
 * mt_hf_export; the rest is the pure mapping it is made of, exposed for the tests.
 *
 * The mapping (mtrain stores every weight as W of y = x W^T, W (out, in); ckpt_layout.h):
 *   gpt:   transformer.wte.weight (V, C) = wte rows [0, V) (the vocabulary padding dropped), wpe;
 *          transformer.h.N.ln_1/ln_2.{weight,bias}; attn.c_attn / attn.c_proj / mlp.c_fc /
 *          mlp.c_proj .weight = qkv_w^T / proj_w^T / fc_w^T / fcproj_w^T (GPT-2's Conv1D stores
 *          (in, out)), .bias = the bias row; transformer.ln_f; no lm_head (tied).
 *   llama: model.embed_tokens.weight = wte rows [0, V); model.layers.N.input_layernorm.weight =
 *          ln1_w, self_attn.{q,k,v}_proj.weight = the Q, K and V row blocks of qkv_w
 *          ([Q all heads; K all kv heads; V all kv heads]), o_proj = proj_w, post_attention_layernorm
 *          = ln2_w, mlp.gate_proj / up_proj = the first / second half of fc_w (SwiGLU's silu half is
 *          the first: core/cpu/cpu_ops_act.c), down_proj = fcproj_w; model.norm.weight = lnf_w;
 *          lm_head.weight = lm_head rows [0, V) when untied. With model.bias: the same splits of
 *          the bias rows (attention_bias and mlp_bias true).
 *   mixtral: llama's attention, norms and head; the MLP tensors are replaced by
 *          model.layers.N.block_sparse_moe.gate.weight (E, C) = router_w layer N and
 *          block_sparse_moe.experts.E.w1 / w3.weight (F, C) = the first / second half of expert_fc_w
 *          slice N*E + E (gate / up), w2.weight (C, F) = expert_fcproj_w slice N*E + E (down).
 *          Mixtral's router (softmax over every expert, top k, the k probabilities renormalised) is
 *          mtrain's default (softmax over the k selected logits: the same numbers); it routes every
 *          token (dropless), so a capacity factor used in training is not part of the exported model.
 *   qwen2_moe (shared experts with their gate, model.moe.shared_ffn + shared_gate): llama's attention (with
 *          q / k / v biases when model.qkv_bias), norms and head; model.layers.N.mlp.gate.weight = router_w
 *          layer N, mlp.experts.E.gate_proj / up_proj / down_proj = expert_fc_w halves / expert_fcproj_w,
 *          mlp.shared_expert.gate_proj / up_proj (Fs, C) = the halves of shared_fc_w layer N, down_proj
 *          (C, Fs) = shared_fcproj_w, mlp.shared_expert_gate.weight (1, C) = shared_gate_w; norm_topk_prob
 *          = !model.moe.pre_softmax.
 * RoPE needs no permutation: mtrain rotates halves (x[i], x[i + D/2]) with theta^(-2i/D), as
 * transformers' rotate_half; query head h reads kv head h / (H / KV), as repeat_kv.
 * Output tensors are listed by source tensor, then layer, so each source tensor is read once. */
#ifndef MT_HF_EXPORT_H
#define MT_HF_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "core/recipe/recipe.h"
#include "core/status.h"

#define MT_HF_NAME_MAX 96
#define MT_HF_DEFAULT_SHARD_BYTES 5000000000ull /* save_pretrained's max_shard_size "5GB" */

typedef struct {
    mt_arch arch;
    int L, C, H, KV, D, F, V, max_pos;
    int tied, bias;
    int qkv_bias; /* biases on q / k / v alone (model.qkv_bias without model.bias): Qwen2ForCausalLM */
    int norm_1p;  /* zero-centred gamma (model.norm_1p): the norm weights export as 1 + w, an ordinary norm */
    int squared_relu; /* the MLP's activation is relu(x)^2 (model.activation squared_relu): GPT-2's
                         activation_function "relu2" (transformers' ReLUSquaredActivation) */
    int E, top_k; /* experts per layer and experts per token (0, 0: dense) */
    int Fs;       /* the shared experts' total width (model.moe.shared_ffn, gated): Qwen2MoeForCausalLM; 0: none */
    int norm_topk; /* the top-k weights renormalised (model.moe.pre_softmax false): Qwen2-MoE's norm_topk_prob */
    float aux_coeff; /* the load-balancing loss weight (config.json's router_aux_loss_coef; training only) */
    float norm_eps, rope_theta, init_std;
    /* RoPE's frequency scaling, config.json's rope_scaling: Llama 3.x's (rope_type "llama3": factor, low /
       high frequency factors, original context) or position interpolation ("linear": rope_linear, 1 = none) */
    int rope_llama3;
    float rope_factor, rope_low, rope_high, rope_linear;
    int rope_orig_max;
    int bos, eos; /* token ids (the tokenizer's end-of-document id); set by the caller */
} mt_hf_model;

/* The model of a validated recipe. MT_ERR_UNSUPPORTED naming the recipe key when transformers'
 * class for the arch cannot express it (gpt: learned positions, layernorm, gelu or squared ReLU, tied, biases,
 * kv_heads = heads, no experts; llama: rope, rmsnorm, swiglu; with experts also no biases, the
 * renormalised router, every layer sparse). bos / eos are set to -1. */
mt_status mt_hf_model_from_recipe(const mt_recipe *r, mt_hf_model *m);

/* One output tensor: block rows [r0, r0 + nr) x cols [c0, c0 + nc) of layer `layer` of the
 * source tensor `src` (its (rows, cols) slice), transposed or not; shape is the HF shape. */
typedef struct {
    char name[MT_HF_NAME_MAX];
    const char *src; /* mtrain tensor name (static) */
    int layer;
    int r0, nr, c0, nc;
    int transpose;
    int n_dims;
    int64_t shape[2];
    float offset; /* added to every value on export, taken off on import: 1 for a zero-centred-gamma
                     model's norm weights, else 0 */
} mt_hf_tensor;

/* The output tensors of m, in writing order: up to max into out (may be NULL); the count. */
int mt_hf_plan(const mt_hf_model *m, mt_hf_tensor *out, int max);
/* Expected full shape (rows, cols of one layer; layers) of source tensor `src` for m, its rows
 * counted without vocabulary padding for wte / lm_head (the save has at least that many). 0 when
 * m has no such tensor. */
int mt_hf_source_shape(const mt_hf_model *m, const char *src, int64_t *layers, int64_t *rows, int64_t *cols);
/* t's values from `layer_data` (the source tensor's layer t->layer: rows x `cols` floats,
 * row-major) into out (t->nr * t->nc floats, in t's shape). */
void mt_hf_extract(const mt_hf_tensor *t, const float *layer_data, int64_t cols, float *out);
/* The inverse (import): t's values `in` (its HF shape) into its block of `layer_data`; seen (one
 * byte per element of the layer slice) marks what was written, *twice counts elements written again. */
void mt_hf_insert(const mt_hf_tensor *t, const float *in, int64_t cols, float *layer_data, uint8_t *seen,
                  uint64_t *twice);
/* fp32 values to the output dtype's little-endian bytes (bf16: round to nearest even). */
void mt_hf_convert(const float *in, size_t n, mt_dtype dt, void *out);

/* save_pretrained's sharding: tensors in order, a new shard when the next would pass max_bytes,
 * a tensor larger than max_bytes alone in its own. shard_of[i] = the shard of tensor i; returns
 * the number of shards. */
int mt_hf_shard_plan(const uint64_t *bytes, int n, uint64_t max_bytes, int *shard_of);
/* "5000000", "5GB" (10^9), "500MB", "2GiB" (2^30), "100KB", "64KiB" -> bytes (> 0).
 * MT_ERR_CONFIG naming the text otherwise. */
mt_status mt_hf_parse_size(const char *text, uint64_t *bytes);

/* hf_config.c: config.json, generation_config.json and tokenizer_config.json texts. torch_dtype:
 * "float32" | "bfloat16". eos_text: the end-of-document token's text (tokenizer_config). MT_ERR_IO
 * when a write fails. */
mt_status mt_hf_write_config(FILE *f, const mt_hf_model *m, const char *torch_dtype);
mt_status mt_hf_write_generation_config(FILE *f, const mt_hf_model *m);
mt_status mt_hf_write_tokenizer_config(FILE *f, const mt_hf_model *m, const char *tokenizer_class,
                                       const char *eos_text);
/* f written as JSON shortest text that reads back as the same float ("1e-05", "10000.0"). */
void mt_hf_json_float(FILE *f, float v);

/* hf_write.c: the whole export. */
typedef struct {
    const char *load;        /* a checkpoint folder (tracker's save) or one iter_* folder */
    int64_t iteration;       /* > 0: that save of the checkpoint folder */
    const char *output;      /* the folder to create */
    mt_dtype dtype;          /* of the weights written */
    uint64_t max_shard_bytes; /* 0: MT_HF_DEFAULT_SHARD_BYTES */
    int force;               /* replace an existing non-empty output folder */
} mt_hf_export_opts;

typedef struct {
    char save[4300];         /* the save read */
    int64_t iteration;
    char arch[16];
    int n_tensors, n_files;  /* tensors written, weight files written */
    uint64_t tensor_bytes;   /* their data bytes (the index's total_size) */
    uint64_t bytes;          /* every byte written into the folder */
    double seconds;
    char note[512];          /* e.g. why no tokenizer files were written; "" when none */
} mt_hf_export_stats;

/* Writes o->output: config.json, generation_config.json, model.safetensors (or shards
 * model-0000K-of-0000N.safetensors + model.safetensors.index.json), tokenizer files; all into
 * OUTPUT.tmp, renamed at the end, so a failure leaves nothing at OUTPUT (an existing folder is
 * replaced only with o->force, and only after the new one is complete). Errors name the save,
 * the file or the recipe key at fault. */
mt_status mt_hf_export(const mt_hf_export_opts *o, mt_hf_export_stats *s);

#endif
