#!/usr/bin/env bash
# test/e2e/tokenizer_llama2.sh — Llama-2's vocabulary through the SentencePiece tokenizer
# (Llama2Tokenizer over data/llama2-tokenizer.model) against an independent encoder: the JS one of
# the npm package llama-tokenizer-js, run under node. scripts/fetch-llama2-tokenizer.sh data
# fetches the package and builds the .model from its baked vocabulary and merges (skip, exit 77,
# when that is impossible: no npm/node, offline). Checks:
#   - the package's own test vectors (ids written below, bos first as the package and Megatron's
#     Llama2Tokenizer give them) and "Hello world!" of its README;
#   - vocabulary 32000, eod </s> = 2, bos <s> = 1 first in every document;
#   - ids equal the package's on 2000 KJV verses and on 2400 seeded random strings (mixed
#     scripts, emoji and other characters that need byte fallback, whitespace runs, tabs,
#     newlines, digits, punctuation, piece-like text such as <s> and <0x41>).
# The package returns no ids at all for an empty string (Megatron's Llama2Tokenizer gives the
# bos), so the random strings are never empty; and it works on JS strings, so invalid UTF-8 is
# left to test/e2e/tokenizer_spm.sh, which compares it with the C++ library.
set -u
MTRAIN="${MTRAIN:-./mtrain}"
MODEL=data/llama2-tokenizer.model
REF=data/llama2-tokenizer-js/llama-tokenizer.mjs
source test/e2e_checks.sh mt_e2e_llama2
js_reference_or_skip ./scripts/fetch-llama2-tokenizer.sh "Llama-2 tokenizer files"
TOK=("$MTRAIN" tokenize --tokenizer Llama2Tokenizer --tokenizer-model "$MODEL")

# The reference: one line of ids per JSON line of the input (its "text").
cat >"$tmp/ref.mjs" <<'EOF'
import fs from 'fs';
const tok = (await import(process.argv[2])).default;
const lines = fs.readFileSync(process.argv[3], 'utf8').split('\n').filter((l) => l.length);
fs.writeFileSync(process.argv[4], lines.map((l) => tok.encode(JSON.parse(l).text).join(' ')).join('\n') + '\n');
EOF
ref() { node "$tmp/ref.mjs" "$PWD/$REF" "$@"; }

# The package's test vectors and its README's example.
node -e 'for (const s of ["grabbed", " grabbed", "           grabbed", "\n", " \n", "\ttabs\t\t\t\tout here",
  "ax\n####\nboo", "镇", "🦙", "🦙Ꙋ", "Ꙋ🦙", "Hello world!"]) console.log(JSON.stringify({text: s}))' >"$tmp/golden.jsonl"
cat >"$tmp/golden.want" <<'EOF'
1 2646 1327 287
1 29871 2646 1327 287
1 9651 2646 1327 287
1 29871 13
1 259 13
1 29871 12 21175 12 12 12 12 449 1244
1 4853 13 4136 13 833 29877
1 29871 30411
1 29871 243 162 169 156
1 29871 243 162 169 156 237 156 141
1 29871 237 156 141 243 162 169 156
1 15043 3186 29991
EOF
run golden "${TOK[@]}" --jsonl --input "$tmp/golden.jsonl"
if [ $rc -eq 0 ] && cmp -s "$tmp/golden.out" "$tmp/golden.want"; then ok "golden ids (the package's test vectors, its README)"
else fail "golden: rc $rc: $(diff "$tmp/golden.out" "$tmp/golden.want" | head -n 6) $(cat "$tmp/golden.err")"; fi
run eod bash -c "printf 'Hi\n' | ${TOK[*]@Q} --append-eod --summary"
run eod2 bash -c "printf 'Hi\n' | ${TOK[*]@Q} --append-eod"
if [ $rc -eq 0 ] && contains "$tmp/eod.out" "vocabulary 32000" && [ "$(cat "$tmp/eod2.out")" = "1 6324 2" ]; then
  ok "vocabulary 32000, bos 1 first, eod </s> 2"
else fail "vocabulary/eod: $(cat "$tmp/eod.out" "$tmp/eod2.out" "$tmp/eod2.err")"; fi
printf '1 2646 1327 287 29871 13 243 162 169 156 2\n' >"$tmp/dec.ids"
run dec "${TOK[@]}" --decode --input "$tmp/dec.ids"
[ $rc -eq 0 ] && [ "$(cat "$tmp/dec.out")" = "$(printf 'grabbed \n🦙')" ] && ok "--decode: the text back (bos, eos silent)" ||
  fail "decode: rc $rc '$(cat "$tmp/dec.out")' $(cat "$tmp/dec.err")"

# 2000 KJV verses
if [ -f data/kjv.jsonl ]; then
  node -e 'const fs = require("fs"); const out = [];
    for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n")) { if (!l) continue;
      for (const v of JSON.parse(l).text.split("\n")) if (v.trim() && out.length < 2000) out.push(JSON.stringify({text: v})); }
    fs.writeFileSync(process.argv[2], out.join("\n") + "\n");' data/kjv.jsonl "$tmp/verses.jsonl"
  run verses "${TOK[@]}" --jsonl --input "$tmp/verses.jsonl"
  ref "$tmp/verses.jsonl" "$tmp/verses.ref"
  compare_ids verses "2000 KJV verses" "the reference's"
else
  echo "note: data/kjv.jsonl missing (scripts/fetch-corpus.sh data): verse comparison not run"
fi

# 2400 random strings, never empty
cat >"$tmp/gen.js" <<'EOF'
let st = 0x2545f491 >>> 0; // xorshift32, fixed seed
const rnd = () => { st ^= st << 13; st >>>= 0; st ^= st >>> 17; st ^= st << 5; st >>>= 0; return st / 4294967296; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const ranges = [[0x41, 0x5a], [0x61, 0x7a], [0xc0, 0xff], [0x100, 0x17e], [0x391, 0x3c9], [0x410, 0x44f],
  [0x5d0, 0x5ea], [0x621, 0x64a], [0x905, 0x939], [0xe01, 0xe30], [0x3041, 0x3096], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0x2000, 0x206f], [0x1f300, 0x1f64f], [0x1d400, 0x1d44f], [0x1, 0x1f], [0xe000, 0xe0ff]];
const words = ['the', 'LORD', 'and', 'grabbed', 'Hello', 'world', 'tokenizer', 'unto', 'The', 'ing', 'tion'];
const spaces = [' ', ' ', '  ', '   ', '           ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u2581'];
const special = ['<s>', '</s>', '<unk>', '<0x41>', '▁▁'];
function piece() {
  const k = rnd();
  if (k < 0.3) return pick(words);
  if (k < 0.5) { const r = pick(ranges); let s = ''; for (let i = int(1, 6); i > 0; i--) s += String.fromCodePoint(int(r[0], r[1])); return s; }
  if (k < 0.6) { let s = ''; for (let i = int(1, 6); i > 0; i--) s += String.fromCharCode(int(0x30, 0x39)); return s; }
  if (k < 0.7) { let s = ''; for (let i = int(1, 3); i > 0; i--) s += pick("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'"); return s; }
  if (k < 0.93) return pick(spaces);
  return pick(special);
}
const out = [];
for (let i = 0; i < 2400; i++) { let s = ''; for (let n = int(1, 25); n > 0; n--) s += piece(); out.push(JSON.stringify({text: s})); }
require('fs').writeFileSync(process.argv[2], out.join('\n') + '\n');
EOF
node "$tmp/gen.js" "$tmp/rand.jsonl"
run rand "${TOK[@]}" --jsonl --input "$tmp/rand.jsonl"
ref "$tmp/rand.jsonl" "$tmp/rand.ref"
compare_ids rand "2400 random strings" "the reference's"

if [ $fails -ne 0 ]; then echo "$fails checks failed"; exit 1; fi
echo "all Llama-2 tokenizer checks passed"
