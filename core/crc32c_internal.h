/* crc32c_internal.h — the two CRC-32C implementations behind mt_crc32c (crc32c.h), exposed so
 * that test/unit/test_safetensors.c and the safetensors fuzzer can check they agree bit for bit.
 * Rule: nothing outside crc32c.c and the tests calls these; everyone else calls mt_crc32c. */
#ifndef MT_CRC32C_INTERNAL_H
#define MT_CRC32C_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The portable slicing-by-8 table path (same contract as mt_crc32c). */
uint32_t mt_crc32c_sw(uint32_t crc, const void *data, size_t n_bytes);
/* 1 when mt_crc32c uses the SSE4.2 crc32 instruction (the build targets SSE4.2), 0 when it is
 * the table path itself. */
int mt_crc32c_uses_hw(void);

#endif
