/* blended_dataset.h — the training / validation sample stream of a recipe's data.path: one
 * indexed dataset prefix, or a blend "w1 prefix1 w2 prefix2 ..." (the recipe stores the YAML
 * list form as the same string), mirroring mt_gpt_dataset (open, len, get, close).
 *
 * A blend is built as Megatron-Core's BlendedMegatronDatasetBuilder does: the weights are
 * normalised to sum 1; dataset i gets its own GPT dataset of the same split with
 * ceil(ceil(N * w_i) * 1.005) samples (N = the samples asked for); then Megatron's
 * build_blending_indices assigns blended sample s to the dataset with the largest error
 * w_i * max(s, 1) - count_i (first on ties), and to that dataset's next sample. So the first
 * N samples follow the weights within one sample of exact, and sample s is a pure function
 * of s: the stream resumes exactly from a consumed-samples count.
 * With one prefix the stream is that prefix's mt_gpt_dataset itself (same samples, same
 * length), so a single dataset behaves exactly as before blending existed.
 * Every index (each dataset's, and the blending arrays) is cached in cache_dir as in
 * mt_gpt_dataset_open_cached (NULL = no cache, "" = beside each dataset).
 * Rule kept: statuses, never exit; errors name the blend entry, its prefix and the split. */
#ifndef MT_BLENDED_DATASET_H
#define MT_BLENDED_DATASET_H

#include <stdint.h>

#include "core/data/gpt_dataset.h"
#include "core/status.h"

#define MT_BLEND_MAX_DATASETS 4096 /* Megatron's dataset index is int16 */

typedef struct mt_blended_dataset mt_blended_dataset;

/* Parses "prefix", "w1 p1 w2 p2 ..." or "p1 p2 ..." (whitespace separated; no word a number:
 * Megatron's --data-path without weights, each dataset weighted by its size — its tokens in the
 * split, as Megatron weights by each dataset's samples — weights[] are then -1 until
 * mt_blended_dataset_open measures them). On success *n_datasets is set and weights[]
 * (normalised) / prefixes[] (pointers into the caller's copy `buf`, which is modified) are
 * filled, at most max_datasets. MT_ERR_CONFIG naming the string otherwise. */
mt_status mt_blend_parse(char *buf, double *weights, char **prefixes, int max_datasets,
                         int *n_datasets);

/* Megatron's build_blending_indices: for s in [0, n_samples): dataset_index[s] = the dataset
 * with the largest weights[i] * max(s, 1) - count[i] (the lowest i on ties),
 * dataset_sample_index[s] = count[that dataset]++. */
mt_status mt_build_blending_indices(const double *weights, int n_datasets, int64_t n_samples,
                                    int16_t *dataset_index, int64_t *dataset_sample_index);

/* Opens the stream of split `split_index` (MT_SPLIT_*) of data_path, at least
 * n_samples_needed samples long (a blend is exactly max(1, n_samples_needed) long). The
 * indexed datasets are opened and owned by the stream. */
mt_status mt_blended_dataset_open(mt_blended_dataset **out, const char *data_path,
                                  const char *split, int split_index, int seq_length,
                                  uint64_t seed, int64_t n_samples_needed,
                                  const char *cache_dir);
int64_t mt_blended_dataset_len(const mt_blended_dataset *d);
/* Fills tokens[0 .. seq_length] of sample `sample` (wrapping modulo the length, negative
 * numbers too), like mt_gpt_dataset_get. */
mt_status mt_blended_dataset_get(const mt_blended_dataset *d, int64_t sample, int32_t *tokens);
void mt_blended_dataset_close(mt_blended_dataset *d);
/* Fill-in-the-middle on every dataset of the stream (mt_gpt_dataset_set_fim); NULL d is fine. */
void mt_blended_dataset_set_fim(mt_blended_dataset *d, mt_fim *fim);
/* MT_OK when every dataset's .idx and .bin are still the files opened (mt_indexed_check_
 * unchanged); the first change otherwise, naming the file. NULL is fine. Training calls it at
 * each validation and checkpoint save. */
mt_status mt_blended_dataset_check_files(const mt_blended_dataset *d);
/* Megatron's --mock-data as a one-dataset stream: mt_indexed_open_mock's 100000 documents (seed 0,
 * lengths in [1, 4096), as MockGPTLowLevelDataset) under the usual GPT sampling of the split; no
 * index cache (nothing on disk to key it by). */
mt_status mt_blended_dataset_open_mock(mt_blended_dataset **out, const char *split, int split_index, int seq_length,
                                       uint64_t seed, int64_t n_samples_needed, int32_t eod);
/* Before the first step: every token id in the first scan_tokens tokens of each dataset's .bin
 * must be below vocab (the model's real vocabulary); else MT_ERR_DATA naming the file, the id,
 * the vocabulary and `tokenizer` (the recipe's, for the fix). */
mt_status mt_blended_dataset_check_vocab(const mt_blended_dataset *d, int vocab, int64_t scan_tokens,
                                         const char *tokenizer);

/* For logs and tests. */
int mt_blended_dataset_n_datasets(const mt_blended_dataset *d);
const char *mt_blended_dataset_prefix(const mt_blended_dataset *d, int i);
double mt_blended_dataset_weight(const mt_blended_dataset *d, int i); /* normalised */
const mt_gpt_dataset *mt_blended_dataset_component(const mt_blended_dataset *d, int i);
/* Which dataset and which of its samples blended sample `sample` is. */
void mt_blended_dataset_source(const mt_blended_dataset *d, int64_t sample, int *dataset,
                               int64_t *dataset_sample);
/* State of the blending-index cache (MT_INDEX_CACHE_OFF for a single dataset). */
mt_index_cache_state mt_blended_dataset_cache_state(const mt_blended_dataset *d);

#endif
