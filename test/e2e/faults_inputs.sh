# faults_inputs.sh — fault-injection cases for the run's inputs and its metrics file,
# each with the test/faults_lib.sh checks (exit status, message naming the file, no process
# left, nothing in the case's TMPDIR, no fragment in the metrics file):
#   metrics_dev_full   --metrics /dev/full (ENOSPC on the first write): exit 1, the message
#                      names /dev/full and "No space left on device"
#   metrics_fsize      a regular metrics file under `ulimit -f 1` with SIGXFSZ ignored (EFBIG
#                      in the middle of a record): exit 1, "File too large", and the file holds
#                      only whole JSON lines (cut back to the last whole record)
#   metrics_shared     two runs with one metrics path: the second (started once the first logs
#                      its first iteration) is refused naming the file and the first's pid; the
#                      first finishes with every one of its 20 records whole
#   yaml_deep / yaml_huge / yaml_keys   a recipe nested 100,000 deep, a 100 MB (sparse) one and
#                      one with 100,002 keys and values: refused with the limit's message
#   fifo_shard / fifo_inspect / fifo_import / fifo_tracker / fifo_dataset   a FIFO where a file is
#                      read (a save's rank file under --load and `checkpoint inspect`, an HF
#                      model.safetensors under `import`, the tracker, a dataset's .bin): refused at
#                      once ("a FIFO, not a regular file"), never waiting for a writer (each run
#                      under `timeout 30`, which would end it with 124)
#   resume_tokenizer   --load of a byte-tokenizer save under data.tokenizer=null: refused naming both
#   logprobs_function  `mtrain logprobs` with model.norm_eps other than the save's: refused naming
#                      the key and both values (the save's own recipe scores: logprobs_same)
source test/e2e_lib.sh
source test/faults_lib.sh
need_data
TINY=(--config configs/gpt-tiny.yaml --set training.iters=20 --set logging.interval=1 --set logging.eval_interval=0
      --threads 1)

# whole_lines FILE MIN [ITERS]: FILE ends in a newline, has >= MIN lines, each one JSON object
# (jq); with ITERS, its training records (those with lm_loss) are exactly iterations 1..ITERS
whole_lines() {
  local f="$1" min="$2" iters="${3:-}" n
  [ -s "$f" ] || { echo "$f is empty"; return 1; }
  [ -z "$(tail -c 1 "$f")" ] || { echo "$f ends in a fragment: $(tail -c 80 "$f")"; return 1; }
  n=$(wc -l <"$f")
  [ "$n" -ge "$min" ] || { echo "$f: $n lines, expected >= $min"; return 1; }
  jq -e 'type == "object" and has("iteration")' "$f" >/dev/null || { echo "$f: a line is not a JSON record"; return 1; }
  if [ -n "$iters" ]; then
    [ "$(jq -r 'select(has("lm_loss")) | .iteration' "$f" | tr '\n' ' ')" = "$(seq -s ' ' 1 "$iters") " ] ||
      { echo "$f: iterations $(jq -r 'select(has("lm_loss")) | .iteration' "$f" | tr '\n' ' '), expected 1..$iters"; return 1; }
  fi
  echo "$f: $n whole JSON lines"
}

# --- the metrics file ---
fault_begin metrics_dev_full
fault_run "$MTRAIN" "${TINY[@]}" --metrics /dev/full
fault_end 1 "/dev/full: writing the metrics file failed at iteration 1: No space left on device"

# ulimit -f counts 1024-byte blocks: ~5 records fit, the next write is cut short (EFBIG). Only the
# metrics file is a regular file the run writes: its stdout and stderr go through a pipe to the
# log (which the limit must not cut), and there is no checkpoint.
fault_begin metrics_fsize
fault_run bash -c '(trap "" XFSZ; ulimit -f 1; exec "$@") 2>&1 | cat; exit "${PIPESTATUS[0]}"' fsize \
  "$MTRAIN" "${TINY[@]}" --metrics "$TMP/fsize.jsonl"
fault_end 1 "$TMP/fsize.jsonl: writing the metrics file failed at iteration" whole_lines "$TMP/fsize.jsonl" 1
grep -qF "File too large" "$TMP/metrics_fsize.log" || fail "metrics_fsize: no 'File too large' in the message"
[ "$(wc -c <"$TMP/fsize.jsonl")" -le 1024 ] || fail "metrics_fsize: the file is larger than the limit"

# two runs, one file: the second is refused before it truncates anything; the first is unharmed
fault_begin metrics_shared
fault_start "$MTRAIN" "${TINY[@]}" --metrics "$TMP/shared.jsonl"
first=$CASE_PID
fault_wait_log "iteration "
second_rc=0
MT_E2E_MARK="$CASE_MARK" TMPDIR="$CASE_TMPDIR" "$MTRAIN" "${TINY[@]}" --metrics "$TMP/shared.jsonl" \
  >"$TMP/metrics_shared.second.log" 2>&1 </dev/null || second_rc=$?
kill -0 "$first" 2>/dev/null || { cat "$TMP/metrics_shared.log"; fail "metrics_shared: the first run ended before the second was refused (too short a run?)"; }
[ "$second_rc" -eq 1 ] || { cat "$TMP/metrics_shared.second.log"; fail "metrics_shared: the second run exited $second_rc, expected 1"; }
want="$TMP/shared.jsonl: another mtrain run (process $first) is writing this metrics file"
grep -qF -- "$want" "$TMP/metrics_shared.second.log" || { cat "$TMP/metrics_shared.second.log"; fail "metrics_shared: no message '$want'"; }
grep -q "iteration " "$TMP/metrics_shared.second.log" && fail "metrics_shared: the second run trained"
echo "metrics_shared: second run refused: $(grep -m1 'mtrain: error:' "$TMP/metrics_shared.second.log" | cut -c1-160)"
fault_wait 60
fault_end 0 "iteration       20/      20" whole_lines "$TMP/shared.jsonl" 20 20

# --- recipes that would cost minutes or gigabytes before their error (a wrong recipe exits 2) ---
fault_begin yaml_deep
head -c 100000 /dev/zero | tr '\0' '[' >"$TMP/deep.yaml"
fault_run "$MTRAIN" --config "$TMP/deep.yaml"
fault_end 2 "$TMP/deep.yaml:1: recipe: mappings and lists nested more than 64 levels deep (the limit)"

fault_begin yaml_huge
truncate -s 100M "$TMP/huge.yaml" # sparse: refused from its size, never read
fault_run "$MTRAIN" --config "$TMP/huge.yaml"
fault_end 2 "$TMP/huge.yaml: recipe: 104857600 bytes, more than the limit of 4194304 bytes (4 MiB)"
rm -f "$TMP/huge.yaml"

fault_begin yaml_keys
seq 0 50000 | sed 's/.*/k&: 0/' >"$TMP/keys.yaml" # 1 mapping + 2 * 50,001 scalars
fault_run "$MTRAIN" --config "$TMP/keys.yaml"
fault_end 2 "$TMP/keys.yaml:50000: recipe: more than 100000 keys and values (the limit)"

# --threads beyond what the address-space limit lets the process start: named before the first
# parallel region (libgomp alone would print only "Thread creation failed")
fault_begin threads_limit
fault_run bash -c 'ulimit -v 4000000 && exec "$0" --config configs/gpt-tiny.yaml --train-iters 1 --threads 4096' "$MTRAIN"
fault_end 1 "training.threads (--threads) = 4096: this process could start only"
grep -q "use --threads [0-9]* or fewer" "$TMP/threads_limit.log" || fail "threads_limit: no count to use"

# --- a FIFO where a file is read: refused at once, not waited on ---
SMALLNET=(--config configs/gpt-tiny.yaml --num-layers 1 --hidden-size 64 --threads 1 --set logging.eval_interval=0)
"$MTRAIN" "${SMALLNET[@]}" --train-iters 1 --save "$TMP/ff" >"$TMP/ff.log" 2>&1 || { cat "$TMP/ff.log"; fail "the small save failed"; }
"$MTRAIN" export --load "$TMP/ff" --format hf --output "$TMP/ff-hf" >"$TMP/ff-export.log" 2>&1 ||
  { cat "$TMP/ff-export.log"; fail "the small export failed"; }
cp -r "$TMP/ff" "$TMP/ff-shard"
rm "$TMP/ff-shard/iter_0000001/rank_00000.safetensors" && mkfifo "$TMP/ff-shard/iter_0000001/rank_00000.safetensors"
fault_begin fifo_shard
fault_run timeout 30 "$MTRAIN" "${SMALLNET[@]}" --train-iters 2 --load "$TMP/ff-shard"
fault_end 1 "iter_0000001/rank_00000.safetensors: cannot read: a FIFO, not a regular file"
fault_begin fifo_inspect
fault_run timeout 30 "$MTRAIN" checkpoint inspect "$TMP/ff-shard"
fault_end 1 "rank_00000.safetensors: cannot read: a FIFO, not a regular file"
rm "$TMP/ff-hf/model.safetensors" && mkfifo "$TMP/ff-hf/model.safetensors"
fault_begin fifo_import
fault_run timeout 30 "$MTRAIN" import --format hf --input "$TMP/ff-hf" --save "$TMP/ff-imported" "${SMALLNET[@]}"
fault_end 1 "model.safetensors: cannot read: a FIFO, not a regular file"
cp -r "$TMP/ff" "$TMP/ff-tracker"
rm "$TMP/ff-tracker/latest_checkpointed_iteration.txt" && mkfifo "$TMP/ff-tracker/latest_checkpointed_iteration.txt"
fault_begin fifo_tracker
fault_run timeout 30 "$MTRAIN" "${SMALLNET[@]}" --train-iters 2 --load "$TMP/ff-tracker"
fault_end 1 "latest_checkpointed_iteration.txt: cannot read: a FIFO, not a regular file"
mkfifo "$TMP/fifo_text_document.bin"
cp "$DATA.idx" "$TMP/fifo_text_document.idx"
fault_begin fifo_dataset
fault_run timeout 30 "$MTRAIN" "${SMALLNET[@]}" --train-iters 2 --data-path "$TMP/fifo_text_document"
fault_end 1 "fifo_text_document.bin: cannot read: a FIFO, not a regular file"
fault_begin resume_tokenizer # the save records the byte tokenizer; a resume under another is refused
fault_run "$MTRAIN" "${SMALLNET[@]}" --train-iters 2 --load "$TMP/ff" --set data.tokenizer=null
fault_end 1 "saved by a run with data.tokenizer byte, this recipe has data.tokenizer null"
echo '{"prompt": "And God", "completion": " said"}' >"$TMP/prompt.jsonl"
fault_begin logprobs_function # scored with another norm_eps than the save's: refused naming the key
fault_run "$MTRAIN" logprobs "${SMALLNET[@]}" --load "$TMP/ff" --prompts "$TMP/prompt.jsonl" --output "$TMP/lp.jsonl" \
  --set model.norm_eps=1e-3
fault_end 1 "saved with model.norm_eps = 1e-05, this recipe has 0.001"
fault_begin logprobs_same # the save's own values: scored
fault_run "$MTRAIN" logprobs "${SMALLNET[@]}" --load "$TMP/ff" --prompts "$TMP/prompt.jsonl" --output "$TMP/lp.jsonl"
fault_end 0 ""
echo "all faults_inputs cases passed"
