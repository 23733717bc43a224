/* ckpt_global.c — mt_ckpt_read_global / mt_ckpt_read_layers of ckpt_global.h: the tensor (or its
 * layer range) is one box; every piece of the kind is intersected with it (ckpt_layout.h) and
 * copied, bf16 widened to fp32. */
#include "core/ckpt/ckpt_global.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt/ckpt_files.h"
#include "core/dtype.h"

mt_status mt_ckpt_reader_open(mt_ckpt_reader *rd, const char *path) {
    mt_status st = MT_OK;
    memset(rd, 0, sizeof *rd);
    if (mt_ckpt_is_save_dir(path)) {
        snprintf(rd->dir, sizeof rd->dir, "%s", path);
    } else {
        int64_t it = 0;
        MT_CHECK(mt_ckpt_read_tracker(path, &it));
        mt_ckpt_iter_path(path, it, NULL, rd->dir, sizeof rd->dir);
    }
    MT_CHECK(mt_manifest_load(rd->dir, &rd->mf));
    rd->files = calloc((size_t)rd->mf.n_files, sizeof *rd->files);
    if (!rd->files) st = mt_errorf(MT_ERR_OOM, "%s: %d file records", rd->dir, rd->mf.n_files);
out:
    if (st != MT_OK) mt_ckpt_reader_close(rd);
    return st;
}

void mt_ckpt_reader_close(mt_ckpt_reader *rd) {
    if (rd->files)
        for (int i = 0; i < rd->mf.n_files; i++) mt_ckpt_file_close(&rd->files[i]);
    free(rd->files);
    rd->files = NULL;
    mt_manifest_free(&rd->mf);
}

mt_status mt_ckpt_read_global(mt_ckpt_reader *rd, const char *name, mt_ckpt_kind kind, float *out) {
    const int ti = mt_manifest_tensor_find(&rd->mf, name);
    if (ti < 0) return mt_errorf(MT_ERR_CONFIG, "%s: the save has no tensor %s", rd->dir, name);
    return mt_ckpt_read_layers(rd, name, kind, 0, (int)rd->mf.tensors[ti].shape[0], out);
}

mt_status mt_ckpt_read_layers(mt_ckpt_reader *rd, const char *name, mt_ckpt_kind kind, int l0, int n_layers,
                              float *out) {
    mt_status st = MT_OK;
    const int ti = mt_manifest_tensor_find(&rd->mf, name);
    if (ti < 0) return mt_errorf(MT_ERR_CONFIG, "%s: the save has no tensor %s", rd->dir, name);
    const mt_manifest_tensor *t = &rd->mf.tensors[ti];
    if (l0 < 0 || n_layers < 1 || (int64_t)l0 + n_layers > t->shape[0])
        return mt_errorf(MT_ERR_INTERNAL, "%s: layers [%d, %d) of tensor %s, which has %lld", rd->dir, l0,
                         l0 + n_layers, name, (long long)t->shape[0]);
    const mt_ckpt_box whole = {.l0 = l0, .nl = n_layers, .r0 = 0, .nr = (int)t->shape[1], .c0 = 0,
                               .nc = (int)t->shape[2],
                               .n = (size_t)n_layers * (size_t)t->shape[1] * (size_t)t->shape[2]};
    uint8_t *seen = calloc(whole.n ? whole.n : 1, 1);
    if (!seen) return mt_errorf(MT_ERR_OOM, "%s: coverage map of %s", rd->dir, name);
    uint64_t covered = 0, twice = 0;
    int any = 0;
    for (size_t k = 0; k < rd->mf.n_pieces; k++) {
        const mt_manifest_piece *q = &rd->mf.pieces[k];
        if (q->tensor != ti || q->kind != kind) continue;
        any = 1;
        MT_CHECK(mt_ckpt_file_open(rd->dir, &rd->mf, q->file, &rd->files[q->file]));
        mt_ckpt_copy c = {.src = rd->files[q->file].data + q->offset, .bf16 = !strcmp(q->dtype, "BF16"), .dst = out,
                         .seen = seen};
        covered += mt_ckpt_intersect(&q->box, q->f0, q->f1, &whole, mt_ckpt_copy_run, &c);
        twice += c.twice;
    }
    if (!any) {
        st = mt_errorf(MT_ERR_CONFIG, "%s: tensor %s has no %s pieces in this save", rd->dir, name,
                       mt_ckpt_kind_name(kind));
        goto out;
    }
    if (twice || covered != whole.n)
        st = mt_errorf(MT_ERR_DATA, "%s: tensor %s (%s): its pieces cover %" PRIu64 " of %zu elements (%" PRIu64
                       " twice): the manifest is inconsistent; load another iteration", rd->dir, name,
                       mt_ckpt_kind_name(kind), covered, whole.n, twice);
out:
    free(seen);
    return st;
}
