#!/usr/bin/env node
// scripts/llama3-tokenizer-json.js BUNDLE OUT — writes a Hugging Face tokenizer.json for
// Llama-3 rebuilt from the data baked into the npm package llama3-tokenizer-js (BUNDLE is its
// bundle/commonjs-llama3-tokenizer-with-baked-data.cjs); run by scripts/fetch-llama3-tokenizer.sh.
// Where each field comes from:
//   model.vocab    the package's `llama_vocab_base64` string: base64 of the 128,000 token
//                  strings (byte-level, GPT-2 byte->unicode mapped) joined by "\n"; the row
//                  number is the id (the package's src/data-conversion.py wrote them in the order
//                  of Meta's tokenizer.json model.vocab, whose values are 0..127999 in order).
//                  Decoded here, by this script, from the string literal (the bundle is not run
//                  for this).
//   model.merges   the package's `llama_merges_binary` string: base64 of a big-endian bit
//                  stream of 17-bit vocabulary row numbers, two per merge, in rank order
//                  (280,147 merges; the last byte is padding). Unpacked here.
//   added_tokens   ids 128000..128255: the package's special-token list, as its encoder holds
//                  it (vocabById[128000..]): <|begin_of_text|>, <|end_of_text|>, ... and
//                  <|reserved_special_token_N|>; all special, matched before pre-tokenization.
//   pre_tokenizer  Llama-3's: Split on the regex below (Isolated) then ByteLevel without its
//                  own regex. The regex string is the one the package's encoder carries
//                  (DIRTY_LLAMA3_REGEX_STRING), checked to be present in BUNDLE.
//   model.ignore_merges, decoder, post_processor  as in Meta's Llama-3 tokenizer.json (a word
//                  that is a token is taken whole; ByteLevel decoder; <|begin_of_text|> prepended
//                  by the TemplateProcessing post-processor, which mtrain does not apply).
// Afterwards the result is cross-checked against the package's own decoded tables (it loads
// BUNDLE once): same vocabulary row for row, same merges with the same ranks.
'use strict';
const fs = require('fs');

const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const N_VOCAB = 128000, N_MERGES = 280147, N_SPECIAL = 256;

function die(msg) {
  process.stderr.write('llama3-tokenizer-json: ' + msg + '\n');
  process.exit(1);
}

if (process.argv.length !== 4) die('usage: llama3-tokenizer-json.js BUNDLE.cjs OUT.json');
const [bundlePath, outPath] = process.argv.slice(2);
const src = fs.readFileSync(bundlePath, 'utf8');

function literal(name) {
  const m = src.match(new RegExp('^const ' + name + ' = "([A-Za-z0-9+/=]*)"', 'm'));
  if (!m) die(bundlePath + ': no string literal ' + name + ' (another package version?)');
  return Buffer.from(m[1], 'base64');
}

// vocabulary: rows of UTF-8 text
const vocab = literal('llama_vocab_base64').toString('utf8').split('\n');
if (vocab.length !== N_VOCAB) die('vocabulary has ' + vocab.length + ' rows, expected ' + N_VOCAB);

// merges: 17-bit ids, most significant bit first
const bits = literal('llama_merges_binary');
let nIds = Math.floor(bits.length * 8 / 17);
nIds -= nIds % 2;
const merges = [];
for (let k = 0; k < nIds; k += 2) {
  const pair = [];
  for (let j = 0; j < 2; j++) {
    const bit = 17 * (k + j), at = bit >> 3, sh = bit & 7;
    const w = (bits[at] << 16) | ((bits[at + 1] || 0) << 8) | (bits[at + 2] || 0);
    const id = (w >> (7 - sh)) & 0x1ffff;
    if (id >= N_VOCAB) die('merge ' + k / 2 + ' names row ' + id + ', past the vocabulary');
    pair.push(vocab[id]);
  }
  merges.push(pair[0] + ' ' + pair[1]);
}
if (merges.length !== N_MERGES) die(merges.length + ' merges, expected ' + N_MERGES);

if (!src.includes(JSON.stringify(LLAMA3_PATTERN))) {
  die(bundlePath + ': does not carry the Llama-3 pre-tokenizer pattern ' + LLAMA3_PATTERN);
}

// the package's own view, for the special tokens and the cross-check
const ref = require(fs.realpathSync(bundlePath)).llama3Tokenizer;
if (!ref || ref.vocabById.length !== N_VOCAB + N_SPECIAL) die('the package encoder did not load');
for (let i = 0; i < N_VOCAB; i++) {
  if (ref.vocabById[i] !== vocab[i]) die('vocabulary row ' + i + ' differs from the package');
}
if (ref.merges.size !== merges.length) die('merge count differs from the package');
merges.forEach((m, r) => {
  if (ref.merges.get(m) !== 2 * r + 1) die('merge ' + r + ' "' + m + '" differs from the package');
});
const special = ref.vocabById.slice(N_VOCAB);

const out = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: special.map((content, k) => ({
    id: N_VOCAB + k, content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: true,
  })),
  normalizer: null,
  pre_tokenizer: {
    type: 'Sequence',
    pretokenizers: [
      {type: 'Split', pattern: {Regex: LLAMA3_PATTERN}, behavior: 'Isolated', invert: false},
      {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false},
    ],
  },
  post_processor: {
    type: 'TemplateProcessing',
    single: [{SpecialToken: {id: '<|begin_of_text|>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}],
    pair: [
      {SpecialToken: {id: '<|begin_of_text|>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
      {SpecialToken: {id: '<|begin_of_text|>', type_id: 1}}, {Sequence: {id: 'B', type_id: 1}},
    ],
    special_tokens: {
      '<|begin_of_text|>': {id: '<|begin_of_text|>', ids: [N_VOCAB], tokens: ['<|begin_of_text|>']},
    },
  },
  decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
  model: {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
    vocab: '@VOCAB@',
    merges,
  },
};
// One merge / vocabulary entry per line keeps error line numbers meaningful. The vocabulary is
// written by hand in id order (a JS object would put integer-like keys such as "15" first).
const vocabText = '{\n' + vocab.map((s, i) => '   ' + JSON.stringify(s) + ': ' + i).join(',\n') + '\n  }';
const text = JSON.stringify(out, null, 1).replace('"@VOCAB@"', () => vocabText);
fs.writeFileSync(outPath, text + '\n');
console.log('llama3-tokenizer-json: ' + outPath + ': ' + vocab.length + ' tokens, ' + merges.length +
            ' merges, ' + special.length + ' added tokens');
