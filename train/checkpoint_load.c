/* checkpoint_load.c — loading a save into this rank's model, whatever layout saved it
 * (checkpoint.h). For each local tensor and each kind it needs, the local tensor is assembled in
 * host memory from the pieces that intersect its boxes (core/ckpt/ckpt_layout.h), then uploaded:
 * weights whole, optimizer state for this rank's optimizer piece only. Each file it reads is
 * opened through core/ckpt/ckpt_read.h (size, CRC-32C, header and entries checked first).
 * Coverage is counted: every element this rank needs must come from exactly one piece (rows
 * past the real vocabulary, padding that differs between tp sizes, keep their initial values).
 * Rule: a model that does not match the checkpoint is an error naming the tensor, never a
 * partial load. */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/ckpt_read.h"
#include "core/ckpt/manifest.h"
#include "core/clock.h"
#include "core/data/tokenizer.h"
#include "train/moe_bias.h"

int mt_restart_count(const char **var) {
    static const char *const vars[] = {"MT_RESTART_COUNT", "SLURM_RESTART_COUNT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) {
            if (var) *var = vars[i];
            return atoi(v);
        }
    }
    if (var) *var = vars[0];
    return 0;
}

mt_status mt_ckpt_resolve(const mt_recipe *r, char *path, size_t n_bytes, int *found, char *note, size_t note_bytes) {
    const char *root = r->checkpoint.load;
    const char *var;
    const int restart = mt_restart_count(&var);
    note[0] = 0;
    *found = 0;
    if (!root[0] && restart > 0 && r->checkpoint.dir[0]) root = r->checkpoint.dir;
    if (!root[0]) return MT_OK;
    struct stat sb;
    if (stat(root, &sb) || !S_ISDIR(sb.st_mode)) {
        if (root == r->checkpoint.dir) { /* a restart before the first save: start again */
            snprintf(note, note_bytes, "restart %d (%s): no checkpoint in %s yet, starting from scratch", restart, var,
                     root);
            return MT_OK;
        }
        if (!strcmp(root, r->checkpoint.dir)) { /* Megatron's `--save X --load X` on the first run */
            snprintf(note, note_bytes, "note: %s does not exist yet (checkpoint.load is checkpoint.dir): starting "
                     "from scratch", root);
            return MT_OK;
        }
        return mt_errorf(MT_ERR_IO, "checkpoint.load: %s: %s; give the folder --save wrote (or one iter_* folder in it)",
                         root, strerror(errno ? errno : ENOTDIR));
    }
    if (mt_ckpt_is_save_dir(root)) { /* one save's own folder */
        snprintf(path, n_bytes, "%s", root);
        *found = 1;
        return MT_OK;
    }
    int64_t it = r->checkpoint.load_iteration;
    if (it <= 0) {
        mt_status st = mt_ckpt_read_tracker(root, &it);
        if (st == MT_ERR_IO && mt_ckpt_list_saves(root, NULL, 0) == 0) {
            mt_clear_error(); /* Megatron: no tracker, no save: a fresh start, said out loud */
            snprintf(note, note_bytes, "note: %s holds no checkpoint yet (no %s): starting from scratch", root,
                     MT_CKPT_TRACKER);
            return MT_OK;
        }
        if (st != MT_OK) return st;
    }
    mt_ckpt_iter_path(root, it, NULL, path, n_bytes);
    if (!mt_ckpt_is_save_dir(path)) {
        int64_t its[8];
        int n = mt_ckpt_list_saves(root, its, 8);
        return mt_errorf(MT_ERR_DATA, "%s: no complete save of iteration %" PRId64 " (no %s there)%s; %d complete "
                         "save(s) in %s%s", path, it, MT_MANIFEST_NAME,
                         r->checkpoint.load_iteration > 0 ? "" : " although the tracker names it", n < 0 ? 0 : n, root,
                         n > 0 ? ": load one with checkpoint.load_iteration / --ckpt-step" : "");
    }
    *found = 1;
    return MT_OK;
}

typedef struct {
    const char *dir;
    mt_manifest mf;
    mt_ckpt_file *files;
    int *first, *count; /* pieces of each manifest tensor: [first, first + count) */
    uint8_t *seen;      /* assemble's coverage map of one local tensor */
} loader;

static void loader_free(loader *L) {
    if (L->files)
        for (int i = 0; i < L->mf.n_files; i++) mt_ckpt_file_close(&L->files[i]);
    free(L->files);
    free(L->first);
    free(L->count);
    free(L->seen);
    mt_manifest_free(&L->mf);
}

/* rows of a vocabulary tensor past the real vocabulary are padding */
static int is_vocab_tensor(const mt_param_layout *pl, int ti) { return ti == pl->idx.wte || ti == pl->idx.lm_head; }

/* Assembles local tensor ti of kind `kind` from the manifest tensor mi into buf (t->n floats,
 * pre-filled by the caller). */
static mt_status assemble(loader *L, const mt_model *m, int tp_rank, int ti, int mi, mt_ckpt_kind kind, float *buf,
                          mt_ckpt_box *boxes, int nbox) {
    mt_status st = MT_OK;
    const mt_param_tensor *t = &m->pl.t[ti];
    const mt_manifest_tensor *mt = &L->mf.tensors[mi];
    uint64_t covered = 0, needed = 0, twice = 0;
    (void)tp_rank;
    memset(L->seen, 0, t->n); /* counts alone would pass a piece given twice in place of another */
    /* what must be covered: the boxes' elements inside the saved shape (a vocabulary tensor saved at
     * another tp has other padding rows; check_model made sure the real vocabulary is inside) */
    for (int b = 0; b < nbox; b++) {
        const mt_ckpt_box lim = {.l0 = 0, .nl = (int)mt->shape[0], .r0 = 0, .nr = (int)mt->shape[1], .c0 = 0,
                                 .nc = (int)mt->shape[2]};
        const int la = boxes[b].l0 > lim.l0 ? boxes[b].l0 : lim.l0;
        const int lb = boxes[b].l0 + boxes[b].nl < lim.nl ? boxes[b].l0 + boxes[b].nl : lim.nl;
        const int ra = boxes[b].r0, rb = boxes[b].r0 + boxes[b].nr < lim.nr ? boxes[b].r0 + boxes[b].nr : lim.nr;
        const int ca = boxes[b].c0, cb = boxes[b].c0 + boxes[b].nc < lim.nc ? boxes[b].c0 + boxes[b].nc : lim.nc;
        if (la < lb && ra < rb && ca < cb) needed += (uint64_t)(lb - la) * (rb - ra) * (cb - ca);
    }
    for (int k = L->first[mi]; k < L->first[mi] + L->count[mi]; k++) {
        const mt_manifest_piece *q = &L->mf.pieces[k];
        if (q->kind != kind) continue;
        int touches = 0;
        for (int b = 0; b < nbox && !touches; b++) {
            const mt_ckpt_box *x = &boxes[b];
            touches = q->box.l0 < x->l0 + x->nl && x->l0 < q->box.l0 + q->box.nl && q->box.r0 < x->r0 + x->nr &&
                      x->r0 < q->box.r0 + q->box.nr && q->box.c0 < x->c0 + x->nc && x->c0 < q->box.c0 + q->box.nc;
        }
        if (!touches) continue;
        MT_CHECK(mt_ckpt_file_open(L->dir, &L->mf, q->file, &L->files[q->file]));
        mt_ckpt_copy c = {.src = L->files[q->file].data + q->offset, .bf16 = !strcmp(q->dtype, "BF16")};
        for (int b = 0; b < nbox; b++) {
            c.dst = buf + boxes[b].local_off;
            c.seen = L->seen + boxes[b].local_off;
            covered += mt_ckpt_intersect(&q->box, q->f0, q->f1, &boxes[b], mt_ckpt_copy_run, &c);
        }
        twice += c.twice;
    }
    if (twice)
        return mt_errorf(MT_ERR_DATA, "%s: tensor %s (%s): %" PRIu64 " of the elements this rank needs are in more than "
                         "one piece (and as many in none): the manifest is inconsistent; load another iteration", L->dir,
                         t->name, mt_ckpt_kind_name(kind), twice);
    if (covered != needed)
        return mt_errorf(MT_ERR_DATA, "%s: tensor %s (%s): its pieces cover %" PRIu64 " of the %" PRIu64 " elements this "
                         "rank needs (of %zu local): the manifest is inconsistent; load another iteration", L->dir,
                         t->name, mt_ckpt_kind_name(kind), covered, needed, t->n);
out:
    return st;
}

static int has_kind(const loader *L, int mi, mt_ckpt_kind kind) {
    for (int k = L->first[mi]; k < L->first[mi] + L->count[mi]; k++)
        if (L->mf.pieces[k].kind == kind) return 1;
    return 0;
}

/* the model and the checkpoint describe the same tensors (names, layers, columns, rows but for padding) */
static mt_status check_model(const loader *L, const mt_recipe *r, const mt_model *m) {
    mt_status st = MT_OK;
    mt_param_layout full;
    MT_CHECK(mt_param_layout_build(r, &full));
    if (L->mf.vocab != m->pl.V)
        return mt_errorf(MT_ERR_CONFIG, "%s: saved with a vocabulary of %d, this model has model.vocab = %d: load a "
                         "checkpoint of the same model (its recipe is in %s/%s)", L->dir, L->mf.vocab, m->pl.V, L->dir,
                         MT_MANIFEST_NAME);
    for (int i = 0; i < L->mf.n_tensors; i++) {
        const mt_manifest_tensor *mt = &L->mf.tensors[i];
        int fi = -1;
        for (int ti = 0; ti < full.n_tensors; ti++)
            if (!strcmp(full.t[ti].name, mt->name)) fi = ti;
        if (fi < 0)
            return mt_errorf(MT_ERR_CONFIG, "%s: the checkpoint has a tensor %s that this model does not (saved as %s; "
                             "check model.arch, bias, norm, tie_embeddings against the saved recipe in %s)", L->dir,
                             mt->name, L->mf.arch, MT_MANIFEST_NAME);
        int64_t want[3];
        mt_ckpt_global_shape(&full, fi, want);
        const int vocab = is_vocab_tensor(&full, fi);
        if (want[0] != mt->shape[0] || want[2] != mt->shape[2] || (!vocab && want[1] != mt->shape[1]) ||
            (vocab && mt->shape[1] < m->pl.V))
            return mt_errorf(MT_ERR_CONFIG, "%s: tensor %s is (%" PRId64 ", %" PRId64 ", %" PRId64 ") in the checkpoint and "
                             "(%" PRId64 ", %" PRId64 ", %" PRId64 ") in this model: the model shape differs (model.layers, "
                             "hidden, heads, kv_heads, ffn_hidden); load a checkpoint of the same model", L->dir,
                             mt->name, mt->shape[0], mt->shape[1], mt->shape[2], want[0], want[1], want[2]);
    }
    for (int ti = 0; ti < full.n_tensors; ti++)
        if (mt_manifest_tensor_find(&L->mf, full.t[ti].name) < 0)
            return mt_errorf(MT_ERR_CONFIG, "%s: the checkpoint has no tensor %s, which this model has (saved as %s: check "
                             "model.arch, bias, norm, tie_embeddings against the saved recipe in %s)", L->dir,
                             full.t[ti].name, L->mf.arch, MT_MANIFEST_NAME);
out:
    return st;
}

static mt_status upload_opt(mt_backend *be, const mt_model *m, int ti, void *dst_base, const float *buf) {
    mt_opt_piece pc;
    if (!mt_opt_piece_of(&m->pl, &m->ol, ti, &pc)) return MT_OK;
    const size_t off = m->pl.t[ti].offset;
    return be->i->copy_h2d(be, (char *)dst_base + pc.opt * 4, buf + (pc.lo - off), (pc.hi - pc.lo) * 4);
}

/* the save's tokenizer (its manifest) against the recipe's: ids of another tokenizer mean nonsense */
static mt_status same_tokenizer(const char *ckpt_path, const mt_manifest *mf, const mt_recipe *r, const char *verb) {
    const char *want = mt_recipe_tokenizer_name(r->data.tokenizer);
    if (!mf->tokenizer[0] || !strcmp(mf->tokenizer, want)) return MT_OK;
    return mt_errorf(MT_ERR_CONFIG, "%s: saved by a run with data.tokenizer %s%s%s, this recipe has data.tokenizer %s: "
                     "%s with the tokenizer the model was trained with (--set data.tokenizer=%s and its "
                     "data.vocab / data.merges)", ckpt_path, mf->tokenizer, mf->tokenizer_vocab[0] ? " " : "",
                     mf->tokenizer_vocab, want, verb, mf->tokenizer);
}

/* Mixed dense and MoE layers: a save whose MoE layers are other layers than this recipe's has tensors of the
 * same shapes (each kind's stack holds its layers in order), so the shapes cannot tell; the save's recipe
 * (its manifest) can: its layer kinds (mt_recipe_moe_layer) against this one's. */
static mt_status same_moe_layers(const char *ckpt_path, const mt_manifest *mf, const mt_recipe *r) {
    if (!mf->recipe_yaml || r->model.moe.experts <= 0) return MT_OK;
    mt_recipe *saved = malloc(sizeof *saved);
    if (!saved) return mt_errorf(MT_ERR_OOM, "%s: the save's recipe", ckpt_path);
    mt_recipe_defaults(saved);
    mt_status st = MT_OK;
    if (mt_recipe_load_string(saved, mf->recipe_yaml, strlen(mf->recipe_yaml), ckpt_path) == MT_OK &&
        saved->model.moe.experts > 0 && saved->model.layers == r->model.layers)
        for (int l = 0; l < r->model.layers; l++)
            if (mt_recipe_moe_layer(saved, l) != mt_recipe_moe_layer(r, l)) {
                st = mt_errorf(MT_ERR_CONFIG, "%s: layer %d is a %s layer in the save and a %s layer here: "
                               "model.moe.layer_pattern / layer_freq differ (saved: pattern \"%.40s\", freq %d; here: "
                               "\"%.40s\", %d); load with the save's", ckpt_path, l,
                               mt_recipe_moe_layer(saved, l) ? "MoE" : "dense", mt_recipe_moe_layer(r, l) ? "MoE" : "dense",
                               saved->model.moe.layer_pattern, saved->model.moe.layer_freq, r->model.moe.layer_pattern,
                               r->model.moe.layer_freq);
                break;
            }
    if (st == MT_OK) mt_clear_error(); /* a save's recipe this build cannot read: the shapes are the check */
    free(saved);
    return st;
}

mt_status mt_ckpt_load(const mt_recipe *r, mt_model *m, const mt_parallel_state *ps, const char *path,
                       mt_ckpt_state *cs, FILE *log) {
    mt_status st = MT_OK;
    loader L;
    memset(&L, 0, sizeof L);
    L.dir = path;
    mt_backend *be = m->be;
    float *buf = NULL;
    uint16_t *buf16 = NULL;
    mt_ckpt_box *boxes = NULL;
    const double t0 = mt_clock_s();
    const int tp_rank = ps->coord[MT_AX_TP];
    const int weights_only = r->checkpoint.no_load_optim || r->checkpoint.finetune;
    MT_CHECK(mt_manifest_load(path, &L.mf));
    MT_CHECK(same_tokenizer(path, &L.mf, r, "resume (or fine-tune)"));
    MT_CHECK(check_model(&L, r, m));
    MT_CHECK(same_moe_layers(path, &L.mf, r));
    L.files = calloc((size_t)L.mf.n_files, sizeof *L.files);
    L.first = calloc((size_t)L.mf.n_tensors, sizeof *L.first);
    L.count = calloc((size_t)L.mf.n_tensors, sizeof *L.count);
    size_t max_n = 0;
    for (int ti = 0; ti < m->pl.n_tensors; ti++) max_n = m->pl.t[ti].n > max_n ? m->pl.t[ti].n : max_n;
    buf = malloc((max_n ? max_n : 1) * sizeof *buf);
    buf16 = m->act == MT_BF16 ? malloc((max_n ? max_n : 1) * 2) : NULL;
    boxes = malloc(4096 * sizeof *boxes);
    L.seen = malloc(max_n ? max_n : 1);
    if (!L.files || !L.first || !L.count || !buf || !boxes || !L.seen || (m->act == MT_BF16 && !buf16)) {
        st = mt_errorf(MT_ERR_OOM, "checkpoint load: host buffers (%zu elements)", max_n);
        goto out;
    }
    for (size_t k = 0; k < L.mf.n_pieces; k++) { /* the parser keeps each tensor's pieces together */
        const int mi = L.mf.pieces[k].tensor;
        if (!L.count[mi]) L.first[mi] = (int)k;
        L.count[mi]++;
    }
    const int src_bf16 = !strcmp(L.mf.weight_dtype, "BF16");
    const size_t ab = mt_dtype_bytes(m->act);
    uint64_t bytes_read = 0;
    for (int ti = 0; ti < m->pl.n_tensors; ti++) {
        const mt_param_tensor *t = &m->pl.t[ti];
        const int mi = mt_manifest_tensor_find(&L.mf, t->name);
        const int nbox = mt_ckpt_boxes(&m->pl, ti, tp_rank, boxes, 4096);
        if (nbox > 4096) {
            st = mt_errorf(MT_ERR_UNSUPPORTED, "checkpoint load: tensor %s has too many pieces", t->name);
            goto out;
        }
        /* weights (f32 targets: master weights when the save has them; bf16: the saved bf16 weights) */
        const mt_ckpt_kind wkind = m->act == MT_F32 && has_kind(&L, mi, MT_CK_MASTER) ? MT_CK_MASTER : MT_CK_WEIGHT;
        if (m->act == MT_BF16) {
            MT_CHECK(be->i->copy_d2h(be, buf16, (char *)m->params + t->offset * 2, t->n * 2));
            for (size_t e = 0; e < t->n; e++) buf[e] = mt_bf16_to_f32(buf16[e]);
        } else {
            MT_CHECK(be->i->copy_d2h(be, buf, (char *)m->params + t->offset * 4, t->n * 4));
        }
        MT_CHECK(assemble(&L, m, tp_rank, ti, mi, wkind, buf, boxes, nbox));
        bytes_read += t->n * 4;
        if (m->act == MT_BF16) {
            for (size_t e = 0; e < t->n; e++) buf16[e] = mt_f32_to_bf16(buf[e]);
            MT_CHECK(be->i->copy_h2d(be, (char *)m->params + t->offset * 2, buf16, t->n * 2));
            if (!m->master_aliased) { /* master weights: the saved ones, or the saved f32 weights */
                if (has_kind(&L, mi, MT_CK_MASTER) || !src_bf16) {
                    MT_CHECK(assemble(&L, m, tp_rank, ti, mi, has_kind(&L, mi, MT_CK_MASTER) ? MT_CK_MASTER : MT_CK_WEIGHT,
                                      buf, boxes, nbox));
                }
                MT_CHECK(upload_opt(be, m, ti, m->master, buf));
            }
        } else {
            MT_CHECK(be->i->copy_h2d(be, (char *)m->params + t->offset * ab, buf, t->n * 4));
            /* fp32 weights are the master weights; a separate master copy (several gradient buffers,
             * e.g. MoE's dense + expert) gets this rank's optimizer piece of them */
            if (!m->master_aliased) MT_CHECK(upload_opt(be, m, ti, m->master, buf));
        }
        if (weights_only) continue;
        const mt_ckpt_kind mom[2] = {MT_CK_EXP_AVG, MT_CK_EXP_AVG_SQ};
        void *dst[2] = {m->adam_m, m->adam_v};
        for (int k = 0; k < 2; k++) {
            if (!has_kind(&L, mi, mom[k])) {
                st = mt_errorf(MT_ERR_DATA, "%s: tensor %s has no %s pieces: the save holds no optimizer state; load "
                               "with checkpoint.no_load_optim / --no-load-optim", path, t->name, mt_ckpt_kind_name(mom[k]));
                goto out;
            }
            memset(buf, 0, t->n * 4);
            MT_CHECK(assemble(&L, m, tp_rank, ti, mi, mom[k], buf, boxes, nbox));
            MT_CHECK(upload_opt(be, m, ti, dst[k], buf));
            m->moments_zero = 0; /* the loaded moments are read by the next step */
            bytes_read += t->n * 4;
        }
    }
    if (m->moe_bias && L.mf.expert_bias) { /* the router's expert bias (state): this rank's layers */
        if (L.mf.expert_bias_layers != m->pl.L_global || L.mf.expert_bias_experts != m->pl.E) {
            st = mt_errorf(MT_ERR_DATA, "%s: expert_bias is %d layers x %d experts, the model (model.layers, "
                           "model.moe.experts) %d x %d", path, L.mf.expert_bias_layers, L.mf.expert_bias_experts,
                           m->pl.L_global, m->pl.E);
            goto out;
        }
        MT_CHECK(mt_moe_bias_set(m, L.mf.expert_bias));
    }
    MT_CHECK(be->i->sync(be));
    memset(cs, 0, sizeof *cs);
    if (!r->checkpoint.finetune) {
        cs->iteration = L.mf.iteration;
        cs->consumed_samples = L.mf.consumed_samples;
        cs->skipped_iterations = L.mf.skipped_iterations;
        cs->optimizer_steps = r->checkpoint.no_load_optim ? 0 : L.mf.optimizer_steps;
        snprintf(cs->rerun_state, sizeof cs->rerun_state, "%s", L.mf.rerun_state);
    }
    if (log) {
        const double dt = mt_clock_s() - t0;
        const mt_manifest_layout *y = &L.mf.layout;
        fprintf(log, "loaded checkpoint %s: iteration %" PRId64 ", %" PRId64 " consumed samples, saved at tp %d pp %d "
                     "(vpp %d) dp %d%s on %d rank(s)%s%s; %.2f s, %.0f MiB/s on the logging rank\n",
                path, L.mf.iteration, L.mf.consumed_samples, y->tensor, y->pipeline, y->virtual_pipeline, y->data,
                y->distributed_optimizer ? " with the distributed optimizer" : "", y->world_size,
                r->checkpoint.finetune ? "; finetune: starting at iteration 0" : "",
                weights_only ? "; weights only (no optimizer state)" : "", dt,
                dt > 0 ? bytes_read / 1048576.0 / dt : 0.0);
        if (L.mf.seed != (uint64_t)r->training.seed)
            fprintf(log, "note: the checkpoint was trained with training.seed %" PRIu64 ", this run uses %lld: the data "
                         "order from here differs from the saved run's\n", L.mf.seed, (long long)r->training.seed);
    }
out:
    free(buf);
    free(buf16);
    free(boxes);
    loader_free(&L);
    return st;
}

/* The keys that change the function of a model of a given shape (the shapes are checked by the
 * load): the save's recipe (its manifest) against this one. Scoring or generating with other
 * values computes another model; a resume may change them on purpose (e.g. rope_theta for a
 * longer context), so only generate and logprobs ask. */
static mt_status same_function(const char *ckpt_path, const mt_manifest *mf, const mt_recipe *r, const char *verb) {
    if (!mf->recipe_yaml) return MT_OK;
    mt_recipe *saved = malloc(sizeof *saved);
    if (!saved) return mt_errorf(MT_ERR_OOM, "%s: the save's recipe", ckpt_path);
    mt_recipe_defaults(saved);
    mt_status st = mt_recipe_load_string(saved, mf->recipe_yaml, strlen(mf->recipe_yaml), ckpt_path);
    for (int id = 0; st == MT_OK && id < mt_recipe_key_count(); id++) {
        if (!mt_recipe_key_changes_function(id)) continue; /* MT_KF_FUNCTION in the key table */
        const char *key = mt_recipe_key_name(id);
        char a[128], b[128];
        mt_recipe_value_text(saved, key, a, sizeof a);
        mt_recipe_value_text(r, key, b, sizeof b);
        if (strcmp(a, b))
            st = mt_errorf(MT_ERR_CONFIG, "%s: saved with %s = %s, this recipe has %s: %s with the save's value "
                           "(--set %s=%s); other values compute another model", ckpt_path, key, a, b, verb, key,
                           a);
    }
    free(saved);
    return st;
}

mt_status mt_ckpt_check_tokenizer(const char *ckpt_path, const mt_recipe *r, const char *tool, const char *verb,
                                  FILE *log, int64_t *iteration) {
    mt_status st = MT_OK;
    mt_manifest mf;
    memset(&mf, 0, sizeof mf);
    MT_CHECK(mt_manifest_load(ckpt_path, &mf));
    MT_CHECK(same_tokenizer(ckpt_path, &mf, r, verb));
    MT_CHECK(same_function(ckpt_path, &mf, r, verb));
    const char *want = mt_recipe_tokenizer_name(r->data.tokenizer);
    *iteration = mf.iteration;
    if (log) {
        const mt_manifest_layout *y = &mf.layout;
        fprintf(log, "%s: checkpoint %s: %s, iteration %lld, saved at tp %d pp %d (vpp %d) dp %d on %d rank(s), "
                     "weights %s; tokenizer %s\n", tool, ckpt_path, mf.arch, (long long)mf.iteration, y->tensor,
                y->pipeline, y->virtual_pipeline, y->data, y->world_size, mf.weight_dtype, want);
    }
out:
    mt_manifest_free(&mf);
    return st;
}

mt_status mt_recipe_tokenizer_open(const mt_recipe *r, mt_tokenizer **tok) {
    const char *name = mt_recipe_tokenizer_name(r->data.tokenizer);
    mt_tokenizer_files files = {.vocab_path = r->data.vocab[0] ? r->data.vocab : NULL,
                                .merges_path = r->data.merges[0] ? r->data.merges : NULL};
    mt_status st = mt_tokenizer_open(tok, name, &files);
    if (st != MT_OK) return mt_error_context(st, "data.tokenizer %s", name);
    const int nv = (int)mt_tokenizer_vocab_size(*tok);
    if (nv > r->model.vocab) {
        mt_tokenizer_free(*tok);
        *tok = NULL;
        return mt_errorf(MT_ERR_CONFIG, "data.tokenizer %s has %d ids but model.vocab = %d: the recipe's tokenizer is "
                         "not the model's", name, nv, r->model.vocab);
    }
    return MT_OK;
}
