/* unicode_tables.h — the Unicode code point classes the GPT-2 and Llama-3 pre-tokenizers need
 * (letter \p{L}, number \p{N}, whitespace as Python's str.isspace; Llama-3's \s, Unicode
 * White_Space, is that class minus U+001C..U+001F), as ranges generated from Debian's
 * UnicodeData.txt into unicode_tables.c by scripts/gen-unicode-tables.sh, plus the lookup.
 * Rule kept: the tables are data, never edited by hand; the lookup is a pure function. */
#ifndef MT_UNICODE_TABLES_H
#define MT_UNICODE_TABLES_H

#include <stdint.h>

enum {
    MT_UCLASS_OTHER = 0,
    MT_UCLASS_LETTER = 1,
    MT_UCLASS_NUMBER = 2,
    MT_UCLASS_SPACE = 3
};

typedef struct {
    uint32_t first, last; /* inclusive */
    uint8_t cls;          /* MT_UCLASS_* */
} mt_urange;

extern const mt_urange mt_unicode_ranges[]; /* sorted, disjoint */
extern const int mt_unicode_n_ranges;
extern const char mt_unicode_version[];     /* the unicode-data package version */

/* Class of code point cp (binary search; anything unlisted, e.g. > 0x10FFFF, is OTHER). */
int mt_unicode_class(uint32_t cp);
/* The classes of U+0000..U+FFFF as one 64 K table (built on first use; then read-only). */
const uint8_t *mt_unicode_bmp_classes(void);

#endif
