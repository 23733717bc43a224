#!/usr/bin/env bash
# run-fuzzer.sh — builds a fuzzer (clang libFuzzer + ASan + UBSan) and runs it. FUZZ_TARGET picks it:
#   recipe (default)  test/fuzz/fuzz_recipe.c, corpus test/fuzz/corpus, replayed in CI by
#                     build/test/unit/test_recipe_fuzz_replay
#   safetensors       test/fuzz/fuzz_safetensors.c, corpus test/fuzz/corpus_safetensors, replayed by
#                     build/test/unit/test_safetensors_fuzz_replay
#   manifest          test/fuzz/fuzz_manifest.c, corpus test/fuzz/corpus_manifest (checkpoint manifest.json),
#                     replayed by build/test/unit/test_manifest_fuzz_replay
#   spm               test/fuzz/fuzz_spm.c, corpus test/fuzz/corpus_spm (SentencePiece .model files),
#                     replayed by build/test/unit/test_spm_fuzz_replay
#   idx               test/fuzz/fuzz_idx.c, corpus test/fuzz/corpus_idx (Megatron .idx + .bin pairs: u32 length
#                     of the .idx, the .idx, the .bin), replayed by build/test/unit/test_idx_fuzz_replay
#   bpe               test/fuzz/fuzz_bpe.c, corpus test/fuzz/corpus_bpe (GPT-2 vocab.json NUL merges.txt, and the
#                     whole input as a tokenizer.json), replayed by build/test/unit/test_bpe_fuzz_replay
#   hfconfig          test/fuzz/fuzz_hfconfig.c, corpus test/fuzz/corpus_hfconfig (Hugging Face config.json, read
#                     by mtrain import), replayed by build/test/unit/test_hfconfig_fuzz_replay
#   test/fuzz/run-fuzzer.sh [SECONDS]   fuzz for SECONDS (default 60), one job
#   test/fuzz/run-fuzzer.sh merge       minimise the new inputs + the committed corpus into the committed
#                                       corpus (seed-* and regress-* files are kept as they are)
#   test/fuzz/run-fuzzer.sh FILE...     replay files (e.g. build/fuzz/crash-*) under the sanitizers
#   e.g. FUZZ_TARGET=safetensors test/fuzz/run-fuzzer.sh 60
# New inputs go to build/fuzz/corpus (recipe) or build/fuzz/corpus_safetensors, crashes to
# build/fuzz/crash-* (recipe) or build/fuzz/safetensors-crash-* (the replay tests need no libFuzzer).
# Needs clang with the libFuzzer runtime (Debian: libclang-rt-14-dev or the clang package);
# exits 77 (skip) without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
CC_FUZZ=${CC_FUZZ:-$(command -v clang || command -v clang-14 || true)}
out=build/fuzz
mkdir -p "$out/corpus"
if [ -z "$CC_FUZZ" ]; then echo "run-fuzzer: clang not found; skipping"; exit 77; fi
target=${FUZZ_TARGET:-recipe}
case "$target" in
  recipe)
    src="test/fuzz/fuzz_recipe.c core/recipe/recipe.c core/recipe/recipe_keys.c core/recipe/recipe_yaml.c core/recipe/recipe_validate.c core/recipe/recipe_batch.c core/recipe/recipe_stages.c core/recipe/recipe_megatron.c core/recipe/recipe_problems.c core/status.c"
    libs="$(pkg-config --cflags --libs yaml-0.1) -lm"; extra=""
    corpus=test/fuzz/corpus; new="$out/corpus"; prefix="$out/"
    ;;
  safetensors)
    src="test/fuzz/fuzz_safetensors.c core/ckpt/safetensors.c core/crc32c.c core/json_tree.c core/json_string.c core/file_read.c core/status.c"
    libs="-lm -lpthread"; extra="-march=native" # the SSE4.2 CRC path, checked against the table
    corpus=test/fuzz/corpus_safetensors; new="$out/corpus_safetensors"; prefix="$out/safetensors-"
    ;;
  manifest)
    src="test/fuzz/fuzz_manifest.c core/ckpt/manifest.c core/ckpt/ckpt_layout.c core/model/model_layout.c core/model/opt_layout.c core/model/layer_spec.c core/recipe/recipe.c core/recipe/recipe_keys.c core/recipe/recipe_yaml.c core/recipe/recipe_validate.c core/recipe/recipe_batch.c core/recipe/recipe_stages.c core/recipe/recipe_megatron.c core/recipe/recipe_problems.c core/json_tree.c core/json_string.c core/file_read.c core/status.c"
    libs="$(pkg-config --cflags --libs yaml-0.1) -lm -lpthread"; extra=""
    corpus=test/fuzz/corpus_manifest; new="$out/corpus_manifest"; prefix="$out/manifest-"
    ;;
  spm)
    src="test/fuzz/fuzz_spm.c core/data/tokenizer_spm.c core/data/tokenizer_spm_load.c core/data/tokenizer_spm_charsmap.c core/data/protobuf_wire.c core/data/tokenizer.c core/data/tokenizer_bpe.c core/data/tokenizer_bpe_load.c core/data/tokenizer_llama3.c core/data/unicode.c core/data/unicode_tables.c core/json_tree.c core/json_string.c core/file_read.c core/status.c"
    libs="-lm -lpthread"; extra=""
    corpus=test/fuzz/corpus_spm; new="$out/corpus_spm"; prefix="$out/spm-"
    ;;
  idx)
    src="test/fuzz/fuzz_idx.c core/data/indexed.c core/data/mapped_files.c core/data/tmpfiles.c core/file_read.c core/status.c"
    libs="-lm -lpthread"; extra=""
    corpus=test/fuzz/corpus_idx; new="$out/corpus_idx"; prefix="$out/idx-"
    ;;
  bpe)
    src="test/fuzz/fuzz_bpe.c core/data/tokenizer.c core/data/tokenizer_bpe.c core/data/tokenizer_bpe_load.c core/data/tokenizer_llama3.c core/data/tokenizer_spm.c core/data/tokenizer_spm_load.c core/data/tokenizer_spm_charsmap.c core/data/protobuf_wire.c core/data/unicode.c core/data/unicode_tables.c core/json_tree.c core/json_string.c core/file_read.c core/status.c"
    libs="-lm -lpthread"; extra=""
    corpus=test/fuzz/corpus_bpe; new="$out/corpus_bpe"; prefix="$out/bpe-"
    ;;
  hfconfig)
    src="test/fuzz/fuzz_hfconfig.c core/ckpt/hf_import.c core/ckpt/hf_export.c core/ckpt/ckpt_single.c core/ckpt/ckpt_layout.c core/ckpt/ckpt_files.c core/ckpt/manifest.c core/ckpt/manifest_describe.c core/ckpt/safetensors.c core/crc32c.c core/model/model_layout.c core/model/opt_layout.c core/model/layer_spec.c core/model/mup.c core/recipe/recipe.c core/recipe/recipe_keys.c core/recipe/recipe_yaml.c core/recipe/recipe_validate.c core/recipe/recipe_batch.c core/recipe/recipe_stages.c core/recipe/recipe_megatron.c core/recipe/recipe_problems.c core/json_tree.c core/json_string.c core/file_read.c core/status.c"
    libs="$(pkg-config --cflags --libs yaml-0.1) -lm -lpthread"; extra=""
    corpus=test/fuzz/corpus_hfconfig; new="$out/corpus_hfconfig"; prefix="$out/hfconfig-"
    ;;
  *) echo "run-fuzzer: FUZZ_TARGET=$target: expected recipe, safetensors, manifest, spm, idx, bpe or hfconfig"; exit 2 ;;
esac
mkdir -p "$new"
bin="$out/fuzz_$target"
# shellcheck disable=SC2086
if ! "$CC_FUZZ" -std=c11 -D_GNU_SOURCE -g -O1 $extra -fsanitize=fuzzer,address,undefined \
      -fno-sanitize-recover=undefined -I. $src $libs -o "$bin"; then
  echo "run-fuzzer: cannot build with $CC_FUZZ -fsanitize=fuzzer (install libclang-rt-14-dev); skipping"
  exit 77
fi
if [ "$target" = recipe ]; then
# Dictionary from the key table: key names, their last parts, section names, flags, enum words.
{
  grep -o '"[a-z_]*\.[a-z_.]*"' core/recipe/recipe_keys.c | sort -u
  grep -o '"[a-z_]*\.[a-z_.]*"' core/recipe/recipe_keys.c | sed 's/"\(.*\)"/\1/' | tr '.' '\n' | sort -u | sed 's/.*/"&:"/'
  grep -o '"--[a-z0-9-]*"' core/recipe/recipe_keys.c | sort -u
  for w in gpt llama layernorm rmsnorm gelu swiglu learned rope cosine linear constant none selective \
           full fp32 bf16 auto cpu cuda byte gpt2bpe hf true false yes no '--set' '#args\x0a' '---' \
           '[' ']' '{' '}' '- ' ': ' '&a' '*a' '~' 'null' 'weight:' 'path:' '1e9' '-1' '0.5'; do
    printf '"%s"\n' "$w"
  done
} > "$out/recipe.dict"
else
# Dictionary: the header's keys, every dtype, JSON punctuation, numbers near the limits.
{
  for w in '\"__metadata__\"' '\"dtype\"' '\"shape\"' '\"data_offsets\"' '\"format\"' '\"pt\"' \
           F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2 \
           '{' '}' '[' ']' ':' ',' '\"' '\\u0000' '[]' '[0,0]' '9223372036854775807' '4611686018427387904' \
           '18446744073709551616' '-1' '1.5' '1e3' 'null' 'true'; do
    printf '"%s"\n' "$w"
  done
} > "$out/safetensors.dict"
fi
if [ "$target" = manifest ]; then
# Dictionary: the manifest's keys and words, numbers near the limits (a real manifest is ~16 KB)
{
  for w in format version iteration consumed_samples optimizer_steps skipped_iterations train_iters seed \
           lr_schedule lr max_lr min_lr warmup_iters decay_iters decay_style layout world_size tensor pipeline \
           virtual_pipeline data context expert sequence_parallel distributed_optimizer arch weight_dtype vocab \
           tokenizer kind vocab_file merges_file crc32c recipe files name bytes tensors shape stacked pieces \
           file entry dtype offset box flat weight master exp_avg exp_avg_sq F32 BF16 mtrain-checkpoint; do
    printf '"\\"%s\\""\n' "$w"
  done
  for w in '{' '}' '[' ']' ':' ',' 'true' 'false' '0' '-1' '[0, 1]' '1073741824' '9223372036854775807' '"00000000"'; do
    printf '"%s"\n' "$(printf '%s' "$w" | sed 's/"/\\"/g')"
  done
} > "$out/manifest.dict"
fi
if [ "$target" = spm ]; then
# Dictionary: piece names, U+2581, normaliser names, tags of the fields the reader takes
{
  for w in '<unk>' '<s>' '</s>' '<pad>' '<0x41>' '<0xFF>' '\xe2\x96\x81' identity nmt_nfkc '\x0a' '\x12' '\x1a' \
           '\x15' '\x18' '\x10\x01' '\x18\x02' '\x18\x03' '\x18\x04' '\x18\x05' '\x18\x06' '\x98\x02\x01' \
           '\xc0\x01' '\xff\xff\xff\xff\x0f' '\x00\x00\x80\x7f' '\x00\x00\xc0\x7f'; do
    printf '"%s"\n' "$w"
  done
} > "$out/spm.dict"
fi
if [ "$target" = idx ]; then
# Dictionary: the magic, version 1, each dtype code, counts and pointers near the limits
{
  for w in 'MMIDIDX\x00\x00' '\x01\x00\x00\x00\x00\x00\x00\x00' '\x01' '\x02' '\x03' '\x04' '\x05' '\x06' '\x07' '\x08' \
           '\xff\xff\xff\x7f' '\x00\x00\x00\x80' '\xff\xff\xff\xff\xff\xff\xff\x7f' '\x56\x55\x55\x55\x55\x55\x55\x15' \
           '\x00\x00\x00\x00\x00\x00\x00\x20' '\xff\xff\xff\xff\xff\xff\xff\xff'; do
    printf '"%s"\n' "$w"
  done
} > "$out/idx.dict"
fi
if [ "$target" = bpe ]; then
# Dictionary: tokenizer.json's keys and type names, special tokens, byte symbols, pieces of the Split
# patterns as JSON writes them (libFuzzer skips entries over 64 bytes: the seeds hold the whole ones)
{
  for w in '\"model\"' '\"type\"' '\"BPE\"' '\"vocab\"' '\"merges\"' '\"added_tokens\"' '\"id\"' '\"content\"' \
           '\"pre_tokenizer\"' '\"decoder\"' '\"normalizer\"' '\"ByteLevel\"' '\"Sequence\"' '\"pretokenizers\"' \
           '\"Split\"' '\"pattern\"' '\"Regex\"' '\"behavior\"' '\"Isolated\"' '\"invert\"' '\"use_regex\"' \
           '\"add_prefix_space\"' '\"ignore_merges\"' '\"byte_fallback\"' '\"continuing_subword_prefix\"' \
           '\"end_of_word_suffix\"' '<|endoftext|>' '<|end_of_text|>' '</s>' '<|im_end|>' '<eos>' '#version: 0.2\x0a' \
           '\xc4\xa0' '\xc4\x8a' '\xc4\x89' '\xc5\x83' '\\u0120' '\\ud83d\\ude00' '\x00' 'null' 'true' 'false' \
           '16777215' '16777216' '2147483647' '-1' '1e3' '[\"a\",\"b\"]' '\\\\p{L}' '\\\\s+(?!\\\\S)' '(?i:'; do
    printf '"%s"\n' "$w"
  done
} > "$out/bpe.dict"
fi
if [ "$target" = hfconfig ]; then
# Dictionary: the config.json keys the import reads (GPT2Config, LlamaConfig, MixtralConfig), their words
{
  for w in model_type gpt2 llama mixtral mistral n_layer n_embd n_head n_inner n_positions vocab_size \
           layer_norm_epsilon activation_function gelu_new relu2 scale_attn_weights scale_attn_by_inverse_layer_idx \
           tie_word_embeddings add_cross_attention num_hidden_layers hidden_size num_attention_heads \
           num_key_value_heads intermediate_size max_position_embeddings rms_norm_eps rope_theta rope_scaling \
           rope_parameters rope_type default partial_rotary_factor hidden_act silu head_dim attention_bias mlp_bias \
           num_local_experts num_experts_per_tok sliding_window router_jitter_noise norm_topk_prob scoring_func \
           softmax topk_method greedy routed_scaling_factor n_shared_experts num_shared_experts \
           shared_expert_intermediate_size first_k_dense_replace mlp_only_layers decoder_sparse_step; do
    printf '"\\"%s\\""\n' "$w"
  done
  for w in '{' '}' '[' ']' ':' ',' 'true' 'false' 'null' '0' '-1' '1e-05' '1e-06' '10000.0' '1000000.0' '0.5' \
           '2147483648' '9223372036854775807' '1e400' '[]'; do
    printf '"%s"\n' "$w"
  done
} > "$out/hfconfig.dict"
fi
max_len=4096; [ "$target" = manifest ] || [ "$target" = spm ] && max_len=65536
[ "$target" = bpe ] && max_len=16384
opts=(-dict="$out/$target.dict" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
case "${1:-60}" in
  merge)
    rm -rf "$out/min"; mkdir -p "$out/min"
    # edges only (no hit counts, no value profile): keeps the committed corpus small
    "$bin" "${opts[@]}" -use_counters=0 -use_value_profile=0 -merge=1 "$out/min" "$corpus" "$new"
    find "$corpus" -type f ! -name 'seed-*' ! -name 'regress-*' -delete
    for f in "$out"/min/*; do
      [ -e "$corpus/seed-$(basename "$f")" ] || cp "$f" "$corpus/"
    done
    # drop minimised copies of the named files
    for f in "$corpus"/seed-* "$corpus"/regress-*; do
      [ -e "$f" ] || continue
      h=$(sha1sum "$f" | cut -d' ' -f1)
      [ -e "$corpus/$h" ] && rm -f "$corpus/$h"
    done
    echo "$corpus: $(ls "$corpus" | wc -l) files"
    ;;
  ''|*[!0-9]*)
    "$bin" "${opts[@]}" -runs=1 "$@"
    ;;
  *)
    # one process (no -jobs: the machine is shared), value profiling for the number checks
    "$bin" "${opts[@]}" -use_value_profile=1 -max_total_time="$1" \
      -artifact_prefix="$prefix" "$new" "$corpus"
    ;;
esac
