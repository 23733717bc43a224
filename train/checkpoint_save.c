/* checkpoint_save.c — one save (checkpoint.h). Steps, each rank:
 *   1. its pieces (core/ckpt/ckpt_layout.h: every element of every kind written once in the job,
 *      the writing spread over the data-parallel ranks) copied into a host snapshot;
 *   2. rank 0 clears and creates DIR/iter_N.tmp/; barrier;
 *   3. the rank writes rank_%05d.safetensors there and fsyncs it;
 *   4. one allgather of every rank's record (status, CRC-32C, sizes, coordinates and sharding);
 *      any failure: every rank returns an error naming the failed ranks;
 *   5. rank 0 writes the manifest (every rank's pieces recomputed from its record by the same pure
 *      function that chose them), fsyncs, renames iter_N.tmp/ to iter_N/, fsyncs DIR, replaces
 *      the tracker, deletes saves beyond checkpoint.keep; one allreduce shares its status.
 * A kill at any moment leaves the tracker naming the previous complete save. */
#include "train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/manifest.h"
#include "core/ckpt/safetensors.h"
#include "core/clock.h"
#include "parallel/grad_sync.h"
#include "train/moe_bias.h"
#include "train/optim.h"

/* What each rank tells rank 0 (int32 words, exchanged as F32-sized elements). */
typedef struct {
    int32_t status;
    uint32_t crc;
    uint32_t bytes_lo, bytes_hi, ds_lo, ds_hi;
    int32_t tp_rank, stage, ep_rank;
    int32_t shards[MT_GBUFS], shard[MT_GBUFS], dp_size[MT_GBUFS], dp_rank[MT_GBUFS];
} rank_record;
#define REC_WORDS (sizeof(rank_record) / 4)
_Static_assert(sizeof(rank_record) <= sizeof(((mt_ckpt_saver *)0)->me), "mt_ckpt_saver.me too small");

static mt_ckpt_rank this_rank(const mt_model *m, const mt_parallel_state *ps) {
    mt_ckpt_rank rk;
    memset(&rk, 0, sizeof rk);
    rk.rank = ps->rank;
    rk.tp_rank = ps->coord[MT_AX_TP];
    rk.stage = ps->grid.pp > 1 ? ps->coord[MT_AX_PP] : 0;
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_group *g = mt_pstate_group(ps, mt_grad_buffer_group((mt_grad_buffer_id)b));
        rk.shards[b] = m->ol.reg[b].shards;
        rk.shard[b] = m->ol.reg[b].shard;
        rk.dp_size[b] = g->size;
        rk.dp_rank[b] = g->rank;
    }
    return rk;
}

static void entry_name(const mt_param_layout *pl, const mt_ckpt_piece *p, size_t seq, char *buf, size_t n) {
    snprintf(buf, n, "%s.%s.%zu", pl->t[p->ti].name, mt_ckpt_kind_name(p->kind), seq);
}

static const char *piece_dtype(const mt_ckpt_piece *p, mt_dtype act) {
    return p->kind == MT_CK_WEIGHT && act == MT_BF16 ? "BF16" : "F32";
}

/* the pieces and the snapshot buffer, once per run; the buffer's pages are touched here, so that
 * no save pays for first-touch page faults (a second per GiB here) while training waits */
static mt_status prepare(mt_ckpt_saver *s, const mt_model *m, const mt_ckpt_rank *rk) {
    if (!s->pieces) {
        size_t n = mt_ckpt_rank_pieces(&m->pl, &m->ol, rk, m->act, NULL, 0);
        if (n == (size_t)-1) return mt_errorf(MT_ERR_UNSUPPORTED, "checkpoint: a tensor has too many pieces to save");
        s->pieces = calloc(n ? n : 1, sizeof *s->pieces);
        if (!s->pieces) return mt_errorf(MT_ERR_OOM, "checkpoint: %zu pieces", n);
        s->n_pieces = mt_ckpt_rank_pieces(&m->pl, &m->ol, rk, m->act, s->pieces, n);
        uint64_t bytes = 0;
        for (size_t k = 0; k < s->n_pieces; k++) bytes += s->pieces[k].n_bytes;
        s->snapshot_bytes = bytes;
        s->snapshot = malloc(bytes ? bytes : 1);
        if (!s->snapshot)
            return mt_errorf(MT_ERR_OOM, "checkpoint: cannot allocate a %.1f MiB host snapshot of this rank's state",
                             bytes / 1048576.0);
        memset(s->snapshot, 0, bytes);
    }
    return MT_OK;
}

mt_status mt_ckpt_saver_prepare(mt_ckpt_saver *s, const mt_model *m, const mt_parallel_state *ps) {
    const mt_ckpt_rank rk = this_rank(m, ps);
    return prepare(s, m, &rk);
}

/* step 1: the snapshot of this rank's pieces */
static mt_status snapshot(mt_ckpt_saver *s, const mt_model *m, const mt_ckpt_rank *rk) {
    mt_status st = MT_OK;
    mt_backend *be = m->be;
    MT_CHECK(prepare(s, m, rk));
    const size_t ab = mt_dtype_bytes(m->act);
    char *dst = s->snapshot;
    for (size_t k = 0; k < s->n_pieces; k++) {
        const mt_ckpt_piece *p = &s->pieces[k];
        const size_t n = p->f1 - p->f0;
        const char *src = NULL;
        switch (p->kind) {
        case MT_CK_WEIGHT: src = (const char *)m->params + p->flat * ab; break;
        case MT_CK_MASTER: src = (const char *)m->master + p->opt * 4; break;
        case MT_CK_EXP_AVG: src = (const char *)m->adam_m + p->opt * 4; break;
        default: src = (const char *)m->adam_v + p->opt * 4; break;
        }
        MT_CHECK(be->i->copy_d2h(be, dst, src, p->n_bytes));
        dst += p->n_bytes;
        (void)n;
    }
    MT_CHECK(be->i->sync(be));
out:
    return st;
}

/* step 3 */
static mt_status write_rank_file(const mt_ckpt_saver *s, const mt_model *m, const char *tmp, int rank, int do_fsync,
                                 uint32_t *crc, uint64_t *bytes, uint64_t *data_start) {
    mt_status st = MT_OK;
    char path[MT_CKPT_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/rank_%05d.safetensors", tmp, rank);
    mt_st_tensor *ts = calloc(s->n_pieces ? s->n_pieces : 1, sizeof *ts);
    char (*names)[64] = calloc(s->n_pieces ? s->n_pieces : 1, sizeof *names);
    if (!ts || !names) {
        st = mt_errorf(MT_ERR_OOM, "checkpoint: entry table of %zu pieces", s->n_pieces);
        goto out;
    }
    const char *data = s->snapshot;
    for (size_t k = 0; k < s->n_pieces; k++) {
        const mt_ckpt_piece *p = &s->pieces[k];
        entry_name(&m->pl, p, k, names[k], sizeof names[k]);
        ts[k] = (mt_st_tensor){.name = names[k], .dtype = piece_dtype(p, m->act), .n_dims = 1,
                               .shape = {(int64_t)(p->f1 - p->f0)}, .data = data, .n_bytes = p->n_bytes};
        data += p->n_bytes;
    }
    st = mt_st_write(path, ts, (int)s->n_pieces, do_fsync, crc, bytes, data_start);
out:
    free(ts);
    free(names);
    return st;
}

/* step 5, rank 0: the manifest from every rank's record */
static mt_status build_manifest(const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps,
                                const mt_ckpt_state *cs, const rank_record *recs, mt_manifest *mf) {
    mt_status st = MT_OK;
    const int world = ps->size, pp = ps->grid.pp > 1 ? ps->grid.pp : 1;
    mt_param_layout *stage_pl = calloc((size_t)pp, sizeof *stage_pl);
    mt_ckpt_piece *tmp = NULL;
    size_t tmp_cap = 0, cap = 0;
    if (!stage_pl) return mt_errorf(MT_ERR_OOM, "checkpoint manifest: %d stage layouts", pp);
    memset(mf, 0, sizeof *mf);
    mf->iteration = cs->iteration;
    mf->consumed_samples = cs->consumed_samples;
    mf->optimizer_steps = cs->optimizer_steps;
    mf->skipped_iterations = cs->skipped_iterations;
    snprintf(mf->rerun_state, sizeof mf->rerun_state, "%s", cs->rerun_state);
    mf->lr = mt_lr_at(&r->optimizer, cs->iteration > 0 ? cs->iteration : 1, r->training.iters);
    mf->layout = (mt_manifest_layout){.world_size = world, .tensor = m->pl.tp, .pipeline = pp,
                                      .virtual_pipeline = m->pl.vpp > 0 ? m->pl.vpp : 1,
                                      .data = mt_pstate_group(ps, MT_PG_DP)->size,
                                      .context = mt_pstate_group(ps, MT_PG_CP)->size,
                                      .expert = mt_pstate_group(ps, MT_PG_EP)->size, .sequence_parallel = m->pl.sp,
                                      .distributed_optimizer = m->ol.reg[MT_GBUF_DENSE].shards > 1};
    MT_CHECK(mt_manifest_describe(mf, r, m->act == MT_BF16 ? "BF16" : "F32", m->pl.V));
    for (int sg = 0; sg < pp; sg++) MT_CHECK(mt_param_layout_build_stage(r, sg, &stage_pl[sg]));
    /* logical tensors: every stage's own tensors (not the last stage's copy of wte), by first appearance */
    mf->tensors = calloc(MT_MAX_PARAM_TENSORS, sizeof *mf->tensors);
    mf->files = calloc((size_t)world, sizeof *mf->files);
    if (!mf->tensors || !mf->files) {
        st = mt_errorf(MT_ERR_OOM, "checkpoint manifest tables");
        goto out;
    }
    for (int sg = 0; sg < pp; sg++)
        for (int ti = 0; ti < stage_pl[sg].n_tensors; ti++) {
            const mt_param_tensor *t = &stage_pl[sg].t[ti];
            if (t->pp_copy || mt_manifest_tensor_find(mf, t->name) >= 0) continue;
            mt_manifest_tensor *mt = &mf->tensors[mf->n_tensors++];
            snprintf(mt->name, sizeof mt->name, "%s", t->name);
            mt_ckpt_global_shape(&stage_pl[sg], ti, mt->shape);
            mt->stacked = t->stacked;
        }
    for (int rank = 0; rank < world; rank++) {
        const rank_record *rc = &recs[rank];
        mt_manifest_file *f = &mf->files[rank];
        snprintf(f->name, sizeof f->name, "rank_%05d.safetensors", rank);
        f->bytes = (uint64_t)rc->bytes_lo | (uint64_t)rc->bytes_hi << 32;
        f->crc32c = rc->crc;
        mf->n_files++;
        if (rc->stage < 0 || rc->stage >= pp) {
            st = mt_errorf(MT_ERR_INTERNAL, "checkpoint manifest: rank %d reports stage %d of %d", rank, rc->stage, pp);
            goto out;
        }
        mt_ckpt_rank rk = {.rank = rank, .tp_rank = rc->tp_rank, .stage = rc->stage};
        for (int b = 0; b < MT_GBUFS; b++) {
            rk.shards[b] = rc->shards[b], rk.shard[b] = rc->shard[b];
            rk.dp_size[b] = rc->dp_size[b], rk.dp_rank[b] = rc->dp_rank[b];
        }
        mt_param_layout rank_pl = stage_pl[rc->stage]; /* that rank's experts (MoE) */
        rank_pl.ep_rank = rc->ep_rank;
        const mt_param_layout *pl = &rank_pl;
        mt_opt_layout ol;
        mt_param_layout_place_buffers(&rank_pl, rk.shards);
        MT_CHECK(mt_opt_layout_build(pl, rk.shards, rk.shard, &ol));
        size_t n = mt_ckpt_rank_pieces(pl, &ol, &rk, m->act, NULL, 0);
        if (n > tmp_cap) {
            free(tmp);
            tmp = calloc(n, sizeof *tmp);
            tmp_cap = n;
            if (!tmp) {
                st = mt_errorf(MT_ERR_OOM, "checkpoint manifest: %zu pieces", n);
                goto out;
            }
        }
        n = mt_ckpt_rank_pieces(pl, &ol, &rk, m->act, tmp, n);
        if (mf->n_pieces + n > cap) {
            size_t nc = (mf->n_pieces + n) * 2;
            mt_manifest_piece *np = realloc(mf->pieces, nc * sizeof *np);
            if (!np) {
                st = mt_errorf(MT_ERR_OOM, "checkpoint manifest: %zu pieces", nc);
                goto out;
            }
            mf->pieces = np;
            cap = nc;
        }
        uint64_t off = (uint64_t)rc->ds_lo | (uint64_t)rc->ds_hi << 32;
        for (size_t k = 0; k < n; k++) {
            mt_manifest_piece *q = &mf->pieces[mf->n_pieces++];
            memset(q, 0, sizeof *q);
            q->tensor = mt_manifest_tensor_find(mf, pl->t[tmp[k].ti].name);
            q->kind = tmp[k].kind;
            q->file = rank;
            q->offset = off;
            q->n_bytes = tmp[k].n_bytes;
            snprintf(q->dtype, sizeof q->dtype, "%s", piece_dtype(&tmp[k], m->act));
            entry_name(pl, &tmp[k], k, q->entry, sizeof q->entry);
            q->box = tmp[k].box;
            q->f0 = tmp[k].f0;
            q->f1 = tmp[k].f1;
            off += tmp[k].n_bytes;
        }
    }
out:
    free(stage_pl);
    free(tmp);
    return st;
}

/* rank 0: manifest, publish, tracker, retention */
static mt_status publish(const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps, const mt_ckpt_state *cs,
                         const rank_record *recs, const char *tmp, const float *expert_bias) {
    mt_status st = MT_OK;
    const char *root = r->checkpoint.dir;
    const int do_fsync = r->checkpoint.fsync;
    mt_manifest mf;
    char path[MT_CKPT_PATH_MAX + 64], part[MT_CKPT_PATH_MAX + 80], final[MT_CKPT_PATH_MAX], old[MT_CKPT_PATH_MAX];
    FILE *f = NULL;
    MT_CHECK(build_manifest(r, m, ps, cs, recs, &mf));
    if (expert_bias) { /* the whole model's, gathered by every rank when the save began */
        const size_t n = (size_t)m->pl.L_global * m->pl.E;
        if (!(mf.expert_bias = malloc(n * sizeof *mf.expert_bias))) {
            st = mt_errorf(MT_ERR_OOM, "checkpoint manifest: the expert bias (%zu floats)", n);
            goto out;
        }
        memcpy(mf.expert_bias, expert_bias, n * sizeof *mf.expert_bias);
        mf.expert_bias_layers = m->pl.L_global;
        mf.expert_bias_experts = m->pl.E;
    }
    snprintf(path, sizeof path, "%s/%s", tmp, MT_MANIFEST_NAME);
    snprintf(part, sizeof part, "%s.part", path);
    f = fopen(part, "w");
    if (!f) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", part, strerror(errno));
        goto out;
    }
    /* a failed fprintf (ENOSPC when a buffer is flushed) leaves errno set: report it with the file */
    int failed = mt_manifest_write(f, &mf) != MT_OK || fflush(f) || (do_fsync && fsync(fileno(f)));
    int e = errno;
    if (fclose(f) && !failed) failed = 1, e = errno;
    f = NULL;
    if (failed) {
        st = mt_errorf(MT_ERR_IO, "%s: write failed: %s%s; the previous checkpoint is untouched", part, strerror(e),
                       e == ENOSPC || e == EDQUOT ? " (disk full)" : "");
        goto out;
    }
    if (rename(part, path)) {
        st = mt_errorf(MT_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
        goto out;
    }
    if (do_fsync) MT_CHECK(mt_fsync_dir(tmp));
    mt_ckpt_iter_path(root, cs->iteration, NULL, final, sizeof final);
    mt_ckpt_iter_path(root, cs->iteration, ".old", old, sizeof old);
    struct stat sb;
    int replace = stat(final, &sb) == 0; /* the same iteration saved again */
#ifdef RENAME_EXCHANGE
    /* swapped in one step: a two-rename replace killed in between would leave no iter_N/ while the
     * tracker may name N (a run that saves the tracker's iteration again, e.g. from --ckpt-step);
     * the earlier save is then in tmp/, removed below (or by the next save of this iteration) */
    if (replace && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        if (do_fsync) MT_CHECK(mt_fsync_dir(root));
        MT_CHECK(mt_ckpt_write_tracker(root, cs->iteration, do_fsync));
        MT_CHECK(mt_remove_flat_dir(tmp));
        goto retention;
    }
#endif
    if (replace) { /* no exchange on this file system: move the old one aside first */
        MT_CHECK(mt_remove_flat_dir(old));
        if (rename(final, old)) {
            st = mt_errorf(MT_ERR_IO, "%s: cannot move the earlier save of this iteration aside: %s", final,
                           strerror(errno));
            goto out;
        }
    }
    if (rename(tmp, final)) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot rename the finished save into place: %s", final, strerror(errno));
        if (replace) rename(old, final); /* the earlier save back under its name */
        goto out;
    }
    if (do_fsync) MT_CHECK(mt_fsync_dir(root));
    MT_CHECK(mt_ckpt_write_tracker(root, cs->iteration, do_fsync));
    if (replace) MT_CHECK(mt_remove_flat_dir(old));
#ifdef RENAME_EXCHANGE
retention:
#endif
    if (r->checkpoint.keep > 0) { /* retention: only complete saves count, the new one is among them */
        MT_CHECK(mt_ckpt_apply_keep(root, r->checkpoint.keep, cs->iteration));
        int n_swept = 0; /* and what interrupted removals left (this rank 0 holds the folder's lock) */
        MT_CHECK(mt_ckpt_sweep_remnants(root, cs->iteration, &n_swept));
    }
out:
    mt_manifest_free(&mf);
    return st;
}

/* every rank learns whether any failed (a max over the world of a float flag) */
static mt_status agree(const mt_parallel_state *ps, mt_backend *be, void *xfer, int failed, int *any) {
    mt_status st = MT_OK;
    const mt_group *w = mt_pstate_group(ps, MT_PG_WORLD);
    float flag = failed ? 1.0f : 0.0f;
    *any = failed;
    if (w->size <= 1) return MT_OK;
    MT_CHECK(be->i->copy_h2d(be, xfer, &flag, 4));
    MT_CHECK(w->comm->i->allreduce(w->comm, xfer, xfer, 1, MT_F32, MT_RED_MAX));
    MT_CHECK(be->i->copy_d2h(be, &flag, xfer, 4));
    *any = flag > 0;
out:
    return st;
}

/* step 3 for one rank, inline or on the writer thread: the record's status, CRC and sizes */
static void write_step(mt_ckpt_saver *s) {
    uint64_t bytes = 0, ds = 0;
    rank_record *me = (rank_record *)s->me;
    mt_status local = write_rank_file(s, s->m, s->tmp, s->rank, s->r->checkpoint.fsync, &me->crc, &bytes, &ds);
    if (local != MT_OK) snprintf(s->err, sizeof s->err, "%s", mt_last_error());
    me->status = (int32_t)local;
    me->bytes_lo = (uint32_t)bytes, me->bytes_hi = (uint32_t)(bytes >> 32);
    me->ds_lo = (uint32_t)ds, me->ds_hi = (uint32_t)(ds >> 32);
}

static void *writer_thread(void *arg) {
    mt_ckpt_saver *s = arg;
    write_step(s);
    atomic_store(&s->written, 1);
    return NULL;
}

/* steps 4 and 5 (collective) */
static mt_status finish(mt_ckpt_saver *s, const mt_parallel_state *ps, FILE *log) {
    mt_status st = MT_OK, local = MT_OK;
    const mt_recipe *r = s->r;
    const mt_model *m = s->m;
    mt_backend *be = m->be;
    const mt_group *w = mt_pstate_group(ps, MT_PG_WORLD);
    const rank_record me = *(const rank_record *)s->me;
    const double t0 = mt_clock_s();
    int any = 0;
    rank_record *recs = calloc((size_t)ps->size, sizeof *recs);
    if (!recs) return mt_errorf(MT_ERR_OOM, "checkpoint: %d rank records", ps->size);
    if (w->size > 1) {
        char *x = s->xfer;
        MT_CHECK(be->i->copy_h2d(be, x, &me, sizeof me));
        MT_CHECK(w->comm->i->allgather(w->comm, x, x + sizeof me, REC_WORDS, MT_F32));
        MT_CHECK(be->i->copy_d2h(be, recs, x + sizeof me, (size_t)ps->size * sizeof me));
    } else {
        recs[0] = me;
    }
    s->job_bytes = 0;
    for (int i = 0; i < ps->size; i++) s->job_bytes += (uint64_t)recs[i].bytes_lo | (uint64_t)recs[i].bytes_hi << 32;
    char failed[256] = "";
    size_t used = 0;
    for (int i = 0; i < ps->size; i++)
        if (recs[i].status != MT_OK && used + 16 < sizeof failed)
            used += (size_t)snprintf(failed + used, sizeof failed - used, "%s%d", used ? ", " : "", i);
    if (used) {
        if (me.status != MT_OK) {
            st = mt_errorf((mt_status)me.status, "%s", s->err);
        } else {
            st = mt_errorf(MT_ERR_IO, "checkpoint: rank(s) %s could not write their files of iteration %" PRId64
                           " (their messages are in the log); the previous checkpoint is untouched", failed,
                           s->cs.iteration);
        }
        if (ps->rank == 0) mt_remove_flat_dir(s->tmp);
        goto out;
    }
    if (ps->rank == 0) {
        local = publish(r, m, ps, &s->cs, recs, s->tmp, m->moe_bias ? s->expert_bias : NULL);
        if (local != MT_OK) {
            snprintf(s->err, sizeof s->err, "%s", mt_last_error());
            /* a save that was not published (e.g. its manifest did not fit on a full disk) must not keep
             * its files' space: an iter_N.tmp/ is otherwise removed only by a later save of the same N */
            mt_remove_flat_dir(s->tmp);
        }
    }
    MT_CHECK(agree(ps, be, s->xfer, local != MT_OK, &any));
    if (any) {
        st = local != MT_OK ? mt_errorf(local, "%s", s->err)
                            : mt_errorf(MT_ERR_IO, "checkpoint: rank 0 could not publish the save of iteration %" PRId64
                                        " (its message is in the log)", s->cs.iteration);
        goto out;
    }
    s->stall_seconds += mt_clock_s() - t0;
    s->seconds = mt_clock_s() - s->t_begin;
    if (log)
        fprintf(log, "saved checkpoint at iteration %" PRId64 " to %s: %.1f MiB in %.2f s (%.0f MiB/s; snapshot %.2f s; "
                "training stalled %.2f s%s)\n", s->cs.iteration, r->checkpoint.dir, s->job_bytes / 1048576.0, s->seconds,
                s->seconds > 0 ? s->job_bytes / 1048576.0 / s->seconds : 0.0, s->snapshot_seconds, s->stall_seconds,
                s->async ? ", written in the background" : "");
out:
    s->pending = 0;
    free(recs);
    return st;
}

mt_status mt_ckpt_save_poll(mt_ckpt_saver *s, const mt_parallel_state *ps, int wait, FILE *log, int *done) {
    mt_status st = MT_OK;
    *done = !s->pending;
    if (!s->pending) return MT_OK;
    const double t0 = mt_clock_s();
    if (wait && s->thread_live) {
        pthread_join(s->thread, NULL);
        s->thread_live = 0;
    }
    int busy = !atomic_load(&s->written), any = busy;
    /* every rank asks at the same iterations (pending is the same everywhere): all written? */
    MT_CHECK(agree(ps, s->m->be, s->xfer, busy, &any));
    s->stall_seconds += mt_clock_s() - t0;
    if (any) return MT_OK;
    if (s->thread_live) {
        pthread_join(s->thread, NULL);
        s->thread_live = 0;
    }
    *done = 1;
    return finish(s, ps, log);
out:
    return st;
}

mt_status mt_ckpt_save_begin(mt_ckpt_saver *s, const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps,
                             const mt_ckpt_state *cs, int async, FILE *log) {
    mt_status st = MT_OK, local = MT_OK;
    mt_backend *be = m->be;
    int any = 0, done = 0;
    if (s->pending) MT_CHECK(mt_ckpt_save_poll(s, ps, 1, log, &done)); /* one save in flight at a time */
    s->t_begin = mt_clock_s();
    s->stall_seconds = 0;
    s->r = r;
    s->m = m;
    s->cs = *cs;
    s->rank = ps->rank;
    s->async = async;
    s->err[0] = 0;
    mt_ckpt_iter_path(r->checkpoint.dir, cs->iteration, ".tmp", s->tmp, sizeof s->tmp);
    const mt_ckpt_rank rk = this_rank(m, ps);
    if (!s->xfer) {
        s->xfer_bytes = (size_t)ps->size * sizeof(rank_record) * 2;
        MT_CHECK(be->i->alloc(be, s->xfer_bytes, &s->xfer));
    }
    if (m->moe_bias) { /* the expert bias: state outside the tensors, every stage's layers to every rank */
        if (!s->expert_bias && !(s->expert_bias = malloc((size_t)m->pl.L_global * m->pl.E * sizeof *s->expert_bias)))
            return mt_errorf(MT_ERR_OOM, "checkpoint: the expert bias (%d layers x %d experts)", m->pl.L_global,
                             m->pl.E);
        MT_CHECK(mt_moe_bias_gather(m, ps, s->expert_bias));
    }
    /* 1 + 2: snapshot; rank 0 prepares the folder. A local failure still joins the exchange. */
    local = snapshot(s, m, &rk);
    s->snapshot_seconds = mt_clock_s() - s->t_begin;
    if (ps->rank == 0 && local == MT_OK) {
        local = mt_mkdirs(r->checkpoint.dir);
        if (local == MT_OK) local = mt_remove_flat_dir(s->tmp);
        if (local == MT_OK && mkdir(s->tmp, 0755))
            local = mt_errorf(MT_ERR_IO, "%s: cannot create the save folder: %s", s->tmp, strerror(errno));
    }
    if (local != MT_OK) snprintf(s->err, sizeof s->err, "%s", mt_last_error());
    MT_CHECK(agree(ps, be, s->xfer, local != MT_OK, &any));
    if (any) {
        st = local != MT_OK ? mt_errorf(local, "%s", s->err)
                            : mt_errorf(MT_ERR_IO, "checkpoint: another rank could not prepare the save of iteration "
                                        "%" PRId64 " (its message is in its log)", cs->iteration);
        goto out;
    }
    /* 3: this rank's file, on the writer thread or here */
    rank_record *me = (rank_record *)s->me;
    memset(me, 0, sizeof *me);
    me->tp_rank = rk.tp_rank, me->stage = rk.stage, me->ep_rank = m->pl.ep_rank;
    for (int b = 0; b < MT_GBUFS; b++) {
        me->shards[b] = rk.shards[b], me->shard[b] = rk.shard[b];
        me->dp_size[b] = rk.dp_size[b], me->dp_rank[b] = rk.dp_rank[b];
    }
    s->pending = 1;
    atomic_store(&s->written, 0);
    if (async && pthread_create(&s->thread, NULL, writer_thread, s) == 0) {
        s->thread_live = 1;
    } else {
        s->async = 0;
        write_step(s);
        atomic_store(&s->written, 1);
    }
    s->stall_seconds = mt_clock_s() - s->t_begin;
out:
    return st;
}

mt_status mt_ckpt_save(mt_ckpt_saver *s, const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps,
                       const mt_ckpt_state *cs, FILE *log) {
    mt_status st = MT_OK;
    int done = 0;
    MT_CHECK(mt_ckpt_save_begin(s, r, m, ps, cs, 0, log));
    MT_CHECK(mt_ckpt_save_poll(s, ps, 1, log, &done));
out:
    return st;
}

void mt_ckpt_saver_free(mt_ckpt_saver *s, mt_backend *be) {
    if (s->thread_live) pthread_join(s->thread, NULL); /* an unfinished save is abandoned: its .tmp stays */
    if (s->xfer && be) be->i->free(be, s->xfer);
    free(s->pieces);
    free(s->snapshot);
    free(s->expert_bias);
    if (s->lock_fd_plus1) close(s->lock_fd_plus1 - 1);
    memset(s, 0, sizeof *s);
}
