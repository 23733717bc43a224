/* file_read.h — reads a whole regular file into memory in one call (tokenizer files:
 * vocab.json, merges.txt, tokenizer.json). Rules kept: only regular files (not a directory,
 * FIFO or device); errors are MT_ERR_IO / MT_ERR_OOM naming the path. */
#ifndef MT_FILE_READ_H
#define MT_FILE_READ_H

#include <stddef.h>

#include "core/status.h"

/* On success *text is a malloc'd copy of the file plus a NUL terminator (the caller frees it)
 * and *n_bytes its size without the NUL; an empty file gives "" and 0. On failure *text is
 * NULL and the message is one of "PATH: cannot open: <strerror>", "PATH: cannot read: not a
 * regular file", "PATH: cannot hold N bytes" (MT_ERR_OOM), "PATH: read failed (G of N bytes)". */
mt_status mt_read_whole_file(const char *path, char **text, size_t *n_bytes);

#endif
