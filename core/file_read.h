/* file_read.h — opening a file to read it as data: only regular files (not a directory, FIFO,
 * socket or device: opening a FIFO for reading would wait for a writer forever, and reading a
 * device never ends), and reading a whole one into memory (tokenizer files, manifests,
 * config.json). Errors are MT_ERR_IO / MT_ERR_OOM naming the path. */
#ifndef MT_FILE_READ_H
#define MT_FILE_READ_H

#include <stddef.h>
#include <sys/stat.h>

#include "core/status.h"

/* Opens path read-only (close-on-exec) without blocking on a FIFO, and checks it is a regular
 * file. MT_OK with *fd and *sb (the file's stat); else *fd = -1 and either *open_errno = the
 * open's errno (message "PATH: cannot open: <strerror>"; a caller may replace it by its own,
 * e.g. naming the missing file's role) or *open_errno = 0 and "PATH: cannot read: a FIFO, not a
 * regular file" (folder, device, socket likewise). open_errno may be NULL. */
mt_status mt_open_regular(const char *path, int *fd, struct stat *sb, int *open_errno);

/* On success *text is a malloc'd copy of the file plus a NUL terminator (the caller frees it)
 * and *n_bytes its size without the NUL; an empty file gives "" and 0. On failure *text is
 * NULL and the message is one of "PATH: cannot open: <strerror>", "PATH: cannot read: a FIFO,
 * not a regular file" (mt_open_regular), "PATH: cannot hold N bytes" (MT_ERR_OOM), "PATH: read failed (G of N bytes)". */
mt_status mt_read_whole_file(const char *path, char **text, size_t *n_bytes);

#endif
