#!/usr/bin/env bash
# test/e2e/faults_data.sh — the data cases of the fault-injection sweep, each with the
# checks of test/faults_lib.sh (exit status, a message naming the file, no process left, nothing
# left in the case's TMPDIR, no partial or mixed file under a final name):
#   concurrent      a second `mtrain preprocess` on the same --output-prefix while the first
#                   holds it: refused naming the prefix and the holder's pid; the first's pair is
#                   byte-identical to a serial run's; nothing else beside the prefix
#   together        two runs on one prefix started at the same instant: each one either succeeds
#                   or is refused; the published pair is self-consistent and equals one run's
#                   serial output
#   sigint/sigterm  preprocess interrupted: dies by the signal, removes its temporaries and lock
#   sigkill         preprocess killed: the next run removes the dead run's temporaries
#   stale_cache     a "<cache>.mtidx.tmp.<deadpid>.<addr>" is removed by the next training run;
#                   a live pid's temporary and names of other patterns are kept
#   truncated       the .bin truncated under a training run: exit non-zero with a message naming
#                   the .bin (SIGBUS turned into a message, or the changed-file check)
#   grown           the .bin grown in place under a training run: the changed-file message at the
#                   next validation, non-zero exit
#   overwritten     the .bin overwritten in place under a training run with ids past the
#                   vocabulary: the next batch's message names the .bin, the sample and the id
#   path_*          data.path a folder, the .bin, the .idx, an --output-prefix, a bare prefix
#                   with no files, a .bin without .idx: each message says what is wrong and what
#                   to write
# Small inputs (a few MB from data/kjv.jsonl) and tiny runs on a copy of the corpus: ~20 s.
set -u
source test/e2e_lib.sh
source test/faults_lib.sh
[ -x "$MTRAIN" ] || { echo "skip: $MTRAIN not built"; exit 77; }
need_data
[ -f data/kjv.jsonl ] || fail "data/kjv.jsonl missing: run scripts/fetch-corpus.sh data"

# ---- preprocess ------------------------------------------------------------------------------
IN1="$TMP/in1.jsonl"; IN2="$TMP/in2.jsonl"
cp data/kjv.jsonl "$IN1"                                     # ~4.3 MB
tac data/kjv.jsonl | head -n 20000 >"$IN2"                  # other tokens, another size
PP=(preprocess --tokenizer byte --workers 2 --quiet)
"$MTRAIN" "${PP[@]}" --input "$IN1" --output-prefix "$TMP/ref1" >/dev/null || fail "serial run 1"
"$MTRAIN" "${PP[@]}" --input "$IN2" --output-prefix "$TMP/ref2" >/dev/null || fail "serial run 2"

# pair_ok PREFIX: the .idx's total token count x 2 bytes (uint16) is the .bin's size
pair_ok() {
  local idx="$1.idx" bin="$1.bin" n total
  [ -f "$idx" ] && [ -f "$bin" ] || { echo "$1: .bin/.idx missing"; return 1; }
  n=$(od -An -tu8 -j18 -N8 "$idx" | tr -d ' ')
  total=$(od -An -v -td4 -j34 -N$((4 * n)) -w4 "$idx" | awk '{ s += $1 } END { print s + 0 }')
  [ $((2 * total)) -eq "$(stat -c %s "$bin")" ] || { echo "$1: .idx says $total tokens, .bin has $(stat -c %s "$bin") bytes"; return 1; }
}
# same_as PREFIX REF: PREFIX.{bin,idx} are REF's bytes
same_as() { cmp -s "$1.bin" "$2.bin" && cmp -s "$1.idx" "$2.idx"; }
# only_pair DIR NAME: DIR holds exactly NAME.bin and NAME.idx
only_pair() {
  local got; got=$(ls -A "$1" | tr '\n' ' ')
  [ "$got" = "$2.bin $2.idx " ] || { echo "beside the prefix: $got"; return 1; }
}
check_concurrent() { pair_ok "$D/cc_text_document" && same_as "$D/cc_text_document" "$TMP/ref1_text_document" && only_pair "$D" cc_text_document; }

D="$TMP/concurrent"; mkdir -p "$D"
fault_begin concurrent
# the first run, held open on a FIFO so it is mid-run for as long as the case needs
FIFO="$TMP/concurrent.fifo"; mkfifo "$FIFO"
MT_E2E_MARK="$CASE_MARK" TMPDIR="$CASE_TMPDIR" "$MTRAIN" "${PP[@]}" --input "$FIFO" --output-prefix "$D/cc" \
  >"$TMP/concurrent.first.log" 2>&1 </dev/null &
first=$!
exec 3>"$FIFO"
for _ in $(seq 1 100); do [ -f "$D/cc_text_document.lock" ] && break; sleep 0.05; done
fault_run "$MTRAIN" "${PP[@]}" --input "$IN2" --output-prefix "$D/cc"
cat "$IN1" >&3; exec 3>&-
rc1=0; wait $first || rc1=$?
rm -f "$FIFO"
[ $rc1 -eq 0 ] || { cat "$TMP/concurrent.first.log"; fail "concurrent: the first run failed ($rc1)"; }
fault_end nonzero "--output-prefix $D/cc: $D/cc_text_document is being written by another mtrain preprocess (pid $first" check_concurrent

# started at the same instant: whoever is refused says so; the pair is one run's
D="$TMP/together"; mkdir -p "$D"
check_together() {
  pair_ok "$D/cc_text_document" || return 1
  same_as "$D/cc_text_document" "$TMP/ref1_text_document" || same_as "$D/cc_text_document" "$TMP/ref2_text_document" ||
    { echo "the pair is neither run's output"; return 1; }
  only_pair "$D" cc_text_document
}
together() { # both runs at once; exit 0 when each either succeeded or was refused by the lock
  local a b ra=0 rb=0
  "$MTRAIN" "${PP[@]}" --input "$IN1" --output-prefix "$D/cc" >"$TMP/together.a.log" 2>&1 & a=$!
  "$MTRAIN" "${PP[@]}" --input "$IN2" --output-prefix "$D/cc" >"$TMP/together.b.log" 2>&1 & b=$!
  wait $a || ra=$?; wait $b || rb=$?
  echo "together: exits $ra $rb; $(grep -h "being written" "$TMP/together.a.log" "$TMP/together.b.log" | cut -c1-160)"
  for x in a:$ra b:$rb; do
    [ "${x#*:}" -eq 0 ] || grep -q "is being written by another mtrain preprocess" "$TMP/together.${x%%:*}.log" || return 1
  done
  [ $ra -eq 0 ] || [ $rb -eq 0 ]
}
for round in 1 2 3; do
  fault_begin together
  fault_run together
  grep "together: exits" "$TMP/together.log"
  fault_end 0 "" check_together
done

# interrupted preprocess: SIGINT, SIGTERM remove their temporaries; SIGKILL's are removed by the
# next run. The run reads a FIFO, so it is certainly mid-run (its temporaries made) when signalled.
no_tmp_left() { # no_tmp_left DIR: no temporaries, no lock, no final pair
  local got; got=$(ls -A "$1")
  [ -z "$got" ] || { echo "left in $1: $got"; return 1; }
}
interrupt_case() { # interrupt_case NAME SIGNAL
  local name=$1 sig=$2
  D="$TMP/$name"; mkdir -p "$D"
  FIFO="$TMP/$name.fifo"; mkfifo "$FIFO"
  fault_begin "$name"
  # env --default-signal: a background job starts with SIGINT ignored; Ctrl-C reaches a
  # foreground run with the default action, so that is what we reproduce
  fault_start env --default-signal=INT "$MTRAIN" "${PP[@]}" --input "$FIFO" --output-prefix "$D/x"
  exec 3>"$FIFO"
  head -c 100000 "$IN1" >&3
  for _ in $(seq 1 100); do ls "$D" | grep -q '\.bin\.tmp' && break; sleep 0.05; done
  ls "$D" | grep -q '\.bin\.tmp' || fail "$name: no temporary appeared: $(ls -A "$D")"
  kill -"$sig" "$CASE_PID"
  fault_wait 10 2>/dev/null
  exec 3>&-
  rm -f "$FIFO"
}
interrupt_case sigint INT
[ "$CASE_RC" -eq 130 ] || fail "sigint: exit $CASE_RC, expected 130 (died by SIGINT)"
fault_end nonzero "" no_tmp_left "$D"
interrupt_case sigterm TERM
[ "$CASE_RC" -eq 143 ] || fail "sigterm: exit $CASE_RC, expected 143 (died by SIGTERM)"
fault_end nonzero "" no_tmp_left "$D"
interrupt_case sigkill KILL
ls "$D" | grep -q '\.bin\.tmp\.' || fail "sigkill: expected the killed run's temporaries (nothing to test)"
fault_end 137 ""
fault_begin sigkill_next
fault_run "$MTRAIN" "${PP[@]}" --input "$IN2" --output-prefix "$D/x"
fault_end 0 "wrote $D/x_text_document" eval 'pair_ok "$D/x_text_document" && same_as "$D/x_text_document" "$TMP/ref2_text_document" && only_pair "$D" x_text_document'

# ---- training on a copy of the corpus --------------------------------------------------------
C="$TMP/corpus"; mkdir -p "$C"
cp "$DATA.bin" "$DATA.idx" "$C/"
P="$C/kjv_text_document"
TRAIN=(--config configs/gpt-tiny.yaml --threads 1 --set logging.interval=1 --set "data.path=$P")

# a stale index-cache temporary of a dead pid goes; a live one's and other names stay
CD="$C/cache/GPTDataset_indices"; mkdir -p "$CD"
true & dead=$!; wait $dead
kill -0 $dead 2>/dev/null && fail "pid $dead is alive again"
touch "$CD/0123456789abcdef-GPTDataset-train.mtidx.tmp.$dead.7ffc12345678" \
      "$CD/0123456789abcdef-GPTDataset-train.mtidx.tmp.$$.7ffc12345678" \
      "$CD/notes.tmp.$dead"
fault_begin stale_cache
fault_run "$MTRAIN" "${TRAIN[@]}" --set training.iters=2 --set logging.eval_interval=0
check_stale() {
  [ ! -e "$CD/0123456789abcdef-GPTDataset-train.mtidx.tmp.$dead.7ffc12345678" ] || { echo "the dead pid's temporary is still there"; return 1; }
  [ -e "$CD/0123456789abcdef-GPTDataset-train.mtidx.tmp.$$.7ffc12345678" ] || { echo "a live pid's temporary was removed"; return 1; }
  [ -e "$CD/notes.tmp.$dead" ] || { echo "a file of another pattern was removed"; return 1; }
  rm -f "$CD/0123456789abcdef-GPTDataset-train.mtidx.tmp.$$.7ffc12345678" "$CD/notes.tmp.$dead"
}
fault_end 0 "finished 2 iterations" check_stale

# the .bin truncated while training reads it
T="$TMP/trunc"; mkdir -p "$T"; cp "$DATA.bin" "$DATA.idx" "$T/"
fault_begin truncated
fault_start "$MTRAIN" "${TRAIN[@]}" --set "data.path=$T/kjv_text_document" --set training.iters=300 --set logging.eval_interval=1000
fault_wait_log "iteration " 30
truncate -s 4096 "$T/kjv_text_document.bin"
fault_wait 20
echo "truncated: $(grep -m1 'mtrain: error' "$TMP/truncated.log" | cut -c1-200)"
fault_end nonzero "$T/kjv_text_document.bin changed"

# the .bin grown in place while training reads it: found at the next validation (iteration 20)
G="$TMP/grown"; mkdir -p "$G"; cp "$DATA.bin" "$DATA.idx" "$G/"
fault_begin grown
fault_start "$MTRAIN" "${TRAIN[@]}" --set "data.path=$G/kjv_text_document" --set training.iters=40 --set logging.eval_interval=20
fault_wait_log "iteration " 30
head -c 1000000 "$DATA.bin" >>"$G/kjv_text_document.bin"
fault_wait 30
grep -q "iteration       21/" "$TMP/grown.log" && fail "grown: training went on past the validation at iteration 20"
fault_end nonzero "$G/kjv_text_document.bin changed while training read it"

# ---- data.path forms that are not a dataset prefix -------------------------------------------
path_case() { # path_case CASE DATA_PATH EXPECTED_TEXT: one iteration on DATA_PATH fails saying EXPECTED_TEXT
  fault_begin "$1"
  fault_run "$MTRAIN" "${TRAIN[@]}" --set "data.path=$2" --set training.iters=1
  fault_end nonzero "$3"
}
path_case path_folder "$C" "data.path '$C' is a folder: data.path is a dataset prefix"
grep -qF "'$P'" "$TMP/path_folder.log" || fail "path_folder: the dataset in that folder is not proposed"
path_case path_bin "$P.bin" "data.path '$P.bin' names the .bin file: data.path is the prefix without extension, '$P'"
path_case path_idx "$P.idx" "data.path '$P.idx' names the .idx file: data.path is the prefix without extension, '$P'"
path_case path_output_prefix "$C/kjv" "write '$C/kjv_text_document'"
path_case path_none "$C/nothing_here" \
  "data.path '$C/nothing_here': no dataset there (neither $C/nothing_here.idx nor $C/nothing_here.bin exists)"

B="$TMP/binonly"; mkdir -p "$B"; cp "$DATA.bin" "$B/"
# waits ~2 s for an .idx that may be mid-publish, then says which is missing
path_case path_bin_only "$B/kjv_text_document" "$B/kjv_text_document.idx: missing beside $B/kjv_text_document.bin"

# the .bin overwritten in place (same size) with ids past the vocabulary while training reads it
# (the start-up scan of the ids saw the good file): the next batch names the .bin, the sample and
# the id, not a row of the cross-entropy
O="$TMP/overwritten"; mkdir -p "$O"; cp "$DATA.bin" "$DATA.idx" "$O/"
fault_begin overwritten
fault_start "$MTRAIN" "${TRAIN[@]}" --set "data.path=$O/kjv_text_document" --set training.iters=400 --set logging.eval_interval=0
fault_wait_log "iteration " 30
head -c "$(stat -c %s "$O/kjv_text_document.bin")" /dev/zero | tr '\000' '\377' |
  dd of="$O/kjv_text_document.bin" conv=notrunc status=none
fault_wait 30
fault_end nonzero "$O/kjv_text_document.bin: sample "
grep -qF "holds id 65535, outside the model's vocabulary of 257 tokens" "$TMP/overwritten.log" ||
  fail "overwritten: the message does not give the id and the vocabulary"

echo "all data fault cases passed"
