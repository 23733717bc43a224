// scripts/llama2-tokenizer-model.js BUNDLE OUT.model — writes Llama-2's SentencePiece model
// (a ModelProto protocol buffer, as its tokenizer.model is) from the data baked into the npm
// package llama-tokenizer-js (its llama-tokenizer.js: `llama_vocab_base64`, the 32,000 pieces in
// id order joined by '\n'; `llama_merges_binary`, the merges of Hugging Face's tokenizer.json as
// pairs of little-endian uint16 ids, in rank order). Used by scripts/fetch-llama2-tokenizer.sh.
// What comes from where:
//   pieces      the package's vocabulary, in its order (id = line number)
//   types       0 <unk> UNKNOWN, 1 <s> and 2 </s> CONTROL, 3..258 <0x00>..<0xFF> BYTE (checked
//               to be exactly those), every other piece NORMAL
//   scores      0 for the special and byte pieces; minus the rank of the first merge that makes
//               the piece for the others (the pieces no merge makes, single characters, come
//               after all of them). SentencePiece's BPE merges the pair whose result has the
//               highest score; the package merges the pair of lowest rank: with these scores
//               the two orders are the same. (By id they would not be: the merges that make
//               runs of U+2581 come last, after pieces with far higher ids.)
//   trainer     model_type BPE, vocab_size 32000, byte_fallback, unk/bos/eos ids 0/1/2, pad -1
//   normalizer  "identity" (no character map), add_dummy_prefix, remove_extra_whitespaces off,
//               escape_whitespaces: the package adds the leading space and maps ' ' to U+2581
//               and nothing else, which is what these settings make SentencePiece do.
'use strict';
const fs = require('fs');

const [bundlePath, outPath] = process.argv.slice(2);
const src = fs.readFileSync(bundlePath, 'utf8');
const grab = (name) => {
  const m = src.match(new RegExp('const ' + name + ' = "([A-Za-z0-9+/=]+)"'));
  if (!m) throw new Error(bundlePath + ': no ' + name + ' string in the bundle');
  return Buffer.from(m[1], 'base64');
};
const pieces = grab('llama_vocab_base64').toString('utf8').split('\n');
const mergeBytes = grab('llama_merges_binary');
if (pieces.length !== 32000) throw new Error('expected 32000 pieces, found ' + pieces.length);
const byId = new Map(pieces.map((p, i) => [p, i]));
if (byId.size !== pieces.length) throw new Error('a piece occurs twice in the vocabulary');
const hex = (b) => '<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>';
const want = ['<unk>', '<s>', '</s>'];
for (let i = 0; i < 259; i++) {
  const w = i < 3 ? want[i] : hex(i - 3);
  if (pieces[i] !== w) throw new Error('piece ' + i + ' is ' + JSON.stringify(pieces[i]) + ', expected ' + w);
}

// The first merge rank making each piece.
const firstRank = new Map();
const nMerges = mergeBytes.length / 4;
for (let r = 0; r < nMerges; r++) {
  const a = mergeBytes.readUInt16LE(4 * r), b = mergeBytes.readUInt16LE(4 * r + 2);
  const id = byId.get(pieces[a] + pieces[b]);
  if (id === undefined) throw new Error('merge ' + r + ' makes a piece not in the vocabulary');
  if (!firstRank.has(id)) firstRank.set(id, r);
}

// protobuf writer: varints, fixed32 floats, length-delimited fields
const varint = (v) => {
  const out = [];
  let x = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x) b |= 0x80;
    out.push(b);
  } while (x);
  return Buffer.from(out);
};
const tag = (field, wire) => varint(field * 8 + wire);
const fVarint = (field, v) => Buffer.concat([tag(field, 0), varint(v)]);
const fFloat = (field, v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return Buffer.concat([tag(field, 5), b]); };
const fBytes = (field, buf) => Buffer.concat([tag(field, 2), varint(buf.length), buf]);
const fString = (field, s) => fBytes(field, Buffer.from(s, 'utf8'));

const parts = [];
pieces.forEach((p, i) => {
  const type = i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
  const score = i < 259 ? 0 : firstRank.has(i) ? -firstRank.get(i) : -(nMerges + i);
  const fields = [fString(1, p), fFloat(2, score)];
  if (type !== 1) fields.push(fVarint(3, type));
  parts.push(fBytes(1, Buffer.concat(fields)));
});
parts.push(fBytes(2, Buffer.concat([
  fVarint(3, 2), fVarint(4, 32000), fVarint(35, 1), fVarint(40, 0), fVarint(41, 1), fVarint(42, 2), fVarint(43, -1)])));
parts.push(fBytes(3, Buffer.concat([
  fString(1, 'identity'), fVarint(3, 1), fVarint(4, 0), fVarint(5, 1)])));
fs.writeFileSync(outPath, Buffer.concat(parts));
console.log('wrote ' + outPath + ': 32000 pieces, ' + firstRank.size + ' made by merges, scored by merge rank');
