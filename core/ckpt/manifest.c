/* manifest.c — manifest.json of manifest.h: the writer (fprintf, every value spelled so that the
 * parser reads it back exactly: integers as integers, doubles with %.17g) and the strict parser on
 * core/json_tree.h. Every check the loader relies on is made here, once. */
#include "core/ckpt/manifest.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_tree.h"
#include "core/json_string.h"

mt_status mt_manifest_write(FILE *f, const mt_manifest *m) {
    const mt_manifest_layout *y = &m->layout;
    fprintf(f, "{\n \"format\": \"%s\",\n \"version\": %d,\n", MT_MANIFEST_FORMAT, MT_MANIFEST_VERSION);
    fprintf(f, " \"iteration\": %" PRId64 ",\n \"consumed_samples\": %" PRId64 ",\n \"optimizer_steps\": %" PRId64
               ",\n \"skipped_iterations\": %" PRId64 ",\n \"train_iters\": %" PRId64 ",\n \"seed\": %" PRIu64 ",\n",
            m->iteration, m->consumed_samples, m->optimizer_steps, m->skipped_iterations, m->train_iters, m->seed);
    fprintf(f, " \"lr_schedule\": {\"lr\": %.17g, \"max_lr\": %.17g, \"min_lr\": %.17g, \"warmup_iters\": %" PRId64
               ", \"decay_iters\": %" PRId64 ", \"decay_style\": ",
            m->lr, m->max_lr, m->min_lr, m->warmup_iters, m->decay_iters);
    mt_json_write_string(f, m->decay_style);
    fprintf(f, "},\n \"layout\": {\"world_size\": %d, \"tensor\": %d, \"pipeline\": %d, \"virtual_pipeline\": %d, "
               "\"data\": %d, \"context\": %d, \"expert\": %d, \"sequence_parallel\": %s, "
               "\"distributed_optimizer\": %s},\n",
            y->world_size, y->tensor, y->pipeline, y->virtual_pipeline, y->data, y->context, y->expert,
            y->sequence_parallel ? "true" : "false", y->distributed_optimizer ? "true" : "false");
    fprintf(f, " \"arch\": ");
    mt_json_write_string(f, m->arch);
    fprintf(f, ",\n \"weight_dtype\": ");
    mt_json_write_string(f, m->weight_dtype);
    fprintf(f, ",\n \"vocab\": %d,\n \"tokenizer\": {\"kind\": ", m->vocab);
    mt_json_write_string(f, m->tokenizer);
    fprintf(f, ", \"vocab_file\": ");
    mt_json_write_string(f, m->tokenizer_vocab);
    fprintf(f, ", \"merges_file\": ");
    mt_json_write_string(f, m->tokenizer_merges);
    fprintf(f, ", \"crc32c\": \"%08x\"},\n \"recipe\": ", m->tokenizer_crc32c);
    mt_json_write_string(f, m->recipe_yaml ? m->recipe_yaml : "");
    if (m->rerun_state[0]) { /* only in a save the rerun state machine asked for */
        fprintf(f, ",\n \"rerun_state_machine\": ");
        mt_json_write_string(f, m->rerun_state);
    }
    if (m->expert_bias) { /* each float's bits as 8 hex digits, so the load is bit-exact */
        fprintf(f, ",\n \"expert_bias\": {\"layers\": %d, \"experts\": %d, \"bits\": \"", m->expert_bias_layers,
                m->expert_bias_experts);
        for (size_t i = 0; i < (size_t)m->expert_bias_layers * m->expert_bias_experts; i++) {
            uint32_t u;
            memcpy(&u, &m->expert_bias[i], 4);
            fprintf(f, "%08" PRIx32, u);
        }
        fprintf(f, "\"}");
    }
    fprintf(f, ",\n \"files\": [");
    for (int i = 0; i < m->n_files; i++) {
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        mt_json_write_string(f, m->files[i].name);
        fprintf(f, ", \"bytes\": %" PRIu64 ", \"crc32c\": \"%08x\"}", m->files[i].bytes, m->files[i].crc32c);
    }
    fprintf(f, "\n ],\n \"tensors\": [");
    for (int ti = 0; ti < m->n_tensors; ti++) {
        const mt_manifest_tensor *t = &m->tensors[ti];
        fprintf(f, "%s\n  {\"name\": ", ti ? "," : "");
        mt_json_write_string(f, t->name);
        fprintf(f, ", \"shape\": [%" PRId64 ", %" PRId64 ", %" PRId64 "], \"stacked\": %s, \"pieces\": [", t->shape[0],
                t->shape[1], t->shape[2], t->stacked ? "true" : "false");
        int first = 1;
        for (size_t k = 0; k < m->n_pieces; k++) {
            const mt_manifest_piece *p = &m->pieces[k];
            if (p->tensor != ti) continue;
            fprintf(f, "%s\n   {\"kind\": \"%s\", \"file\": %d, \"entry\": ", first ? "" : ",",
                    mt_ckpt_kind_name(p->kind), p->file);
            mt_json_write_string(f, p->entry);
            fprintf(f, ", \"dtype\": \"%s\", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64
                       ", \"box\": [[%d, %d], [%d, %d], [%d, %d]], \"flat\": [%" PRIu64 ", %" PRIu64 "]}",
                    p->dtype, p->offset, p->n_bytes, p->box.l0, p->box.l0 + p->box.nl, p->box.r0, p->box.r0 + p->box.nr,
                    p->box.c0, p->box.c0 + p->box.nc, p->f0, p->f1);
            first = 0;
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n ]\n}\n");
    if (ferror(f)) return mt_errorf(MT_ERR_IO, "manifest: write failed");
    return MT_OK;
}

/* ---- parser ---- */

typedef struct {
    const char *name;   /* file, for messages */
    const char *where;  /* the object being read: "layout", "tensors[3]", ... */
} pctx;

static mt_status bad(const pctx *c, const mt_json_node *n, const char *key, const char *what) {
    return mt_errorf(MT_ERR_DATA, "%s:%d: %s%s%s: %s (the manifest is damaged or not mtrain's: save the checkpoint "
                     "again, or load another one)", c->name, n ? (int)n->line : 0, c->where, c->where[0] ? "." : "",
                     key, what);
}

static mt_status get_node(const pctx *c, const mt_json_node *obj, const char *key, mt_json_type type,
                          const mt_json_node **out) {
    const mt_json_node *n = mt_json_get(obj, key);
    if (!n) return bad(c, obj, key, "missing");
    const int ok = type == MT_JSON_TRUE ? (n->type == MT_JSON_TRUE || n->type == MT_JSON_FALSE) : n->type == type;
    if (!ok) return bad(c, n, key, "wrong type");
    *out = n;
    return MT_OK;
}

/* obj[key]: an array of 1 .. max_items items (else `expect`), and zeroed room for as many
 * items of item_bytes in *room (the caller owns it) */
static mt_status get_array(const pctx *c, const mt_json_node *obj, const char *key, size_t max_items,
                           const char *expect, size_t item_bytes, const mt_json_node **arr, void **room) {
    mt_status st = get_node(c, obj, key, MT_JSON_ARRAY, arr);
    if (st != MT_OK) return st;
    if ((*arr)->n_items < 1 || (*arr)->n_items > max_items) return bad(c, *arr, key, expect);
    *room = calloc((*arr)->n_items, item_bytes);
    if (!*room) return mt_errorf(MT_ERR_OOM, "%s: %s", c->name, key);
    return MT_OK;
}

/* the context of item i of array `key` ("key[i]", written into w) */
static pctx item_ctx(const char *name, const char *key, size_t i, char *w, size_t n_w) {
    snprintf(w, n_w, "%s[%zu]", key, i);
    return (pctx){name, w};
}

static mt_status get_i64(const pctx *c, const mt_json_node *obj, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, key, MT_JSON_NUMBER, &n);
    if (st != MT_OK) return st;
    if (!n->is_integer || n->integer < lo || n->integer > hi) return bad(c, n, key, "not an integer in range");
    *v = n->integer;
    return MT_OK;
}

static mt_status get_int(const pctx *c, const mt_json_node *obj, const char *key, int lo, int hi, int *v) {
    int64_t x = 0;
    mt_status st = get_i64(c, obj, key, lo, hi, &x);
    *v = (int)x;
    return st;
}

static mt_status get_u64(const pctx *c, const mt_json_node *obj, const char *key, uint64_t *v) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, key, MT_JSON_NUMBER, &n);
    if (st != MT_OK) return st;
    if (n->is_integer && n->integer >= 0) {
        *v = (uint64_t)n->integer;
        return MT_OK;
    }
    /* seeds past INT64_MAX: exact when the double holds them */
    if (n->number >= 0 && n->number < 18446744073709551616.0 && n->number == (double)(uint64_t)n->number) {
        *v = (uint64_t)n->number;
        return MT_OK;
    }
    return bad(c, n, key, "not a non-negative integer");
}

static mt_status get_dbl(const pctx *c, const mt_json_node *obj, const char *key, double *v) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, key, MT_JSON_NUMBER, &n);
    if (st == MT_OK) *v = n->is_integer ? (double)n->integer : n->number;
    return st;
}

static mt_status get_bool(const pctx *c, const mt_json_node *obj, const char *key, int *v) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, key, MT_JSON_TRUE, &n);
    if (st == MT_OK) *v = n->type == MT_JSON_TRUE;
    return st;
}

static mt_status get_str(const pctx *c, const mt_json_node *obj, const char *key, char *buf, size_t n_buf) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, key, MT_JSON_STRING, &n);
    if (st != MT_OK) return st;
    if (n->n_str_bytes >= n_buf || strlen(n->str) != n->n_str_bytes) return bad(c, n, key, "string too long or holds NUL");
    memcpy(buf, n->str, n->n_str_bytes + 1);
    return MT_OK;
}

static mt_status get_crc(const pctx *c, const mt_json_node *obj, const char *key, uint32_t *v) {
    char s[16];
    mt_status st = get_str(c, obj, key, s, sizeof s);
    if (st != MT_OK) return st;
    char *end = NULL;
    unsigned long x = strtoul(s, &end, 16);
    if (strlen(s) != 8 || *end || x > 0xffffffffUL) return bad(c, mt_json_get(obj, key), key, "not 8 hex digits");
    *v = (uint32_t)x;
    return MT_OK;
}

/* [[a, b], [a, b], [a, b]] with 0 <= a < b <= shape[d] */
static mt_status get_box(const pctx *c, const mt_json_node *obj, const int64_t shape[3], mt_ckpt_box *b) {
    const mt_json_node *n = NULL;
    mt_status st = get_node(c, obj, "box", MT_JSON_ARRAY, &n);
    if (st != MT_OK) return st;
    if (n->n_items != 3) return bad(c, n, "box", "expected 3 ranges");
    int lo[3], hi[3];
    for (int d = 0; d < 3; d++) {
        const mt_json_node *r = &n->items[d];
        if (r->type != MT_JSON_ARRAY || r->n_items != 2 || !r->items[0].is_integer || !r->items[1].is_integer ||
            r->items[0].integer < 0 || r->items[0].integer >= r->items[1].integer || r->items[1].integer > shape[d])
            return bad(c, r, "box", "a range outside the tensor's shape");
        lo[d] = (int)r->items[0].integer;
        hi[d] = (int)r->items[1].integer;
    }
    *b = (mt_ckpt_box){.l0 = lo[0], .nl = hi[0] - lo[0], .r0 = lo[1], .nr = hi[1] - lo[1], .c0 = lo[2],
                       .nc = hi[2] - lo[2]};
    b->n = (size_t)b->nl * b->nr * b->nc;
    return MT_OK;
}

static mt_status parse_piece(const pctx *c, const mt_json_node *o, const mt_manifest *m, int ti, mt_manifest_piece *p) {
    mt_status st = MT_OK;
    char kind[16];
    const mt_manifest_tensor *t = &m->tensors[ti];
    memset(p, 0, sizeof *p);
    p->tensor = ti;
    if (o->type != MT_JSON_OBJECT) return bad(c, o, "pieces", "not an object");
    MT_CHECK(get_str(c, o, "kind", kind, sizeof kind));
    if (mt_ckpt_kind_find(kind) < 0) return bad(c, mt_json_get(o, "kind"), "kind", "unknown kind");
    p->kind = (mt_ckpt_kind)mt_ckpt_kind_find(kind);
    MT_CHECK(get_int(c, o, "file", 0, m->n_files - 1, &p->file));
    MT_CHECK(get_str(c, o, "entry", p->entry, sizeof p->entry));
    MT_CHECK(get_str(c, o, "dtype", p->dtype, sizeof p->dtype));
    const int esize = !strcmp(p->dtype, "F32") ? 4 : !strcmp(p->dtype, "BF16") ? 2 : 0;
    if (!esize || (p->kind != MT_CK_WEIGHT && esize != 4))
        return bad(c, mt_json_get(o, "dtype"), "dtype", "expected F32 (or BF16 for weights)");
    MT_CHECK(get_u64(c, o, "offset", &p->offset));
    MT_CHECK(get_u64(c, o, "bytes", &p->n_bytes));
    MT_CHECK(get_box(c, o, t->shape, &p->box));
    const mt_json_node *fl = NULL;
    MT_CHECK(get_node(c, o, "flat", MT_JSON_ARRAY, &fl));
    if (fl->n_items != 2 || !fl->items[0].is_integer || !fl->items[1].is_integer || fl->items[0].integer < 0 ||
        fl->items[0].integer >= fl->items[1].integer || (uint64_t)fl->items[1].integer > p->box.n)
        return bad(c, fl, "flat", "not a range inside the box");
    p->f0 = (uint64_t)fl->items[0].integer;
    p->f1 = (uint64_t)fl->items[1].integer;
    if (p->n_bytes != (p->f1 - p->f0) * (uint64_t)esize)
        return bad(c, mt_json_get(o, "bytes"), "bytes", "does not match the flat range x the dtype's size");
    if (p->offset > m->files[p->file].bytes || p->n_bytes > m->files[p->file].bytes - p->offset)
        return bad(c, mt_json_get(o, "offset"), "offset", "past the end of its file");
out:
    return st;
}

static mt_status parse_tensor(pctx *c, const mt_json_node *o, mt_manifest *m, int ti, size_t *cap) {
    mt_status st = MT_OK;
    mt_manifest_tensor *t = &m->tensors[ti];
    if (o->type != MT_JSON_OBJECT) return bad(c, o, "tensors", "not an object");
    MT_CHECK(get_str(c, o, "name", t->name, sizeof t->name));
    for (int k = 0; k < ti; k++)
        if (!strcmp(m->tensors[k].name, t->name)) return bad(c, o, "name", "a second tensor of this name");
    MT_CHECK(get_bool(c, o, "stacked", &t->stacked));
    const mt_json_node *sh = NULL, *pcs = NULL;
    MT_CHECK(get_node(c, o, "shape", MT_JSON_ARRAY, &sh));
    if (sh->n_items != 3) return bad(c, sh, "shape", "expected (layers, rows, cols)");
    for (int d = 0; d < 3; d++) {
        if (!sh->items[d].is_integer || sh->items[d].integer < 1 || sh->items[d].integer > (1 << 30))
            return bad(c, sh, "shape", "dimensions must be integers in [1, 2^30]");
        t->shape[d] = sh->items[d].integer;
    }
    MT_CHECK(get_node(c, o, "pieces", MT_JSON_ARRAY, &pcs));
    uint64_t covered[MT_CK_KINDS] = {0};
    for (size_t k = 0; k < pcs->n_items; k++) {
        if (m->n_pieces == *cap) {
            size_t nc = *cap ? 2 * *cap : 256;
            mt_manifest_piece *np = realloc(m->pieces, nc * sizeof *np);
            if (!np) return mt_errorf(MT_ERR_OOM, "%s: %zu pieces", c->name, nc);
            m->pieces = np;
            *cap = nc;
        }
        char w[96];
        snprintf(w, sizeof w, "tensors[%d].pieces[%zu]", ti, k);
        pctx pc = {c->name, w};
        mt_manifest_piece *p = &m->pieces[m->n_pieces];
        MT_CHECK(parse_piece(&pc, &pcs->items[k], m, ti, p));
        covered[p->kind] += p->f1 - p->f0;
        m->n_pieces++;
    }
    const uint64_t n = (uint64_t)t->shape[0] * t->shape[1] * t->shape[2];
    for (int k = 0; k < MT_CK_KINDS; k++)
        if (covered[k] && covered[k] != n) {
            char what[160];
            snprintf(what, sizeof what, "its %s pieces hold %" PRIu64 " of its %" PRIu64 " elements", mt_ckpt_kind_name(k),
                     covered[k], n);
            return bad(c, pcs, "pieces", what);
        }
    if (!covered[MT_CK_WEIGHT]) return bad(c, pcs, "pieces", "no weight pieces");
out:
    return st;
}

static mt_status parse_root(const mt_json_node *root, const char *name, mt_manifest *m) {
    mt_status st = MT_OK;
    pctx c = {name, ""};
    char fmt[32];
    const mt_json_node *n = NULL, *arr = NULL;
    size_t cap = 0;
    if (root->type != MT_JSON_OBJECT) return bad(&c, root, "(top level)", "not a JSON object");
    MT_CHECK(get_str(&c, root, "format", fmt, sizeof fmt));
    if (strcmp(fmt, MT_MANIFEST_FORMAT)) return bad(&c, root, "format", "not \"" MT_MANIFEST_FORMAT "\"");
    int version = 0;
    MT_CHECK(get_int(&c, root, "version", 1, 1 << 20, &version));
    if (version != MT_MANIFEST_VERSION)
        return mt_errorf(MT_ERR_DATA, "%s: manifest version %d; this mtrain reads version %d (use the mtrain that "
                         "saved it)", name, version, MT_MANIFEST_VERSION);
    const int64_t BIG = INT64_C(1) << 62;
    MT_CHECK(get_i64(&c, root, "iteration", 0, BIG, &m->iteration));
    MT_CHECK(get_i64(&c, root, "consumed_samples", 0, BIG, &m->consumed_samples));
    MT_CHECK(get_i64(&c, root, "optimizer_steps", 0, BIG, &m->optimizer_steps));
    MT_CHECK(get_i64(&c, root, "skipped_iterations", 0, BIG, &m->skipped_iterations));
    MT_CHECK(get_i64(&c, root, "train_iters", 0, BIG, &m->train_iters));
    MT_CHECK(get_u64(&c, root, "seed", &m->seed));
    MT_CHECK(get_node(&c, root, "lr_schedule", MT_JSON_OBJECT, &n));
    c.where = "lr_schedule";
    MT_CHECK(get_dbl(&c, n, "lr", &m->lr));
    MT_CHECK(get_dbl(&c, n, "max_lr", &m->max_lr));
    MT_CHECK(get_dbl(&c, n, "min_lr", &m->min_lr));
    MT_CHECK(get_i64(&c, n, "warmup_iters", 0, BIG, &m->warmup_iters));
    MT_CHECK(get_i64(&c, n, "decay_iters", 0, BIG, &m->decay_iters));
    MT_CHECK(get_str(&c, n, "decay_style", m->decay_style, sizeof m->decay_style));
    c.where = "";
    MT_CHECK(get_node(&c, root, "layout", MT_JSON_OBJECT, &n));
    c.where = "layout";
    mt_manifest_layout *y = &m->layout;
    MT_CHECK(get_int(&c, n, "world_size", 1, 1 << 24, &y->world_size));
    MT_CHECK(get_int(&c, n, "tensor", 1, 1 << 16, &y->tensor));
    MT_CHECK(get_int(&c, n, "pipeline", 1, 1 << 16, &y->pipeline));
    MT_CHECK(get_int(&c, n, "virtual_pipeline", 1, 1 << 16, &y->virtual_pipeline));
    MT_CHECK(get_int(&c, n, "data", 1, 1 << 24, &y->data));
    MT_CHECK(get_int(&c, n, "context", 1, 1 << 16, &y->context));
    MT_CHECK(get_int(&c, n, "expert", 1, 1 << 16, &y->expert));
    MT_CHECK(get_bool(&c, n, "sequence_parallel", &y->sequence_parallel));
    MT_CHECK(get_bool(&c, n, "distributed_optimizer", &y->distributed_optimizer));
    c.where = "";
    if (mt_json_get(root, "rerun_state_machine"))
        MT_CHECK(get_str(&c, root, "rerun_state_machine", m->rerun_state, sizeof m->rerun_state));
    if (mt_json_get(root, "expert_bias")) {
        MT_CHECK(get_node(&c, root, "expert_bias", MT_JSON_OBJECT, &n));
        c.where = "expert_bias";
        MT_CHECK(get_int(&c, n, "layers", 1, 1 << 20, &m->expert_bias_layers));
        MT_CHECK(get_int(&c, n, "experts", 1, 1 << 20, &m->expert_bias_experts));
        const mt_json_node *b = NULL;
        MT_CHECK(get_node(&c, n, "bits", MT_JSON_STRING, &b));
        const size_t n_el = (size_t)m->expert_bias_layers * m->expert_bias_experts;
        if (b->n_str_bytes != 8 * n_el) return bad(&c, b, "bits", "not 8 hex digits per layer and expert");
        if (!(m->expert_bias = malloc(n_el * sizeof *m->expert_bias)))
            return mt_errorf(MT_ERR_OOM, "%s: expert_bias of %zu floats", name, n_el);
        for (size_t i = 0; i < n_el; i++) {
            uint32_t u = 0;
            for (int d = 0; d < 8; d++) {
                const char h = b->str[8 * i + (size_t)d];
                const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
                if (v < 0) return bad(&c, b, "bits", "not hexadecimal digits");
                u = u << 4 | (uint32_t)v;
            }
            memcpy(&m->expert_bias[i], &u, 4);
        }
        c.where = "";
    }
    MT_CHECK(get_str(&c, root, "arch", m->arch, sizeof m->arch));
    MT_CHECK(get_str(&c, root, "weight_dtype", m->weight_dtype, sizeof m->weight_dtype));
    if (strcmp(m->weight_dtype, "F32") && strcmp(m->weight_dtype, "BF16"))
        return bad(&c, mt_json_get(root, "weight_dtype"), "weight_dtype", "expected F32 or BF16");
    MT_CHECK(get_int(&c, root, "vocab", 1, 1 << 30, &m->vocab));
    MT_CHECK(get_node(&c, root, "tokenizer", MT_JSON_OBJECT, &n));
    c.where = "tokenizer";
    MT_CHECK(get_str(&c, n, "kind", m->tokenizer, sizeof m->tokenizer));
    MT_CHECK(get_str(&c, n, "vocab_file", m->tokenizer_vocab, sizeof m->tokenizer_vocab));
    MT_CHECK(get_str(&c, n, "merges_file", m->tokenizer_merges, sizeof m->tokenizer_merges));
    MT_CHECK(get_crc(&c, n, "crc32c", &m->tokenizer_crc32c));
    c.where = "";
    MT_CHECK(get_node(&c, root, "recipe", MT_JSON_STRING, &n));
    m->recipe_yaml = strdup(n->str);
    if (!m->recipe_yaml) return mt_errorf(MT_ERR_OOM, "%s: recipe text", name);

    MT_CHECK(get_array(&c, root, "files", 1u << 24, "expected 1 or more files", sizeof *m->files, &arr,
                       (void **)&m->files));
    for (size_t i = 0; i < arr->n_items; i++) {
        char w[48];
        const pctx fc = item_ctx(name, "files", i, w, sizeof w);
        mt_manifest_file *f = &m->files[i];
        if (arr->items[i].type != MT_JSON_OBJECT) return bad(&fc, &arr->items[i], "", "not an object");
        MT_CHECK(get_str(&fc, &arr->items[i], "name", f->name, sizeof f->name));
        if (!f->name[0] || strchr(f->name, '/') || f->name[0] == '.')
            return bad(&fc, &arr->items[i], "name", "not a plain file name");
        MT_CHECK(get_u64(&fc, &arr->items[i], "bytes", &f->bytes));
        MT_CHECK(get_crc(&fc, &arr->items[i], "crc32c", &f->crc32c));
        m->n_files++;
    }
    MT_CHECK(get_array(&c, root, "tensors", 4096, "expected 1 to 4096 tensors", sizeof *m->tensors, &arr,
                       (void **)&m->tensors));
    for (size_t i = 0; i < arr->n_items; i++) {
        char w[48];
        pctx tc = item_ctx(name, "tensors", i, w, sizeof w);
        MT_CHECK(parse_tensor(&tc, &arr->items[i], m, (int)i, &cap));
        m->n_tensors++;
    }
out:
    return st;
}

mt_status mt_manifest_parse(const char *text, size_t n_bytes, const char *name, mt_manifest *m) {
    mt_json_doc doc;
    memset(m, 0, sizeof *m);
    memset(&doc, 0, sizeof doc);
    mt_status st = mt_json_doc_parse(&doc, text, n_bytes, name);
    if (st == MT_OK) st = parse_root(doc.root, name, m);
    mt_json_doc_free(&doc);
    if (st != MT_OK) mt_manifest_free(m);
    return st;
}

mt_status mt_manifest_load(const char *dir, mt_manifest *m) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, MT_MANIFEST_NAME);
    mt_json_doc doc;
    memset(m, 0, sizeof *m);
    mt_status st = mt_json_doc_load(&doc, path);
    if (st != MT_OK) return mt_error_context(st, "checkpoint %s: ", dir);
    st = parse_root(doc.root, path, m);
    mt_json_doc_free(&doc);
    if (st != MT_OK) mt_manifest_free(m);
    return st;
}

void mt_manifest_free(mt_manifest *m) {
    free(m->recipe_yaml);
    free(m->files);
    free(m->tensors);
    free(m->pieces);
    free(m->expert_bias);
    memset(m, 0, sizeof *m);
}

int mt_manifest_tensor_find(const mt_manifest *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return i;
    return -1;
}
