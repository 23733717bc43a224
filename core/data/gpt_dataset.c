/* gpt_dataset.c — GPT sample stream: split bounds, per-epoch shuffled document order,
 * Megatron's build_sample_idx (add_extra_token_to_sequence = 1, drop_last_partial_sequence),
 * per-epoch sample shuffle, the token gather of one sample, and the index cache (load,
 * validate, else build and save).
 * Rule kept: a pure function of its arguments: the only randomness is a local
 * xoshiro256** stream seeded (splitmix64) from (seed, split, epoch, purpose); no rand(). */
#include "core/data/gpt_dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/data/index_cache.h"

struct mt_gpt_dataset {
    const mt_indexed *ds;
    int seq_length;
    int split_index;
    uint64_t seed;
    int64_t first_document, end_document; /* .idx sequence range of the split */
    int64_t n_tokens_per_epoch;
    int64_t n_samples_needed;
    int64_t n_epochs;
    int64_t n_doc_idx;
    int64_t *doc_idx;        /* [n_doc_idx]: sequence ids, epoch after epoch */
    int64_t n_samples;
    int64_t *sample_doc;     /* [n_samples + 1]: position in doc_idx where sample i starts */
    int32_t *sample_offset;  /* [n_samples + 1]: token offset in that document */
    int64_t *shuffle_idx;    /* [n_samples] */
    mt_index_cache_state cache_state;
    char cache_file[1024];
    char cache_note[600];
    mt_fim *fim;             /* fill-in-the-middle, borrowed (NULL: off) */
};

static const char *k_split_names[3] = {"train", "valid", "test"};

/* ---- random numbers ------------------------------------------------------------------- */

typedef struct { uint64_t s[4]; } xoshiro;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(xoshiro *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

enum { RNG_DOCS = 1, RNG_SAMPLES = 2 };

static void xoshiro_seed(xoshiro *r, uint64_t seed, uint64_t split, uint64_t epoch,
                         uint64_t purpose) {
    uint64_t x = seed;
    uint64_t parts[3] = {split, epoch, purpose};
    for (int k = 0; k < 3; k++) {
        x ^= parts[k];
        x = splitmix64(&x);
    }
    for (int k = 0; k < 4; k++) r->s[k] = splitmix64(&x);
}

/* Uniform in [0, n), n >= 1, without modulo bias. */
static uint64_t xoshiro_below(xoshiro *r, uint64_t n) {
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    for (;;) {
        uint64_t v = xoshiro_next(r);
        if (v >= threshold) return v % n;
    }
}

static void shuffle_i64(int64_t *a, int64_t n, xoshiro *r) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)xoshiro_below(r, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* ---- split ---------------------------------------------------------------------------- */

mt_status mt_gpt_split_bounds(const char *split, int64_t n_documents, int64_t bounds[4]) {
    double w[3] = {0, 0, 0};
    int n_parts = 0;
    char sep = strchr(split, ',') ? ',' : (strchr(split, '/') ? '/' : 0);
    const char *p = split;
    for (;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        const char *q = end;
        while (*q == ' ' || *q == '\t') q++;
        if (end == p || errno || !isfinite(v) || v < 0 || (*q && *q != sep)) {
            return mt_errorf(MT_ERR_CONFIG,
                             "split '%s': part %d is not a non-negative number (expected e.g. "
                             "'969,30,1')", split, n_parts + 1);
        }
        if (n_parts < 3) w[n_parts] = v; /* Megatron ignores weights after the third */
        n_parts++;
        if (!*q) break;
        p = q + 1;
    }
    double sum = w[0] + w[1] + w[2];
    if (!(sum > 0)) {
        return mt_errorf(MT_ERR_CONFIG, "split '%s': the weights sum to 0", split);
    }
    /* Python's int(round(x)) is round-half-to-even: nearbyint in the default mode. */
    bounds[0] = 0;
    for (int k = 0; k < 3; k++) {
        bounds[k + 1] = bounds[k] + (int64_t)nearbyint(w[k] / sum * (double)n_documents);
    }
    int64_t diff = bounds[3] - n_documents;
    for (int k = 1; k < 4; k++) {
        bounds[k] -= diff;
        /* Megatron asserts instead; clamping keeps every range inside the dataset. */
        if (bounds[k] < bounds[k - 1]) bounds[k] = bounds[k - 1];
        if (bounds[k] > n_documents) bounds[k] = n_documents;
    }
    return MT_OK;
}

/* ---- build ---------------------------------------------------------------------------- */

static void *alloc_array(int64_t n, size_t n_item_bytes) {
    if (n < 0 || (uint64_t)n > SIZE_MAX / n_item_bytes / 2) return NULL;
    return malloc((size_t)(n > 0 ? n : 1) * n_item_bytes);
}

/* doc_idx, sample_idx and shuffle_idx: the arrays a disk cache will save and load. */
static mt_status build_indices(mt_gpt_dataset *d, const char *split) {
    const mt_indexed *ds = d->ds;
    int64_t n_docs = d->end_document - d->first_document;
    int64_t T = d->n_tokens_per_epoch, seq = d->seq_length;

    if (d->n_epochs > INT64_MAX / (n_docs > 0 ? n_docs : 1)) {
        return mt_errorf(MT_ERR_CONFIG, "split '%s' (%s): %lld epochs of %lld documents is too "
                         "many", split, k_split_names[d->split_index],
                         (long long)d->n_epochs, (long long)n_docs);
    }
    d->n_doc_idx = d->n_epochs * n_docs;
    d->doc_idx = alloc_array(d->n_doc_idx, sizeof *d->doc_idx);
    d->n_samples = (d->n_epochs * T - 1) / seq;
    d->sample_doc = alloc_array(d->n_samples + 1, sizeof *d->sample_doc);
    d->sample_offset = alloc_array(d->n_samples + 1, sizeof *d->sample_offset);
    d->shuffle_idx = alloc_array(d->n_samples, sizeof *d->shuffle_idx);
    if (!d->doc_idx || !d->sample_doc || !d->sample_offset || !d->shuffle_idx) {
        return mt_errorf(MT_ERR_OOM, "split '%s' (%s): cannot allocate the index of %lld "
                         "documents x %lld epochs and %lld samples", split,
                         k_split_names[d->split_index], (long long)n_docs,
                         (long long)d->n_epochs, (long long)d->n_samples);
    }

    /* doc_idx: each epoch is the split's documents in their own shuffled order. */
    for (int64_t e = 0; e < d->n_epochs; e++) {
        int64_t *epoch = d->doc_idx + e * n_docs;
        for (int64_t i = 0; i < n_docs; i++) epoch[i] = d->first_document + i;
        xoshiro r;
        xoshiro_seed(&r, d->seed, (uint64_t)d->split_index, (uint64_t)e, RNG_DOCS);
        shuffle_i64(epoch, n_docs, &r);
    }

    /* sample_idx: Megatron's build_sample_idx with add_extra_token_to_sequence = 1. */
    int64_t si = 0, pos = 0;
    int64_t off = 0;
    d->sample_doc[si] = 0;
    d->sample_offset[si] = 0;
    si++;
    while (si <= d->n_samples) {
        int64_t remaining = seq + 1;
        while (remaining != 0) {
            int64_t doc_len = mt_indexed_sequence_length(ds, d->doc_idx[pos]) - off;
            remaining -= doc_len;
            if (remaining <= 0) {
                off += remaining + doc_len - 1;
                remaining = 0;
            } else {
                if (pos == d->n_doc_idx - 1) {
                    /* Unreachable by the sample count arithmetic; guard it anyway. */
                    return mt_errorf(MT_ERR_INTERNAL,
                                     "split '%s': ran out of documents at sample %lld of %lld",
                                     split, (long long)si, (long long)d->n_samples);
                }
                pos++;
                off = 0;
            }
        }
        d->sample_doc[si] = pos;
        d->sample_offset[si] = (int32_t)off;
        si++;
    }

    /* shuffle_idx: samples permuted within their epoch (the epoch holding their first
     * token), so epoch e is fully served before epoch e + 1 begins. */
    for (int64_t s = 0; s < d->n_samples; s++) d->shuffle_idx[s] = s;
    for (int64_t e = 0; e < d->n_epochs; e++) {
        int64_t begin = (e * T + seq - 1) / seq, end = ((e + 1) * T + seq - 1) / seq;
        if (end > d->n_samples) end = d->n_samples;
        if (begin >= end) continue;
        xoshiro r;
        xoshiro_seed(&r, d->seed, (uint64_t)d->split_index, (uint64_t)e, RNG_SAMPLES);
        shuffle_i64(d->shuffle_idx + begin, end - begin, &r);
    }
    return MT_OK;
}

/* ---- index cache ---------------------------------------------------------------------- */

const char *mt_index_cache_state_name(mt_index_cache_state s) {
    switch (s) {
    case MT_INDEX_CACHE_OFF: return "not cached";
    case MT_INDEX_CACHE_LOADED: return "loaded from the cache";
    case MT_INDEX_CACHE_SAVED: return "built and saved to the cache";
    case MT_INDEX_CACHE_REBUILT: return "cache file unusable: rebuilt and saved";
    case MT_INDEX_CACHE_UNSAVED: return "built; the cache could not be written";
    }
    return "?";
}

/* Megatron's folder name, beside the data: dirname(prefix)/cache/GPTDataset_indices. */
static void default_cache_dir(const char *idx_path, char *out, size_t n_out) {
    const char *slash = strrchr(idx_path, '/');
    if (!slash) {
        snprintf(out, n_out, "cache/GPTDataset_indices");
    } else {
        snprintf(out, n_out, "%.*s/cache/GPTDataset_indices", (int)(slash - idx_path), idx_path);
    }
}

/* Everything the index depends on, as text: the cache file is named by its hash and must
 * hold the same text. */
static void describe(const mt_gpt_dataset *d, const char *split, char *out, size_t n_out) {
    const mt_indexed *ds = d->ds;
    char real[PATH_MAX];
    const char *idx = realpath(ds->idx_path, real) ? real : ds->idx_path;
    struct stat si, sbin;
    memset(&si, 0, sizeof si);
    memset(&sbin, 0, sizeof sbin);
    stat(ds->idx_path, &si);
    stat(ds->bin_path, &sbin);
    snprintf(out, n_out,
             "mtrain GPTDataset indices v1 (xoshiro256** per-epoch shuffles)\n"
             "idx: %s, %lld bytes, mtime %lld.%09ld\n"
             "bin: %lld bytes, mtime %lld.%09ld\n"
             "split: \"%s\" index %d -> documents [%lld, %lld), %lld tokens per epoch\n"
             "seq_length: %d, seed: %llu, samples needed: %lld -> %lld epochs\n",
             idx, (long long)si.st_size, (long long)si.st_mtim.tv_sec, si.st_mtim.tv_nsec,
             (long long)sbin.st_size, (long long)sbin.st_mtim.tv_sec, sbin.st_mtim.tv_nsec,
             split, d->split_index, (long long)d->first_document, (long long)d->end_document,
             (long long)d->n_tokens_per_epoch, d->seq_length, (unsigned long long)d->seed,
             (long long)d->n_samples_needed, (long long)d->n_epochs);
}

/* Checks loaded arrays against the dataset; 0 with a reason when they cannot be right. */
static int indices_valid(const mt_gpt_dataset *d, char *why, size_t n_why) {
    for (int64_t i = 0; i < d->n_doc_idx; i++) {
        if (d->doc_idx[i] < d->first_document || d->doc_idx[i] >= d->end_document) {
            snprintf(why, n_why, "doc_idx[%lld] = %lld is outside the split", (long long)i,
                     (long long)d->doc_idx[i]);
            return 0;
        }
    }
    for (int64_t s = 0; s <= d->n_samples; s++) {
        int64_t p = d->sample_doc[s];
        if (p < 0 || p >= d->n_doc_idx || (s > 0 && p < d->sample_doc[s - 1]) ||
            d->sample_offset[s] < 0 ||
            (s > 0 && d->sample_offset[s] >= mt_indexed_sequence_length(d->ds, d->doc_idx[p])) ||
            (s == 0 && (p != 0 || d->sample_offset[0] != 0))) {
            snprintf(why, n_why, "sample_idx[%lld] = (%lld, %d) is not a token of the stream",
                     (long long)s, (long long)p, d->sample_offset[s]);
            return 0;
        }
    }
    uint8_t *seen = calloc((size_t)d->n_samples / 8 + 1, 1);
    if (!seen) {
        snprintf(why, n_why, "out of memory checking shuffle_idx");
        return 0;
    }
    for (int64_t s = 0; s < d->n_samples; s++) {
        int64_t v = d->shuffle_idx[s];
        if (v < 0 || v >= d->n_samples || (seen[v / 8] & (1u << (v % 8)))) {
            snprintf(why, n_why, "shuffle_idx is not a permutation (entry %lld)", (long long)s);
            free(seen);
            return 0;
        }
        seen[v / 8] |= (uint8_t)(1u << (v % 8));
    }
    free(seen);
    return 1;
}

static void free_indices(mt_gpt_dataset *d) {
    free(d->doc_idx);
    free(d->sample_doc);
    free(d->sample_offset);
    free(d->shuffle_idx);
    d->doc_idx = d->sample_doc = d->shuffle_idx = NULL;
    d->sample_offset = NULL;
}

/* Loads the index from the cache or builds it and saves it. Only a failure to build is an
 * error; cache trouble is recorded in cache_state / cache_note. */
static mt_status load_or_build(mt_gpt_dataset *d, const char *split, const char *cache_dir) {
    char dir[1024], *desc = malloc(8192);
    if (!desc) return mt_errorf(MT_ERR_OOM, "gpt dataset: out of memory");
    if (cache_dir[0]) snprintf(dir, sizeof dir, "%s", cache_dir);
    else default_cache_dir(d->ds->idx_path, dir, sizeof dir);
    describe(d, split, desc, 8192);
    char kind[64];
    snprintf(kind, sizeof kind, "GPTDataset-%s", k_split_names[d->split_index]);
    mt_status st = mt_index_cache_name(dir, kind, desc, d->cache_file, sizeof d->cache_file);
    if (st != MT_OK) {
        snprintf(d->cache_note, sizeof d->cache_note, "%s", mt_last_error());
        d->cache_file[0] = 0;
        d->cache_state = MT_INDEX_CACHE_UNSAVED;
        free(desc);
        return build_indices(d, split);
    }
    int64_t n_docs = d->end_document - d->first_document;
    int64_t want_doc_idx = d->n_epochs * n_docs;
    int64_t want_samples = (d->n_epochs * d->n_tokens_per_epoch - 1) / d->seq_length;
    mt_cache_array a[4] = {{"doc_idx", 8, 0, NULL}, {"sample_doc", 8, 0, NULL},
                           {"sample_offset", 4, 0, NULL}, {"shuffle_idx", 8, 0, NULL}};
    int missing = 0;
    st = mt_index_cache_read(d->cache_file, desc, a, 4, &missing);
    if (st == MT_OK) {
        d->doc_idx = a[0].data;
        d->sample_doc = a[1].data;
        d->sample_offset = a[2].data;
        d->shuffle_idx = a[3].data;
        d->n_doc_idx = a[0].n_items;
        d->n_samples = a[3].n_items;
        char why[300] = "";
        if (a[0].n_items != want_doc_idx || a[3].n_items != want_samples ||
            a[1].n_items != want_samples + 1 || a[2].n_items != want_samples + 1) {
            snprintf(why, sizeof why, "array sizes differ from the expected %lld documents and "
                     "%lld samples", (long long)want_doc_idx, (long long)want_samples);
        }
        if (!why[0] && indices_valid(d, why, sizeof why)) {
            d->cache_state = MT_INDEX_CACHE_LOADED;
            free(desc);
            return MT_OK;
        }
        snprintf(d->cache_note, sizeof d->cache_note, "cache file rejected: %s", why);
        free_indices(d);
        d->cache_state = MT_INDEX_CACHE_REBUILT;
    } else if (missing) {
        d->cache_state = MT_INDEX_CACHE_SAVED;
    } else {
        snprintf(d->cache_note, sizeof d->cache_note, "%s", mt_last_error());
        d->cache_state = MT_INDEX_CACHE_REBUILT;
    }
    st = build_indices(d, split);
    if (st != MT_OK) {
        free(desc);
        return st;
    }
    mt_cache_array w[4] = {{"doc_idx", 8, d->n_doc_idx, d->doc_idx},
                           {"sample_doc", 8, d->n_samples + 1, d->sample_doc},
                           {"sample_offset", 4, d->n_samples + 1, d->sample_offset},
                           {"shuffle_idx", 8, d->n_samples, d->shuffle_idx}};
    mt_status ws = mt_index_cache_mkdir(dir);
    if (ws == MT_OK) ws = mt_index_cache_write(d->cache_file, desc, w, 4);
    if (ws != MT_OK) {
        size_t used = strlen(d->cache_note);
        snprintf(d->cache_note + used, sizeof d->cache_note - used, "%s%s", used ? "; " : "",
                 mt_last_error());
        d->cache_state = MT_INDEX_CACHE_UNSAVED;
    }
    free(desc);
    return MT_OK;
}

void mt_gpt_dataset_close(mt_gpt_dataset *d) {
    if (!d) return;
    free(d->doc_idx);
    free(d->sample_doc);
    free(d->sample_offset);
    free(d->shuffle_idx);
    free(d);
}

mt_status mt_gpt_dataset_open(mt_gpt_dataset **out, const mt_indexed *ds, const char *split,
                              int split_index, int seq_length, uint64_t seed,
                              int64_t n_samples_needed) {
    return mt_gpt_dataset_open_cached(out, ds, split, split_index, seq_length, seed,
                                      n_samples_needed, NULL);
}

mt_status mt_gpt_dataset_open_cached(mt_gpt_dataset **out, const mt_indexed *ds,
                                     const char *split, int split_index, int seq_length,
                                     uint64_t seed, int64_t n_samples_needed,
                                     const char *cache_dir) {
    mt_status st = MT_OK;
    *out = NULL;
    if (split_index < 0 || split_index > 2) {
        return mt_errorf(MT_ERR_CONFIG, "split index %d: expected 0 (train), 1 (valid) or 2 "
                         "(test)", split_index);
    }
    if (seq_length < 1) {
        return mt_errorf(MT_ERR_CONFIG, "seq_length %d: must be at least 1", seq_length);
    }
    int64_t bounds[4];
    st = mt_gpt_split_bounds(split, mt_indexed_n_sequences(ds), bounds);
    if (st != MT_OK) return st;
    mt_gpt_dataset *d = calloc(1, sizeof *d);
    if (!d) return mt_errorf(MT_ERR_OOM, "gpt dataset: out of memory");
    d->ds = ds;
    d->n_samples_needed = n_samples_needed;
    d->seq_length = seq_length;
    d->split_index = split_index;
    d->seed = seed;
    d->first_document = bounds[split_index];
    d->end_document = bounds[split_index + 1];
    const char *name = k_split_names[split_index];
    if (d->end_document <= d->first_document) {
        st = mt_errorf(MT_ERR_DATA,
                       "split '%s' gives the %s split no documents (%s has %lld documents, "
                       "cut at %lld/%lld/%lld); give it a weight or use more data", split, name,
                       ds->idx_path, (long long)mt_indexed_n_sequences(ds),
                       (long long)bounds[1], (long long)bounds[2], (long long)bounds[3]);
        goto out;
    }
    for (int64_t i = d->first_document; i < d->end_document; i++) {
        d->n_tokens_per_epoch += mt_indexed_sequence_length(ds, i);
    }
    if (d->n_tokens_per_epoch < 1) {
        st = mt_errorf(MT_ERR_DATA, "split '%s': the %s split of %s (documents [%lld, %lld)) "
                       "holds no tokens", split, name, ds->idx_path,
                       (long long)d->first_document, (long long)d->end_document);
        goto out;
    }
    /* Fewest epochs E with (E * T - 1) / seq_length >= max(1, n_samples_needed). */
    int64_t n_target = n_samples_needed > 1 ? n_samples_needed : 1;
    if (n_target > (INT64_MAX - 1) / seq_length) {
        st = mt_errorf(MT_ERR_CONFIG, "split '%s' (%s): %lld samples of %d tokens overflow",
                       split, name, (long long)n_samples_needed, seq_length);
        goto out;
    }
    int64_t n_tokens_needed = n_target * seq_length + 1;
    d->n_epochs = (n_tokens_needed + d->n_tokens_per_epoch - 1) / d->n_tokens_per_epoch;
    if (d->n_epochs > INT64_MAX / d->n_tokens_per_epoch) {
        st = mt_errorf(MT_ERR_CONFIG, "split '%s' (%s): too many epochs", split, name);
        goto out;
    }
    st = cache_dir ? load_or_build(d, split, cache_dir) : build_indices(d, split);
out:
    if (st != MT_OK) {
        mt_gpt_dataset_close(d);
        return st;
    }
    *out = d;
    return MT_OK;
}

int64_t mt_gpt_dataset_len(const mt_gpt_dataset *d) { return d->n_samples; }

void mt_gpt_dataset_get_info(const mt_gpt_dataset *d, mt_gpt_dataset_info *info) {
    info->first_document = d->first_document;
    info->end_document = d->end_document;
    info->n_tokens_per_epoch = d->n_tokens_per_epoch;
    info->n_epochs = d->n_epochs;
    info->n_samples = d->n_samples;
    info->cache_state = d->cache_state;
    snprintf(info->cache_file, sizeof info->cache_file, "%s", d->cache_file);
    snprintf(info->cache_note, sizeof info->cache_note, "%s", d->cache_note);
}

mt_status mt_gpt_dataset_get(const mt_gpt_dataset *d, int64_t sample, int32_t *tokens) {
    int64_t s = sample % d->n_samples;
    if (s < 0) s += d->n_samples;
    int64_t j = d->shuffle_idx[s];
    int64_t p0 = d->sample_doc[j], p1 = d->sample_doc[j + 1];
    int64_t o0 = d->sample_offset[j], o1 = d->sample_offset[j + 1];
    int64_t n = 0;
    for (int64_t p = p0; p <= p1; p++) {
        int64_t seq = d->doc_idx[p];
        int64_t begin = p == p0 ? o0 : 0;
        int64_t end = p == p1 ? o1 + 1 : mt_indexed_sequence_length(d->ds, seq);
        if (end - begin > d->seq_length + 1 - n) {
            return mt_errorf(MT_ERR_INTERNAL, "gpt dataset: sample %lld spans more than %d "
                             "tokens", (long long)sample, d->seq_length + 1);
        }
        mt_status st = mt_indexed_read(d->ds, seq, begin, end - begin, tokens + n);
        if (st != MT_OK) return st;
        n += end - begin;
    }
    if (n != d->seq_length + 1) {
        return mt_errorf(MT_ERR_INTERNAL, "gpt dataset: sample %lld has %lld tokens, expected %d",
                         (long long)sample, (long long)n, d->seq_length + 1);
    }
    return d->fim ? mt_fim_apply(d->fim, (uint64_t)s, tokens, n) : MT_OK;
}

void mt_gpt_dataset_set_fim(mt_gpt_dataset *d, mt_fim *fim) { d->fim = fim; }
