/* mapped_files.h — the guard around the dataset files a run has mmap'd: each file's identity
 * (device, inode, size, modification time) as it was at open, re-checked on demand (training
 * checks at each validation and each checkpoint save), and a SIGBUS handler that turns a fault
 * inside a registered mapping (the file was truncated or rewritten under the run) into one
 * clear line naming the file, instead of a silent crash.
 * Rules kept: no per-read cost (the reads stay plain loads from the mapping; only the checks
 * call stat); the handler uses async-signal-safe calls only (write, _exit) and leaves a SIGBUS
 * outside every registered mapping to the handler that was there before (the default: core). */
#ifndef MT_MAPPED_FILES_H
#define MT_MAPPED_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/status.h"

/* What identifies a file's contents cheaply. */
typedef struct {
    uint64_t dev, ino;
    int64_t size;
    int64_t mtime_ns;
} mt_file_id;

void mt_file_id_from_stat(mt_file_id *id, const struct stat *sb);
/* MT_OK when `path` is still the file `id` describes; MT_ERR_DATA naming the path and what
 * changed (size, inode, time) otherwise, MT_ERR_IO when it cannot be stat'ed (removed). `what`
 * starts the advice (e.g. "training read it"). */
mt_status mt_file_id_check(const mt_file_id *id, const char *path, const char *what);

/* Registers [addr, addr + n_bytes) as a mapping of `path` (the string must outlive the
 * registration) and installs the SIGBUS handler on first use. Returns a slot (>= 0), or -1
 * when the table is full (that mapping then has no message, nothing else changes). */
int mt_mapped_register(const void *addr, size_t n_bytes, const char *path);
void mt_mapped_unregister(int slot);

/* Exposed for tests: formats the handler's message for a fault at byte `offset` of `path`
 * into buf (NUL-terminated, at most n - 1 bytes); returns its length. Async-signal-safe. */
size_t mt_mapped_format_fault(char *buf, size_t n, const char *path, uint64_t offset,
                              uint64_t n_mapped);

#endif
