#!/usr/bin/python3
"""test/ref/spm_reference.py — the reference side of test/e2e/tokenizer_spm.sh, on Debian's
python3-sentencepiece (the upstream C++ library and its trainer):

  train DIR CORPUS      trains the test models on CORPUS (one sentence a line) into DIR:
                          bpe.model   BPE, 1000 pieces, byte fallback, identity normalisation
                          uni.model   unigram, 800 pieces, no byte fallback (unknown runs),
                                      extra whitespace kept, user-defined <sep> and LORD,
                                      control <ctl>
                          sfx.model   BPE, 400 pieces, whitespace as suffix, no dummy prefix
                          nfkc.model  unigram, 300 pieces, the default nmt_nfkc rule (its
                                      precompiled character map)
  gen DIR               writes DIR/rand.jsonl (2400 seeded random strings) and DIR/bad.txt
                        (600 lines holding bytes that are not valid UTF-8, no newline inside)
  encode MODEL CLASS MODE INPUT OUTPUT
                        one line of ids per document of INPUT (MODE jsonl: the "text" of each
                        JSON line; lines: each line's bytes) as Megatron's CLASS gives them:
                        gpt (GPTSentencePieceTokenizer: encode), llama2 (bos first), spm
                        (SentencePieceTokenizer: its special tokens cut out of the text)
  decode MODEL INPUT OUTPUT
                        each line of ids of INPUT decoded (sp.decode), one text a line
  bin MODEL INPUT OUTPUT
                        the ids Megatron's preprocess_data.py writes for INPUT (JSON lines) with
                        Llama2Tokenizer and --append-eod: bos, the text's ids, eos, per document
  info MODEL            pieces, bos, eos, pad ids, SentencePieceTokenizer's size and eod

Megatron's _SentencePieceTokenizer special tokens and splitting are written here from its
tokenizer.py (megatron/training/tokenizer/tokenizer.py) for the comparison.
"""
import json
import random
import sys

import sentencepiece as spm


def train(out, corpus):
    common = dict(input=corpus, input_sentence_size=6000, shuffle_input_sentence=True,
                  num_threads=2, minloglevel=2, normalization_rule_name='identity')
    spm.SentencePieceTrainer.train(model_prefix=out + '/bpe', model_type='bpe', vocab_size=1000,
                                   byte_fallback=True, **common)
    spm.SentencePieceTrainer.train(model_prefix=out + '/uni', model_type='unigram', vocab_size=800,
                                   remove_extra_whitespaces=False, user_defined_symbols=['<sep>', 'LORD'],
                                   control_symbols=['<ctl>'], **common)
    spm.SentencePieceTrainer.train(model_prefix=out + '/sfx', model_type='bpe', vocab_size=400,
                                   treat_whitespace_as_suffix=True, add_dummy_prefix=False,
                                   remove_extra_whitespaces=False, **common)
    common['normalization_rule_name'] = 'nmt_nfkc'
    common['input_sentence_size'] = 1000
    spm.SentencePieceTrainer.train(model_prefix=out + '/nfkc', model_type='unigram', vocab_size=300, **common)


def megatron_specials(sp):
    """_SentencePieceTokenizer._initalize: token -> id, in its order."""
    vocab = {sp.id_to_piece(i): i for i in range(len(sp))}
    special = {}

    def add(t):
        if t not in vocab:
            vocab[t] = len(vocab)
        special[t] = vocab[t]

    for t in ['<CLS>', '<SEP>', '<EOD>', '<MASK>']:
        add(t)
    for get, fallback in [(sp.pad_id, '<PAD>'), (sp.bos_id, '<BOS>'), (sp.eos_id, '<EOS>')]:
        try:
            t = sp.id_to_piece(get())
        except IndexError:
            t = fallback
        add(t)
    return special, len(vocab)


def megatron_spm_tokenize(sp, special, text):
    ids, idx = [], 0
    while True:
        indices = {}
        for token in special:
            k = text[idx:].find(token)
            if k >= 0:
                indices[token] = k
        if not indices:
            break
        nxt = min(indices, key=indices.get)
        at = idx + indices[nxt]
        ids.extend(sp.encode_as_ids(text[idx:at]))
        ids.append(special[nxt])
        idx = at + len(nxt)
    ids.extend(sp.encode_as_ids(text[idx:]))
    return ids


def encode(model, cls, mode, path, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    special, _ = megatron_specials(sp)
    docs = []
    with open(path, 'rb') as f:
        for line in f.read().split(b'\n')[:-1]:
            docs.append(json.loads(line)['text'] if mode == 'jsonl' else line)
    with open(out, 'w') as f:
        for d in docs:
            if cls == 'spm':
                ids = megatron_spm_tokenize(sp, special, d)
            else:
                ids = sp.encode(d)  # str, or bytes (bad.txt): both are what the C++ library takes
                if cls == 'llama2':
                    ids = [sp.bos_id()] + ids
            f.write(' '.join(map(str, ids)) + '\n')


def gen(out):
    rng = random.Random(20240611)
    ranges = [(0x41, 0x5a), (0x61, 0x7a), (0xc0, 0xff), (0x100, 0x17e), (0x391, 0x3c9), (0x410, 0x44f),
              (0x5d0, 0x5ea), (0x621, 0x64a), (0x905, 0x939), (0xe01, 0xe30), (0x300, 0x36f),
              (0x3041, 0x3096), (0x4e00, 0x9fa5), (0xac00, 0xd7a3), (0x2000, 0x206f), (0x1f600, 0x1f64f),
              (0x1d400, 0x1d44f), (0x1, 0x1f), (0xe000, 0xe0ff), (0xfffd, 0xfffd), (0x2581, 0x2581),
              # what NFKC changes: full/halfwidth forms, ligatures, super/subscripts, circled and
              # Roman numerals, squared words, Hangul jamo (composed), Kangxi radicals
              (0xff01, 0xff5e), (0xff61, 0xff9f), (0xfb00, 0xfb06), (0x2070, 0x209c), (0x2460, 0x24ff),
              (0x2160, 0x2188), (0x3300, 0x33ff), (0x1100, 0x1112), (0x1161, 0x1175), (0x2f00, 0x2fd5)]
    punct = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'"
    spaces = [' ', ' ', ' ', '  ', '   ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u2581', ' \u2581 ']
    specials = ['<s>', '</s>', '<unk>', '<sep>', '<ctl>', 'LORD', '<CLS>', '<SEP>', '<EOD>', '<MASK>',
                '<PAD>', '<0x41>', '<EO', 'LOR']
    kjv_words = ['the', 'LORD', 'and', 'unto', 'said', 'God', 'Israel', 'thou', 'shalt', 'begat',
                 'Jerusalem', 'And', 'him', 'them', 'which']

    def piece():
        k = rng.random()
        if k < 0.30:
            return rng.choice(kjv_words)
        if k < 0.45:
            r = rng.choice(ranges)
            return ''.join(chr(rng.randint(*r)) for _ in range(rng.randint(1, 8)))
        if k < 0.50:
            return ''.join(chr(rng.randint(0x30, 0x39)) for _ in range(rng.randint(1, 6)))
        if k < 0.55:  # a letter and combining marks (NFKC composes some)
            return rng.choice('aeiouAEOUnNcCsyY') + ''.join(chr(rng.randint(0x300, 0x36f)) for _ in range(rng.randint(1, 3)))
        if k < 0.65:
            return ''.join(rng.choice(punct) for _ in range(rng.randint(1, 3)))
        if k < 0.90:
            return rng.choice(spaces)
        return rng.choice(specials)

    def text():
        return ''.join(piece() for _ in range(rng.randint(0, 25)))

    with open(out + '/rand.jsonl', 'w') as f:
        for _ in range(2400):
            f.write(json.dumps({'text': text()}) + '\n')
    invalid = [b'\x80', b'\xbf', b'\xc0\xaf', b'\xc3', b'\xe2\x82', b'\xed\xa0\x80', b'\xf0\x9f\x98',
               b'\xf4\x90\x80\x80', b'\xf5', b'\xff', b'\xfe\xff', b'\xe1\x41']
    with open(out + '/bad.txt', 'wb') as f:
        for _ in range(600):
            parts = [rng.choice(invalid) if rng.random() < 0.4 else text().replace('\n', ' ').encode()
                     for _ in range(rng.randint(1, 10))]
            f.write(b''.join(parts) + b'\n')


def decode(model, path, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(path) as f, open(out, 'w') as o:
        for line in f:
            o.write(sp.decode([int(x) for x in line.split()]) + '\n')


def bin_ids(model, path, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(path) as f, open(out, 'w') as o:
        for line in f:
            ids = [sp.bos_id()] + sp.encode(json.loads(line)['text']) + [sp.eos_id()]
            o.write('\n'.join(map(str, ids)) + '\n')


def info(model):
    sp = spm.SentencePieceProcessor(model_file=model)
    _, n_spm = megatron_specials(sp)
    print(len(sp), sp.bos_id(), sp.eos_id(), sp.pad_id(), n_spm, megatron_specials(sp)[0]['<EOD>'])


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    {'train': train, 'gen': gen, 'encode': encode, 'decode': decode, 'bin': bin_ids, 'info': info}[cmd](*args)
