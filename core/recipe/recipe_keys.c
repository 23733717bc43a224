/* recipe_keys.c — THE key table of the recipe (name, type, field, default, range, unit,
 * help, enum names) and the Megatron-style flag aliases. Loading, --set, defaults,
 * docs/recipe.md (mt_recipe_print_reference) and mt_recipe_write_yaml are driven by it.
 * Rule: to add a key, add a field to recipe.h and one row here; keep rows grouped by
 * section (write_yaml emits them in this order), nested keys (model.moe.*) last in a section. */
#include <stddef.h>

#include "core/recipe/recipe_internal.h"

#define FIELD_BYTES(f) sizeof(((mt_recipe *)0)->f)
#define ROW(nm, ty, f, def, lo, hi, unit, help, en, fl, dd) \
    { nm, ty, offsetof(mt_recipe, f), FIELD_BYTES(f), def, lo, hi, unit, help, en, fl, dd }
#define KINT(nm, f, def, lo, hi, unit, help, fl) ROW(nm, MT_KEY_INT, f, def, lo, hi, unit, help, NULL, fl, NULL)
#define KI64(nm, f, def, lo, hi, unit, help, fl) ROW(nm, MT_KEY_INT64, f, def, lo, hi, unit, help, NULL, fl, NULL)
#define KFLT(nm, f, def, lo, hi, unit, help, fl) ROW(nm, MT_KEY_FLOAT, f, def, lo, hi, unit, help, NULL, fl, NULL)
#define KBOOL(nm, f, def, help, fl) ROW(nm, MT_KEY_BOOL, f, def, 0, 1, "", help, NULL, fl, NULL)
#define KENUM(nm, f, def, names, help, fl) ROW(nm, MT_KEY_ENUM, f, def, 0, 0, "", help, names, fl, NULL)
#define KSTR(nm, f, def, help) ROW(nm, MT_KEY_STRING, f, def, 0, 0, "", help, NULL, 0, NULL)

#define BIG 1e15 /* iteration counts */

static const char *const arch_names[] = { "gpt", "llama", NULL };
static const char *const norm_names[] = { "layernorm", "rmsnorm", NULL };
static const char *const act_names[] = { "gelu", "swiglu", "squared_relu", NULL };
static const char *const pos_names[] = { "learned", "rope", NULL };
static const char *const decay_names[] = { "cosine", "linear", "constant", "inverse-square-root", "WSD", NULL };
static const char *const wsd_names[] = { "linear", "cosine", "exponential", "minus_sqrt", NULL };
static const char *const recompute_names[] = { "none", "selective", "full", NULL };
static const char *const recompute_method_names[] = { "uniform", "block", NULL };
static const char *const prec_names[] = { "fp32", "bf16", NULL };
static const char *const moe_score_names[] = { "softmax", "sigmoid", NULL };
static const char *const moe_lb_names[] = { "aux_loss", "seq_aux_loss", "none", NULL };
static const char *const backend_names[] = { "auto", "cpu", "cuda", NULL };
static const char *const tok_names[] = { "byte", "gpt2bpe", "hf", "null", "spm", "gptspm", "llama2", NULL };
static const char *const timing_option_names[] = { "minmax", "max", "all", NULL };
static const char *const rerun_mode_names[] = { "disabled", "validate_results", "report_stats", NULL };
static const char *const inject_names[] = { "correct_result", "transient_error", "persistent_error", NULL };

const mt_recipe_key mt_recipe_keys[] = {
    /* model */
    KENUM("model.arch", model.arch, "gpt", arch_names,
          "model family; sets the defaults of norm, activation, position, tie_embeddings, bias", 0),
    KINT("model.layers", model.layers, "0", 1, 1024, "", "transformer layers (L)", MT_KF_REQUIRED),
    KINT("model.hidden", model.hidden, "0", 1, 1 << 20, "", "hidden size (C)", MT_KF_REQUIRED),
    KINT("model.heads", model.heads, "0", 1, 4096, "", "attention heads (H)", MT_KF_REQUIRED),
    KINT("model.kv_heads", model.kv_heads, "auto", 0, 4096, "",
         "key/value heads; 0 or auto = heads, fewer = grouped-query attention", MT_KF_AUTO | MT_KF_FUNCTION),
    KINT("model.head_dim", model.head_dim, "auto", 0, 1 << 16, "",
         "channels of one attention head (D); 0 or auto = hidden / heads. Another value sizes the query, "
         "key and value projections H*D, KV*D and the output projection's input H*D independently of hidden "
         "(Megatron's --kv-channels)", MT_KF_AUTO),
    KINT("model.ffn_hidden", model.ffn_hidden, "auto", 0, 1 << 22, "",
         "MLP inner size (F); 0 or auto = 4*hidden for gpt, must be given for llama", MT_KF_AUTO),
    KINT("model.vocab", model.vocab, "auto", 0, 1 << 24, "tokens",
         "real vocabulary size (padded to a multiple of 128*tp internally); 0 or auto = from "
         "the tokenizer (byte: 257, gpt2bpe: 50257)", MT_KF_AUTO),
    KINT("model.seq_length", model.seq_length, "0", 1, 1 << 24, "tokens",
         "sequence length (T)", MT_KF_REQUIRED),
    KINT("model.max_position", model.max_position, "auto", 0, 1 << 24, "tokens",
         "rows of the learned position table; 0 or auto = seq_length", MT_KF_AUTO),
    ROW("model.norm", MT_KEY_ENUM, model.norm, "layernorm", 0, 0, "", "normalisation layer",
        norm_names, MT_KF_ARCH | MT_KF_FUNCTION, "gpt: `layernorm`, llama: `rmsnorm`"),
    ROW("model.activation", MT_KEY_ENUM, model.activation, "gelu", 0, 0, "", "MLP activation: gelu (tanh approximation), swiglu (gated: silu(gate) * up), "
        "squared_relu (relu(x)^2, Megatron's --squared-relu; not gated)",
        act_names, MT_KF_ARCH | MT_KF_FUNCTION, "gpt: `gelu`, llama: `swiglu`"),
    ROW("model.position", MT_KEY_ENUM, model.position, "learned", 0, 0, "",
        "position encoding", pos_names, MT_KF_ARCH | MT_KF_FUNCTION, "gpt: `learned`, llama: `rope`"),
    ROW("model.tie_embeddings", MT_KEY_BOOL, model.tie_embeddings, "true", 0, 1, "",
        "share the input embedding with the output layer", NULL, MT_KF_ARCH | MT_KF_FUNCTION,
        "gpt: `true`, llama: `false`"),
    ROW("model.bias", MT_KEY_BOOL, model.bias, "true", 0, 1, "",
        "biases in the linear layers (--disable-bias-linear: false); LayerNorm keeps its bias, as "
        "Megatron-Core's", NULL, MT_KF_ARCH | MT_KF_FUNCTION, "gpt: `true`, llama: `false`"),
    KBOOL("model.qkv_bias", model.qkv_bias, "false",
          "a bias on the query / key / value projection alone, none on the other linear layers (Megatron's "
          "--add-qkv-bias; Qwen2 / Qwen2.5, Hugging Face's Qwen2ForCausalLM); model.bias true has it anyway",
          MT_KF_FUNCTION),
    KFLT("model.norm_eps", model.norm_eps, "1e-5", 0, 1, "", "epsilon of the norm layers",
         MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KBOOL("model.norm_1p", model.norm_1p, "false",
          "zero-centred gamma: every norm weight is stored as w (initialised to 0) and applied as 1 + w "
          "(Megatron's --apply-layernorm-1p; LayerNorm or RMSNorm)", MT_KF_FUNCTION),
    KBOOL("model.qk_layernorm", model.qk_layernorm, "false",
          "a norm of model.norm's kind over head_dim on every query and key head, after the qkv projection "
          "and before RoPE, with its own weight (and LayerNorm bias) of head_dim per layer (Megatron's "
          "--qk-layernorm; OLMo-2 / Qwen3 style)", MT_KF_FUNCTION),
    KBOOL("model.qk_l2_norm", model.qk_l2_norm, "false",
          "Llama 4's weightless L2 norm on every query and key head, where model.qk_layernorm's norm goes: "
          "x * rsqrt(mean(x^2) + model.norm_eps) over head_dim, no parameters (Megatron's --qk-l2-norm; it "
          "replaces the model.qk_layernorm norm when both are set, as in Megatron's layer specs)", MT_KF_FUNCTION),
    KFLT("model.rope_theta", model.rope_theta, "10000", 0, 1e12, "", "RoPE base frequency",
         MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KFLT("model.rotary_percent", model.rotary_percent, "1.0", 0, 1, "",
         "the fraction of each query / key head's channels RoPE rotates: the first int(head_dim * this) "
         "(even), the rest pass through (Megatron's --rotary-percent)", MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KBOOL("model.rope_interleaved", model.rope_interleaved, "false",
          "RoPE rotates adjacent channel pairs (2i, 2i+1) instead of the two halves (i, i + d/2) "
          "(Megatron's --rotary-interleaved; GPT-J / Meta-Llama layout)", MT_KF_FUNCTION),
    KBOOL("model.rope_scaling", model.rope_scaling, "false",
          "Llama 3.x's RoPE frequency scaling (Megatron's --use-rope-scaling, Hugging Face's rope_type llama3): "
          "frequencies whose wavelength exceeds rope_original_max_position / rope_low_freq_factor are divided "
          "by rope_scaling_factor, those under rope_original_max_position / rope_high_freq_factor are kept, "
          "those between blended", MT_KF_FUNCTION),
    KFLT("model.rope_scaling_factor", model.rope_scaling_factor, "8.0", 1, 1e6, "",
         "Llama 3.x scaling's factor (Megatron's --rope-scaling-factor; 8 for Llama 3.1, 32 for Llama 3.2 1B / 3B)",
         MT_KF_FUNCTION),
    KFLT("model.rope_low_freq_factor", model.rope_low_freq_factor, "1.0", 0, 1e6, "",
         "Llama 3.x scaling's low_freq_factor (Megatron fixes 1)", MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KFLT("model.rope_high_freq_factor", model.rope_high_freq_factor, "4.0", 0, 1e6, "",
         "Llama 3.x scaling's high_freq_factor (Megatron fixes 4; above rope_low_freq_factor)",
         MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KINT("model.rope_original_max_position", model.rope_original_max_position, "8192", 1, 1 << 30, "",
         "Llama 3.x scaling's original context, original_max_position_embeddings (Megatron fixes 8192)",
         MT_KF_FUNCTION),
    KFLT("model.rotary_interpolation", model.rotary_interpolation, "1.0", 0, 1e6, "",
         "RoPE positions divided by this (Megatron's --rotary-seq-len-interpolation-factor, Hugging Face's "
         "rope_type linear); 1: none", MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    ROW("model.no_rope_layers", MT_KEY_STRING, model.no_rope_layers, "", 0, 0, "",
        "layers that attend without RoPE (Megatron's --no-rope-freq; Llama 4's NoPE layers): \"N\" = every N-th "
        "layer, the last of each N (layers % N == 0), or a list expression of one 0 / 1 per layer, 1 = no RoPE, "
        "as \"([0]*3+[1])*12\"; \"\" = RoPE on every layer", NULL, MT_KF_FUNCTION, NULL),
    KFLT("model.init_std", model.init_std, "0.02", 0, 10, "",
         "weights ~ normal(0, init_std); output projections also / sqrt(2*layers)", MT_KF_MIN_EXCL),
    KINT("model.moe.experts", model.moe.experts, "0", 0, 4096, "",
         "experts per MoE layer; 0 = dense MLP", MT_KF_FUNCTION),
    KINT("model.moe.top_k", model.moe.top_k, "2", 1, 4096, "", "experts each token is routed to", MT_KF_FUNCTION),
    KFLT("model.moe.capacity_factor", model.moe.capacity_factor, "1.0", 0, 1000, "",
         "expert capacity = factor * tokens * top_k / experts; 0 = no limit (dropless)", 0),
    KFLT("model.moe.aux_loss_coeff", model.moe.aux_loss_coeff, "0.01", 0, 1000, "",
         "weight of the load-balancing loss (Switch / GShard: E * sum_i f_i * P_i); 0 = none", 0),
    KFLT("model.moe.z_loss_coeff", model.moe.z_loss_coeff, "0", 0, 1000, "",
         "weight of the router z-loss (mean of logsumexp(logits)^2); 0 = none", 0),
    KINT("model.moe.layer_freq", model.moe.layer_freq, "1", 1, 1024, "",
         "layer i (from 0) is a MoE layer when i % layer_freq == 0 (1 = all; the others are dense MLPs of "
         "model.ffn_hidden)", MT_KF_FUNCTION),
    ROW("model.moe.layer_pattern", MT_KEY_STRING, model.moe.layer_pattern, "", 0, 0, "",
        "one 0 (dense) / 1 (MoE) per layer, as \"0111\" or Megatron's --moe-layer-freq expression "
        "\"([0]+[1]*3)\"; \"\" = model.moe.layer_freq decides", NULL, MT_KF_FUNCTION, NULL),
    KINT("model.moe.ffn_hidden", model.moe.ffn_hidden, "0", 0, 1 << 20, "",
         "hidden width of each expert (--moe-ffn-hidden-size); 0 = model.ffn_hidden. Dense layers keep "
         "model.ffn_hidden", MT_KF_FUNCTION),
    KBOOL("model.moe.pre_softmax", model.moe.pre_softmax, "false",
          "softmax over all experts, then top-k, weights not renormalised (false: the k weights are the "
          "softmax over the selected logits, Mixtral's and Megatron's default)", MT_KF_FUNCTION),
    KBOOL("model.moe.pad_to_capacity", model.moe.pad_to_capacity, "false",
          "pad every expert's input to its capacity (accepted: results are the same without)", 0),
    KINT("model.moe.shared_ffn", model.moe.shared_ffn, "0", 0, 1 << 20, "",
         "total width of the shared experts (Megatron's SharedExpertMLP: one MLP of this width beside the routed "
         "experts, every token through it, its output added to theirs; n shared experts of width f are "
         "shared_ffn = n * f); 0 = none", MT_KF_FUNCTION),
    KBOOL("model.moe.shared_gate", model.moe.shared_gate, "false",
          "the shared experts' output scaled per token by sigmoid(x . w_gate), w_gate a (1, hidden) weight per "
          "layer (Qwen2-MoE's shared_expert_gate); needs shared_ffn", MT_KF_FUNCTION),
    KENUM("model.moe.score_function", model.moe.score_function, "softmax", moe_score_names,
          "router scores: softmax over the experts, or sigmoid of each logit (DeepSeek-V3; weights = the chosen "
          "sigmoids over their sum when top_k > 1)", MT_KF_FUNCTION),
    KFLT("model.moe.topk_scaling_factor", model.moe.topk_scaling_factor, "1.0", 0, 1e6, "",
         "the routing weights times this (Megatron's --moe-router-topk-scaling-factor; 1: none)",
         MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KBOOL("model.moe.expert_bias", model.moe.expert_bias, "false",
          "aux-loss-free load balancing (DeepSeek-V3): a per-layer, per-expert bias added to the scores for the "
          "top-k choice only, moved by bias_update_rate * sign(mean load - load) after every step (needs "
          "score_function sigmoid)", MT_KF_FUNCTION),
    KFLT("model.moe.bias_update_rate", model.moe.bias_update_rate, "0.001", 0, 1000, "",
         "the expert bias's step per optimizer step", 0),
    KINT("model.moe.num_groups", model.moe.num_groups, "0", 0, 64, "",
         "group-limited routing: the experts form this many groups (consecutive experts); 0 or 1: off",
         MT_KF_FUNCTION),
    KINT("model.moe.group_topk", model.moe.group_topk, "0", 0, 64, "",
         "groups kept per token (those with the largest sum of their top top_k / group_topk scores); "
         "the top_k experts are chosen among them", MT_KF_FUNCTION),
    KENUM("model.moe.load_balancing", model.moe.load_balancing, "aux_loss", moe_lb_names,
          "the load-balancing loss (weight aux_loss_coeff): aux_loss over the micro-batch, seq_aux_loss per "
          "sequence then averaged (DeepSeek-V2 / V3), none", 0),
    KBOOL("model.moe.apply_probs_on_input", model.moe.apply_probs_on_input, "false",
          "the routing weight scales the token's input to its expert, expert(p x), and the output is added with "
          "weight 1 (Megatron's moe_apply_probs_on_input, Llama 4; top_k 1 only); false: p expert(x)", MT_KF_FUNCTION),
    KBOOL("model.mup.enabled", model.mup.enabled, "false",
          "muP as Megatron-Core's --use-mup: width multiplier m = hidden / mup.base_hidden; hidden matrices "
          "initialised with std init_std / sqrt(m) (output projections also / sqrt(2*layers)), embeddings (and an "
          "untied output layer) with init_std; Adam lr and eps of hidden matrices / m (not embeddings, output "
          "layer, biases, norms); softmax scale sqrt(mup.base_head_dim or 1) / head_dim^mup.attn_scale_power; "
          "logits times mup.output_mult, embeddings times mup.embedding_mult", MT_KF_FUNCTION),
    KINT("model.mup.base_hidden", model.mup.base_hidden, "0", 0, 1 << 20, "",
         "muP base width (Megatron's --mup-base-hidden-size); 0 = model.hidden (m = 1)", MT_KF_FUNCTION),
    KFLT("model.mup.embedding_mult", model.mup.embedding_mult, "1.0", 0, 1e6, "",
         "muP: the embedding output times this (--mup-embedding-mult)", MT_KF_FUNCTION),
    KFLT("model.mup.output_mult", model.mup.output_mult, "1.0", 0, 1e6, "",
         "muP: the logits times this (--mup-output-mult); 1 means 1 / m, as Megatron's auto setting", MT_KF_FUNCTION),
    KFLT("model.mup.base_head_dim", model.mup.base_head_dim, "0", 0, 1e6, "",
         "muP: softmax scale sqrt(this) / head_dim^attn_scale_power (--mup-base-head-dim); 0 = unset: "
         "1 / head_dim^attn_scale_power", MT_KF_FUNCTION),
    KFLT("model.mup.attn_scale_power", model.mup.attn_scale_power, "1.0", 0, 10, "",
         "muP: the power of head_dim in the softmax scale (--mup-attn-scale-power; 0.5 = standard attention)", MT_KF_FUNCTION),
    KBOOL("model.mla.enabled", model.mla.enabled, "false",
          "multi-latent attention (DeepSeek-V2/V3; Megatron's MLASelfAttention): queries from a low-rank "
          "latent (or a plain projection), keys and values from one shared latent, a rotated part per head",
          MT_KF_FUNCTION),
    KINT("model.mla.q_lora_rank", model.mla.q_lora_rank, "0", 0, 1 << 20, "",
         "rank of the query latent (q down projection, its norm, q up projection); 0 = a plain q projection", MT_KF_FUNCTION),
    KINT("model.mla.kv_lora_rank", model.mla.kv_lora_rank, "32", 1, 1 << 20, "",
         "rank of the shared key / value latent", MT_KF_FUNCTION),
    KINT("model.mla.qk_head_dim", model.mla.qk_head_dim, "128", 1, 1 << 16, "",
         "query / key channels per head without position information", MT_KF_FUNCTION),
    KINT("model.mla.qk_pos_head_dim", model.mla.qk_pos_head_dim, "64", 2, 1 << 16, "",
         "rotated query / key channels per head (the key's are one part shared by every head)", MT_KF_FUNCTION),
    KINT("model.mla.v_head_dim", model.mla.v_head_dim, "128", 1, 1 << 16, "", "value channels per head", MT_KF_FUNCTION),
    KBOOL("model.mla.rope_yarn", model.mla.rope_yarn, "true",
          "YaRN rotary embedding (Megatron's --rope-type yarn, its MLA default); false: plain RoPE", MT_KF_FUNCTION),
    KFLT("model.mla.rotary_scaling_factor", model.mla.rotary_scaling_factor, "1.0", 0, 1e6, "",
         "YaRN's scaling factor (<= 1: YaRN is plain RoPE)", MT_KF_MIN_EXCL | MT_KF_FUNCTION),
    KFLT("model.mla.mscale", model.mla.mscale, "1.0", 0, 1e6, "", "YaRN's mscale", MT_KF_FUNCTION),
    KFLT("model.mla.mscale_all_dim", model.mla.mscale_all_dim, "0.0", 0, 1e6, "",
         "YaRN's mscale_all_dim; also the softmax scale: (0.1 * mscale_all_dim * ln(rotary_scaling_factor) + 1)^2 / sqrt(qk_head_dim + qk_pos_head_dim), whatever the rope type", MT_KF_FUNCTION),
    KINT("model.mla.yarn_original_max_position", model.mla.yarn_original_max_position, "4096", 1, 1 << 30, "",
         "YaRN's original_max_position_embeddings", MT_KF_FUNCTION),
    KFLT("model.mla.yarn_beta_fast", model.mla.yarn_beta_fast, "32", 0, 1e6, "", "YaRN's beta_fast", MT_KF_FUNCTION),
    KFLT("model.mla.yarn_beta_slow", model.mla.yarn_beta_slow, "1", 0, 1e6, "", "YaRN's beta_slow", MT_KF_FUNCTION),

    /* parallel */
    KINT("parallel.tensor", parallel.tensor, "1", 1, 1024, "ranks", "tensor-parallel size (tp)", 0),
    KINT("parallel.pipeline", parallel.pipeline, "1", 1, 4096, "ranks", "pipeline-parallel size (pp)", 0),
    KINT("parallel.virtual_pipeline", parallel.virtual_pipeline, "1", 1, 1024, "",
         "model chunks per pipeline rank (interleaved 1F1B when > 1)", 0),
    KINT("parallel.first_stage_layers", parallel.first_stage_layers, "auto", 0, 1 << 20, "layers",
         "transformer layers of the first pipeline stage; the other layers split evenly over the other stages; "
         "auto (0) = an even split (Megatron's rule: docs/pipeline.md)", MT_KF_AUTO),
    KINT("parallel.last_stage_layers", parallel.last_stage_layers, "auto", 0, 1 << 20, "layers",
         "transformer layers of the last pipeline stage, as first_stage_layers", MT_KF_AUTO),
    KBOOL("parallel.embedding_in_split", parallel.embedding_in_split, "false",
          "the input embedding counts as one layer when splitting the layers over the stages (the first stage, "
          "interleaved its first model chunk, holds one layer fewer)", 0),
    KBOOL("parallel.loss_in_split", parallel.loss_in_split, "false",
          "the output layer and loss count as one layer in the split (the last stage, interleaved its last model "
          "chunk, holds one layer fewer)", 0),
    KINT("parallel.data", parallel.data, "auto", 0, 1 << 20, "ranks",
         "data-parallel size (dp); auto (0) = world / (tp*pp*cp)", MT_KF_AUTO),
    KINT("parallel.expert", parallel.expert, "1", 1, 4096, "ranks", "expert-parallel size (ep)", 0),
    KINT("parallel.context", parallel.context, "1", 1, 1024, "ranks", "context-parallel size (cp)", 0),
    KBOOL("parallel.sequence_parallel", parallel.sequence_parallel, "false",
          "shard norms/dropout along the sequence across the tp group (needs tp > 1)", 0),
    KBOOL("parallel.distributed_optimizer", parallel.distributed_optimizer, "false",
          "shard the optimizer state across dp (ZeRO-1)", 0),
    KBOOL("parallel.overlap_grad_reduce", parallel.overlap_grad_reduce, "false",
          "reduce each gradient bucket on a communication thread as soon as backward has finished its "
          "gradients (the same sums, bit for bit)", 0),
    KBOOL("parallel.overlap_param_gather", parallel.overlap_param_gather, "false",
          "distributed optimizer: gather each parameter bucket during the next forward, waited on just "
          "before the first layer that reads it (needs overlap_grad_reduce)", 0),
    KI64("parallel.ddp_bucket_size", parallel.ddp_bucket_size, "auto", 0, BIG, "elements",
         "gradient bucket size for overlap_grad_reduce; auto (0) = Megatron's max(40M, 1M * dp*cp)", MT_KF_AUTO),
    KINT("parallel.timeout_s", parallel.timeout_s, "300", 1, 7 * 86400, "s",
         "collective timeout before a rank declares its peers dead", 0),

    /* training */
    KINT("training.micro_batch", training.micro_batch, "1", 1, 1 << 20, "sequences",
         "sequences per micro-batch per data-parallel rank", 0),
    KINT("training.global_batch", training.global_batch, "auto", 0, 1 << 30, "sequences",
         "sequences per optimizer step; 0 or auto = micro_batch * dp", MT_KF_AUTO),
    KINT("training.eval_global_batch", training.eval_global_batch, "auto", 0, 1 << 30, "sequences",
         "sequences per evaluation iteration (Megatron's --eval-global-batch-size); 0 or auto = training.global_batch; "
         "a multiple of micro_batch * dp", MT_KF_AUTO),
    KSTR("training.batch_schedule", training.batch_schedule, "",
         "step batch-size schedule 'THRESHOLD:BATCH ...', thresholds in tokens with K/M/B/T suffixes, e.g. "
         "'0:384 200B:768' (Megatron's --step-batch-size-schedule); \"\" = off"),
    KI64("training.iters", training.iters, "0", 0, BIG, "steps",
         "optimizer steps; 0 = derive from training.tokens", 0),
    KI64("training.samples", training.samples, "0", 0, BIG, "sequences",
         "training length in samples: iters = this / global_batch (Megatron's --train-samples); 0 = unused", 0),
    KINT("training.rampup_start", training.rampup_start, "0", 0, 1 << 30, "sequences",
         "batch-size ramp-up: the first global batch; 0 = off (Megatron's --rampup-batch-size START INC SAMPLES)", 0),
    KINT("training.rampup_increment", training.rampup_increment, "0", 0, 1 << 30, "sequences",
         "batch-size ramp-up: the global batch grows by this, evenly over rampup_samples", 0),
    KI64("training.rampup_samples", training.rampup_samples, "0", 0, BIG, "sequences",
         "batch-size ramp-up: samples over which the batch grows to training.global_batch", 0),
    KI64("training.tokens", training.tokens, "0", 0, 1e18, "tokens",
         "tokens to train on; 0 = derive from training.iters", 0),
    ROW("training.seed", MT_KEY_UINT64, training.seed, "1234", 0, 0, "",
        "seed of initialisation and data order", NULL, 0, NULL),
    KENUM("training.precision", training.precision, "fp32", prec_names,
          "fp32, or bf16 weights/activations with fp32 master weights and gradients", 0),
    KENUM("training.recompute", training.recompute, "none", recompute_names,
          "activation recomputation: none, selective (rerun the attention core in backward: its output and "
          "logsumexp are not kept per layer), full (keep each recomputed layer's input, rerun its forward in backward)", 0),
    KENUM("training.recompute_method", training.recompute_method, "uniform", recompute_method_names,
          "full recompute: uniform (every layer, units of training.recompute_num_layers) or block (the first "
          "training.recompute_num_layers layers of each pipeline model chunk)", 0),
    KINT("training.recompute_num_layers", training.recompute_num_layers, "1", 0, 1024, "layers",
         "full recompute: uniform: layers per recompute unit (only 1 is implemented); block: layers recomputed "
         "per model chunk", 0),
    KENUM("training.backend", training.backend, "auto", backend_names,
          "compute backend; auto = cuda when a GPU is usable, else cpu", 0),
    KINT("training.threads", training.threads, "auto", 0, 4096, "",
         "CPU threads per rank; 0 or auto = cores / local ranks", MT_KF_AUTO),
    KENUM("training.rerun_mode", training.rerun_mode, "disabled", rerun_mode_names,
          "Megatron's rerun state machine: disabled (a non-finite loss skips the update), validate_results (a "
          "rejected loss reruns the iteration: not reproduced = transient fault, exit 17; reproduced = save and "
          "exit 16 for a rerun on other hardware), report_stats (every iteration rerun, differences reported)", 0),
    KINT("training.error_injection_rate", training.error_injection_rate, "0", 0, 1 << 30, "calls",
         "validate_results: reject 1 in this many loss validations as if faulty (0 = never)", 0),
    KENUM("training.error_injection_type", training.error_injection_type, "transient_error", inject_names,
          "what an injected rejection turns out to be: transient_error (not reproduced in place), "
          "persistent_error (reproduced in place, not on other hardware), correct_result (reproduced everywhere)", 0),
    KBOOL("training.check_for_nan_in_loss", training.check_nan_in_loss, "true",
          "validate_results: each rank's loss is rejected when NaN or Inf (fatal)", 0),
    KBOOL("training.check_for_spiky_loss", training.check_spiky_loss, "false",
          "validate_results: each rank's loss is rejected when >= 10x the largest of its first 100 (not fatal)", 0),
    KSTR("training.result_rejected_tracker", training.result_rejected_tracker, "",
         "file every rejected result is appended to (Megatron's format); \"\" = none"),

    /* optimizer */
    KFLT("optimizer.lr", optimizer.lr, "1e-4", 0, 10, "", "peak learning rate", 0),
    KFLT("optimizer.min_lr", optimizer.min_lr, "0", 0, 10, "",
         "learning rate at the end of the decay", 0),
    KI64("optimizer.warmup_iters", optimizer.warmup_iters, "0", 0, BIG, "steps",
         "linear warmup from 0 to lr", 0),
    KI64("optimizer.decay_iters", optimizer.decay_iters, "0", 0, BIG, "steps",
         "steps from the start to the end of the decay; 0 = training.iters", 0),
    KFLT("optimizer.warmup_fraction", optimizer.warmup_fraction, "0", 0, 1, "",
         "warmup as a fraction of optimizer.decay_iters; 0 = use warmup_iters (Megatron's --lr-warmup-fraction)", 0),
    KI64("optimizer.warmup_samples", optimizer.warmup_samples, "0", 0, BIG, "sequences",
         "warmup in samples: warmup_iters = this / global_batch; 0 = use warmup_iters", 0),
    KI64("optimizer.decay_samples", optimizer.decay_samples, "0", 0, BIG, "sequences",
         "decay horizon in samples: decay_iters = this / global_batch; 0 = use decay_iters", 0),
    KENUM("optimizer.decay", optimizer.decay, "cosine", decay_names,
          "learning-rate decay after warmup (Megatron's names; inverse-square-root: lr * sqrt(warmup / step); WSD: "
          "constant, then the last wsd_decay_iters anneal)", 0),
    KI64("optimizer.wsd_decay_iters", optimizer.wsd_decay_iters, "0", 0, BIG, "steps",
         "WSD: steps of the final anneal, ending at decay_iters", 0),
    KENUM("optimizer.wsd_decay_style", optimizer.wsd_decay, "exponential", wsd_names,
          "WSD: the anneal's shape (Megatron's --lr-wsd-decay-style; its default exponential)", 0),
    KFLT("optimizer.weight_decay", optimizer.weight_decay, "0.01", 0, 10, "",
         "AdamW decoupled weight decay (not applied to biases and norms)", 0),
    KFLT("optimizer.beta1", optimizer.beta1, "0.9", 0, 1, "", "Adam beta1", MT_KF_MAX_EXCL),
    KFLT("optimizer.beta2", optimizer.beta2, "0.95", 0, 1, "", "Adam beta2", MT_KF_MAX_EXCL),
    KFLT("optimizer.eps", optimizer.eps, "1e-8", 0, 1, "", "Adam epsilon", MT_KF_MIN_EXCL),
    KFLT("optimizer.decoupled_lr", optimizer.decoupled_lr, "0", 0, 10, "",
         "peak learning rate of the word embedding and output layer (Megatron's --decoupled-lr); 0 = optimizer.lr", 0),
    KFLT("optimizer.decoupled_min_lr", optimizer.decoupled_min_lr, "0", 0, 10, "",
         "their learning rate at the end of the decay (--decoupled-min-lr; used when decoupled_lr is set)", 0),
    KFLT("optimizer.clip_grad", optimizer.clip_grad, "1.0", 0, 1e9, "",
         "clip the global gradient norm to this; 0 = no clipping", 0),

    /* data */
    ROW("data.path", MT_KEY_STRING, data.path, "", 0, 0, "",
        "indexed dataset prefix, or a blend: \"w1 p1 w2 p2\", [w1, p1, w2, p2] or "
        "[{weight: w1, path: p1}, ...]", NULL, MT_KF_BLEND, NULL),
    KSTR("data.split", data.split, "969,30,1", "train,valid,test proportions"),
    KENUM("data.tokenizer", data.tokenizer, "byte", tok_names,
          "byte (256 bytes + end-of-document), gpt2bpe (vocab.json + merges.txt), hf (tokenizer.json), null "
          "(pre-tokenized ids, Megatron's NullTokenizer: eod = model.vocab - 1), spm / gptspm / llama2 (a SentencePiece "
          ".model as Megatron's SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer use it)", 0),
    KSTR("data.vocab", data.vocab, "", "tokenizer vocabulary file (gpt2bpe: vocab.json, hf: tokenizer.json, spm / gptspm / "
         "llama2: the SentencePiece .model)"),
    KSTR("data.merges", data.merges, "", "BPE merges file (gpt2bpe)"),
    KSTR("data.cache_path", data.cache_path, "", "where sample-index caches go; \"\" = beside the data"),
    KBOOL("data.mock", data.mock, "false",
          "synthetic documents instead of data.path (Megatron's --mock-data: 100000 documents of lengths in [1, 4096), "
          "each the ids 1, 2, ..., len-1 then eod)", 0),
    KBOOL("data.fim.enabled", data.fim.enabled, "false",
          "fill-in-the-middle samples (Megatron's GPTFIMDataset): segments between eods are cut at two random "
          "characters and rearranged prefix-suffix-middle or suffix-prefix-middle around sentinel tokens", 0),
    KFLT("data.fim.rate", data.fim.rate, "0.5", 0, 1, "", "probability a segment is rearranged", 0),
    KFLT("data.fim.spm_rate", data.fim.spm_rate, "0.5", 0, 1, "",
         "probability a rearranged segment is suffix-prefix-middle rather than prefix-suffix-middle", 0),
    KSTR("data.fim.split_sample", data.fim.split_sample, "",
         "a token splitting a segment into fragments (e.g. files of a repository), each rearranged on its own; "
         "\"\" = none"),
    KFLT("data.fim.fragment_rate", data.fim.fragment_rate, "-1", -1, 1, "",
         "probability each fragment is rearranged (with split_sample); -1 = not set", 0),
    KSTR("data.fim.no_prefix", data.fim.no_prefix, "", "segments whose text starts with this are left alone; \"\" = none"),
    KSTR("data.fim.prefix_token", data.fim.prefix_token, "<fim_prefix>",
         "the prefix sentinel: a token of the tokenizer (one that is not, with GPT-2 BPE, is <|endoftext|>, as "
         "Megatron's Hugging Face tokenizer maps unknown tokens)"),
    KSTR("data.fim.middle_token", data.fim.middle_token, "<fim_middle>", "the middle sentinel token"),
    KSTR("data.fim.suffix_token", data.fim.suffix_token, "<fim_suffix>", "the suffix sentinel token"),
    KSTR("data.fim.pad_token", data.fim.pad_token, "<fim_pad>", "pads a rearranged sample that came out shorter"),
    KSTR("data.fim.eod_token", data.fim.eod_token, "<|endoftext|>", "the token segments are cut at"),

    /* checkpoint */
    KSTR("checkpoint.dir", checkpoint.dir, "", "directory checkpoints are saved to; \"\" = no saving"),
    KI64("checkpoint.save_interval", checkpoint.save_interval, "0", 0, BIG, "steps",
         "save every this many steps; 0 = only at the end (when dir is set)", 0),
    KSTR("checkpoint.load", checkpoint.load, "",
         "checkpoint directory to resume from (its tracker's iteration); \"\" = start fresh, or after an "
         "automatic restart (mtrain launch --max-restarts) the latest save in checkpoint.dir"),
    KI64("checkpoint.load_iteration", checkpoint.load_iteration, "0", 0, BIG, "steps",
         "load this iteration's save instead of the tracker's; 0 = the tracker's", 0),
    KINT("checkpoint.keep", checkpoint.keep, "0", 0, 1000000, "saves",
         "keep the last this many saves, deleting older ones once a new one is complete; 0 = keep all", 0),
    KBOOL("checkpoint.no_load_optim", checkpoint.no_load_optim, "false",
          "load weights only: fresh Adam moments and step count (Megatron's --no-load-optim)", 0),
    KBOOL("checkpoint.no_load_rng", checkpoint.no_load_rng, "false",
          "accepted for Megatron's --no-load-rng; mtrain's randomness is a pure function of the seed, nothing to load", 0),
    KBOOL("checkpoint.finetune", checkpoint.finetune, "false",
          "load weights only and start at iteration 0 with no consumed samples (Megatron's --finetune)", 0),
    KBOOL("checkpoint.fsync", checkpoint.fsync, "true",
          "fsync files and folders of a save before it is published (off only for throwaway runs)", 0),
    KI64("checkpoint.exit_interval", checkpoint.exit_interval, "0", 0, BIG, "steps",
         "save and exit 0 when the iteration is a multiple of this; 0 = never (Megatron's --exit-interval)", 0),
    KFLT("checkpoint.exit_duration_mins", checkpoint.exit_duration_mins, "0", 0, 1e9, "minutes",
         "save and exit 0 after training this long (ranks agree on the iteration); 0 = no limit", 0),
    KBOOL("checkpoint.exit_signal_handler", checkpoint.exit_signal_handler, "true",
          "SIGTERM / SIGUSR1 / SIGUSR2: finish the iteration, agree on it, save and exit 0 (Megatron's "
          "--exit-signal-handler, on by default here)", 0),
    KBOOL("checkpoint.async_save", checkpoint.async_save, "false",
          "snapshot the state into host memory, write it on a background thread while training goes on, publish "
          "once every rank's file is written (Megatron's --async-save); the last save of a run is synchronous", 0),

    /* logging */
    KI64("logging.interval", logging.interval, "1", 1, BIG, "steps", "print a log line every this many steps", 0),
    KI64("logging.eval_interval", logging.eval_interval, "0", 0, BIG, "steps",
         "evaluate on the validation split every this many steps; 0 = never", 0),
    KI64("logging.eval_iters", logging.eval_iters, "10", 0, BIG, "batches", "batches per evaluation", 0),
    KSTR("logging.metrics", logging.metrics, "", "JSON-lines metrics file; \"\" = none"),
    /* TensorBoard (train/tensorboard.c): Megatron's --tensorboard-dir and its --log-*-to-tensorboard flags */
    KSTR("logging.tensorboard_dir", logging.tensorboard_dir, "",
         "folder for TensorBoard event files (events.out.tfevents.*, created if missing), written by the "
         "logging rank with Megatron's tag names; \"\" = none"),
    KI64("logging.tensorboard_interval", logging.tensorboard_interval, "1", 1, BIG, "steps",
         "write the per-iteration scalars (lm loss, learning-rate, grad-norm, ...) every this many steps; "
         "timing scalars go with the log line (logging.interval)", 0),
    KINT("logging.tensorboard_queue_size", logging.tensorboard_queue_size, "1000", 1, 1 << 30, "events",
         "accepted for Megatron's --tensorboard-queue-size; mtrain writes events synchronously and flushes "
         "them with every log line and at the end, so nothing waits in a queue", 0),
    KBOOL("logging.tensorboard_timers", logging.tensorboard_timers, "false",
          "also write 'iteration-time' (s, with each log line after the first) and, with logging.throughput, "
          "'throughput' (Megatron's --log-timers-to-tensorboard)", 0),
    KBOOL("logging.tensorboard_validation_ppl", logging.tensorboard_validation_ppl, "false",
          "also write 'lm loss validation ppl' (Megatron's --log-validation-ppl-to-tensorboard)", 0),
    KBOOL("logging.tensorboard_memory", logging.tensorboard_memory, "false",
          "also write 'mem-allocated-bytes' / 'mem-max-allocated-bytes': this rank's parameter, gradient, "
          "optimizer and activation allocations, fixed before the loop (Megatron's --log-memory-to-tensorboard)", 0),
    KBOOL("logging.tensorboard_learning_rate", logging.tensorboard_learning_rate, "true",
          "write 'learning-rate' (Megatron's default; off: --no-log-learnig-rate-to-tensorboard)", 0),
    KBOOL("logging.tensorboard_loss_scale", logging.tensorboard_loss_scale, "true",
          "write 'loss-scale' (always 1: bf16 and fp32 train unscaled; off: --no-log-loss-scale-to-tensorboard)", 0),
    KBOOL("logging.tensorboard_world_size", logging.tensorboard_world_size, "false",
          "also write 'world-size' (Megatron's --log-world-size-to-tensorboard)", 0),
    KBOOL("logging.throughput", logging.log_throughput, "false",
          "Megatron's --log-throughput: the iteration line's 'throughput per GPU (TFLOP/s/GPU)' field (absent "
          "without it, as in Megatron); with logging.tensorboard_timers, also write 'throughput' (TFLOP/s per rank)", 0),
    KFLT("logging.peak_tflops", logging.peak_tflops, "0", 0, 1e6, "TFLOP/s",
         "peak dense TFLOP/s of one device for MFU; 0 = from the device table", 0),
    /* per-phase timers and the profiler trace (train/timers.h, train/profile.h) */
    KINT("logging.timing_level", logging.timing_level, "0", 0, 3, "",
         "Megatron's --timing-log-level: per-phase wall-time timers printed after each log line as "
         "'(min, max) time across ranks (ms):' (averaged over the log interval) with a straggler line; "
         "0 = none, 1 = coarse (forward-backward, batch-generator, grad sync, params-all-gather, optimizer), "
         "2 = also forward/backward compute, pipeline send/recv, tp collectives", 0),
    KENUM("logging.timing_option", logging.timing_option, "minmax", timing_option_names,
          "Megatron's --timing-log-option: minmax = (min, max) over ranks, max = the max only, "
          "all = every rank's time", 0),
    KBOOL("logging.profile", logging.profile, "false",
          "Megatron's --profile: write a Chrome / Perfetto trace (JSON, one track per rank) of iterations "
          "logging.profile_start .. logging.profile_end to logging.profile_path", 0),
    KI64("logging.profile_start", logging.profile_start, "10", 1, BIG, "steps",
         "first profiled iteration (Megatron's --profile-step-start)", 0),
    KI64("logging.profile_end", logging.profile_end, "12", 1, BIG, "steps",
         "last profiled iteration (Megatron's --profile-step-end); the trace is written after it", 0),
    KSTR("logging.profile_path", logging.profile_path, "profile.json",
         "the trace file (relative: to the current folder), written atomically by rank 0"),
};
const int mt_recipe_n_keys = (int)(sizeof mt_recipe_keys / sizeof mt_recipe_keys[0]);

const char *mt_recipe_tokenizer_name(mt_tokenizer_kind k) {
    return (int)k >= 0 && (size_t)k < sizeof tok_names / sizeof tok_names[0] - 1 ? tok_names[k] : "?";
}

_Static_assert(sizeof mt_recipe_keys / sizeof mt_recipe_keys[0] <= MT_RECIPE_MAX_KEYS,
               "raise MT_RECIPE_MAX_KEYS in recipe.h");

const mt_recipe_alias mt_recipe_aliases[] = {
    { "--tensor-model-parallel-size", "parallel.tensor", NULL },
    { "--pipeline-model-parallel-size", "parallel.pipeline", NULL },
    { "--virtual-pipeline-model-parallel-size", "parallel.virtual_pipeline", NULL },
    { "--decoder-first-pipeline-num-layers", "parallel.first_stage_layers", NULL },
    { "--decoder-last-pipeline-num-layers", "parallel.last_stage_layers", NULL },
    { "--account-for-embedding-in-pipeline-split", "parallel.embedding_in_split", "true" },
    { "--account-for-loss-in-pipeline-split", "parallel.loss_in_split", "true" },
    { "--num-virtual-stages-per-pipeline-rank", "parallel.virtual_pipeline", NULL },
    { "--context-parallel-size", "parallel.context", NULL },
    { "--expert-model-parallel-size", "parallel.expert", NULL },
    { "--data-parallel-size", "parallel.data", NULL },
    { "--sequence-parallel", "parallel.sequence_parallel", "true" },
    { "--use-distributed-optimizer", "parallel.distributed_optimizer", "true" },
    { "--overlap-grad-reduce", "parallel.overlap_grad_reduce", "true" },
    { "--overlap-param-gather", "parallel.overlap_param_gather", "true" },
    { "--ddp-bucket-size", "parallel.ddp_bucket_size", NULL },
    { "--micro-batch-size", "training.micro_batch", NULL },
    { "--global-batch-size", "training.global_batch", NULL },
    { "--eval-global-batch-size", "training.eval_global_batch", NULL },
    { "--step-batch-size-schedule", "training.batch_schedule", NULL },
    { "--train-iters", "training.iters", NULL },
    { "--train-tokens", "training.tokens", NULL },
    { "--train-samples", "training.samples", NULL },
    { "--seed", "training.seed", NULL },
    { "--bf16", "training.precision", "bf16" },
    { "--fp32", "training.precision", "fp32" },
    { "--recompute-granularity", "training.recompute", NULL },
    { "--recompute-method", "training.recompute_method", NULL },
    { "--recompute-num-layers", "training.recompute_num_layers", NULL },
    { "--backend", "training.backend", NULL },
    { "--threads", "training.threads", NULL },
    { "--rerun-mode", "training.rerun_mode", NULL },
    { "--error-injection-rate", "training.error_injection_rate", NULL },
    { "--error-injection-type", "training.error_injection_type", NULL },
    { "--check-for-spiky-loss", "training.check_for_spiky_loss", "true" },
    { "--no-check-for-nan-in-loss-and-grad", "training.check_for_nan_in_loss", "false" },
    { "--result-rejected-tracker-filename", "training.result_rejected_tracker", NULL },
    { "--lr", "optimizer.lr", NULL },
    { "--min-lr", "optimizer.min_lr", NULL },
    { "--lr-warmup-iters", "optimizer.warmup_iters", NULL },
    { "--lr-decay-style", "optimizer.decay", NULL },
    { "--lr-decay-iters", "optimizer.decay_iters", NULL },
    { "--lr-warmup-fraction", "optimizer.warmup_fraction", NULL },
    { "--lr-warmup-samples", "optimizer.warmup_samples", NULL },
    { "--lr-decay-samples", "optimizer.decay_samples", NULL },
    { "--lr-wsd-decay-iters", "optimizer.wsd_decay_iters", NULL },
    { "--lr-wsd-decay-style", "optimizer.wsd_decay_style", NULL },
    { "--weight-decay", "optimizer.weight_decay", NULL },
    { "--adam-beta1", "optimizer.beta1", NULL },
    { "--adam-beta2", "optimizer.beta2", NULL },
    { "--adam-eps", "optimizer.eps", NULL },
    { "--clip-grad", "optimizer.clip_grad", NULL },
    { "--decoupled-lr", "optimizer.decoupled_lr", NULL },
    { "--decoupled-min-lr", "optimizer.decoupled_min_lr", NULL },
    { "--num-layers", "model.layers", NULL },
    { "--hidden-size", "model.hidden", NULL },
    { "--num-attention-heads", "model.heads", NULL },
    { "--ffn-hidden-size", "model.ffn_hidden", NULL },
    { "--seq-length", "model.seq_length", NULL },
    { "--max-position-embeddings", "model.max_position", NULL },
    { "--vocab-size", "model.vocab", NULL },
    { "--swiglu", "model.activation", "swiglu" },
    { "--untie-embeddings-and-output-weights", "model.tie_embeddings", "false" },
    { "--disable-bias-linear", "model.bias", "false" },
    { "--add-qkv-bias", "model.qkv_bias", "true" },
    { "--norm-epsilon", "model.norm_eps", NULL },
    { "--apply-layernorm-1p", "model.norm_1p", "true" },
    { "--qk-layernorm", "model.qk_layernorm", "true" },
    { "--qk-l2-norm", "model.qk_l2_norm", "true" },
    /* ModelOpt's model builder (megatron/post_training/model_builder.py): config.qk_l2_norm = export_qk_l2_norm */
    { "--export-qk-l2-norm", "model.qk_l2_norm", "true" },
    { "--multi-latent-attention", "model.mla.enabled", "true" },
    { "--q-lora-rank", "model.mla.q_lora_rank", NULL },
    { "--kv-lora-rank", "model.mla.kv_lora_rank", NULL },
    { "--qk-head-dim", "model.mla.qk_head_dim", NULL },
    { "--qk-pos-emb-head-dim", "model.mla.qk_pos_head_dim", NULL },
    { "--v-head-dim", "model.mla.v_head_dim", NULL },
    { "--rotary-scaling-factor", "model.mla.rotary_scaling_factor", NULL },
    { "--use-rope-scaling", "model.rope_scaling", "true" },
    { "--rope-scaling-factor", "model.rope_scaling_factor", NULL },
    { "--rotary-seq-len-interpolation-factor", "model.rotary_interpolation", NULL },
    { "--no-rope-freq", "model.no_rope_layers", NULL },
    { "--mscale", "model.mla.mscale", NULL },
    { "--mscale-all-dim", "model.mla.mscale_all_dim", NULL },
    { "--yarn-original-max-position-embeddings", "model.mla.yarn_original_max_position", NULL },
    { "--yarn-beta-fast", "model.mla.yarn_beta_fast", NULL },
    { "--yarn-beta-slow", "model.mla.yarn_beta_slow", NULL },
    { "--rotary-base", "model.rope_theta", NULL },
    { "--init-method-std", "model.init_std", NULL },
    { "--num-experts", "model.moe.experts", NULL },
    { "--moe-router-topk", "model.moe.top_k", NULL },
    { "--moe-expert-capacity-factor", "model.moe.capacity_factor", NULL },
    { "--moe-aux-loss-coeff", "model.moe.aux_loss_coeff", NULL },
    { "--moe-z-loss-coeff", "model.moe.z_loss_coeff", NULL },
    { "--moe-router-pre-softmax", "model.moe.pre_softmax", "true" },
    { "--moe-pad-expert-input-to-capacity", "model.moe.pad_to_capacity", "true" },
    { "--moe-shared-expert-intermediate-size", "model.moe.shared_ffn", NULL },
    { "--moe-shared-expert-gate", "model.moe.shared_gate", "true" },
    { "--moe-router-topk-scaling-factor", "model.moe.topk_scaling_factor", NULL },
    { "--moe-router-enable-expert-bias", "model.moe.expert_bias", "true" },
    { "--moe-router-bias-update-rate", "model.moe.bias_update_rate", NULL },
    { "--moe-router-num-groups", "model.moe.num_groups", NULL },
    { "--moe-router-group-topk", "model.moe.group_topk", NULL },
    /* ModelOpt's model builder (megatron/post_training/model_builder.py): config.moe_apply_probs_on_input */
    { "--export-moe-apply-probs-on-input", "model.moe.apply_probs_on_input", "true" },
    { "--use-mup", "model.mup.enabled", "true" },
    { "--mup-base-hidden-size", "model.mup.base_hidden", NULL },
    { "--mup-embedding-mult", "model.mup.embedding_mult", NULL },
    { "--mup-output-mult", "model.mup.output_mult", NULL },
    { "--mup-base-head-dim", "model.mup.base_head_dim", NULL },
    { "--mup-attn-scale-power", "model.mup.attn_scale_power", NULL },
    { "--data-path", "data.path", NULL },
    { "--split", "data.split", NULL },
    { "--vocab-file", "data.vocab", NULL },
    { "--merge-file", "data.merges", NULL },
    { "--data-cache-path", "data.cache_path", NULL },
    { "--mock-data", "data.mock", "true" },
    { "--fim-data", "data.fim.enabled", "true" },
    { "--fim-rate", "data.fim.rate", NULL },
    { "--fim-spm-rate", "data.fim.spm_rate", NULL },
    { "--fim-split-sample", "data.fim.split_sample", NULL },
    { "--fim-fragment-rate", "data.fim.fragment_rate", NULL },
    { "--fim-no-prefix", "data.fim.no_prefix", NULL },
    { "--fim-prefix-token", "data.fim.prefix_token", NULL },
    { "--fim-middle-token", "data.fim.middle_token", NULL },
    { "--fim-suffix-token", "data.fim.suffix_token", NULL },
    { "--fim-pad-token", "data.fim.pad_token", NULL },
    { "--fim-eod-token", "data.fim.eod_token", NULL },
    { "--save", "checkpoint.dir", NULL },
    { "--load", "checkpoint.load", NULL },
    { "--save-interval", "checkpoint.save_interval", NULL },
    { "--ckpt-step", "checkpoint.load_iteration", NULL },
    { "--no-load-optim", "checkpoint.no_load_optim", "true" },
    { "--no-load-rng", "checkpoint.no_load_rng", "true" },
    { "--finetune", "checkpoint.finetune", "true" },
    { "--exit-interval", "checkpoint.exit_interval", NULL },
    { "--exit-duration-in-mins", "checkpoint.exit_duration_mins", NULL },
    { "--exit-signal-handler", "checkpoint.exit_signal_handler", "true" },
    { "--async-save", "checkpoint.async_save", "true" },
    { "--log-interval", "logging.interval", NULL },
    { "--eval-interval", "logging.eval_interval", NULL },
    { "--eval-iters", "logging.eval_iters", NULL },
    { "--metrics", "logging.metrics", NULL },
    { "--tensorboard-dir", "logging.tensorboard_dir", NULL },
    { "--tensorboard-log-interval", "logging.tensorboard_interval", NULL },
    { "--tensorboard-queue-size", "logging.tensorboard_queue_size", NULL },
    { "--log-timers-to-tensorboard", "logging.tensorboard_timers", "true" },
    { "--log-validation-ppl-to-tensorboard", "logging.tensorboard_validation_ppl", "true" },
    { "--log-memory-to-tensorboard", "logging.tensorboard_memory", "true" },
    { "--log-learning-rate-to-tensorboard", "logging.tensorboard_learning_rate", "true" },
    { "--no-log-learnig-rate-to-tensorboard", "logging.tensorboard_learning_rate", "false" }, /* Megatron's spelling */
    { "--log-loss-scale-to-tensorboard", "logging.tensorboard_loss_scale", "true" },
    { "--no-log-loss-scale-to-tensorboard", "logging.tensorboard_loss_scale", "false" },
    { "--log-world-size-to-tensorboard", "logging.tensorboard_world_size", "true" },
    { "--log-throughput", "logging.throughput", "true" },
    { "--timing-log-level", "logging.timing_level", NULL },
    { "--timing-log-option", "logging.timing_option", NULL },
    { "--profile", "logging.profile", "true" },
    { "--profile-step-start", "logging.profile_start", NULL },
    { "--profile-step-end", "logging.profile_end", NULL },
};
const int mt_recipe_n_aliases = (int)(sizeof mt_recipe_aliases / sizeof mt_recipe_aliases[0]);
