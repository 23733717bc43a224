/* recipe.h — the training recipe: one struct with the sections of the YAML file
 * (model, parallel, training, optimizer, data, checkpoint, logging), its defaults, the
 * loader (libyaml), `--set key=value` overrides and Megatron-style flag aliases, and the
 * validation that runs before anything is allocated.
 * Rule: every message names the key, where its value came from (file:line or the flag)
 * and the fix. Units: counts are plain integers, lr in absolute units, sizes in elements. */
#ifndef MT_RECIPE_H
#define MT_RECIPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#define MT_PATH_MAX 1024
#define MT_BLEND_MAX 4096
#define MT_MOE_PATTERN_MAX 1100 /* model.moe.layer_pattern: 1024 layers as 0 / 1 characters, and some */
#define MT_BATCH_STEPS_MAX 16 /* entries of training.batch_schedule */

typedef enum { MT_ARCH_GPT = 0, MT_ARCH_LLAMA } mt_arch;
typedef enum { MT_NORM_LAYERNORM = 0, MT_NORM_RMSNORM } mt_norm;
typedef enum { MT_ACT_GELU = 0, MT_ACT_SWIGLU, MT_ACT_SQUARED_RELU } mt_act;
typedef enum { MT_POS_LEARNED = 0, MT_POS_ROPE } mt_pos;
typedef enum { MT_MOE_LB_AUX = 0, MT_MOE_LB_SEQ_AUX, MT_MOE_LB_NONE } mt_moe_lb;
typedef enum { MT_DECAY_COSINE = 0, MT_DECAY_LINEAR, MT_DECAY_CONSTANT, MT_DECAY_INV_SQRT, MT_DECAY_WSD } mt_decay;
typedef enum { MT_WSD_LINEAR = 0, MT_WSD_COSINE, MT_WSD_EXPONENTIAL, MT_WSD_MINUS_SQRT } mt_wsd_decay;
typedef enum { MT_RECOMPUTE_NONE = 0, MT_RECOMPUTE_SELECTIVE, MT_RECOMPUTE_FULL } mt_recompute;
/* which layers full recompute reruns (Megatron's --recompute-method) */
typedef enum { MT_RECOMPUTE_UNIFORM = 0, MT_RECOMPUTE_BLOCK } mt_recompute_method;
typedef enum { MT_PREC_FP32 = 0, MT_PREC_BF16 } mt_precision;
typedef enum { MT_BACKEND_AUTO = 0, MT_BACKEND_CPU, MT_BACKEND_CUDA } mt_backend_kind;
/* spm, gptspm, llama2: Megatron's SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer */
typedef enum { MT_TOK_BYTE = 0, MT_TOK_GPT2BPE, MT_TOK_HF, MT_TOK_NULL, MT_TOK_SPM, MT_TOK_GPTSPM, MT_TOK_LLAMA2 } mt_tokenizer_kind;
typedef enum { MT_TIMING_MINMAX = 0, MT_TIMING_MAX, MT_TIMING_ALL } mt_timing_option;
/* Megatron's rerun state machine (megatron/core/rerun_state_machine.py): its modes and injected fault kinds */
typedef enum { MT_RERUN_DISABLED = 0, MT_RERUN_VALIDATE, MT_RERUN_STATS } mt_rerun_mode;
typedef enum { MT_INJECT_CORRECT = 0, MT_INJECT_TRANSIENT, MT_INJECT_PERSISTENT } mt_inject_type;

typedef struct {
    mt_arch arch;          /* gpt | llama */
    int layers;
    int hidden;            /* C */
    int heads;             /* H */
    int kv_heads;          /* KV (0 = heads; < heads is grouped-query attention) */
    int head_dim;          /* D, the channels of one attention head (0 = hidden / heads; Megatron's --kv-channels) */
    int ffn_hidden;        /* F (0 = 4*hidden for gpt; for llama must be given) */
    int vocab;             /* V, real vocabulary size (padded internally to 128*tp) */
    int seq_length;        /* T */
    int max_position;      /* learned position table rows (0 = seq_length) */
    mt_norm norm;          /* layernorm | rmsnorm */
    mt_act activation;     /* gelu | swiglu | squared_relu */
    mt_pos position;       /* learned | rope */
    int tie_embeddings;    /* bool */
    int bias;              /* bool: biases in linear layers (gpt: true, llama: false) */
    int qkv_bias;          /* bool: a bias on the query / key / value projection alone (--add-qkv-bias; Qwen2) */
    float norm_eps;
    int norm_1p;           /* bool: zero-centred gamma, every norm weight stored as w and applied as 1 + w */
    int qk_layernorm;      /* bool: a norm of model.norm's kind on every query and key head (over head_dim) */
    int qk_l2_norm;        /* bool: Llama 4's weightless L2 norm on every query and key head instead */
    float rope_theta;
    float rotary_percent;  /* the fraction of each head's channels RoPE rotates (Megatron's --rotary-percent) */
    int rope_interleaved;  /* bool: rotate adjacent channel pairs (Megatron's --rotary-interleaved) */
    int rope_scaling;      /* bool: Llama 3.x's frequency scaling (Megatron's --use-rope-scaling) */
    float rope_scaling_factor;           /* its factor (--rope-scaling-factor) */
    float rope_low_freq_factor, rope_high_freq_factor; /* its band edges */
    int rope_original_max_position;      /* its original context */
    float rotary_interpolation;          /* positions divided by this (--rotary-seq-len-interpolation-factor) */
    char no_rope_layers[MT_MOE_PATTERN_MAX]; /* layers without RoPE (Megatron's --no-rope-freq): "N" or a list
                                              expression; "" = none (mt_recipe_no_rope_layer) */
    float init_std;        /* normal(0, init_std); output projections / sqrt(2*layers) */
    struct {
        int experts;       /* 0 = dense */
        int top_k;
        float capacity_factor;
        float aux_loss_coeff;
        float z_loss_coeff;   /* router z-loss weight (0: off) */
        int layer_freq;       /* every layer_freq-th layer is MoE (layer i with i % freq == 0) */
        char layer_pattern[MT_MOE_PATTERN_MAX]; /* one 0 / 1 per layer (1 MoE), or Megatron's expression
                                 ([0]+[1]*26); "" = layer_freq decides (mt_recipe_moe_layer) */
        int ffn_hidden;       /* the experts' width (--moe-ffn-hidden-size); 0 = model.ffn_hidden */
        int pre_softmax;      /* bool: softmax over all experts then top-k, weights not renormalised */
        int pad_to_capacity;  /* bool: Megatron's --moe-pad-expert-input-to-capacity (accepted, no effect) */
        int shared_ffn;       /* total width of the shared experts (--moe-shared-expert-intermediate-size); 0 = none */
        int shared_gate;      /* bool: the shared experts' output times sigmoid(x . w_gate) (--moe-shared-expert-gate) */
        int score_function;   /* MT_MOE_SCORE_SOFTMAX / _SIGMOID (core/moe_rule.h): --moe-router-score-function */
        float topk_scaling_factor; /* the routing weights' factor (--moe-router-topk-scaling-factor; 1: none) */
        int expert_bias;      /* bool: aux-loss-free balancing bias (--moe-router-enable-expert-bias) */
        float bias_update_rate; /* its step per optimizer step (--moe-router-bias-update-rate) */
        int num_groups;       /* group-limited routing: expert groups (--moe-router-num-groups; 0: off) */
        int group_topk;       /* groups kept per token (--moe-router-group-topk) */
        int load_balancing;   /* MT_MOE_LB_*: --moe-router-load-balancing-type */
        int apply_probs_on_input; /* bool: the routing weight scales the expert's input, not its output (Megatron's
                                     moe_apply_probs_on_input, Llama 4; top_k 1 only) */
    } moe;
    struct { /* muP, Megatron-Core's (transformer_config.py, TransformerConfig.use_mup and mup_*): core/model/mup.h */
        int enabled;          /* bool: --use-mup */
        int base_hidden;      /* the base width; 0 = model.hidden (width multiplier 1) */
        float embedding_mult; /* the embedding output times this */
        float output_mult;    /* the logits times this; 1 = auto: 1 / width multiplier */
        float base_head_dim;  /* 0 = none: softmax scale 1 / head_dim^power; else sqrt(this) / head_dim^power */
        float attn_scale_power;
    } mup;
    struct {               /* multi-latent attention (Megatron's MLASelfAttention, DeepSeek-V2/V3) */
        int enabled;       /* bool: --multi-latent-attention */
        int q_lora_rank;   /* 0: a plain q projection (Megatron's q_lora_rank None) */
        int kv_lora_rank;
        int qk_head_dim;   /* the query / key channels without position (q_head_dim = this + qk_pos_head_dim) */
        int qk_pos_head_dim; /* the rotated channels: per query head, and one key part shared by all heads */
        int v_head_dim;
        int rope_yarn;     /* bool: rope_type yarn (Megatron's MLA default) instead of rope */
        float rotary_scaling_factor; /* YaRN's scaling factor (--rotary-scaling-factor) */
        float mscale, mscale_all_dim;  /* YaRN's concentration factors */
        int yarn_original_max_position; /* YaRN's original_max_position_embeddings */
        float yarn_beta_fast, yarn_beta_slow;
    } mla;
} mt_model_cfg;

typedef struct {
    int tensor;            /* tp */
    int pipeline;          /* pp */
    int virtual_pipeline;  /* vpp (1 = no interleaving) */
    int first_stage_layers; /* uneven stages: layers of the first stage (0 = even split; Megatron's
                               --decoder-first-pipeline-num-layers); the rest split evenly over the others */
    int last_stage_layers;  /* the same for the last stage (--decoder-last-pipeline-num-layers) */
    int embedding_in_split; /* bool: the input embedding counts as one layer in the split (first stage one
                               layer fewer; --account-for-embedding-in-pipeline-split) */
    int loss_in_split;      /* bool: the output layer and loss count as one layer (last stage one fewer) */
    int data;              /* dp; 0 = auto = world / (tp*pp*cp) */
    int expert;            /* ep */
    int context;           /* cp */
    int sequence_parallel; /* bool */
    int distributed_optimizer; /* bool, ZeRO-1 */
    int overlap_grad_reduce;   /* bool: reduce gradient buckets during backward (parallel/grad_overlap.h) */
    int overlap_param_gather;  /* bool: gather updated parameter buckets during the next forward */
    int64_t ddp_bucket_size;   /* elements per gradient bucket; 0 = auto = max(40M, 1M * reduce group size) */
    int timeout_s;         /* collective timeout, seconds */
} mt_parallel_cfg;

/* training.batch_schedule parsed (Megatron's StepBatchsizeNumMicroBatchesCalculator): from `at[i]`
 * consumed samples on, the global batch is batch[i]; at[0] = 0, at[] strictly increasing. */
typedef struct {
    int n;                 /* 0 = no schedule */
    int64_t at[MT_BATCH_STEPS_MAX];
    int batch[MT_BATCH_STEPS_MAX];
} mt_batch_steps;

typedef struct {
    int micro_batch;
    int global_batch;      /* under batch_schedule: micro_batch * dp, as Megatron sets --global-batch-size */
    int eval_global_batch; /* sequences per evaluation iteration (Megatron's --eval-global-batch-size); 0 = auto */
    char batch_schedule[256]; /* "THRESHOLD:BATCH ..." thresholds in tokens (--step-batch-size-schedule); "" = off */
    mt_batch_steps steps;  /* batch_schedule parsed by validate (thresholds in samples) */
    int64_t iters;         /* 0 = derive from tokens */
    int64_t tokens;        /* 0 = derive from iters */
    int64_t samples;       /* 0 = unused; else iters = samples / global_batch (Megatron's --train-samples) */
    int rampup_start;      /* batch-size ramp-up (Megatron's --rampup-batch-size): 0 = off, else the first */
    int rampup_increment;  /*   global batch, grown by this every rampup_samples / increments samples */
    int64_t rampup_samples;
    uint64_t seed;
    mt_precision precision;
    mt_recompute recompute;
    mt_recompute_method recompute_method; /* full: uniform (every layer) or block (the first
                                             recompute_num_layers of each model chunk) */
    int recompute_num_layers; /* uniform: layers per recompute unit (1); block: layers recomputed */
    mt_backend_kind backend;
    int threads;           /* CPU threads per rank; 0 = cores / local ranks */
    mt_rerun_mode rerun_mode;          /* result validation with reruns (train/rerun.h) */
    int error_injection_rate;          /* 0 = none; else 1 in this many validation calls is rejected */
    mt_inject_type error_injection_type;
    int check_nan_in_loss;             /* bool: reject a NaN / Inf local loss */
    int check_spiky_loss;              /* bool: reject a loss >= 10x the largest of its first 100 */
    char result_rejected_tracker[MT_PATH_MAX]; /* file appended with each rejection, "" = none */
} mt_training_cfg;

typedef struct {
    float lr;
    float min_lr;
    int64_t warmup_iters;
    int64_t decay_iters;   /* 0 = training.iters */
    float warmup_fraction; /* 0 = unused; else warmup_iters = fraction * decay_iters */
    int64_t warmup_samples, decay_samples; /* 0 = unused; else / global_batch gives the iters */
    mt_decay decay;        /* cosine | linear | constant | inverse-square-root | WSD */
    int64_t wsd_decay_iters; /* WSD: the last this many steps of the decay horizon anneal */
    mt_wsd_decay wsd_decay;  /* WSD: the shape of that anneal */
    float weight_decay;
    float beta1, beta2, eps;
    float clip_grad;       /* 0 = no clipping */
    float decoupled_lr, decoupled_min_lr; /* embedding + output layer (0 = off: lr, min_lr) */
} mt_optimizer_cfg;

typedef struct {
    char path[MT_BLEND_MAX];      /* prefix, or blend "0.3 A 0.7 B" */
    char split[64];               /* "969,30,1" */
    mt_tokenizer_kind tokenizer;  /* byte | gpt2bpe | hf */
    char vocab[MT_PATH_MAX];
    char merges[MT_PATH_MAX];
    char cache_path[MT_PATH_MAX];
    int mock;                     /* Megatron's --mock-data: synthetic documents, no files */
    struct {                      /* fill-in-the-middle samples (Megatron's --fim-data): core/data/fim.h */
        int enabled;
        float rate, spm_rate;
        float fragment_rate;      /* < 0: not given (needed with split_sample) */
        char split_sample[64];    /* "" = none */
        char no_prefix[64];       /* "" = none */
        char prefix_token[64], middle_token[64], suffix_token[64], pad_token[64], eod_token[64];
    } fim;
} mt_data_cfg;

typedef struct {
    char dir[MT_PATH_MAX];
    int64_t save_interval;  /* 0 = only at the end (when dir is set) */
    char load[MT_PATH_MAX];
    int64_t load_iteration; /* 0 = the tracker's */
    int keep;               /* last K saves; 0 = all */
    int no_load_optim, no_load_rng, finetune;
    int fsync;
    int64_t exit_interval;  /* 0 = never */
    float exit_duration_mins; /* 0 = no limit */
    int exit_signal_handler;
    int async_save;         /* write in the background, overlapping training */
} mt_checkpoint_cfg;

typedef struct {
    int64_t interval;
    int64_t eval_interval;  /* 0 = no evaluation */
    int64_t eval_iters;
    char metrics[MT_PATH_MAX];     /* JSON-lines file, "" = none */
    char tensorboard_dir[MT_PATH_MAX]; /* TensorBoard event files go here, "" = none */
    int64_t tensorboard_interval;  /* scalars every this many iterations */
    int tensorboard_queue_size;    /* accepted (Megatron's writer queue); flushed per log line here */
    int tensorboard_timers, tensorboard_validation_ppl, tensorboard_memory; /* --log-*-to-tensorboard */
    int tensorboard_learning_rate, tensorboard_loss_scale, tensorboard_world_size;
    int log_throughput;            /* --log-throughput: 'throughput' (TFLOP/s per rank) with timers */
    float peak_tflops;             /* per device; 0 = from the device table */
    int timing_level;              /* --timing-log-level: 0 = no per-phase timers, 1 coarse, 2 fine */
    mt_timing_option timing_option; /* --timing-log-option: minmax | max | all */
    int profile;                   /* --profile: Chrome trace of iterations profile_start..profile_end */
    int64_t profile_start, profile_end;
    char profile_path[MT_PATH_MAX]; /* the trace file (train/profile.h) */
} mt_logging_cfg;

/* Where each key's value came from, for messages: "configs/x.yaml:12", "--set", "--lr",
 * or "default". Indexed by key id (see mt_recipe_key_*). */
#define MT_RECIPE_MAX_KEYS 192
typedef struct {
    char file[MT_PATH_MAX];
    int line[MT_RECIPE_MAX_KEYS];        /* 0 = not from the file */
    const char *flag[MT_RECIPE_MAX_KEYS]; /* static string of the flag that set it, or NULL */
} mt_recipe_origin;

/* Notes about Megatron flags that were accepted but change nothing here, or were run with a
 * stated substitute (printed once by the logging rank). */
#define MT_RECIPE_NOTES_MAX 4096

typedef struct {
    mt_model_cfg model;
    mt_parallel_cfg parallel;
    mt_training_cfg training;
    mt_optimizer_cfg optimizer;
    mt_data_cfg data;
    mt_checkpoint_cfg checkpoint;
    mt_logging_cfg logging;
    mt_recipe_origin origin;
    char notes[MT_RECIPE_NOTES_MAX]; /* one note per line, "" when none */
} mt_recipe;

/* Fills every field with its documented default. */
void mt_recipe_defaults(mt_recipe *r);
/* Parses a YAML recipe on top of the current values. MT_ERR_IO if unreadable, MT_ERR_CONFIG
 * with "file:line: key: problem; fix" for unknown keys (nearest known key suggested),
 * wrong types and out-of-range values. Hostile or mistaken inputs are refused before they
 * cost time or memory (MT_ERR_CONFIG naming the file, the line and the limit): a file larger
 * than MT_RECIPE_MAX_BYTES (load_file checks its size before reading it), mappings and lists
 * nested deeper than MT_RECIPE_MAX_DEPTH, more than MT_RECIPE_MAX_NODES keys and values. */
#define MT_RECIPE_MAX_BYTES ((size_t)4 << 20)
#define MT_RECIPE_MAX_DEPTH 64
#define MT_RECIPE_MAX_NODES 100000
mt_status mt_recipe_load_file(mt_recipe *r, const char *path);
mt_status mt_recipe_load_string(mt_recipe *r, const char *yaml, size_t n_bytes, const char *name);
/* One override: dotted key and its value as text ("optimizer.lr", "3e-4"). flag: a static
 * string recorded as the origin ("--set" when NULL). */
mt_status mt_recipe_set(mt_recipe *r, const char *key, const char *value, const char *flag);
/* Consumes `--set k=v`, `--set k v` and Megatron-style aliases from argv (in place), leaving
 * the arguments it does not know. A flag whose value is wrong is taken too and the rest still
 * applied: the error holds every problem (refused flags, values, Megatron rules) at once. */
mt_status mt_recipe_apply_args(mt_recipe *r, int *argc, char **argv);
/* After mt_recipe_apply_args: MT_OK when argc is 0, else one MT_ERR_CONFIG naming every
 * argument left (unknown flags with the nearest known flag; a word after an unknown flag is
 * taken as its value). */
mt_status mt_recipe_unknown_args(int argc, char **argv);
/* After mt_recipe_defaults, for a run that Megatron's flags alone define (no recipe file): the
 * defaults Megatron-LM gives where mtrain's recipe defaults differ (Adam beta2 0.999, linear decay,
 * dropless MoE, no load-balancing loss); docs/megatron-flags.md lists them. */
mt_status mt_recipe_megatron_defaults(mt_recipe *r);
/* Prints the Megatron flag table (mapped to a key / accepted, changing nothing here / run with a
 * substitute / refused, each with its note) as markdown, for docs/megatron-flags.md. */
void mt_recipe_print_megatron_flags(FILE *f);
/* Every flag the command line takes (aliases and Megatron's rows), wrapped, for --help. */
void mt_recipe_print_flag_list(FILE *f);

/* Checks ranges and the layout for world_size ranks, resolves auto values (parallel.data,
 * global_batch, ffn_hidden, kv_heads, vocab, iters/tokens, max_position, decay_iters) and the
 * model.arch defaults of norm/activation/position/tie_embeddings/bias the recipe did not set.
 * Derived values are marked in origin.flag, so validating again re-derives them. Reports all
 * problems found (one per line, up to 8). Call before allocating. */
mt_status mt_recipe_validate(mt_recipe *r, int world_size);
/* Writes the recipe back as YAML (all keys), e.g. to store beside a checkpoint. */
void mt_recipe_write_yaml(FILE *f, const mt_recipe *r);
/* Prints the key reference (key, type, default, unit, meaning) as a markdown table. */
void mt_recipe_print_reference(FILE *f);

/* The key table, for messages elsewhere (ids index mt_recipe_origin). */
int mt_recipe_key_count(void);
int mt_recipe_key_find(const char *name);       /* "model.hidden" -> id, or -1 */
const char *mt_recipe_key_name(int id);         /* NULL when out of range */
int mt_recipe_key_is_set(const mt_recipe *r, int id); /* set by the file or a flag (not default/derived) */
/* 1 when the key is part of what a model of a given shape computes (norm, activation, positions, the
 * query / key norms, MoE routing, muP, multi-latent attention ...): --use-checkpoint-args takes it from
 * the save, generate and logprobs refuse another value. A new model variant's key says so in its row of
 * the key table (MT_KF_FUNCTION), not in a list elsewhere. 0 out of range. */
int mt_recipe_key_changes_function(int id);
/* Where a key's value came from, for "<where>: <key>: <problem>; <fix>" messages in other
 * modules: "configs/x.yaml:12", "--set model.heads=7", "--lr 3e-4", "default", "derived". */
const char *mt_recipe_where(const mt_recipe *r, const char *key, char *buf, size_t n_bytes);

/* data.tokenizer's name as the recipe spells it ("byte", "gpt2bpe", "hf", "null"). */
const char *mt_recipe_tokenizer_name(mt_tokenizer_kind k);
/* The value of `key` as the YAML text it would be written as (enum names: "cosine", "llama"),
 * into buf; "" for an unknown key. */
const char *mt_recipe_value_text(const mt_recipe *r, const char *key, char *buf, size_t n_bytes);

/* Derived quantities used everywhere. */
int mt_recipe_padded_vocab(const mt_recipe *r); /* vocab rounded up to 128*tp */
int mt_recipe_head_dim(const mt_recipe *r);
int mt_recipe_micro_batches(const mt_recipe *r); /* the largest global batch / (micro * dp) */
/* The global batch of the iteration that starts after `consumed` samples: training.global_batch,
 * or under batch-size ramp-up Megatron's RampupBatchsizeNumMicroBatches: start + increment *
 * floor(consumed / (rampup_samples / n_increments)), the full batch once consumed > rampup_samples. */
int mt_recipe_global_batch_at(const mt_recipe *r, int64_t consumed);
/* recipe_batch.c: training.batch_schedule, Megatron's --step-batch-size-schedule
 * (num_microbatches_calculator.py, StepBatchsizeNumMicroBatchesCalculator): "THRESHOLD:BATCH ..."
 * separated by spaces or commas, each number with an optional K/M/B/T suffix (1e3 .. 1e12, either
 * case, a decimal point allowed: int(float(x) * multiplier)); thresholds are tokens, turned into
 * samples by // seq_length (Megatron passes --seq-length); sorted; the first must be 0 and the
 * rest strictly increasing in samples. mtrain also requires the batches not to decrease (Megatron's
 * train loop asserts that the micro-batch count never decreases). MT_ERR_CONFIG "problem; fix". */
mt_status mt_recipe_batch_steps_parse(const char *text, int seq_length, mt_batch_steps *out);
/* The largest global batch of the run: the schedule's last, else training.global_batch. */
int mt_recipe_global_batch_max(const mt_recipe *r);
/* Walks the batch schedule from (*consumed, *iters) while *iters < max_iters and *consumed <
 * until_samples (Megatron's update_train_iters loop), a segment at a time. */
void mt_recipe_batch_walk(const mt_recipe *r, int64_t *consumed, int64_t *iters, int64_t max_iters,
                          int64_t until_samples);
/* Samples the whole run consumes (training.iters iterations from 0): the training set's size. */
int64_t mt_recipe_train_samples(const mt_recipe *r);
/* Every global batch the run uses from `consumed` samples after `iters_done` iterations to its end is
 * a multiple of micro_batch * dp (Megatron's consistency check in update(), asserted every
 * iteration: an entry the run never reaches is not checked, so a resume on more ranks may pass
 * early entries too small for it); MT_ERR_CONFIG naming training.batch_schedule and the entry
 * otherwise. MT_OK without a schedule. */
mt_status mt_recipe_batch_steps_check(const mt_recipe *r, int dp, int64_t consumed, int64_t iters_done);

/* Sequence parallelism's split rule, written once (the validator, the planner and the trainer
 * call it). Under parallel.sequence_parallel with tp = parallel.tensor > 1 the residual stream,
 * the norms and their inputs are split along the sequence over the tp ranks, so
 * model.seq_length must be a multiple of tp: Megatron's rule (arguments.py asserts
 * seq_length % tensor_model_parallel_size == 0). mtrain's kernels split the flattened
 * micro_batch x seq_length token rows, which needs only their product to divide; the stronger
 * rule is kept so that every micro-batch size works and a recipe valid here is valid for
 * Megatron. MT_OK when sequence parallelism is off or tp <= 1 (sequence_parallel with tp = 1
 * is the validator's own message); else MT_ERR_CONFIG
 * "<where>: model.seq_length: N is not divisible by parallel.tensor = tp ...; <fix>". */
mt_status mt_recipe_check_sp_split(const mt_recipe *r);
/* Uneven pipeline stages (parallel.first_stage_layers / last_stage_layers / embedding_in_split /
 * loss_in_split, Megatron's rules): 1 when any is set. mt_recipe_stage_layers: the transformer
 * layers of pipeline stage `stage` (model.layers / pp when even); mt_recipe_stage_first_layer: the
 * global index of its first layer (the layers of the stages before it; interleaved chunks aside);
 * meant for a validated recipe. */
int mt_recipe_uneven_stages(const mt_recipe *r);
int mt_recipe_stage_layers(const mt_recipe *r, int stage);
int mt_recipe_stage_first_layer(const mt_recipe *r, int stage);
/* The same per model chunk: the transformer layers of chunk `chunk` of pipeline stage `stage` (virtual
 * stage chunk * pp + stage; with parallel.virtual_pipeline > 1 and the embedding / loss counted, the
 * first virtual stage and the last hold one fewer, possibly none), and the global index of its first
 * layer (where its layers would start when it holds none). Without interleaving chunk 0 is the stage. */
int mt_recipe_chunk_layers(const mt_recipe *r, int stage, int chunk);
int mt_recipe_chunk_first_layer(const mt_recipe *r, int stage, int chunk);

/* MoE layers (recipe_moe_layers.c; Megatron's --moe-layer-freq). mt_recipe_moe_pattern_parse: the
 * 0 / 1 per layer of a model.moe.layer_pattern text (a plain "0111", or Megatron's expression
 * "([0]+[1]*26)") into bits; the layer count, -1 when the text is neither form, -2 when it has more
 * than max layers. mt_recipe_moe_layer: 1 when global layer `layer` is a MoE layer (the pattern, else
 * layer % model.moe.layer_freq == 0; 0 for a dense model); mt_recipe_moe_layers: the MoE layers among
 * [l0, l0 + n_layers); mt_recipe_moe_ffn_hidden: the experts' width (model.moe.ffn_hidden, or
 * model.ffn_hidden when 0). */
int mt_recipe_moe_pattern_parse(const char *text, unsigned char *bits, int max);
int mt_recipe_moe_layer(const mt_recipe *r, int layer);
int mt_recipe_moe_layers(const mt_recipe *r, int l0, int n_layers);
int mt_recipe_moe_ffn_hidden(const mt_recipe *r);

/* Layers without RoPE (recipe_no_rope.c; Megatron's --no-rope-freq, Llama 4's NoPE layers):
 * mt_recipe_no_rope_parse: the 0 / 1 per layer (1 = no RoPE) of a model.no_rope_layers text for
 * n_layers layers: "N" (digits only, as Megatron's no_rope_freq_type reads it) is layer i without RoPE
 * when (i + 1) % N == 0, a text with '[' is Megatron's list expression ("([0]*3+[1])*12"); 0, -1 when
 * the text is neither form, -2 when it is longer than max; "" is all zeros. mt_recipe_no_rope_layer: 1
 * when global layer `layer` attends without RoPE (0 for a text the validator refuses). */
int mt_recipe_no_rope_parse(const char *text, int n_layers, unsigned char *bits, int max);
int mt_recipe_no_rope_layer(const mt_recipe *r, int layer);

#endif
