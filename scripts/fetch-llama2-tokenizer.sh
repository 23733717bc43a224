#!/usr/bin/env bash
# scripts/fetch-llama2-tokenizer.sh [DIR] — Llama-2's tokenizer for tests and demos, from the npm
# package llama-tokenizer-js 1.2.2 (`npm pack`, no install; nothing else is downloaded):
#   DIR/llama2-tokenizer.model     a SentencePiece model (32,000 pieces, BPE, byte fallback, the
#                                  identity normaliser) rebuilt from the package's baked
#                                  vocabulary and merges by scripts/llama2-tokenizer-model.js
#                                  (which says where each field comes from)
#   DIR/llama2-tokenizer-js/       the package's ES module (its encoder + data, MIT licence
#                                  beside it): the independent reference the tests compare
#                                  mtrain's ids with (needs node)
# The module is checked against BUNDLE_SHA and the written model against MODEL_SHA.
# Idempotent: returns at once when both are present with the right sums. Files are written
# under temporary names and renamed, so an interrupted run leaves nothing half-made.
# Exit 0 = files in place; 1 = could not fetch (message says why: no npm/node, offline, bad sum).
set -euo pipefail
dir="${1:-data}"
here=$(cd "$(dirname "$0")" && pwd)
PKG=llama-tokenizer-js@1.2.2
model="$dir/llama2-tokenizer.model"
jsdir="$dir/llama2-tokenizer-js"
BUNDLE_SHA=34a7b9f7579d40486444590c37cba6564ef40c3dd98ecdfc2f7c886ae72c898d
MODEL_SHA=cdb720b183d2c2a0d6934515a824862b282fc66f09a674bb5fb6a8357a546538

NAME=fetch-llama2-tokenizer
source "$here/npm-fetch-lib.sh"

fetch_tokenizer_package "$PKG" package/llama-tokenizer.js "$BUNDLE_SHA" "$jsdir" llama-tokenizer.mjs \
  "$here/llama2-tokenizer-model.js" "$model" "$MODEL_SHA" "SentencePiece model"
