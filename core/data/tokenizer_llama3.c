/* tokenizer_llama3.c — Llama-3's pre-tokenizer, written by hand over the Unicode tables: the
 * regex of Meta's tokenizer.json (tiktoken's cl100k-style pattern)
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *   \s*[\r\n]+|\s+(?!\S)|\s+
 * with the leftmost-first alternation and backtracking of a regex engine. The BPE that
 * follows is tokenizer_bpe.c's (the model says which pre-tokenizer to use).
 * Character rules (those of the Rust/Oniguruma engines Llama-3's tokenizers run on):
 *   \p{L}, \p{N}  the letter / number classes of unicode_tables.c (UnicodeData.txt);
 *   \s            Unicode White_Space (PropList.txt): the table's "space" class, which is
 *                 Python's str.isspace, minus U+001C..U+001F (isspace-only);
 *   (?i:'s ...)   ASCII case folding plus U+017F LATIN SMALL LETTER LONG S, which folds to s;
 *   invalid UTF-8 each maximal ill-formed subsequence (Unicode's "maximal subpart", the unit a
 *                 decoder replaces by one U+FFFD) is one character of class "other", so text
 *                 splits as it would with U+FFFD in its place, and bytes are kept as they are.
 * Rule kept: a pure function of the bytes; no allocation. */
#include <stddef.h>
#include <stdint.h>

#include "core/data/tokenizer_bpe.h"
#include "core/data/tokenizer_bpe_internal.h"
#include "core/data/unicode_tables.h"

/* Class and length of the character at s[i] (i < n). */
static inline int l3_class(const unsigned char *s, size_t n, size_t i, size_t *len,
                           const uint8_t *bmp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *len = 1;
        return (c >= 0x1c && c <= 0x1f) ? MT_UCLASS_OTHER : bmp[c];
    }
    /* Well-formed sequences (Unicode table 3-7): the allowed range of the second byte
     * depends on the first; a sequence that breaks off is one "other" character up to the
     * byte that broke it. */
    size_t l;
    uint32_t cp;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) { l = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) {
        l = 3; cp = c & 0x0f;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        l = 4; cp = c & 0x07;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        *len = 1;
        return MT_UCLASS_OTHER;
    }
    for (size_t k = 1; k < l; k++) {
        unsigned d = i + k < n ? s[i + k] : 0;
        if (d < lo || d > hi) {
            *len = k;
            return MT_UCLASS_OTHER;
        }
        lo = 0x80;
        hi = 0xbf;
        cp = (cp << 6) | (d & 0x3f);
    }
    *len = l;
    return cp < 0x10000 ? bmp[cp] : mt_unicode_class(cp);
}

static inline int is_nl(unsigned c) { return c == '\r' || c == '\n'; }

/* Length of the letters after an apostrophe at s[j...] that make a contraction, or 0. */
static size_t contraction(const unsigned char *s, size_t n, size_t j) {
    if (j >= n) return 0;
    unsigned a = s[j] | 0x20u, b = j + 1 < n ? (s[j + 1] | 0x20u) : 0;
    if (s[j] == 0xc5 && j + 1 < n && s[j + 1] == 0xbf) return 2; /* U+017F long s */
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 2;
    return 0;
}

/* End of the run of letters starting at j. */
static size_t letters_end(const unsigned char *s, size_t n, size_t j, const uint8_t *bmp) {
    for (;;) {
        while (j < n && (unsigned)((s[j] | 0x20) - 'a') < 26u) j++; /* ASCII fast path */
        size_t l;
        if (j >= n || l3_class(s, n, j, &l, bmp) != MT_UCLASS_LETTER) return j;
        j += l;
    }
}

size_t bpe_llama3_pretoken_end(const unsigned char *s, size_t n, size_t i, const uint8_t *bmp) {
    unsigned c = s[i];
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (c == '\'') {
        size_t l = contraction(s, n, i + 1);
        if (l) return i + 1 + l;
    }
    size_t len, len2 = 0;
    int k = l3_class(s, n, i, &len, bmp);
    size_t j = i + len;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : a letter run, or one non-letter non-number non-newline
     * character before it */
    if (k == MT_UCLASS_LETTER) return letters_end(s, n, j, bmp);
    int k2 = j < n ? l3_class(s, n, j, &len2, bmp) : -1;
    if (k != MT_UCLASS_NUMBER && !is_nl(c) && k2 == MT_UCLASS_LETTER) {
        return letters_end(s, n, j + len2, bmp);
    }
    /* \p{N}{1,3} */
    if (k == MT_UCLASS_NUMBER) {
        for (int m = 1; m < 3 && j < n; m++) {
            size_t l;
            if (l3_class(s, n, j, &l, bmp) != MT_UCLASS_NUMBER) break;
            j += l;
        }
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    if (k == MT_UCLASS_OTHER || (c == ' ' && k2 == MT_UCLASS_OTHER)) {
        if (k != MT_UCLASS_OTHER) j += len2;
        for (;;) {
            size_t l;
            if (j >= n || l3_class(s, n, j, &l, bmp) != MT_UCLASS_OTHER) break;
            j += l;
        }
        while (j < n && is_nl(s[j])) j++;
        return j;
    }
    /* Whitespace run [i, j). \s*[\r\n]+ ends after the run's last newline when it has one;
     * else \s+(?!\S) takes the run but its last character when a non-space follows; a single
     * whitespace character before a non-space falls to \s+. */
    size_t last = i, nl_end = is_nl(c) ? j : 0, n_chars = 1;
    while (j < n) {
        size_t l;
        if (l3_class(s, n, j, &l, bmp) != MT_UCLASS_SPACE) break;
        if (is_nl(s[j])) nl_end = j + 1;
        last = j;
        j += l;
        n_chars++;
    }
    if (nl_end) return nl_end;
    if (j == n || n_chars == 1) return j;
    return last;
}
