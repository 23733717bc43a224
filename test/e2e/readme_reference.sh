# README stays true: its recipe reference table is exactly what `mtrain recipe-reference`
# prints from the key table (regenerate the README section when a key changes), and it
# documents the two set-up commands.
source test/e2e_lib.sh
"$MTRAIN" recipe-reference | grep "^|" >"$TMP/ref.md" || fail "recipe-reference failed"
sed -n '/^## Recipe reference/,$p' README.md | grep '^|' >"$TMP/readme.md"
diff "$TMP/ref.md" "$TMP/readme.md" >"$TMP/diff" || { head -n 20 "$TMP/diff"; fail "README's recipe reference is out of date: regenerate it from ./mtrain recipe-reference"; }
echo "README reference: $(wc -l <"$TMP/ref.md") lines match"
grep -q '^make run' README.md && grep -q '^make test' README.md || fail "README lacks make run / make test"
