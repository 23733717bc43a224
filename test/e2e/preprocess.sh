#!/usr/bin/env bash
# test/e2e/preprocess.sh — `mtrain preprocess` end to end on small JSON-lines files:
# exact output bytes (byte tokenizer, --append-eod), --on-error stop (non-zero, names
# file:line, leaves nothing behind) and skip (reports the count), a missing key, several
# keys, stdin, unreadable inputs and unknown tokenizers/flags give clear errors; --workers 2
# and 3 write the same bytes as 1 (malformed lines skipped included); no temporary or lock is
# left. GPT-2 BPE is tested in test/e2e/tokenizer_gpt2.sh; concurrent and interrupted runs in
# test/e2e/faults_data.sh.
# Run from the repo root; MTRAIN defaults to ./mtrain.
set -u
MTRAIN="${MTRAIN:-./mtrain}"
if [ ! -x "$MTRAIN" ]; then echo "skip: $MTRAIN not built"; exit 77; fi
source test/e2e_checks.sh mt_e2e_preprocess

if ! "$MTRAIN" preprocess --help >/dev/null 2>&1; then
  echo "FAIL: '$MTRAIN preprocess --help' fails: is preprocess wired into cmd/mtrain.c?"
  exit 1
fi

# Line 3 is malformed (unterminated string).
cat >"$tmp/in.jsonl" <<'EOF'
{"text": "hi", "id": 1}
{"meta": {"text": "nested, ignored"}, "text": "\u00e9"}
{"text": "broken
{"text": "a\nb"}
EOF

# --on-error stop: fails, names the file and line, writes nothing.
run stop "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/stop" \
  --tokenizer byte --append-eod --on-error stop
if [ $rc -ne 0 ]; then ok "stop exits $rc"; else fail "stop exited 0"; fi
if contains "$tmp/stop.err" "$tmp/in.jsonl:3:"; then ok "stop names file:line"
else fail "stop message lacks $tmp/in.jsonl:3: ($(cat "$tmp/stop.err"))"; fi
if ls "$tmp" | grep -q '^stop_'; then fail "stop left files: $(ls "$tmp" | grep '^stop_')"
else ok "stop left nothing behind"; fi

# The default is stop as well.
run default "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/default"
[ $rc -ne 0 ] && contains "$tmp/default.err" ":3:" && ok "default is stop" || fail "default is not stop"

# --on-error skip: succeeds, reports 1 skipped line, exact bytes.
run skip "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/skip" \
  --tokenizer byte --json-keys text --append-eod --workers 2 --on-error skip
if [ $rc -eq 0 ]; then ok "skip exits 0"; else fail "skip exited $rc: $(cat "$tmp/skip.err")"; fi
if grep -q "skipped 1 lines" "$tmp/skip.out" && contains "$tmp/skip.out" "in.jsonl:3:"; then
  ok "skip reports the count and the first bad line"
else fail "skip summary: $(cat "$tmp/skip.out")"; fi
contains "$tmp/skip.out" "3 documents" && ok "summary counts documents" || fail "summary: $(cat "$tmp/skip.out")"
# tokens: h i EOD | c3 a9 EOD | a \n b EOD, as uint16 little-endian (eod = 256)
want_bin="680069000001c300a90000016100"0a00"62000001"
want_idx="4d4d49444944580000""0100000000000000""08""0300000000000000""0400000000000000"
want_idx+="030000000300000004000000"
want_idx+="0000000000000000""0600000000000000""0c00000000000000"
want_idx+="0000000000000000""0100000000000000""0200000000000000""0300000000000000"
if [ -f "$tmp/skip_text_document.bin" ] && [ "$(hexof "$tmp/skip_text_document.bin")" = "$want_bin" ]; then
  ok ".bin bytes"
else fail ".bin bytes: $(hexof "$tmp/skip_text_document.bin" 2>&1)"; fi
if [ -f "$tmp/skip_text_document.idx" ] && [ "$(hexof "$tmp/skip_text_document.idx")" = "$want_idx" ]; then
  ok ".idx bytes (Megatron layout)"
else fail ".idx bytes: $(hexof "$tmp/skip_text_document.idx" 2>&1)"; fi
# temporaries are NAME.{bin,idx}.tmp.<pid>, the writer's lock NAME.lock (removed when done)
if ls "$tmp" | grep -qE '\.tmp(\.|$)|\.lock$'; then fail "temporaries left: $(ls "$tmp")"; else ok "no temporaries or locks left"; fi

# Any number of workers writes the same bytes (and reports the same skip).
for w in 1 3; do
  run "skipw$w" "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/skipw$w" \
    --tokenizer byte --append-eod --workers $w --on-error skip
  if [ $rc -eq 0 ] && cmp -s "$tmp/skipw${w}_text_document.bin" "$tmp/skip_text_document.bin" &&
     cmp -s "$tmp/skipw${w}_text_document.idx" "$tmp/skip_text_document.idx" &&
     grep -q "skipped 1 lines" "$tmp/skipw$w.out"; then ok "--workers $w: same bytes, same skip"
  else fail "--workers $w differs: rc $rc $(cat "$tmp/skipw$w.err")"; fi
done
run stopw2 "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/stopw2" --workers 2
if [ $rc -ne 0 ] && contains "$tmp/stopw2.err" "$tmp/in.jsonl:3:" && ! ls "$tmp" | grep -q '^stopw2_'; then
  ok "--workers 2 stops at file:line, leaves nothing"
else fail "--workers 2 stop: rc $rc $(cat "$tmp/stopw2.err")"; fi

# stdin gives the same output.
run stdin bash -c "grep -v broken '$tmp/in.jsonl' | '$MTRAIN' preprocess --input - --output-prefix '$tmp/stdin' --append-eod"
if [ $rc -eq 0 ] && cmp -s "$tmp/stdin_text_document.bin" "$tmp/skip_text_document.bin" &&
   cmp -s "$tmp/stdin_text_document.idx" "$tmp/skip_text_document.idx"; then ok "stdin"
else fail "stdin: rc $rc $(cat "$tmp/stdin.err")"; fi

# Without --append-eod there are no eod tokens.
run noeod "$MTRAIN" preprocess --input "$tmp/in.jsonl" --output-prefix "$tmp/noeod" --on-error skip
[ $rc -eq 0 ] && [ "$(stat -c %s "$tmp/noeod_text_document.bin")" = 14 ] && ok "no eod without --append-eod" ||
  fail "noeod: rc $rc size $(stat -c %s "$tmp/noeod_text_document.bin" 2>&1)"

# A missing key: stop names the line and the key; skip counts it; another key works.
printf '{"title": "t1", "text": "x"}\n{"title": "t2"}\n' >"$tmp/keys.jsonl"
run nokey "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/nokey"
if [ $rc -ne 0 ] && contains "$tmp/nokey.err" "keys.jsonl:2:" && contains "$tmp/nokey.err" '"text"'; then
  ok "missing key stops with file:line and the key"
else fail "missing key: rc $rc $(cat "$tmp/nokey.err")"; fi
run nokey_skip "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/nokey" --on-error skip
[ $rc -eq 0 ] && grep -q "skipped 1 lines" "$tmp/nokey_skip.out" && ok "missing key skipped and counted" ||
  fail "missing key skip: $(cat "$tmp/nokey_skip.out" "$tmp/nokey_skip.err")"
run title "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/two" --json-keys title
[ $rc -eq 0 ] && [ -f "$tmp/two_title_document.idx" ] && ok "--json-keys title" || fail "title: $(cat "$tmp/title.err")"
run both "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/both" --json-keys title,text --on-error skip
[ $rc -eq 0 ] && [ -f "$tmp/both_title_document.bin" ] && [ -f "$tmp/both_text_document.bin" ] &&
  ok "two keys, two datasets" || fail "two keys: $(cat "$tmp/both.err")"

# Unreadable inputs: missing file, a directory, (when not root) no permission.
run missing "$MTRAIN" preprocess --input "$tmp/nope.jsonl" --output-prefix "$tmp/x"
[ $rc -ne 0 ] && contains "$tmp/missing.err" "$tmp/nope.jsonl" && contains "$tmp/missing.err" "No such file" &&
  ok "missing input" || fail "missing input: rc $rc $(cat "$tmp/missing.err")"
run dir "$MTRAIN" preprocess --input "$tmp" --output-prefix "$tmp/x"
[ $rc -ne 0 ] && contains "$tmp/dir.err" "directory" && ok "directory input" || fail "directory input: $(cat "$tmp/dir.err")"
if [ "$(id -u)" != 0 ]; then
  cp "$tmp/keys.jsonl" "$tmp/locked.jsonl"; chmod 000 "$tmp/locked.jsonl"
  run locked "$MTRAIN" preprocess --input "$tmp/locked.jsonl" --output-prefix "$tmp/x"
  [ $rc -ne 0 ] && contains "$tmp/locked.err" "Permission denied" && ok "unreadable input" || fail "unreadable: $(cat "$tmp/locked.err")"
fi
run outdir "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/no/such/dir/x" --json-keys title
[ $rc -ne 0 ] && contains "$tmp/outdir.err" "$tmp/no/such/dir/x_title_document" && ok "missing output folder" ||
  fail "output folder: $(cat "$tmp/outdir.err")"

# A tokenizer without its files, an unknown tokenizer, and bad flags.
run gpt2 "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --tokenizer gpt2
[ $rc -ne 0 ] && contains "$tmp/gpt2.err" "--vocab" && ok "gpt2 without files: asks for --vocab/--merges" || fail "gpt2: $(cat "$tmp/gpt2.err")"
run unknowntok "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --tokenizer sentencepiece
[ $rc -ne 0 ] && contains "$tmp/unknowntok.err" "sentencepiece" && ok "unknown tokenizer named" || fail "unknown tokenizer: $(cat "$tmp/unknowntok.err")"
run badflag "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --frobnicate
[ $rc -eq 2 ] && contains "$tmp/badflag.err" "--frobnicate" && ok "unknown flag" || fail "unknown flag: rc $rc"
run badpolicy "$MTRAIN" preprocess --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --on-error maybe
[ $rc -eq 2 ] && ok "bad --on-error" || fail "bad --on-error: rc $rc"
run noinput "$MTRAIN" preprocess --output-prefix "$tmp/x"
[ $rc -eq 2 ] && contains "$tmp/noinput.err" "--input" && ok "--input required" || fail "--input required: rc $rc"

if [ $fails -ne 0 ]; then echo "$fails checks failed"; exit 1; fi
echo "all preprocess checks passed"
