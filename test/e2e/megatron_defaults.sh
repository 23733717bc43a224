# A run defined by Megatron's flags alone (no recipe file) takes Megatron-LM's argument defaults:
# test/megatron/defaults.txt (taken from Megatron-LM's arguments.py and the config classes it reads,
# cited by commit) against what `mtrain check` resolves. A recipe file keeps mtrain's own defaults
# (docs/megatron-flags.md lists where they differ).
source test/e2e_lib.sh
FLAGS=(--mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --max-position-embeddings 64 --train-iters 5 --micro-batch-size 1 --num-experts 4 --vocab-size 4096)
"$MTRAIN" check "${FLAGS[@]}" >"$TMP/flags.yaml" 2>"$TMP/err" || { cat "$TMP/err"; fail "mtrain check (flags only)"; }
# value KEY < YAML: the value of a dotted key in mtrain check's resolved recipe
value() {
  awk -v key="$1" '
    /^[ ]*#/ || !/:/ { next }
    { match($0, /^ */); depth = RLENGTH / 2; name = $1; sub(/:$/, "", name)
      path[depth] = name; full = path[0]; for (i = 1; i <= depth; i++) full = full "." path[i]
      if (full == key) { sub(/^[^:]*: */, ""); sub(/ *#.*/, ""); print; exit } }'
}
n=0; n_diff=0
while read -r flag meg key want note; do
  case "$flag" in '#'*|'') continue ;; esac
  if [[ "$note" == differs:* ]]; then # mtrain's value, and the docs say so
    grep -q -- "^| \`$flag\`" docs/megatron-flags.md || fail "$flag differs from Megatron ($note) but docs/megatron-flags.md's table does not name it"
    n_diff=$((n_diff + 1))
  fi
  [ "$key" = "-" ] && continue
  got=$(value "$key" <"$TMP/flags.yaml")
  awk -v a="$got" -v b="$want" 'BEGIN { if (a == b || (a + 0 == b + 0 && a ~ /^[0-9.e+-]+$/)) exit 0; exit 1 }' ||
    fail "$flag: Megatron's default is $meg; a flags-only run has $key = '$got' (want $want${note:+; $note})"
  n=$((n + 1))
done <test/megatron/defaults.txt
[ "$n" -ge 60 ] || fail "only $n defaults checked"
echo "ok: $n Megatron defaults checked in a flags-only run ($n_diff differ, each named in docs/megatron-flags.md)"
# a flag still sets the key; a recipe file keeps mtrain's own defaults
"$MTRAIN" check "${FLAGS[@]}" --adam-beta2 0.95 --moe-expert-capacity-factor 1.5 >"$TMP/set.yaml" 2>/dev/null || fail "check with flags"
[ "$(value optimizer.beta2 <"$TMP/set.yaml")" = 0.95 ] || fail "--adam-beta2 0.95 did not apply"
[ "$(value model.moe.capacity_factor <"$TMP/set.yaml")" = 1.5 ] || fail "--moe-expert-capacity-factor 1.5 did not apply"
printf 'training:\n  seed: 1234\n' >"$TMP/min.yaml"
"$MTRAIN" check --config "$TMP/min.yaml" "${FLAGS[@]}" >"$TMP/recipe.yaml" 2>/dev/null || fail "check --config"
[ "$(value optimizer.beta2 <"$TMP/recipe.yaml")" = 0.95 ] || fail "a recipe file lost mtrain's beta2 default 0.95"
[ "$(value model.moe.capacity_factor <"$TMP/recipe.yaml")" = 1 ] || fail "a recipe file lost mtrain's capacity factor 1"
echo "ok: flags override them; a recipe file keeps mtrain's own defaults"
