/* recipe_megatron.c — Megatron-LM's command-line flags beyond the one-to-one aliases of
 * recipe_keys.c, so a Megatron launch script's argument list runs as it is:
 *   accepted: the flag changes nothing here (a kernel fusion, a data-loader worker count,
 *     dropout 0); one note per flag, printed by the logging rank;
 *   substitute: the run goes on with a stated replacement (--fp16 trains in bf16), with a note;
 *   refused: the reason and the alternative, every refused flag of the command line at once;
 *   rule: Megatron gives the flag a meaning that depends on others, applied here the same way
 *     (--num-query-groups only with --group-query-attention, --swiglu derives ffn_hidden_size,
 *     --sequence-parallel at tp = 1 is turned off, --vocab-file + --merge-file select GPT-2 BPE,
 *     --kv-channels sets the head size ...).
 * Every Megatron flag is either an alias (recipe_keys.c) or a row here; `mtrain recipe-reference
 * --megatron` prints both as the table of docs/megatron-flags.md (a test keeps them in step).
 * Also: the one message for every unknown argument of a command line, with the nearest flags. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe_internal.h"

#define MSG_VAL_MAX 80 /* longest value echoed back in a message */
#define TRY(x)                              \
    do {                                    \
        const mt_status try_st_ = (x);      \
        if (try_st_ != MT_OK) return try_st_; \
    } while (0)

typedef enum { MEG_ACCEPT = 0, MEG_SUBST, MEG_REFUSE, MEG_RULE } meg_kind;

typedef struct {
    const char *flag;
    int arity;        /* 0: a switch; n > 0: n values follow */
    meg_kind kind;
    const char *note; /* accepted / substitute: the note; refused: reason and alternative; rule: what it does */
} meg_flag;

static const meg_flag meg_flags[] = {
    /* model shape: rules */
    { "--group-query-attention", 0, MEG_RULE, "grouped-query attention on: --num-query-groups sets model.kv_heads" },
    { "--num-query-groups", 1, MEG_RULE, "model.kv_heads, only with --group-query-attention (as Megatron: ignored without it)" },
    { "--kv-channels", 1, MEG_RULE, "model.head_dim: the channels of one attention head, hidden / heads when not "
      "given (as Megatron); another value sizes the q/k/v projections independently of hidden" },
    { "--normalization", 1, MEG_RULE, "LayerNorm -> model.norm layernorm, RMSNorm -> rmsnorm" },
    { "--position-embedding-type", 1, MEG_RULE, "learned_absolute -> model.position learned, rope -> rope; none is refused" },
    { "--use-rotary-position-embeddings", 0, MEG_RULE, "model.position rope (Megatron's older spelling)" },
    { "--no-position-embedding", 0, MEG_RULE, "with rope: nothing to turn off; with learned positions it is refused" },
    { "--rotary-percent", 1, MEG_RULE, "model.rotary_percent: RoPE on the first int(head_dim * this) channels of "
      "each head (with rope positions; ignored with learned ones, as Megatron)" },
    { "--attention-dropout", 1, MEG_RULE, "0 only: mtrain has no dropout (Megatron's default is 0.1; pass 0.0 to match)" },
    { "--hidden-dropout", 1, MEG_RULE, "0 only: mtrain has no dropout (Megatron's default is 0.1; pass 0.0 to match)" },
    { "--make-vocab-size-divisible-by", 1, MEG_RULE, "accepted: mtrain pads the vocabulary to 128*tp; padded rows never count" },
    /* layout and schedule */
    { "--num-layers-per-virtual-pipeline-stage", 1, MEG_RULE, "parallel.virtual_pipeline = layers (+ 1 each for an embedding / loss counted in the split) / (pp * this)" },
    { "--distributed-timeout-minutes", 1, MEG_RULE, "parallel.timeout_s = 60 * this" },
    { "--cp-comm-type", 1, MEG_RULE, "p2p, a2a, allgather, a2a+p2p: attention is computed by the ring exchange of "
      "K/V blocks (p2p) whatever the value; the others are the same exact attention over another communication "
      "pattern, so the same numbers (a note says so)" },
    { "--recompute-activations", 0, MEG_RULE, "training.recompute selective" },
    { "--optimizer", 1, MEG_RULE, "adam only (AdamW, decoupled weight decay); sgd is refused" },
    { "--rampup-batch-size", 3, MEG_RULE, "START INCREMENT SAMPLES -> training.rampup_start, rampup_increment, "
      "rampup_samples (Megatron-LM before the step schedule; its newest version ignores the flag as deprecated: "
      "with --step-batch-size-schedule it is refused here)" },
    /* data and tokenizer */
    { "--tokenizer-type", 1, MEG_RULE, "GPT2BPETokenizer -> data.tokenizer gpt2bpe, HuggingFaceTokenizer -> hf "
      "(with --tokenizer-model), NullTokenizer -> null (model.vocab = --vocab-size + 1, eod = --vocab-size), "
      "SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer -> spm / gptspm / llama2 (with "
      "--tokenizer-model X.model); TikToken is refused" },
    { "--tokenizer-model", 1, MEG_RULE, "data.vocab: a tokenizer.json or a folder holding one; a SentencePiece .model" },
    { "--tiktoken-pattern", 1, MEG_ACCEPT, "only for TikTokenizer, which is refused" },
    { "--num-workers", 1, MEG_ACCEPT, "the dataset is memory-mapped and read by the training thread" },
    { "--no-mmap-bin-files", 0, MEG_ACCEPT, "the .bin is always memory-mapped (read-only, shared between ranks)" },
    { "--no-create-attention-mask-in-dataloader", 0, MEG_ACCEPT, "the causal mask is implicit in the attention kernel" },
    { "--reset-position-ids", 0, MEG_REFUSE, "positions restart per document: not implemented; drop it" },
    { "--reset-attention-mask", 0, MEG_REFUSE, "attention masked per document: not implemented; drop it" },
    { "--eod-mask-loss", 0, MEG_REFUSE, "masking the end-of-document token's loss is not implemented; drop it" },
    /* precision */
    { "--fp16", 0, MEG_SUBST, "trained in bf16 instead (training.precision bf16): mtrain has no fp16 path, and "
      "bf16 needs no loss scaling; the log's loss scale is 1" },
    { "--fp8-format", 1, MEG_SUBST, "no fp8 path yet: the GEMMs run in the precision of --bf16 / --fp16" },
    { "--fp8-amax-history-len", 1, MEG_SUBST, "see --fp8-format" },
    { "--fp8-amax-compute-algo", 1, MEG_SUBST, "see --fp8-format" },
    { "--fp8-param-gather", 0, MEG_SUBST, "see --fp8-format" },
    { "--loss-scale", 1, MEG_ACCEPT, "fp16 loss scaling: bf16 needs none" },
    { "--initial-loss-scale", 1, MEG_ACCEPT, "fp16 loss scaling: bf16 needs none" },
    { "--min-loss-scale", 1, MEG_ACCEPT, "fp16 loss scaling: bf16 needs none" },
    { "--loss-scale-window", 1, MEG_ACCEPT, "fp16 loss scaling: bf16 needs none" },
    { "--hysteresis", 1, MEG_ACCEPT, "fp16 loss scaling: bf16 needs none" },
    { "--accumulate-allreduce-grads-in-fp32", 0, MEG_ACCEPT, "gradients are always accumulated and reduced in fp32" },
    { "--grad-reduce-in-bf16", 0, MEG_ACCEPT, "gradients are reduced in fp32 (more exact, twice the bytes)" },
    { "--calculate-per-token-loss", 0, MEG_ACCEPT, "every sequence is full length (no padding or masked tokens), "
      "so the per-token and per-sample averages are the same" },
    { "--attention-softmax-in-fp32", 0, MEG_ACCEPT, "softmax is always computed in fp32" },
    /* kernels and implementation */
    { "--use-mcore-models", 0, MEG_ACCEPT, "mtrain has one model implementation (Megatron-Core's layout)" },
    { "--use-legacy-models", 0, MEG_ACCEPT, "mtrain has one model implementation (Megatron-Core's layout)" },
    { "--transformer-impl", 1, MEG_ACCEPT, "mtrain's own kernels (no Transformer Engine)" },
    { "--use-flash-attn", 0, MEG_ACCEPT, "the attention kernel is the backend's" },
    { "--attention-backend", 1, MEG_ACCEPT, "the attention kernel is the backend's" },
    { "--no-masked-softmax-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-bias-gelu-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-bias-swiglu-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-bias-dropout-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-rope-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-gradient-accumulation-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--cross-entropy-loss-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--no-async-tensor-model-parallel-allreduce", 0, MEG_ACCEPT, "tensor-parallel collectives are synchronous" },
    { "--manual-gc", 0, MEG_ACCEPT, "no garbage collector" },
    { "--manual-gc-interval", 1, MEG_ACCEPT, "no garbage collector" },
    { "--empty-unused-memory-level", 1, MEG_ACCEPT, "no caching allocator to empty" },
    { "--distributed-backend", 1, MEG_ACCEPT, "the communicator follows the backend (shared memory on the CPU, NCCL on GPUs)" },
    { "--use-cpu-initialization", 0, MEG_ACCEPT, "initial weights are drawn by a counter-based RNG, the same on any device" },
    { "--moe-grouped-gemm", 0, MEG_ACCEPT, "the experts' GEMMs are batched per expert" },
    { "--moe-token-dispatcher-type", 1, MEG_RULE, "alltoall only (tokens dispatched by all-to-all over the expert "
      "group); allgather / flex are refused" },
    { "--moe-router-load-balancing-type", 1, MEG_RULE, "model.moe.load_balancing: aux_loss (Switch / GShard, weight "
      "--moe-aux-loss-coeff), seq_aux_loss (the same per sequence, averaged: DeepSeek-V2 / V3) or none "
      "(model.moe.aux_loss_coeff 0); sinkhorn / global_aux_loss / quantile_balancing and lists are refused" },
    /* checkpoints, logging, profiling */
    { "--ckpt-format", 1, MEG_ACCEPT, "mtrain saves its own format (safetensors pieces + manifest.json, loadable "
      "at any layout; `mtrain export --format hf` for serving)" },
    { "--use-checkpoint-args", 0, MEG_RULE, "the model from the recipe of the save in --load (its manifest): the "
      "shape (layers, hidden, ffn, heads, head size, sequence, positions, vocabulary) where the command line leaves "
      "it unset, the kind (norm, activation, positions, RoPE, biases, tying, kv heads, experts) always, as Megatron's "
      "load_args_from_checkpoint; the layout and tokenizer stay the command line's. No save yet: the command line's" },
    { "--log-params-norm", 0, MEG_ACCEPT, "not printed" },
    { "--log-num-zeros-in-grad", 0, MEG_ACCEPT, "not printed" },
    { "--wandb-project", 1, MEG_ACCEPT, "no Weights & Biases client: use --tensorboard-dir or --metrics" },
    { "--wandb-exp-name", 1, MEG_ACCEPT, "no Weights & Biases client: use --tensorboard-dir or --metrics" },
    { "--wandb-save-dir", 1, MEG_ACCEPT, "no Weights & Biases client: use --tensorboard-dir or --metrics" },
    /* flags of Megatron-LM's functional-test configs (test/megatron/functional/gpt.cases) */
    { "--wandb-entity", 1, MEG_ACCEPT, "no Weights & Biases client: use --tensorboard-dir or --metrics" },
    { "--use-persistent-ckpt-worker", 0, MEG_ACCEPT, "asynchronous-save worker: mtrain writes its saves itself; the same files" },
    { "--async-strategy", 1, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--async-ckpt-use-cpu-shm", 0, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--dist-ckpt-strictness", 1, MEG_ACCEPT, "mtrain's load checks every tensor's name and shape (strict) whatever the value" },
    { "--dist-ckpt-optim-fully-reshardable", 0, MEG_ACCEPT, "mtrain's optimizer state loads at any layout already" },
    { "--ckpt-fully-parallel-load", 0, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--ckpt-fully-parallel-save", 0, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--no-ckpt-fully-parallel-save", 0, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--ckpt-assume-constant-structure", 0, MEG_ACCEPT, "checkpoint-format tuning of Megatron's distributed checkpoint: mtrain saves its own format" },
    { "--auto-detect-ckpt-format", 0, MEG_ACCEPT, "mtrain loads its own format only (manifest.json)" },
    { "--use-checkpoint-opt_param-scheduler", 0, MEG_ACCEPT, "on resume the schedule continues at the saved iteration, with the schedule values of the command line (the same as the checkpoint's in a resumed run)" },
    { "--override-opt_param-scheduler", 0, MEG_ACCEPT, "the schedule values of the command line are used (as this flag asks)" },
    { "--no-use-tokenizer-model-from-checkpoint-args", 0, MEG_ACCEPT, "the tokenizer is always the command line's" },
    { "--save-retain-interval", 1, MEG_ACCEPT, "saves are kept as checkpoint.keep says (all by default)" },
    { "--verify-integrity", 0, MEG_ACCEPT, "every load verifies each file's size and checksum" },
    { "--deterministic-mode", 0, MEG_ACCEPT, "mtrain's kernels and collectives are deterministic already (the same run gives the same bits)" },
    { "--check-weight-hash-across-dp-replicas-interval", 1, MEG_ACCEPT, "not checked (the replicas apply the same reduced gradients)" },
    { "--straggler-minmax-count", 1, MEG_ACCEPT, "no straggler detector" },
    { "--log-progress", 0, MEG_ACCEPT, "no progress.txt (the log and --metrics record each iteration)" },
    { "--test-mode", 0, MEG_ACCEPT, "Megatron's test-harness switch; nothing to change here" },
    { "--max-tokens-to-oom", 1, MEG_ACCEPT, "Megatron's inference server limit; not used in training" },
    { "--use-tp-pp-dp-mapping", 0, MEG_ACCEPT, "the order of ranks in the groups is mtrain's (tp fastest); the numbers are the same" },
    { "--expert-tensor-parallel-size", 1, MEG_RULE, "without experts (no --num-experts) nothing to split (a note); with "
      "experts it must equal --tensor-model-parallel-size (the experts are split like the dense layers), another value is refused" },
    { "--num-distributed-optimizer-instances", 1, MEG_RULE, "N >= 1: the optimizer state is sharded over the whole "
      "data-parallel group as one instance; N instances only choose which ranks hold which shard, the same numbers (a note)" },
    { "--microbatch-group-size-per-virtual-pipeline-stage", 1, MEG_ACCEPT, "the interleaved schedule's own grouping; the same gradients" },
    { "--overlap-p2p-communication-warmup-flush", 0, MEG_ACCEPT, "pipeline sends overlap as the schedule allows; the same numbers" },
    { "--overlap-param-gather-with-optimizer-step", 0, MEG_ACCEPT, "an overlap choice; the same numbers" },
    { "--defer-embedding-wgrad-compute", 0, MEG_ACCEPT, "an overlap choice; the same numbers" },
    { "--wgrad-deferral-limit", 1, MEG_ACCEPT, "an overlap choice; the same numbers" },
    { "--tp-comm-overlap", 0, MEG_ACCEPT, "Transformer Engine's userbuffer overlap: tensor-parallel collectives are mtrain's; the same numbers" },
    { "--tp-comm-overlap-cfg", 1, MEG_ACCEPT, "see --tp-comm-overlap" },
    { "--ddp-average-in-collective", 0, MEG_ACCEPT, "gradients are averaged over data-parallel ranks in fp32 either way" },
    { "--disable-gloo-process-groups", 0, MEG_ACCEPT, "no gloo groups" },
    { "--cuda-graph-impl", 1, MEG_ACCEPT, "no CUDA graphs: kernels are launched one by one, the same numbers" },
    { "--no-persist-layer-norm", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--cross-entropy-fusion-impl", 1, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--fp8-recipe", 1, MEG_SUBST, "see --fp8-format" },
    { "--apply-query-key-layer-scaling", 0, MEG_ACCEPT, "the same attention: Megatron divides Q.K^T by the layer number and multiplies it back in the fp32 softmax (an fp16 range guard); mtrain's softmax is fp32" },
    { "--apply-wd-to-qk-layernorm", 0, MEG_REFUSE, "weight decay on the query/key norm weights is not implemented (mtrain never decays norm weights); drop it" },
    { "--squared-relu", 0, MEG_RULE, "model.activation squared_relu: the MLP computes relu(x)^2 (not gated); "
      "refused with --swiglu, as Megatron asserts" },
    { "--rotary-interleaved", 0, MEG_RULE, "model.rope_interleaved true: RoPE rotates adjacent channel pairs "
      "(2i, 2i+1) instead of the two halves of each head" },
    { "--attention-output-gate", 0, MEG_REFUSE, "a gated attention output is not implemented" },
    { "--experimental-attention-variant", 1, MEG_REFUSE, "attention variants other than softmax attention are not implemented" },
    { "--linear-attention-freq", 1, MEG_REFUSE, "hybrid linear-attention (gated delta net) layers are not implemented" },
    { "--linear-conv-kernel-dim", 1, MEG_REFUSE, "see --linear-attention-freq" },
    { "--linear-key-head-dim", 1, MEG_REFUSE, "see --linear-attention-freq" },
    { "--linear-value-head-dim", 1, MEG_REFUSE, "see --linear-attention-freq" },
    { "--linear-num-key-heads", 1, MEG_REFUSE, "see --linear-attention-freq" },
    { "--linear-num-value-heads", 1, MEG_REFUSE, "see --linear-attention-freq" },
    { "--rope-type", 1, MEG_RULE, "multi-latent attention: yarn -> model.mla.rope_yarn true (Megatron's MLA default), "
      "rope -> false; other attention: rope only (yarn on standard attention is refused, as Megatron does)" },
    { "--cache-mla-latents", 0, MEG_ACCEPT, "an inference cache layout: training is the same without" },
    { "--mla-down-proj-fusion", 0, MEG_ACCEPT, "a kernel fusion of the q / kv down projections: the same values" },
    { "--dsa-indexer-n-heads", 1, MEG_REFUSE, "DeepSeek sparse attention is not implemented" },
    { "--dsa-indexer-head-dim", 1, MEG_REFUSE, "DeepSeek sparse attention is not implemented" },
    { "--dsa-indexer-topk", 1, MEG_REFUSE, "DeepSeek sparse attention is not implemented" },
    { "--dsa-indexer-loss-coeff", 1, MEG_REFUSE, "DeepSeek sparse attention is not implemented" },
    { "--moe-ffn-hidden-size", 1, MEG_RULE, "model.moe.ffn_hidden when there are experts (the experts' width; dense "
      "layers keep --ffn-hidden-size, which also follows it when every layer is a MoE layer and it is not given); "
      "without experts nothing" },
    { "--moe-router-dtype", 1, MEG_ACCEPT, "the router is computed in fp32" },
    /* flags of Megatron-LM's example and model confs (examples/megatron_fsdp, examples/post_training/modelopt/conf) */
    { "--init-model-with-meta-device", 0, MEG_ACCEPT, "Megatron-FSDP's meta-device initialization (FSDP itself is "
      "substituted, see --use-torch-fsdp2): each rank initializes its parameters once, on its device" },
    { "--use-nccl-ub", 0, MEG_ACCEPT, "NCCL user-buffer registration of the communication buffers: a speed switch" },
    { "--fsdp-double-buffer", 0, MEG_ACCEPT, "a Megatron-FSDP buffer option (FSDP is substituted, see --use-torch-fsdp2)" },
    { "--fsdp-manual-registration", 0, MEG_ACCEPT, "see --fsdp-double-buffer" },
    { "--logging-level", 1, MEG_ACCEPT, "Python's logging level: mtrain's log has one level" },
    { "--trust-remote-code", 0, MEG_ACCEPT, "a Hugging Face tokenizer is read from its tokenizer.json by mtrain: no "
      "code runs" },
    { "--enable-experimental", 0, MEG_ACCEPT, "Megatron's opt-in to its experimental features: those mtrain lacks are "
      "refused by their own flags" },
    { "--moe-permute-fusion", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--use-fused-weighted-squared-relu", 0, MEG_ACCEPT, "kernel fusion is the backend's choice" },
    { "--moe-layer-recompute", 0, MEG_SUBST, "the MoE layer is not recomputed: the same numbers with more activation "
      "memory (training.recompute selective / full recomputes in mtrain)" },
    { "--padded-vocab-size", 1, MEG_RULE, "accepted: mtrain pads the vocabulary to 128*tp itself; padded rows never "
      "count (see --make-vocab-size-divisible-by)" },
    { "--moe-layer-freq", 1, MEG_RULE, "model.moe.layer_freq: an integer N (layer i is a MoE layer when i % N == 0, "
      "the others dense MLPs of --ffn-hidden-size), or Megatron's per-layer pattern, a Python list expression such "
      "as ([0]+[1]*26) (0 dense, 1 MoE): model.moe.layer_pattern (a pattern of MoE layers only is layer_freq 1; one "
      "of dense layers only is refused)" },
    { "--moe-router-score-function", 1, MEG_RULE, "model.moe.score_function: softmax (Megatron's default) or sigmoid "
      "(DeepSeek-V3: the chosen sigmoids over their sum); sqrtsoftplus is refused" },
    { "--moe-token-drop-policy", 1, MEG_RULE, "with a capacity (--moe-expert-capacity-factor) mtrain drops by position "
      "within each sequence (docs/moe.md): position is that rule, probs is noted as replaced by it; dropless: no effect" },
    { "--moe-shared-expert-overlap", 0, MEG_ACCEPT, "a scheduling choice (Megatron runs the shared experts on a side "
      "stream, overlapped with the token dispatch): the same numbers, the shared experts run after the routed ones" },
    { "--moe-latent-size", 1, MEG_REFUSE, "MoE latent projections are not implemented" },
    { "--hybrid-layer-pattern", 1, MEG_REFUSE, "Mamba / hybrid models (Megatron's pretrain_mamba.py, Nemotron-H) "
      "are not implemented" },
    { "--hybrid-override-pattern", 1, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--is-hybrid-model", 0, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--mamba-num-heads", 1, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--mamba-head-dim", 1, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--mamba-state-dim", 1, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--mamba-num-groups", 1, MEG_REFUSE, "see --hybrid-layer-pattern" },
    { "--export-model-type", 1, MEG_REFUSE, "a ModelOpt export option: ModelOpt export is not implemented" },
    { "--export-force-local-attention", 0, MEG_ACCEPT, "an attention implementation choice (Megatron's local "
      "DotProductAttention): the attention kernel is the backend's" },
    { "--quick-geglu", 0, MEG_REFUSE, "the quick-GeGLU activation (gpt-oss) is not implemented" },
    { "--activation-func-clamp-value", 1, MEG_REFUSE, "clamping the activation (gpt-oss) is not implemented" },
    { "--enable-gpt-oss", 0, MEG_REFUSE, "gpt-oss's YaRN RoPE on standard attention is not implemented" },
    { "--window-size", 1, MEG_REFUSE, "sliding-window attention is not implemented (every layer attends causally "
      "to the whole sequence)" },
    { "--window-attn-skip-freq", 1, MEG_REFUSE, "see --window-size" },
    { "--softmax-type", 1, MEG_RULE, "vanilla only (Megatron's default); off-by-one and learnable (attention sinks, "
      "gpt-oss) are refused" },
    { "--glu-linear-offset", 1, MEG_RULE, "0 only (Megatron's default); an offset on the gated linear unit's linear "
      "half (gpt-oss) is refused" },
    { "--mup-width-mult", 1, MEG_ACCEPT, "Megatron recomputes it as hidden / --mup-base-hidden-size under --use-mup "
      "and reads it nowhere else: no effect" },
    { "--hierarchical-context-parallel-sizes", 1, MEG_RULE, "the sizes (read as Megatron does: the numbers of the "
      "text, so '[2 2]' and '2 2' are 2, 2) must multiply to --context-parallel-size; the attention is the p2p ring's, "
      "the same numbers (see --cp-comm-type)" },
    { "--use-torch-fsdp2", 0, MEG_SUBST, "parameters and gradients are not sharded (no FSDP): data parallelism with "
      "the optimizer state sharded (the distributed optimizer) instead; the same numbers, more memory per rank" },
    { "--use-megatron-fsdp", 0, MEG_SUBST, "see --use-torch-fsdp2" },
    { "--data-parallel-sharding-strategy", 1, MEG_SUBST, "see --use-torch-fsdp2: what is sharded changes memory, "
      "not the numbers" },
    { "--megatron-fsdp-main-params-dtype", 1, MEG_RULE, "fp32 only (mtrain's main parameters); another value is refused" },
    { "--megatron-fsdp-main-grads-dtype", 1, MEG_RULE, "fp32 only (mtrain accumulates gradients in fp32); another "
      "value is refused" },
    { "--megatron-fsdp-grad-comm-dtype", 1, MEG_RULE, "fp32 only (mtrain reduces gradients in fp32); another value "
      "is refused" },
    { "--export-te-mcore-model", 0, MEG_REFUSE, "ModelOpt knowledge distillation is not implemented" },
    { "--export-kd-teacher-load", 1, MEG_REFUSE, "ModelOpt knowledge distillation is not implemented" },
    { "--export-kd-cfg", 1, MEG_REFUSE, "ModelOpt knowledge distillation is not implemented" },
    { "--perform-rl-step", 0, MEG_REFUSE, "reinforcement learning (GRPO rollouts through Megatron's inference engine) is not implemented: mtrain pretrains" },
    { "--langrl-env-config", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-prompts-per-step", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-group-size", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-iterations", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-kl-beta", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-entropy-term-weight", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-clamp-eps-lower", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--grpo-clamp-eps-upper", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-use-sequence-packing", 0, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-sequence-packing-algo", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-partial-rollouts", 0, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-offload-optimizer-during-inference", 0, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-generation-lag", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-inference-tensor-model-parallel-size", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-inference-pipeline-model-parallel-size", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-submission-granularity", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-consumption-granularity", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--rl-training-cuda-graphs", 0, MEG_REFUSE, "see --perform-rl-step" },
    { "--refit-method", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-max-seq-length", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-logging-step-interval", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-dynamic-batching-buffer-size-gb", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-dynamic-batching-num-cuda-graphs", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-dynamic-batching-unified-memory-level", 1, MEG_REFUSE, "see --perform-rl-step" },
    { "--inference-dynamic-batching-cuda-graph-sizing-distribution", 1, MEG_REFUSE, "see --perform-rl-step" },
};
static const int n_meg_flags = (int)(sizeof meg_flags / sizeof meg_flags[0]);

/* mtrain's own flags (cmd/), for the nearest-name suggestions */
static const char *const own_flags[] = {
    "--config", "--set", "--world-size", "--metrics", "--help", NULL,
};

static const meg_flag *find_flag(const char *arg, const char **eq_value) {
    for (int i = 0; i < n_meg_flags; i++) {
        const size_t n = strlen(meg_flags[i].flag);
        if (strncmp(arg, meg_flags[i].flag, n) != 0) continue;
        if (arg[n] == 0) { *eq_value = NULL; return &meg_flags[i]; }
        if (arg[n] == '=' && meg_flags[i].arity == 1) { *eq_value = arg + n + 1; return &meg_flags[i]; }
    }
    return NULL;
}

typedef struct {
    const char *value[sizeof meg_flags / sizeof meg_flags[0]]; /* "" for a switch seen, NULL not seen */
    const char *more[sizeof meg_flags / sizeof meg_flags[0]][2]; /* the 2nd and 3rd of a 3-value flag */
} meg_seen;

static const char *seen(const meg_seen *s, const char *flag) {
    for (int i = 0; i < n_meg_flags; i++)
        if (!strcmp(meg_flags[i].flag, flag)) return s->value[i];
    return NULL;
}

static void note(mt_recipe *r, const char *fmt, const char *a, const char *b) {
    char line[512];
    snprintf(line, sizeof line, fmt, a, b ? b : "");
    const size_t n = strlen(r->notes), m = strlen(line);
    if (n + m + 2 < sizeof r->notes) {
        memcpy(r->notes + n, line, m);
        r->notes[n + m] = '\n';
        r->notes[n + m + 1] = 0;
    }
}

static int is_set(const mt_recipe *r, const char *key) {
    return mt_recipe_key_is_set(r, mt_recipe_key_find(key));
}

static int ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

static mt_status bad(const char *flag, const char *value, const char *why) {
    return mt_errorf(MT_ERR_CONFIG, "%s %s: %s", flag, value ? value : "", why);
}

/* --split as Megatron reads it: the numbers in the text (a regular expression for [.0-9]+), so a
 * value the shell passed with its quotes ('99,1,0') or with spaces reads the same. In place. */
static void split_numbers(char *v) {
    if (!v || !strpbrk(v, "'\" ")) return; /* plain values stay as written (and in any message) */
    char *w = v;
    for (const char *p = v; *p;) {
        if (!isdigit((unsigned char)*p) && *p != '.') { p++; continue; }
        if (w != v) *w++ = ',';
        while (isdigit((unsigned char)*p) || *p == '.') *w++ = *p++;
    }
    *w = 0;
}

/* Takes the rows of meg_flags out of argv (in place), recording their values. Refused flags and
 * missing values go to *P, reported with every other problem of the command line. */
static void take_flags(int *argc, char **argv, meg_seen *s, mt_recipe_problems *P) {
    char line[1024];
    int n = *argc, k = 0;
    for (int i = 0; i < n; i++) {
        const char *a = argv[i], *eqv = NULL;
        const meg_flag *f = a ? find_flag(a, &eqv) : NULL;
        if (a && !strcmp(a, "--")) { /* the rest belongs to someone else */
            while (i < n) argv[k++] = argv[i++];
            break;
        }
        if (a && (!strcmp(a, "--split") || !strncmp(a, "--split=", 8)))
            split_numbers(a[7] ? argv[i] + 8 : i + 1 < n ? argv[i + 1] : NULL);
        if (!f) { argv[k++] = argv[i]; continue; }
        const int idx = (int)(f - meg_flags);
        const char *v = "";
        if (f->arity == 1) {
            if (eqv) v = eqv;
            else if (i + 1 < n) v = argv[++i];
            else {
                snprintf(line, sizeof line, "%s: needs a value (%s)", f->flag, f->note);
                mt_recipe_problem_add(P, line);
                continue;
            }
        } else if (f->arity > 1) {
            if (i + f->arity >= n) {
                snprintf(line, sizeof line, "%s: needs %d values", f->flag, f->arity);
                mt_recipe_problem_add(P, line);
                continue;
            }
            v = argv[i + 1];
            for (int q = 1; q < f->arity && q < 3; q++) s->more[idx][q - 1] = argv[i + 1 + q];
            i += f->arity;
        }
        s->value[idx] = v;
        if (f->kind == MEG_REFUSE) {
            snprintf(line, sizeof line, "%s: %s", f->flag, f->note);
            mt_recipe_problem_add(P, line);
        }
    }
    *argc = k;
    if (k < n) argv[k] = NULL;
}

static mt_status set(mt_recipe *r, const char *key, const char *value, const char *flag) {
    return mt_recipe_set(r, key, value, flag);
}

/* The rules, once the aliases have been applied (so --num-layers, --tensor-model-parallel-size ...
 * are known whatever their order on the command line). */
static void apply_rules(mt_recipe *r, const meg_seen *s, mt_recipe_problems *P) {
#define KEEP(x) mt_recipe_problem_status(P, (x)) /* a broken rule goes to the report; the next rule runs */
    const char *v;
    char buf[64];
    if ((v = seen(s, "--normalization"))) {
        if (ieq(v, "LayerNorm")) KEEP(set(r, "model.norm", "layernorm", "--normalization"));
        else if (ieq(v, "RMSNorm")) KEEP(set(r, "model.norm", "rmsnorm", "--normalization"));
        else KEEP(bad("--normalization", v, "LayerNorm or RMSNorm"));
    }
    if ((v = seen(s, "--rope-type"))) {
        if (!strcmp(v, "yarn") && r->model.mla.enabled) KEEP(set(r, "model.mla.rope_yarn", "true", "--rope-type"));
        else if (!strcmp(v, "rope")) KEEP(set(r, "model.mla.rope_yarn", "false", "--rope-type"));
        else KEEP(bad("--rope-type", v, "rope, or yarn with --multi-latent-attention (Megatron: common attention "
                      "only supports rope)"));
    }
    if ((v = seen(s, "--position-embedding-type"))) {
        if (!strcmp(v, "learned_absolute")) KEEP(set(r, "model.position", "learned", "--position-embedding-type"));
        else if (!strcmp(v, "rope")) KEEP(set(r, "model.position", "rope", "--position-embedding-type"));
        else KEEP(bad("--position-embedding-type", v, "learned_absolute or rope (none, yarn, mrope are not implemented)"));
    }
    if (seen(s, "--use-rotary-position-embeddings")) KEEP(set(r, "model.position", "rope", "--use-rotary-position-embeddings"));
    if (seen(s, "--no-position-embedding") && r->model.position != MT_POS_ROPE)
        KEEP(bad("--no-position-embedding", NULL, "a model with no position information at all is not "
                   "implemented; use --position-embedding-type rope"));
    if ((v = seen(s, "--group-query-attention")) || seen(s, "--num-query-groups")) {
        const char *g = seen(s, "--num-query-groups");
        if (v && g) KEEP(set(r, "model.kv_heads", g, "--num-query-groups"));
        else if (v) KEEP(bad("--group-query-attention", NULL, "needs --num-query-groups N (the key/value heads)"));
        else note(r, "--num-query-groups %s: ignored without --group-query-attention (as Megatron: every head has "
                  "its own keys and values)", g, NULL);
    }
    if ((v = seen(s, "--rotary-percent"))) KEEP(set(r, "model.rotary_percent", v, "--rotary-percent"));
    if (seen(s, "--rotary-interleaved")) KEEP(set(r, "model.rope_interleaved", "true", "--rotary-interleaved"));
    const char *drop[] = { "--attention-dropout", "--hidden-dropout" };
    for (int i = 0; i < 2; i++)
        if ((v = seen(s, drop[i])) && strtod(v, NULL) != 0.0)
            KEEP(bad(drop[i], v, "dropout is not implemented; use 0.0 (modern pretraining recipes do)"));
    if ((v = seen(s, "--cp-comm-type")) && strcmp(v, "p2p") != 0) {
        if (strcmp(v, "a2a") && strcmp(v, "allgather") && strcmp(v, "a2a+p2p"))
            KEEP(bad("--cp-comm-type", v, "p2p, a2a, allgather or a2a+p2p"));
        else
            note(r, "--cp-comm-type %s: the attention is computed by the p2p ring of K/V blocks; the same exact "
                 "attention, so the same numbers%s", v, NULL);
    }
    if ((v = seen(s, "--moe-token-dispatcher-type")) && strcmp(v, "alltoall") != 0)
        KEEP(bad("--moe-token-dispatcher-type", v, "only the alltoall dispatcher is implemented"));
    if ((v = seen(s, "--moe-router-load-balancing-type"))) {
        if (!strcmp(v, "none")) KEEP(set(r, "model.moe.aux_loss_coeff", "0", "--moe-router-load-balancing-type"));
        if (!strcmp(v, "none") || !strcmp(v, "aux_loss") || !strcmp(v, "seq_aux_loss"))
            KEEP(set(r, "model.moe.load_balancing", v, "--moe-router-load-balancing-type"));
        else
            KEEP(bad("--moe-router-load-balancing-type", v, "aux_loss, seq_aux_loss or none (sinkhorn, "
                       "global_aux_loss, quantile_balancing and lists of types are not implemented)"));
    }
    if ((v = seen(s, "--moe-layer-freq"))) {
        unsigned char bits[1024];
        char *e;
        (void)strtol(v, &e, 10);
        const int n_layers = e != v && !*e ? 0 : mt_recipe_moe_pattern_parse(v, bits, (int)sizeof bits);
        int n_dense = 0;
        for (int i = 0; i < n_layers; i++) n_dense += !bits[i];
        if (e != v && !*e) {
            KEEP(set(r, "model.moe.layer_freq", v, "--moe-layer-freq"));
        } else if (n_layers < 0) {
            KEEP(bad("--moe-layer-freq", v, "an integer or a pattern such as ([0]+[1]*26) (lists of 0 and 1, * and +, "
                     "at most 1024 layers)"));
        } else if (n_layers != r->model.layers) {
            snprintf(buf, sizeof buf, "%d", n_layers);
            KEEP(mt_errorf(MT_ERR_CONFIG, "--moe-layer-freq %s: the pattern has %s layers, --num-layers %d (Megatron "
                           "asserts they are equal)", v, buf, r->model.layers));
        } else if (n_dense == n_layers) {
            KEEP(bad("--moe-layer-freq", v, "every layer of the pattern is dense: drop --num-experts for a dense model"));
        } else if (n_dense > 0) {
            KEEP(set(r, "model.moe.layer_pattern", v, "--moe-layer-freq"));
        } else {
            KEEP(set(r, "model.moe.layer_freq", "1", "--moe-layer-freq"));
        }
    }
    if ((v = seen(s, "--moe-router-score-function"))) {
        if (!strcmp(v, "softmax") || !strcmp(v, "sigmoid"))
            KEEP(set(r, "model.moe.score_function", v, "--moe-router-score-function"));
        else
            KEEP(bad("--moe-router-score-function", v, "softmax or sigmoid (sqrtsoftplus routing is not implemented)"));
    }
    if ((v = seen(s, "--moe-token-drop-policy"))) {
        if (strcmp(v, "probs") && strcmp(v, "position"))
            KEEP(bad("--moe-token-drop-policy", v, "probs or position"));
        else if (!strcmp(v, "probs") && r->model.moe.capacity_factor > 0.0f)
            note(r, "--moe-token-drop-policy %s: over capacity mtrain drops by position within each sequence "
                 "(docs/moe.md), the same tokens in every layout, not the lowest probabilities%s", v, NULL);
    }
    if ((v = seen(s, "--softmax-type")) && strcmp(v, "vanilla") != 0)
        KEEP(bad("--softmax-type", v, "vanilla only (attention sinks, off-by-one / learnable, are not implemented)"));
    if ((v = seen(s, "--glu-linear-offset"))) {
        char *end;
        const double x = strtod(v, &end);
        if (end == v || *end || x != 0.0)
            KEEP(bad("--glu-linear-offset", v, "0 only (an offset on the gated linear unit is not implemented)"));
    }
    if ((v = seen(s, "--padded-vocab-size")))
        note(r, "--padded-vocab-size %s: the vocabulary is padded to a multiple of 128 * tp (padded rows never count "
             "in the loss)%s", v, NULL);
    if ((v = seen(s, "--optimizer")) && strcmp(v, "adam") != 0)
        KEEP(bad("--optimizer", v, "only adam (AdamW) is implemented"));
    if ((v = seen(s, "--distributed-timeout-minutes"))) {
        char *end;
        long long m = strtoll(v, &end, 10);
        if (*end || m < 1 || m > 100000) KEEP(bad("--distributed-timeout-minutes", v, "a whole number of minutes >= 1"));
        else {
            snprintf(buf, sizeof buf, "%lld", m * 60);
            KEEP(set(r, "parallel.timeout_s", buf, "--distributed-timeout-minutes"));
        }
    }
    for (int i = 0; i < n_meg_flags; i++)
        if (!strcmp(meg_flags[i].flag, "--rampup-batch-size") && s->value[i]) {
            KEEP(set(r, "training.rampup_start", s->value[i], "--rampup-batch-size"));
            KEEP(set(r, "training.rampup_increment", s->more[i][0], "--rampup-batch-size"));
            KEEP(set(r, "training.rampup_samples", s->more[i][1], "--rampup-batch-size"));
        }
    if (seen(s, "--recompute-activations")) KEEP(set(r, "training.recompute", "selective", "--recompute-activations"));
    /* --swiglu without --ffn-hidden-size: Megatron's width, int(4h * 2/3 / 64) * 64 */
    if (r->model.activation == MT_ACT_SWIGLU && r->origin.flag[mt_recipe_key_find("model.activation")] &&
        !strcmp(r->origin.flag[mt_recipe_key_find("model.activation")], "--swiglu") && !is_set(r, "model.ffn_hidden") &&
        r->model.hidden > 0) {
        snprintf(buf, sizeof buf, "%d", (int)((4.0 * r->model.hidden * 2.0 / 3.0) / 64.0) * 64);
        KEEP(set(r, "model.ffn_hidden", buf, "--swiglu"));
    }
    if ((v = seen(s, "--kv-channels"))) KEEP(set(r, "model.head_dim", v, "--kv-channels"));
    if ((v = seen(s, "--num-layers-per-virtual-pipeline-stage"))) {
        /* Megatron's arguments.py: the embedding / loss counted as layers count here too */
        const int per = atoi(v), pp = r->parallel.pipeline > 0 ? r->parallel.pipeline : 1;
        const int L = r->model.layers + (r->parallel.embedding_in_split ? 1 : 0) + (r->parallel.loss_in_split ? 1 : 0);
        if (per < 1 || L % (pp * per)) {
            char why[256];
            snprintf(why, sizeof why, "model.layers = %d (with the embedding / loss counted as layers) is not a "
                     "multiple of pipeline size %d * %d layers per virtual stage", L, pp, per > 0 ? per : 0);
            KEEP(bad("--num-layers-per-virtual-pipeline-stage", v, why));
        } else {
            snprintf(buf, sizeof buf, "%d", L / (pp * per));
            KEEP(set(r, "parallel.virtual_pipeline", buf, "--num-layers-per-virtual-pipeline-stage"));
        }
    }
    /* --sequence-parallel at tp = 1: Megatron warns and turns it off */
    const int k_sp = mt_recipe_key_find("parallel.sequence_parallel");
    if (r->parallel.sequence_parallel && r->parallel.tensor == 1 && r->origin.flag[k_sp] &&
        !strcmp(r->origin.flag[k_sp], "--sequence-parallel")) {
        KEEP(set(r, "parallel.sequence_parallel", "false", "--sequence-parallel"));
        note(r, "--sequence-parallel: turned off, the tensor-parallel size is 1 (as Megatron does)%s%s", "", NULL);
    }
    if ((v = seen(s, "--make-vocab-size-divisible-by")) && atoi(v) != 128)
        note(r, "--make-vocab-size-divisible-by %s: the vocabulary is padded to a multiple of 128 * tp (padded rows "
             "never count in the loss)%s", v, NULL);
}

/* tokenizer: --tokenizer-type, --tokenizer-model, and --vocab-file + --merge-file alone */
static void apply_tokenizer_rules(mt_recipe *r, const meg_seen *s, mt_recipe_problems *P) {
    char buf[64];
    const char *tt = seen(s, "--tokenizer-type"), *tm = seen(s, "--tokenizer-model");
    const char *spm = !tt ? NULL : !strcmp(tt, "SentencePieceTokenizer") ? "spm"
                    : !strcmp(tt, "GPTSentencePieceTokenizer") ? "gptspm" : !strcmp(tt, "Llama2Tokenizer") ? "llama2" : NULL;
    if (tt) {
        if (!strcmp(tt, "GPT2BPETokenizer")) KEEP(set(r, "data.tokenizer", "gpt2bpe", "--tokenizer-type"));
        else if (!strcmp(tt, "NullTokenizer")) {
            /* Megatron's NullTokenizer: --vocab-size ids plus the eod after them */
            if (!is_set(r, "model.vocab")) KEEP(bad("--tokenizer-type", tt, "needs --vocab-size N (eod is id N)"));
            else {
                snprintf(buf, sizeof buf, "%d", r->model.vocab + 1);
                KEEP(set(r, "model.vocab", buf, "--tokenizer-type NullTokenizer"));
                KEEP(set(r, "data.tokenizer", "null", "--tokenizer-type"));
            }
        }
        else if (!strcmp(tt, "HuggingFaceTokenizer")) {
            if (!tm) KEEP(bad("--tokenizer-type", tt, "needs --tokenizer-model (a tokenizer.json or a folder holding one)"));
            else KEEP(set(r, "data.tokenizer", "hf", "--tokenizer-type"));
        } else if (spm) {
            if (!tm) KEEP(bad("--tokenizer-type", tt, "needs --tokenizer-model (a SentencePiece .model file)"));
            else {
                KEEP(set(r, "data.tokenizer", spm, "--tokenizer-type"));
                KEEP(set(r, "data.vocab", tm, "--tokenizer-model"));
            }
        } else
            KEEP(bad("--tokenizer-type", tt, "GPT2BPETokenizer (with --vocab-file, --merge-file), HuggingFaceTokenizer "
                       "(with --tokenizer-model DIR/tokenizer.json) and SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                       "Llama2Tokenizer (with --tokenizer-model X.model) are implemented; convert other tokenizers to a "
                       "Hugging Face tokenizer.json"));
    }
    if (tm && !tt) KEEP(bad("--tokenizer-model", tm, "give --tokenizer-type HuggingFaceTokenizer (or a SentencePiece "
                            "type) with it"));
    else if (tm && strcmp(tt, "HuggingFaceTokenizer") != 0 && !spm)
        KEEP(bad("--tokenizer-model", tm, "only with --tokenizer-type HuggingFaceTokenizer or a SentencePiece type"));
    else if (tm && !spm) {
        char path[MT_PATH_MAX];
        const size_t n = strlen(tm);
        if (n >= 5 && !strcmp(tm + n - 5, ".json")) snprintf(path, sizeof path, "%s", tm);
        else snprintf(path, sizeof path, "%s%stokenizer.json", tm, n && tm[n - 1] == '/' ? "" : "/");
        KEEP(set(r, "data.vocab", path, "--tokenizer-model"));
    }
    const int k_vocab = mt_recipe_key_find("data.vocab"), k_tok = mt_recipe_key_find("data.tokenizer");
    if (!tt && r->origin.flag[k_vocab] && !strcmp(r->origin.flag[k_vocab], "--vocab-file") && !mt_recipe_key_is_set(r, k_tok)) {
        /* Megatron's GPT scripts give --vocab-file and --merge-file: GPT-2 BPE */
        if (r->data.merges[0]) KEEP(set(r, "data.tokenizer", "gpt2bpe", "--vocab-file"));
        else KEEP(bad("--vocab-file", r->data.vocab, "without --merge-file or --tokenizer-type: give --merge-file "
                        "(GPT-2 BPE) or --tokenizer-type"));
    }
}
#undef KEEP

/* The rules of the flags Megatron's functional-test configs add (the rows after the comment that
 * names them): each is checked against the layout or model the aliases gave. */
static void apply_more_rules(mt_recipe *r, const meg_seen *s, mt_recipe_problems *P) {
    const char *v;
    char why[256];
    if ((v = seen(s, "--expert-tensor-parallel-size")) && r->model.moe.experts == 0)
        note(r, "--expert-tensor-parallel-size %s: the model has no experts (no --num-experts), nothing to split%s", v,
             NULL);
    else if (v && atoi(v) != r->parallel.tensor) {
        snprintf(why, sizeof why, "mtrain splits the experts over the tensor-parallel group (size %d); a separate "
                 "expert tensor-parallel size is not implemented (drop the flag, or make it %d)", r->parallel.tensor,
                 r->parallel.tensor);
        mt_recipe_problem_status(P, bad("--expert-tensor-parallel-size", v, why));
    }
    if ((v = seen(s, "--num-distributed-optimizer-instances"))) {
        if (atoi(v) < 1) mt_recipe_problem_status(P, bad("--num-distributed-optimizer-instances", v, "a count >= 1"));
        else if (atoi(v) > 1)
            note(r, "--num-distributed-optimizer-instances %s: one distributed-optimizer instance over the whole "
                 "data-parallel group; the same numbers (instances only choose which ranks hold a shard)%s", v, NULL);
    }
    if ((v = seen(s, "--hierarchical-context-parallel-sizes"))) {
        long long prod = 1;
        int n_sizes = 0;
        for (const char *p = v; *p;) {
            if (!isdigit((unsigned char)*p)) { p++; continue; }
            char *end;
            prod *= strtoll(p, &end, 10);
            p = end;
            n_sizes++;
        }
        if (n_sizes == 0 || prod != r->parallel.context) {
            snprintf(why, sizeof why, "the sizes multiply to %lld, not the context-parallel size %d (Megatron asserts "
                     "the same)", n_sizes ? prod : 0, r->parallel.context);
            mt_recipe_problem_status(P, bad("--hierarchical-context-parallel-sizes", v, why));
        }
    }
    const char *const fsdp_dtypes[] = { "--megatron-fsdp-main-params-dtype", "--megatron-fsdp-main-grads-dtype",
                                        "--megatron-fsdp-grad-comm-dtype" };
    for (int i = 0; i < 3; i++)
        if ((v = seen(s, fsdp_dtypes[i])) && strcmp(v, "fp32") != 0)
            mt_recipe_problem_status(P, bad(fsdp_dtypes[i], v, "only fp32 (mtrain's main parameters, gradient "
                                            "accumulation and reduction are fp32)"));
    /* Megatron: --eval-iters 0 means no validation, and --save-interval without --save saves nothing */
    const int k_ei = mt_recipe_key_find("logging.eval_iters"), k_si = mt_recipe_key_find("checkpoint.save_interval");
    if (r->logging.eval_iters == 0 && r->logging.eval_interval > 0 && r->origin.flag[k_ei] &&
        !strcmp(r->origin.flag[k_ei], "--eval-iters")) {
        mt_recipe_problem_status(P, set(r, "logging.eval_interval", "0", "--eval-iters"));
        note(r, "--eval-iters 0: no evaluation (as Megatron)%s%s", "", NULL);
    }
    if (r->checkpoint.save_interval > 0 && !r->checkpoint.dir[0] && r->origin.flag[k_si] &&
        !strcmp(r->origin.flag[k_si], "--save-interval")) {
        mt_recipe_problem_status(P, set(r, "checkpoint.save_interval", "0", "--save-interval"));
        note(r, "--save-interval without --save: nothing is saved (as Megatron)%s%s", "", NULL);
    }
    if ((v = seen(s, "--moe-ffn-hidden-size")) && r->model.moe.experts > 0) {
        /* the experts' width; dense layers keep --ffn-hidden-size. When every layer is a MoE layer and
           --ffn-hidden-size is not given, the dense width (then unused) follows it too */
        mt_recipe_problem_status(P, set(r, "model.moe.ffn_hidden", v, "--moe-ffn-hidden-size"));
        const char *by = r->origin.flag[mt_recipe_key_find("model.ffn_hidden")];
        if (mt_recipe_moe_layers(r, 0, r->model.layers) == r->model.layers && !(by && !strcmp(by, "--ffn-hidden-size")))
            mt_recipe_problem_status(P, set(r, "model.ffn_hidden", v, "--moe-ffn-hidden-size"));
    }
}

/* --squared-relu: Megatron's squared_relu (megatron/core/activations.py) as the MLP's activation;
 * megatron/training/arguments.py asserts it is not combined with --swiglu */
static void squared_relu_rule(mt_recipe *r, const meg_seen *s, mt_recipe_problems *P) {
    if (!seen(s, "--squared-relu")) return;
    const char *by = r->origin.flag[mt_recipe_key_find("model.activation")];
    if (r->model.activation == MT_ACT_SWIGLU && by && !strcmp(by, "--swiglu"))
        mt_recipe_problem_status(P, bad("--squared-relu", NULL, "not with --swiglu (Megatron asserts the same): "
                                        "squared ReLU replaces the activation of a non-gated MLP; drop one"));
    else mt_recipe_problem_status(P, set(r, "model.activation", "squared_relu", "--squared-relu"));
}

mt_status mt_recipe_take_megatron(mt_recipe *r, int *argc, char **argv, void **state, mt_recipe_problems *P) {
    meg_seen *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return mt_errorf(MT_ERR_OOM, "out of memory parsing the command line");
    take_flags(argc, argv, s, P);
    (void)r;
    return MT_OK;
}

mt_status mt_recipe_finish_megatron(mt_recipe *r, void *state, mt_recipe_problems *P) {
    const meg_seen *s = state;
    apply_rules(r, s, P);
    apply_tokenizer_rules(r, s, P);
    apply_more_rules(r, s, P);
    squared_relu_rule(r, s, P);
    for (int i = 0; i < n_meg_flags; i++) {
        if (!s->value[i] || (meg_flags[i].kind != MEG_ACCEPT && meg_flags[i].kind != MEG_SUBST)) continue;
        if (meg_flags[i].kind == MEG_SUBST && !strcmp(meg_flags[i].flag, "--fp16"))
            TRY(set(r, "training.precision", "bf16", "--fp16"));
        note(r, "%s: %s", meg_flags[i].flag, meg_flags[i].note);
    }
    return MT_OK;
}

/* ---- Megatron's defaults for a run its flags alone define ---- */

/* Megatron-LM's argument defaults where mtrain's recipe defaults differ (megatron/core/optimizer/
 * optimizer_config.py, transformer/transformer_config.py and training/config/training_config.py
 * at NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553); test/megatron/defaults.txt
 * holds the whole table, checked by test/e2e/megatron_defaults.sh. */
static const struct { const char *key, *value; } meg_defaults[] = {
    { "optimizer.beta2", "0.999" },          /* --adam-beta2 0.999 (mtrain's recipes: 0.95) */
    { "optimizer.decay", "linear" },         /* --lr-decay-style linear (mtrain's recipes: cosine) */
    { "model.moe.capacity_factor", "0" },    /* --moe-expert-capacity-factor None: dropless */
    { "model.moe.aux_loss_coeff", "0" },     /* --moe-aux-loss-coeff 0.0 */
    { "parallel.timeout_s", "600" },         /* --distributed-timeout-minutes 10 (mtrain's recipes: 300 s) */
    { "training.rerun_mode", "validate_results" }, /* --rerun-mode validate_results (mtrain's recipes: disabled) */
};

mt_status mt_recipe_megatron_defaults(mt_recipe *r) {
    char err[256];
    for (size_t i = 0; i < sizeof meg_defaults / sizeof meg_defaults[0]; i++) {
        const int k = mt_recipe_key_find(meg_defaults[i].key);
        if (k < 0) return mt_errorf(MT_ERR_INTERNAL, "Megatron default of unknown key %s", meg_defaults[i].key);
        /* a default, not a setting: the key stays "not set", so any flag or --set still applies */
        if (mt_recipe_parse_value(r, k, meg_defaults[i].value, err, sizeof err) != MT_OK)
            return mt_errorf(MT_ERR_INTERNAL, "Megatron default %s: %s", meg_defaults[i].key, err);
    }
    return MT_OK;
}

/* ---- unknown arguments ---- */

static int edit_distance(const char *a, const char *b) {
    const size_t na = strlen(a), nb = strlen(b);
    if (na > 60 || nb > 60) return 99;
    int d[61][61];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[na][nb];
}

static const char *nearest_flag(const char *arg) {
    char name[128];
    snprintf(name, sizeof name, "%s", arg);
    char *eq = strchr(name, '=');
    if (eq) *eq = 0;
    for (char *p = name + 2; *p; p++) if (*p == '_') *p = '-'; /* --train_iters */
    const char *best = NULL;
    int bd = 1 << 30;
    for (int i = 0; i < mt_recipe_n_aliases; i++) {
        const int d = edit_distance(name, mt_recipe_aliases[i].flag);
        if (d < bd) { bd = d; best = mt_recipe_aliases[i].flag; }
    }
    for (int i = 0; i < n_meg_flags; i++) {
        const int d = edit_distance(name, meg_flags[i].flag);
        if (d < bd) { bd = d; best = meg_flags[i].flag; }
    }
    for (int i = 0; own_flags[i]; i++) {
        const int d = edit_distance(name, own_flags[i]);
        if (d < bd) { bd = d; best = own_flags[i]; }
    }
    const int len = (int)strlen(name);
    return best && bd <= (len < 12 ? 3 : len / 3) ? best : NULL;
}

mt_status mt_recipe_unknown_args(int argc, char **argv) {
    if (argc <= 0) return MT_OK;
    char msg[4096], e[MSG_VAL_MAX + 8];
    int n = 0, m = 0;
    msg[0] = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!a) continue;
        const char *value = NULL;
        if (!strncmp(a, "--", 2) && i + 1 < argc && argv[i + 1] && argv[i + 1][0] != '-' && !strchr(a, '='))
            value = argv[++i]; /* the unknown flag's value, most likely */
        const char *near = !strncmp(a, "--", 2) ? nearest_flag(a) : NULL;
        char line[512];
        if (near)
            snprintf(line, sizeof line, "\n  %s%s%s: unknown; did you mean %s?", mt_recipe_echo(a, e, sizeof e),
                     value ? " " : "", value ? value : "", near);
        else
            snprintf(line, sizeof line, "\n  %s%s%s: unknown", mt_recipe_echo(a, e, sizeof e), value ? " " : "",
                     value ? value : "");
        const size_t k = strlen(line);
        if ((size_t)m + k + 80 < sizeof msg) {
            memcpy(msg + m, line, k + 1);
            m += (int)k;
        }
        n++;
    }
    return mt_errorf(MT_ERR_CONFIG, "%d unknown argument%s (see `mtrain --help`, docs/megatron-flags.md, or set any "
                     "recipe key with --set section.key=value):%s", n, n == 1 ? "" : "s", msg);
}

/* ---- the table for docs/megatron-flags.md ---- */

void mt_recipe_print_megatron_flags(FILE *f) {
    fprintf(f, "| Megatron flag | mtrain | note |\n|---|---|---|\n");
    for (int i = 0; i < mt_recipe_n_aliases; i++) {
        const mt_recipe_alias *a = &mt_recipe_aliases[i];
        if (a->fixed) fprintf(f, "| `%s` | mapped: `%s: %s` | |\n", a->flag, a->key, a->fixed);
        else fprintf(f, "| `%s` | mapped: `%s` | |\n", a->flag, a->key);
    }
    static const char *const kind_text[] = { "accepted (no effect here)", "substitute", "refused", "rule" };
    for (int i = 0; i < n_meg_flags; i++) {
        const meg_flag *g = &meg_flags[i];
        fprintf(f, "| `%s%s` | %s | %s |\n", g->flag, g->arity == 1 ? " X" : g->arity > 1 ? " X Y Z" : "",
                kind_text[g->kind], g->note);
    }
}

void mt_recipe_print_flag_list(FILE *f) {
    int col = 0;
    for (int i = 0; i < mt_recipe_n_aliases + n_meg_flags; i++) {
        const char *name = i < mt_recipe_n_aliases ? mt_recipe_aliases[i].flag : meg_flags[i - mt_recipe_n_aliases].flag;
        const int n = (int)strlen(name) + 1;
        if (col + n > 100) { fputc('\n', f); col = 0; }
        fprintf(f, "%s%s", col ? " " : "  ", name);
        col += n + (col ? 0 : 1);
    }
    fputc('\n', f);
}
