/* preprocess_internal.h — what preprocess.c (setup, the one-thread loop, finishing) shares
 * with preprocess_workers.c (the --workers N pipeline). Not for use elsewhere.
 * Rule kept: both paths make byte-identical outputs and the same statistics and messages. */
#ifndef MT_PREPROCESS_INTERNAL_H
#define MT_PREPROCESS_INTERNAL_H

#include "core/data/indexed.h"
#include "core/data/json_lines.h"
#include "core/data/preprocess.h"
#include "core/data/tokenizer.h"

typedef struct {
    const mt_preprocess_options *opt;
    mt_tokenizer *tok;              /* the caller's; workers clone it */
    mt_jsonl_reader *reader;        /* opened; the pipeline reads raw lines from reader->f */
    const char *const *keys;
    int n_keys;
    mt_indexed_writer *writers;     /* [n_keys], open */
    mt_preprocess_stats *stats;
    double t0;                      /* start time (now_s clock) */
} mt_preprocess_job;

double mt_preprocess_now_s(void);
/* Records the first skipped line's message (from mt_last_error()). */
void mt_preprocess_note_skip(mt_preprocess_stats *s);
/* Reads, tokenizes and writes every line with opt->n_workers encoder threads, a reader
 * thread and this thread writing in input order. */
mt_status mt_preprocess_pipeline(const mt_preprocess_job *job);

#endif
