/* file_read.c — mt_read_whole_file (file_read.h): fopen + fstat + one fread of the whole
 * regular file, NUL-terminated. Shared by json_tree.c (mt_json_doc_load) and
 * tokenizer_bpe_load.c (merges.txt). */
#include "core/file_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

mt_status mt_read_whole_file(const char *path, char **text, size_t *n_bytes) {
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return mt_errorf(MT_ERR_IO, "%s: cannot read: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    char *t = malloc(n + 1);
    if (!t) {
        fclose(f);
        return mt_errorf(MT_ERR_OOM, "%s: cannot hold %zu bytes", path, n);
    }
    size_t got = fread(t, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (got != n || bad) {
        free(t);
        return mt_errorf(MT_ERR_IO, "%s: read failed (%zu of %zu bytes)", path, got, n);
    }
    t[n] = 0;
    *text = t;
    *n_bytes = n;
    return MT_OK;
}
