/* gpt_dataset.h — Megatron-style GPT sample stream over one indexed dataset.
 *
 * A split string ("969,30,1", comma or '/' separated weights) cuts the dataset's documents
 * (Megatron-LM counts the .idx sequences; `mtrain preprocess` writes one sequence per
 * document, so the two agree) into train / valid / test ranges with Megatron's
 * get_train_valid_test_split_ rounding. For one split:
 *   doc_idx     the split's documents, repeated for as many epochs as the requested samples
 *               need, each epoch shuffled on its own (seeded; so every epoch uses every
 *               token of the split exactly once before the next begins);
 *   sample_idx  (doc_idx position, token offset) where each sample starts: samples are
 *               seq_length + 1 tokens read across document boundaries, consecutive
 *               samples sharing 1 token (Megatron's build_sample_idx, last partial dropped);
 *   shuffle_idx a seeded permutation of the samples, within each epoch's block of samples
 *               (Megatron keeps the final epoch apart the same way; we do it per epoch).
 * Everything is a pure function of (dataset, split, split_index, seq_length, seed,
 * n_samples_needed), so the stream resumes exactly from a consumed-samples count.
 * Index cache (mt_gpt_dataset_open_cached): the three arrays are saved to, and on the next
 * run loaded from, one file in the cache folder (index_cache.h) named by a hash of everything
 * they depend on — the dataset prefix, the .idx and .bin sizes and modification times, the
 * split string and index, seq_length, seed and n_samples_needed — so changed inputs build
 * (and save) a new file; a corrupt or truncated file is detected, rebuilt and replaced.
 * Blending several datasets is blended_dataset.h.
 * Rule kept: statuses, never exit; errors name the split string and the dataset; a cache
 * problem is never an error (it is reported in mt_gpt_dataset_info and the index rebuilt). */
#ifndef MT_GPT_DATASET_H
#define MT_GPT_DATASET_H

#include <stdint.h>

#include "core/data/fim.h"
#include "core/data/indexed.h"
#include "core/status.h"

typedef struct mt_gpt_dataset mt_gpt_dataset;

enum { MT_SPLIT_TRAIN = 0, MT_SPLIT_VALID = 1, MT_SPLIT_TEST = 2 };

/* Megatron's get_train_valid_test_split_: bounds[0..3] with bounds[0] = 0,
 * bounds[3] = n_documents; split i is documents [bounds[i], bounds[i+1]).
 * MT_ERR_CONFIG for a malformed split string. */
mt_status mt_gpt_split_bounds(const char *split, int64_t n_documents, int64_t bounds[4]);

/* Builds the sample stream of split `split_index` (MT_SPLIT_*). `ds` must outlive the
 * dataset. n_samples_needed: the stream holds at least this many samples before wrapping
 * (<= 0: one epoch, or the fewest epochs that hold one sample). seq_length >= 1.
 * MT_ERR_DATA when the split is empty or has no tokens; MT_ERR_CONFIG for bad arguments. */
mt_status mt_gpt_dataset_open(mt_gpt_dataset **out, const mt_indexed *ds, const char *split,
                              int split_index, int seq_length, uint64_t seed,
                              int64_t n_samples_needed);
/* The same stream, with the index cached in cache_dir: NULL = no cache, "" = the default
 * folder beside the data (dirname(prefix)/cache/GPTDataset_indices, Megatron's folder name),
 * otherwise that folder (created when missing; recipe key data.cache_path). */
mt_status mt_gpt_dataset_open_cached(mt_gpt_dataset **out, const mt_indexed *ds,
                                     const char *split, int split_index, int seq_length,
                                     uint64_t seed, int64_t n_samples_needed,
                                     const char *cache_dir);
/* Number of distinct samples (>= max(1, n_samples_needed)). */
int64_t mt_gpt_dataset_len(const mt_gpt_dataset *d);
/* Fills tokens[0 .. seq_length] (seq_length + 1 ids: inputs are [0, T), targets [1, T]).
 * Sample numbers wrap modulo the length (negative ones too). */
mt_status mt_gpt_dataset_get(const mt_gpt_dataset *d, int64_t sample, int32_t *tokens);
void mt_gpt_dataset_close(mt_gpt_dataset *d);
/* Fill-in-the-middle (fim.h): every sample read afterwards is mt_fim_apply'd, with its number
 * in the stream (after wrapping, before the shuffle: Megatron's __getitem__ index). fim is
 * borrowed (NULL: off again); mt_gpt_dataset_get then uses it, so one thread at a time. */
void mt_gpt_dataset_set_fim(mt_gpt_dataset *d, mt_fim *fim);

/* What happened with the index cache. */
typedef enum {
    MT_INDEX_CACHE_OFF = 0,      /* no cache folder given: built in memory */
    MT_INDEX_CACHE_LOADED,       /* read from the cache file */
    MT_INDEX_CACHE_SAVED,        /* built (no cache file yet) and saved */
    MT_INDEX_CACHE_REBUILT,      /* the cache file was corrupt or unreadable: rebuilt, saved */
    MT_INDEX_CACHE_UNSAVED       /* built, but it could not be saved (note says why) */
} mt_index_cache_state;

/* What was built, for logs and tests. */
typedef struct {
    int64_t first_document, end_document; /* the split: documents [first, end) */
    int64_t n_tokens_per_epoch;            /* tokens in the split */
    int64_t n_epochs;
    int64_t n_samples;
    mt_index_cache_state cache_state;
    char cache_file[1024];                 /* "" when the cache is off */
    char cache_note[600];                  /* why REBUILT / UNSAVED ("" otherwise) */
} mt_gpt_dataset_info;

/* "loaded from the cache", "built and saved to the cache", ... */
const char *mt_index_cache_state_name(mt_index_cache_state s);

void mt_gpt_dataset_get_info(const mt_gpt_dataset *d, mt_gpt_dataset_info *info);

#endif
