/* sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written here so the env://
 * store can authenticate its ranks without a crypto library. Incremental: init, update over
 * consecutive chunks, final. Check values: SHA-256("abc") = ba7816bf...f20015ad (FIPS 180-4
 * example), HMAC-SHA256 against the seven test cases of RFC 4231 (test/unit/test_sha256.c). */
#ifndef MT_SHA256_H
#define MT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define MT_SHA256_BYTES 32

typedef struct {
    uint32_t h[8];
    uint64_t n_bytes; /* message length so far */
    uint8_t block[64];
    size_t n_block; /* bytes waiting in block */
} mt_sha256_ctx;

void mt_sha256_init(mt_sha256_ctx *c);
void mt_sha256_update(mt_sha256_ctx *c, const void *data, size_t n_bytes);
void mt_sha256_final(mt_sha256_ctx *c, uint8_t out[MT_SHA256_BYTES]);

/* HMAC-SHA256 of the concatenation msg1 || msg2 (either may be NULL with length 0) under key
 * (any length: a key over 64 bytes is hashed first, as RFC 2104 says). */
void mt_hmac_sha256(const void *key, size_t n_key, const void *msg1, size_t n_msg1, const void *msg2,
                    size_t n_msg2, uint8_t out[MT_SHA256_BYTES]);

/* 1 when the n bytes of a and b are equal; the time taken does not depend on where they differ */
int mt_bytes_equal_ct(const void *a, const void *b, size_t n);

#endif
