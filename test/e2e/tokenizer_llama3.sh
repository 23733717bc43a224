#!/usr/bin/env bash
# test/e2e/tokenizer_llama3.sh — Llama-3's tokenizer (tokenizer.json, detected inside "hf")
# against an independent encoder: the JS one of the npm package llama3-tokenizer-js, run under
# node. scripts/fetch-llama3-tokenizer.sh data fetches both when missing (skip, exit 77, when
# that is impossible: no npm/node, offline). Checks:
#   - the package's own test vectors (ids written below) and decode back to the text;
#   - vocabulary 128256, eod <|end_of_text|> 128001 (--append-eod), added tokens split out;
#   - ids equal the reference's on every document of data/kjv.jsonl, on the licence texts of
#     /usr/share/common-licenses (each file one document), and on 3000 seeded random strings
#     (mixed scripts, digits, punctuation, whitespace runs with \r\n, contractions in any case,
#     special tokens, invalid UTF-8);
#   - invalid UTF-8: the reference works on JS strings, where each maximal ill-formed
#     subsequence has become U+FFFD, so the comparable thing is mtrain's ids on that same
#     U+FFFD text; mtrain's own ids of the raw bytes must round-trip exactly (--check-roundtrip);
#   - a 10 KB and a 1 MB run of letters without spaces encode fast (and the 10 KB one as the
#     reference does); encode speed on the KJV corpus against GPT-2's tokenizer (printed);
#   - a tokenizer.json with any other Split pattern is refused, naming the pattern.
# Random strings avoid the characters where the reference's JS regex is not Llama-3's: U+0085
# and U+FEFF (JS \s differs from Unicode White_Space), U+017F after an apostrophe (JS has no
# case folding there), and code points newer than Unicode 15.0 (our tables).
set -u
MTRAIN="${MTRAIN:-./mtrain}"
JSON=data/llama3-tokenizer.json
REF=data/llama3-tokenizer-js/llama3-tokenizer.cjs
source test/e2e_checks.sh mt_e2e_llama3
js_reference_or_skip ./scripts/fetch-llama3-tokenizer.sh "Llama-3 tokenizer files"
TOK=("$MTRAIN" tokenize --tokenizer-json "$JSON")

# The reference: one line of ids per input line (lines: split at \n bytes, each decoded as a
# browser does, invalid sequences -> U+FFFD; jsonl: the "text" of each JSON line). One node process
# takes every (MODE, INPUT, OUTPUT) triple, so its tokenizer module (seconds to load) loads once.
cat >"$tmp/ref.js" <<'EOF'
const fs = require('fs');
const tok = require(process.argv[2]).llama3Tokenizer;
const dec = new TextDecoder('utf-8');
for (let a = 3; a + 2 < process.argv.length; a += 3) {
  const mode = process.argv[a], buf = fs.readFileSync(process.argv[a + 1]), out = [];
  let start = 0;
  const one = (b) => {
    let s = dec.decode(b);
    if (mode === 'jsonl') s = JSON.parse(s).text;
    out.push(tok.encode(s, {bos: false, eos: false}).join(' '));
  };
  for (let i = 0; i < buf.length; i++) if (buf[i] === 10) { one(buf.subarray(start, i)); start = i + 1; }
  if (start < buf.length) one(buf.subarray(start));
  fs.writeFileSync(process.argv[a + 2], out.length ? out.join('\n') + '\n' : '');
}
EOF
ref() { node "$tmp/ref.js" "$PWD/$REF" "$@"; }
# compare NAME WHAT: $tmp/NAME.out (mtrain) against $tmp/NAME.ref, counting ids and lines
compare() {
  local n_ids n_lines n_bad
  n_ids=$(wc -w <"$tmp/$1.ref"); n_lines=$(wc -l <"$tmp/$1.ref")
  n_bad=$(paste -d '\n' "$tmp/$1.out" "$tmp/$1.ref" | awk 'NR % 2 { a = $0; next } a != $0 { n++ } END { print n + 0 }')
  if [ "$(wc -l <"$tmp/$1.out")" = "$n_lines" ] && [ "$n_bad" = 0 ] && cmp -s "$tmp/$1.out" "$tmp/$1.ref"; then
    ok "$2: $n_ids ids in $n_lines lines equal the reference's"
  else
    fail "$2: $n_bad of $n_lines lines differ from the reference (rc $rc, $(head -c 300 "$tmp/$1.err"))"
    paste -d '\n' "$tmp/$1.out" "$tmp/$1.ref" | awk 'NR % 2 { a = $0; next } a != $0 { print "  line " NR/2 ": mtrain " substr(a, 1, 150); print "  line " NR/2 ": ref    " substr($0, 1, 150); if (++n == 3) exit }'
  fi
  echo "$1 $n_ids $n_bad" >>"$tmp/counts"
}
# Every input of the comparisons is made first; then the reference encodes them all in the
# background (one node process, then the other-pattern file below) while this shell runs the golden
# checks and mtrain's encodes (2 processes at once); the comparisons follow once both are done, in
# the order of the checks. The timed runs (1 MB run, speed) come after that and run alone.
refs=()
# The KJV corpus, every document.
if [ -f data/kjv.jsonl ]; then refs+=(jsonl data/kjv.jsonl "$tmp/kjv.ref"); fi
# The licence texts, each file one document.
lic=$(ls /usr/share/common-licenses/* 2>/dev/null | while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ -n "$lic" ]; then
  # shellcheck disable=SC2086
  node -e 'const fs = require("fs"); for (const f of process.argv.slice(1))
    process.stdout.write(JSON.stringify({text: fs.readFileSync(f, "utf8")}) + "\n");' $lic >"$tmp/lic.jsonl"
  refs+=(jsonl "$tmp/lic.jsonl" "$tmp/lic.ref")
fi
# 3000 random strings from a seeded generator: 2400 valid (JSON lines, so \n can be inside),
# 600 with invalid UTF-8 (raw lines; no \n byte inside).
cat >"$tmp/gen.js" <<'EOF'
const fs = require('fs');
let st = 0x9e3779b9 >>> 0; // xorshift32, fixed seed
const rnd = () => { st ^= st << 13; st >>>= 0; st ^= st >>> 17; st ^= st << 5; st >>>= 0; return st / 4294967296; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const cp = (lo, hi) => String.fromCodePoint(int(lo, hi));
const ranges = [ // [first, last] of blocks stable since long before Unicode 15.0
  [0x41, 0x5a], [0x61, 0x7a], [0xc0, 0xff], [0x100, 0x17e], [0x391, 0x3c9], [0x410, 0x44f],
  [0x5d0, 0x5ea], [0x621, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x93e, 0x94d], [0x966, 0x96f],
  [0xe01, 0xe30], [0x300, 0x36f], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0x2160, 0x2188], [0xb2, 0xb3], [0xbc, 0xbe], [0xff10, 0xff19],
  [0x2000, 0x206f], [0x20a0, 0x20bf], [0x2190, 0x21ff], [0x1f600, 0x1f64f], [0x1f300, 0x1f5ff],
  [0x1d400, 0x1d44f], [0x1d7ce, 0x1d7ff], [0x10400, 0x1044f], [0x1, 0x8], [0x1c, 0x1f],
  [0xe000, 0xe0ff], [0xfffd, 0xfffd], [0x200b, 0x200d]];
const punct = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'";
const spaces = [' ', ' ', ' ', '\t', '\n', '\r\n', '\r', '\n\n', '\u00a0', '\u3000', '\u2003', '\v', '\f', '\u2028', '\u202f'];
const contr = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D"];
const special = ['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|reserved_special_token_247|>',
  '<|reserved_special_token_248|>', '<|end_of_text', '<|python_tag|>'];
function word() {
  const n = int(1, 12); let s = '';
  const r = pick(ranges);
  for (let i = 0; i < n; i++) { const q = rnd() < 0.7 ? r : pick(ranges); s += cp(q[0], q[1]); }
  return s;
}
function piece() {
  const k = rnd();
  if (k < 0.25) { let w = ''; const n = int(1, 10); for (let i = 0; i < n; i++) w += cp(0x61, 0x7a); return rnd() < 0.3 ? w.toUpperCase() : w; }
  if (k < 0.40) return word();
  if (k < 0.50) { let d = ''; const n = int(1, 9); for (let i = 0; i < n; i++) d += cp(0x30, 0x39); return d; }
  if (k < 0.62) { let p = ''; const n = int(1, 4); for (let i = 0; i < n; i++) p += pick(punct); return p; }
  if (k < 0.82) { let w = ''; const n = int(1, 4); for (let i = 0; i < n; i++) w += pick(spaces); return w; }
  if (k < 0.94) return pick(contr);
  if (k < 0.97) return pick(special);
  return pick(['\u017f', 'K', '\u212a', 'ß', 'İ', 'ǅ', '¹²³', '٣٤٥']);
}
function str() { let s = ''; const n = int(1, 30); for (let i = 0; i < n; i++) s += piece(); return s; }
const good = [];
for (let i = 0; i < 2400; i++) {
  let s = str();
  s = s.replace(/'\u017f/g, "'s"); // the reference has no case folding for U+017F
  good.push(JSON.stringify({text: s}));
}
fs.writeFileSync(process.argv[2] + '/rand.jsonl', good.join('\n') + '\n');
const bad = [], fixed = [];
const invalid = [[0x80], [0xbf], [0xc0, 0xaf], [0xc1], [0xc3], [0xe2, 0x82], [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xff], [0xfe, 0xff],
  [0xf0, 0x80], [0xe1, 0x41]];
const dec = new TextDecoder('utf-8');
for (let i = 0; i < 600; i++) {
  const parts = [];
  const n = int(1, 12);
  for (let k = 0; k < n; k++) {
    if (rnd() < 0.4) parts.push(Buffer.from(pick(invalid)));
    else parts.push(Buffer.from(str().replace(/[\n\u0085\ufeff]/g, ' ').replace(/'\u017f/g, "'s"), 'utf8'));
  }
  const b = Buffer.concat(parts);
  bad.push(b);
  fixed.push(Buffer.from(dec.decode(b), 'utf8'));
}
const lines = (a) => Buffer.concat(a.flatMap((b) => [b, Buffer.from('\n')]));
fs.writeFileSync(process.argv[2] + '/bad.txt', lines(bad));
fs.writeFileSync(process.argv[2] + '/bad_fixed.txt', lines(fixed));
EOF
node "$tmp/gen.js" "$tmp"
refs+=(jsonl "$tmp/rand.jsonl" "$tmp/rand.ref" lines "$tmp/bad.txt" "$tmp/bad.ref")
# Long runs of letters without spaces: one pre-token each; the merge loop must not be quadratic.
node -e 'let s = 0x12345678; const r = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
  let a = ""; for (let i = 0; i < 10240; i++) a += String.fromCharCode(97 + r() % 26); console.log(a);' >"$tmp/long10k.txt"
refs+=(lines "$tmp/long10k.txt" "$tmp/long.ref")
# the reference's side, in the background; then the file of the last check (a Split pattern that is
# neither GPT-2's nor Llama-3's)
( ref "${refs[@]}"; echo $? >"$tmp/ref.rc"
  node -e 'const fs = require("fs"); const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    d.pre_tokenizer.pretokenizers[0].pattern.Regex = "\\p{L}+|\\s+";
    fs.writeFileSync(process.argv[2], JSON.stringify(d));' "$JSON" "$tmp/other.json" ) >"$tmp/ref.log" 2>&1 &
ref_pid=$!

# The package's own test vectors (its runTests), ids as it lists them.
printf '%s\n' "grabbed" " grabbed" "           grabbed" " " "	tabs				out here" \
  "镇" "🦙" "🦙Ꙋ" "Ꙋ🦙" "I'm" "a<|end_of_text|>b" >"$tmp/golden.txt"
cat >"$tmp/golden.want" <<'EOF'
59312 2788
30418
1881 30418
220
3324 3518 573 14294 1618
104643
9468 99 247
9468 99 247 166 247 232
166 247 232 9468 99 247
40 2846
64 128001 65
EOF
run golden "${TOK[@]}" --input "$tmp/golden.txt"
if [ $rc -eq 0 ] && cmp -s "$tmp/golden.out" "$tmp/golden.want"; then ok "golden ids (the package's test vectors)"
else fail "golden: rc $rc: $(diff "$tmp/golden.out" "$tmp/golden.want" | head -n 6) $(cat "$tmp/golden.err")"; fi
run decode "${TOK[@]}" --decode --input "$tmp/golden.want"
if [ $rc -eq 0 ] && cmp -s "$tmp/decode.out" "$tmp/golden.txt"; then ok "--decode gives the text back"
else fail "decode: rc $rc $(cat "$tmp/decode.err")"; fi
run eod bash -c "printf 'Hi\n' | ${TOK[*]@Q} --append-eod --summary"
if [ $rc -eq 0 ] && contains "$tmp/eod.out" "vocabulary 128256"; then ok "vocabulary 128256"
else fail "vocabulary: $(cat "$tmp/eod.out" "$tmp/eod.err")"; fi
run eod2 bash -c "printf 'Hi\n' | ${TOK[*]@Q} --append-eod"
[ $rc -eq 0 ] && [ "$(cat "$tmp/eod2.out")" = "13347 128001" ] && ok "eod <|end_of_text|> 128001" ||
  fail "eod: $(cat "$tmp/eod2.out" "$tmp/eod2.err")"
printf '{"text": "ax\\n####\\nboo"}\n' >"$tmp/golden.jsonl"
run gj "${TOK[@]}" --jsonl --input "$tmp/golden.jsonl"
[ $rc -eq 0 ] && [ "$(cat "$tmp/gj.out")" = "710 198 71050 34093" ] && ok "golden: \"ax\\n####\\nboo\" (####\\n is one pre-token)" ||
  fail "golden jsonl: $(cat "$tmp/gj.out" "$tmp/gj.err")"
# `data.tokenizer: hf` spelled out, as a recipe has it
run hf "$MTRAIN" tokenize --tokenizer hf --tokenizer-json "$JSON" --input "$tmp/golden.txt"
[ $rc -eq 0 ] && cmp -s "$tmp/hf.out" "$tmp/golden.want" && ok "--tokenizer hf" || fail "--tokenizer hf: $(cat "$tmp/hf.err")"

# mtrain's side of the comparisons (each run's exit status kept for its check below)
if [ -f data/kjv.jsonl ]; then
  run kjv "${TOK[@]}" --jsonl --input data/kjv.jsonl; rc_kjv=$rc
  run kjvrt "${TOK[@]}" --jsonl --input data/kjv.jsonl --check-roundtrip; rc_kjvrt=$rc
fi
if [ -n "$lic" ]; then run lic "${TOK[@]}" --jsonl --input "$tmp/lic.jsonl"; rc_lic=$rc; fi
run rand "${TOK[@]}" --jsonl --input "$tmp/rand.jsonl"; rc_rand=$rc
run bad "${TOK[@]}" --input "$tmp/bad_fixed.txt"; rc_bad=$rc
run badrt "${TOK[@]}" --input "$tmp/bad.txt" --check-roundtrip; rc_badrt=$rc
run long "${TOK[@]}" --input "$tmp/long10k.txt"; rc_long=$rc
wait "$ref_pid"
[ "$(cat "$tmp/ref.rc" 2>/dev/null)" = 0 ] || fail "the reference encoder failed: $(head -c 300 "$tmp/ref.log")"

# The KJV corpus, every document.
if [ -f data/kjv.jsonl ]; then
  rc=$rc_kjv; compare kjv "KJV (data/kjv.jsonl)"
  rc=$rc_kjvrt
  [ $rc -eq 0 ] && contains "$tmp/kjvrt.out" "0 of 1189 lines differ" && ok "KJV round trip" ||
    fail "KJV round trip: $(cat "$tmp/kjvrt.out" "$tmp/kjvrt.err")"
else
  echo "note: data/kjv.jsonl missing (scripts/fetch-corpus.sh data): corpus comparison not run"
fi

# The licence texts, each file one document.
if [ -n "$lic" ]; then
  rc=$rc_lic; compare lic "licence texts ($(echo "$lic" | wc -l) files of /usr/share/common-licenses)"
else
  echo "note: /usr/share/common-licenses is empty: licence comparison not run"
fi

# The 3000 random strings.
rc=$rc_rand; compare rand "2400 random valid strings"
rc=$rc_bad; compare bad "600 random strings with invalid UTF-8 (as U+FFFD, what both see)"
rc=$rc_badrt
[ $rc -eq 0 ] && contains "$tmp/badrt.out" "0 of 600 lines differ" && ok "invalid UTF-8 raw bytes round-trip" ||
  fail "invalid UTF-8 round trip: $(cat "$tmp/badrt.out" "$tmp/badrt.err")"

# Long runs of letters: the 10 KB one as the reference encodes it; the 1 MB one fast (alone, timed).
rc=$rc_long; compare long "10 KB run of letters"
awk '{ for (i = 0; i < 100; i++) printf "%s", $0; printf "\n" }' "$tmp/long10k.txt" >"$tmp/long1m.txt"
t0=$(date +%s.%N)
run long1m "${TOK[@]}" --input "$tmp/long1m.txt" --summary
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
if [ $rc -eq 0 ] && awk -v d="$dt" 'BEGIN { exit !(d < 10) }'; then ok "1 MB run of letters in ${dt} s: $(cat "$tmp/long1m.out")"
else fail "1 MB run of letters: rc $rc, ${dt} s $(cat "$tmp/long1m.err")"; fi

# Speed on the KJV corpus against GPT-2's tokenizer, in the same run.
if [ -f data/kjv.jsonl ] && ./scripts/fetch-gpt2-tokenizer.sh data >/dev/null 2>&1; then
  run sl "${TOK[@]}" --jsonl --input data/kjv.jsonl --summary
  run sg "$MTRAIN" tokenize --vocab data/gpt2-vocab.json --merges data/gpt2-merges.txt --jsonl --input data/kjv.jsonl --summary
  ml=$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' "$tmp/sl.out"); mg=$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' "$tmp/sg.out")
  echo "speed: KJV: llama3 ${ml:-?} MB/s, gpt2 ${mg:-?} MB/s (one thread)"
  if [ -n "$ml" ] && [ -n "$mg" ] && awk -v l="$ml" -v g="$mg" 'BEGIN { exit !(l * 4 >= g) }'; then ok "llama3 speed within 4x of gpt2"
  else fail "llama3 encode speed ${ml:-?} MB/s against gpt2 ${mg:-?} MB/s"; fi
fi

# A Split pattern that is neither GPT-2's nor Llama-3's is refused, naming it.
run other "$MTRAIN" tokenize --tokenizer-json "$tmp/other.json" --input "$tmp/golden.txt"
[ $rc -ne 0 ] && contains "$tmp/other.err" "$tmp/other.json" && contains "$tmp/other.err" '\p{L}+|\s+' &&
  contains "$tmp/other.err" "neither GPT-2's nor Llama-3's" && ok "other pattern refused: $(head -c 200 "$tmp/other.err")" ||
  fail "other pattern: rc $rc $(cat "$tmp/other.err")"

total=$(awk '{ n += $2 } END { print n + 0 }' "$tmp/counts" 2>/dev/null)
bad=$(awk '{ n += $3 } END { print n + 0 }' "$tmp/counts" 2>/dev/null)
echo "compared with the reference: $total ids, $bad differing lines"
if [ $fails -ne 0 ]; then echo "$fails checks failed"; exit 1; fi
echo "all Llama-3 tokenizer checks passed"
