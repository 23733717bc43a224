/* crc32c.c — CRC-32C (crc32c.h): the SSE4.2 crc32 instruction when the compiler targets it
 * (-march=native on any x86 since Nehalem), a slicing-by-8 table otherwise. The tables are
 * computed once (pthread_once) from the reflected polynomial 0x82F63B78.
 * Rule kept: both paths give the same bits for every input, start and length
 * (test_safetensors checks it on random buffers; the safetensors fuzzer on every input). */
#include "core/crc32c.h"

#include <pthread.h>
#include <string.h>

#include "core/crc32c_internal.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#define CRC32C_POLY 0x82F63B78u

static uint32_t g_table[8][256];
static pthread_once_t g_table_once = PTHREAD_ONCE_INIT;

/* g_table[0] is the byte-at-a-time table; g_table[k][b] is the CRC of byte b followed by k
 * zero bytes, so eight lookups advance the CRC over eight bytes at once. */
static void table_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        g_table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t c = g_table[k - 1][b];
            g_table[k][b] = (c >> 8) ^ g_table[0][c & 0xff];
        }
}

/* Bytes are assembled explicitly, so the table path is right on either byte order. */
static inline uint32_t load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t mt_crc32c_sw(uint32_t crc, const void *data, size_t n_bytes) {
    pthread_once(&g_table_once, table_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n_bytes >= 8) {
        uint32_t lo = c ^ load_le32(p), hi = load_le32(p + 4);
        c = g_table[7][lo & 0xff] ^ g_table[6][(lo >> 8) & 0xff] ^ g_table[5][(lo >> 16) & 0xff] ^
            g_table[4][lo >> 24] ^ g_table[3][hi & 0xff] ^ g_table[2][(hi >> 8) & 0xff] ^
            g_table[1][(hi >> 16) & 0xff] ^ g_table[0][hi >> 24];
        p += 8;
        n_bytes -= 8;
    }
    while (n_bytes--) c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__SSE4_2__)
int mt_crc32c_uses_hw(void) { return 1; }

uint32_t mt_crc32c(uint32_t crc, const void *data, size_t n_bytes) {
    const unsigned char *p = data;
    uint32_t c = ~crc;
    /* bytes up to an 8-byte boundary, then 8 at a time, then the tail */
    while (n_bytes && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8(c, *p++);
        n_bytes--;
    }
    uint64_t c64 = c;
    while (n_bytes >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
        p += 8;
        n_bytes -= 8;
    }
    c = (uint32_t)c64;
    while (n_bytes--) c = _mm_crc32_u8(c, *p++);
    return ~c;
}
#else
int mt_crc32c_uses_hw(void) { return 0; }

uint32_t mt_crc32c(uint32_t crc, const void *data, size_t n_bytes) { return mt_crc32c_sw(crc, data, n_bytes); }
#endif
