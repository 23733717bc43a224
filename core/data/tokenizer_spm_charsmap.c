/* tokenizer_spm_charsmap.c — SentencePiece's precompiled character map (the normalisation rules
 * of nmt_nfkc, nfkc, nmt_nfkc_cf ... compiled into NormalizerSpec.precompiled_charsmap): a
 * double-array trie (darts-clone's layout) over the UTF-8 text of every rule's source, whose
 * values are offsets of NUL-terminated replacement strings stored after it:
 *   bytes 0..3   the trie's size in bytes T (little-endian uint32, a multiple of 4)
 *   4..4+T       the trie: 32-bit units; of a unit u: has_leaf = bit 8, value = u & 0x7fffffff,
 *                label = u & 0x800000ff, offset = (u >> 10) << ((u & 0x200) >> 6)
 *   4+T..        the replacement strings
 * A rule applies to the longest source that is a prefix of the text (the normaliser's
 * NormalizePrefix). Every unit index and value is bounds-checked, so a corrupt map cannot read
 * outside it. */
#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer_spm_internal.h"

mt_status spm_charsmap_load(spm_model *m, const uint8_t *p, size_t n, const char *path) {
    if (n < 4) return mt_errorf(MT_ERR_DATA, "%s: precompiled_charsmap of %zu bytes is too short for its header", path, n);
    const uint32_t trie_bytes = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (trie_bytes % 4 || trie_bytes < 4 || trie_bytes > n - 4) {
        return mt_errorf(MT_ERR_DATA, "%s: precompiled_charsmap says its trie has %u bytes, but it holds %zu after "
                         "the header (and a trie is a whole number of 4-byte units): a corrupt model", path,
                         trie_bytes, n - 4);
    }
    const size_t n_norm = n - 4 - trie_bytes;
    if (n_norm && p[n - 1] != 0) {
        return mt_errorf(MT_ERR_DATA, "%s: precompiled_charsmap: its replacement strings do not end with a NUL: a "
                         "corrupt model", path);
    }
    m->n_trie = trie_bytes / 4;
    m->trie = malloc((size_t)m->n_trie * sizeof *m->trie);
    m->norm = malloc(n_norm + 1);
    if (!m->trie || !m->norm) return mt_errorf(MT_ERR_OOM, "%s: out of memory for the character map", path);
    for (uint32_t i = 0; i < m->n_trie; i++) {
        const uint8_t *u = p + 4 + 4 * (size_t)i;
        m->trie[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(m->norm, p + 4 + trie_bytes, n_norm);
    m->norm[n_norm] = 0;
    m->n_norm = n_norm;
    return MT_OK;
}

static inline uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

size_t spm_charsmap_match(const spm_model *m, const char *s, size_t n, const char **repl) {
    size_t best = 0;
    uint32_t pos = unit_offset(m->trie[0]);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= m->n_trie) break;
        const uint32_t u = m->trie[pos];
        if ((u & 0x800000ffu) != c) break;
        pos ^= unit_offset(u);
        if (pos >= m->n_trie) break;
        if ((u >> 8) & 1) {
            const uint32_t value = m->trie[pos] & 0x7fffffffu;
            if (value < m->n_norm) {
                best = i + 1;
                *repl = m->norm + value;
            }
        }
    }
    return best;
}
