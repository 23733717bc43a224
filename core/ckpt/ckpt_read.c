/* ckpt_read.c — mt_ckpt_file_open of ckpt_read.h: open, fstat, mmap, CRC-32C, header, entries. */
#include "core/ckpt/ckpt_read.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/crc32c.h"
#include "core/dtype.h"
#include "core/file_read.h"

mt_status mt_ckpt_file_open(const char *dir, const mt_manifest *mf, int fi, mt_ckpt_file *f) {
    mt_status st = MT_OK;
    const mt_manifest_file *e = &mf->files[fi];
    if (f->open) return MT_OK;
    mt_ckpt_file_close(f);
    char path[MT_CKPT_PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    int fd, open_errno;
    struct stat sb;
    st = mt_open_regular(path, &fd, &sb, &open_errno);
    if (st != MT_OK && open_errno)
        return mt_errorf(MT_ERR_IO, "%s: cannot open: %s (a file of this save is missing: the save is "
                         "incomplete; load another iteration)", path, strerror(open_errno));
    if (st != MT_OK) return st;
    if ((uint64_t)sb.st_size != e->bytes) {
        close(fd);
        return mt_errorf(MT_ERR_DATA, "%s: %lld bytes, the manifest says %" PRIu64 ": the file is truncated or was "
                         "replaced; load another iteration", path, (long long)sb.st_size, e->bytes);
    }
    f->n_bytes = (size_t)sb.st_size;
    void *p = f->n_bytes ? mmap(NULL, f->n_bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (f->n_bytes && p == MAP_FAILED) return mt_errorf(MT_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    f->data = p;
    const uint32_t crc = mt_crc32c(0, f->data, f->n_bytes);
    if (crc != e->crc32c) {
        st = mt_errorf(MT_ERR_DATA, "%s: CRC-32C %08x, the manifest says %08x: the file is corrupt; load another "
                       "iteration", path, crc, e->crc32c);
        goto out;
    }
    MT_CHECK(mt_st_parse(f->data, f->n_bytes, path, &f->hdr));
    for (size_t k = 0; k < mf->n_pieces; k++) {
        const mt_manifest_piece *q = &mf->pieces[k];
        if (q->file != fi) continue;
        const mt_st_entry *x = mt_st_find(&f->hdr, q->entry);
        if (!x || x->begin != q->offset || x->end - x->begin != q->n_bytes || strcmp(x->dtype, q->dtype)) {
            st = mt_errorf(MT_ERR_DATA, "%s: entry '%s' of tensor %s is %s in the file than in the manifest; the save "
                           "is inconsistent: load another iteration", path, q->entry, mf->tensors[q->tensor].name,
                           x ? "elsewhere or of another size" : "missing");
            goto out;
        }
    }
    f->open = 1;
out:
    if (st != MT_OK) mt_ckpt_file_close(f);
    return st;
}

void mt_ckpt_file_close(mt_ckpt_file *f) {
    if (f->data) munmap((void *)f->data, f->n_bytes);
    mt_st_header_free(&f->hdr);
    memset(f, 0, sizeof *f);
}

void mt_ckpt_copy_run(void *ctx, size_t s, size_t d, size_t n) {
    mt_ckpt_copy *c = ctx;
    for (size_t i = 0; i < n; i++) {
        c->twice += c->seen[d + i];
        c->seen[d + i] = 1;
    }
    if (c->bf16) {
        const uint8_t *p = c->src + s * 2;
        for (size_t i = 0; i < n; i++) {
            uint16_t b;
            memcpy(&b, p + 2 * i, 2);
            c->dst[d + i] = mt_bf16_to_f32(b);
        }
    } else {
        memcpy(c->dst + d, c->src + s * 4, n * 4);
    }
}
