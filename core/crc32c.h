/* crc32c.h — CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the checksum
 * checkpoints keep per file. Incremental: crc = mt_crc32c(crc, p, n) over consecutive chunks,
 * starting from 0, gives the checksum of the concatenation. Check value: "123456789" -> 0xE3069283
 * (RFC 3720, iSCSI). Uses the SSE4.2 crc32 instruction when the compiler targets it, a
 * slicing-by-8 table otherwise; both give the same bits. */
#ifndef MT_CRC32C_H
#define MT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t mt_crc32c(uint32_t crc, const void *data, size_t n_bytes);

#endif
