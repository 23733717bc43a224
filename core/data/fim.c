/* fim.c — Megatron-LM's fill-in-the-middle transform of one sample (fim.h): segments at eod,
 * fragments at the split token, the character-level cut and re-tokenization, PSM / SPM, and
 * the sentinel-token lookup. */
#include "core/data/fim.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer_bpe.h"

struct mt_fim {
    mt_fim_cfg cfg;
    char *no_prefix;
    const mt_tokenizer *tok;
    mt_token_buf out;      /* the transformed sample being built */
    mt_token_buf ids;      /* a segment without the tokenizer's eod */
    mt_token_buf part[3];  /* prefix, middle, suffix re-tokenized */
    mt_byte_buf raw, text; /* detokenized bytes; the same as valid UTF-8 */
    mt_np_random rng;
};

mt_status mt_fim_open(mt_fim **out, const mt_fim_cfg *cfg, const mt_tokenizer *tok) {
    *out = NULL;
    if (!(cfg->rate >= 0 && cfg->rate <= 1) || !(cfg->spm_rate >= 0 && cfg->spm_rate <= 1) ||
        (cfg->split_id >= 0 && !(cfg->fragment_rate >= 0 && cfg->fragment_rate <= 1)))
        return mt_errorf(MT_ERR_CONFIG, "fim: rate %g, spm_rate %g%s: the rates are probabilities in [0, 1]",
                         cfg->rate, cfg->spm_rate, cfg->split_id >= 0 ? " and fragment_rate" : "");
    mt_fim *f = calloc(1, sizeof *f);
    if (!f) return mt_errorf(MT_ERR_OOM, "fim: out of memory");
    f->cfg = *cfg;
    f->tok = tok;
    if (cfg->no_prefix && !(f->no_prefix = strdup(cfg->no_prefix))) {
        free(f);
        return mt_errorf(MT_ERR_OOM, "fim: out of memory");
    }
    f->cfg.no_prefix = f->no_prefix;
    *out = f;
    return MT_OK;
}

void mt_fim_close(mt_fim *f) {
    if (!f) return;
    mt_token_buf_free(&f->out);
    mt_token_buf_free(&f->ids);
    for (int i = 0; i < 3; i++) mt_token_buf_free(&f->part[i]);
    mt_byte_buf_free(&f->raw);
    mt_byte_buf_free(&f->text);
    free(f->no_prefix);
    free(f);
}

static mt_status push_ids(mt_token_buf *b, const int32_t *ids, int64_t n) {
    mt_status st = mt_token_buf_reserve(b, n);
    if (st != MT_OK) return st;
    if (n > 0) memcpy(b->ids + b->n_ids, ids, (size_t)n * sizeof *ids);
    b->n_ids += n;
    return MT_OK;
}

/* Length of the valid UTF-8 sequence at s[0, n), or 0 with *n_bad = the bytes of its maximal
 * ill-formed subpart (at least 1): Unicode's "maximal subpart" rule, which Python's
 * bytes.decode(errors='replace') and Rust's from_utf8_lossy (Hugging Face tokenizers) follow. */
static size_t utf8_valid_len(const unsigned char *s, size_t n, size_t *n_bad) {
    const unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *n_bad = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        const unsigned b = k < n ? s[k] : 0;
        if (k >= n || b < lo || b > hi) {
            *n_bad = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

/* f->text = f->raw with each maximal ill-formed subpart replaced by U+FFFD */
static mt_status utf8_replace(mt_fim *f) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const unsigned char *s = (const unsigned char *)f->raw.bytes;
    mt_status st = MT_OK;
    f->text.n_bytes = 0;
    st = mt_byte_buf_append(&f->text, "", 0);
    for (size_t i = 0; i < f->raw.n_bytes && st == MT_OK;) {
        size_t bad = 0, len = utf8_valid_len(s + i, f->raw.n_bytes - i, &bad);
        st = len ? mt_byte_buf_append(&f->text, s + i, len) : mt_byte_buf_append(&f->text, fffd, 3);
        i += len ? len : bad;
    }
    return st;
}

/* Byte offset of code point k of a valid UTF-8 string (k <= its code points). */
static size_t cp_offset(const char *s, size_t n, int64_t k) {
    size_t i = 0;
    for (int64_t c = 0; c < k && i < n; c++) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

static int64_t cp_count(const char *s, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static mt_status draw(mt_fim *f, double p, int64_t *hit) {
    return mt_np_random_binomial(&f->rng, 1, p, hit);
}

/* Megatron's _permute (truncate_or_pad=False): appends seq, or its FIM form, to f->out. */
static mt_status permute(mt_fim *f, const int32_t *seq, int64_t n, double rate) {
    const mt_fim_cfg *c = &f->cfg;
    int64_t hit = 0;
    mt_status st = draw(f, rate, &hit);
    if (st != MT_OK || !hit) return st == MT_OK ? push_ids(&f->out, seq, n) : st;
    const int32_t eod = mt_tokenizer_eod(f->tok);
    f->ids.n_ids = 0;
    for (int64_t i = 0; i < n && st == MT_OK; i++)
        if (seq[i] != eod) st = mt_token_buf_push(&f->ids, seq[i]);
    f->raw.n_bytes = 0;
    if (st == MT_OK) st = mt_byte_buf_append(&f->raw, "", 0);
    if (st == MT_OK) st = mt_tokenizer_decode(f->tok, f->ids.ids, f->ids.n_ids, &f->raw);
    if (st == MT_OK) st = utf8_replace(f);
    if (st != MT_OK) return st;
    const char *text = f->text.bytes;
    const size_t n_text = f->text.n_bytes;
    if (c->no_prefix && strlen(c->no_prefix) <= n_text && !memcmp(text, c->no_prefix, strlen(c->no_prefix)))
        return push_ids(&f->out, seq, n); /* contents.startswith(no_fim_prefix) */
    int64_t cut[2];
    st = mt_np_random_randint(&f->rng, 0, cp_count(text, n_text) + 1, cut, 2);
    if (st != MT_OK) return st;
    if (cut[0] > cut[1]) {
        const int64_t t = cut[0];
        cut[0] = cut[1];
        cut[1] = t;
    }
    const size_t b0 = cp_offset(text, n_text, cut[0]), b1 = cp_offset(text, n_text, cut[1]);
    const size_t from[3] = {0, b0, b1}, to[3] = {b0, b1, n_text};
    for (int k = 0; k < 3 && st == MT_OK; k++) {
        f->part[k].n_ids = 0;
        st = mt_tokenizer_encode(f->tok, text + from[k], to[k] - from[k], &f->part[k]);
    }
    if (st == MT_OK) st = draw(f, c->spm_rate, &hit);
    if (st != MT_OK) return st;
    const mt_token_buf *pre = &f->part[0], *mid = &f->part[1], *suf = &f->part[2];
    if (hit) { /* SPM: [pre, suf] suffix [mid] prefix middle */
        const int32_t head[2] = {c->prefix_id, c->suffix_id};
        st = push_ids(&f->out, head, 2);
        if (st == MT_OK) st = push_ids(&f->out, suf->ids, suf->n_ids);
        if (st == MT_OK) st = mt_token_buf_push(&f->out, c->middle_id);
        if (st == MT_OK) st = push_ids(&f->out, pre->ids, pre->n_ids);
    } else { /* PSM: [pre] prefix [suf] suffix [mid] middle */
        st = mt_token_buf_push(&f->out, c->prefix_id);
        if (st == MT_OK) st = push_ids(&f->out, pre->ids, pre->n_ids);
        if (st == MT_OK) st = mt_token_buf_push(&f->out, c->suffix_id);
        if (st == MT_OK) st = push_ids(&f->out, suf->ids, suf->n_ids);
        if (st == MT_OK) st = mt_token_buf_push(&f->out, c->middle_id);
    }
    return st == MT_OK ? push_ids(&f->out, mid->ids, mid->n_ids) : st;
}

/* Megatron's _fim_split_and_permute_sequence */
static mt_status split_and_permute(mt_fim *f, const int32_t *seq, int64_t n) {
    const mt_fim_cfg *c = &f->cfg;
    int has_split = 0;
    for (int64_t i = 0; i < n && c->split_id >= 0 && !has_split; i++) has_split = seq[i] == c->split_id;
    if (!has_split) return permute(f, seq, n, c->rate);
    int64_t hit = 0;
    mt_status st = draw(f, c->rate, &hit);
    if (st != MT_OK || !hit) return st == MT_OK ? push_ids(&f->out, seq, n) : st;
    int64_t start = 0;
    for (int64_t i = 0; i < n && st == MT_OK; i++) {
        if (seq[i] != c->split_id) continue;
        if (i > start) {
            st = permute(f, seq + start, i - start, c->fragment_rate);
            if (st == MT_OK) st = mt_token_buf_push(&f->out, c->split_id);
        }
        start = i + 1;
    }
    return st == MT_OK ? permute(f, seq + start, n - start, c->fragment_rate) : st;
}

mt_status mt_fim_apply_rng(mt_fim *f, mt_np_random *rng, int32_t *tokens, int64_t n) {
    const int32_t eod = f->cfg.eod_id;
    mt_status st = MT_OK;
    f->rng = *rng;
    f->out.n_ids = 0;
    int64_t start = 0;
    for (int64_t i = 0; i < n && st == MT_OK; i++) { /* segments between eod ids */
        if (tokens[i] != eod) continue;
        if (i > start) {
            st = split_and_permute(f, tokens + start, i - start);
            if (st == MT_OK) st = mt_token_buf_push(&f->out, eod);
        }
        start = i + 1;
    }
    if (st == MT_OK) st = split_and_permute(f, tokens + start, n - start);
    *rng = f->rng;
    if (st != MT_OK) return st;
    for (int64_t i = 0; i < n; i++) tokens[i] = i < f->out.n_ids ? f->out.ids[i] : f->cfg.pad_id;
    return MT_OK;
}

mt_status mt_fim_apply(mt_fim *f, uint64_t sample, int32_t *tokens, int64_t n) {
    const uint32_t key[3] = {f->cfg.seed, (uint32_t)sample, (uint32_t)(sample >> 32)};
    mt_np_random rng;
    mt_np_random_seed_array(&rng, key, 3);
    return mt_fim_apply_rng(f, &rng, tokens, n);
}

mt_status mt_fim_token_id(const mt_tokenizer *tok, const char *token, int32_t *id, int *unknown) {
    int unk_is_eod = 0;
    *unknown = 0;
    if (!strcmp(mt_tokenizer_name(tok), "gpt2bpe")) { /* Hugging Face: a vocabulary lookup */
        *id = mt_bpe_token_id(tok, token, &unk_is_eod);
        if (*id >= 0) return MT_OK;
        if (unk_is_eod) {
            *id = mt_tokenizer_eod(tok);
            *unknown = 1;
            return MT_OK;
        }
        return mt_errorf(MT_ERR_CONFIG, "fim token '%s' is not in the tokenizer.json vocabulary (which has no unk "
                         "token to stand for it); name a token of it", token);
    }
    mt_byte_buf text = {0};
    mt_token_buf ids = {0};
    const int32_t eod = mt_tokenizer_eod(tok);
    mt_status st = mt_tokenizer_decode(tok, &eod, 1, &text);
    if (st == MT_OK && text.n_bytes == strlen(token) && !memcmp(text.bytes, token, text.n_bytes)) {
        *id = eod;
    } else if (st == MT_OK && (st = mt_tokenizer_encode(tok, token, strlen(token), &ids)) == MT_OK) {
        if (ids.n_ids == 1 && token[0]) *id = ids.ids[0];
        else
            st = mt_errorf(MT_ERR_CONFIG, "fim token '%s' is not one token of the %s tokenizer (it encodes to %lld "
                           "ids); name a token of its vocabulary", token, mt_tokenizer_name(tok),
                           (long long)ids.n_ids);
    }
    mt_byte_buf_free(&text);
    mt_token_buf_free(&ids);
    return st;
}
