/* fim.h — fill-in-the-middle samples: Megatron-LM's GPTFIMDataset
 * (megatron/training/datasets/fim_dataset.py, _query_document_sample_shuffle_indices,
 * _fim_split_and_permute_sequence, _permute) applied to one sample of seq_length + 1 ids:
 *   the sample is cut at every eod id into segments (an empty segment is dropped with its eod;
 *   the part after the last eod is always transformed, even when empty);
 *   with a split token (fim_split_sample), a segment holding it is FIM'd only with
 *   probability rate, and then each fragment between split tokens with fragment_rate;
 *   otherwise the segment itself with probability rate (numpy binomial(1, p));
 *   one FIM: the ids are detokenized (the tokenizer's eod dropped: remove_special_tokens),
 *   invalid UTF-8 replaced by U+FFFD as Python's bytes.decode(errors='replace') does; a text
 *   starting with no_prefix is left alone; two cut points are drawn in code points with
 *   randint(0, len + 1, size=2) and sorted; prefix, middle and suffix are tokenized again;
 *   binomial(1, spm_rate) picks SPM [pre, suf] suffix [mid] prefix middle, else PSM
 *   [pre] prefix [suf] suffix [mid] middle;
 *   the result is cut to the sample's length, or padded with the pad id.
 * The random draws are numpy's legacy RandomState (np_random.h), the same calls in the same
 * order as Megatron. Megatron draws from one RandomState(seed) per dataset in the order its
 * data-loader workers read samples (so its stream depends on the worker count, the dp ranks
 * and restarts); here sample i of a dataset draws from RandomState([seed, i mod 2^32,
 * i >> 32]), so a sample is a pure function of its number and a resumed run sees the same
 * samples.
 * Rule kept: statuses, never exit; one mt_fim per thread (it holds scratch buffers and
 * a tokenizer, which may cache). */
#ifndef MT_FIM_H
#define MT_FIM_H

#include <stdint.h>

#include "core/data/np_random.h"
#include "core/data/tokenizer.h"
#include "core/status.h"

typedef struct {
    double rate;            /* --fim-rate: probability a segment is transformed */
    double spm_rate;        /* --fim-spm-rate: probability of SPM over PSM */
    double fragment_rate;   /* --fim-fragment-rate, with split_id >= 0 */
    int32_t prefix_id, middle_id, suffix_id, pad_id, eod_id; /* the sentinel ids */
    int32_t split_id;       /* --fim-split-sample's id; < 0: none */
    const char *no_prefix;  /* --fim-no-prefix; NULL: none (copied by mt_fim_open) */
    uint32_t seed;          /* Megatron's random_seed (--seed) */
} mt_fim_cfg;

typedef struct mt_fim mt_fim;

/* tok is borrowed: it must outlive the mt_fim and be used by no other thread meanwhile. */
mt_status mt_fim_open(mt_fim **out, const mt_fim_cfg *cfg, const mt_tokenizer *tok);
void mt_fim_close(mt_fim *f);

/* Transforms tokens[0, n) of sample number `sample` in place (same length). */
mt_status mt_fim_apply(mt_fim *f, uint64_t sample, int32_t *tokens, int64_t n);
/* The same with the caller's generator (tests): draws continue from rng's state. */
mt_status mt_fim_apply_rng(mt_fim *f, mt_np_random *rng, int32_t *tokens, int64_t n);

/* Megatron's tokens_to_ids for one FIM token string. Byte-level BPE: the vocabulary's id of
 * the string as the vocabulary writes it ("<|endoftext|>", "Ġdef"), as Hugging Face's
 * convert_tokens_to_ids; a string not in GPT-2's vocab.json is its unk token <|endoftext|>
 * (*unknown set to 1), and MT_ERR_CONFIG for a tokenizer.json. Other tokenizers: eod for what
 * eod decodes to, else the id of a string that encodes to one token, else MT_ERR_CONFIG. */
mt_status mt_fim_token_id(const mt_tokenizer *tok, const char *token, int32_t *id, int *unknown);

#endif
