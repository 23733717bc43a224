#!/usr/bin/env python3
"""fim_reference.py — an independent reference for mtrain's fill-in-the-middle transform
(core/data/fim.c), written from Megatron-LM's megatron/training/datasets/fim_dataset.py
(GPTFIMDataset: _query_document_sample_shuffle_indices, _fim_split_and_permute_sequence,
_permute) and numpy's legacy RandomState, for the byte tokenizer (id = byte, eod = 256).

The draws come from numpy.random.RandomState itself when numpy imports (Debian's python3-numpy
is in /usr/bin/python3), and every sample is then transformed a second time with the generator
below, which must give the same ids. Without numpy only that generator runs: the Mersenne
Twister is CPython's own (random.Random, set to numpy's seeded state with setstate;
getrandbits(32) is genrand_int32 and random() is the same 53-bit double as numpy's
random_sample); the seedings (init_genrand, init_by_array) are written here from the reference
mt19937ar.c and checked against random.seed(), which is init_by_array of the seed's 32-bit
words; binomial is numpy's legacy_random_binomial (inversion branch) and randint numpy's masked
rejection (random_bounded_uint64_fill with use_masked), from numpy's sources.

Input (stdin): one JSON object per line: {"seed": S, "sample": I, "tokens": [...],
"rate": r, "spm_rate": s, "fragment_rate": f, "prefix": id, "middle": id, "suffix": id,
"pad": id, "eod": id, "split": id or -1, "no_prefix": str or null}.
Output (stdout): the transformed ids of each line, space separated, one line each."""
import json
import math
import random
import sys

try:
    import numpy
except ImportError:
    numpy = None

N = 624
EOD_BYTE = 256


def init_genrand(s):
    mt = [0] * N
    mt[0] = s & 0xFFFFFFFF
    for i in range(1, N):
        mt[i] = (1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i) & 0xFFFFFFFF
    return mt


def init_by_array(key):
    mt = init_genrand(19650218)
    i, j = 1, 0
    for _ in range(max(N, len(key))):
        mt[i] = ((mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525)) + key[j] + j) & 0xFFFFFFFF
        i += 1
        j += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
        if j >= len(key):
            j = 0
    for _ in range(N - 1):
        mt[i] = ((mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941)) - i) & 0xFFFFFFFF
        i += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
    mt[0] = 0x80000000
    return mt


class RandomState:
    """numpy.random.RandomState, the calls Megatron's FIM dataset makes."""

    def __init__(self, key):
        mt = init_genrand(key) if isinstance(key, int) else init_by_array(key)
        self.r = random.Random()
        self.r.setstate((3, tuple(mt) + (N,), None))

    def u32(self):
        return self.r.getrandbits(32)

    def double(self):
        return self.r.random()

    def binomial(self, n, p):
        if p <= 0.5:
            assert p * n <= 30.0
            return self._inversion(n, p)
        assert (1.0 - p) * n <= 30.0
        return n - self._inversion(n, 1.0 - p)

    def _inversion(self, n, p):
        q = 1.0 - p
        qn = math.exp(n * math.log(q)) if q > 0 else 0.0
        np_ = n * p
        bound = int(min(n, np_ + 10.0 * math.sqrt(np_ * q + 1)))
        x, px, u = 0, qn, self.double()
        while u > px:
            x += 1
            if x > bound:
                x, px, u = 0, qn, self.double()
            else:
                u -= px
                px = ((n - x + 1) * p * px) / (x * q)
        return x

    def randint(self, low, high, size):  # returns a list
        rng = high - 1 - low
        mask = rng
        for s in (1, 2, 4, 8, 16, 32):
            mask |= mask >> s
        out = []
        for _ in range(size):
            v = 0
            if rng > 0:
                v = self.u32() & mask
                while v > rng:
                    v = self.u32() & mask
            out.append(low + v)
        return out


def self_check():
    """init_by_array as CPython seeds, and numpy's well-known first doubles."""
    for key in ([1234, 5], [7, 8, 9], [0x123, 0x234, 0x345, 0x456]):
        r = random.Random(sum(k << (32 * i) for i, k in enumerate(key)))
        assert r.getstate()[1][:N] == tuple(init_by_array(key)), key
    assert RandomState([0x123, 0x234, 0x345, 0x456]).u32() == 1067595299  # mt19937ar.out
    assert RandomState(5489).u32() == 3499211612  # mt19937ar's default seed
    assert RandomState(0).double() == 0.5488135039273248  # np.random.RandomState(0).random_sample()
    assert RandomState(42).double() == 0.3745401188473625
    if numpy is None:
        return
    for key in (7, [1234, 5, 0], [99, 12345, 3]):  # the generator above against numpy's, draw by draw
        a, b = RandomState(key), numpy.random.RandomState(key)
        for p in (0.0, 1.0, 0.5, 0.1, 0.9, 0.25, 1e-9, 1 - 1e-9) * 50:
            assert a.binomial(1, p) == b.binomial(1, p), (key, p)
        for high in (1, 2, 3, 17, 64, 65, 1000, 2**31 + 7, 2**32) * 20:
            assert a.randint(0, high, 2) == list(b.randint(0, high, size=2)), (key, high)


class ByteTokenizer:
    def ids_to_text(self, ids):  # remove_special_tokens=True: the eod id is dropped
        return bytes(i for i in ids if i != EOD_BYTE).decode("utf-8", errors="replace")

    def text_to_ids(self, text):
        return list(text.encode("utf-8"))


class Fim:
    def __init__(self, c, use_numpy):
        self.c = c
        self.tok = ByteTokenizer()
        key = [c["seed"], c["sample"] & 0xFFFFFFFF, c["sample"] >> 32]
        self.rng = numpy.random.RandomState(key) if use_numpy else RandomState(key)

    def permute(self, sample, rate):
        c = self.c
        if not self.rng.binomial(1, rate):
            return list(sample)
        contents = self.tok.ids_to_text(sample)
        if c["no_prefix"] is not None and contents.startswith(c["no_prefix"]):
            return list(sample)
        b = sorted(self.rng.randint(low=0, high=len(contents) + 1, size=2))
        prefix = self.tok.text_to_ids(contents[: b[0]])
        middle = self.tok.text_to_ids(contents[b[0] : b[1]])
        suffix = self.tok.text_to_ids(contents[b[1] :])
        if self.rng.binomial(1, c["spm_rate"]):
            return [c["prefix"], c["suffix"]] + suffix + [c["middle"]] + prefix + middle
        return [c["prefix"]] + prefix + [c["suffix"]] + suffix + [c["middle"]] + middle

    def split_and_permute(self, seq):
        c = self.c
        split = c["split"]
        if split < 0 or split not in seq:
            return self.permute(seq, c["rate"])
        if not self.rng.binomial(1, c["rate"]):
            return list(seq)
        out, start = [], 0
        for loc, t in enumerate(seq):
            if t != split:
                continue
            if loc - start > 0:
                out += self.permute(seq[start:loc], c["fragment_rate"]) + [split]
            start = loc + 1
        return out + self.permute(seq[start:], c["fragment_rate"])

    def sample(self, tokens):
        c = self.c
        eod = c["eod"]
        if eod in tokens:
            out, start = [], 0
            for loc, t in enumerate(tokens):
                if t != eod:
                    continue
                if loc - start > 0:
                    out += self.split_and_permute(tokens[start:loc]) + [eod]
                start = loc + 1
            out += self.split_and_permute(tokens[start:])
        else:
            out = self.split_and_permute(tokens)
        n = len(tokens)
        return out[:n] + [c["pad"]] * (n - len(out))


def main():
    self_check()
    n = 0
    for line in sys.stdin:
        if line.strip():
            c = json.loads(line)
            out = Fim(c, False).sample(c["tokens"])
            if numpy is not None:
                ref = [int(t) for t in Fim(c, True).sample(c["tokens"])]
                assert ref == out, (c, ref, out)
                out = ref
            print(" ".join(str(t) for t in out))
            n += 1
    print("fim_reference: %d samples, draws from %s" % (n, "numpy %s's RandomState (and the pure-Python "
          "generator, equal)" % numpy.__version__ if numpy else "the pure-Python generator (no numpy)"),
          file=sys.stderr)


if __name__ == "__main__":
    main()
