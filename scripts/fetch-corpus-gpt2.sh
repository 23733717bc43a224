#!/usr/bin/env bash
# scripts/fetch-corpus-gpt2.sh DIR — the data the GPT-2-vocabulary recipes (configs/gpt125m.yaml
# and up: data.path DIR/corpus_text_document, tokenizer gpt2bpe) train on as shipped: the King
# James Bible corpus of scripts/fetch-corpus.sh (DIR/kjv.jsonl) preprocessed with GPT-2's BPE
# (DIR/gpt2-vocab.json, DIR/gpt2-merges.txt from scripts/fetch-gpt2-tokenizer.sh) and an eod
# token after each document into DIR/corpus_text_document.{bin,idx} (1189 documents, ~1.06M
# tokens; ~0.2 s).
# Idempotent and fast when done (both outputs present: returns at once); preprocess writes
# *.tmp names and renames both files only on success, so an interrupted run leaves nothing
# half-made. Needs ./mtrain (or $MTRAIN) built first.
# Exit 0 = data in place; 1 = could not make it (the message says why: no corpus, no npm, ...).
set -euo pipefail
dir="${1:-data}"
mtrain="${MTRAIN:-./mtrain}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$dir/corpus_text_document"

if [ -s "$out.idx" ] && [ -s "$out.bin" ]; then
  exit 0
fi
MTRAIN="$mtrain" "$here/fetch-corpus.sh" "$dir"
"$here/fetch-gpt2-tokenizer.sh" "$dir"
rm -f "$out.bin.tmp" "$out.idx.tmp"
"$mtrain" preprocess --input "$dir/kjv.jsonl" --output-prefix "$dir/corpus" --vocab "$dir/gpt2-vocab.json" \
  --merges "$dir/gpt2-merges.txt" --append-eod --quiet
