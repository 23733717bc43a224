# docs/megatron-flags.md stays true: its table is exactly what the parser's
# tables print (`mtrain recipe-reference --megatron`), no flag is both an alias and a rule / note
# row (the rows are taken first, so an alias behind one would never apply), and every flag of the
# Megatron example argument lists in test/megatron/ (and the model confs in test/megatron/modelopt/, whose
# check outcome is asserted too) is in the table (mapped, accepted, substitute,
# refused or rule); `mtrain --help` lists every flag of the table. Also: --split with the quotes a
# shell passed, the pretrain_gpt.py token after `mtrain launch`'s torchrun flags, the vocabulary
# size from a tokenizer.json, and --use-checkpoint-args (the model from the save's manifest recipe:
# a 2-iteration save of a RoPE / RMSNorm / SwiGLU model with --kv-channels 24 and --rotary-percent
# 0.5, resumed by a command line that gives none of those; before any save, a note).
source test/e2e_lib.sh
"$MTRAIN" recipe-reference --megatron >"$TMP/table.md" || fail "recipe-reference --megatron failed"
sed -n '/<!-- BEGIN mtrain recipe-reference --megatron -->/,/<!-- END mtrain recipe-reference --megatron -->/p' \
  docs/megatron-flags.md | sed '1d;$d' >"$TMP/doc.md"
diff "$TMP/table.md" "$TMP/doc.md" >"$TMP/diff" || { head -n 20 "$TMP/diff"; fail "docs/megatron-flags.md is out of date: regenerate its table with ./mtrain recipe-reference --megatron"; }
grep -o '^| `--[a-z0-9_-]*' "$TMP/table.md" | cut -c4- | sort >"$TMP/flags"
dups=$(uniq -d "$TMP/flags")
[ -z "$dups" ] || fail "flags both aliased and in the Megatron table: $dups"
echo "table: $(wc -l <"$TMP/flags") flags, each once, docs in step"
for f in test/megatron/*.args test/megatron/modelopt/*.args; do
  grep -v '^#' "$f" | grep -o '^--[a-z0-9_-]*' | sort -u | while read -r flag; do
    grep -qx -- "$flag" "$TMP/flags" || { echo "$f: $flag"; exit 1; }
  done || fail "a flag of a Megatron example is not in the table"
done
# Megatron's own model confs (test/megatron/modelopt/: MODEL_ARGS of examples/post_training/modelopt/conf):
# the models mtrain computes pass `mtrain check` with the conf's meaning (Llama 3.1's RoPE scaling, Qwen2.5's
# q / k / v biases, Qwen3's query / key norms, a MoE pattern of MoE layers only; DeepSeek's
# dense first layer is a model.moe.layer_pattern); those it does not are refused, each naming the flag
# of the missing feature and nothing the conf states being unknown. Appended: the run's length and batch,
# and a tokenizer where the conf names a Hugging Face one this machine lacks (the last value wins).
conf() { # conf NAME WANT_RC NEEDLE... (NEEDLE: a line the check prints; KEY=VALUE: the resolved recipe's)
  local name=$1 want=$2 rc=0; shift 2
  mapfile -t A < <(grep -v '^#' "test/megatron/modelopt/$name.args")
  "$MTRAIN" check --world-size 8 "${A[@]}" --global-batch-size 8 --train-iters 10 --tokenizer-type NullTokenizer \
    --vocab-size 1000 >"$TMP/$name.check" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$TMP/$name.check"; fail "$name: mtrain check exited $rc, expected $want"; }
  ! grep -q "unknown argument" "$TMP/$name.check" || { grep -A9 "unknown argument" "$TMP/$name.check"; fail "$name: unknown flags"; }
  local n
  for n in "$@"; do
    grep -qF -- "$n" "$TMP/$name.check" || { cat "$TMP/$name.check"; fail "$name: no '$n' in mtrain check's output"; }
  done
  echo "ok: Megatron's $name conf: mtrain check exit $rc$([ $# -gt 0 ] && printf '; has: %s' "$*")"
}
conf llama3.1_8b 0 "rope_scaling: true" "rope_scaling_factor: 8" "rope_theta: 500000" "kv_heads: 8"
conf qwen3_8b 0 "qk_layernorm: true" "rope_theta: 1e+06"
conf qwen3_30b_a3b 0 "experts: 128" "top_k: 8" "layer_freq: 1" "qk_layernorm: true"
conf qwen2.5_7b 0 "qkv_bias: true" "bias: false" "rope_theta: 1e+06"
# DeepSeek-V2-Lite: multi-latent attention with YaRN's softmax scale, a dense first layer, shared experts, the
# pre-softmax router with seq_aux_loss; DeepSeek-R1 (V3's architecture): also sigmoid routing with the expert bias,
# 4 of 8 groups, scaling 2.5, three dense layers. Both pass with their meaning.
conf deepseek_v2_lite 0 "layer_pattern: \"([0]+[1]*26)\"" "shared_ffn: 2816" "load_balancing: seq_aux_loss" \
  "mscale_all_dim: 0.707" "ffn_hidden: 1408"
conf deepseek_r1 0 "layer_pattern: \"[0]*3+[1]*58\"" "shared_ffn: 2048" "score_function: sigmoid" "expert_bias: true" \
  "num_groups: 8" "group_topk: 4" "topk_scaling_factor: 2.5" "q_lora_rank: 1536"
# Kimi-K2 (DeepSeek-V3's architecture at 61 layers, 384 experts): passes with its meaning
conf kimi_k2 0 "layer_pattern: \"[0]*1+[1]*60\"" "experts: 384" "score_function: sigmoid" "expert_bias: true"
# Llama 4 Scout: the L2-normed attention (--export-qk-l2-norm), sigmoid top-1 routing with the weight on the expert's
# input (--export-moe-apply-probs-on-input) and a shared expert: passes with its meaning
conf llama4_scout 0 "qk_l2_norm: true" "apply_probs_on_input: true" "top_k: 1" "shared_ffn: 8192" "score_function: sigmoid"
conf nemotron3_nano_30b_a3b 1 "--hybrid-layer-pattern" "--mamba-num-heads"
# shared experts as Qwen2-MoE's (the total width, a sigmoid gate; the overlap is a scheduling choice)
"$MTRAIN" check --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 \
  --train-iters 2 --micro-batch-size 1 --global-batch-size 2 --vocab-size 4096 --disable-bias-linear --swiglu --num-experts 4 \
  --moe-shared-expert-intermediate-size 96 --moe-shared-expert-gate --moe-shared-expert-overlap >"$TMP/shared.yaml" 2>"$TMP/err" \
  || { cat "$TMP/err"; fail "check with shared experts"; }
grep -q "^    shared_ffn: 96 " "$TMP/shared.yaml" && grep -q "^    shared_gate: true " "$TMP/shared.yaml" \
  || { grep shared "$TMP/shared.yaml"; fail "--moe-shared-expert-intermediate-size / -gate not mapped"; }
echo "ok: --moe-shared-expert-intermediate-size 96 --moe-shared-expert-gate -> model.moe.shared_ffn 96, shared_gate true"
"$MTRAIN" --help >"$TMP/help" 2>&1 || true
while read -r flag; do grep -q -- " $flag\( \|$\)" "$TMP/help" || fail "mtrain --help does not list $flag"; done <"$TMP/flags"
echo "ok: every example flag is in the table; --help lists all $(wc -l <"$TMP/flags")"
# quoted values as Megatron's parsers read them: --split takes the numbers of its text, so the quotes a
# launch script's shell passes on ('99,1,0') read the same
F=(--mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
   --train-iters 2 --micro-batch-size 1 --global-batch-size 2 --vocab-size 4096 --eval-interval 0)
"$MTRAIN" check "${F[@]}" --split "'99,1,0'" 2>"$TMP/err" | grep -q 'split: "99,1,0"' || { cat "$TMP/err"; fail "--split \"'99,1,0'\" not read as 99,1,0"; }
# torchrun's script slot: mtrain launch --nproc_per_node 2 pretrain_gpt.py ARGS trains
"$MTRAIN" launch --nproc_per_node 2 pretrain_gpt.py "${F[@]}" >"$TMP/launch.out" 2>&1 || { tail -n 5 "$TMP/launch.out"; fail "launch ... pretrain_gpt.py"; }
grep -q "finished 2 iterations" "$TMP/launch.out" || fail "launch ... pretrain_gpt.py did not train"
"$MTRAIN" pretrain_bert.py "${F[@]}" >/dev/null 2>"$TMP/err" && fail "pretrain_bert.py accepted"
grep -q "pretrain_gpt.py (GPT / Llama pretraining) only" "$TMP/err" || fail "pretrain_bert.py: $(cat "$TMP/err")"
echo "ok: quoted --split, pretrain_gpt.py after mtrain launch's flags"
# the vocabulary size a Hugging Face tokenizer.json implies (its ids, added tokens too), no --vocab-size needed
if [ -f data/llama3-tokenizer.json ]; then
  # F without its --vocab-size (turned into a harmless --seed 4096)
  "$MTRAIN" check "${F[@]/--vocab-size/--seed}" --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/llama3-tokenizer.json \
    >"$TMP/hf.yaml" 2>"$TMP/err" || { cat "$TMP/err"; fail "check with a tokenizer.json and no --vocab-size"; }
  grep -q "^  vocab: 128256 " "$TMP/hf.yaml" || fail "model.vocab not 128256 from the Llama 3 tokenizer.json: $(grep vocab: "$TMP/hf.yaml")"
  echo "ok: model.vocab 128256 from the Llama 3 tokenizer.json"
fi
# --use-checkpoint-args: the model comes from the save in --load
M=(--mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 2 --vocab-size 4096 --lr 1e-3 --eval-iters 0)
SHAPE=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --kv-channels 24 --max-position-embeddings 32
       --position-embedding-type rope --rotary-percent 0.5 --normalization RMSNorm --swiglu)
"$MTRAIN" check "${M[@]}" --train-iters 2 --load "$TMP/uca" --use-checkpoint-args "${SHAPE[@]}" >/dev/null 2>"$TMP/uca0.err" \
  || { cat "$TMP/uca0.err"; fail "--use-checkpoint-args before any save"; }
grep -q "use-checkpoint-args: no save in $TMP/uca yet" "$TMP/uca0.err" || fail "no note for --use-checkpoint-args without a save"
"$MTRAIN" "${M[@]}" "${SHAPE[@]}" --train-iters 2 --save "$TMP/uca" --save-interval 2 >"$TMP/uca1.log" 2>&1 \
  || { tail -n 5 "$TMP/uca1.log"; fail "the save for --use-checkpoint-args"; }
"$MTRAIN" check "${M[@]}" --train-iters 4 --load "$TMP/uca" --use-checkpoint-args >"$TMP/uca.yaml" 2>"$TMP/err" \
  || { cat "$TMP/err"; fail "check --use-checkpoint-args"; }
for kv in "layers: 2" "hidden: 64" "heads: 4" "head_dim: 24" "norm: rmsnorm" "activation: swiglu" "position: rope" \
    "rotary_percent: 0.5"; do
  grep -q "^  $kv " "$TMP/uca.yaml" || fail "--use-checkpoint-args: model.${kv%%:*} not the save's (${kv#*: }): $(grep "^  ${kv%%:*}:" "$TMP/uca.yaml")"
done
"$MTRAIN" "${M[@]}" --train-iters 3 --load "$TMP/uca" --use-checkpoint-args >"$TMP/uca2.log" 2>&1 \
  || { tail -n 5 "$TMP/uca2.log"; fail "training with --use-checkpoint-args"; }
grep -q "loaded checkpoint .*: iteration 2," "$TMP/uca2.log" \
  || { tail -n 5 "$TMP/uca2.log"; fail "--use-checkpoint-args: the run did not resume from the save"; }
echo "ok: --use-checkpoint-args takes the model from the save's recipe and resumes"
