# test/e2e_lib.sh — helpers shared by the end-to-end scripts (sourced, not run).
# MTRAIN is set by test/run.sh; tests run from the repository root.
MTRAIN="${MTRAIN:-$PWD/mtrain}"
DATA="${DATA:-data/kjv_text_document}"
TMP=$(mktemp -d /tmp/mtrain-e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_data() { [ -f "$DATA.idx" ] || fail "$DATA.idx missing: run scripts/fetch-corpus.sh data (make test does)"; }
# json_field FILE KEY: the KEY values of every line of a JSON-lines file that has KEY
json_field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2; }
