/* safetensors.c — the safetensors writer and parser (safetensors.h). The writer checks every
 * tensor before it creates the file, builds the header JSON with snprintf (names escaped, padded
 * with spaces to a multiple of 8), then writes header and data in one pass, checking every
 * write() and computing the CRC-32C of the bytes as they go out; on any error the partial file
 * is removed. The parser reads the header through core/json_tree.h and checks every length,
 * offset, shape and name against the bytes it was given before an entry is returned.
 * Rule kept: the parser never trusts a length it has not checked; errors name the file and the
 * tensor (MT_ERR_DATA), the writer's name the file and say what was (not) replaced (MT_ERR_IO). */
#include "core/ckpt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/json_string.h"
#include "core/json_tree.h"

static const struct {
    const char *name;
    int bytes;
} DTYPES[] = {{"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
              {"U64", 8}, {"U32", 4},  {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};

/* Element size of dtype s[0, n), 0 when unknown; *canon gets the table's spelling. */
static int dtype_bytes(const char *s, size_t n, const char **canon) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strlen(DTYPES[i].name) == n && !memcmp(DTYPES[i].name, s, n)) {
            if (canon) *canon = DTYPES[i].name;
            return DTYPES[i].bytes;
        }
    return 0;
}

/* Bytes of a tensor: product of dims x elem; 0 on a negative dim or a product past 2^64. */
static int shape_bytes(const int64_t *shape, int n_dims, int elem, uint64_t *out) {
    uint64_t n = (uint64_t)elem;
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[d], &n)) return 0;
    }
    *out = n;
    return 1;
}

/* 1 when s is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as the
 * parser's JSON grammar requires of every name it reads back. */
static int utf8_ok(const unsigned char *s) {
    while (*s) {
        unsigned c = *s++, n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (n == 9) return 0;
        unsigned cp = n == 0 ? c : c & (0x3f >> n);
        for (unsigned k = 0; k < n; k++, s++) {
            if ((*s & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (*s & 0x3f);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp < 0xe000))
            return 0;
    }
    return 1;
}

/* ---- writer ----------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (int tries = 0; tries < 2 && !b->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->p && (size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->n <= (size_t)k) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
}

static mt_status sb_sink(void *ctx, const void *bytes, size_t n) {
    sb_printf(ctx, "%.*s", (int)n, (const char *)bytes);
    return MT_OK;
}

/* A JSON string literal (core/json_string.h) */
static void sb_string(sbuf *b, const char *s) { (void)mt_json_encode_string(s, strlen(s), sb_sink, b); }

static int by_name_ptr(const void *a, const void *b) { return strcmp(**(const char *const *const *)a, **(const char *const *const *)b); }

/* Every tensor is checked before the file is touched: a bad argument is a bug in the caller. */
static mt_status check_tensors(const char *path, const mt_st_tensor *t, int n) {
    if (n < 0 || (n > 0 && !t)) return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: %d tensors", path, n);
    for (int i = 0; i < n; i++) {
        const char *nm = t[i].name ? t[i].name : "(null)";
        uint64_t want = 0;
        int elem = t[i].dtype ? dtype_bytes(t[i].dtype, strlen(t[i].dtype), NULL) : 0;
        if (!t[i].name || !t[i].name[0] || strlen(t[i].name) >= MT_ST_NAME_MAX || !strcmp(t[i].name, "__metadata__") ||
            !utf8_ok((const unsigned char *)t[i].name))
            return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: tensor %d's name '%.*s' is empty, NULL, reserved, "
                             "not UTF-8 or not shorter than %d bytes", path, i, MT_ST_NAME_MAX, nm, MT_ST_NAME_MAX);
        if (!elem)
            return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: unknown dtype '%s' (tensor '%s')", path,
                             t[i].dtype ? t[i].dtype : "(null)", nm);
        if (t[i].n_dims < 0 || t[i].n_dims > MT_ST_MAX_DIMS || !shape_bytes(t[i].shape, t[i].n_dims, elem, &want))
            return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: bad shape (%d dims, a negative dim or a size past "
                             "2^64) (tensor '%s')", path, t[i].n_dims, nm);
        if (want != (uint64_t)t[i].n_bytes || (t[i].n_bytes && !t[i].data))
            return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: the shape needs %llu bytes but %zu are given%s "
                             "(tensor '%s')", path, (unsigned long long)want, t[i].n_bytes, t[i].data ? "" : " (NULL)", nm);
    }
    if (n < 2) return MT_OK;
    const char **names = malloc((size_t)n * sizeof *names);
    const char ***idx = malloc((size_t)n * sizeof *idx);
    mt_status st = MT_OK;
    if (!names || !idx) st = mt_errorf(MT_ERR_OOM, "%s: safetensors write: out of memory", path);
    for (int i = 0; st == MT_OK && i < n; i++) names[i] = t[i].name, idx[i] = &names[i];
    if (st == MT_OK) qsort(idx, (size_t)n, sizeof *idx, by_name_ptr);
    for (int i = 1; st == MT_OK && i < n; i++)
        if (!strcmp(*idx[i - 1], *idx[i]))
            st = mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: two tensors are called '%s'", path, *idx[i]);
    free(names);
    free(idx);
    return st;
}

/* write() until all n bytes are out (short writes, EINTR), CRC-ing what was written. In chunks of
 * MT_ST_WRITE_CHUNK: the CRC then reads bytes the write just pulled into the cache, instead of a
 * second pass over the whole buffer through memory. */
#define MT_ST_WRITE_CHUNK ((size_t)4 << 20)
static mt_status write_all(int fd, const char *path, const void *data, size_t n, uint32_t *crc, uint64_t *done,
                           uint64_t total) {
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n > MT_ST_WRITE_CHUNK ? MT_ST_WRITE_CHUNK : n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == ENOSPC || errno == EDQUOT))
            return mt_errorf(MT_ERR_IO, "%s: cannot write: no space left on device (the disk is full%s after %llu of "
                             "%llu bytes); the partial file is removed and nothing was replaced: free space and save "
                             "again", path, errno == EDQUOT ? " for this user's quota" : "",
                             (unsigned long long)*done, (unsigned long long)total);
        if (w <= 0)
            return mt_errorf(MT_ERR_IO, "%s: cannot write: %s (after %llu of %llu bytes); the partial file is removed "
                             "and nothing was replaced", path, w < 0 ? strerror(errno) : "write() wrote nothing",
                             (unsigned long long)*done, (unsigned long long)total);
        *crc = mt_crc32c(*crc, p, (size_t)w);
        p += w;
        n -= (size_t)w;
        *done += (uint64_t)w;
    }
    return MT_OK;
}

mt_status mt_st_write(const char *path, const mt_st_tensor *tensors, int n_tensors, int do_fsync, uint32_t *crc,
                      uint64_t *file_bytes, uint64_t *data_start) {
    mt_status st = check_tensors(path, tensors, n_tensors);
    if (st != MT_OK) return st;
    /* header: 8 bytes of length (filled in below), then the JSON */
    sbuf b = {0};
    sb_printf(&b, "%8s{\"__metadata__\":{\"format\":\"pt\"}", "");
    uint64_t off = 0;
    for (int i = 0; i < n_tensors; i++) {
        const mt_st_tensor *t = &tensors[i];
        sb_printf(&b, ",");
        sb_string(&b, t->name);
        sb_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype);
        for (int d = 0; d < t->n_dims; d++) sb_printf(&b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sb_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + t->n_bytes));
        off += t->n_bytes;
    }
    sb_printf(&b, "}");
    while (!b.oom && b.n % 8) sb_printf(&b, " ");
    if (b.oom) {
        free(b.p);
        return mt_errorf(MT_ERR_OOM, "%s: safetensors write: out of memory for the header", path);
    }
    uint64_t n_hdr = b.n - 8, total = b.n + off, done = 0;
    if (n_hdr > MT_ST_MAX_HEADER_BYTES) {
        free(b.p);
        return mt_errorf(MT_ERR_INTERNAL, "%s: safetensors write: the header of %d tensors is %llu bytes, over the "
                         "%llu-byte limit readers keep", path, n_tensors, (unsigned long long)n_hdr,
                         (unsigned long long)MT_ST_MAX_HEADER_BYTES);
    }
    for (int k = 0; k < 8; k++) b.p[k] = (char)(n_hdr >> (8 * k) & 0xff);

    uint32_t c = 0;
    struct stat fst;
    memset(&fst, 0, sizeof fst);
    int is_reg = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s; nothing was written or replaced", path, strerror(errno));
        goto out;
    }
    /* only a regular file this call created / truncated is ever removed (never a device) */
    if (fstat(fd, &fst) == 0) is_reg = S_ISREG(fst.st_mode);
    MT_CHECK(write_all(fd, path, b.p, b.n, &c, &done, total));
    for (int i = 0; i < n_tensors; i++) MT_CHECK(write_all(fd, path, tensors[i].data, tensors[i].n_bytes, &c, &done, total));
    if (do_fsync && fsync(fd) != 0 && (is_reg || errno != EINVAL)) {
        st = mt_errorf(MT_ERR_IO, "%s: fsync failed: %s; the partial file is removed and nothing was replaced", path,
                       strerror(errno));
        goto out;
    }
out:
    free(b.p);
    if (fd >= 0 && close(fd) != 0 && st == MT_OK)
        st = mt_errorf(MT_ERR_IO, "%s: close failed: %s; the partial file is removed and nothing was replaced", path,
                       strerror(errno));
    if (st != MT_OK) {
        struct stat now;
        if (is_reg && stat(path, &now) == 0 && now.st_dev == fst.st_dev && now.st_ino == fst.st_ino) unlink(path);
        return st;
    }
    if (crc) *crc = c;
    if (file_bytes) *file_bytes = total;
    if (data_start) *data_start = 8 + n_hdr;
    return MT_OK;
}

/* ---- parser ----------------------------------------------------------------------------- */

static mt_status bad(const char *path, const char *tensor, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static mt_status bad(const char *path, const char *tensor, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!tensor) return mt_errorf(MT_ERR_DATA, "%s: safetensors header: %s", path, what);
    return mt_errorf(MT_ERR_DATA, "%s: safetensors header: %s (tensor '%.*s')", path, what, MT_ST_NAME_MAX, tensor);
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const mt_st_entry *const *)a)->name, (*(const mt_st_entry *const *)b)->name);
}

static int by_offset(const void *a, const void *b) {
    const mt_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* One tensor's entry {"dtype", "shape", "data_offsets"} into *e (name already set). */
static mt_status parse_entry(const char *path, const mt_json_node *v, uint64_t data_start, uint64_t n_data,
                             mt_st_entry *e) {
    const char *nm = e->name;
    if (v->type != MT_JSON_OBJECT) return bad(path, nm, "the entry is %s, not an object", mt_json_type_name(v->type));
    const mt_json_node *dt = NULL, *sh = NULL, *of = NULL;
    for (size_t i = 0; i < v->n_items; i++) {
        const mt_json_node *m = &v->items[i];
        const mt_json_node **slot = !strcmp(m->key, "dtype") ? &dt : !strcmp(m->key, "shape") ? &sh
                                    : !strcmp(m->key, "data_offsets") ? &of : NULL;
        if (!slot || strlen(m->key) != m->n_key_bytes) return bad(path, nm, "unknown field '%.40s'", m->key);
        if (*slot) return bad(path, nm, "field \"%s\" appears twice", m->key);
        *slot = m;
    }
    if (!dt || !sh || !of)
        return bad(path, nm, "no \"%s\" field", !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    const char *canon = NULL;
    if (dt->type != MT_JSON_STRING) return bad(path, nm, "dtype is %s, not a string", mt_json_type_name(dt->type));
    if (!(e->elem_bytes = dtype_bytes(dt->str, dt->n_str_bytes, &canon)))
        return bad(path, nm, "unknown dtype '%.16s' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL "
                   "F8_E4M3 F8_E5M2)", dt->str);
    snprintf(e->dtype, sizeof e->dtype, "%s", canon);
    if (sh->type != MT_JSON_ARRAY) return bad(path, nm, "shape is %s, not an array", mt_json_type_name(sh->type));
    if (sh->n_items > MT_ST_MAX_DIMS) return bad(path, nm, "shape has %zu dims, more than %d", sh->n_items, MT_ST_MAX_DIMS);
    e->n_dims = (int)sh->n_items;
    for (int d = 0; d < e->n_dims; d++) {
        const mt_json_node *x = &sh->items[d];
        if (x->type != MT_JSON_NUMBER || !x->is_integer)
            return bad(path, nm, "shape[%d] is %s, not an integer", d, x->type == MT_JSON_NUMBER ? "a fraction or too "
                       "large" : mt_json_type_name(x->type));
        if (x->integer < 0) return bad(path, nm, "shape[%d] is %lld, a negative dim", d, (long long)x->integer);
        e->shape[d] = x->integer;
    }
    if (of->type != MT_JSON_ARRAY || of->n_items != 2)
        return bad(path, nm, "data_offsets is not an array [begin, end]");
    for (int k = 0; k < 2; k++)
        if (of->items[k].type != MT_JSON_NUMBER || !of->items[k].is_integer || of->items[k].integer < 0)
            return bad(path, nm, "data_offsets[%d] is not a non-negative integer", k);
    uint64_t b = (uint64_t)of->items[0].integer, en = (uint64_t)of->items[1].integer, size = 0;
    if (b > en) return bad(path, nm, "data_offsets [%llu, %llu] end before they begin", (unsigned long long)b,
                           (unsigned long long)en);
    if (en > n_data)
        return bad(path, nm, "data_offsets [%llu, %llu] are past the end of the data (%llu bytes; truncated file?)",
                   (unsigned long long)b, (unsigned long long)en, (unsigned long long)n_data);
    if (!shape_bytes(e->shape, e->n_dims, e->elem_bytes, &size))
        return bad(path, nm, "the shape's size in bytes overflows 64 bits");
    if (size != en - b)
        return bad(path, nm, "shape and data_offsets do not match: the shape of %s needs %llu bytes, data_offsets "
                   "[%llu, %llu] hold %llu", e->dtype, (unsigned long long)size, (unsigned long long)b,
                   (unsigned long long)en, (unsigned long long)(en - b));
    e->begin = data_start + b;
    e->end = data_start + en;
    return MT_OK;
}

static mt_status check_metadata(const char *path, const mt_json_node *m) {
    if (m->type != MT_JSON_OBJECT) return bad(path, NULL, "__metadata__ is %s, not an object of strings",
                                             mt_json_type_name(m->type));
    for (size_t i = 0; i < m->n_items; i++)
        if (m->items[i].type != MT_JSON_STRING)
            return bad(path, NULL, "__metadata__ value '%.40s' is %s, not a string", m->items[i].key,
                       mt_json_type_name(m->items[i].type));
    return MT_OK;
}

mt_status mt_st_parse(const uint8_t *buf, size_t n_bytes, const char *name, mt_st_header *h) {
    memset(h, 0, sizeof *h);
    const char *path = name ? name : "(safetensors)";
    if (!buf || n_bytes < 8)
        return mt_errorf(MT_ERR_DATA, "%s: safetensors header: the file is %zu bytes, too short for the 8-byte header "
                         "length (truncated file?)", path, buf ? n_bytes : 0);
    uint64_t n_hdr = 0;
    for (int k = 7; k >= 0; k--) n_hdr = n_hdr << 8 | buf[k];
    if (n_hdr > MT_ST_MAX_HEADER_BYTES)
        return bad(path, NULL, "header length %llu is over the %llu-byte limit (corrupt, or not a safetensors file)",
                   (unsigned long long)n_hdr, (unsigned long long)MT_ST_MAX_HEADER_BYTES);
    if (n_hdr > n_bytes - 8)
        return bad(path, NULL, "header length %llu is past the end of the file (%zu bytes; truncated file?)",
                   (unsigned long long)n_hdr, n_bytes);
    char jname[4200];
    snprintf(jname, sizeof jname, "%s: safetensors header", path);
    mt_json_doc doc;
    mt_status st = mt_json_doc_parse(&doc, (const char *)buf + 8, (size_t)n_hdr, jname);
    if (st != MT_OK) return st;
    const mt_json_node *root = doc.root;
    mt_st_entry **idx = NULL;
    int n = 0, seen_meta = 0;
    if (root->type != MT_JSON_OBJECT) {
        st = bad(path, NULL, "the JSON is %s, not an object", mt_json_type_name(root->type));
        goto out;
    }
    h->entries = calloc(root->n_items ? root->n_items : 1, sizeof *h->entries);
    idx = malloc((root->n_items ? root->n_items : 1) * sizeof *idx);
    if (!h->entries || !idx) {
        st = mt_errorf(MT_ERR_OOM, "%s: safetensors header: out of memory for %zu entries", path, root->n_items);
        goto out;
    }
    h->data_start = 8 + n_hdr;
    for (size_t i = 0; i < root->n_items; i++) {
        const mt_json_node *m = &root->items[i];
        if (m->n_key_bytes == 12 && !memcmp(m->key, "__metadata__", 12)) {
            if (seen_meta++) {
                st = bad(path, NULL, "__metadata__ appears twice");
                goto out;
            }
            MT_CHECK(check_metadata(path, m));
            continue;
        }
        if (!m->n_key_bytes || m->n_key_bytes >= MT_ST_NAME_MAX || memchr(m->key, 0, m->n_key_bytes)) {
            st = bad(path, m->key, "the tensor name is %zu bytes%s; names are 1 to %d bytes, without NUL",
                     m->n_key_bytes, memchr(m->key, 0, m->n_key_bytes) ? " with a NUL byte" : "", MT_ST_NAME_MAX - 1);
            goto out;
        }
        mt_st_entry *e = &h->entries[n];
        memcpy(e->name, m->key, m->n_key_bytes);
        MT_CHECK(parse_entry(path, m, h->data_start, n_bytes - h->data_start, e));
        idx[n] = e;
        n++;
    }
    h->n_entries = n;
    qsort(idx, (size_t)n, sizeof *idx, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(idx[i - 1]->name, idx[i]->name)) {
            st = bad(path, idx[i]->name, "duplicate tensor name");
            goto out;
        }
    qsort(h->entries, (size_t)n, sizeof *h->entries, by_offset);
    for (int i = 1; i < n; i++) {
        const mt_st_entry *a = &h->entries[i - 1], *e = &h->entries[i];
        if (e->begin < a->end) {
            st = bad(path, e->name, "data_offsets [%llu, %llu] overlap those of tensor '%s' [%llu, %llu]",
                     (unsigned long long)(e->begin - h->data_start), (unsigned long long)(e->end - h->data_start),
                     a->name, (unsigned long long)(a->begin - h->data_start), (unsigned long long)(a->end - h->data_start));
            goto out;
        }
    }
out:
    free(idx);
    mt_json_doc_free(&doc);
    if (st != MT_OK) mt_st_header_free(h);
    return st;
}

const mt_st_entry *mt_st_find(const mt_st_header *h, const char *tensor) {
    for (int i = 0; h && tensor && i < h->n_entries; i++)
        if (!strcmp(h->entries[i].name, tensor)) return &h->entries[i];
    return NULL;
}

void mt_st_header_free(mt_st_header *h) {
    if (!h) return;
    free(h->entries);
    memset(h, 0, sizeof *h);
}
