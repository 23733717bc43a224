/* blended_dataset.c — data.path -> sample stream: blend parsing, per-dataset GPT datasets,
 * Megatron's greedy blending indices (cached like the GPT indices), sample lookup.
 * Rule kept: the stream is a pure function of (data.path, split, split index, seq_length,
 * seed, samples asked for); nothing depends on rank, worker count or the cache. */
#include "core/data/blended_dataset.h"
#include "core/free_all.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/data_path.h"
#include "core/data/index_cache.h"
#include "core/data/indexed.h"

struct mt_blended_dataset {
    int n_datasets;
    char *path_copy;              /* owns the prefix strings */
    char **prefixes;
    double *weights;              /* normalised */
    mt_indexed *indexed;          /* [n_datasets] */
    mt_gpt_dataset **gpt;         /* [n_datasets] */
    int64_t n_samples;            /* blend: N; single: the GPT dataset's length */
    int16_t *dataset_index;       /* [N] (blend only) */
    int64_t *dataset_sample_index;/* [N] */
    mt_index_cache_state cache_state;
};

/* ---- parsing -------------------------------------------------------------------------- */

mt_status mt_blend_parse(char *buf, double *weights, char **prefixes, int max_datasets,
                         int *n_datasets) {
    char *tok[2 * MT_BLEND_MAX_DATASETS + 1], *save = NULL;
    int n = 0;
    char shown[200];
    snprintf(shown, sizeof shown, "%s", buf);
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n >= 2 * max_datasets + 1) {
            return mt_errorf(MT_ERR_CONFIG, "data.path '%.120s...': more than %d datasets",
                             shown, max_datasets);
        }
        tok[n++] = t;
    }
    *n_datasets = 0;
    if (n == 0) {
        return mt_errorf(MT_ERR_CONFIG, "data.path is empty: give a dataset prefix (e.g. "
                         "data/kjv_text_document) or a blend \"0.3 prefixA 0.7 prefixB\"");
    }
    if (n == 1) {
        weights[0] = 1.0;
        prefixes[0] = tok[0];
        *n_datasets = 1;
        return MT_OK;
    }
    int any_number = 0;
    for (int i = 0; i < n && !any_number; i++) {
        char *end;
        (void)strtod(tok[i], &end);
        any_number = end != tok[i] && *end == 0;
    }
    if (!any_number) { /* Megatron's --data-path A B: no weights, each dataset weighted by its size */
        if (n > max_datasets)
            return mt_errorf(MT_ERR_CONFIG, "data.path '%.120s...': more than %d datasets", shown, max_datasets);
        for (int i = 0; i < n; i++) {
            weights[i] = -1.0; /* by size: mt_blended_dataset_open fills them in */
            prefixes[i] = tok[i];
        }
        *n_datasets = n;
        return MT_OK;
    }
    if (n % 2) {
        return mt_errorf(MT_ERR_CONFIG, "data.path '%s': a blend is weight/prefix pairs, found "
                         "%d words; write \"0.3 prefixA 0.7 prefixB\" (or prefixes alone, weighted by "
                         "their sizes)", shown, n);
    }
    double sum = 0;
    for (int i = 0; i < n / 2; i++) {
        char *end;
        errno = 0;
        double w = strtod(tok[2 * i], &end);
        if (end == tok[2 * i] || *end || errno || !isfinite(w) || w < 0) {
            return mt_errorf(MT_ERR_CONFIG, "data.path '%s': blend weight %d '%s' is not a "
                             "non-negative number; write \"0.3 prefixA 0.7 prefixB\"", shown,
                             i + 1, tok[2 * i]);
        }
        weights[i] = w;
        prefixes[i] = tok[2 * i + 1];
        sum += w;
    }
    if (!(sum > 0)) {
        return mt_errorf(MT_ERR_CONFIG, "data.path '%s': the blend weights sum to 0", shown);
    }
    for (int i = 0; i < n / 2; i++) weights[i] /= sum;
    *n_datasets = n / 2;
    return MT_OK;
}

/* ---- blending ------------------------------------------------------------------------- */

mt_status mt_build_blending_indices(const double *weights, int n_datasets, int64_t n_samples,
                                    int16_t *dataset_index, int64_t *dataset_sample_index) {
    int64_t *count = calloc((size_t)(n_datasets > 0 ? n_datasets : 1), sizeof *count);
    if (!count) return mt_errorf(MT_ERR_OOM, "blend: out of memory");
    for (int64_t s = 0; s < n_samples; s++) {
        double x = s > 1 ? (double)s : 1.0; /* max(s, 1) */
        int best = 0;
        double best_err = weights[0] * x - (double)count[0];
        for (int i = 1; i < n_datasets; i++) {
            double err = weights[i] * x - (double)count[i];
            if (err > best_err) {
                best_err = err;
                best = i;
            }
        }
        dataset_index[s] = (int16_t)best;
        dataset_sample_index[s] = count[best]++;
    }
    free(count);
    return MT_OK;
}

static mt_status blend_indices(mt_blended_dataset *d, const char *split, int split_index,
                               const char *cache_dir) {
    int64_t n = d->n_samples;
    char *desc = NULL, dir[1024], file[1200];
    mt_status st = MT_OK;
    if (cache_dir) {
        size_t cap = 512 + (size_t)d->n_datasets * 1200;
        desc = malloc(cap);
        if (!desc) return mt_errorf(MT_ERR_OOM, "blend: out of memory");
        size_t at = (size_t)snprintf(desc, cap, "mtrain BlendedDataset indices v1 "
                                     "(Megatron build_blending_indices)\nsplit: \"%s\" index %d, "
                                     "samples: %lld\n", split, split_index, (long long)n);
        for (int i = 0; i < d->n_datasets && at < cap; i++) {
            at += (size_t)snprintf(desc + at, cap - at, "%.17g %s\n", d->weights[i],
                                   d->prefixes[i]);
        }
        if (cache_dir[0]) {
            snprintf(dir, sizeof dir, "%s", cache_dir);
        } else {
            const char *slash = strrchr(d->prefixes[0], '/');
            if (slash) {
                snprintf(dir, sizeof dir, "%.*s/cache/GPTDataset_indices",
                         (int)(slash - d->prefixes[0]), d->prefixes[0]);
            } else {
                snprintf(dir, sizeof dir, "cache/GPTDataset_indices");
            }
        }
        static const char *const names[3] = {"train", "valid", "test"};
        char kind[64];
        snprintf(kind, sizeof kind, "BlendedDataset-%s", names[split_index]);
        if (mt_index_cache_name(dir, kind, desc, file, sizeof file) == MT_OK) {
            mt_cache_array a[2] = {{"dataset_index", 2, 0, NULL},
                                   {"dataset_sample", 8, 0, NULL}};
            int missing = 0;
            if (mt_index_cache_read(file, desc, a, 2, &missing) == MT_OK) {
                int ok = a[0].n_items == n && a[1].n_items == n;
                int16_t *di = a[0].data;
                int64_t *dsi = a[1].data;
                for (int64_t s = 0; s < n && ok; s++) {
                    ok = di[s] >= 0 && di[s] < d->n_datasets && dsi[s] >= 0;
                }
                if (ok) {
                    d->dataset_index = di;
                    d->dataset_sample_index = dsi;
                    d->cache_state = MT_INDEX_CACHE_LOADED;
                    free(desc);
                    return MT_OK;
                }
                free(a[0].data);
                free(a[1].data);
                d->cache_state = MT_INDEX_CACHE_REBUILT;
            } else {
                d->cache_state = missing ? MT_INDEX_CACHE_SAVED : MT_INDEX_CACHE_REBUILT;
            }
        } else {
            file[0] = 0;
            d->cache_state = MT_INDEX_CACHE_UNSAVED;
        }
    }
    d->dataset_index = malloc((size_t)(n > 0 ? n : 1) * sizeof *d->dataset_index);
    d->dataset_sample_index = malloc((size_t)(n > 0 ? n : 1) * sizeof *d->dataset_sample_index);
    if (!d->dataset_index || !d->dataset_sample_index) {
        free(desc);
        return mt_errorf(MT_ERR_OOM, "blend: cannot hold the blending index of %lld samples",
                         (long long)n);
    }
    st = mt_build_blending_indices(d->weights, d->n_datasets, n, d->dataset_index,
                                   d->dataset_sample_index);
    if (st != MT_OK) {
        free(desc);
        return st;
    }
    if (cache_dir && file[0]) {
        mt_cache_array w[2] = {{"dataset_index", 2, n, d->dataset_index},
                               {"dataset_sample", 8, n, d->dataset_sample_index}};
        if (mt_index_cache_mkdir(dir) != MT_OK || mt_index_cache_write(file, desc, w, 2) != MT_OK) {
            d->cache_state = MT_INDEX_CACHE_UNSAVED;
        }
    }
    free(desc);
    return st;
}

/* ---- open / get / close --------------------------------------------------------------- */

void mt_blended_dataset_close(mt_blended_dataset *d) {
    if (!d) return;
    for (int i = 0; i < d->n_datasets; i++) {
        if (d->gpt) mt_gpt_dataset_close(d->gpt[i]);
        if (d->indexed) mt_indexed_close(&d->indexed[i]);
    }
    MT_FREE_ALL(d->gpt, d->indexed, d->weights, d->prefixes, d->path_copy, d->dataset_index,
                d->dataset_sample_index, d);
}

mt_status mt_blended_dataset_open(mt_blended_dataset **out, const char *data_path,
                                  const char *split, int split_index, int seq_length,
                                  uint64_t seed, int64_t n_samples_needed,
                                  const char *cache_dir) {
    mt_status st = MT_OK;
    *out = NULL;
    if (split_index < 0 || split_index > 2) {
        return mt_errorf(MT_ERR_CONFIG, "split index %d: expected 0 (train), 1 (valid) or 2 "
                         "(test)", split_index);
    }
    mt_blended_dataset *d = calloc(1, sizeof *d);
    if (!d) return mt_errorf(MT_ERR_OOM, "blend: out of memory");
    d->path_copy = strdup(data_path ? data_path : "");
    d->weights = calloc(MT_BLEND_MAX_DATASETS, sizeof *d->weights);
    d->prefixes = calloc(MT_BLEND_MAX_DATASETS, sizeof *d->prefixes);
    if (!d->path_copy || !d->weights || !d->prefixes) {
        st = mt_errorf(MT_ERR_OOM, "blend: out of memory");
        goto out;
    }
    int n_ds = 0;
    MT_CHECK(mt_blend_parse(d->path_copy, d->weights, d->prefixes, MT_BLEND_MAX_DATASETS, &n_ds));
    d->indexed = calloc((size_t)n_ds, sizeof *d->indexed);
    d->gpt = calloc((size_t)n_ds, sizeof *d->gpt);
    if (!d->indexed || !d->gpt) {
        st = mt_errorf(MT_ERR_OOM, "blend: out of memory");
        goto out;
    }
    d->n_datasets = n_ds;
    if (n_ds > 1 && d->weights[0] < 0) { /* unweighted: each dataset's share is its tokens in this split */
        double sum = 0;
        for (int i = 0; i < n_ds; i++) {
            int64_t bounds[4], tok = 0;
            st = mt_data_path_check(d->prefixes[i]);
            if (st == MT_OK) st = mt_indexed_open(&d->indexed[i], d->prefixes[i]);
            if (st == MT_OK) st = mt_gpt_split_bounds(split, mt_indexed_n_sequences(&d->indexed[i]), bounds);
            if (st != MT_OK) {
                mt_error_context(st, "data.path entry %d of %d (%s): ", i + 1, n_ds, d->prefixes[i]);
                goto out;
            }
            for (int64_t q = bounds[split_index]; q < bounds[split_index + 1]; q++)
                tok += mt_indexed_sequence_length(&d->indexed[i], q);
            d->weights[i] = (double)tok;
            sum += (double)tok;
            mt_indexed_close(&d->indexed[i]);
        }
        if (!(sum > 0)) {
            st = mt_errorf(MT_ERR_DATA, "data.path '%.200s': the datasets hold no tokens in this split", data_path);
            goto out;
        }
        for (int i = 0; i < n_ds; i++) d->weights[i] /= sum;
    }
    int64_t n_target = n_samples_needed > 1 ? n_samples_needed : 1;
    for (int i = 0; i < n_ds; i++) {
        /* Megatron: ceil(ceil(N * w) * (1 + 0.005)) samples per dataset (the 0.5% surplus
         * keeps the greedy blend inside every dataset's stream). */
        int64_t want = n_samples_needed;
        if (n_ds > 1) {
            double a = ceil((double)n_target * d->weights[i]);
            want = (int64_t)ceil(a * 1.005);
        }
        st = mt_data_path_check(d->prefixes[i]);
        if (st == MT_OK) st = mt_indexed_open(&d->indexed[i], d->prefixes[i]);
        if (st == MT_OK) {
            st = mt_gpt_dataset_open_cached(&d->gpt[i], &d->indexed[i], split, split_index,
                                            seq_length, seed, want, cache_dir);
        }
        if (st != MT_OK) {
            if (n_ds > 1) {
                mt_error_context(st, "data.path blend entry %d of %d (weight %.3g, %s): ", i + 1,
                                 n_ds, d->weights[i], d->prefixes[i]);
            }
            goto out;
        }
    }
    if (n_ds == 1) {
        d->n_samples = mt_gpt_dataset_len(d->gpt[0]);
        d->cache_state = MT_INDEX_CACHE_OFF;
    } else {
        d->n_samples = n_target;
        MT_CHECK(blend_indices(d, split, split_index, cache_dir));
    }
out:
    if (st != MT_OK) {
        mt_blended_dataset_close(d);
        return st;
    }
    *out = d;
    return MT_OK;
}

mt_status mt_blended_dataset_open_mock(mt_blended_dataset **out, const char *split, int split_index, int seq_length,
                                       uint64_t seed, int64_t n_samples_needed, int32_t eod) {
    mt_status st = MT_OK;
    *out = NULL;
    mt_blended_dataset *d = calloc(1, sizeof *d);
    if (!d) return mt_errorf(MT_ERR_OOM, "mock data: out of memory");
    d->path_copy = strdup("mock-data");
    d->weights = calloc(1, sizeof *d->weights);
    d->prefixes = calloc(1, sizeof *d->prefixes);
    d->indexed = calloc(1, sizeof *d->indexed);
    d->gpt = calloc(1, sizeof *d->gpt);
    if (!d->path_copy || !d->weights || !d->prefixes || !d->indexed || !d->gpt) {
        st = mt_errorf(MT_ERR_OOM, "mock data: out of memory");
        goto out;
    }
    d->n_datasets = 1;
    d->weights[0] = 1.0;
    d->prefixes[0] = d->path_copy;
    /* Megatron's MockGPTLowLevelDataset: seed 0, 100000 documents, lengths in [1, 4096) */
    MT_CHECK(mt_indexed_open_mock(&d->indexed[0], 100000, 4096, 0, eod));
    MT_CHECK(mt_gpt_dataset_open_cached(&d->gpt[0], &d->indexed[0], split, split_index, seq_length, seed,
                                        n_samples_needed, NULL));
    d->n_samples = mt_gpt_dataset_len(d->gpt[0]);
    d->cache_state = MT_INDEX_CACHE_OFF;
out:
    if (st != MT_OK) {
        mt_blended_dataset_close(d);
        return st;
    }
    *out = d;
    return MT_OK;
}

int64_t mt_blended_dataset_len(const mt_blended_dataset *d) { return d->n_samples; }

mt_status mt_blended_dataset_check_vocab(const mt_blended_dataset *d, int vocab, int64_t scan_tokens,
                                         const char *tokenizer) {
    if (!d) return MT_OK;
    for (int i = 0; i < d->n_datasets; i++) {
        int64_t mx = -1, n = 0;
        mt_status st = mt_indexed_max_token(&d->indexed[i], scan_tokens, &mx, &n);
        if (st != MT_OK) return st;
        if (mx >= vocab)
            return mt_errorf(MT_ERR_DATA, "%s: token id %lld (the largest of its first %lld tokens) is outside the "
                             "model's vocabulary of %d (model.vocab, from tokenizer %s): the data was tokenised with "
                             "another tokenizer; preprocess it with the training's tokenizer, or give the data's "
                             "tokenizer (data.tokenizer / --tokenizer-type, --vocab-file) and its size (--vocab-size)",
                             d->indexed[i].bin_path, (long long)mx, (long long)n, vocab, tokenizer);
    }
    return MT_OK;
}

mt_status mt_blended_dataset_check_files(const mt_blended_dataset *d) {
    if (!d) return MT_OK;
    for (int i = 0; i < d->n_datasets; i++) {
        mt_status st = mt_indexed_check_unchanged(&d->indexed[i]);
        if (st != MT_OK) {
            if (d->n_datasets > 1) {
                mt_error_context(st, "data.path blend entry %d of %d (%s): ", i + 1,
                                 d->n_datasets, d->prefixes[i]);
            }
            return st;
        }
    }
    return MT_OK;
}

void mt_blended_dataset_source(const mt_blended_dataset *d, int64_t sample, int *dataset,
                               int64_t *dataset_sample) {
    int64_t s = sample % d->n_samples;
    if (s < 0) s += d->n_samples;
    if (d->n_datasets == 1) {
        *dataset = 0;
        *dataset_sample = s;
        return;
    }
    *dataset = d->dataset_index[s];
    *dataset_sample = d->dataset_sample_index[s];
}

mt_status mt_blended_dataset_get(const mt_blended_dataset *d, int64_t sample, int32_t *tokens) {
    int ds;
    int64_t j;
    mt_blended_dataset_source(d, sample, &ds, &j);
    return mt_gpt_dataset_get(d->gpt[ds], j, tokens);
}

int mt_blended_dataset_n_datasets(const mt_blended_dataset *d) { return d->n_datasets; }
const char *mt_blended_dataset_prefix(const mt_blended_dataset *d, int i) { return d->prefixes[i]; }
double mt_blended_dataset_weight(const mt_blended_dataset *d, int i) { return d->weights[i]; }
void mt_blended_dataset_set_fim(mt_blended_dataset *d, mt_fim *fim) {
    for (int i = 0; d && i < d->n_datasets; i++) mt_gpt_dataset_set_fim(d->gpt[i], fim);
}
const mt_gpt_dataset *mt_blended_dataset_component(const mt_blended_dataset *d, int i) {
    return d->gpt[i];
}
mt_index_cache_state mt_blended_dataset_cache_state(const mt_blended_dataset *d) {
    return d->cache_state;
}
