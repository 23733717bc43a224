# test/e2e_checks.sh — sourced by the e2e tests that count their failures instead of stopping at
# the first (preprocess, tokenizer_gpt2, tokenizer_llama3): `source test/e2e_checks.sh NAME` makes
# the scratch folder $tmp (/tmp/NAME.XXXXXX, removed at exit) and defines
#   fail TEXT / ok TEXT    one line each; fail counts into $fails
#   run NAME CMD...        runs CMD, stdout and stderr to $tmp/NAME.{out,err}, its exit code in $rc
#   contains FILE TEXT     FILE holds TEXT (fixed string)
#   hexof FILE             the bytes of FILE as one hex string
tmp=$(mktemp -d "/tmp/$1.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
run() { local name=$1; shift; "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; rc=$?; }
contains() { grep -qF -- "$2" "$1"; }
hexof() { od -An -v -tx1 "$1" | tr -d ' \n'; }
