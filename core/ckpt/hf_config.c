/* hf_config.c — the JSON files of an exported Hugging Face folder (hf_export.h): config.json as
 * transformers' GPT2Config / LlamaConfig / MixtralConfig, generation_config.json, tokenizer_config.json. */
#include "core/ckpt/hf_export.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_string.h"

void mt_hf_json_float(FILE *f, float v) {
    char b[48];
    if (v > -1e15f && v < 1e15f && v == (float)(int64_t)v) { /* 10000 -> 10000.0, not 1e+04 */
        fprintf(f, "%.1f", (double)v);
        return;
    }
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b - 2, "%.*g", p, (double)v);
        if (strtof(b, NULL) == v) break;
    }
    if (!strpbrk(b, ".eEn")) strcat(b, ".0"); /* a float in Python too */
    fputs(b, f);
}

static mt_status done(FILE *f, const char *what) {
    if (fflush(f) || ferror(f)) return mt_errorf(MT_ERR_IO, "hf export: writing %s failed", what);
    return MT_OK;
}

static void key_float(FILE *f, const char *key, float v, const char *sep) {
    fprintf(f, "  \"%s\": ", key);
    mt_hf_json_float(f, v);
    fputs(sep, f);
}

static void write_gpt(FILE *f, const mt_hf_model *m, const char *dtype) {
    fprintf(f, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n");
    fprintf(f, "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n", m->V, m->max_pos,
            m->max_pos, m->C);
    fprintf(f, "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": %d,\n", m->L, m->H, m->F);
    fprintf(f, "  \"activation_function\": \"%s\",\n", m->squared_relu ? "relu2" : "gelu_new");
    key_float(f, "layer_norm_epsilon", m->norm_eps, ",\n");
    fprintf(f, "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n");
    key_float(f, "initializer_range", m->init_std, ",\n");
    fprintf(f, "  \"scale_attn_weights\": true,\n  \"scale_attn_by_inverse_layer_idx\": false,\n"
               "  \"reorder_and_upcast_attn\": false,\n");
    fprintf(f, "  \"tie_word_embeddings\": true,\n  \"use_cache\": true,\n");
    fprintf(f, "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"torch_dtype\": \"%s\"\n}\n", m->bos, m->eos,
            dtype);
}

/* rope_scaling as Llama 3.1's config.json writes it (rope_type llama3), or linear interpolation, or null */
static void write_rope_scaling(FILE *f, const mt_hf_model *m) {
    if (m->rope_llama3) {
        fprintf(f, "  \"rope_scaling\": {\n  ");
        key_float(f, "factor", m->rope_factor, ",\n  ");
        key_float(f, "high_freq_factor", m->rope_high, ",\n  ");
        key_float(f, "low_freq_factor", m->rope_low, ",\n  ");
        fprintf(f, "  \"original_max_position_embeddings\": %d,\n    \"rope_type\": \"llama3\"\n  },\n",
                m->rope_orig_max);
    } else if (m->rope_linear > 0.0f && m->rope_linear != 1.0f) {
        fprintf(f, "  \"rope_scaling\": {\n  ");
        key_float(f, "factor", m->rope_linear, ",\n  ");
        fprintf(f, "  \"rope_type\": \"linear\"\n  },\n");
    } else {
        fprintf(f, "  \"rope_scaling\": null,\n");
    }
}

/* LlamaConfig, MixtralConfig for a model with experts (its keys as Mixtral-8x7B's config.json), or
 * Qwen2Config for biases on q / k / v alone (its keys as Qwen2.5-7B's config.json: no sliding window) */
/* Qwen2MoeConfig (its keys as Qwen1.5-MoE-A2.7B's config.json): experts with a gated shared expert, every layer
 * sparse (decoder_sparse_step 1, no mlp_only_layers), no sliding window */
static void write_qwen2_moe(FILE *f, const mt_hf_model *m, const char *dtype) {
    fprintf(f, "{\n  \"architectures\": [\"Qwen2MoeForCausalLM\"],\n  \"model_type\": \"qwen2_moe\",\n");
    fprintf(f, "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n", m->V, m->C, m->F);
    fprintf(f, "  \"moe_intermediate_size\": %d,\n  \"shared_expert_intermediate_size\": %d,\n", m->F, m->Fs);
    fprintf(f, "  \"num_experts\": %d,\n  \"num_experts_per_tok\": %d,\n  \"norm_topk_prob\": %s,\n", m->E, m->top_k,
            m->norm_topk ? "true" : "false");
    fprintf(f, "  \"decoder_sparse_step\": 1,\n  \"mlp_only_layers\": [],\n");
    key_float(f, "router_aux_loss_coef", m->aux_coeff, ",\n");
    fprintf(f, "  \"output_router_logits\": false,\n");
    fprintf(f, "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n", m->L,
            m->H, m->KV);
    fprintf(f, "  \"head_dim\": %d,\n  \"max_position_embeddings\": %d,\n", m->D, m->max_pos);
    fprintf(f, "  \"qkv_bias\": %s,\n", m->qkv_bias ? "true" : "false");
    key_float(f, "rms_norm_eps", m->norm_eps, ",\n");
    key_float(f, "rope_theta", m->rope_theta, ",\n");
    fprintf(f, "  \"rope_scaling\": null,\n  \"hidden_act\": \"silu\",\n  \"attention_dropout\": 0.0,\n");
    fprintf(f, "  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n  \"max_window_layers\": %d,\n", m->L);
    key_float(f, "initializer_range", m->init_std, ",\n");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"use_cache\": true,\n", m->tied ? "true" : "false");
    fprintf(f, "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"torch_dtype\": \"%s\"\n}\n", m->bos, m->eos,
            dtype);
}

static void write_llama(FILE *f, const mt_hf_model *m, const char *dtype) {
    const int moe = m->E > 0, qwen2 = m->qkv_bias;
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n",
            moe ? "MixtralForCausalLM" : qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
            moe ? "mixtral" : qwen2 ? "qwen2" : "llama");
    fprintf(f, "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n", m->V, m->C, m->F);
    fprintf(f, "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n", m->L,
            m->H, m->KV);
    fprintf(f, "  \"head_dim\": %d,\n  \"max_position_embeddings\": %d,\n", m->D, m->max_pos);
    key_float(f, "rms_norm_eps", m->norm_eps, ",\n");
    key_float(f, "rope_theta", m->rope_theta, ",\n");
    if (moe) {
        fprintf(f, "  \"hidden_act\": \"silu\",\n  \"attention_dropout\": 0.0,\n  \"sliding_window\": null,\n");
        fprintf(f, "  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": %d,\n", m->E, m->top_k);
        key_float(f, "router_aux_loss_coef", m->aux_coeff, ",\n");
        fprintf(f, "  \"router_jitter_noise\": 0.0,\n  \"output_router_logits\": false,\n");
    } else if (qwen2) {
        write_rope_scaling(f, m);
        fprintf(f, "  \"hidden_act\": \"silu\",\n  \"attention_dropout\": 0.0,\n");
        fprintf(f, "  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n  \"max_window_layers\": %d,\n",
                m->L);
    } else {
        write_rope_scaling(f, m);
        fprintf(f, "  \"hidden_act\": \"silu\",\n");
        fprintf(f, "  \"attention_bias\": %s,\n  \"attention_dropout\": 0.0,\n  \"mlp_bias\": %s,\n",
                m->bias ? "true" : "false", m->bias ? "true" : "false");
    }
    key_float(f, "initializer_range", m->init_std, ",\n");
    if (!moe && !qwen2) fprintf(f, "  \"pretraining_tp\": 1,\n");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"use_cache\": true,\n", m->tied ? "true" : "false");
    fprintf(f, "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"torch_dtype\": \"%s\"\n}\n", m->bos, m->eos,
            dtype);
}

mt_status mt_hf_write_config(FILE *f, const mt_hf_model *m, const char *torch_dtype) {
    if (m->arch == MT_ARCH_GPT)
        write_gpt(f, m, torch_dtype);
    else if (m->E > 0 && m->Fs > 0)
        write_qwen2_moe(f, m, torch_dtype);
    else
        write_llama(f, m, torch_dtype);
    return done(f, "config.json");
}

mt_status mt_hf_write_generation_config(FILE *f, const mt_hf_model *m) {
    fprintf(f, "{\n  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"do_sample\": false\n}\n", m->bos, m->eos);
    return done(f, "generation_config.json");
}

mt_status mt_hf_write_tokenizer_config(FILE *f, const mt_hf_model *m, const char *tokenizer_class,
                                       const char *eos_text) {
    fprintf(f, "{\n  \"tokenizer_class\": ");
    mt_json_write_string(f, tokenizer_class);
    fprintf(f, ",\n  \"model_max_length\": %d,\n", m->max_pos);
    const char *keys[] = {"bos_token", "eos_token", "unk_token"};
    for (int i = 0; i < 3; i++) {
        fprintf(f, "  \"%s\": ", keys[i]);
        mt_json_write_string(f, eos_text);
        fputs(",\n", f);
    }
    fprintf(f, "  \"add_prefix_space\": false,\n  \"clean_up_tokenization_spaces\": false\n}\n");
    return done(f, "tokenizer_config.json");
}
