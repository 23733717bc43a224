#!/usr/bin/env bash
# scripts/fetch-llama3-tokenizer.sh [DIR] — Llama-3's tokenizer for tests and demos, from the npm
# package llama3-tokenizer-js 1.2.0 (`npm pack`, no install; nothing else is downloaded):
#   DIR/llama3-tokenizer.json      a Hugging Face tokenizer.json (128,000 tokens, 280,147 merges,
#                                  256 added tokens: 128,256 ids) rebuilt from the package's baked
#                                  data by scripts/llama3-tokenizer-json.js (which says where each
#                                  field comes from)
#   DIR/llama3-tokenizer-js/       the package's CommonJS bundle (its encoder + data, MIT
#                                  licence beside it): the independent reference the tests
#                                  compare mtrain's ids with (needs node)
# The bundle is checked against BUNDLE_SHA and the written JSON against JSON_SHA.
# Idempotent: returns at once when both are present with the right sums. Files are written
# under temporary names and renamed, so an interrupted run leaves nothing half-made.
# Exit 0 = files in place; 1 = could not fetch (message says why: no npm/node, offline, bad sum).
set -euo pipefail
dir="${1:-data}"
here=$(cd "$(dirname "$0")" && pwd)
PKG=llama3-tokenizer-js@1.2.0
json="$dir/llama3-tokenizer.json"
jsdir="$dir/llama3-tokenizer-js"
BUNDLE_SHA=fce6d5f65f0fb800529343923af930c09c2c83ef0fb0e6c4a770d044c5726439
JSON_SHA=0214bf2f58b422d55655ccd97bcd71d2983e2a9611f71c971e5c78732f825f58

NAME=fetch-llama3-tokenizer
source "$here/npm-fetch-lib.sh"

fetch_tokenizer_package "$PKG" package/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs "$BUNDLE_SHA" "$jsdir" \
  llama3-tokenizer.cjs "$here/llama3-tokenizer-json.js" "$json" "$JSON_SHA" tokenizer.json
