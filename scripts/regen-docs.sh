#!/bin/sh
# regen-docs.sh — rewrites the generated parts of the docs from the built ./mtrain (run from the repo root
# after make): README.md's recipe reference (from its '| key | type' table to the end of the file),
# docs/recipe.md's and docs/megatron-flags.md's blocks between their BEGIN / END markers.
# test_recipe and the readme test fail while any of them is stale.
set -eu
[ -x ./mtrain ] || { echo "regen-docs: ./mtrain not built (run make first, from the repo root)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
./mtrain recipe-reference >"$tmp/ref.md"
./mtrain recipe-reference --megatron >"$tmp/meg.md"
# between_markers FILE BEGIN_PREFIX END_PREFIX BODY: FILE with the lines between the markers replaced by BODY
between_markers() {
  awk -v b="$2" -v e="$3" -v body="$4" '
    index($0, e) == 1 { skip = 0 }
    !skip { print }
    index($0, b) == 1 { while ((getline l < body) > 0) print l; skip = 1 }' "$1" >"$tmp/out"
  grep -q "^$2" "$tmp/out" && grep -q "^$3" "$tmp/out" || { echo "regen-docs: $1 lacks its markers" >&2; exit 1; }
  cat "$tmp/out" >"$1"
}
between_markers docs/recipe.md "<!-- BEGIN mt_recipe_print_reference" "<!-- END mt_recipe_print_reference" "$tmp/ref.md"
between_markers docs/megatron-flags.md "<!-- BEGIN mtrain recipe-reference --megatron" \
  "<!-- END mtrain recipe-reference --megatron" "$tmp/meg.md"
n=$(awk '/^## Recipe reference/ { r = 1 } r && /^\| key \| type/ { print NR; exit }' README.md)
[ -n "$n" ] || { echo "regen-docs: README.md has no recipe table under '## Recipe reference'" >&2; exit 1; }
head -n $((n - 1)) README.md >"$tmp/readme"
cat "$tmp/ref.md" >>"$tmp/readme"
cat "$tmp/readme" >README.md
echo "regen-docs: README.md, docs/recipe.md, docs/megatron-flags.md regenerated"
