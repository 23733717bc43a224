/* ckpt_single.c — mt_ckpt_save_single of ckpt_single.h: the pieces are the pure function's (a
 * one-rank layout's: each tensor one box, written whole), so the file and the manifest look exactly
 * like a one-rank training save's, minus the optimizer kinds. */
#include "core/ckpt/ckpt_single.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/manifest.h"
#include "core/ckpt/safetensors.h"

mt_status mt_ckpt_save_single(const char *root, const mt_recipe *r, const mt_param_layout *pl, int64_t iteration,
                              const float *const *tensors) {
    mt_status st = MT_OK;
    char tmp[MT_CKPT_PATH_MAX], final[MT_CKPT_PATH_MAX], file[MT_CKPT_PATH_MAX + 64], man[MT_CKPT_PATH_MAX + 64];
    mt_manifest mf;
    memset(&mf, 0, sizeof mf);
    if (pl->tp != 1 || pl->pp != 1)
        return mt_errorf(MT_ERR_INTERNAL, "mt_ckpt_save_single: a one-rank layout is needed (tp %d, pp %d)", pl->tp, pl->pp);
    mt_st_tensor *ts = calloc((size_t)pl->n_tensors, sizeof *ts);
    char (*names)[48] = calloc((size_t)pl->n_tensors, sizeof *names);
    FILE *f = NULL;
    if (!ts || !names) {
        st = mt_errorf(MT_ERR_OOM, "checkpoint: tables of %d tensors", pl->n_tensors);
        goto out;
    }
    mt_ckpt_iter_path(root, iteration, ".tmp", tmp, sizeof tmp);
    mt_ckpt_iter_path(root, iteration, NULL, final, sizeof final);
    MT_CHECK(mt_mkdirs(root));
    MT_CHECK(mt_remove_flat_dir(tmp));
    if (mkdir(tmp, 0755)) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    struct stat sb;
    if (stat(final, &sb) == 0) {
        st = mt_errorf(MT_ERR_IO, "%s already exists: choose another folder, or remove it", final);
        goto out;
    }
    /* the one-rank pieces: with every tensor whole the piece of tensor ti is its whole box */
    mf.tensors = calloc((size_t)pl->n_tensors, sizeof *mf.tensors);
    mf.pieces = calloc((size_t)pl->n_tensors, sizeof *mf.pieces);
    mf.files = calloc(1, sizeof *mf.files);
    if (!mf.tensors || !mf.pieces || !mf.files) {
        st = mt_errorf(MT_ERR_OOM, "checkpoint: manifest tables");
        goto out;
    }
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        mt_manifest_tensor *t = &mf.tensors[ti];
        snprintf(t->name, sizeof t->name, "%s", pl->t[ti].name);
        mt_ckpt_global_shape(pl, ti, t->shape);
        t->stacked = pl->t[ti].stacked;
        const size_t n = (size_t)t->shape[0] * t->shape[1] * t->shape[2];
        snprintf(names[ti], sizeof names[ti], "%s.weight.%d", t->name, ti);
        ts[ti] = (mt_st_tensor){.name = names[ti], .dtype = "F32", .n_dims = 1, .shape = {(int64_t)n},
                                .data = tensors[ti], .n_bytes = n * 4};
        mt_manifest_piece *p = &mf.pieces[ti];
        p->tensor = ti;
        p->kind = MT_CK_WEIGHT;
        p->file = 0;
        p->n_bytes = n * 4;
        snprintf(p->dtype, sizeof p->dtype, "F32");
        snprintf(p->entry, sizeof p->entry, "%s", names[ti]);
        p->box = (mt_ckpt_box){.l0 = 0, .nl = (int)t->shape[0], .r0 = 0, .nr = (int)t->shape[1], .c0 = 0,
                               .nc = (int)t->shape[2], .n = n};
        p->f0 = 0;
        p->f1 = n;
    }
    mf.n_tensors = pl->n_tensors;
    mf.n_pieces = (size_t)pl->n_tensors;
    snprintf(file, sizeof file, "%s/rank_00000.safetensors", tmp);
    uint64_t bytes = 0, ds = 0;
    MT_CHECK(mt_st_write(file, ts, pl->n_tensors, r->checkpoint.fsync, &mf.files[0].crc32c, &bytes, &ds));
    snprintf(mf.files[0].name, sizeof mf.files[0].name, "rank_00000.safetensors");
    mf.files[0].bytes = bytes;
    mf.n_files = 1;
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        mf.pieces[ti].offset = ds;
        ds += mf.pieces[ti].n_bytes;
    }
    mf.iteration = iteration;
    mf.layout = (mt_manifest_layout){.world_size = 1, .tensor = 1, .pipeline = 1, .virtual_pipeline = 1, .data = 1,
                                     .context = 1, .expert = 1};
    MT_CHECK(mt_manifest_describe(&mf, r, "F32", pl->V));
    mf.lr = mf.max_lr;
    snprintf(man, sizeof man, "%s/%s", tmp, MT_MANIFEST_NAME);
    f = fopen(man, "w");
    if (!f) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", man, strerror(errno));
        goto out;
    }
    st = mt_manifest_write(f, &mf);
    if (st == MT_OK && (fflush(f) || (r->checkpoint.fsync && fsync(fileno(f)))))
        st = mt_errorf(MT_ERR_IO, "%s: write failed: %s", man, strerror(errno));
    if (fclose(f) && st == MT_OK) st = mt_errorf(MT_ERR_IO, "%s: write failed: %s", man, strerror(errno));
    f = NULL;
    if (st != MT_OK) goto out;
    if (r->checkpoint.fsync) MT_CHECK(mt_fsync_dir(tmp));
    if (rename(tmp, final)) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot rename into place: %s", final, strerror(errno));
        goto out;
    }
    if (r->checkpoint.fsync) MT_CHECK(mt_fsync_dir(root));
    MT_CHECK(mt_ckpt_write_tracker(root, iteration, r->checkpoint.fsync));
out:
    if (st != MT_OK) {
        char keep[4096];
        snprintf(keep, sizeof keep, "%s", mt_last_error());
        mt_remove_flat_dir(tmp);
        mt_errorf(st, "%s", keep);
    }
    free(ts);
    free(names);
    mt_manifest_free(&mf);
    return st;
}
