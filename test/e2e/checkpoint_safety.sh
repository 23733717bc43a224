#!/usr/bin/env bash
# test/e2e/checkpoint_safety.sh — a checkpoint is either complete and verified, or refused with a
# clear error; never a crash, a partial load, or a tracker naming a broken save (issue: checkpoints,
# acceptance items on corruption, crash safety, disk full and retention). Parts:
#   1. corruption (on cp -r copies of one good 4-rank tp 2 x dp 2 save, loaded by one process:
#      any layout loads any save, and one process needs every file): a rank file truncated, one
#      byte of one flipped (CRC-32C), one deleted; manifest.json garbage, empty, truncated JSON,
#      valid JSON with a wrong field (an offset past the end of its file, an offset moved inside
#      it, a shape changed, a file's checksum, one piece put in place of another); a model that
#      does not match (--hidden-size 64, --num-layers 2, llama-tiny loading the gpt save); the
#      tracker holding garbage, or naming an iteration whose folder is missing; --load of a folder
#      that does not exist. Each: exit code exactly 1 (an error, not a signal >= 128, not a load),
#      an "mtrain: error:" line naming the file / field / tensor at fault, and no training
#      iteration line. `mtrain checkpoint inspect` of each damaged copy exits 1 naming the file.
#   2. crash safety: 20 trials of a 4-rank run (tp 2 x dp 2, distributed optimizer) that resumes
#      from DIR (--load, so each trial also loads what the previous crash left) and saves every
#      iteration back into it (checkpoint.keep=2, fsync on; every other trial with --async-save);
#      after a random delay kill -9 of a random rank or of the launcher. Then, with no process of
#      the trial left: the tracker names an iteration whose folder exists, `checkpoint inspect
#      DIR` exits 0 and so does inspect of every other folder that holds a manifest (nothing
#      looks complete that is not; a kill during checkpoint.keep's deletions once left one that
#      did). No process may die of anything but the kill. A save takes longer than an iteration
#      with this tiny batch, so most kills land inside a save: a trial that left a fresh
#      iter_N.tmp/ behind was killed mid-save; fewer than 3 of 20 runs more trials (up to 40)
#      until 3 have, and fewer than 3 by then fails the test (it would not test what it claims).
#      After every kill also: no folder under a final name (iter_N/) lacks its manifest, and DIR
#      holds at most keep + 1 = 3 iter_* folders whose bytes are at most 3 saves' (a removal is a
#      rename to iter_N.del first; each run, holding the folder's lock, removes such remnants and
#      finishes a cut-short retention before its first save). Remnants planted before trial 1
#      (an empty iter_0000000/, an iter_0000000.del/) are gone after it.
#      At the end one real resume of 1 iteration.
#   3. disk full (a small tmpfs, we run as root; SKIP of this part only when it cannot be
#      mounted): after a good save, (i) the next save's rank files do not fit: refused before the
#      first iteration ("one save needs"), (ii) they fit but the manifest does not: non-zero exit,
#      "no space left" naming the file; both: the tracker still names the good save, inspect
#      exits 0, no iter_N/ nor iter_N.tmp/ of the failed save; then, with space again, the same
#      save succeeds.
#   4. checkpoint.keep=2, --save-interval 2 over 10 iterations: exactly iter_8 and iter_10 are
#      left, the tracker names 10, inspect exits 0; then iteration 10 saved again over itself
#      (--load --ckpt-step 8): the same two saves left, verified, nothing beside them.
#   5. the save folder before the first iteration: a second run saving into a folder that a
#      running one holds is refused at once naming the holder's pid and host (mtrain.lock); after
#      kill -9 of the holder the lock is free; a --save that is a regular file, or on a read-only
#      file system, is refused before the first iteration.
# Parts 3, 4 and 5 run in the background while part 1 runs (one process or launch at a time in
# each; none of their checks depends on timing), and both are done before part 2 starts: the crash
# trials run alone, since their kill moments are what they test. No run evaluates the test set at
# its end (logging.eval_iters=0): nothing here reads it.
# Processes are found by their MT_E2E_MARK (test/e2e_lib.sh), never by name. Set MT_E2E_SEED to
# replay the crash trials' random choices (the moments still vary with the machine's load).
set -u
source test/e2e_lib.sh
need_data
# a private copy: a concurrent `make` relinking ./mtrain must not pull the binary from under the ranks
cp "$MTRAIN" "$TMP/mtrain" && MTRAIN="$TMP/mtrain"
export TMPDIR="$TMP/launch-tmp"
mkdir -p "$TMPDIR"
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT
unset MT_RESTART_COUNT TORCHELASTIC_RESTART_COUNT
for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done

FULL="$TMP/full" # the tmpfs of part 3, unmounted before the folder is removed
BG="" # the background subshell of parts 3-5
safety_cleanup() {
  local p
  if [ -n "$BG" ]; then kill -KILL "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; fi
  p=$(marked_pids "$TMP/" prefix)
  [ -z "$p" ] || kill -KILL $p 2>/dev/null
  if grep -qF " $FULL " /proc/mounts 2>/dev/null; then
    sleep 0.2
    umount "$FULL" 2>/dev/null || umount -l "$FULL" 2>/dev/null
  fi
  grep -qF " $TMP/ro " /proc/mounts 2>/dev/null && umount -l "$TMP/ro"
  rm -rf "$TMP"
}
trap safety_cleanup EXIT

T_START=$(date +%s.%N)
elapsed() { awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
ITER_LINE=' iteration +[0-9]+/ *[0-9]+ \|' # a training iteration's log line
it7() { printf 'iter_%07d' "$1"; }
tracker() { cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null; }
show() { sed 's/^/  | /' "$1" | cut -c1-300 | tail -n "${2:-15}"; }
size() { stat -c %s "$1"; }
# inspect_rc DIR [--iteration N]: exit code of `mtrain checkpoint inspect`, output in $IL
IL="$TMP/inspect.log" # (the background parts 3-5 have their own)
inspect_rc() { local rc=0; "$MTRAIN" checkpoint inspect "$@" >"$IL" 2>&1 || rc=$?; echo $rc; }
# no_crash LOG NAME: nothing in LOG says a process died of a signal
no_crash() {
  ! grep -qE 'killed by signal|dumped core|Segmentation|Aborted|AddressSanitizer' "$1" || { show "$1"; fail "$2: a process crashed"; }
}

# the layout every save here is made at: 4 ranks, tp 2 x dp 2, distributed optimizer
PAR=(--tensor-model-parallel-size 2 --use-distributed-optimizer)
BASE=(--config configs/gpt-tiny.yaml --micro-batch-size 2 --set logging.eval_interval=0 --set logging.eval_iters=0
      --set logging.interval=1)
SMALL=(--config configs/gpt-tiny.yaml --micro-batch-size 1 --global-batch-size 2 --seq-length 32
       --set logging.eval_interval=0 --set logging.eval_iters=0 --set logging.interval=1)

# ---------------------------------------------------------------- parts 3, 4, 5 (in the background)
# a subshell: its own $IL, its output to a file shown after part 1; a failed check ends it (fail)
(
IL="$TMP/inspect-bg.log"
# ---------------------------------------------------------------- 3. disk full
echo "== 3. disk full during a save"
mkdir -p "$FULL"
if ! mount -t tmpfs -o size=4m tmpfs "$FULL" 2>"$TMP/mount.err"; then
  echo "SKIP (part 3 only): cannot mount a tmpfs here: $(head -c 200 "$TMP/mount.err")"
else
  DF="$FULL/ck"
  DFARGS=("${SMALL[@]}" "${PAR[@]}" --num-layers 1 --hidden-size 64 --save "$DF" --save-interval 2)
  MT_E2E_MARK="$TMP/df_good" "$MTRAIN" launch -n 4 -- "${DFARGS[@]}" --train-iters 2 >"$TMP/df_good.log" 2>&1 ||
    { show "$TMP/df_good.log"; fail "the good save on the tmpfs failed"; }
  [ "$(tracker "$DF")" = 2 ] || fail "no good save on the tmpfs"
  pages() { echo $(( ($1 + 4095) / 4096 * 4096 )); }
  rank_bytes=0
  for f in "$DF/$(it7 2)"/rank_*.safetensors; do rank_bytes=$((rank_bytes + $(pages "$(size "$f")"))); done
  mf_bytes=$(size "$DF/$(it7 2)/manifest.json")
  avail() { df -B1 --output=avail "$FULL" | tail -n 1 | tr -d ' '; }
  # fill AVAIL_WANTED: a filler file leaves that many bytes free on the tmpfs
  fill() { rm -f "$FULL/filler"; local a; a=$(avail); head -c $((a - $1)) /dev/zero >"$FULL/filler" || true; }
  # disk_full NAME WANT: resuming from iteration 2, the save of iteration 4 must fail cleanly
  disk_full() {
    local name=$1 want=$2 rc=0 log="$TMP/$1.log" free; free=$(avail)
    MT_E2E_MARK="$TMP/$name" "$MTRAIN" launch -n 4 -- "${DFARGS[@]}" --train-iters 4 --load "$DF" >"$log" 2>&1 || rc=$?
    echo "$name ($free bytes free for a save of $((rank_bytes + mf_bytes))): exit $rc: $(grep -m1 -iE 'no space left|disk full' "$log" | cut -c1-260)"
    [ $rc -ne 0 ] || { show "$log"; fail "$name: the run exited 0 although its save did not fit"; }
    grep -qiE "$want.*(no space left|disk full)" "$log" || { show "$log"; fail "$name: no 'no space left' message naming $want"; }
    no_crash "$log" "$name"
    [ "$(tracker "$DF")" = 2 ] || fail "$name: the tracker names '$(tracker "$DF")', not the good save 2"
    [ "$(inspect_rc "$DF")" = 0 ] || { show "$IL"; fail "$name: inspect of the good save failed"; }
    [ ! -e "$DF/$(it7 4)" ] || { ls -la "$DF" "$DF/$(it7 4)"; fail "$name: $(it7 4)/ exists after its save failed"; }
    [ ! -e "$DF/$(it7 4).tmp" ] || { ls -la "$DF/$(it7 4).tmp"; fail "$name: $(it7 4).tmp/ was left behind (it keeps the disk full)"; }
  }
  fill $((rank_bytes / 2)) # (i) found before the first iteration, not after the run's compute
  rc=0; free=$(avail)
  MT_E2E_MARK="$TMP/df_start" "$MTRAIN" launch -n 4 -- "${DFARGS[@]}" --train-iters 4 --load "$DF" >"$TMP/df_start.log" 2>&1 || rc=$?
  echo "df_start ($free bytes free): exit $rc: $(grep -m1 'one save needs' "$TMP/df_start.log" | cut -c1-260)"
  [ $rc -ne 0 ] && grep -q "checkpoint.dir (--save) $DF: .* MiB free, one save needs" "$TMP/df_start.log" ||
    { show "$TMP/df_start.log"; fail "df_start: a save that cannot fit was not refused at the start"; }
  ! grep -qE "$ITER_LINE" "$TMP/df_start.log" || { show "$TMP/df_start.log"; fail "df_start: it trained before refusing"; }
  [ "$(tracker "$DF")" = 2 ] && [ ! -e "$DF/$(it7 4).tmp" ] || fail "df_start: the folder changed"
  fill $((rank_bytes + 8192)) # every rank file fits, the manifest (mf_bytes, ~24 KB) does not
  disk_full df_manifest "manifest\.json"
  rm -f "$FULL/filler"
  MT_E2E_MARK="$TMP/df_ok" "$MTRAIN" launch -n 4 -- "${DFARGS[@]}" --train-iters 4 --load "$DF" >"$TMP/df_ok.log" 2>&1 ||
    { show "$TMP/df_ok.log"; fail "with space again, the save of iteration 4 failed"; }
  [ "$(tracker "$DF")" = 4 ] && [ "$(inspect_rc "$DF")" = 0 ] || fail "with space again, iteration 4 was not saved"
  echo "part 3: both failed saves left the good save named and intact; with space again the save succeeded ($(elapsed) s)"
  umount "$FULL" || fail "cannot unmount $FULL"
fi

# ---------------------------------------------------------------- 4. checkpoint.keep
echo "== 4. checkpoint.keep=2"
KP="$TMP/keep"
MT_E2E_MARK="$TMP/keep" "$MTRAIN" "${SMALL[@]}" --train-iters 10 --save "$KP" --save-interval 2 --set checkpoint.keep=2 \
  >"$TMP/keep.log" 2>&1 || { show "$TMP/keep.log"; fail "the checkpoint.keep run failed"; }
[ "$(grep -c '^saved checkpoint at iteration' "$TMP/keep.log")" = 5 ] || { show "$TMP/keep.log"; fail "keep: expected 5 saves"; }
left=$(cd "$KP" && echo iter_*)
[ "$left" = "$(it7 8) $(it7 10)" ] || fail "keep=2: left '$left', expected $(it7 8) $(it7 10)"
[ "$(tracker "$KP")" = 10 ] || fail "keep=2: the tracker names '$(tracker "$KP")', expected 10"
[ "$(inspect_rc "$KP")" = 0 ] && [ "$(inspect_rc "$KP" --iteration 8)" = 0 ] || fail "keep=2: a kept save does not verify"
echo "part 4: 5 saves, kept $left, tracker 10 ($(elapsed) s)"
# the same iteration saved again (from --ckpt-step 8, iteration 10 is saved once more while the
# tracker names it): the new save replaces the old one, nothing is left beside it
MT_E2E_MARK="$TMP/keep2" "$MTRAIN" "${SMALL[@]}" --train-iters 10 --save "$KP" --save-interval 2 --set checkpoint.keep=2 \
  --load "$KP" --ckpt-step 8 >"$TMP/keep2.log" 2>&1 || { show "$TMP/keep2.log"; fail "re-saving iteration 10 failed"; }
grep -q "loaded checkpoint $KP/$(it7 8): iteration 8" "$TMP/keep2.log" || { show "$TMP/keep2.log"; fail "--ckpt-step 8 did not load iteration 8"; }
left=$(cd "$KP" && echo iter_*)
[ "$left" = "$(it7 8) $(it7 10)" ] || fail "after re-saving iteration 10: left '$left', expected $(it7 8) $(it7 10)"
[ "$(tracker "$KP")" = 10 ] && [ "$(inspect_rc "$KP")" = 0 ] || fail "after re-saving iteration 10: the tracker or the save is wrong"
echo "part 4: iteration 10 saved again over itself: $left left, tracker 10, verified ($(elapsed) s)"

# ---------------------------------------------------------------- 5. the save folder at the start
echo "== 5. the save folder: lock, not a folder, read-only"
LK="$TMP/lock"
MT_E2E_MARK="$TMP/lock_holder" "$MTRAIN" "${SMALL[@]}" --train-iters 100000 --save "$LK" --save-interval 1000 \
  >"$TMP/lock_holder.log" 2>&1 &
holder=$!
for _ in $(seq 1 400); do grep -qE "$ITER_LINE" "$TMP/lock_holder.log" 2>/dev/null && break; sleep 0.025; done
rc=0
MT_E2E_MARK="$TMP/lock_second" "$MTRAIN" "${SMALL[@]}" --train-iters 2 --save "$LK" >"$TMP/lock_second.log" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "checkpoint.dir (--save) $LK is in use by another run (pid $holder on host $(hostname)" "$TMP/lock_second.log" ||
  { show "$TMP/lock_second.log"; kill -9 $holder; fail "a second run into a held --save: exit $rc"; }
! grep -qE "$ITER_LINE" "$TMP/lock_second.log" || { kill -9 $holder; fail "the second run trained before refusing"; }
kill -9 $holder; wait $holder 2>/dev/null
MT_E2E_MARK="$TMP/lock_third" "$MTRAIN" "${SMALL[@]}" --train-iters 1 --save "$LK" >"$TMP/lock_third.log" 2>&1 ||
  { show "$TMP/lock_third.log"; fail "after kill -9 of the holder the folder is still locked"; }
echo "part 5: a second run refused naming pid $holder; free again after kill -9 of it"
touch "$TMP/a_file"
rc=0; "$MTRAIN" "${SMALL[@]}" --train-iters 2 --save "$TMP/a_file" >"$TMP/save_file.log" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "checkpoint.dir (--save) $TMP/a_file: not a folder" "$TMP/save_file.log" && ! grep -qE "$ITER_LINE" "$TMP/save_file.log" ||
  { show "$TMP/save_file.log"; fail "--save of a regular file: exit $rc"; }
RO="$TMP/ro"; mkdir -p "$RO"
if mount -t tmpfs -o ro,size=1m tmpfs "$RO" 2>/dev/null; then
  rc=0; "$MTRAIN" "${SMALL[@]}" --train-iters 2 --save "$RO" >"$TMP/save_ro.log" 2>&1 || rc=$?
  umount "$RO"
  [ $rc = 1 ] && grep -q "checkpoint.dir (--save) $RO: cannot write in it: Read-only file system" "$TMP/save_ro.log" &&
    ! grep -qE "$ITER_LINE" "$TMP/save_ro.log" || { show "$TMP/save_ro.log"; fail "--save on a read-only file system: exit $rc"; }
  echo "part 5: --save of a regular file and on a read-only file system refused before the first iteration"
else
  echo "part 5: --save of a regular file refused (SKIP of the read-only case: cannot mount a tmpfs here)"
fi
) >"$TMP/parts345.out" 2>&1 &
BG=$!

# ---------------------------------------------------------------- 1. corruption
echo "== 1. corruption: clear errors, exit 1, no training"
GOOD="$TMP/good"
MT_E2E_MARK="$TMP/good" "$MTRAIN" launch -n 4 -- "${BASE[@]}" "${PAR[@]}" --train-iters 2 --save "$GOOD" \
  --save-interval 2 >"$TMP/good.log" 2>&1 || { show "$TMP/good.log"; fail "the good save failed"; }
[ "$(tracker "$GOOD")" = 2 ] && [ -f "$GOOD/$(it7 2)/rank_00003.safetensors" ] || fail "the good save is not in $GOOD"
[ "$(inspect_rc "$GOOD")" = 0 ] || { show "$IL"; fail "inspect of the good save failed"; }
# the good save loads (the command each damaged copy must fail in)
LOAD=("${BASE[@]}" --train-iters 3)
"$MTRAIN" "${LOAD[@]}" --load "$GOOD" >"$TMP/good_load.log" 2>&1 || { show "$TMP/good_load.log"; fail "loading the good save failed"; }
grep -qE "$ITER_LINE" "$TMP/good_load.log" || fail "loading the good save: no iteration ran"
echo "good save: 4 rank files, loads into 1 process and trains ($(elapsed) s)"

n_case=0
# damaged NAME: a fresh copy of the good save in $TMP/NAME; sets D (it), S (its save folder), M (its manifest)
damaged() { D="$TMP/$1"; rm -rf "$D"; cp -r "$GOOD" "$D"; S="$D/$(it7 2)"; M="$S/manifest.json"; }
# bad_load NAME WANT [ARGS...]: `mtrain ... --load $D ARGS` must exit 1 with an error matching WANT
# (grep -E) and no training iteration
bad_load() {
  local name=$1 want=$2 rc=0 log="$TMP/$1.load.log"
  shift 2
  MT_E2E_MARK="$TMP/$name" "$MTRAIN" "${LOAD[@]}" --load "$D" "$@" >"$log" 2>&1 || rc=$?
  echo "$name: exit $rc: $(grep -m1 'mtrain: error:' "$log" | cut -c1-230)"
  [ $rc -eq 1 ] || { show "$log"; fail "$name: expected exit 1 (a clear error), got $rc"; }
  grep -qE "mtrain: error: .*$want" "$log" || { show "$log"; fail "$name: the error does not name '$want'"; }
  ! grep -qE "$ITER_LINE" "$log" || { show "$log"; fail "$name: training ran on a damaged checkpoint"; }
  n_case=$((n_case + 1))
}
# bad_inspect NAME WANT: `mtrain checkpoint inspect $D` exits 1 with an error matching WANT
bad_inspect() {
  local rc; rc=$(inspect_rc "$D")
  [ "$rc" = 1 ] || { show "$IL"; fail "$1: checkpoint inspect exited $rc, expected 1"; }
  grep -qE "mtrain checkpoint: error: .*$2" "$IL" || { show "$IL"; fail "$1: inspect does not name '$2'"; }
}
both() { bad_load "$@"; bad_inspect "$1" "$2"; } # both NAME WANT: the loader and inspect refuse it

# (a) truncated rank files
damaged trunc_half; truncate -s $(( $(size "$S/rank_00002.safetensors") / 2 )) "$S/rank_00002.safetensors"
both trunc_half "rank_00002\.safetensors: [0-9]+ bytes, the manifest says [0-9]+: the file is truncated"
damaged trunc_tiny; truncate -s 5 "$S/rank_00000.safetensors"
both trunc_tiny "rank_00000\.safetensors: 5 bytes, the manifest says"
# (b) one byte flipped in the middle of a rank file (its complement: it surely changes)
damaged flip; f="$S/rank_00001.safetensors"; mid=$(( $(size "$f") / 2 ))
b=$(od -An -tu1 -j "$mid" -N1 "$f" | tr -d ' ')
printf "\\$(printf '%03o' $((255 - b)))" | dd of="$f" bs=1 seek="$mid" conv=notrunc status=none
cmp -s "$f" "$GOOD/$(it7 2)/rank_00001.safetensors" && fail "flip: the byte did not change"
both flip "rank_00001\.safetensors: CRC-32C [0-9a-f]{8}, the manifest says [0-9a-f]{8}: the file is corrupt"
# (c) a rank file deleted
damaged missing; rm "$S/rank_00003.safetensors"
both missing "rank_00003\.safetensors: cannot open: No such file.*missing"
# (d) manifest.json: garbage, empty, truncated JSON, valid JSON with a wrong field
damaged mf_garbage; head -c 30000 /dev/urandom >"$S/manifest.json"
both mf_garbage "$(it7 2)/manifest\.json:[0-9]+:[0-9]+: "
damaged mf_empty; : >"$S/manifest.json"
both mf_empty "manifest\.json:1:1: the file is empty"
damaged mf_trunc; head -c $(( $(size "$S/manifest.json") * 2 / 3 )) "$GOOD/$(it7 2)/manifest.json" >"$S/manifest.json"
both mf_trunc "manifest\.json:[0-9]+:[0-9]+: .*the file ended"
# the first piece of the manifest: wte's weight in rank_00000 (8176: its offset in the good save)
grep -q '"entry": "wte.weight.0", "dtype": "F32", "offset": 8176,' "$GOOD/$(it7 2)/manifest.json" ||
  fail "test setup: the good manifest's first piece is not wte.weight.0 at 8176 (layout changed? update the test)"
damaged mf_offset_past_end; sed -i '0,/"offset": 8176,/s//"offset": 99999999,/' "$M"
both mf_offset_past_end "manifest\.json:[0-9]+: tensors\[0\]\.pieces\[0\]\.offset: past the end of its file"
damaged mf_offset_moved; sed -i '0,/"offset": 8176,/s//"offset": 8180,/' "$M"
both mf_offset_moved "rank_00000\.safetensors: entry 'wte\.weight\.0' of tensor wte is elsewhere"
damaged mf_shape; sed -i 's/"name": "fc_w", "shape": \[4, 512, 128\]/"name": "fc_w", "shape": [4, 512, 256]/' "$M"
cmp -s "$M" "$GOOD/$(it7 2)/manifest.json" && fail "test setup: fc_w's shape is not (4, 512, 128) in the manifest"
both mf_shape "manifest\.json:[0-9]+: tensors\[[0-9]+\]\.pieces: its weight pieces hold [0-9]+ of its [0-9]+ elements"
damaged mf_crc; sed -i '0,/"name": "rank_00002.safetensors", "bytes": \([0-9]*\), "crc32c": "[0-9a-f]*"/s//"name": "rank_00002.safetensors", "bytes": \1, "crc32c": "00000000"/' "$M"
both mf_crc "rank_00002\.safetensors: CRC-32C [0-9a-f]{8}, the manifest says 00000000"
# one piece in place of another of the same size: every count adds up and every entry is in its
# file, but half of a block of layer 0's qkv_w would come from nowhere (and the other twice)
damaged mf_dup_piece
awk 'index($0, "\"entry\": \"qkv_w.weight.") && n < 2 {
       s = index($0, "{\"kind\""); e = index(substr($0, s), "}"); o = substr($0, s, e)
       b = o; sub(/.*"bytes": /, "", b); sub(/,.*/, "", b)
       if (n == 0) { first = o; fb = b } else if (b == fb && o != first) { $0 = substr($0, 1, s - 1) first substr($0, s + e); done = 1 }
       n++ }
     { print } END { exit !done }' "$GOOD/$(it7 2)/manifest.json" >"$M" ||
  fail "test setup: qkv_w's first two weight pieces are not of one size"
bad_load mf_dup_piece "tensor qkv_w \(weight\)"
# (e) a model that does not match: the message names the tensor
damaged model
bad_load model_hidden "tensor wte is \(1, 512, 128\) in the checkpoint and \(1, [0-9]+, 64\) in this model" --hidden-size 64
bad_load model_layers "tensor [a-z0-9_]+ is \(4, [0-9]+, [0-9]+\) in the checkpoint and \(2, [0-9]+, [0-9]+\) in this model" --num-layers 2
LOAD_GPT=("${LOAD[@]}")
LOAD=(--config configs/llama-tiny.yaml --micro-batch-size 2 --set logging.eval_interval=0 --train-iters 3)
bad_load model_llama "the checkpoint has a tensor [a-z0-9_]+ that this model does not \(saved as gpt"
LOAD=("${LOAD_GPT[@]}")
# (f) the tracker: garbage, empty, naming an iteration whose folder is missing
damaged tracker_garbage; echo "garbage" >"$D/latest_checkpointed_iteration.txt"
both tracker_garbage "latest_checkpointed_iteration\.txt: the tracker should hold an iteration number"
damaged tracker_empty; : >"$D/latest_checkpointed_iteration.txt"
both tracker_empty "latest_checkpointed_iteration\.txt: the tracker should hold an iteration number"
damaged tracker_missing_iter; echo 7 >"$D/latest_checkpointed_iteration.txt"
both tracker_missing_iter "$(it7 7)"
# (g) --load of a folder that does not exist
D="$TMP/no-such-checkpoint"
both no_folder "no-such-checkpoint"
echo "part 1: $n_case damaged checkpoints refused, each with exit 1 and a message naming the file / tensor ($(elapsed) s)"

# ---------------------------------------------------------------- parts 3, 4, 5: their output
rc=0; wait "$BG" || rc=$?
BG=""
cat "$TMP/parts345.out"
[ $rc = 0 ] || fail "parts 3-5 (run in the background during part 1) failed: exit $rc"

# ---------------------------------------------------------------- 2. crash safety
echo "== 2. crash safety: kill -9 at random moments, many inside saves"
CK="$TMP/crash"
CRASH=("${SMALL[@]}" "${PAR[@]}" --save "$CK" --save-interval 1 --set checkpoint.keep=2 --set checkpoint.fsync=true)
MT_E2E_MARK="$TMP/crash_init" "$MTRAIN" launch -n 4 -- "${CRASH[@]}" --train-iters 1 >"$TMP/crash_init.log" 2>&1 ||
  { show "$TMP/crash_init.log"; fail "the first save of part 2 failed"; }
SAVE_BYTES=$(du -sb "$CK/$(it7 1)" | cut -f1)
mkdir "$CK/$(it7 0)" "$CK/$(it7 0).del" && cp "$CK/$(it7 1)/rank_00000.safetensors" "$CK/$(it7 0).del/"
# remnants_bounded: no final-name folder without its manifest; at most keep + 1 folders and saves' bytes
remnants_bounded() {
  local d n=0 bytes
  for d in "$CK"/iter_*; do
    [ -d "$d" ] || continue
    n=$((n + 1))
    [[ "${d##*/}" =~ ^iter_[0-9]+$ ]] && [ ! -f "$d/manifest.json" ] && { ls -la "$CK" "$d"; fail "$1: $d has no manifest"; }
  done
  bytes=$(du -sb "$CK" | cut -f1)
  [ $n -le 3 ] && [ "$bytes" -le $((3 * SAVE_BYTES + 65536)) ] ||
    { ls -la "$CK"; fail "$1: $n iter_* folders, $bytes bytes (keep=2: at most 3 folders of $SAVE_BYTES bytes)"; }
}
SEED="${MT_E2E_SEED:-$(( $(date +%s) % 100000 ))}"
RANDOM=$SEED
echo "random seed $SEED (MT_E2E_SEED=$SEED replays the choices)"
TRIALS=20
DELAY_MS=450 # after the first iteration line: a save (~50-150 ms here) follows each iteration (~20-40 ms)
n_tmp=0; n_launcher=0; n_rank=0; n_checked=0
# crash_trial K: one trial (its stderr is quiet: bash reports a killed background job there)
crash_trial() {
  local k=$1
  mark="$TMP/crash$k"; log="$TMP/crash$k.log"
  before=$(tracker "$CK")
  touch "$TMP/crash$k.start"
  sleep 0.01 # a .tmp created from here on is newer than the marker
  mode=(); [ $((k % 2)) = 0 ] && mode=(--async-save) # every other trial: files written on a background thread
  MT_E2E_MARK="$mark" "$MTRAIN" launch -n 4 -- "${CRASH[@]}" "${mode[@]}" --train-iters 100000 --load "$CK" >"$log" 2>&1 &
  launcher=$!
  started=0
  for _ in $(seq 1 400); do
    if grep -qE "$ITER_LINE" "$log" 2>/dev/null; then started=1; break; fi
    kill -0 $launcher 2>/dev/null || break
    sleep 0.025
  done
  if [ $started = 0 ]; then
    kill -9 $launcher 2>/dev/null; wait $launcher
    show "$log" 20; fail "trial $k: training did not start (could the save the previous crash left not be loaded?)"
  fi
  grep -q "loaded checkpoint $CK/iter_" "$log" || { show "$log"; fail "trial $k: it did not resume from $CK"; }
  delay=$(( RANDOM % DELAY_MS )); victim=$(( RANDOM % 4 ))
  [ $((k % 4)) = 1 ] && victim=4 # trials 1, 5, 9, ...: the launcher (its ranks die with it), else a random rank
  sleep "$(printf '0.%03d' "$delay")"
  if [ $victim = 4 ]; then
    pid=$launcher; who=launcher; n_launcher=$((n_launcher + 1))
  else
    pid=$(rank_pid $launcher $victim); who="rank $victim"; n_rank=$((n_rank + 1))
  fi
  [ -n "$pid" ] || { show "$log"; fail "trial $k: no pid for $who"; }
  kill -9 "$pid"
  for _ in $(seq 1 300); do kill -0 $launcher 2>/dev/null || break; sleep 0.05; done
  kill -0 $launcher 2>/dev/null && { show "$log"; fail "trial $k: the launcher still runs 15 s after kill -9 of $who"; }
  wait $launcher
  for _ in $(seq 1 200); do left=$(marked_pids "$mark"); [ -z "$left" ] && break; sleep 0.05; done
  [ -z "$left" ] || { ps -o pid,stat,args -p $left; fail "trial $k: processes left running 10 s after the kill"; }
  # the state a restart would find
  it=$(tracker "$CK")
  [[ "$it" =~ ^[0-9]+$ ]] || { ls -la "$CK"; fail "trial $k: the tracker holds '$it'"; }
  [ -f "$CK/$(it7 "$it")/manifest.json" ] || { ls -la "$CK"; fail "trial $k: the tracker names $it, $(it7 "$it")/ is not a complete save"; }
  rc=$(inspect_rc "$CK")
  [ "$rc" = 0 ] || { ls -la "$CK"; show "$IL"; fail "trial $k (kill -9 of $who): checkpoint inspect exited $rc"; }
  for m in "$CK"/iter_*/manifest.json; do # every folder that looks complete is
    d=$(dirname "$m"); n=${d##*/iter_}
    [[ "$n" =~ ^[0-9]+$ ]] || continue # iter_N.tmp / .old: never loaded
    [ $((10#$n)) = "$it" ] && continue # the tracker's: `checkpoint inspect DIR` just verified it
    rc=$(inspect_rc "$CK" --iteration $((10#$n)))
    [ "$rc" = 0 ] || { ls -la "$CK" "$d"; show "$IL"; fail "trial $k: $d holds a manifest but does not verify"; }
    n_checked=$((n_checked + 1))
  done
  fresh=$(find "$CK" -maxdepth 1 -name 'iter_*.tmp' -newer "$TMP/crash$k.start" -printf '%f ')
  [ -z "$fresh" ] || n_tmp=$((n_tmp + 1))
  remnants_bounded "trial $k"
  [ ! -e "$CK/$(it7 0)" ] && [ ! -e "$CK/$(it7 0).del" ] || { ls -la "$CK"; fail "trial $k: the planted remnants are still there"; }
  # the killed rank is "killed by signal 9", the others may be stopped with SIGTERM: nothing else
  ! grep -qE 'killed by signal (4|6|7|8|11)|dumped core|Segmentation' "$log" || { show "$log"; fail "trial $k: a process crashed"; }
  echo "trial $k${mode:+ (async)}: kill -9 $who ${delay} ms after the first iteration: tracker $before -> $it, inspect ok${fresh:+, left $fresh(killed mid-save)}"
}
for k in $(seq 1 $TRIALS); do crash_trial "$k" 2>/dev/null; done
# about 3 in 10 kills land inside a save, so 20 trials see fewer than 3 a few times in a hundred: then more
# trials, up to 2 x TRIALS, until 3 have (each checked as above); fewer than 3 by then fails
while [ $n_tmp -lt 3 ] && [ $k -lt $((2 * TRIALS)) ]; do k=$((k + 1)); crash_trial "$k" 2>/dev/null; done
echo "part 2: $k trials ($n_rank kills of a rank, $n_launcher of the launcher), $n_tmp left an iter_N.tmp (killed" \
     "inside a save), every tracker named a verified save, $n_checked other complete-looking folders verified ($(elapsed) s)"
[ $n_tmp -ge 3 ] || fail "only $n_tmp of $k kills landed inside a save: the trials did not test crash safety during saves"
# one real resume from what the last crash left
last=$(tracker "$CK")
MT_E2E_MARK="$TMP/crash_resume" "$MTRAIN" launch -n 4 -- "${CRASH[@]}" --train-iters $((last + 1)) --load "$CK" \
  >"$TMP/crash_resume.log" 2>&1 || { show "$TMP/crash_resume.log"; fail "resuming from iteration $last failed"; }
grep -q "loaded checkpoint $CK/$(it7 "$last"): iteration $last" "$TMP/crash_resume.log" || { show "$TMP/crash_resume.log"; fail "the resume did not load iteration $last"; }
grep -qE " iteration +$((last + 1))/ *$((last + 1)) \|" "$TMP/crash_resume.log" || { show "$TMP/crash_resume.log"; fail "the resume did not train iteration $((last + 1))"; }
[ "$(tracker "$CK")" = $((last + 1)) ] && [ "$(inspect_rc "$CK")" = 0 ] || fail "the resume's save of iteration $((last + 1)) is not in place"
echo "resume: loaded iteration $last, trained and saved iteration $((last + 1)) ($(elapsed) s)"

echo "checkpoint safety: all parts passed in $(elapsed) s"
