/* index_cache.h — the on-disk cache of sample indices (GPT dataset doc/sample/shuffle
 * indices, blending indices): one file holding a description of everything the arrays were
 * built from, the arrays, and checksums, written to a temporary name, fsynced and renamed.
 *
 * Layout (little-endian):
 *   char magic[8] = "MTIDXC01"; u32 version = 1; u32 n_arrays; u64 n_description_bytes;
 *   char description[n_description_bytes];
 *   n_arrays x { char name[16]; u32 n_item_bytes; u32 zero; u64 n_items; u64 checksum; }
 *   u64 header_checksum (of every byte above);  zero padding to a multiple of 64;
 *   each array's items, then zero padding to a multiple of 64.
 * The file name carries a hash of the description (mt_index_cache_name), as Megatron names
 * its caches by the MD5 of a "unique description"; the full description is compared on load,
 * so a hash collision or a stale file is detected, never trusted.
 * Rule kept: nothing read is trusted: sizes, names and checksums are verified before the
 * arrays are handed out; a bad file is MT_ERR_DATA with the reason (the caller rebuilds). */
#ifndef MT_INDEX_CACHE_H
#define MT_INDEX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct {
    const char *name;    /* up to 15 characters */
    int n_item_bytes;    /* 1, 2, 4 or 8 */
    int64_t n_items;     /* write: given; read: filled */
    void *data;          /* write: given; read: malloc'd (caller frees) */
} mt_cache_array;

/* 64-bit hash of bytes (not cryptographic; for names and checksums). */
uint64_t mt_hash64(const void *p, size_t n_bytes, uint64_t seed);

/* "<dir>/<16 hex digits of hash(description)>-<kind>.mtidx" into out. */
mt_status mt_index_cache_name(const char *dir, const char *kind, const char *description,
                              char *out, size_t n_out_bytes);
/* Creates dir and its parents (mkdir -p). */
mt_status mt_index_cache_mkdir(const char *dir);

/* Writes the arrays (temporary name, fsync, rename, fsync of the folder). */
mt_status mt_index_cache_write(const char *path, const char *description,
                               const mt_cache_array *arrays, int n_arrays);
/* Reads a cache written with the same description and the same array names and item sizes.
 * MT_ERR_IO when the file cannot be opened (errno ENOENT: *missing = 1), MT_ERR_DATA when it
 * is corrupt, truncated or was built from something else (message says which). On failure
 * no array is left allocated. */
mt_status mt_index_cache_read(const char *path, const char *description,
                              mt_cache_array *arrays, int n_arrays, int *missing);

#endif
