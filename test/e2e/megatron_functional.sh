# Megatron-LM's GPT functional-test configs (test/megatron/functional/gpt.cases: each MODEL_ARGS
# block as Megatron's test runner passes it) through `mtrain check`, with the runner's paths
# replaced by the test dataset and GPT-2 files and the world = tp * pp * cp * ep. Reports how many
# pass; every one that does not must be refused for a stated reason (a refused flag or a rule
# naming what mtrain lacks), never an unknown flag. The figure is in docs/megatron-flags.md.
source test/e2e_lib.sh
need_data
VOCAB=data/gpt2-vocab.json; MERGES=data/gpt2-merges.txt
# two workers (odd and even lines), each writing pass/refused lines; one mtrain check per config
check_part() { # check_part PART: the configs whose line number % 2 == PART
  local ln=0 name world rest line
  while read -r name world rest; do
    case "$name" in '#'*|'') continue ;; esac
    ln=$((ln + 1)); [ $((ln % 2)) -eq "$1" ] || continue
    line=${rest//@DATA@/$DATA}; line=${line//@VOCAB@/$VOCAB}; line=${line//@MERGES@/$MERGES}
    line=${line//@TMP@/$TMP/$name}
    eval "args=($line)"
    # a SentencePiece --tokenizer-model (the 15B configs' nemotron_2_256k.model) gets Llama-2's
    # SentencePiece model file in its place: it stands in for Nemotron's model, which is not public in a
    # Debian or npm package, as the GPT-2 files stand in for the runner's vocabulary
    for ((i = 0; i + 1 < ${#args[@]}; i++)); do
      if [ "${args[i]}" = --tokenizer-model ] && [[ "${args[i+1]}" == "$TMP"/*.model ]]; then
        mkdir -p "$(dirname "${args[i+1]}")" && cp data/llama2-tokenizer.model "${args[i+1]}"
      fi
    done
    if "$MTRAIN" check --world-size "$world" "${args[@]}" >/dev/null 2>"$TMP/err$1"; then
      echo "$name pass"; continue
    fi
    if grep -q "unknown" "$TMP/err$1"; then cat "$TMP/err$1" >&2; echo "$name UNKNOWN"; continue; fi
    # the reasons: each line names the refused flag (--x) or the recipe key (section.key) it is about
    grep -o -- '^  --[a-z0-9_-]*\|^mtrain: error: --[a-z0-9_-]*\|[a-z_]*\.[a-z_.]*: [^ ]' "$TMP/err$1" \
      | sed 's/^mtrain: error: //; s/^  //; s/: .$//' | sort -u | sed "s|^|$name |" >"$TMP/why$1"
    if [ -s "$TMP/why$1" ]; then cat "$TMP/why$1"; else cat "$TMP/err$1" >&2; echo "$name NOREASON"; fi
  done <test/megatron/functional/gpt.cases
}
check_part 0 >"$TMP/part0" & check_part 1 >"$TMP/part1"; wait
cat "$TMP/part0" "$TMP/part1" >"$TMP/results"
! grep -q " UNKNOWN$" "$TMP/results" || fail "$(grep " UNKNOWN$" "$TMP/results" | head -n 3): an unknown flag (every Megatron flag needs a row)"
! grep -q " NOREASON$" "$TMP/results" || fail "$(grep " NOREASON$" "$TMP/results" | head -n 3): refused without naming a flag or key"
n=$(awk '{print $1}' "$TMP/results" | sort -u | wc -l); n_pass=$(grep -c " pass$" "$TMP/results")
grep -v " pass$" "$TMP/results" >"$TMP/refusals" || true
[ "$n" -gt 100 ] || fail "only $n configs read"
# the figure of docs/megatron-flags.md is a floor: a flag that stops being understood fails here
[ "$n_pass" -ge 153 ] || fail "only $n_pass of $n configs pass mtrain check (153 did): $(grep -v " pass$" "$TMP/results" | head -n 5)"
echo "megatron functional configs: $n_pass of $n pass mtrain check ($((100 * n_pass / n))%)"
echo "what stops the rest (configs per refused flag or rule):"
awk '{print $2}' "$TMP/refusals" | sort | uniq -c | sort -rn | head -n 25
