# test/hf_lib.sh — helpers of the Hugging Face export / import / log-probability scripts
# (golden_prompts.sh, faults_import.sh, moe_hf.sh); sourced after test/e2e_lib.sh, not run.
# numpy_python: sets PY to the first python3 (PATH, then Debian's) that imports numpy, else "".
numpy_python() {
  PY=""
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null; then PY=$p; return 0; fi
  done
}
run() { # run NAME CMD...: log to $TMP/NAME.log, fail with its tail when CMD fails
  local name=$1; shift
  "$@" >"$TMP/$name.log" 2>&1 || { tail -n 30 "$TMP/$name.log"; fail "$name failed: $*"; }
}
within() { # within NAME A B TOL: `mtrain logprobs --compare` exits 0
  "$MTRAIN" logprobs --compare "$2" "$3" --tol "$4" >"$TMP/$1.cmp" 2>&1 || { cat "$TMP/$1.cmp"; fail "$1: not within $4"; }
  echo "$1: $(cat "$TMP/$1.cmp")"
}
# hf_refused SRC TEXT EDIT...: a copy of the Hugging Face folder SRC with one change, imported with
# "${IMPORT[@]}" (the recipe arguments), must be refused (non-zero exit) with TEXT in the message and
# no save folder left. EDIT: "cfg PYTHON" runs PYTHON on config.json loaded as c; else the arguments
# of test/st_edit.py on model.safetensors. Needs PY (json + struct).
HF_CASE=0
hf_refused() {
  local src=$1 text=$2; shift 2
  local d="$TMP/case$HF_CASE" rc=0
  HF_CASE=$((HF_CASE + 1))
  rm -rf "$d"; cp -r "$src" "$d"
  if [ "$1" = cfg ]; then
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $2; json.dump(c, open(p, 'w'))" "$d/config.json"
  else
    "$PY" test/st_edit.py "$d/model.safetensors" "$@"
  fi
  "$MTRAIN" import --format hf --input "$d" --save "$d-out" "${IMPORT[@]}" >"$d.log" 2>&1 || rc=$?
  [ $rc -ne 0 ] || fail "$*: imported (exit 0), expected a refusal"
  grep -qF -- "$text" "$d.log" || { cat "$d.log"; fail "$*: no message '$text'"; }
  [ ! -e "$d-out" ] || fail "$*: the failed import left $d-out"
  echo "refused $*: $(grep -m1 'error' "$d.log" | cut -c1-200)"
}
