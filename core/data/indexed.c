/* indexed.c — Megatron indexed dataset reader (mmap, validated before use, the mappings
 * guarded by mapped_files.h) and writer (streams to *.tmp.<pid>, then fsync + publish by the
 * rule in indexed.h). Layout in indexed.h.
 * Rule kept: nothing in a file is trusted: every count, pointer and index is checked
 * against the file sizes with overflow-safe arithmetic before the first token is read. */
#include "core/data/indexed.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/data/tmpfiles.h"
#include "core/file_read.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "indexed.c reads and writes little-endian files with plain loads: port it first"
#endif

static const char k_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

/* ---- helpers -------------------------------------------------------------------------- */

static int32_t ld_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static int64_t ld_i64(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }

/* For i < count: v = item i of type T (`bytes` each, unaligned) at p, then stmt. */
#define EACH_ITEM(T, bytes, count, stmt)                \
    for (int64_t i = 0; i < (count); i++) {             \
        T v;                                            \
        memcpy(&v, p + (size_t)(bytes) * (size_t)i, bytes); \
        stmt;                                           \
    }
static uint64_t ld_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static char *str_cat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

int mt_indexed_dtype_bytes(int dtype_code) {
    switch (dtype_code) {
    case MT_INDEXED_DTYPE_U8: case MT_INDEXED_DTYPE_I8: return 1;
    case MT_INDEXED_DTYPE_I16: case MT_INDEXED_DTYPE_U16: return 2;
    case MT_INDEXED_DTYPE_I32: case MT_INDEXED_DTYPE_F32: return 4;
    case MT_INDEXED_DTYPE_I64: case MT_INDEXED_DTYPE_F64: return 8;
    }
    return 0;
}

const char *mt_indexed_dtype_name(int dtype_code) {
    switch (dtype_code) {
    case MT_INDEXED_DTYPE_U8: return "uint8";
    case MT_INDEXED_DTYPE_I8: return "int8";
    case MT_INDEXED_DTYPE_I16: return "int16";
    case MT_INDEXED_DTYPE_I32: return "int32";
    case MT_INDEXED_DTYPE_I64: return "int64";
    case MT_INDEXED_DTYPE_F64: return "float64";
    case MT_INDEXED_DTYPE_F32: return "float32";
    case MT_INDEXED_DTYPE_U16: return "uint16";
    }
    return "unknown";
}

int mt_indexed_dtype_for_vocab(int64_t vocab_size) {
    return vocab_size < 65500 ? MT_INDEXED_DTYPE_U16 : MT_INDEXED_DTYPE_I32;
}

/* ---- reader --------------------------------------------------------------------------- */

/* Maps a whole file read-only. An empty file maps to NULL with *n_bytes = 0. *err_no is the
 * errno of a failed open (0 otherwise). */
static mt_status map_file(const char *path, const uint8_t **map, size_t *n_bytes,
                          mt_file_id *id, int *err_no) {
    *map = NULL;
    *n_bytes = 0;
    *err_no = 0;
    int fd;
    struct stat sb;
    mt_status opened = mt_open_regular(path, &fd, &sb, err_no);
    if (opened != MT_OK && *err_no)
        return mt_errorf(MT_ERR_IO, "%s: cannot open: %s (run mtrain preprocess to make it)",
                         path, strerror(*err_no));
    if (opened != MT_OK) return opened;
    mt_file_id_from_stat(id, &sb);
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mt_errorf(MT_ERR_IO, "%s: cannot mmap %lld bytes: %s", path,
                             (long long)sb.st_size, strerror(e));
        }
        *map = p;
        *n_bytes = (size_t)sb.st_size;
    }
    close(fd);
    return MT_OK;
}

void mt_indexed_close(mt_indexed *ds) {
    if (!ds) return;
    mt_mapped_unregister(ds->idx_slot - 1);
    mt_mapped_unregister(ds->bin_slot - 1);
    if (ds->idx_map && ds->is_mock) free((void *)ds->idx_map);
    else if (ds->idx_map) munmap((void *)ds->idx_map, ds->n_idx_bytes);
    if (ds->bin_map) munmap((void *)ds->bin_map, ds->n_bin_bytes);
    free(ds->idx_path);
    free(ds->bin_path);
    memset(ds, 0, sizeof *ds);
}

/* Checks the header and the three arrays of the .idx; fills the views. */
static mt_status validate_idx(mt_indexed *ds) {
    const char *path = ds->idx_path;
    const uint8_t *m = ds->idx_map;
    size_t n = ds->n_idx_bytes;
    if (n < MT_INDEXED_HEADER_BYTES) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: truncated: %zu bytes, shorter than the %d-byte header; "
                         "re-run mtrain preprocess", path, n, MT_INDEXED_HEADER_BYTES);
    }
    if (memcmp(m, k_magic, sizeof k_magic) != 0) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: bad magic: not a Megatron indexed dataset index (expected "
                         "\"MMIDIDX\\0\\0\" in the first 9 bytes)", path);
    }
    uint64_t version = ld_u64(m + 9);
    if (version != 1) {
        return mt_errorf(MT_ERR_DATA, "%s: version: %llu, only version 1 is supported", path,
                         (unsigned long long)version);
    }
    int dtype = m[17];
    if (mt_indexed_dtype_bytes(dtype) == 0) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: dtype: unknown code %d (known: 1 uint8, 2 int8, 3 int16, 4 int32, "
                         "5 int64, 6 float64, 7 float32, 8 uint16)", path, dtype);
    }
    uint64_t n_seq = ld_u64(m + 18), n_doc = ld_u64(m + 26);
    /* needed = 34 + 12 * n_seq + 8 * n_doc, overflow-checked in unsigned 64-bit. */
    uint64_t need = 0, t = 0;
    int overflow = __builtin_mul_overflow(n_seq, (uint64_t)12, &t) ||
                   __builtin_add_overflow(t, (uint64_t)MT_INDEXED_HEADER_BYTES, &need) ||
                   __builtin_mul_overflow(n_doc, (uint64_t)8, &t) ||
                   __builtin_add_overflow(need, t, &need) || need > (uint64_t)INT64_MAX;
    if (overflow || need > n) {
        if (overflow) {
            return mt_errorf(MT_ERR_DATA,
                             "%s: truncated: header says %llu sequences and %llu document "
                             "indices (more bytes than any file holds) but the file has %zu "
                             "bytes; re-run mtrain preprocess", path,
                             (unsigned long long)n_seq, (unsigned long long)n_doc, n);
        }
        return mt_errorf(MT_ERR_DATA,
                         "%s: truncated: header says %llu sequences and %llu document indices "
                         "(needs %llu bytes) but the file has %zu bytes; re-run mtrain "
                         "preprocess", path, (unsigned long long)n_seq,
                         (unsigned long long)n_doc, (unsigned long long)need, n);
    }
    if (need < n) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: size: header says %llu sequences and %llu document indices "
                         "(%llu bytes) but the file has %zu bytes (%llu extra); re-run mtrain "
                         "preprocess", path, (unsigned long long)n_seq,
                         (unsigned long long)n_doc, (unsigned long long)need, n,
                         (unsigned long long)(n - need));
    }
    if (n_doc < 1) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: document_count: 0, must be at least 1 (document_indices starts "
                         "with 0)", path);
    }
    ds->dtype_code = dtype;
    ds->n_item_bytes = mt_indexed_dtype_bytes(dtype);
    ds->n_sequences = (int64_t)n_seq;
    ds->n_document_indices = (int64_t)n_doc;
    ds->lengths_raw = m + MT_INDEXED_HEADER_BYTES;
    ds->pointers_raw = ds->lengths_raw + 4 * n_seq;
    ds->doc_index_raw = ds->pointers_raw + 8 * n_seq;

    /* document_indices: starts at 0, never decreases, ends at sequence_count. */
    int64_t prev = ld_i64(ds->doc_index_raw);
    if (prev != 0) {
        return mt_errorf(MT_ERR_DATA, "%s: document_indices[0]: %lld, expected 0", path,
                         (long long)prev);
    }
    for (int64_t d = 1; d < ds->n_document_indices; d++) {
        int64_t v = ld_i64(ds->doc_index_raw + 8 * d);
        if (v < prev) {
            return mt_errorf(MT_ERR_DATA,
                             "%s: document_indices[%lld]: %lld is less than "
                             "document_indices[%lld] = %lld (must not decrease)", path,
                             (long long)d, (long long)v, (long long)(d - 1), (long long)prev);
        }
        prev = v;
    }
    if (prev != ds->n_sequences) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: document_indices[%lld]: %lld, expected the sequence_count %lld",
                         path, (long long)(ds->n_document_indices - 1), (long long)prev,
                         (long long)ds->n_sequences);
    }

    /* sequence_lengths >= 0 and pointers contiguous from 0. */
    int64_t end = 0, n_tokens = 0;
    for (int64_t i = 0; i < ds->n_sequences; i++) {
        int32_t len = ld_i32(ds->lengths_raw + 4 * i);
        int64_t ptr = ld_i64(ds->pointers_raw + 8 * i);
        if (len < 0) {
            return mt_errorf(MT_ERR_DATA, "%s: sequence_lengths[%lld]: %d is negative", path,
                             (long long)i, len);
        }
        if (ptr != end) {
            if (i == 0) {
                return mt_errorf(MT_ERR_DATA, "%s: sequence_pointers[0]: %lld, expected 0",
                                 path, (long long)ptr);
            }
            return mt_errorf(MT_ERR_DATA,
                             "%s: sequence_pointers[%lld]: %lld, expected %lld (where sequence "
                             "%lld of %d tokens x %d bytes ends)", path, (long long)i,
                             (long long)ptr, (long long)end, (long long)(i - 1),
                             ld_i32(ds->lengths_raw + 4 * (i - 1)), ds->n_item_bytes);
        }
        end += (int64_t)len * ds->n_item_bytes;
        n_tokens += len;
        /* Checked on the way, so `end` stays <= .bin size + 2^34 and cannot overflow. */
        if ((uint64_t)end > (uint64_t)ds->n_bin_bytes) {
            return mt_errorf(MT_ERR_DATA,
                             "%s: truncated: %zu bytes, but %s says sequence %lld (of %lld) "
                             "ends at byte %lld; re-run mtrain preprocess", ds->bin_path,
                             ds->n_bin_bytes, path, (long long)i, (long long)ds->n_sequences,
                             (long long)end);
        }
    }
    ds->n_tokens = n_tokens;
    if ((uint64_t)end != (uint64_t)ds->n_bin_bytes) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: size: %zu bytes, but %s says its %lld sequences hold %lld tokens "
                         "of %s (%lld bytes); the pair is inconsistent, re-run mtrain "
                         "preprocess", ds->bin_path, ds->n_bin_bytes, path,
                         (long long)ds->n_sequences, (long long)n_tokens,
                         mt_indexed_dtype_name(ds->dtype_code), (long long)end);
    }
    return MT_OK;
}

static void unmap_both(mt_indexed *ds) {
    if (ds->idx_map && ds->is_mock) free((void *)ds->idx_map);
    else if (ds->idx_map) munmap((void *)ds->idx_map, ds->n_idx_bytes);
    if (ds->bin_map) munmap((void *)ds->bin_map, ds->n_bin_bytes);
    ds->idx_map = ds->bin_map = NULL;
    ds->n_idx_bytes = ds->n_bin_bytes = 0;
}

mt_status mt_indexed_open(mt_indexed *ds, const char *prefix) {
    mt_status st = MT_OK;
    memset(ds, 0, sizeof *ds);
    ds->idx_path = str_cat(prefix, ".idx");
    ds->bin_path = str_cat(prefix, ".bin");
    if (!ds->idx_path || !ds->bin_path) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory opening the dataset", prefix);
        goto out;
    }
    /* The reader's half of the publishing rule (indexed.h): .idx, then .bin, then the .idx
     * must still be in place; a .bin without its .idx may be mid-publish. ~2 s at most. */
    for (int attempt = 0;; attempt++) {
        int e = 0;
        struct stat sb;
        const struct timespec pause = {0, 20 * 1000 * 1000};
        st = map_file(ds->idx_path, &ds->idx_map, &ds->n_idx_bytes, &ds->idx_id, &e);
        if (st != MT_OK) {
            if (e == ENOENT && stat(ds->bin_path, &sb) == 0) {
                if (attempt < 100) {
                    nanosleep(&pause, NULL);
                    continue;
                }
                st = mt_errorf(MT_ERR_IO, "%s: missing beside %s (an interrupted mtrain "
                               "preprocess, or only the .bin copied?): copy the .idx beside "
                               "it or re-run mtrain preprocess", ds->idx_path, ds->bin_path);
            }
            goto out;
        }
        MT_CHECK(map_file(ds->bin_path, &ds->bin_map, &ds->n_bin_bytes, &ds->bin_id, &e));
        if (stat(ds->idx_path, &sb) == 0 && (uint64_t)sb.st_dev == ds->idx_id.dev &&
            (uint64_t)sb.st_ino == ds->idx_id.ino) {
            break;
        }
        unmap_both(ds);
        if (attempt >= 100) {
            st = mt_errorf(MT_ERR_IO, "%s: keeps being replaced while it is opened (is mtrain "
                           "preprocess writing %s right now?); open it once it is done",
                           ds->idx_path, prefix);
            goto out;
        }
        nanosleep(&pause, NULL);
    }
    MT_CHECK(validate_idx(ds));
    if (ds->idx_map) {
        ds->idx_slot = 1 + mt_mapped_register(ds->idx_map, ds->n_idx_bytes, ds->idx_path);
    }
    if (ds->bin_map) {
        ds->bin_slot = 1 + mt_mapped_register(ds->bin_map, ds->n_bin_bytes, ds->bin_path);
    }
out:
    if (st != MT_OK) mt_indexed_close(ds);
    return st;
}

mt_status mt_indexed_check_unchanged(const mt_indexed *ds) {
    if (ds->is_mock) return MT_OK;
    mt_status st = mt_file_id_check(&ds->idx_id, ds->idx_path, "training read it");
    if (st != MT_OK) return st;
    return mt_file_id_check(&ds->bin_id, ds->bin_path, "training read it");
}

int64_t mt_indexed_n_sequences(const mt_indexed *ds) { return ds->n_sequences; }
int64_t mt_indexed_n_documents(const mt_indexed *ds) { return ds->n_document_indices - 1; }
int64_t mt_indexed_n_tokens(const mt_indexed *ds) { return ds->n_tokens; }

int32_t mt_indexed_sequence_length(const mt_indexed *ds, int64_t i) {
    if (i < 0 || i >= ds->n_sequences) return 0;
    return ld_i32(ds->lengths_raw + 4 * i);
}

void mt_indexed_document_range(const mt_indexed *ds, int64_t d, int64_t *first, int64_t *end) {
    if (d < 0 || d >= ds->n_document_indices - 1) {
        *first = *end = 0;
        return;
    }
    *first = ld_i64(ds->doc_index_raw + 8 * d);
    *end = ld_i64(ds->doc_index_raw + 8 * (d + 1));
}

mt_status mt_indexed_read(const mt_indexed *ds, int64_t sequence, int64_t offset,
                          int64_t n_tokens, int32_t *tokens) {
    if (sequence < 0 || sequence >= ds->n_sequences) {
        return mt_errorf(MT_ERR_INTERNAL, "%s: read of sequence %lld, but it has %lld",
                         ds->idx_path, (long long)sequence, (long long)ds->n_sequences);
    }
    int32_t len = ld_i32(ds->lengths_raw + 4 * sequence);
    if (offset < 0 || n_tokens < 0 || offset > len || n_tokens > len - offset) {
        return mt_errorf(MT_ERR_INTERNAL,
                         "%s: read of tokens [%lld, %lld) of sequence %lld, which has %d",
                         ds->idx_path, (long long)offset, (long long)(offset + n_tokens),
                         (long long)sequence, len);
    }
    if (ds->is_mock) { /* Megatron's mock document: 1, 2, ..., len-1, eod */
        for (int64_t i = 0; i < n_tokens; i++) tokens[i] = offset + i == len - 1 ? ds->mock_eod : (int32_t)(offset + i + 1);
        return MT_OK;
    }
    /* An empty .bin is not mapped (bin_map NULL, every sequence empty): a read of no tokens
     * applies no offset to it, since even NULL + 0 is undefined. */
    const uint8_t *p = ds->bin_map;
    if (n_tokens > 0) p += ld_i64(ds->pointers_raw + 8 * sequence) + offset * ds->n_item_bytes;
    switch (ds->dtype_code) { /* each item fits an int32 token id */
    case MT_INDEXED_DTYPE_U8: EACH_ITEM(uint8_t, 1, n_tokens, tokens[i] = v); break;
    case MT_INDEXED_DTYPE_I8: EACH_ITEM(int8_t, 1, n_tokens, tokens[i] = v); break;
    case MT_INDEXED_DTYPE_U16: EACH_ITEM(uint16_t, 2, n_tokens, tokens[i] = v); break;
    case MT_INDEXED_DTYPE_I16: EACH_ITEM(int16_t, 2, n_tokens, tokens[i] = v); break;
    case MT_INDEXED_DTYPE_I32:
        if (n_tokens > 0) memcpy(tokens, p, (size_t)n_tokens * 4);
        break;
    case MT_INDEXED_DTYPE_I64:
        for (int64_t i = 0; i < n_tokens; i++) {
            int64_t v = ld_i64(p + 8 * i);
            if (v < INT32_MIN || v > INT32_MAX) {
                return mt_errorf(MT_ERR_DATA,
                                 "%s: sequence %lld token %lld: %lld does not fit a 32-bit "
                                 "token id", ds->bin_path, (long long)sequence,
                                 (long long)(offset + i), (long long)v);
            }
            tokens[i] = (int32_t)v;
        }
        break;
    default:
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s: holds %s values, not token ids",
                         ds->bin_path, mt_indexed_dtype_name(ds->dtype_code));
    }
    return MT_OK;
}

mt_status mt_indexed_max_token(const mt_indexed *ds, int64_t max_tokens, int64_t *max_id, int64_t *scanned) {
    if (ds->is_mock) {
        int32_t longest = 0;
        for (int64_t i = 0; i < ds->n_sequences; i++) {
            const int32_t l = mt_indexed_sequence_length(ds, i);
            longest = l > longest ? l : longest;
        }
        *max_id = longest - 1 > ds->mock_eod ? longest - 1 : ds->mock_eod;
        *scanned = ds->n_tokens;
        return MT_OK;
    }
    int64_t n = ds->n_bin_bytes / (ds->n_item_bytes > 0 ? ds->n_item_bytes : 1);
    if (max_tokens >= 0 && n > max_tokens) n = max_tokens;
    int64_t mx = -1;
    const uint8_t *p = ds->bin_map;
    switch (ds->dtype_code) { /* the largest, starting from mx = -1 */
    case MT_INDEXED_DTYPE_U8: EACH_ITEM(uint8_t, 1, n, mx = v > mx ? v : mx); break;
    case MT_INDEXED_DTYPE_I8: EACH_ITEM(int8_t, 1, n, mx = v > mx ? v : mx); break;
    case MT_INDEXED_DTYPE_U16: EACH_ITEM(uint16_t, 2, n, mx = v > mx ? v : mx); break;
    case MT_INDEXED_DTYPE_I16: EACH_ITEM(int16_t, 2, n, mx = v > mx ? v : mx); break;
    case MT_INDEXED_DTYPE_I32: EACH_ITEM(int32_t, 4, n, mx = v > mx ? v : mx); break;
    case MT_INDEXED_DTYPE_I64: EACH_ITEM(int64_t, 8, n, mx = v > mx ? v : mx); break;
    default:
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s: holds %s values, not token ids", ds->bin_path,
                         mt_indexed_dtype_name(ds->dtype_code));
    }
    *max_id = mx;
    *scanned = n;
    return MT_OK;
}

/* ---- writer --------------------------------------------------------------------------- */

static mt_status write_bytes(FILE *f, const void *p, size_t n_bytes, const char *path) {
    if (n_bytes && fwrite(p, 1, n_bytes, f) != n_bytes) {
        return mt_errorf(MT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return MT_OK;
}

/* fflush + fsync + fclose; *f becomes NULL either way. */
static mt_status close_synced(FILE **f, const char *path) {
    mt_status st = MT_OK;
    if (fflush(*f) != 0 || fsync(fileno(*f)) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    if (fclose(*f) != 0 && st == MT_OK) {
        st = mt_errorf(MT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    }
    *f = NULL;
    return st;
}

static void writer_free(mt_indexed_writer *w) {
    free(w->bin_path);
    free(w->idx_path);
    free(w->bin_tmp);
    free(w->idx_tmp);
    memset(w, 0, sizeof *w);
}

static void writer_forget_tmps(mt_indexed_writer *w) {
    mt_tmpfiles_forget(w->bin_slot - 1);
    mt_tmpfiles_forget(w->idx_slot - 1);
    w->bin_slot = w->idx_slot = 0;
}

void mt_indexed_writer_abort(mt_indexed_writer *w) {
    if (!w) return;
    if (w->bin) fclose(w->bin);
    if (w->idx) fclose(w->idx);
    if (w->doc) fclose(w->doc);
    if (w->bin_tmp) unlink(w->bin_tmp);
    if (w->idx_tmp) unlink(w->idx_tmp);
    writer_forget_tmps(w);
    writer_free(w);
}

/* str_cat(prefix, suffix) + ".<pid>" */
static char *tmp_name(const char *prefix, const char *suffix) {
    char *base = str_cat(prefix, suffix), *out = NULL;
    if (base) {
        size_t n = strlen(base) + 32;
        out = malloc(n);
        if (out && mt_tmpfiles_name(base, "tmp", out, n) != MT_OK) {
            free(out);
            out = NULL;
        }
    }
    free(base);
    return out;
}

mt_status mt_indexed_writer_open(mt_indexed_writer *w, const char *prefix, int dtype_code) {
    mt_status st = MT_OK;
    char *doc_tmp = NULL;
    memset(w, 0, sizeof *w);
    int n_item_bytes = mt_indexed_dtype_bytes(dtype_code);
    if (n_item_bytes == 0 || dtype_code == MT_INDEXED_DTYPE_F32 ||
        dtype_code == MT_INDEXED_DTYPE_F64) {
        return mt_errorf(MT_ERR_UNSUPPORTED,
                         "%s: cannot write token dtype code %d (%s): use an integer dtype",
                         prefix, dtype_code, mt_indexed_dtype_name(dtype_code));
    }
    w->dtype_code = dtype_code;
    w->n_item_bytes = n_item_bytes;
    w->bin_path = str_cat(prefix, ".bin");
    w->idx_path = str_cat(prefix, ".idx");
    w->bin_tmp = tmp_name(prefix, ".bin");
    w->idx_tmp = tmp_name(prefix, ".idx");
    doc_tmp = tmp_name(prefix, ".docidx");
    if (!w->bin_path || !w->idx_path || !w->bin_tmp || !w->idx_tmp || !doc_tmp) {
        st = mt_errorf(MT_ERR_OOM, "%s: out of memory", prefix);
        goto out;
    }
    /* Temporaries of this name whose owner died (SIGKILL, a crash) go first. */
    mt_tmpfiles_remove_stale(w->bin_path, "tmp", NULL);
    mt_tmpfiles_remove_stale(w->idx_path, "tmp", NULL);
    {
        char *doc_final = str_cat(prefix, ".docidx");
        if (doc_final) mt_tmpfiles_remove_stale(doc_final, "tmp", NULL);
        free(doc_final);
    }
    /* Registered before they exist: a signal between create and register leaves nothing. */
    w->bin_slot = 1 + mt_tmpfiles_register(w->bin_tmp);
    w->idx_slot = 1 + mt_tmpfiles_register(w->idx_tmp);
    w->bin = fopen(w->bin_tmp, "wb");
    if (!w->bin) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", w->bin_tmp, strerror(errno));
        goto out;
    }
    w->idx = fopen(w->idx_tmp, "w+b"); /* + : finish() reads the lengths back */
    if (!w->idx) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", w->idx_tmp, strerror(errno));
        goto out;
    }
    /* The document index stream lives in an unlinked file: nothing is left if we die. */
    w->doc = fopen(doc_tmp, "w+b");
    if (!w->doc) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", doc_tmp, strerror(errno));
        goto out;
    }
    unlink(doc_tmp);
    /* Placeholder header: the real one is written by finish(). sequence_lengths follow it,
     * so they can be streamed before the counts are known. */
    uint8_t zero[MT_INDEXED_HEADER_BYTES] = {0};
    MT_CHECK(write_bytes(w->idx, zero, sizeof zero, w->idx_tmp));
out:
    free(doc_tmp);
    if (st != MT_OK) mt_indexed_writer_abort(w);
    return st;
}

mt_status mt_indexed_writer_add_document(mt_indexed_writer *w, const int32_t *tokens,
                                         int64_t n_tokens) {
    if (n_tokens < 0 || n_tokens > INT32_MAX) {
        return mt_errorf(MT_ERR_DATA,
                         "%s: document %lld has %lld tokens; a sequence holds at most %d",
                         w->bin_tmp, (long long)w->n_documents, (long long)n_tokens,
                         INT32_MAX);
    }
    int64_t lo, hi;
    switch (w->dtype_code) {
    case MT_INDEXED_DTYPE_U8: lo = 0; hi = UINT8_MAX; break;
    case MT_INDEXED_DTYPE_I8: lo = INT8_MIN; hi = INT8_MAX; break;
    case MT_INDEXED_DTYPE_I16: lo = INT16_MIN; hi = INT16_MAX; break;
    case MT_INDEXED_DTYPE_U16: lo = 0; hi = UINT16_MAX; break;
    default: lo = INT32_MIN; hi = INT32_MAX; break;
    }
    /* Convert through a fixed buffer: constant memory whatever the document size. */
    uint8_t buf[8192];
    int64_t n_per_chunk = (int64_t)sizeof buf / w->n_item_bytes;
    for (int64_t i0 = 0; i0 < n_tokens; i0 += n_per_chunk) {
        int64_t n = n_tokens - i0 < n_per_chunk ? n_tokens - i0 : n_per_chunk;
        for (int64_t i = 0; i < n; i++) {
            int32_t t = tokens[i0 + i];
            if (t < lo || t > hi) {
                return mt_errorf(MT_ERR_DATA,
                                 "%s: document %lld token %lld: id %d does not fit %s",
                                 w->bin_tmp, (long long)w->n_documents, (long long)(i0 + i), t,
                                 mt_indexed_dtype_name(w->dtype_code));
            }
            switch (w->dtype_code) {
            case MT_INDEXED_DTYPE_U8: case MT_INDEXED_DTYPE_I8: buf[i] = (uint8_t)t; break;
            case MT_INDEXED_DTYPE_U16: { uint16_t v = (uint16_t)t; memcpy(buf + 2 * i, &v, 2); break; }
            case MT_INDEXED_DTYPE_I16: { int16_t v = (int16_t)t; memcpy(buf + 2 * i, &v, 2); break; }
            case MT_INDEXED_DTYPE_I32: memcpy(buf + 4 * i, &t, 4); break;
            default: { int64_t v = t; memcpy(buf + 8 * i, &v, 8); break; }
            }
        }
        mt_status st = write_bytes(w->bin, buf, (size_t)(n * w->n_item_bytes), w->bin_tmp);
        if (st != MT_OK) return st;
    }
    if (n_tokens > 0) {
        int32_t len = (int32_t)n_tokens;
        mt_status st = write_bytes(w->idx, &len, 4, w->idx_tmp);
        if (st != MT_OK) return st;
        w->n_sequences++;
        w->n_bin_bytes += n_tokens * w->n_item_bytes;
    }
    int64_t doc_end = w->n_sequences;
    w->n_documents++;
    return write_bytes(w->doc, &doc_end, 8, w->idx_tmp);
}

/* Appends sequence_pointers (recomputed from the lengths already in the .idx.tmp) and the
 * document indices, then fills in the header. */
static mt_status write_index_tail(mt_indexed_writer *w) {
    mt_status st = MT_OK;
    if (fflush(w->idx) != 0) {
        return mt_errorf(MT_ERR_IO, "%s: write failed: %s", w->idx_tmp, strerror(errno));
    }
    int fd = fileno(w->idx);
    int32_t lens[2048];
    int64_t ptrs[2048];
    int64_t ptr = 0;
    for (int64_t i0 = 0; i0 < w->n_sequences; i0 += 2048) {
        int64_t n = w->n_sequences - i0 < 2048 ? w->n_sequences - i0 : 2048;
        off_t at = (off_t)(MT_INDEXED_HEADER_BYTES + 4 * i0);
        ssize_t got = pread(fd, lens, (size_t)n * 4, at);
        if (got != (ssize_t)(n * 4)) {
            return mt_errorf(MT_ERR_IO, "%s: cannot read back sequence lengths: %s",
                             w->idx_tmp, got < 0 ? strerror(errno) : "short read");
        }
        for (int64_t i = 0; i < n; i++) {
            ptrs[i] = ptr;
            ptr += (int64_t)lens[i] * w->n_item_bytes;
        }
        MT_CHECK(write_bytes(w->idx, ptrs, (size_t)n * 8, w->idx_tmp));
    }
    int64_t zero = 0;
    MT_CHECK(write_bytes(w->idx, &zero, 8, w->idx_tmp));
    if (fflush(w->doc) != 0 || fseek(w->doc, 0, SEEK_SET) != 0) {
        return mt_errorf(MT_ERR_IO, "%s: document index temp: %s", w->idx_tmp,
                         strerror(errno));
    }
    for (int64_t d0 = 0; d0 < w->n_documents; d0 += 2048) {
        int64_t n = w->n_documents - d0 < 2048 ? w->n_documents - d0 : 2048;
        if (fread(ptrs, 8, (size_t)n, w->doc) != (size_t)n) {
            return mt_errorf(MT_ERR_IO, "%s: cannot read back document indices: %s",
                             w->idx_tmp, ferror(w->doc) ? strerror(errno) : "short read");
        }
        MT_CHECK(write_bytes(w->idx, ptrs, (size_t)n * 8, w->idx_tmp));
    }
    uint8_t hdr[MT_INDEXED_HEADER_BYTES];
    uint64_t version = 1, n_seq = (uint64_t)w->n_sequences,
             n_doc = (uint64_t)w->n_documents + 1;
    memcpy(hdr, k_magic, 9);
    memcpy(hdr + 9, &version, 8);
    hdr[17] = (uint8_t)w->dtype_code;
    memcpy(hdr + 18, &n_seq, 8);
    memcpy(hdr + 26, &n_doc, 8);
    if (fflush(w->idx) != 0 || fseek(w->idx, 0, SEEK_SET) != 0) {
        return mt_errorf(MT_ERR_IO, "%s: write failed: %s", w->idx_tmp, strerror(errno));
    }
    MT_CHECK(write_bytes(w->idx, hdr, sizeof hdr, w->idx_tmp));
out:
    return st;
}

/* fsync the folder holding path, so the renames survive a crash. */
static void sync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1;
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

mt_status mt_indexed_writer_finish(mt_indexed_writer *w) {
    mt_status st = MT_OK;
    MT_CHECK(write_index_tail(w));
    MT_CHECK(close_synced(&w->bin, w->bin_tmp));
    MT_CHECK(close_synced(&w->idx, w->idx_tmp));
    fclose(w->doc);
    w->doc = NULL;
    /* The publishing rule (indexed.h): the old .idx goes, then the .bin, then the .idx. A
     * crash in between leaves a .bin without .idx (rejected by name), never a mixed pair. */
    if (unlink(w->idx_path) != 0 && errno != ENOENT) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot replace: %s", w->idx_path, strerror(errno));
        goto out;
    }
    if (rename(w->bin_tmp, w->bin_path) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot rename to %s: %s", w->bin_tmp, w->bin_path,
                       strerror(errno));
        goto out;
    }
    if (rename(w->idx_tmp, w->idx_path) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: cannot rename to %s: %s", w->idx_tmp, w->idx_path,
                       strerror(errno));
        goto out;
    }
    sync_parent_dir(w->idx_path);
    writer_forget_tmps(w);
    writer_free(w);
    return MT_OK;
out:
    mt_indexed_writer_abort(w);
    return st;
}
