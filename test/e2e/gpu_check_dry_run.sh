#!/usr/bin/env bash
# test/e2e/gpu_check_dry_run.sh — scripts/gpu-check.sh's own plumbing on a CPU machine, so its
# first run on a GPU cannot fail on it: --prepare --skip-reference makes the GPT-2 BPE corpus in
# a fresh data folder, --dry-run then finds every file, passes every run's arguments through
# `mtrain check`, parses a short real CPU run's metrics, and writes a valid JSON report whose GPU
# steps say "skipped: dry run"; a missing corpus makes it fail, naming the file and --prepare.
set -u
source test/e2e_lib.sh
need_data
for f in data/kjv.jsonl data/gpt2-vocab.json data/gpt2-merges.txt; do
  [ -f "$f" ] || { echo "skipped: $f missing (make test fetches it)"; exit 77; }
done
mkdir -p "$TMP/data"
for f in kjv_text_document.bin kjv_text_document.idx kjv.jsonl gpt2-vocab.json gpt2-merges.txt; do
  ln -s "$PWD/data/$f" "$TMP/data/$f"
done

scripts/gpu-check.sh --prepare --skip-reference --data-dir "$TMP/data" >"$TMP/prepare.log" 2>&1 ||
  { cat "$TMP/prepare.log"; fail "--prepare exited non-zero"; }
[ -s "$TMP/data/kjv_gpt2_text_document.bin" ] && [ -s "$TMP/data/kjv_gpt2_text_document.idx" ] ||
  fail "--prepare did not write the BPE corpus into the data folder"

scripts/gpu-check.sh --dry-run --data-dir "$TMP/data" --out "$TMP/out" --report "$TMP/report.json" >"$TMP/dry.log" 2>&1
rc=$?
cat "$TMP/dry.log"
[ $rc -eq 0 ] || fail "--dry-run exited $rc"
R="$TMP/report.json"
[ -s "$R" ] || fail "no report at $R"
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$R" <<'PY' || fail "the report is not the expected JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == "dry" and r["result"] == "pass" and r["failures"] == 0, r
steps = ["build", "parity", "nccl", "sanitizer", "loss", "throughput_gpt125m", "throughput_gpt1.3b"]
assert sorted(r["steps"]) == sorted(steps), r["steps"].keys()
assert all(r["steps"][s]["status"] == "skipped: dry run" for s in steps)
runs = ["LOSS_ARGS", "SAN_TINY", "SAN_LLAMA", "SAN_MOE", "TP_125M", "TP_13B"]
assert all(r["checks"]["recipe " + n]["status"] == "pass" for n in runs), r["checks"]
assert r["checks"]["data"]["status"] == "pass" and r["checks"]["parsers"]["status"] == "pass"
PY
fi
n_skipped=$(grep -c '"status": "skipped: dry run"' "$R")
[ "$n_skipped" -eq 7 ] || fail "$n_skipped GPU steps marked skipped: dry run, expected 7"
for run in LOSS_ARGS SAN_TINY SAN_LLAMA SAN_MOE TP_125M TP_13B; do
  grep -q "\"recipe $run\": {\"status\": \"pass\"" "$R" || fail "recipe $run did not pass mtrain check"
done

# a missing corpus: non-zero, the file and the fix named
rm "$TMP/data/kjv_gpt2_text_document.idx"
scripts/gpu-check.sh --dry-run --data-dir "$TMP/data" --out "$TMP/out2" >"$TMP/dry2.log" 2>&1 && fail "--dry-run passed without the BPE corpus"
grep -q "kjv_gpt2_text_document.idx" "$TMP/dry2.log" && grep -q -- "--prepare" "$TMP/dry2.log" ||
  { cat "$TMP/dry2.log"; fail "the missing-corpus message names neither the file nor --prepare"; }
grep -q '"result": "fail"' "$TMP/out2/gpu-check.json" || fail "the failed dry run's report does not say fail"
echo "gpu_check_dry_run: ok"
