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
bundle="$jsdir/llama-tokenizer.mjs"
BUNDLE_SHA=34a7b9f7579d40486444590c37cba6564ef40c3dd98ecdfc2f7c886ae72c898d
MODEL_SHA=cdb720b183d2c2a0d6934515a824862b282fc66f09a674bb5fb6a8357a546538

sum_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$model" ] && [ -f "$bundle" ] && [ "$(sum_of "$bundle")" = "$BUNDLE_SHA" ] &&
   [ "$(sum_of "$model")" = "$MODEL_SHA" ]; then
  exit 0
fi
for tool in npm node; do
  if ! command -v $tool >/dev/null 2>&1; then
    echo "fetch-llama2-tokenizer: $tool is not installed (apt-get install nodejs npm), cannot fetch $PKG" >&2
    exit 1
  fi
done
mkdir -p "$dir"
work=$(mktemp -d "${TMPDIR:-/tmp}/mtrain-llama2tok.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && timeout 180 npm pack --silent "$PKG" >npm.out 2>npm.err); then
  echo "fetch-llama2-tokenizer: 'npm pack $PKG' failed (offline? registry unreachable?):" >&2
  tail -n 5 "$work/npm.err" >&2 || true
  exit 1
fi
tgz=$(ls "$work"/llama-tokenizer-js-*.tgz 2>/dev/null | head -n 1)
if [ -z "$tgz" ]; then
  echo "fetch-llama2-tokenizer: npm pack produced no tarball" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/llama-tokenizer.js package/LICENSE.md
got=$(sum_of "$work/package/llama-tokenizer.js")
if [ "$got" != "$BUNDLE_SHA" ]; then
  echo "fetch-llama2-tokenizer: the package module has sha256 $got, expected $BUNDLE_SHA: refusing it" >&2
  exit 1
fi
mkdir -p "$work/js"
cp "$work/package/llama-tokenizer.js" "$work/js/llama-tokenizer.mjs"
cp "$work/package/LICENSE.md" "$work/js/LICENSE.md"
if ! node "$here/llama2-tokenizer-model.js" "$work/js/llama-tokenizer.mjs" "$work/tokenizer.model" >"$work/conv.out" 2>&1; then
  echo "fetch-llama2-tokenizer: building the SentencePiece model failed:" >&2
  tail -n 5 "$work/conv.out" >&2
  exit 1
fi
got=$(sum_of "$work/tokenizer.model")
if [ "$got" != "$MODEL_SHA" ]; then
  echo "fetch-llama2-tokenizer: the rebuilt model has sha256 $got, expected $MODEL_SHA: refusing it" >&2
  exit 1
fi
rm -rf "$jsdir.tmp.$$"
cp -r "$work/js" "$jsdir.tmp.$$"
rm -rf "$jsdir"
mv -f "$jsdir.tmp.$$" "$jsdir"
cp "$work/tokenizer.model" "$model.tmp.$$"
mv -f "$model.tmp.$$" "$model"
echo "fetch-llama2-tokenizer: wrote $model and $jsdir/ ($PKG, sha256 checked)"
