#!/usr/bin/env bash
# test/e2e/tokenizer_spm.sh — the SentencePiece tokenizer (core/data/tokenizer_spm*.c) against
# the upstream C++ library: Debian's python3-sentencepiece (scripts/install-deps.sh installs it;
# without it this test fails, it does not skip). test/ref/spm_reference.py trains the models on
# the machine's text (the KJV corpus) and gives the reference ids. Checks:
#   - ids equal the library's on every document of data/kjv.jsonl, on the licence texts of
#     /usr/share/common-licenses and on 3000 seeded random strings (2400 valid: mixed scripts,
#     whitespace runs, U+2581, control characters, piece-like text such as <s> and <0x41>; 600
#     holding bytes that are not UTF-8, which the library sees as the bytes they are), for
#       bpe.model  BPE with byte fallback,
#       uni.model  unigram without byte fallback (runs of unknown characters), extra whitespace
#                  kept, user-defined pieces, a control piece,
#       sfx.model  BPE with whitespace as suffix and no dummy prefix (licences, random strings),
#       nfkc.model unigram with the default nmt_nfkc rule: its precompiled character map
#                  (licences, random strings: these include what NFKC changes: full/halfwidth
#                  forms, ligatures, super/subscripts, letters with combining marks, jamo);
#   - Megatron's classes: SentencePieceTokenizer (its special tokens cut out of the text, vocab
#     and eod as its tokenizer.py computes them) and Llama2Tokenizer (bos first) on the random
#     strings; GPTSentencePieceTokenizer is the plain ids above;
#   - --decode gives the library's decode of the same ids;
#   - malformed model files (truncated, not a protobuf, a length past the end) are refused
#     naming the file;
#   - preprocess with --tokenizer-type Llama2Tokenizer --append-eod writes exactly bos, the ids,
#     eos per document (compared id by id with the .bin), and a run with Megatron's tokenizer
#     flags takes its vocabulary size from the model and trains (mtrain check names a model it
#     cannot read, and why).
set -u
MTRAIN="${MTRAIN:-./mtrain}"
if [ ! -x "$MTRAIN" ]; then echo "skip: $MTRAIN not built"; exit 77; fi
source test/e2e_checks.sh mt_e2e_spm
PY=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sentencepiece' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "FAIL: python3-sentencepiece is missing (neither /usr/bin/python3 nor python3 imports sentencepiece): install Debian's python3-sentencepiece (scripts/install-deps.sh)"
  exit 1
fi
REF=test/ref/spm_reference.py
if [ ! -f data/kjv.jsonl ]; then echo "FAIL: data/kjv.jsonl missing (scripts/fetch-corpus.sh data)"; exit 1; fi

# Training text: the KJV corpus, one line a sentence.
"$PY" -c 'import json, sys
with open(sys.argv[2], "w") as o:
    for l in open(sys.argv[1]):
        for x in json.loads(l)["text"].split("\n"):
            if x.strip(): o.write(x + "\n")' data/kjv.jsonl "$tmp/corpus.txt"
t0=$(date +%s)
if ! "$PY" "$REF" train "$tmp" "$tmp/corpus.txt" >"$tmp/train.log" 2>&1; then
  echo "FAIL: training the reference models failed: $(tail -n 5 "$tmp/train.log")"; exit 1
fi
"$PY" "$REF" gen "$tmp"
echo "trained bpe, uni, sfx, nfkc models in $(( $(date +%s) - t0 )) s"
lic=$(ls /usr/share/common-licenses/* 2>/dev/null | while read -r f; do [ -f "$f" ] && echo "$f"; done)
# shellcheck disable=SC2086
"$PY" -c 'import json, sys
for f in sys.argv[1:]:
    print(json.dumps({"text": open(f, encoding="utf-8", errors="replace").read()}))' $lic >"$tmp/lic.jsonl"

# check MODEL CLASS MODE INPUT WHAT: mtrain's ids of INPUT with Megatron's CLASS against the library's
check() {
  local name=$1_$2_$(basename "$4" | tr . _) tok mode_flag=""
  case $2 in gpt) tok=GPTSentencePieceTokenizer ;; spm) tok=SentencePieceTokenizer ;; llama2) tok=Llama2Tokenizer ;; esac
  [ "$3" = jsonl ] && mode_flag=--jsonl
  run "$name" "$MTRAIN" tokenize --tokenizer "$tok" --tokenizer-model "$tmp/$1.model" $mode_flag --input "$4"
  "$PY" "$REF" encode "$tmp/$1.model" "$2" "$3" "$4" "$tmp/$name.ref"
  compare_ids "$name" "$5" "the library's"
}

for m in bpe uni; do
  check $m gpt jsonl data/kjv.jsonl "$m: KJV (data/kjv.jsonl)"
done
for m in bpe uni sfx nfkc; do
  check $m gpt jsonl "$tmp/lic.jsonl" "$m: licence texts ($(echo "$lic" | wc -l) files)"
  check $m gpt jsonl "$tmp/rand.jsonl" "$m: 2400 random strings"
  check $m gpt lines "$tmp/bad.txt" "$m: 600 random strings with bytes that are not UTF-8"
done
for m in bpe uni; do
  check $m spm jsonl "$tmp/rand.jsonl" "$m: SentencePieceTokenizer (special tokens cut out) on the random strings"
  check $m llama2 jsonl "$tmp/rand.jsonl" "$m: Llama2Tokenizer (bos first) on the random strings"
done

# Megatron's sizes and end-of-document ids
summary() { # MODEL TOKENIZER -> "vocabulary N" and the eod id of an empty line
  printf 'x\n' | "$MTRAIN" tokenize --tokenizer "$2" --tokenizer-model "$tmp/$1.model" --append-eod --summary | sed -n 's/.*\(vocabulary [0-9]*\).*/\1/p'
  printf 'x\n' | "$MTRAIN" tokenize --tokenizer "$2" --tokenizer-model "$tmp/$1.model" --append-eod | awk '{ print "eod " $NF }'
}
for m in bpe uni; do
  read -r n bos eos pad n_spm eod_spm < <("$PY" "$REF" info "$tmp/$m.model")
  got=$(summary $m SentencePieceTokenizer | tr '\n' ' ')
  [ "$got" = "vocabulary $n_spm eod $eod_spm " ] && ok "$m: SentencePieceTokenizer: $got(Megatron's)" ||
    fail "$m: SentencePieceTokenizer: got '$got', Megatron's: vocabulary $n_spm eod $eod_spm"
  for t in GPTSentencePieceTokenizer Llama2Tokenizer; do
    got=$(summary $m $t | tr '\n' ' ')
    [ "$got" = "vocabulary $n eod $eos " ] && ok "$m: $t: $got(Megatron's)" || fail "$m: $t: got '$got', want vocabulary $n eod $eos"
  done
done

# --decode against the library's decode, on KJV verses
head -n 400 "$tmp/corpus.txt" >"$tmp/verses.txt"
for m in bpe uni; do
  run dec_ids_$m "$MTRAIN" tokenize --tokenizer-model "$tmp/$m.model" --input "$tmp/verses.txt"
  run dec_$m "$MTRAIN" tokenize --tokenizer-model "$tmp/$m.model" --decode --input "$tmp/dec_ids_$m.out"
  "$PY" "$REF" decode "$tmp/$m.model" "$tmp/dec_ids_$m.out" "$tmp/dec_$m.ref"
  compare_ids dec_$m "$m: --decode of 400 verses" "the library's"
done

# refusals: malformed files
head -c 3000 "$tmp/bpe.model" >"$tmp/cut.model"
printf 'this is not a model\n' >"$tmp/text.model"
printf '\x0a\xff\xff\xff\x0f\x0a\x01a' >"$tmp/long.model"
for f in cut:truncated text:"not a SentencePiece model" long:"runs past the end"; do
  run bad_${f%%:*} "$MTRAIN" tokenize --tokenizer-model "$tmp/${f%%:*}.model" --input "$tmp/verses.txt"
  [ $rc -ne 0 ] && contains "$tmp/bad_${f%%:*}.err" "$tmp/${f%%:*}.model" && contains "$tmp/bad_${f%%:*}.err" "${f#*:}" &&
    ok "${f%%:*}.model refused: $(head -c 200 "$tmp/bad_${f%%:*}.err")" || fail "${f%%:*}.model: rc $rc $(cat "$tmp/bad_${f%%:*}.err")"
done

# preprocess (Llama2Tokenizer, --append-eod): the .bin holds bos, the ids, eos per document
head -n 40 data/kjv.jsonl >"$tmp/kjv40.jsonl"
run pre "$MTRAIN" preprocess --input "$tmp/kjv40.jsonl" --output-prefix "$tmp/l2" --tokenizer-type Llama2Tokenizer \
  --tokenizer-model "$tmp/bpe.model" --append-eod --workers 2
"$PY" "$REF" bin "$tmp/bpe.model" "$tmp/kjv40.jsonl" "$tmp/bin.ref"
od -An -v -tu2 -w2 "$tmp/l2_text_document.bin" 2>/dev/null | tr -d ' ' >"$tmp/bin.out"
compare_ids bin "preprocess --tokenizer-type Llama2Tokenizer --append-eod: the .bin of 40 KJV books" "the library's"

# training with Megatron's tokenizer flags: the vocabulary comes from the model (1000 pieces)
TRAIN=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 2 --train-iters 3 --lr 1e-3 --split 100,0,0 --eval-iters 0
       --data-path "$tmp/l2_text_document" --tokenizer-type Llama2Tokenizer
       --tokenizer-model "$tmp/bpe.model" --data-cache-path "$tmp/cache" --metrics "$tmp/train.jsonl")
run chk "$MTRAIN" check "${TRAIN[@]}"
[ $rc -eq 0 ] && grep -q "^  vocab: 1000" "$tmp/chk.out" && grep -q "^  tokenizer: llama2" "$tmp/chk.out" &&
  ok "mtrain check: --tokenizer-type Llama2Tokenizer -> data.tokenizer llama2, model.vocab 1000 from the model" ||
  fail "mtrain check: rc $rc $(grep -E 'vocab|tokenizer' "$tmp/chk.out" | head -n 4) $(head -c 400 "$tmp/chk.err")"
# an untrained model's loss is about ln(vocabulary) = ln(1000) = 6.91 (init noise: +-0.3)
run chk_cut "$MTRAIN" check "${TRAIN[@]/bpe.model/cut.model}"
[ $rc -ne 0 ] && contains "$tmp/chk_cut.err" "data.vocab (the vocabulary size comes from it): $tmp/cut.model: byte" &&
  ok "mtrain check names an unreadable --tokenizer-model and why" || fail "check with cut.model: rc $rc $(head -c 400 "$tmp/chk_cut.err")"
run train "$MTRAIN" "${TRAIN[@]}"
loss1=$(sed -n '1s/.*"lm_loss":\([0-9.]*\).*/\1/p' "$tmp/train.jsonl" 2>/dev/null)
[ $rc -eq 0 ] && [ "$(grep -c lm_loss "$tmp/train.jsonl" 2>/dev/null)" -ge 3 ] &&
  awk -v l="${loss1:-0}" 'BEGIN { exit !(l > 6.6 && l < 7.2) }' &&
  ok "trained 3 iterations on the preprocessed data, first loss $loss1 ~ ln(1000)" ||
  fail "training: rc $rc, first loss '${loss1:-}' $(tail -n 5 "$tmp/train.err" "$tmp/train.out")"

total=$(awk '{ n += $2 } END { print n + 0 }' "$tmp/counts" 2>/dev/null)
bad=$(awk '{ n += $3 } END { print n + 0 }' "$tmp/counts" 2>/dev/null)
echo "compared with python3-sentencepiece: $total ids, $bad differing lines"
if [ $fails -ne 0 ]; then echo "$fails checks failed"; exit 1; fi
echo "all SentencePiece tokenizer checks passed"
