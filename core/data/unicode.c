/* unicode.c — code point class lookup over the generated ranges of unicode_tables.c: a
 * 64 K-entry table for the Basic Multilingual Plane (filled once, thread-safe), binary
 * search above it. Rule kept: a pure function of the generated data. */
#include <pthread.h>

#include "core/data/unicode_tables.h"

static uint8_t g_bmp[0x10000];
static pthread_once_t g_bmp_once = PTHREAD_ONCE_INIT;

static void fill_bmp(void) {
    for (int r = 0; r < mt_unicode_n_ranges; r++) {
        const mt_urange *u = &mt_unicode_ranges[r];
        if (u->first > 0xffff) break;
        uint32_t last = u->last > 0xffff ? 0xffff : u->last;
        for (uint32_t c = u->first; c <= last; c++) g_bmp[c] = u->cls;
    }
}

static int search(uint32_t cp) {
    int lo = 0, hi = mt_unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < mt_unicode_ranges[mid].first) hi = mid - 1;
        else if (cp > mt_unicode_ranges[mid].last) lo = mid + 1;
        else return mt_unicode_ranges[mid].cls;
    }
    return MT_UCLASS_OTHER;
}

const uint8_t *mt_unicode_bmp_classes(void) {
    pthread_once(&g_bmp_once, fill_bmp);
    return g_bmp;
}

int mt_unicode_class(uint32_t cp) {
    if (cp < 0x10000) {
        pthread_once(&g_bmp_once, fill_bmp);
        return g_bmp[cp];
    }
    return search(cp);
}
