/* preprocess_workers.c — `mtrain preprocess --workers N`: one reader thread cuts the input
 * into batches of raw lines, N encoder threads (each with its own tokenizer clone) parse
 * and tokenize whole batches, and the calling thread writes the batches in input order,
 * making exactly the decisions of the one-thread loop in preprocess.c (skip/stop, missing
 * keys, empty documents, eod, statistics), so the output is byte-identical to --workers 1.
 * Rule kept: memory is bounded by the batch pool (2N + 2 batches of ~256 KB of text), never
 * by the input size; every error (a bad line, a read failure, a tokenizer failure) is
 * reported at its place in the input order, and all threads are joined before returning. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/preprocess_internal.h"

#define BATCH_TEXT_BYTES (256u << 10)
#define BATCH_MAX_LINES 4096

enum { B_FREE = 0, B_FILLING, B_QUEUED, B_WORKING, B_DONE };
enum { L_OK = 0, L_MALFORMED, L_MISSING, L_FATAL };

typedef struct {
    int state;
    int64_t seq;
    /* input (reader) */
    char *text;
    size_t n_text, n_text_capacity;
    int64_t *line_off, *line_len, *line_no;
    uint64_t *bytes_after;          /* input bytes consumed after each line */
    int n_lines, n_line_capacity;
    int64_t lines_end;              /* line count after this batch (blank lines included) */
    uint64_t bytes_end;
    int last;                       /* no batch follows */
    mt_status read_status;          /* a read failure after the lines of this batch */
    /* output (worker) */
    int8_t *line_status;            /* L_* */
    int32_t *missing_key;           /* L_MISSING: which key; L_FATAL: the mt_status */
    int64_t *n_ids;                 /* [n_lines * n_keys] */
    mt_token_buf ids;               /* all documents of the batch back to back */
    mt_byte_buf msgs;               /* messages of L_MALFORMED / L_FATAL lines, NUL-separated */
    int64_t *msg_off;               /* [n_lines] */
} batch;

typedef struct {
    const mt_preprocess_job *job;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_work, cv_done;
    batch *batches;
    int n_batches;
    int *queue;                     /* FIFO of queued batch indices */
    int q_head, q_count;
    atomic_int cancel;              /* the writer stopped: everyone leaves */
    int reader_done;
    char read_msg[1024];            /* message of the reader's failure */
    mt_tokenizer **toks;            /* [n_workers] clones */
} pipeline;

/* ---- batches -------------------------------------------------------------------------- */

static void batch_free(batch *b) {
    free(b->text);
    free(b->line_off);
    free(b->line_len);
    free(b->line_no);
    free(b->bytes_after);
    free(b->line_status);
    free(b->missing_key);
    free(b->n_ids);
    free(b->msg_off);
    mt_token_buf_free(&b->ids);
    mt_byte_buf_free(&b->msgs);
}

static int batch_add_line(batch *b, const char *s, size_t n, int64_t line_no, uint64_t bytes,
                          int n_keys) {
    if (b->n_lines == b->n_line_capacity) {
        int cap = b->n_line_capacity ? 2 * b->n_line_capacity : 256;
        int64_t *o = realloc(b->line_off, (size_t)cap * sizeof *o);
        if (o) b->line_off = o;
        int64_t *l = realloc(b->line_len, (size_t)cap * sizeof *l);
        if (l) b->line_len = l;
        int64_t *no = realloc(b->line_no, (size_t)cap * sizeof *no);
        if (no) b->line_no = no;
        uint64_t *ba = realloc(b->bytes_after, (size_t)cap * sizeof *ba);
        if (ba) b->bytes_after = ba;
        int8_t *ls = realloc(b->line_status, (size_t)cap);
        if (ls) b->line_status = ls;
        int32_t *mk = realloc(b->missing_key, (size_t)cap * sizeof *mk);
        if (mk) b->missing_key = mk;
        int64_t *ni = realloc(b->n_ids, (size_t)cap * (size_t)n_keys * sizeof *ni);
        if (ni) b->n_ids = ni;
        int64_t *mo = realloc(b->msg_off, (size_t)cap * sizeof *mo);
        if (mo) b->msg_off = mo;
        if (!o || !l || !no || !ba || !ls || !mk || !ni || !mo) return 0;
        b->n_line_capacity = cap;
    }
    if (b->n_text + n + 1 > b->n_text_capacity) {
        size_t cap = b->n_text_capacity ? b->n_text_capacity : BATCH_TEXT_BYTES;
        while (cap < b->n_text + n + 1) cap *= 2;
        char *t = realloc(b->text, cap);
        if (!t) return 0;
        b->text = t;
        b->n_text_capacity = cap;
    }
    memcpy(b->text + b->n_text, s, n);
    b->text[b->n_text + n] = 0;
    b->line_off[b->n_lines] = (int64_t)b->n_text;
    b->line_len[b->n_lines] = (int64_t)n;
    b->line_no[b->n_lines] = line_no;
    b->bytes_after[b->n_lines] = bytes;
    b->n_lines++;
    b->n_text += n + 1;
    return 1;
}

/* ---- reader thread -------------------------------------------------------------------- */

/* Takes a free batch (blocks); NULL when cancelled. Caller holds no lock. */
static batch *take_free(pipeline *p) {
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (atomic_load(&p->cancel)) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        for (int i = 0; i < p->n_batches; i++) {
            if (p->batches[i].state == B_FREE) {
                p->batches[i].state = B_FILLING;
                pthread_mutex_unlock(&p->mu);
                return &p->batches[i];
            }
        }
        pthread_cond_wait(&p->cv_free, &p->mu);
    }
}

static void enqueue(pipeline *p, batch *b) {
    pthread_mutex_lock(&p->mu);
    b->state = B_QUEUED;
    p->queue[(p->q_head + p->q_count) % p->n_batches] = (int)(b - p->batches);
    p->q_count++;
    pthread_cond_signal(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

static void *reader_main(void *arg) {
    pipeline *p = arg;
    mt_jsonl_reader *r = p->job->reader;
    int n_keys = p->job->n_keys;
    int64_t seq = 0;
    batch *b = NULL;
    for (;;) {
        if (!b) {
            b = take_free(p);
            if (!b) break;
            b->seq = seq++;
            b->n_text = 0;
            b->n_lines = 0;
            b->last = 0;
            b->read_status = MT_OK;
        }
        errno = 0;
        ssize_t got = getline(&r->line, &r->n_line_capacity, r->f);
        int end = got < 0;
        if (end && ferror(r->f)) {
            b->read_status = mt_errorf(MT_ERR_IO, "%s: read failed after line %lld: %s",
                                       r->path, (long long)r->line_number,
                                       strerror(errno ? errno : EIO));
            snprintf(p->read_msg, sizeof p->read_msg, "%s", mt_last_error());
        }
        if (!end) {
            r->line_number++;
            r->n_bytes_read += (uint64_t)got;
            size_t n = (size_t)got;
            if (n && r->line[n - 1] == '\n') n--;
            size_t i = 0;
            while (i < n && (r->line[i] == ' ' || r->line[i] == '\t' || r->line[i] == '\r')) i++;
            if (i < n && !batch_add_line(b, r->line, n, r->line_number, r->n_bytes_read, n_keys)) {
                b->read_status = mt_errorf(MT_ERR_OOM, "%s:%lld: out of memory holding the line",
                                           r->path, (long long)r->line_number);
                snprintf(p->read_msg, sizeof p->read_msg, "%s", mt_last_error());
                end = 1;
            }
        }
        b->lines_end = r->line_number;
        b->bytes_end = r->n_bytes_read;
        if (!end && atomic_load(&p->cancel)) {
            /* the writer stopped: hand the batch back unread */
            pthread_mutex_lock(&p->mu);
            b->state = B_FREE;
            pthread_mutex_unlock(&p->mu);
            break;
        }
        if (end) {
            b->last = 1;
            enqueue(p, b);
            break;
        }
        if (b->n_text >= BATCH_TEXT_BYTES || b->n_lines >= BATCH_MAX_LINES) {
            enqueue(p, b);
            b = NULL;
        }
    }
    pthread_mutex_lock(&p->mu);
    p->reader_done = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- encoder threads ------------------------------------------------------------------ */

typedef struct {
    pipeline *p;
    int index;
} worker_arg;

static void put_msg(batch *b, int l, const char *msg) {
    b->msg_off[l] = (int64_t)b->msgs.n_bytes;
    if (mt_byte_buf_append(&b->msgs, msg, strlen(msg) + 1) != MT_OK) b->msg_off[l] = -1;
}

static void encode_batch(pipeline *p, batch *b, mt_tokenizer *tok, mt_json_parser *parser,
                         mt_json_string *values) {
    const mt_preprocess_job *job = p->job;
    int n_keys = job->n_keys;
    b->ids.n_ids = 0;
    b->msgs.n_bytes = 0;
    for (int l = 0; l < b->n_lines; l++) {
        b->line_status[l] = L_OK;
        b->msg_off[l] = -1;
        const char *s = b->text + b->line_off[l];
        /* Without a parser of its own (it could not be allocated) a one-off one per line. */
        mt_status st = parser ? mt_json_extract_strings_with(parser, s, (size_t)b->line_len[l],
                                                             job->keys, n_keys, values)
                              : mt_json_extract_strings(s, (size_t)b->line_len[l], job->keys,
                                                        n_keys, values);
        if (st != MT_OK) {
            mt_error_context(st, "%s:%lld: ", job->reader->path, (long long)b->line_no[l]);
            b->line_status[l] = st == MT_ERR_DATA ? L_MALFORMED : L_FATAL;
            b->missing_key[l] = (int32_t)st;
            put_msg(b, l, mt_last_error());
            continue;
        }
        int missing = -1;
        for (int k = 0; k < n_keys && missing < 0; k++) {
            if (!values[k].found) missing = k;
        }
        if (missing >= 0) {
            b->line_status[l] = L_MISSING;
            b->missing_key[l] = missing;
            continue;
        }
        for (int k = 0; k < n_keys; k++) {
            int64_t before = b->ids.n_ids;
            st = mt_tokenizer_encode(tok, values[k].bytes ? values[k].bytes : "",
                                     values[k].n_bytes, &b->ids);
            if (st == MT_OK && b->ids.n_ids > before && job->opt->append_eod) {
                st = mt_token_buf_push(&b->ids, mt_tokenizer_eod(tok));
            }
            if (st != MT_OK) {
                b->line_status[l] = L_FATAL;
                b->missing_key[l] = (int32_t)st;
                put_msg(b, l, mt_last_error());
                b->ids.n_ids = before;
                break;
            }
            b->n_ids[(size_t)l * (size_t)n_keys + (size_t)k] = b->ids.n_ids - before;
        }
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    pipeline *p = wa->p;
    mt_json_string values[MT_PREPROCESS_MAX_KEYS];
    memset(values, 0, sizeof values);
    mt_json_parser *parser = NULL;
    if (mt_json_parser_new(&parser, MT_JSONL_PARSER_FLAGS) != MT_OK) parser = NULL;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!atomic_load(&p->cancel) && p->q_count == 0 && !p->reader_done) {
            pthread_cond_wait(&p->cv_work, &p->mu);
        }
        if (atomic_load(&p->cancel) || p->q_count == 0) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        batch *b = &p->batches[p->queue[p->q_head]];
        p->q_head = (p->q_head + 1) % p->n_batches;
        p->q_count--;
        b->state = B_WORKING;
        pthread_mutex_unlock(&p->mu);

        encode_batch(p, b, p->toks[wa->index], parser, values);

        pthread_mutex_lock(&p->mu);
        b->state = B_DONE;
        pthread_cond_broadcast(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
    for (int k = 0; k < MT_PREPROCESS_MAX_KEYS; k++) mt_json_string_free(&values[k]);
    mt_json_parser_free(parser);
    return NULL;
}

/* ---- writer (this thread) ------------------------------------------------------------- */

/* Writes batch b's lines in order, deciding exactly as the one-thread loop does. */
static mt_status write_batch(const pipeline *p, const batch *b, double *t_last) {
    const mt_preprocess_job *job = p->job;
    const mt_preprocess_options *opt = job->opt;
    mt_preprocess_stats *stats = job->stats;
    int n_keys = job->n_keys;
    double interval = opt->progress_interval_s > 0 ? opt->progress_interval_s : 1.0;
    int64_t at = 0;
    for (int l = 0; l < b->n_lines; l++) {
        stats->n_lines = b->line_no[l];
        stats->n_input_bytes = b->bytes_after[l];
        const int64_t *n_ids = b->n_ids + (size_t)l * (size_t)n_keys;
        const char *msg = b->msg_off[l] >= 0 ? b->msgs.bytes + b->msg_off[l] : "out of memory";
        switch (b->line_status[l]) {
        case L_MALFORMED:
            mt_errorf(MT_ERR_DATA, "%s", msg);
            if (!opt->skip_bad_lines) return MT_ERR_DATA;
            stats->n_skipped_malformed++;
            mt_preprocess_note_skip(stats);
            continue;
        case L_MISSING: {
            mt_status mst = mt_errorf(MT_ERR_DATA,
                                      "%s:%lld: no string key \"%s\" in this line (choose the "
                                      "key with --json-keys)", job->reader->path,
                                      (long long)b->line_no[l], job->keys[b->missing_key[l]]);
            if (!opt->skip_bad_lines) return mst;
            stats->n_skipped_missing++;
            mt_preprocess_note_skip(stats);
            continue;
        }
        case L_FATAL:
            return mt_errorf((mt_status)b->missing_key[l], "%s", msg);
        }
        for (int k = 0; k < n_keys; k++) {
            if (n_ids[k] == 0) stats->n_empty++;
            mt_status st = mt_indexed_writer_add_document(&job->writers[k], b->ids.ids + at,
                                                          n_ids[k]);
            if (st != MT_OK) {
                return mt_error_context(st, "%s:%lld: ", job->reader->path,
                                        (long long)b->line_no[l]);
            }
            at += n_ids[k];
            stats->n_tokens += n_ids[k];
        }
        stats->n_documents++;
        double t = mt_preprocess_now_s();
        if (opt->progress && t - *t_last >= interval) {
            *t_last = t;
            stats->seconds = t - job->t0;
            opt->progress(stats, 0, opt->progress_user);
        }
    }
    stats->n_lines = b->lines_end;
    stats->n_input_bytes = b->bytes_end;
    if (b->read_status != MT_OK) return mt_errorf(b->read_status, "%s", p->read_msg);
    return MT_OK;
}

mt_status mt_preprocess_pipeline(const mt_preprocess_job *job) {
    mt_status st = MT_OK;
    int n_workers = job->opt->n_workers;
    pipeline p;
    memset(&p, 0, sizeof p);
    p.job = job;
    p.n_batches = 2 * n_workers + 2;
    p.batches = calloc((size_t)p.n_batches, sizeof *p.batches);
    p.queue = calloc((size_t)p.n_batches, sizeof *p.queue);
    p.toks = calloc((size_t)n_workers, sizeof *p.toks);
    worker_arg *args = calloc((size_t)n_workers, sizeof *args);
    pthread_t *threads = calloc((size_t)n_workers, sizeof *threads);
    pthread_t reader;
    int n_started = 0, reader_started = 0;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv_free, NULL);
    pthread_cond_init(&p.cv_work, NULL);
    pthread_cond_init(&p.cv_done, NULL);
    if (!p.batches || !p.queue || !p.toks || !args || !threads) {
        st = mt_errorf(MT_ERR_OOM, "preprocess: out of memory starting %d workers", n_workers);
        goto out;
    }
    for (int w = 0; w < n_workers; w++) MT_CHECK(mt_tokenizer_clone(job->tok, &p.toks[w]));
    if (pthread_create(&reader, NULL, reader_main, &p) != 0) {
        st = mt_errorf(MT_ERR_OOM, "preprocess: cannot start the reader thread");
        goto out;
    }
    reader_started = 1;
    for (int w = 0; w < n_workers; w++) {
        args[w].p = &p;
        args[w].index = w;
        if (pthread_create(&threads[w], NULL, worker_main, &args[w]) != 0) {
            st = mt_errorf(MT_ERR_OOM, "preprocess: cannot start encoder thread %d", w);
            goto out;
        }
        n_started++;
    }
    double t_last = job->t0;
    for (int64_t next = 0;; next++) {
        batch *b = NULL;
        pthread_mutex_lock(&p.mu);
        while (!b) {
            for (int i = 0; i < p.n_batches && !b; i++) {
                if (p.batches[i].state == B_DONE && p.batches[i].seq == next) b = &p.batches[i];
            }
            if (!b) pthread_cond_wait(&p.cv_done, &p.mu);
        }
        pthread_mutex_unlock(&p.mu);
        st = write_batch(&p, b, &t_last);
        int last = b->last;
        pthread_mutex_lock(&p.mu);
        b->state = B_FREE;
        pthread_cond_signal(&p.cv_free);
        pthread_mutex_unlock(&p.mu);
        if (st != MT_OK || last) break;
    }
out:
    if (st != MT_OK) {
        char msg[4096];
        snprintf(msg, sizeof msg, "%s", mt_last_error());
        pthread_mutex_lock(&p.mu);
        atomic_store(&p.cancel, 1);
        pthread_cond_broadcast(&p.cv_free);
        pthread_cond_broadcast(&p.cv_work);
        pthread_mutex_unlock(&p.mu);
        mt_errorf(st, "%s", msg);
    }
    /* The reader may be blocked in getline on a pipe: it stops after that line. */
    if (reader_started) pthread_join(reader, NULL);
    for (int w = 0; w < n_started; w++) pthread_join(threads[w], NULL);
    if (p.batches) {
        for (int i = 0; i < p.n_batches; i++) batch_free(&p.batches[i]);
    }
    if (p.toks) {
        for (int w = 0; w < n_workers; w++) mt_tokenizer_free(p.toks[w]);
    }
    free(p.batches);
    free(p.queue);
    free(p.toks);
    free(args);
    free(threads);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv_free);
    pthread_cond_destroy(&p.cv_work);
    pthread_cond_destroy(&p.cv_done);
    return st;
}
