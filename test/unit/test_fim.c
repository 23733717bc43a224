/* test_fim.c — the fill-in-the-middle transform (core/data/fim.c) and numpy's legacy
 * RandomState (core/data/np_random.c):
 *   MT19937 against the reference mt19937ar.out (init_by_array {0x123, 0x234, 0x345, 0x456})
 *   and its default seed 5489; numpy's documented first values (RandomState(0) and (42)
 *   random_sample, RandomState(0).randint(10, size=5) = 5 0 3 3 7);
 *   the whole transform, token id for token id (no tolerance: ids are exact), on fixed samples
 *   of the byte tokenizer — ASCII code, multi-byte UTF-8, invalid bytes, eods at the start,
 *   doubled and at the end, split tokens, no_prefix, rates 0 / 1 / in between, PSM and SPM —
 *   against test/ref/fim_reference.py (an independent Python implementation of Megatron's
 *   fim_dataset.py drawing from numpy.random.RandomState when python3-numpy is installed, and
 *   from a numpy-free generator on CPython's own Mersenne Twister, checked equal to numpy's draw
 *   by draw, either way; python3 is required, numpy is not);
 *   with GPT-2 BPE (data/gpt2-*, else that part is skipped): the sentinel lookup (Megatron's
 *   default <fim_prefix> is no GPT-2 token: eod, as Hugging Face's unk), and a PSM sample's
 *   prefix + middle + suffix detokenize to the original text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/fim.h"
#include "core/data/np_random.h"
#include "test/test.h"

static void check_np_random(void) {
    mt_np_random r;
    const uint32_t key[4] = {0x123, 0x234, 0x345, 0x456};
    const uint32_t want[5] = {1067595299u, 955945823u, 477289528u, 4107218783u, 4228976476u};
    mt_np_random_seed_array(&r, key, 4);
    for (int i = 0; i < 5; i++) {
        const uint32_t v = mt_np_random_u32(&r);
        CHECKF(v == want[i], "init_by_array output %d: %u, want %u", i, v, want[i]);
    }
    mt_np_random_seed(&r, 5489);
    CHECK(mt_np_random_u32(&r) == 3499211612u);
    mt_np_random_seed(&r, 0);
    CHECK(mt_np_random_double(&r) == 0.5488135039273248);
    mt_np_random_seed(&r, 42);
    CHECK(mt_np_random_double(&r) == 0.3745401188473625);
    int64_t ri[5];
    const int64_t want_ri[5] = {5, 0, 3, 3, 7};
    mt_np_random_seed(&r, 0);
    CHECK(mt_np_random_randint(&r, 0, 10, ri, 5) == MT_OK);
    CHECK(!memcmp(ri, want_ri, sizeof ri));
    int64_t b = -1;
    CHECK(mt_np_random_binomial(&r, 1, 1.5, &b) != MT_OK);
    CHECK(mt_np_random_binomial(&r, 100, 0.5, &b) != MT_OK); /* BTPE: refused, not wrong */
    int64_t hits = 0;
    for (int i = 0; i < 4000; i++) {
        CHECK(mt_np_random_binomial(&r, 1, 0.25, &b) == MT_OK);
        hits += b;
    }
    CHECKF(hits > 850 && hits < 1150, "binomial(1, 0.25): %lld of 4000", (long long)hits); /* ~7 sigma */
}

typedef struct {
    double rate, spm_rate, fragment_rate;
    int32_t split;
    const char *no_prefix;
} fim_case;

static const char *const k_texts[] = {
    "def add(a, b):\n    return a + b\n#file two\nprint(add(1, 2))\n",
    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 # \xc3\xbc",
    "bad \xff bytes \xe3\x81 cut \xed\xa0\x80 surrogate \xf0\x9f end \xc3",
    "#!/bin/sh\necho hi # comment\n#\nexit 0\n",
};

/* A sample of n byte ids from text k with eods planted by pattern p. */
static int make_tokens(int k, int p, int32_t *ids, int n) {
    const char *t = k_texts[k];
    const int len = (int)strlen(t);
    for (int i = 0; i < n; i++) ids[i] = (unsigned char)t[(i + 3 * p) % len];
    if (p % 4 == 1) ids[0] = 256;                      /* eod first */
    if (p % 4 == 2) ids[n / 3] = ids[n / 3 + 1] = 256; /* two in a row */
    if (p % 4 == 3) ids[n - 1] = 256, ids[n / 2] = 256; /* one inside, one last */
    return n;
}

/* Runs every case through mt_fim_apply and the Python reference; returns lines compared. */
static int check_against_reference(void) {
    static const fim_case cases[] = {
        {0.5, 0.5, 0, -1, NULL}, {1.0, 0.0, 0, -1, NULL}, {1.0, 1.0, 0, -1, NULL}, {0.0, 0.5, 0, -1, NULL},
        {0.9, 0.3, 0.6, '#', NULL}, {1.0, 0.5, 1.0, '#', NULL}, {0.7, 0.5, 0.0, '\n', NULL},
        {1.0, 0.5, 0, -1, "#!"}, {1.0, 0.5, 0.8, '\n', "ec"},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]), n = 40, n_samples = 24;
    mt_tokenizer *tok = NULL;
    CHECK(mt_tokenizer_byte_open(&tok) == MT_OK);
    char in_path[] = "/tmp/mt_test_fim_XXXXXX";
    const int fd = mkstemp(in_path);
    CHECK(fd >= 0);
    FILE *in = fdopen(fd, "w");
    int32_t *got = malloc((size_t)n_cases * n_samples * n * sizeof *got);
    int n_lines = 0;
    for (int c = 0; c < n_cases; c++) {
        const fim_case *fc = &cases[c];
        mt_fim_cfg cfg = {.rate = fc->rate, .spm_rate = fc->spm_rate, .fragment_rate = fc->fragment_rate,
                          .prefix_id = 1, .middle_id = 2, .suffix_id = 3, .pad_id = 4, .eod_id = 256,
                          .split_id = fc->split, .no_prefix = fc->no_prefix, .seed = 1234u + (uint32_t)c};
        mt_fim *f = NULL;
        CHECK(mt_fim_open(&f, &cfg, tok) == MT_OK);
        for (int s = 0; s < n_samples; s++, n_lines++) {
            const uint64_t sample = (uint64_t)s * 977 + (s == n_samples - 1 ? (uint64_t)5 << 32 : 0);
            int32_t *ids = got + (size_t)n_lines * n;
            make_tokens((c + s) % 4, s, ids, n);
            fprintf(in, "{\"seed\": %u, \"sample\": %llu, \"rate\": %.17g, \"spm_rate\": %.17g, "
                    "\"fragment_rate\": %.17g, \"prefix\": 1, \"middle\": 2, \"suffix\": 3, \"pad\": 4, "
                    "\"eod\": 256, \"split\": %d, \"no_prefix\": %s%s%s, \"tokens\": [", cfg.seed,
                    (unsigned long long)sample, fc->rate, fc->spm_rate, fc->fragment_rate, fc->split,
                    fc->no_prefix ? "\"" : "", fc->no_prefix ? fc->no_prefix : "null", fc->no_prefix ? "\"" : "");
            for (int i = 0; i < n; i++) fprintf(in, "%s%d", i ? ", " : "", ids[i]);
            fprintf(in, "]}\n");
            CHECK(mt_fim_apply(f, sample, ids, n) == MT_OK);
        }
        mt_fim_close(f);
    }
    fclose(in);
    char cmd[256];
    /* Debian's python3 (with python3-numpy: the reference then draws from numpy itself) before PATH's */
    snprintf(cmd, sizeof cmd, "%s test/ref/fim_reference.py < %s",
             access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3", in_path);
    FILE *ref = popen(cmd, "r");
    CHECK(ref != NULL);
    int line = 0, differ = 0, changed = 0;
    char buf[4096];
    while (ref && line < n_lines && fgets(buf, sizeof buf, ref)) {
        const int32_t *ids = got + (size_t)line * n;
        char *p = buf;
        int ok = 1;
        for (int i = 0; i < n; i++) {
            char *end;
            const long v = strtol(p, &end, 10);
            ok &= end != p && v == ids[i];
            p = end;
        }
        if (!ok && differ++ < 3) fprintf(stderr, "line %d differs: reference %s", line, buf);
        int32_t orig[64];
        make_tokens((line / n_samples + line % n_samples) % 4, line % n_samples, orig, n);
        changed += memcmp(orig, ids, (size_t)n * sizeof *ids) != 0;
        line++;
    }
    CHECKF(ref && pclose(ref) == 0, "python3 test/ref/fim_reference.py failed (python3 is required)");
    CHECKF(line == n_lines && differ == 0, "%d of %d lines read, %d differ from the reference", line, n_lines,
           differ);
    CHECKF(changed > n_lines / 3 && changed < n_lines, "%d of %d samples transformed", changed, n_lines);
    unlink(in_path);
    free(got);
    mt_tokenizer_free(tok);
    return line;
}

static int find(const int32_t *ids, int n, int32_t v) {
    for (int i = 0; i < n; i++)
        if (ids[i] == v) return i;
    return -1;
}

/* GPT-2 BPE: sentinel lookup, and a PSM sample reassembles to its text. */
static int check_gpt2(void) {
    mt_tokenizer_files files = {.vocab_path = "data/gpt2-vocab.json", .merges_path = "data/gpt2-merges.txt"};
    mt_tokenizer *tok = NULL;
    if (access(files.vocab_path, R_OK) || access(files.merges_path, R_OK) ||
        mt_tokenizer_open(&tok, "gpt2bpe", &files) != MT_OK) {
        printf("skip: GPT-2 part (data/gpt2-vocab.json / merges missing)\n");
        return 0;
    }
    int32_t id = 0, pre, mid, suf;
    int unknown = 0;
    CHECK(mt_fim_token_id(tok, "<fim_prefix>", &id, &unknown) == MT_OK && id == 50256 && unknown);
    CHECK(mt_fim_token_id(tok, "<|endoftext|>", &id, &unknown) == MT_OK && id == 50256 && !unknown);
    CHECK(mt_fim_token_id(tok, "\xc4\xa0" "def", &id, &unknown) == MT_OK && id == 825 && !unknown); /* "Ġdef" */
    CHECK(mt_fim_token_id(tok, "{", &pre, &unknown) == MT_OK && !unknown && pre != 50256);
    CHECK(mt_fim_token_id(tok, "}", &mid, &unknown) == MT_OK && !unknown);
    CHECK(mt_fim_token_id(tok, "~", &suf, &unknown) == MT_OK && !unknown);
    const char *text = "The quick brown fox jumps over the lazy dog, caf\xc3\xa9 na\xc3\xafve.";
    mt_token_buf ids = {0};
    CHECK(mt_tokenizer_encode(tok, text, strlen(text), &ids) == MT_OK);
    const int n = (int)ids.n_ids + 8;
    int32_t sample[96];
    mt_fim_cfg cfg = {.rate = 1, .spm_rate = 0, .prefix_id = pre, .middle_id = mid, .suffix_id = suf,
                      .pad_id = 50256, .eod_id = 50256, .split_id = -1, .seed = 1};
    mt_fim *f = NULL;
    CHECK(n <= 96 && mt_fim_open(&f, &cfg, tok) == MT_OK);
    int reassembled = 0;
    for (uint64_t s = 0; s < 8 && f; s++) {
        memcpy(sample, ids.ids, ids.n_ids * sizeof *sample);
        for (int i = (int)ids.n_ids; i < n; i++) sample[i] = 50256;
        CHECK(mt_fim_apply(f, s, sample, n) == MT_OK);
        const int a = find(sample, n, pre), b = find(sample, n, suf), c = find(sample, n, mid);
        const int e = find(sample + c + 1, n - c - 1, 50256) + c + 1;
        CHECKF(a == 0 && b > a && c > b && e > c, "PSM order: %d %d %d %d", a, b, c, e);
        if (!(a == 0 && b > a && c > b && e > c)) continue;
        mt_byte_buf out = {0};
        CHECK(mt_tokenizer_decode(tok, sample + 1, b - 1, &out) == MT_OK);         /* prefix */
        CHECK(mt_tokenizer_decode(tok, sample + c + 1, e - c - 1, &out) == MT_OK); /* middle */
        CHECK(mt_tokenizer_decode(tok, sample + b + 1, c - b - 1, &out) == MT_OK); /* suffix */
        reassembled += out.n_bytes == strlen(text) && !memcmp(out.bytes, text, out.n_bytes);
        mt_byte_buf_free(&out);
    }
    CHECKF(reassembled == 8, "%d of 8 PSM samples reassemble to the text", reassembled);
    mt_fim_close(f);
    mt_token_buf_free(&ids);
    mt_tokenizer_free(tok);
    return 1;
}

int main(void) {
    check_np_random();
    const int lines = check_against_reference();
    const int gpt2 = check_gpt2();
    printf("fim: %d samples compared with the Python reference; GPT-2 part %s\n", lines, gpt2 ? "run" : "skipped");
    TEST_MAIN_END();
}
