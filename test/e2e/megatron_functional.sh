# Megatron-LM's GPT functional-test configs (test/megatron/functional/gpt.cases: each MODEL_ARGS
# block as Megatron's test runner passes it) through `mtrain check`, with the runner's paths
# replaced by the test dataset and GPT-2 files and the world = tp * pp * cp * ep. Reports how many
# pass; every one that does not must be refused for a stated reason (a refused flag or a rule
# naming what mtrain lacks), never an unknown flag. The figure is in docs/megatron-flags.md.
source test/e2e_lib.sh
need_data
VOCAB=data/gpt2-vocab.json; MERGES=data/gpt2-merges.txt
n=0; n_pass=0; : >"$TMP/refusals"
while read -r name world rest; do
  case "$name" in '#'*|'') continue ;; esac
  line=${rest//@DATA@/$DATA}; line=${line//@VOCAB@/$VOCAB}; line=${line//@MERGES@/$MERGES}
  line=${line//@TMP@/$TMP/$name}
  eval "args=($line)"
  n=$((n + 1))
  if "$MTRAIN" check --world-size "$world" "${args[@]}" >/dev/null 2>"$TMP/err"; then
    n_pass=$((n_pass + 1)); continue
  fi
  if grep -q "unknown" "$TMP/err"; then cat "$TMP/err"; fail "$name: an unknown flag (every Megatron flag needs a row)"; fi
  # the reasons: each line names the refused flag (--x) or the recipe key (section.key) it is about
  grep -o -- '^  --[a-z0-9_-]*\|^mtrain: error: --[a-z0-9_-]*\|[a-z_]*\.[a-z_.]*: [^ ]' "$TMP/err" \
    | sed 's/^mtrain: error: //; s/^  //; s/: .$//' | sort -u | sed "s|^|$name |" >"$TMP/why"
  [ -s "$TMP/why" ] || { cat "$TMP/err"; fail "$name: refused without naming a flag or key"; }
  cat "$TMP/why" >>"$TMP/refusals"
done <test/megatron/functional/gpt.cases
[ "$n" -gt 100 ] || fail "only $n configs read"
echo "megatron functional configs: $n_pass of $n pass mtrain check ($((100 * n_pass / n))%)"
echo "what stops the rest (configs per refused flag or rule):"
awk '{print $2}' "$TMP/refusals" | sort | uniq -c | sort -rn | head -n 25
