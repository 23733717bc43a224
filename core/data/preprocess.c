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
    int n_keys = opt->n_json_keys > 0 ? opt->n_json_keys : 1;
    int reader_open = 0;
    double t0 = mt_clock_s(), t_last = t0;
    double interval = opt->progress_interval_s > 0 ? opt->progress_interval_s : 1.0;

    memset(&stats, 0, sizeof stats);
    memset(&reader, 0, sizeof reader);
    memset(writers, 0, sizeof writers);
    for (int k = 0; k < MT_PREPROCESS_MAX_KEYS; k++) {
        mt_output_lock_init(&locks[k]);
        lock_slots[k] = -1;
    }

    if (!opt->input || !opt->input[0]) {
        st = mt_errorf(MT_ERR_CONFIG, "preprocess: --input is required (a .jsonl file or -)");
        goto out;
    }
    if (!opt->output_prefix || !opt->output_prefix[0]) {
        st = mt_errorf(MT_ERR_CONFIG, "preprocess: --output-prefix is required");
        goto out;
    }
    if (n_keys > MT_PREPROCESS_MAX_KEYS) {
        st = mt_errorf(MT_ERR_CONFIG, "preprocess: %d json keys given, at most %d",
                       n_keys, MT_PREPROCESS_MAX_KEYS);
        goto out;
    }
    for (int k = 0; k < n_keys; k++) {
        keys[k] = opt->n_json_keys > 0 ? opt->json_keys[k] : "text";
        if (!keys[k] || !keys[k][0]) {
            st = mt_errorf(MT_ERR_CONFIG, "preprocess: --json-keys has an empty key");
            goto out;
        }
        for (int j = 0; j < k; j++) {
            if (strcmp(keys[j], keys[k]) == 0) {
                st = mt_errorf(MT_ERR_CONFIG, "preprocess: --json-keys names \"%s\" twice",
                               keys[k]);
                goto out;
            }
        }
    }

    MT_CHECK(mt_tokenizer_open(&tok, opt->tokenizer ? opt->tokenizer : "byte",
                               &opt->tokenizer_files));
    stats.dtype_code = mt_indexed_dtype_for_vocab(mt_tokenizer_vocab_size(tok));
    MT_CHECK(mt_jsonl_open(&reader, opt->input, keys, n_keys));
    reader_open = 1;
    for (int k = 0; k < n_keys; k++) {
        char name[4096];
        MT_CHECK(mt_preprocess_output_name(opt->output_prefix, keys[k], name, sizeof name));
        MT_CHECK(mt_output_lock_acquire(&locks[k], opt->output_prefix, name));
        /* An interrupted run removes its lock file too (a killed one leaves it: reused). */
        lock_slots[k] = mt_tmpfiles_register(locks[k].path);
    }
    for (int k = 0; k < n_keys; k++) {
        char name[4096];
        MT_CHECK(mt_preprocess_output_name(opt->output_prefix, keys[k], name, sizeof name));
        MT_CHECK(mt_indexed_writer_open(&writers[k], name, stats.dtype_code));
    }

    if (opt->n_workers > 1) {
        mt_preprocess_job job = {opt, tok, &reader, keys, n_keys, writers, &stats, t0};
        MT_CHECK(mt_preprocess_pipeline(&job));
    }
    for (; opt->n_workers <= 1;) {
        int eof = 0;
        mt_status rst = mt_jsonl_next(&reader, &eof);
        stats.n_lines = reader.line_number;
        stats.n_input_bytes = reader.n_bytes_read;
        if (rst == MT_ERR_DATA && opt->skip_bad_lines) {
            stats.n_skipped_malformed++;
            note_skip(&stats);
            continue;
        }
        MT_CHECK(rst);
        if (eof) break;
        int missing = -1;
        for (int k = 0; k < n_keys && missing < 0; k++) {
            if (!mt_jsonl_value(&reader, k)->found) missing = k;
        }
        if (missing >= 0) {
            mt_status mst = mt_errorf(MT_ERR_DATA,
                                      "%s:%lld: no string key \"%s\" in this line (choose the "
                                      "key with --json-keys)", reader.path,
                                      (long long)reader.line_number, keys[missing]);
            if (!opt->skip_bad_lines) {
                st = mst;
                goto out;
            }
            stats.n_skipped_missing++;
            note_skip(&stats);
            continue;
        }
        for (int k = 0; k < n_keys; k++) {
            const mt_json_string *v = mt_jsonl_value(&reader, k);
            ids.n_ids = 0;
            MT_CHECK(mt_tokenizer_encode(tok, v->bytes ? v->bytes : "", v->n_bytes, &ids));
            if (ids.n_ids > 0 && opt->append_eod) {
                MT_CHECK(mt_token_buf_push(&ids, mt_tokenizer_eod(tok)));
            }
            if (ids.n_ids == 0) stats.n_empty++;
            st = mt_indexed_writer_add_document(&writers[k], ids.ids, ids.n_ids);
            if (st != MT_OK) {
                mt_error_context(st, "%s:%lld: ", reader.path, (long long)reader.line_number);
                goto out;
            }
            stats.n_tokens += ids.n_ids;
        }
        stats.n_documents++;
        double t = mt_clock_s();
        if (opt->progress && t - t_last >= interval) {
            t_last = t;
            stats.seconds = t - t0;
            opt->progress(&stats, 0, opt->progress_user);
        }
    }
    for (int k = 0; k < n_keys; k++) {
        /* finish() frees the writer, aborting it on failure; the rest are aborted at out. */
        mt_status fst = mt_indexed_writer_finish(&writers[k]);
        if (fst != MT_OK) {
            st = fst;
            /* Earlier keys are already in place: remove them, all or nothing. */
            for (int j = 0; j < k; j++) {
                char name[4096], path[4200];
                if (mt_preprocess_output_name(opt->output_prefix, keys[j], name, sizeof name) ==
                    MT_OK) {
                    snprintf(path, sizeof path, "%s.idx", name);
                    remove(path);
                    snprintf(path, sizeof path, "%s.bin", name);
                    remove(path);
                }
            }
            goto out;
        }
    }
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
