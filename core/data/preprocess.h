/* preprocess.h — JSON lines -> Megatron indexed dataset, the engine behind
 * `mtrain preprocess` (flags in cmd/cmd_preprocess.c). For each json key K it writes
 * PREFIX_K_document.{bin,idx}, one document per input line, exactly as Megatron's
 * tools/preprocess_data.py without sentence splitting.
 * Rules kept: streaming (memory bounded by the longest line, whatever the input size);
 * outputs appear only on success (written to *.tmp.<pid>, published at the end by the rule in
 * indexed.h, under a per-name lock NAME.lock that refuses a second concurrent run, see
 * output_lock.h); no exit, no printing — progress goes through a callback. Temporaries of
 * dead runs of the same names are removed at the start (tmpfiles.h). */
#ifndef MT_PREPROCESS_H
#define MT_PREPROCESS_H

#include <stdint.h>

#include "core/status.h"
#include "core/data/tokenizer.h"

#define MT_PREPROCESS_MAX_KEYS 16

typedef struct {
    int64_t n_lines;            /* input lines read (blank lines included) */
    int64_t n_documents;        /* documents written (per key: every key gets each line) */
    int64_t n_empty;            /* documents with no tokens (Megatron: no sequence, no eod) */
    int64_t n_skipped_malformed;/* lines skipped: not valid JSON */
    int64_t n_skipped_missing;  /* lines skipped: valid JSON without a requested string key */
    int64_t n_tokens;           /* tokens written, all keys, eod included */
    uint64_t n_input_bytes;     /* bytes read */
    double seconds;             /* since the start */
    char first_skip[512];       /* message of the first skipped line ("" if none) */
    int dtype_code;             /* token dtype of the outputs */
} mt_preprocess_stats;

typedef struct {
    const char *input;          /* .jsonl path, "-" = stdin */
    const char *output_prefix;  /* outputs: <output_prefix>_<key>_document.{bin,idx} */
    const char *tokenizer;      /* "byte" (see mt_tokenizer_open) */
    mt_tokenizer_files tokenizer_files;
    const char *json_keys[MT_PREPROCESS_MAX_KEYS];
    int n_json_keys;            /* 0 = {"text"} */
    int append_eod;             /* add the eod token to each non-empty document */
    int n_workers;              /* encoder threads; >= 2 adds a reader thread and writes in
                                   input order (output identical to 1 worker) */
    int skip_bad_lines;         /* 1: skip malformed lines and count them; 0: stop */
    double progress_interval_s; /* 0 = 1 s */
    /* Called every progress_interval_s (final = 0) and once at the end (final = 1). */
    void (*progress)(const mt_preprocess_stats *stats, int final, void *user);
    void *progress_user;
} mt_preprocess_options;

/* Runs the whole conversion. stats may be NULL. On failure nothing is left at the output
 * names (temporaries removed); MT_ERR_DATA for a malformed line when not skipping
 * ("file:line: ..."), MT_ERR_IO, MT_ERR_CONFIG / MT_ERR_UNSUPPORTED for bad options. */
mt_status mt_preprocess_run(const mt_preprocess_options *opt, mt_preprocess_stats *stats);

/* "PREFIX_KEY_document" into out (n_out_bytes long). */
mt_status mt_preprocess_output_name(const char *output_prefix, const char *key, char *out,
                                    size_t n_out_bytes);

#endif
