#!/usr/bin/env bash
# run-fuzzer.sh — builds the recipe fuzzer (clang libFuzzer + ASan + UBSan) and runs it.
#   test/fuzz/run-fuzzer.sh [SECONDS]   fuzz for SECONDS (default 60), one job
#   test/fuzz/run-fuzzer.sh merge       minimise build/fuzz/corpus + test/fuzz/corpus into
#                                       test/fuzz/corpus (seed-* and regress-* files are kept as they are)
#   test/fuzz/run-fuzzer.sh FILE...     replay files (e.g. build/fuzz/crash-*) under the sanitizers
# New inputs go to build/fuzz/corpus, crashes to build/fuzz/crash-*. test/fuzz/corpus is replayed
# in CI by build/test/unit/test_recipe_fuzz_replay (gcc, no libFuzzer needed).
# Needs clang with the libFuzzer runtime (Debian: libclang-rt-14-dev or the clang package);
# exits 77 (skip) without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
CC_FUZZ=${CC_FUZZ:-$(command -v clang || command -v clang-14 || true)}
out=build/fuzz
mkdir -p "$out/corpus"
if [ -z "$CC_FUZZ" ]; then echo "run-fuzzer: clang not found; skipping"; exit 77; fi
src="test/fuzz/fuzz_recipe.c core/recipe/recipe.c core/recipe/recipe_keys.c core/recipe/recipe_yaml.c core/recipe/recipe_validate.c core/status.c"
# shellcheck disable=SC2086
if ! "$CC_FUZZ" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
      -fno-sanitize-recover=undefined -I. $src $(pkg-config --cflags --libs yaml-0.1) -lm \
      -o "$out/fuzz_recipe"; then
  echo "run-fuzzer: cannot build with $CC_FUZZ -fsanitize=fuzzer (install libclang-rt-14-dev); skipping"
  exit 77
fi
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
opts=(-dict="$out/recipe.dict" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
case "${1:-60}" in
  merge)
    rm -rf "$out/min"; mkdir -p "$out/min"
    # edges only (no hit counts, no value profile): keeps the committed corpus small
    "$out/fuzz_recipe" "${opts[@]}" -use_counters=0 -use_value_profile=0 -merge=1 "$out/min" test/fuzz/corpus "$out/corpus"
    find test/fuzz/corpus -type f ! -name 'seed-*' ! -name 'regress-*' -delete
    for f in "$out"/min/*; do
      [ -e "test/fuzz/corpus/seed-$(basename "$f")" ] || cp "$f" test/fuzz/corpus/
    done
    # drop minimised copies of the named files
    for f in test/fuzz/corpus/seed-* test/fuzz/corpus/regress-*; do
      [ -e "$f" ] || continue
      h=$(sha1sum "$f" | cut -d' ' -f1)
      [ -e "test/fuzz/corpus/$h" ] && rm -f "test/fuzz/corpus/$h"
    done
    echo "test/fuzz/corpus: $(ls test/fuzz/corpus | wc -l) files"
    ;;
  ''|*[!0-9]*)
    "$out/fuzz_recipe" "${opts[@]}" -runs=1 "$@"
    ;;
  *)
    # one process (no -jobs: the machine is shared), value profiling for the number checks
    "$out/fuzz_recipe" "${opts[@]}" -use_value_profile=1 -max_total_time="$1" \
      -artifact_prefix="$out/" "$out/corpus" test/fuzz/corpus
    ;;
esac
