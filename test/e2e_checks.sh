# test/e2e_checks.sh — sourced by the e2e tests that count their failures instead of stopping at
# the first (preprocess, tokenizer_gpt2, tokenizer_llama3): `source test/e2e_checks.sh NAME` makes
# the scratch folder $tmp (/tmp/NAME.XXXXXX, removed at exit) and defines
#   fail TEXT / ok TEXT    one line each; fail counts into $fails
#   run NAME CMD...        runs CMD, stdout and stderr to $tmp/NAME.{out,err}, its exit code in $rc
#   contains FILE TEXT     FILE holds TEXT (fixed string)
#   hexof FILE             the bytes of FILE as one hex string
#   compare_ids NAME WHAT WHOSE
#                          $tmp/NAME.out (mtrain's ids, a line per document) against
#                          $tmp/NAME.ref (WHOSE ids): ok, or fail with the first differing lines;
#                          "NAME n_ids n_differing" is added to $tmp/counts
#   js_reference_or_skip FETCH WHAT
#                          exit 77 (skip) unless $MTRAIN is built, node is installed and the
#                          fetch script FETCH (an npm tokenizer package: the reference encoder
#                          and mtrain's files, into data/) succeeds; WHAT names the files
tmp=$(mktemp -d "/tmp/$1.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
run() { local name=$1; shift; "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; rc=$?; }
contains() { grep -qF -- "$2" "$1"; }
hexof() { od -An -v -tx1 "$1" | tr -d ' \n'; }
compare_ids() {
  local n_ids n_lines n_bad
  n_ids=$(wc -w <"$tmp/$1.ref"); n_lines=$(wc -l <"$tmp/$1.ref")
  n_bad=$(paste -d '\n' "$tmp/$1.out" "$tmp/$1.ref" | awk 'NR % 2 { a = $0; next } a != $0 { n++ } END { print n + 0 }')
  if [ "$rc" = 0 ] && [ "$n_lines" -gt 0 ] && [ "$n_bad" = 0 ] && cmp -s "$tmp/$1.out" "$tmp/$1.ref"; then
    ok "$2: $n_ids ids in $n_lines lines equal $3"
  else
    fail "$2: $n_bad of $n_lines lines differ from $3 (rc $rc, $(head -c 300 "$tmp/$1.err"))"
    paste -d '\n' "$tmp/$1.out" "$tmp/$1.ref" | awk 'NR % 2 { a = $0; next } a != $0 { print "  line " NR/2 ": mtrain " substr(a, 1, 150); print "  line " NR/2 ": ref    " substr($0, 1, 150); if (++n == 3) exit }'
  fi
  echo "$1 $n_ids $n_bad" >>"$tmp/counts"
}
js_reference_or_skip() {
  if [ ! -x "$MTRAIN" ]; then echo "skip: $MTRAIN not built"; exit 77; fi
  if ! command -v node >/dev/null 2>&1; then echo "skip: node is not installed (the reference encoder runs on it)"; exit 77; fi
  if ! "$1" data >"$tmp/fetch.log" 2>&1; then
    echo "skip: $2 unavailable: $(tail -n 1 "$tmp/fetch.log")"
    exit 77
  fi
}
