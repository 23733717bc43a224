/* tokenizer_bpe.h — byte-level BPE (GPT-2, Llama-3) behind the mt_tokenizer interface
 * (tokenizer.h). Two ways in:
 *   GPT-2 / Megatron GPT2BPETokenizer files: vocab.json (encoder.json) + merges.txt
 *     (vocab.bpe: a "#version" first line, then one "a b" merge per line, rank = order);
 *   a Hugging Face tokenizer.json whose model is BPE with a ByteLevel pre-tokenizer
 *     (model.vocab, model.merges as "a b" strings or [a, b] pairs, added_tokens,
 *     model.ignore_merges), alone or after a Split with GPT-2's or Llama-3's pattern (the
 *     pattern is recognised, not interpreted: Llama-3's is hand-written in
 *     tokenizer_llama3.c; any other is refused).
 * Encoding: text -> GPT-2 pre-tokens (the regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * implemented by hand over Unicode classes generated from UnicodeData.txt, \s as Python's
 * str.isspace) -> bytes mapped to symbols -> merges applied exactly as GPT-2's bpe() does
 * (lowest-ranked pair first, all its occurrences left to right) -> ids. Bytes that are not
 * valid UTF-8 are kept as one-byte "other" characters, so any byte string round-trips.
 * Decoding: ids -> token strings -> bytes through the byte<->unicode map.
 * Rules kept: a tokenizer object is not thread-safe (it caches words): give each thread its
 * own with mt_tokenizer_clone, which shares the read-only tables. Load errors name the file
 * and line ("vocab.json:12: ..."). */
#ifndef MT_TOKENIZER_BPE_H
#define MT_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/data/tokenizer.h"

/* GPT-2 vocab.json + merges.txt. eod = the id of "<|endoftext|>" (required). */
mt_status mt_tokenizer_gpt2_open(mt_tokenizer **out, const char *vocab_path,
                                 const char *merges_path);
/* Hugging Face tokenizer.json (byte-level BPE only: GPT-2 or Llama-3 pre-tokenizer; a
 * Llama-3 file gives vocab_size 128256 with its added tokens, eod <|end_of_text|> 128001; no
 * <|begin_of_text|> is prepended: the post_processor is not applied). eod = the first of "<|endoftext|>",
 * "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>" found among the added tokens or the vocab. */
mt_status mt_tokenizer_hf_open(mt_tokenizer **out, const char *json_path);

/* Hugging Face's convert_tokens_to_ids for one token string as the vocabulary writes it
 * ("Ġdef", "<|endoftext|>"): its id, or -1 when absent or tok is no BPE tokenizer.
 * *unk_is_eod = 1 for GPT-2's vocab.json (its unk token is <|endoftext|>), else 0. */
int32_t mt_bpe_token_id(const mt_tokenizer *tok, const char *token, int *unk_is_eod);

/* ---- for tests and benchmarks --------------------------------------------------------- */

/* Splits text into GPT-2 pre-tokens: ends[k] is the end offset of pre-token k (they are
 * contiguous from 0). Returns the count, or -1 when more than n_max_ends are needed. */
int64_t mt_bpe_pretokenize(const char *text, size_t n_text_bytes, int64_t *ends,
                           int64_t n_max_ends);
/* The same for Llama-3's pre-tokenizer (tokenizer_llama3.c). */
int64_t mt_llama3_pretokenize(const char *text, size_t n_text_bytes, int64_t *ends,
                              int64_t n_max_ends);
/* Words of at most n symbols use the simple O(n^2) merge loop, longer ones the heap
 * (default 48). Both give GPT-2's result; tests set 0 or a huge value to compare them. */
void mt_bpe_set_small_word_limit(mt_tokenizer *tok, int n_symbols);
/* Turns the word cache off (0) or on (1, the default). */
void mt_bpe_set_cache(mt_tokenizer *tok, int enabled);
/* Cache counters since open. */
void mt_bpe_cache_stats(const mt_tokenizer *tok, int64_t *n_hits, int64_t *n_misses);

#endif
