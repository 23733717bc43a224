/* preprocess.c — the streaming loop of `mtrain preprocess`: read a JSON line, tokenize each
 * requested key, append one document per key to its indexed-dataset writer. With
 * --workers N >= 2 the same work runs as a pipeline (preprocess_workers.c) whose output is
 * byte-identical.
 * Rule kept: constant memory (one line, one token buffer, fixed writer buffers), and a
 * failed run leaves no output behind (every writer is aborted). Each output name is locked
 * (output_lock.h) from before its temporaries are made until it is published, so two runs on
 * one --output-prefix cannot mix: the second is refused with the first one's pid. */
#include "core/data/preprocess.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/data/indexed.h"
#include "core/data/json_lines.h"
#include "core/data/output_lock.h"
#include "core/data/preprocess_internal.h"
#include "core/data/tmpfiles.h"

mt_status mt_preprocess_output_name(const char *output_prefix, const char *key, char *out,
                                    size_t n_out_bytes) {
    int n = snprintf(out, n_out_bytes, "%s_%s_document", output_prefix, key);
    if (n < 0 || (size_t)n >= n_out_bytes) {
        return mt_errorf(MT_ERR_CONFIG, "--output-prefix %s: path too long", output_prefix);
    }
    return MT_OK;
}

static void note_skip(mt_preprocess_stats *s) {
    if (!s->first_skip[0]) snprintf(s->first_skip, sizeof s->first_skip, "%s", mt_last_error());
}

double mt_preprocess_now_s(void) { return mt_clock_s(); }
void mt_preprocess_note_skip(mt_preprocess_stats *s) { note_skip(s); }

/* The JSON keys to read (default "text") into keys[0, *n_keys): present, distinct, not too many. */
static mt_status check_keys(const mt_preprocess_options *opt, const char **keys, int *n_keys) {
    if (!opt->input || !opt->input[0])
        return mt_errorf(MT_ERR_CONFIG, "preprocess: --input is required (a .jsonl file or -)");
    if (!opt->output_prefix || !opt->output_prefix[0])
        return mt_errorf(MT_ERR_CONFIG, "preprocess: --output-prefix is required");
    *n_keys = opt->n_json_keys > 0 ? opt->n_json_keys : 1;
    if (*n_keys > MT_PREPROCESS_MAX_KEYS)
        return mt_errorf(MT_ERR_CONFIG, "preprocess: %d json keys given, at most %d",
                         *n_keys, MT_PREPROCESS_MAX_KEYS);
    for (int k = 0; k < *n_keys; k++) {
        keys[k] = opt->n_json_keys > 0 ? opt->json_keys[k] : "text";
        if (!keys[k] || !keys[k][0])
            return mt_errorf(MT_ERR_CONFIG, "preprocess: --json-keys has an empty key");
        for (int j = 0; j < k; j++) {
            if (strcmp(keys[j], keys[k]) == 0)
                return mt_errorf(MT_ERR_CONFIG, "preprocess: --json-keys names \"%s\" twice",
                                 keys[k]);
        }
    }
    return MT_OK;
}

/* Every key's output locked (the lock file registered for removal on an interrupt), then every
 * key's writer opened. */
static mt_status open_outputs(const mt_preprocess_job *job, mt_output_lock *locks, int *lock_slots) {
    const mt_preprocess_options *opt = job->opt;
    char name[4096];
    for (int k = 0; k < job->n_keys; k++) {
        mt_status st = mt_preprocess_output_name(opt->output_prefix, job->keys[k], name, sizeof name);
        if (st == MT_OK) st = mt_output_lock_acquire(&locks[k], opt->output_prefix, name);
        if (st != MT_OK) return st;
        /* An interrupted run removes its lock file too (a killed one leaves it: reused). */
        lock_slots[k] = mt_tmpfiles_register(locks[k].path);
    }
    for (int k = 0; k < job->n_keys; k++) {
        mt_status st = mt_preprocess_output_name(opt->output_prefix, job->keys[k], name, sizeof name);
        if (st == MT_OK) st = mt_indexed_writer_open(&job->writers[k], name, job->stats->dtype_code);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

/* Tokenizes and writes the current line's keys: one document per key. */
static mt_status write_line(const mt_preprocess_job *job, mt_token_buf *ids) {
    const mt_jsonl_reader *reader = job->reader;
    mt_preprocess_stats *stats = job->stats;
    for (int k = 0; k < job->n_keys; k++) {
        const mt_json_string *v = mt_jsonl_value(reader, k);
        ids->n_ids = 0;
        mt_status st = mt_tokenizer_encode(job->tok, v->bytes ? v->bytes : "", v->n_bytes, ids);
        if (st != MT_OK) return st;
        if (ids->n_ids > 0 && job->opt->append_eod) {
            st = mt_token_buf_push(ids, mt_tokenizer_eod(job->tok));
            if (st != MT_OK) return st;
        }
        if (ids->n_ids == 0) stats->n_empty++;
        st = mt_indexed_writer_add_document(&job->writers[k], ids->ids, ids->n_ids);
        if (st != MT_OK) {
            mt_error_context(st, "%s:%lld: ", reader->path, (long long)reader->line_number);
            return st;
        }
        stats->n_tokens += ids->n_ids;
    }
    return MT_OK;
}

/* One thread: every line read, checked (bad ones skipped under skip_bad_lines), written. */
static mt_status run_serial(const mt_preprocess_job *job, mt_token_buf *ids) {
    const mt_preprocess_options *opt = job->opt;
    mt_jsonl_reader *reader = job->reader;
    mt_preprocess_stats *stats = job->stats;
    const double interval = opt->progress_interval_s > 0 ? opt->progress_interval_s : 1.0;
    double t_last = job->t0;
    for (;;) {
        int eof = 0;
        mt_status rst = mt_jsonl_next(reader, &eof);
        stats->n_lines = reader->line_number;
        stats->n_input_bytes = reader->n_bytes_read;
        if (rst == MT_ERR_DATA && opt->skip_bad_lines) {
            stats->n_skipped_malformed++;
            note_skip(stats);
            continue;
        }
        if (rst != MT_OK) return rst;
        if (eof) return MT_OK;
        int missing = -1;
        for (int k = 0; k < job->n_keys && missing < 0; k++) {
            if (!mt_jsonl_value(reader, k)->found) missing = k;
        }
        if (missing >= 0) {
            mt_status mst = mt_errorf(MT_ERR_DATA,
                                      "%s:%lld: no string key \"%s\" in this line (choose the "
                                      "key with --json-keys)", reader->path,
                                      (long long)reader->line_number, job->keys[missing]);
            if (!opt->skip_bad_lines) return mst;
            stats->n_skipped_missing++;
            note_skip(stats);
            continue;
        }
        mt_status st = write_line(job, ids);
        if (st != MT_OK) return st;
        stats->n_documents++;
        double t = mt_clock_s();
        if (opt->progress && t - t_last >= interval) {
            t_last = t;
            stats->seconds = t - job->t0;
            opt->progress(stats, 0, opt->progress_user);
        }
    }
}

/* Every writer finished; on a failure the keys already in place are removed: all or nothing.
 * finish() frees the writer, aborting it on failure; the rest are aborted by the caller. */
static mt_status finish_outputs(const mt_preprocess_job *job) {
    for (int k = 0; k < job->n_keys; k++) {
        mt_status fst = mt_indexed_writer_finish(&job->writers[k]);
        if (fst == MT_OK) continue;
        for (int j = 0; j < k; j++) {
            char name[4096], path[4200];
            if (mt_preprocess_output_name(job->opt->output_prefix, job->keys[j], name, sizeof name) ==
                MT_OK) {
                snprintf(path, sizeof path, "%s.idx", name);
                remove(path);
                snprintf(path, sizeof path, "%s.bin", name);
                remove(path);
            }
        }
        return fst;
    }
    return MT_OK;
}

mt_status mt_preprocess_run(const mt_preprocess_options *opt, mt_preprocess_stats *stats_out) {
    mt_status st = MT_OK;
    mt_preprocess_stats stats;
    mt_tokenizer *tok = NULL;
    mt_jsonl_reader reader;
    mt_indexed_writer writers[MT_PREPROCESS_MAX_KEYS];
    mt_output_lock locks[MT_PREPROCESS_MAX_KEYS];
    int lock_slots[MT_PREPROCESS_MAX_KEYS];
    mt_token_buf ids = {0};
    const char *keys[MT_PREPROCESS_MAX_KEYS];
    int n_keys = 0;
    int reader_open = 0;
    double t0 = mt_clock_s();

    memset(&stats, 0, sizeof stats);
    memset(&reader, 0, sizeof reader);
    memset(writers, 0, sizeof writers);
    for (int k = 0; k < MT_PREPROCESS_MAX_KEYS; k++) {
        mt_output_lock_init(&locks[k]);
        lock_slots[k] = -1;
    }
    MT_CHECK(check_keys(opt, keys, &n_keys));
    MT_CHECK(mt_tokenizer_open(&tok, opt->tokenizer ? opt->tokenizer : "byte",
                               &opt->tokenizer_files));
    stats.dtype_code = mt_indexed_dtype_for_vocab(mt_tokenizer_vocab_size(tok));
    MT_CHECK(mt_jsonl_open(&reader, opt->input, keys, n_keys));
    reader_open = 1;
    const mt_preprocess_job job = {opt, tok, &reader, keys, n_keys, writers, &stats, t0};
    MT_CHECK(open_outputs(&job, locks, lock_slots));
    if (opt->n_workers > 1) {
        MT_CHECK(mt_preprocess_pipeline(&job));
    } else {
        MT_CHECK(run_serial(&job, &ids));
    }
    MT_CHECK(finish_outputs(&job));
    stats.seconds = mt_clock_s() - t0;
    if (opt->progress) opt->progress(&stats, 1, opt->progress_user);
out:
    if (st != MT_OK) {
        /* Aborting a finished or never-opened (zeroed) writer is a no-op. */
        for (int k = 0; k < MT_PREPROCESS_MAX_KEYS; k++) mt_indexed_writer_abort(&writers[k]);
        stats.seconds = mt_clock_s() - t0;
    }
    for (int k = 0; k < MT_PREPROCESS_MAX_KEYS; k++) {
        mt_tmpfiles_forget(lock_slots[k]);
        mt_output_lock_release(&locks[k]);
    }
    if (reader_open) mt_jsonl_close(&reader);
    mt_token_buf_free(&ids);
    mt_tokenizer_free(tok);
    if (stats_out) *stats_out = stats;
    return st;
}
