# docs/megatron-flags.md stays true (issue 13, acceptance 2): its table is exactly what the parser's
# tables print (`mtrain recipe-reference --megatron`), no flag is both an alias and a rule / note
# row (the rows are taken first, so an alias behind one would never apply), and every flag of the
# Megatron example argument lists in test/megatron/ is in the table (mapped, accepted, substitute,
# refused or rule); `mtrain --help` lists every flag of the table.
source test/e2e_lib.sh
"$MTRAIN" recipe-reference --megatron >"$TMP/table.md" || fail "recipe-reference --megatron failed"
sed -n '/<!-- BEGIN mtrain recipe-reference --megatron -->/,/<!-- END mtrain recipe-reference --megatron -->/p' \
  docs/megatron-flags.md | sed '1d;$d' >"$TMP/doc.md"
diff "$TMP/table.md" "$TMP/doc.md" >"$TMP/diff" || { head -n 20 "$TMP/diff"; fail "docs/megatron-flags.md is out of date: regenerate its table with ./mtrain recipe-reference --megatron"; }
grep -o '^| `--[a-z0-9_-]*' "$TMP/table.md" | cut -c4- | sort >"$TMP/flags"
dups=$(uniq -d "$TMP/flags")
[ -z "$dups" ] || fail "flags both aliased and in the Megatron table: $dups"
echo "table: $(wc -l <"$TMP/flags") flags, each once, docs in step"
for f in test/megatron/*.args; do
  grep -v '^#' "$f" | grep -o '^--[a-z0-9_-]*' | sort -u | while read -r flag; do
    grep -qx -- "$flag" "$TMP/flags" || { echo "$f: $flag"; exit 1; }
  done || fail "a flag of a Megatron example is not in the table"
done
"$MTRAIN" --help >"$TMP/help" 2>&1 || true
while read -r flag; do grep -q -- " $flag\( \|$\)" "$TMP/help" || fail "mtrain --help does not list $flag"; done <"$TMP/flags"
echo "ok: every example flag is in the table; --help lists all $(wc -l <"$TMP/flags")"
