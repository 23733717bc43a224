/* hf_write.c — mt_hf_export of hf_export.h: reads the save (ckpt_global.h: each layer slice of each
 * source tensor once, in fp32, from the `master` kind when the save has it), maps it (hf_export.c),
 * writes the weight shards as they fill (safetensors.h), the JSON files (hf_config.c) and the
 * tokenizer files into OUTPUT.tmp, then renames it to OUTPUT.
 * Memory: one layer slice of a source tensor in fp32 (for an expert tensor: one expert of one
 * layer) plus one shard of output. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/ckpt/ckpt_global.h"
#include "core/ckpt/hf_export.h"
#include "core/ckpt/safetensors.h"
#include "core/clock.h"
#include "core/crc32c.h"
#include "core/data/tokenizer.h"
#include "core/file_read.h"

#define PATH_CAP (MT_CKPT_PATH_MAX + 128)

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p) && errno != ENOENT ? -1 : 0;
}

/* rm -r (links not followed); missing is OK */
static mt_status remove_tree(const char *dir) {
    struct stat sb;
    if (lstat(dir, &sb) && errno == ENOENT) return MT_OK;
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS))
        return mt_errorf(MT_ERR_IO, "%s: cannot remove: %s", dir, strerror(errno));
    return MT_OK;
}

/* 1: a folder with entries, 0: an empty folder, -1: absent; MT_ERR_CONFIG when not a folder */
static mt_status dir_state(const char *dir, int *state) {
    struct stat sb;
    if (stat(dir, &sb)) {
        if (errno != ENOENT) return mt_errorf(MT_ERR_IO, "%s: %s", dir, strerror(errno));
        *state = -1;
        return MT_OK;
    }
    if (!S_ISDIR(sb.st_mode)) return mt_errorf(MT_ERR_CONFIG, "%s exists and is not a folder", dir);
    *state = 0;
    DIR *d = opendir(dir);
    if (!d) return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) *state = 1;
    closedir(d);
    return MT_OK;
}

static mt_status write_file(const char *path, const void *data, size_t n, uint64_t *total) {
    FILE *f = fopen(path, "wb");
    if (!f) return mt_errorf(MT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const int bad = (n && fwrite(data, 1, n, f) != n) || fflush(f) || fsync(fileno(f));
    const int err = errno;
    if (fclose(f) || bad) return mt_errorf(MT_ERR_IO, "%s: write failed: %s", path, strerror(bad ? err : errno));
    *total += n;
    return MT_OK;
}

typedef mt_status (*text_fn)(FILE *f, const void *ctx);

/* a JSON file built in memory by fn, then written */
static mt_status write_text(const char *dir, const char *name, text_fn fn, const void *ctx, uint64_t *total) {
    char path[PATH_CAP + 64], *buf = NULL;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = open_memstream(&buf, &n);
    if (!f) return mt_errorf(MT_ERR_OOM, "%s: text buffer", path);
    mt_status st = fn(f, ctx);
    fclose(f);
    if (st == MT_OK) st = write_file(path, buf, n, total);
    free(buf);
    return st;
}

typedef struct {
    const mt_hf_model *m;
    const char *dtype, *tok_class, *eos_text;
    const mt_hf_tensor *plan;
    const int *shard_of;
    int n, n_shards;
    uint64_t total;
} json_ctx;

static mt_status config_fn(FILE *f, const void *c) {
    const json_ctx *j = c;
    return mt_hf_write_config(f, j->m, j->dtype);
}
static mt_status generation_fn(FILE *f, const void *c) { return mt_hf_write_generation_config(f, ((const json_ctx *)c)->m); }
static mt_status tokenizer_fn(FILE *f, const void *c) {
    const json_ctx *j = c;
    return mt_hf_write_tokenizer_config(f, j->m, j->tok_class, j->eos_text);
}

static void shard_name(char *buf, size_t n, int k, int n_shards) {
    if (n_shards == 1)
        snprintf(buf, n, "model.safetensors");
    else
        snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, n_shards);
}

static const mt_hf_tensor *sort_plan;
static int by_name(const void *a, const void *b) {
    return strcmp(sort_plan[*(const int *)a].name, sort_plan[*(const int *)b].name);
}

static mt_status index_fn(FILE *f, const void *c) {
    const json_ctx *j = c;
    int *order = malloc((size_t)j->n * sizeof *order);
    if (!order) return mt_errorf(MT_ERR_OOM, "weight map of %d tensors", j->n);
    for (int i = 0; i < j->n; i++) order[i] = i;
    sort_plan = j->plan;
    qsort(order, (size_t)j->n, sizeof *order, by_name);
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n  \"weight_map\": {\n", j->total);
    for (int i = 0; i < j->n; i++) {
        char file[64];
        shard_name(file, sizeof file, j->shard_of[order[i]], j->n_shards);
        fprintf(f, "    \"%s\": \"%s\"%s\n", j->plan[order[i]].name, file, i + 1 < j->n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    free(order);
    if (fflush(f) || ferror(f)) return mt_errorf(MT_ERR_IO, "writing model.safetensors.index.json failed");
    return MT_OK;
}

/* the save's tensor src, checked against what the model needs */
static mt_status check_source(const mt_manifest *mf, const mt_hf_model *m, const char *src, int *ti) {
    int64_t l, r, c;
    mt_hf_source_shape(m, src, &l, &r, &c);
    *ti = mt_manifest_tensor_find(mf, src);
    if (*ti < 0)
        return mt_errorf(MT_ERR_DATA, "the save has no tensor %s, which its recipe's model has: the save is "
                         "inconsistent", src);
    const int64_t *s = mf->tensors[*ti].shape;
    const int vocab_rows = !strcmp(src, "wte") || !strcmp(src, "lm_head");
    if (s[0] != l || s[2] != c || (vocab_rows ? s[1] < r : s[1] != r))
        return mt_errorf(MT_ERR_DATA, "tensor %s of the save is (%" PRId64 ", %" PRId64 ", %" PRId64 "), its recipe's "
                         "model needs (%" PRId64 ", %s%" PRId64 ", %" PRId64 "): the save is inconsistent", src, s[0],
                         s[1], s[2], l, vocab_rows ? ">= " : "", r, c);
    return MT_OK;
}

static mt_ckpt_kind weight_kind(const mt_manifest *mf, int ti) {
    for (size_t k = 0; k < mf->n_pieces; k++)
        if (mf->pieces[k].tensor == ti && mf->pieces[k].kind == MT_CK_MASTER) return MT_CK_MASTER;
    return MT_CK_WEIGHT;
}

/* the recipe in the save (its model keys; the saved layout does not matter here) */
static mt_status save_recipe(const mt_manifest *mf, const char *dir, mt_recipe *r) {
    mt_status st = MT_OK;
    char name[PATH_CAP + 32];
    snprintf(name, sizeof name, "%s/%s (recipe)", dir, MT_MANIFEST_NAME);
    mt_recipe_defaults(r);
    if (!mf->recipe_yaml) return mt_errorf(MT_ERR_DATA, "%s: no recipe", name);
    /* mt_recipe_write_yaml's text: every key resolved, so it is not validated again (its training
     * keys need not validate: a --train-iters override can leave warmup_iters > decay_iters) */
    MT_CHECK(mt_recipe_load_string(r, mf->recipe_yaml, strlen(mf->recipe_yaml), name));
    if (r->model.vocab != mf->vocab || strcmp(mf->arch, r->model.arch == MT_ARCH_LLAMA ? "llama" : "gpt"))
        st = mt_errorf(MT_ERR_DATA, "%s: model %s vocabulary %d, the manifest says %s %d: the save is inconsistent",
                       name, r->model.arch == MT_ARCH_LLAMA ? "llama" : "gpt", r->model.vocab, mf->arch, mf->vocab);
out:
    return st;
}

/* the tokenizer the model was trained with: its end-of-document id and text, its files checked */
static mt_status open_tokenizer(const mt_manifest *mf, mt_hf_model *m, char *eos_text, size_t n_eos) {
    mt_status st = MT_OK;
    const mt_tokenizer_files files = {.vocab_path = mf->tokenizer_vocab, .merges_path = mf->tokenizer_merges};
    mt_tokenizer *tok = NULL;
    mt_byte_buf text = {0};
    MT_CHECK(mt_tokenizer_open(&tok, mf->tokenizer, &files));
    if (mf->tokenizer_crc32c) {
        uint32_t crc = 0;
        const char *paths[2] = {mf->tokenizer_vocab, mf->tokenizer_merges};
        for (int i = 0; i < 2; i++) {
            if (!paths[i][0]) continue;
            char *bytes = NULL;
            size_t n = 0;
            MT_CHECK(mt_read_whole_file(paths[i], &bytes, &n));
            crc = mt_crc32c(crc, bytes, n);
            free(bytes);
        }
        if (crc != mf->tokenizer_crc32c) {
            st = mt_errorf(MT_ERR_DATA, "tokenizer files %s%s%s: CRC-32C %08x, the save's model was trained with "
                           "files of CRC-32C %08x: these are other files; restore the ones it was trained with",
                           mf->tokenizer_vocab, mf->tokenizer_merges[0] ? " + " : "", mf->tokenizer_merges, crc,
                           mf->tokenizer_crc32c);
            goto out;
        }
    }
    m->bos = m->eos = mt_tokenizer_eod(tok);
    const int32_t id = m->eos;
    MT_CHECK(mt_tokenizer_decode(tok, &id, 1, &text));
    snprintf(eos_text, n_eos, "%.*s", (int)text.n_bytes, text.bytes);
out:
    mt_byte_buf_free(&text);
    if (tok) mt_tokenizer_free(tok);
    return st == MT_OK ? st
                       : mt_error_context(st, "the save's tokenizer (%s; its file paths are the recipe's, relative to "
                                          "where training ran): ", mf->tokenizer);
}

/* the weight files: each source tensor read once, shards written as they fill */
static mt_status write_weights(mt_ckpt_reader *rd, const char *tmp, const mt_hf_tensor *plan, const int *src_ti,
                               int n, const int *shard_of, int n_shards, mt_dtype dt, uint64_t *total) {
    mt_status st = MT_OK;
    const size_t eb = mt_dtype_bytes(dt);
    mt_st_tensor *sts = calloc((size_t)n, sizeof *sts);
    void **bufs = calloc((size_t)n, sizeof *bufs);
    float *src = NULL, *scratch = NULL;
    size_t scratch_n = 0, src_n = 0;
    int have = -1, have_layer = -1, first = 0; /* source slice in src; first tensor of the current shard */
    if (!sts || !bufs) {
        st = mt_errorf(MT_ERR_OOM, "hf export: tables of %d tensors", n);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const mt_hf_tensor *t = &plan[i];
        if (src_ti[i] != have || t->layer != have_layer) { /* the plan lists each slice's tensors together */
            const mt_manifest_tensor *mt = &rd->mf.tensors[src_ti[i]];
            const size_t elems = (size_t)mt->shape[1] * (size_t)mt->shape[2];
            if (elems > src_n) {
                free(src);
                src = malloc(elems * sizeof *src);
                src_n = src ? elems : 0;
            }
            if (!src) {
                st = mt_errorf(MT_ERR_OOM, "hf export: a layer of tensor %s (%zu floats)", mt->name, elems);
                goto out;
            }
            MT_CHECK(mt_ckpt_read_layers(rd, mt->name, weight_kind(&rd->mf, src_ti[i]), t->layer, 1, src));
            have = src_ti[i];
            have_layer = t->layer;
        }
        const mt_manifest_tensor *mt = &rd->mf.tensors[have];
        const size_t elems = (size_t)t->nr * (size_t)t->nc;
        if (elems > scratch_n) {
            free(scratch);
            scratch = malloc(elems * sizeof *scratch);
            scratch_n = elems;
        }
        bufs[i] = malloc(elems * eb);
        if (!scratch || !bufs[i]) {
            st = mt_errorf(MT_ERR_OOM, "hf export: tensor %s (%zu values)", t->name, elems);
            goto out;
        }
        mt_hf_extract(t, src, mt->shape[2], scratch);
        mt_hf_convert(scratch, elems, dt, bufs[i]);
        sts[i] = (mt_st_tensor){.name = t->name, .dtype = dt == MT_F32 ? "F32" : "BF16", .n_dims = t->n_dims,
                                .data = bufs[i], .n_bytes = elems * eb};
        memcpy(sts[i].shape, t->shape, sizeof t->shape);
        if (i + 1 == n || shard_of[i + 1] != shard_of[i]) {
            char name[64], path[2 * PATH_CAP];
            uint64_t bytes = 0;
            shard_name(name, sizeof name, shard_of[i], n_shards);
            snprintf(path, sizeof path, "%s/%s", tmp, name);
            MT_CHECK(mt_st_write(path, sts + first, i + 1 - first, 1, NULL, &bytes, NULL));
            *total += bytes;
            for (int k = first; k <= i; k++) free(bufs[k]), bufs[k] = NULL;
            first = i + 1;
        }
    }
out:
    if (bufs)
        for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(sts);
    free(src);
    free(scratch);
    return st;
}

static mt_status copy_file(const char *from, const char *dir, const char *name, uint64_t *total) {
    char *bytes = NULL, path[PATH_CAP + 64];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mt_status st = mt_read_whole_file(from, &bytes, &n);
    if (st == MT_OK) st = write_file(path, bytes, n, total);
    free(bytes);
    return st;
}

/* the tokenizer files transformers reads, or a note why there are none */
static mt_status write_tokenizer(const mt_manifest *mf, const char *tmp, json_ctx *j, mt_hf_export_stats *s) {
    mt_status st = MT_OK;
    if (!strcmp(mf->tokenizer, "gpt2bpe")) {
        MT_CHECK(copy_file(mf->tokenizer_vocab, tmp, "vocab.json", &s->bytes));
        MT_CHECK(copy_file(mf->tokenizer_merges, tmp, "merges.txt", &s->bytes));
        j->tok_class = "GPT2Tokenizer";
        MT_CHECK(write_text(tmp, "tokenizer_config.json", tokenizer_fn, j, &s->bytes));
    } else if (!strcmp(mf->tokenizer, "hf")) {
        MT_CHECK(copy_file(mf->tokenizer_vocab, tmp, "tokenizer.json", &s->bytes));
        j->tok_class = "PreTrainedTokenizerFast";
        MT_CHECK(write_text(tmp, "tokenizer_config.json", tokenizer_fn, j, &s->bytes));
    } else {
        snprintf(s->note, sizeof s->note, "the model uses mtrain's byte tokenizer (id = byte value, %d = end of "
                 "document), which has no Hugging Face equivalent: no tokenizer files were written; feed the model "
                 "raw UTF-8 bytes as ids", j->m->eos);
    }
out:
    return st;
}

static void strip_slashes(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
}

/* refuses an output folder that holds the save (replacing it would delete the checkpoint) */
static mt_status check_not_inside(const char *out, const char *load) {
    char ro[PATH_MAX], rl[PATH_MAX];
    if (!realpath(out, ro) || !realpath(load, rl)) return MT_OK;
    const size_t n = strlen(ro);
    if (!strcmp(ro, "/") || (!strncmp(rl, ro, n) && (rl[n] == 0 || rl[n] == '/')))
        return mt_errorf(MT_ERR_CONFIG, "--output %s holds the checkpoint %s: replacing it would delete the save; "
                         "export into another folder", out, load);
    return MT_OK;
}

mt_status mt_hf_export(const mt_hf_export_opts *o, mt_hf_export_stats *s) {
    mt_status st = MT_OK;
    const double t0 = mt_clock_s();
    char out[PATH_CAP], tmp[PATH_CAP + 8], load[PATH_CAP];
    mt_ckpt_reader rd;
    mt_recipe r;
    mt_hf_model m;
    mt_hf_tensor *plan = NULL;
    int *src_ti = NULL, *shard_of = NULL, made_tmp = 0, state = -1;
    uint64_t *bytes = NULL;
    char eos_text[256] = "";
    memset(s, 0, sizeof *s);
    memset(&rd, 0, sizeof rd);
    if (snprintf(out, sizeof out, "%s", o->output) >= (int)sizeof out || !out[0])
        return mt_errorf(MT_ERR_CONFIG, "--output: an empty or too long path");
    strip_slashes(out);
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return mt_errorf(MT_ERR_CONFIG, "--output %s: name the folder to create (not /, . or ..)", o->output);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    /* the output first: refuse before any work */
    MT_CHECK(dir_state(out, &state));
    if (state == 1 && !o->force) {
        st = mt_errorf(MT_ERR_CONFIG, "%s exists and is not empty: choose another --output, or pass --force to "
                       "replace it", out);
        goto out;
    }
    if (state == 1) MT_CHECK(check_not_inside(out, o->load));
    /* the save */
    struct stat sb;
    if (stat(o->load, &sb) || !S_ISDIR(sb.st_mode)) {
        st = mt_errorf(MT_ERR_IO, "%s: %s: expected a checkpoint folder (--save) or one of its iter_* folders",
                       o->load, errno == ENOENT ? "no such folder" : "not a folder");
        goto out;
    }
    snprintf(load, sizeof load, "%s", o->load);
    if (o->iteration > 0 && !mt_ckpt_is_save_dir(o->load)) {
        mt_ckpt_iter_path(o->load, o->iteration, NULL, load, sizeof load);
        if (!mt_ckpt_is_save_dir(load)) {
            int64_t its[8];
            const int k = mt_ckpt_list_saves(o->load, its, 8);
            char list[160] = "";
            for (int i = 0, used = 0; i < k && i < 8; i++)
                used += snprintf(list + used, sizeof list - (size_t)used, "%s%" PRId64, i ? ", " : "", its[i]);
            st = mt_errorf(MT_ERR_IO, "%s: no complete save of --iteration %" PRId64 " (%s); saves here: %s", o->load,
                           o->iteration, load, k > 0 ? list : "none");
            goto out;
        }
    }
    st = mt_ckpt_reader_open(&rd, load);
    if (st != MT_OK && !mt_ckpt_is_save_dir(load) && mt_ckpt_list_saves(load, NULL, 0) <= 0)
        st = mt_error_context(st, "%s holds no save (no manifest.json, no iter_* folder): ", load);
    if (st != MT_OK) goto out;
    if (o->iteration > 0 && rd.mf.iteration != o->iteration) {
        st = mt_errorf(MT_ERR_CONFIG, "%s is the save of iteration %" PRId64 ", not --iteration %" PRId64, load,
                       rd.mf.iteration, o->iteration);
        goto out;
    }
    snprintf(s->save, sizeof s->save, "%s", rd.dir);
    s->iteration = rd.mf.iteration;
    snprintf(s->arch, sizeof s->arch, "%s", rd.mf.arch);
    MT_CHECK(save_recipe(&rd.mf, rd.dir, &r));
    MT_CHECK(mt_hf_model_from_recipe(&r, &m));
    MT_CHECK(open_tokenizer(&rd.mf, &m, eos_text, sizeof eos_text));
    /* the mapping, checked against the save */
    const int n = mt_hf_plan(&m, NULL, 0);
    plan = calloc((size_t)n, sizeof *plan);
    src_ti = calloc((size_t)n, sizeof *src_ti);
    shard_of = calloc((size_t)n, sizeof *shard_of);
    bytes = calloc((size_t)n, sizeof *bytes);
    if (!plan || !src_ti || !shard_of || !bytes) {
        st = mt_errorf(MT_ERR_OOM, "hf export: plan of %d tensors", n);
        goto out;
    }
    mt_hf_plan(&m, plan, n);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        MT_CHECK(check_source(&rd.mf, &m, plan[i].src, &src_ti[i]));
        bytes[i] = (uint64_t)plan[i].nr * (uint64_t)plan[i].nc * mt_dtype_bytes(o->dtype);
        total += bytes[i];
    }
    for (int ti = 0; ti < rd.mf.n_tensors; ti++) {
        int used = 0;
        for (int i = 0; i < n && !used; i++) used = src_ti[i] == ti;
        if (!used) {
            st = mt_errorf(MT_ERR_UNSUPPORTED, "%s: tensor %s has no place in the Hugging Face model", rd.dir,
                           rd.mf.tensors[ti].name);
            goto out;
        }
    }
    const int n_shards = mt_hf_shard_plan(bytes, n, o->max_shard_bytes ? o->max_shard_bytes
                                                                        : MT_HF_DEFAULT_SHARD_BYTES, shard_of);
    /* OUTPUT.tmp: a leftover of an interrupted export is replaced */
    MT_CHECK(remove_tree(tmp));
    if (mkdir(tmp, 0755)) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    made_tmp = 1;
    MT_CHECK(write_weights(&rd, tmp, plan, src_ti, n, shard_of, n_shards, o->dtype, &s->bytes));
    json_ctx j = {.m = &m, .dtype = o->dtype == MT_F32 ? "float32" : "bfloat16", .eos_text = eos_text,
                  .plan = plan, .shard_of = shard_of, .n = n, .n_shards = n_shards, .total = total};
    if (n_shards > 1) MT_CHECK(write_text(tmp, "model.safetensors.index.json", index_fn, &j, &s->bytes));
    MT_CHECK(write_text(tmp, "config.json", config_fn, &j, &s->bytes));
    MT_CHECK(write_text(tmp, "generation_config.json", generation_fn, &j, &s->bytes));
    MT_CHECK(write_tokenizer(&rd.mf, tmp, &j, s));
    if (m.E > 0 && r.model.moe.capacity_factor > 0) { /* Mixtral drops nothing: say what that changes */
        const size_t used = strlen(s->note);
        snprintf(s->note + used, sizeof s->note - used, "%sthe model was trained with model.moe.capacity_factor %g "
                 "(assignments over an expert's capacity dropped); %s routes every token (dropless), "
                 "as mtrain logprobs and generate do", used ? "; " : "", (double)r.model.moe.capacity_factor,
                 m.Fs > 0 ? "Qwen2MoeForCausalLM" : "MixtralForCausalLM");
    }
    MT_CHECK(mt_fsync_dir(tmp));
    /* publish: the old folder goes only now that the new one is complete */
    MT_CHECK(dir_state(out, &state));
    if (state == 1 && !o->force) {
        st = mt_errorf(MT_ERR_CONFIG, "%s appeared while exporting and is not empty; pass --force to replace it", out);
        goto out;
    }
    if (state >= 0) MT_CHECK(remove_tree(out));
    if (rename(tmp, out)) {
        st = mt_errorf(MT_ERR_IO, "%s -> %s: rename failed: %s", tmp, out, strerror(errno));
        goto out;
    }
    made_tmp = 0;
    char parent[PATH_CAP];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash) *(slash == parent ? slash + 1 : slash) = 0;
    MT_CHECK(mt_fsync_dir(slash ? parent : "."));
    s->n_tensors = n;
    s->n_files = n_shards;
    s->tensor_bytes = total;
out:
    if (made_tmp) {
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_last_error());
        remove_tree(tmp);
        mt_errorf(st, "%s", why);
    }
    s->seconds = mt_clock_s() - t0;
    mt_ckpt_reader_close(&rd);
    free(plan);
    free(src_ti);
    free(shard_of);
    free(bytes);
    return st;
}
